"""Synthetic data of paper 000 (Table 1) and the Italy-scale generator.

Oracles: the paper's Table 1 (O/D counts and users), the authors' own regenerated files in
shared/reference/inftda beside the repository (exact equality, row by row), and structural invariants.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.common import inftda_reference_dir
from hierdp.datasets.flows import (
    binary_partition,
    italy_like_od,
    random_partition,
    synthetic_od,
)

REFERENCE = inftda_reference_dir()

# Table 1 of paper 000 (random dense: the paper prints 95,612, a typo for floor(189,225 / 2)).
TABLE_1 = {
    ("binary", "complete"): (65_536, 1_051_271),
    ("binary", "dense"): (32_768, 734_688),
    ("binary", "sparse"): (655, 23_302),
    ("random", "complete"): (189_225, 2_019_580),
    ("random", "dense"): (94_612, 1_003_943),
    ("random", "sparse"): (1_892, 67_840),
}
ZERO_PROBABILITY = {"complete": 0.0, "dense": 0.5, "sparse": 0.99}


@pytest.fixture(scope="module")
def partitions():
    return {"binary": binary_partition(8), "random": random_partition(4, 10, 42)}


def test_nodes_per_level(partitions):
    assert partitions["binary"].nodes_per_level() == [2**k for k in range(9)]
    assert partitions["random"].nodes_per_level() == [1, 3, 13, 74, 435]


def test_partition_is_nested(partitions):
    # Each area has exactly one parent: the map child id -> parent id is a function per level.
    for part in partitions.values():
        for k in range(1, part.depth + 1):
            pairs = np.unique(part.paths[:, [k, k - 1]], axis=0)
            assert np.unique(pairs[:, 0]).size == pairs.shape[0]


@pytest.mark.parametrize("kind,density", list(TABLE_1))
def test_table_1_counts(partitions, kind, density):
    data = synthetic_od(partitions[kind], ZERO_PROBABILITY[density])
    n_pairs, users = TABLE_1[(kind, density)]
    trips = data.trips
    assert len(trips) == n_pairs
    assert int(trips["count"].sum()) == users
    assert not trips.duplicated(["origin", "destination"]).any()
    assert trips["count"].between(1, 1000).all() and trips["count"].max() == 1000


@pytest.mark.parametrize("kind", ["binary", "random"])
@pytest.mark.parametrize("density", ["sparse", "dense"])
def test_equals_authors_files(partitions, kind, density):
    """Same RNG streams as the authors: every row (pair, order and flow) equals their file."""
    path = REFERENCE / f"synthetic_{kind}_{density}" / "data.csv.gz"
    if not path.exists():
        pytest.skip(f"reference file {path} not available")
    ours = synthetic_od(partitions[kind], ZERO_PROBABILITY[density]).level_frame()
    ref = pd.read_csv(path)
    assert list(ours.columns) == list(ref.columns)
    np.testing.assert_array_equal(ours.to_numpy(), ref.to_numpy())


def test_bad_input():
    with pytest.raises(ValueError, match="zero_probability"):
        synthetic_od(binary_partition(2), 1.0)
    with pytest.raises(ValueError, match="depth"):
        binary_partition(0)
    with pytest.raises(ValueError, match="n_pairs"):
        italy_like_od(2, 3, 5, n_pairs=26, n_trips=100)


def test_italy_like_small():
    trips, geo = italy_like_od(4, 12, 300, n_pairs=5_000, n_trips=200_000, seed=1)
    assert len(trips) == 5_000 and int(trips["count"].sum()) == 200_000
    assert (trips["count"] >= 1).all()
    assert not trips.duplicated(["origin", "destination"]).any()
    assert geo["municipality"].is_unique
    assert geo.groupby("province")["region"].nunique().max() == 1  # nested
    assert (geo["region"].nunique(), geo["province"].nunique()) == (4, 12)
    assert set(trips["origin"]) | set(trips["destination"]) <= set(geo["municipality"])
    # Locality: most trips stay inside the origin's province.
    prov = geo.set_index("municipality")["province"]
    same = prov.loc[trips["origin"]].to_numpy() == prov.loc[trips["destination"]].to_numpy()
    assert trips["count"][same].sum() > 0.5 * trips["count"].sum()
    # Same seed, same data.
    again, _ = italy_like_od(4, 12, 300, n_pairs=5_000, n_trips=200_000, seed=1)
    pd.testing.assert_frame_equal(trips, again)
