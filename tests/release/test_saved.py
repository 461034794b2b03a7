"""``release.save(path)`` / ``hierdp.load_release(path)`` round-trip every release type with its
accounting, in every table format (issue 20, item 4); the exact JSON encoding; atomic writes.

Oracles: the release objects themselves (``==`` compares table, accounting, parameters and
structure exactly; the guarantees are recomputed from the loaded accounting and compared with the
original's), the files read with pandas / json / pyarrow, and SHA-256."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import hierdp
from hierdp.mechanisms import create
from hierdp.privacy import Budget
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import Accounting, ReleaseFileError
from hierdp.release.encoding import decode, encode
from mechanisms.test_contract import CASES  # every registered mechanism, with its data (tests/ is on the path)

FORMATS = [".parquet", ".csv", ".csv.gz"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_release_type_round_trips_with_its_accounting(name: str, tmp_path: Path) -> None:
    params, data, _ = CASES[name]
    rel = create(name, **params()).release(data(), seed=0)
    for fmt in FORMATS:
        path = tmp_path / f"{name}{fmt}"
        side = rel.save(path)
        assert side == tmp_path / f"{name}{fmt}.accounting.json" and side.is_file()
        back = hierdp.load_release(path)
        assert type(back) is type(rel) and back == rel, fmt
        assert back.accounting == rel.accounting and back.guarantee == rel.guarantee
        assert back.accounting.guarantees == rel.accounting.guarantees  # recomputed from the loaded fields
        assert back.check_consistency() == rel.check_consistency() == []
        assert back.to_frame().equals(rel.to_frame())
        with pytest.raises(FileExistsError):
            rel.save(path)
        rel.save(path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{name}{f}" for f in FORMATS] + [f"{name}{f}.accounting.json" for f in FORMATS])  # nothing partial


def test_releases_differ_when_their_values_or_accounting_do() -> None:
    params, data, _ = CASES["inftda"]
    a = create("inftda", **params()).release(data(), seed=0)
    b = create("inftda", **params()).release(data(), seed=0)
    c = create("inftda", **params()).release(data(), seed=1)
    assert a == b and a != c  # seed 1: other values, another recorded seed
    d = create("inftda", epsilon=2.0, delta=1e-8).release(data(), seed=0)
    assert a != d


def test_a_full_domain_tree_release_round_trips(tmp_path: Path) -> None:
    import pandas as pd

    from hierdp.hierarchy import Hierarchy

    domain = pd.DataFrame({"region": ["N", "N", "N", "S"], "city": ["Biel/Bienne", "Turin", "Capri", "Bolzano/Bozen"]})
    rows = domain.iloc[[0, 1, 3]].assign(people=[5, 9, 7])
    tree = Hierarchy.from_frame(rows, levels=["region", "city"], count="people", domain=domain)
    rel = create("inftda", epsilon=1.0, delta=1e-8).release(tree, seed=0)
    full = rel.with_domain(tree)
    assert full.n_nodes == tree.n and len(full.to_frame()) == tree.n  # zeros included
    for fmt in FORMATS:
        full.save(tmp_path / f"f{fmt}")
        assert hierdp.load_release(tmp_path / f"f{fmt}") == full


def test_a_parquet_file_carries_its_accounting_inside(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    params, data, _ = CASES["safetab"]
    rel = create("safetab", **params()).release(data(), seed=0)
    rel.save(tmp_path / "t.parquet")
    inside = json.loads(pq.read_schema(tmp_path / "t.parquet").metadata[b"hierdp.release"])
    assert Accounting.from_dict(inside["accounting"]) == rel.accounting
    (tmp_path / "t.parquet.accounting.json").unlink()
    assert hierdp.load_release(tmp_path / "t.parquet") == rel


def test_foreign_or_edited_files_are_refused(tmp_path: Path) -> None:
    params, data, _ = CASES["pgsr_mdp"]
    rel = create("pgsr_mdp", **params()).release(data(), seed=0)
    side = rel.save(tmp_path / "g.csv")
    doc = json.loads(side.read_text())
    with open(tmp_path / "g.csv", "a") as fh:
        fh.write("\n")
    with pytest.raises(ReleaseFileError, match="SHA-256"):
        hierdp.load_release(tmp_path / "g.csv")
    rel.save(tmp_path / "g.csv", overwrite=True)
    doc = json.loads(side.read_text())
    doc["release"]["type"] = "os:system"
    side.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not a hierdp class"):
        hierdp.load_release(tmp_path / "g.csv")
    doc["version"] = 99
    side.write_text(json.dumps(doc))
    with pytest.raises(ReleaseFileError, match="version"):
        hierdp.load_release(tmp_path / "g.csv")
    with pytest.raises(ReleaseFileError, match=r"\.csv, \.csv\.gz, \.parquet"):
        rel.save(tmp_path / "g.txt")


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    params, data, _ = CASES["inftda"]
    rel = create("inftda", **params()).release(data(), seed=0)
    import hierdp.release.saved as saved

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(saved, "_sha256", boom)
    with pytest.raises(KeyboardInterrupt):
        rel.save(tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [
    None, True, 3, -(2**80), 2**128 - 1, 0.1, math.inf, -math.inf, "Biel/Bienne", Fraction(1, 3),
    Budget.zcdp(0.25), Budget.pure(Fraction(1, 7)), Budget.approx(1.0, 1e-9), PrivacyUnit(False, 3, True),
    (1, (2, "x")), [1, [2]], {"a": (1, 2), "$b": 3}, {(1, 2): "pair", 3: "int"},
    np.arange(6, dtype=np.int64).reshape(2, 3), np.array(["a", "b"], dtype=object), np.float64(2.5), np.int32(4),
])
def test_the_json_encoding_is_exact(value) -> None:
    text = json.dumps(encode(value))  # plain JSON
    back = decode(json.loads(text))
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert back == value and type(back) is type(value.item() if isinstance(value, np.generic) else value)


def test_nan_and_unsupported_values() -> None:
    assert math.isnan(decode(json.loads(json.dumps(encode(float("nan"))))))
    with pytest.raises(TypeError, match="cannot write"):
        encode(object())


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_table_with_intervals_states_them_in_its_accounting_and_reads_back(fmt: str, tmp_path: Path) -> None:
    """``release.save(path, frame=release.intervals(0.9))``: the table holds the interval columns as
    computed, the document (and Parquet metadata) states the method, and the release reads back
    equal (the interval columns are extra columns of the table, not part of the release)."""
    import pandas as pd
    import pyarrow.parquet as pq

    edges = [("R", "A"), ("R", "B")] + [(p, f"{p}{i}") for p in "AB" for i in range(3)]
    tree = hierdp.Hierarchy.from_edges(edges, counts={f"{p}{i}": 30 + 11 * i for p in "AB" for i in range(3)})
    rel = create("inftda", epsilon=1.0, delta=1e-8).release(tree, seed=0)
    frame = rel.intervals(0.9, domain=tree, draws=20, seed=3)
    side = rel.save(tmp_path / f"r{fmt}", frame=frame)
    doc = json.loads(side.read_text())
    assert doc["intervals"] == {**frame.attrs["intervals"]}
    assert doc["intervals"]["privacy"].startswith("post-processing") and doc["intervals"]["level"] == 0.9
    table = pd.read_parquet(tmp_path / f"r{fmt}") if fmt == ".parquet" else pd.read_csv(tmp_path / f"r{fmt}")
    assert list(table["lower"]) == list(frame["lower"]) and list(table["upper"]) == list(frame["upper"])
    if fmt == ".parquet":
        inside = json.loads(pq.read_schema(tmp_path / f"r{fmt}").metadata[b"hierdp.release"])
        assert inside["intervals"] == doc["intervals"]
    assert hierdp.load_release(tmp_path / f"r{fmt}") == rel
