"""O/D trees (paper 000 §3): implicit expansion vs a brute-force dense enumeration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.common import inftda_reference_dir
from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.errors import CountError, HierarchyError, UnknownColumnError, UnknownNodeError
from hierdp.hierarchy.od import Geography, ODTree
from hierdp.hierarchy.topdown_tree import HierarchyTree

REF = inftda_reference_dir()


def _random_geo(rng: np.random.Generator, g: int, max_fan: int, prefix: str) -> pd.DataFrame:
    """Nested partition with g levels and fan-out 1..max_fan, as a frame of level columns."""
    paths = [[]]
    for lev in range(g):
        new = []
        for p in paths:
            # top level: at least 2 areas (a single-valued first column is the whole space)
            for k in range(int(rng.integers(2 if lev == 0 else 1, max_fan + 1))):
                new.append([*p, f"{prefix}{lev}_{'.'.join(p[-1:])}{k}"])
        paths = new
    return pd.DataFrame(paths, columns=[f"L{i + 1}" for i in range(g)])


def _brute_levels(geo_o: pd.DataFrame, geo_d: pd.DataFrame, trips: pd.DataFrame, kind: str) -> list[dict]:
    """Dense enumeration: for each tree level, {(orig area path, dest area path): count} over ALL pairs."""
    g = geo_o.shape[1]
    cols = list(geo_o.columns)

    def areas(geo: pd.DataFrame, lev: int) -> list[tuple]:
        if lev == 0:
            return [()]
        return sorted(set(tuple(r) for r in geo[cols[:lev]].itertuples(index=False)))

    def anc(geo: pd.DataFrame, leaf: str, lev: int) -> tuple:
        row = geo[geo[cols[-1]] == leaf].iloc[0]
        return tuple(row[cols[:lev]])

    out = []
    for L in range(2 * g + 1):
        a, b = (L // 2, (L + 1) // 2) if kind == "destination" else ((L + 1) // 2, L // 2)
        table = {(u, v): 0 for u in areas(geo_o, a) for v in areas(geo_d, b)}
        for o, d in zip(trips["o"], trips["d"], strict=False):
            table[(anc(geo_o, o, a), anc(geo_d, d, b))] += 1
        out.append(table)
    return out


def _path_of(geo: Geography, lev: int, idx: np.ndarray) -> list[tuple]:
    """Path (labels from level 1) of areas at ``lev``."""
    res = []
    for i in idx:
        p = []
        j = int(i)
        for lv in range(lev, 0, -1):
            p.append(str(geo.names[lv][j]))
            j = int(geo.parent[lv][j])
        res.append(tuple(reversed(p)))
    return res


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), g=st.integers(1, 3), kind=st.sampled_from(["destination", "origin"]),
       same=st.booleans())
def test_expand_matches_dense_enumeration(seed: int, g: int, kind: str, same: bool) -> None:
    rng = np.random.default_rng(seed)
    geo_o = _random_geo(rng, g, 3, "o")
    geo_d = geo_o if same else _random_geo(rng, g, 3, "d")
    n = int(rng.integers(1, 30))
    trips = pd.DataFrame({"o": rng.choice(geo_o.iloc[:, -1], n), "d": rng.choice(geo_d.iloc[:, -1], n)})
    tree = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo_o,
                             destination_geo=None if same else geo_d, kind=kind)
    brute = _brute_levels(geo_o, geo_d, trips, kind)
    assert tree.n_levels == 2 * g + 1
    assert tree.root_count == n
    keys = np.array([tree.root_key])
    for L in range(tree.n_levels):
        a, b = tree.level_pairs[L]
        o, d = np.divmod(keys, tree.destination_geo.sizes[b])
        got = dict(zip(zip(_path_of(tree.origin_geo, a, o), _path_of(tree.destination_geo, b, d), strict=False),
                       tree.counts(L, keys), strict=False))
        # every potential pair appears exactly once (zero pairs included), with the right count
        assert len(got) == len(keys) == len(brute[L]) == tree.level_size(L)
        assert got == brute[L]
        nz_keys, nz_counts = tree.nonzero(L)
        assert int(nz_counts.sum()) == n and np.all(np.diff(nz_keys) > 0)
        if tree.n_levels > L + 1:
            ck, off, cc = tree.expand(L, keys)
            assert off[0] == 0 and off[-1] == ck.size
            # children sum to parents; parent_of inverts expand
            assert np.array_equal(np.add.reduceat(cc, off[:-1]) if ck.size else cc, tree.counts(L, keys))
            assert np.array_equal(tree.parent_of(L + 1, ck), np.repeat(keys, np.diff(off)))
            # step L -> L+1 refines the destination first in the destination tree
            _a2, b2 = tree.level_pairs[L + 1]
            refined = "d" if b2 > b else "o"
            assert refined == ("d" if (L % 2 == 0) == (kind == "destination") else "o")
            keys = ck


def test_destination_tree_level_semantics() -> None:
    geo = pd.DataFrame({"reg": ["A", "A", "B"], "mun": ["a1", "a2", "b1"]})
    trips = pd.DataFrame({"o": ["a1", "a1", "b1"], "d": ["b1", "a2", "b1"]})
    tree = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    # level 1: total -> region of destination; level 2: region -> region; ...
    assert tree.level_names == ["total->total", "total->reg", "reg->reg", "reg->mun", "mun->mun"]
    k, c = tree.nonzero(1)
    assert dict(zip(tree.key_names(1, k), c, strict=False)) == {"total->A": 1, "total->B": 2}
    k, c = tree.nonzero(3)
    assert dict(zip(tree.key_names(3, k), c, strict=False)) == {"A->a2": 1, "A->b1": 1, "B->b1": 1}
    origin = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo, kind="origin")
    assert origin.level_names[1] == "reg->total"
    k, c = origin.nonzero(1)
    assert dict(zip(origin.key_names(1, k), c, strict=False)) == {"A->total": 2, "B->total": 1}


def test_count_column_and_hierarchy_geography() -> None:
    geo = pd.DataFrame({"reg": ["A", "A", "B"], "mun": ["a1", "a2", "b1"]})
    h = Hierarchy.from_frame(geo, levels=["reg", "mun"])
    pairs = pd.DataFrame({"o": ["a1", "b1"], "d": ["a2", "a1"], "n": [5, 2]})
    t1 = ODTree.from_trips(pairs, origin="o", destination="d", count="n", origin_geo=h)
    t2 = ODTree.from_trips(pairs, origin="o", destination="d", count="n", origin_geo=geo)
    assert t1.root_count == 7
    for L in range(t1.n_levels):
        assert np.array_equal(t1.nonzero(L)[0], t2.nonzero(L)[0])
        assert np.array_equal(t1.nonzero(L)[1], t2.nonzero(L)[1])


def test_bad_input_is_refused() -> None:
    geo = pd.DataFrame({"reg": ["A", "A", "B"], "mun": ["a1", "a2", "b1"]})
    trips = pd.DataFrame({"o": ["a1"], "d": ["zz"], "n": [1]})
    with pytest.raises(UnknownNodeError, match="row 0 names an area"):
        ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    with pytest.raises(UnknownColumnError, match="nope"):
        ODTree.from_trips(trips, origin="nope", destination="d", origin_geo=geo)
    bad = pd.DataFrame({"o": ["a1", "a2"], "d": ["a2", "b1"], "n": [1, -3]})
    with pytest.raises(CountError, match="negative"):
        ODTree.from_trips(bad, origin="o", destination="d", count="n", origin_geo=geo)
    frac = pd.DataFrame({"o": ["a1"], "d": ["a2"], "n": [1.5]})
    with pytest.raises(CountError, match="non-integer"):
        ODTree.from_trips(frac, origin="o", destination="d", count="n", origin_geo=geo)
    dup = pd.DataFrame({"reg": ["A", "B"], "mun": ["x", "x"]})
    with pytest.raises(HierarchyError, match="x"):
        ODTree.from_trips(pd.DataFrame({"o": ["x"], "d": ["x"]}), origin="o", destination="d", origin_geo=dup)
    with pytest.raises(UnknownColumnError):
        ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo, geo_levels=["reg", "commune"])


def test_large_sparse_universe_stays_small() -> None:
    """10^8 potential finest pairs, 10^5 non-zero: built from sparse tables only."""
    n_areas = 10_000
    geo = pd.DataFrame({"reg": np.arange(n_areas) // 500, "prov": np.arange(n_areas) // 50, "mun": np.arange(n_areas)})
    rng = np.random.default_rng(1)
    trips = pd.DataFrame({"o": rng.integers(0, n_areas, 100_000), "d": rng.integers(0, n_areas, 100_000)})
    tree = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    assert tree.level_size(tree.n_levels - 1) == 10 ** 8
    assert tree.root_count == 100_000
    table_bytes = sum(k.nbytes + c.nbytes for k, c in zip(tree._keys, tree._counts, strict=False))
    assert table_bytes < 20 * 16 * 100_000  # O(nnz * levels), nowhere near 10^8 entries
    # expanding a few surviving nodes of the last step generates their children only
    k, _ = tree.nonzero(tree.n_levels - 2)
    ck, _off, cc = tree.expand(tree.n_levels - 2, k[:10])
    assert ck.size == 10 * 50 and cc.sum() == tree.counts(tree.n_levels - 2, k[:10]).sum()


@pytest.mark.skipif(not (REF / "synthetic_binary_sparse" / "data.csv.gz").exists(), reason="reference data absent")
def test_reference_level_layout_matches_table1() -> None:
    df = pd.read_csv(REF / "synthetic_binary_sparse" / "data.csv.gz")
    g = 8
    tree = ODTree.from_level_frame(df, origin_levels=[f"LEVEL{i}_ORIG" for i in range(g + 1)],
                                   destination_levels=[f"LEVEL{i}_DEST" for i in range(g + 1)], count="COUNT")
    assert tree.n_levels == 2 * g + 1  # depth T = 16 (paper §5)
    assert tree.root_count == 23_302 and tree.n_nonzero == 655  # Table 1
    # ids are unique only within a level: the frame's own per-level group-bys are the oracle
    for L in range(tree.n_levels):
        a, b = tree.level_pairs[L]
        cols = [f"LEVEL{a}_ORIG", f"LEVEL{b}_DEST"] if (a, b) != (0, 0) else ["LEVEL0_ORIG"]
        truth = np.sort(df.groupby(cols)["COUNT"].sum().to_numpy())
        assert np.array_equal(np.sort(tree.nonzero(L)[1]), truth)


def test_hierarchy_adapter_expand() -> None:
    df = pd.DataFrame({"s": ["A", "A", "B"], "c": ["x", "y", "z"], "n": [3, 0, 4]})
    h = Hierarchy.from_frame(df, levels=["s", "c"], count="n")
    t = HierarchyTree(h)
    assert t.n_levels == 3 and t.root_count == 7
    ck, _off, cc = t.expand(0, np.array([t.root_key]))
    assert list(t.key_names(1, ck)) == ["A", "B"] and list(cc) == [3, 4]
    ck2, off2, cc2 = t.expand(1, ck)
    assert list(cc2) == [3, 0, 4] and list(off2) == [0, 2, 3]
    assert np.array_equal(t.parent_of(2, ck2), np.repeat(ck, np.diff(off2)))


def test_synthetic_generator_geography_with_whole_space_column() -> None:
    """A geography frame whose first column is the whole space (LEVEL0) gives 2g+1 levels, and
    trips + geography build the same tree as the authors' level layout."""
    from hierdp.datasets.flows import binary_partition, synthetic_od

    part = binary_partition(4)
    syn = synthetic_od(part, zero_probability=0.9, seed=3)
    t1 = ODTree.from_trips(syn.trips, origin="origin", destination="destination", count="count",
                           origin_geo=syn.geography)
    assert t1.n_levels == 2 * 4 + 1 and t1.origin_geo.sizes == [1, 2, 4, 8, 16]
    lf = syn.level_frame()
    t2 = ODTree.from_level_frame(lf, origin_levels=[f"LEVEL{i}_ORIG" for i in range(5)],
                                 destination_levels=[f"LEVEL{i}_DEST" for i in range(5)], count="COUNT",
                                 origin_geo=syn.geography)
    assert t2.level_names[2] == "LEVEL1->LEVEL1"
    for L in range(t1.n_levels):
        assert t1.level_size(L) == t2.level_size(L)
        assert np.array_equal(t1.nonzero(L)[0], t2.nonzero(L)[0])
        assert np.array_equal(t1.nonzero(L)[1], t2.nonzero(L)[1])
