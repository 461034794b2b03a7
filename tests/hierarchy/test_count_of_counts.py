"""Count-of-counts hierarchies: histograms against pandas group-bys, the dynamic-programming tree and its chain
against loop-built oracles, and every bad input refused with the culprit named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from experiments.paper001_pgsr.oracles import postorder

from hierdp.datasets.group_sizes import random_count_of_counts
from hierdp.hierarchy.count_of_counts import CountOfCounts, GroupSizeError
from hierdp.hierarchy.errors import EmptyInputError, HierarchyError, UnknownColumnError, UnknownNodeError
from hierdp.privacy.domain import ObservedDomainError

RUNNING = pd.DataFrame({"unit": list("ABCDEF"), "state": ["GA"] * 3 + ["NY"] * 3, "size": [3, 1, 1, 3, 1, 2]})
STATES = pd.DataFrame({"state": ["GA", "NY"]})


def test_running_example_of_the_paper():
    # Table 3 / Example 1: GA = (2, 0, 1), NY = (1, 1, 1), US = (3, 1, 2), G = 6
    c = CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="size", K=3, domain=STATES,
                                 root_name="US")
    f = c.histogram_frame()
    assert f.loc["US"].tolist() == [3, 1, 2]
    assert f.loc["GA"].tolist() == [2, 0, 1]
    assert f.loc["NY"].tolist() == [1, 1, 1]
    assert c.G == 6 and c.n_persons == 11 and c.domain_source == "declared"


def test_units_and_persons_agree_with_groupby():
    rng = np.random.default_rng(3)
    n = 400
    units = pd.DataFrame({"u": [f"u{i}" for i in range(n)], "a": rng.choice(["x", "y", "z"], n),
                          "b": rng.choice(["1", "2"], n), "size": rng.integers(1, 9, n)})
    persons = units.loc[units.index.repeat(units["size"])].drop(columns="size").reset_index(drop=True)
    persons["pid"] = np.arange(len(persons))
    persons = persons.sample(frac=1.0, random_state=1)
    c1 = CountOfCounts.from_units(units, unit="u", levels=["a", "b"], size="size", K=8, observed_domain_public=True)
    c2 = CountOfCounts.from_persons(persons, unit="u", levels=["a", "b"], person="pid", K=8,
                                    observed_domain_public=True)
    assert np.array_equal(c1.h, c2.h)
    leaf = units.groupby(["a", "b", "size"]).size()
    for (a, b, k), cnt in leaf.items():
        assert c1.histogram_frame().loc[f"{a}/{b}", k] == cnt
    top = units.groupby(["a", "size"]).size()
    for (a, k), cnt in top.items():
        assert c1.histogram_frame().loc[a, k] == cnt
    assert n == c1.G and np.array_equal(c1.group_totals, c1.h.sum(axis=1))


def test_dp_tree_parent_levels_and_chain_against_loops():
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = random_count_of_counts(rng, depth=int(rng.integers(1, 4)), max_fanout=3, K=int(rng.integers(1, 5)))
        dp = c.dynprog_tree()
        n, K = c.n_regions, c.K
        rp = [int(x) for x in c.regions.parent]
        par = dp.parent
        vals = dp.values()
        for k in range(1, K + 1):
            for r in range(n):
                node = 1 + (k - 1) * n + r
                assert par[node] == (0 if rp[r] < 0 else 1 + (k - 1) * n + rp[r])
                assert vals[node] == c.h[r, k - 1]
        assert par[0] == -1 and vals[0] == c.G
        po = postorder(rp)
        expect = [1 + (k - 1) * n + r for k in range(1, K + 1) for r in po] + [0]
        assert dp.chain_order().tolist() == expect
        eq = dp.chain_equal_edges()
        for i in range(1, len(expect)):
            assert eq[i - 1] == (par[expect[i - 1]] == expect[i])


def test_k_none_is_observed_and_needs_a_statement():
    c = CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="size", domain=STATES)
    assert c.K == 3 and c.k_source == "observed" and c.domain_source == "observed"
    from hierdp.mechanisms.pgsr import MDynProg

    with pytest.raises(ObservedDomainError, match="K"):
        MDynProg(epsilon=1.0).release(c, seed=0)
    ok = CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="size", domain=STATES,
                                  observed_k_public=True)
    rel = MDynProg(epsilon=1.0).release(ok, seed=0)
    assert "largest group size K" in rel.guarantee


def test_observed_region_domain_needs_a_statement():
    c = CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="size", K=3)
    from hierdp.mechanisms.pgsr import MDynProg

    with pytest.raises(ObservedDomainError, match="region domain"):
        MDynProg(epsilon=1.0).release(c, seed=0)


def test_top_coding_is_opt_in():
    df = RUNNING.assign(size=[3, 1, 1, 9, 1, 2])
    with pytest.raises(GroupSizeError, match=r"K=3 is smaller than an observed size: the unit at row 3 is larger") \
            as err:
        CountOfCounts.from_units(df, unit="unit", levels=["state"], size="size", K=3, domain=STATES)
    assert "'D'" not in str(err.value) and "9" not in str(err.value)  # names the row, not the unit or its size
    with pytest.MonkeyPatch.context() as m:
        m.setenv("HIERDP_SHOW_DATA", "1")
        with pytest.raises(GroupSizeError, match=r"row 3 \(unit 'D' of size 9\)"):
            CountOfCounts.from_units(df, unit="unit", levels=["state"], size="size", K=3, domain=STATES)
    c = CountOfCounts.from_units(df, unit="unit", levels=["state"], size="size", K=3, domain=STATES, top_code=True)
    assert c.h[0].tolist() == [3, 1, 2] and c.top_coded and any("top-coded" in a for a in c.assumptions)


def test_the_top_code_note_follows_the_option_not_the_data():
    """Issue 20, P1: households (1, 2, 3) and (1, 2, 4) with K = 3 and top coding have the same
    histogram; the note used to appear only when some unit exceeded K (one person flips it)."""
    units = pd.DataFrame({"unit": ["a", "b", "c"], "state": ["GA"] * 3})
    built = [CountOfCounts.from_units(units.assign(size=sizes), unit="unit", levels=["state"], size="size", K=3,
                                      domain=STATES, top_code=top) for sizes in ([1, 2, 3], [1, 2, 4])
             for top in (True, False) if top or max(sizes) <= 3]
    with_option = [c for c in built if c.top_coded]
    assert len(with_option) == 2 and with_option[0].assumptions == with_option[1].assumptions
    assert np.array_equal(with_option[0].by_size, with_option[1].by_size)
    plain = [c for c in built if not c.top_coded]
    assert plain and all("top-coded" not in " ".join(c.assumptions) for c in plain)


BAD_UNITS = [
    (RUNNING.assign(state=["GA", "GA", "GA", "NY", "NY", "NY"], unit=list("ABCDEA")), GroupSizeError,
     "rows 0 and 5 put one unit in two regions"),
    (pd.concat([RUNNING, RUNNING.iloc[[0]]]), GroupSizeError, "rows 0 and 0 list the same unit"),
    (RUNNING.assign(size=[3, 0, 1, 3, 1, 2]), GroupSizeError, r"size 0 .* row 1 is not a positive integer"),
    (RUNNING.assign(size=[3, -2, 1, 3, 1, 2]), GroupSizeError, r"size -2 .* not a positive integer"),
    (RUNNING.assign(size=[3, 1.5, 1, 3, 1, 2]), GroupSizeError, r"size 1.5 .* not a positive integer"),
    (RUNNING.assign(size=["3", "x", 1, 3, 1, 2]), GroupSizeError, "non-numeric size 'x'"),
    (RUNNING.assign(size=[3, None, 1, 3, 1, 2]), GroupSizeError, "missing value"),
    (RUNNING.iloc[0:0], EmptyInputError, "no rows"),
    (RUNNING.assign(state=["GA", "GA", "GA", "NY", "NY", "TX"]), UnknownNodeError, "row 5: its path is not in"),
]


@pytest.mark.parametrize("df, err, msg", BAD_UNITS)
def test_bad_unit_frames_are_refused_with_the_culprit(df, err, msg):
    with pytest.raises(err, match=msg):
        CountOfCounts.from_units(df, unit="unit", levels=["state"], size="size", K=3, domain=STATES)


def test_bad_person_frames_and_options():
    p = pd.DataFrame({"pid": [1, 2, 3, 3], "unit": ["A", "A", "B", "C"], "state": ["GA", "GA", "NY", "NY"]})
    with pytest.raises(GroupSizeError, match="rows 2 and 3 put one person in two units"):
        CountOfCounts.from_persons(p, unit="unit", levels=["state"], person="pid", K=3, domain=STATES)
    p2 = pd.DataFrame({"pid": [1, 1], "unit": ["A", "A"], "state": ["GA", "GA"]})
    with pytest.raises(GroupSizeError, match="rows 0 and 1 list the same person twice in one unit"):
        CountOfCounts.from_persons(p2, unit="unit", levels=["state"], person="pid", K=3, domain=STATES)
    p3 = pd.DataFrame({"unit": ["A", "A"], "state": ["GA", "NY"]})
    with pytest.raises(GroupSizeError, match="rows 0 and 1 put one unit in two regions"):
        CountOfCounts.from_persons(p3, unit="unit", levels=["state"], K=3, domain=STATES)
    with pytest.raises(UnknownColumnError, match="'people'"):
        CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="people", K=3)
    for bad_k in (0, -1, 2.5, "3", True):
        with pytest.raises(GroupSizeError, match="K must be a positive integer"):
            CountOfCounts.from_units(RUNNING, unit="unit", levels=["state"], size="size", K=bad_k, domain=STATES)
    assert issubclass(GroupSizeError, HierarchyError)


def test_a_ragged_region_tree_is_refused_before_any_mechanism_sees_it():
    # issue 20, item 13: region 'b' is a leaf at level 1, 'a1' and 'a2' at level 2; a group-size
    # release over it would put b's groups in no region of level 2 (level totals != G)
    from hierdp.hierarchy import Hierarchy

    regions = Hierarchy.from_edges([("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2")],
                                   counts={"b": 1, "a1": 1, "a2": 1})
    hist = np.array([[3, 2, 1], [1, 1, 1], [2, 0, 1]])
    with pytest.raises(GroupSizeError, match=r"ragged: it has leaf regions at level 1 \('level1'\) above the last "
                                             r"level 2"):
        CountOfCounts.from_histograms(regions, hist, K=3)
    with pytest.raises(GroupSizeError, match="ragged"):
        CountOfCounts(regions, np.zeros((3, regions.n), np.int64), K=3)
    # the same regions with b subdivided into itself: accepted, and every level sums to G
    even = Hierarchy.from_edges([("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1")],
                                counts={"b1": 1, "a1": 1, "a2": 1})
    coc = CountOfCounts.from_histograms(even, np.array([[3, 2, 1], [1, 1, 1], [2, 0, 1]]), K=3)
    for level in range(coc.n_levels):
        assert int(coc.by_size[:, coc.level_regions(level)].sum()) == coc.G
