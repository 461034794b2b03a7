"""Spines (paper 003): construction errors, OSED against hand values and exhaustive search, the
Theorem 3 path sums, bypass (Alg. 3) against dense variance matrices, optimized groups (Alg. 2).

Oracles are written here independently of hierdp.spines: path sums walk the parent chain with
Python Fractions; OSED's oracle enumerates every a in {-1, 0, 1}^n; variances are built densely
from each geounit's block set.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from hierdp.spines import (
    Entities,
    Spine,
    SpineError,
    bypass,
    bypass_condition_exact,
    lex_not_worse,
    optimize_block_groups,
    optimize_tract_groups,
    osed,
)


# ---------------------------------------------------------------------------------- helpers (oracles)
def frame_spine(rows, levels, props, root="US"):
    return Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, props, root=root)


def block_sets(spine):
    """Blocks under every geounit, by walking parents (independent of the spine's helpers)."""
    sets = [set() for _ in range(spine.n)]
    for b in spine.blocks:
        u = int(b)
        while u >= 0:
            sets[u].add(int(b))
            u = int(spine.parent[u])
    return sets


def path_sum_oracle(spine):
    out = []
    for b in spine.blocks:
        u, s = int(b), F(0)
        while u >= 0:
            s += F(int(spine.gamma_num[u]), spine.gamma_den)
            u = int(spine.parent[u])
        out.append(s)
    return out


def random_spine(rng, depth=3, max_fan=3, props=None):
    """A random uniform-depth spine: levels root, l1 .. l{depth-1}, block."""
    rows = []
    counter = itertools.count()

    def grow(prefix, lev):
        k = int(rng.integers(1, max_fan + 1))
        for _ in range(k):
            name = f"n{next(counter)}"
            if lev == depth - 1:
                rows.append([*prefix, name])
            else:
                grow([*prefix, name], lev + 1)

    grow([], 0)
    levels = [f"l{i}" for i in range(depth - 1)] + ["block"]
    props = props or [F(1, depth + 1)] * (depth + 1)
    return frame_spine(rows, levels, props)


def osed_brute(spine, entity_blocks):
    """min #nonzero a_u in {-1,0,1}: sum over geounits above b of a_u = 1{b in E} for all b."""
    sets = block_sets(spine)
    nb = spine.n_blocks
    B = np.zeros((spine.n, nb), np.int64)
    col = {int(b): j for j, b in enumerate(spine.blocks)}
    for u, s in enumerate(sets):
        for b in s:
            B[u, col[b]] = 1
    target = np.zeros(nb, np.int64)
    target[list(entity_blocks)] = 1
    A = np.array(list(itertools.product((-1, 0, 1), repeat=spine.n)), dtype=np.int64)
    ok = np.all(target == A @ B, axis=1)
    return int(np.count_nonzero(A[ok], axis=1).min())


# ---------------------------------------------------------------------------------- construction
def test_bad_input_names_the_culprit():
    levels = ["county", "tract", "block"]
    rows = [["c1", "t1", "b1"], ["c1", "t1", "b2"], ["c1", "t2", "b3"]]
    props = [F(1, 4)] * 4
    with pytest.raises(SpineError, match=r"b2.*twice"):
        frame_spine([*rows, ["c1", "t2", "b2"]], levels, props)
    with pytest.raises(SpineError, match=r"t1.*two parents"):
        frame_spine([*rows, ["c2", "t1", "b9"]], levels, props)
    with pytest.raises(SpineError, match=r"b4.*no geounit|b4.*base"):
        Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, props, base=["b1", "b2", "b3", "b4"])
    with pytest.raises(SpineError, match=r"b3.*not in the base"):
        Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, props, base=["b1", "b2"])
    with pytest.raises(SpineError, match="'tract' has proportion 0"):
        frame_spine(rows, levels, [F(1, 2), F(1, 4), 0, F(1, 4)])
    with pytest.raises(SpineError, match="'county' has proportion -1/4"):
        frame_spine(rows, levels, [F(1, 2), F(-1, 4), F(1, 2), F(1, 4)])
    with pytest.raises(SpineError, match="sum to exactly 1, got 9/10"):
        frame_spine(rows, levels, [0.3, 0.2, 0.2, 0.2])
    spine = frame_spine(rows, levels, [0.25, 0.25, 0.25, 0.25])  # floats read as decimals
    assert spine.proportions == (F(1, 4),) * 4
    with pytest.raises(SpineError, match=r"entity 'p'.*unknown block 'zz'"):
        osed(spine, {"p": ["b1", "zz"]})


# ---------------------------------------------------------------------------------- OSED
def test_osed_hand_values_paper_style_example():
    # county -> tract1 {b1, b2, b3}, tract2 {b4, b5} (notes' oracle 1, by hand)
    rows = [["c", "t1", "b1"], ["c", "t1", "b2"], ["c", "t1", "b3"], ["c", "t2", "b4"], ["c", "t2", "b5"]]
    spine = frame_spine(rows, ["county", "tract", "block"], [F(1, 4)] * 4)
    ents = {"tract1": ["b1", "b2", "b3"], "two": ["b1", "b2"], "t1+b4": ["b1", "b2", "b3", "b4"],
            "cross": ["b3", "b4"], "all": ["b1", "b2", "b3", "b4", "b5"], "empty": [], "tract2": ["b4", "b5"],
            "all_but_b5": ["b1", "b2", "b3", "b4"], "one": ["b5"]}
    got = osed(spine, ents).to_dict()
    assert got == {"tract1": 1, "two": 2, "t1+b4": 2, "cross": 2, "all": 1, "empty": 0, "tract2": 1,
                   "all_but_b5": 2, "one": 1}


def test_osed_equals_exhaustive_search_on_random_small_spines():
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 60:
        spine = random_spine(rng, depth=int(rng.integers(2, 4)), max_fan=3)
        if spine.n > 10:
            continue
        nb = spine.n_blocks
        for _ in range(3):
            members = np.flatnonzero(rng.random(nb) < 0.5)
            got = int(osed(spine, {"e": spine.block_names[members]}).iloc[0])
            assert got == osed_brute(spine, members), (spine.names, members)
            checked += 1


def test_osed_per_county_scope_restricts_entities_to_counties():
    rows = [["s", "c1", "b1"], ["s", "c1", "b2"], ["s", "c2", "b3"], ["s", "c2", "b4"], ["s", "c2", "b5"]]
    spine = frame_spine(rows, ["state", "county", "block"], [F(1, 4)] * 4)
    table = osed(spine, {"p": ["b2", "b3", "b4"]}, scope="per_county")
    per = dict(zip(table.county, table.osed, strict=False))
    assert per == {"c1": 1, "c2": 2}  # {b2} inside c1; {b3, b4} = c2 - b5
    assert int(osed(spine, {"p": ["b2", "b3", "b4"]}).iloc[0]) == 3


# ---------------------------------------------------------------------------------- bypass
def dense_variance(spine, W, shares, V_rows_blocks, calculus):
    """Var(V x) from scratch: rows = (measured geounit u's block set) x W-rows, noise per (u, q)."""
    sets = block_sets(spine)
    col = {int(b): j for j, b in enumerate(spine.blocks)}
    nb = spine.n_blocks
    rows, var = [], []
    for u in range(spine.n):
        g = F(int(spine.gamma_num[u]), spine.gamma_den)
        if g == 0:
            continue
        ind = np.zeros(nb)
        ind[[col[b] for b in sets[u]]] = 1
        for Q, a in zip(W, shares, strict=False):
            Q = np.atleast_2d(Q)
            for r in Q:
                rows.append(np.kron(ind, r))
                if calculus == "pure":
                    b = 2.0 / float(g * a)
                    var.append(2 * b * b)
                else:
                    var.append(2.0 / (2 * float(g * a)))
    S = np.array(rows)
    info = S.T @ (S / np.array(var)[:, None])
    cov = np.linalg.inv(info)
    V = V_rows_blocks
    return V @ cov @ V.T


FIG2_W = [np.ones((1, 4)), np.kron(np.eye(2), np.ones((1, 2))), np.kron(np.ones((1, 2)), np.eye(2)), np.eye(4)]


def _queries(spine_before, rng, W, n_random=4):
    """V over the original spine's geounits plus random off-spine entities, ⊗ all W rows."""
    sets = block_sets(spine_before)
    col = {int(b): j for j, b in enumerate(spine_before.blocks)}
    nb = spine_before.n_blocks
    inds = []
    for s in sets:
        ind = np.zeros(nb)
        ind[[col[b] for b in s]] = 1
        inds.append(ind)
    for _ in range(n_random):
        inds.append((rng.random(nb) < 0.5).astype(float))
    Wall = np.vstack([np.atleast_2d(q) for q in W])
    return np.vstack([np.kron(ind, Wall) for ind in inds]), spine_before.block_names


def reorder_columns(V, names_from, names_to, k):
    pos = {n: i for i, n in enumerate(names_from)}
    perm = np.concatenate([np.arange(k) + k * pos[n] for n in names_to])
    return V[:, perm]


@pytest.mark.parametrize("seed", range(6))
def test_pure_bypass_keeps_path_sums_and_never_increases_any_variance(seed):
    rng = np.random.default_rng(seed)
    props = [F(int(x), 20) for x in rng.multinomial(16, [0.25] * 4) + 1]
    spine = random_spine(rng, depth=3, max_fan=3, props=props)
    out = bypass(spine, privacy="pure", scope="global", bypass_cutoff=None)
    assert all(s == 1 for s in path_sum_oracle(out))
    assert sorted(out.block_names) == sorted(spine.block_names)
    shares = [F(1, 4)] * 4
    V, names = _queries(spine, rng, FIG2_W)
    before = dense_variance(spine, FIG2_W, shares, V, "pure")
    V_after = reorder_columns(V, names, out.block_names, 4)
    after = dense_variance(out, FIG2_W, shares, V_after, "pure")
    # dense inverses of matrices of size <= 4 * 27: relative round-off far below 1e-9
    scale = np.abs(before).max()
    assert np.all(np.diag(after) <= np.diag(before) + 1e-9 * scale)
    assert np.linalg.eigvalsh(before - after).min() >= -1e-8 * scale
    # idempotent: a second pass changes nothing
    again = bypass(out, privacy="pure", scope="global", bypass_cutoff=None)
    assert np.array_equal(again.gamma_num, out.gamma_num) and list(again.names) == list(out.names)


def test_zcdp_bypasses_single_children_only_and_multi_child_bypass_would_hurt():
    rows = [["c1", "t1", "b1"], ["c1", "t1", "b2"], ["c2", "t2", "b3"]]
    spine = frame_spine(rows, ["county", "tract", "block"], [F(1, 4)] * 4)
    out = bypass(spine, privacy="zcdp")
    # worked by hand: t2 (one child) takes b3's 1/4; c1 takes t1's; c2 takes t2>b3's 1/2; t1 keeps
    # two children (no zCDP bypass); the US has two children
    g = {n: out.gamma(i) for i, n in enumerate(out.names)}
    assert g == {"US": F(1, 4), "c1>t1": F(1, 2), "c2>t2>b3": F(3, 4), "t1": 0, "t2>b3": 0,
                 "b1": F(1, 4), "b2": F(1, 4), "b3": 0}
    assert all(s == 1 for s in path_sum_oracle(out))
    # a star with 2 children: moving the parent's share down increases some variance (zCDP)
    star = frame_spine([["p", "b1"], ["p", "b2"]], ["mid", "block"], [F(1, 3)] * 3)
    moved = Spine.from_arrays(star.level_names, star.names, star.parent, star.proportions,
                              gamma=[F(1, 3), F(0), F(2, 3), F(2, 3)], check=False)
    W = [np.ones((1, 1))]
    V = np.vstack([np.ones(2), np.eye(2)])
    before = dense_variance(star, W, [1], V, "zcdp")
    after = dense_variance(moved, W, [1], V, "zcdp")
    assert np.any(np.diag(after) > np.diag(before) * (1 + 1e-9))


def test_exact_rule_matches_psd_of_the_variance_difference_on_random_stars():
    rng = np.random.default_rng(11)
    W = [np.ones((1, 1))]
    for _ in range(40):
        c = int(rng.integers(2, 6))
        gp = F(int(rng.integers(1, 10)), 10)
        kids = [F(int(rng.integers(1, 30)), 10) for _ in range(c)]
        rows = [["p", f"b{i}"] for i in range(c)]
        star = Spine.from_frame(pd.DataFrame(rows, columns=["mid", "block"]), ["mid", "block"], [F(1, 3)] * 3,
                                root="US")
        # gamma: root 1, parent gp, children kids (not a Theorem 3 spine: only variances matter here)
        g0 = [F(1), gp, *kids]
        g1 = [F(1), F(0)] + [k + gp for k in kids]
        s0 = Spine.from_arrays(star.level_names, star.names, star.parent, star.proportions, gamma=g0, check=False)
        s1 = Spine.from_arrays(star.level_names, star.names, star.parent, star.proportions, gamma=g1, check=False)
        V = np.eye(c)
        d = dense_variance(s0, W, [1], V, "pure") - dense_variance(s1, W, [1], V, "pure")
        psd = np.linalg.eigvalsh(d).min() >= -1e-9 * np.abs(d).max()
        assert psd == bypass_condition_exact(gp, kids)


def test_per_county_scope_and_cutoff():
    # US -> state -> 2 counties -> 2 blocks each, all proportions 1/4 (worked by hand):
    # counties: 1/4 >= (2-1)/2 * 1/4 -> bypassed (4 county geounits with 1/2);
    # state: 4 children with 1/2 >= 3/2 * 1/4 -> bypassed globally, not per county (above county)
    rows = [["s", f"c{c}", f"b{c}{b}"] for c in range(2) for b in range(2)]
    spine = frame_spine(rows, ["state", "county", "block"], [F(1, 4)] * 4)
    glob = bypass(spine, privacy="pure", scope="global", bypass_cutoff=None)
    per = bypass(spine, privacy="pure", scope="per_county", bypass_cutoff=None)
    assert (glob.level == 1).sum() == 4 and sorted(set(glob.gamma_float[glob.level == 1])) == [0.75]
    assert (per.level == 1).sum() == 1 and (per.level == 2).sum() == 4
    for s in (glob, per):
        assert all(x == 1 for x in path_sum_oracle(s))
    # bypass_cutoff 3: the state would get 4 children from the first county's bypass of... 2 + 1 = 3 ok,
    # then 3 + 1 = 4 > 3 refused for the second county
    tight = bypass(spine, privacy="pure", scope="global", bypass_cutoff=3)
    assert (tight.level == 2).sum() == 3 and tight.n_children[tight.level == 1].max() <= 3


# ---------------------------------------------------------------------------------- Algorithm 2
def _county_spine(rng, n_tracts=6, blocks=5):
    rows = []
    for t in range(n_tracts):
        for b in range(blocks):
            rows.append(["s", "c", f"tg{t}", f"t{t}", f"t{t}bg", f"t{t}b{b}"])
    levels = ["state", "county", "tract_group", "tract", "block_group", "block"]
    return frame_spine(rows, levels, [F(1, 7)] * 7)


def test_optimized_block_groups_invariants_and_idempotence():
    rng = np.random.default_rng(5)
    spine = _county_spine(rng, n_tracts=3, blocks=30)
    ents = Entities.from_sets(spine, {f"p{i}": spine.block_names[rng.random(spine.n_blocks) < 0.3] for i in range(3)})
    out = optimize_block_groups(spine, ents, fanout_cutoff=1)
    assert sorted(out.block_names) == sorted(spine.block_names)
    assert all(x == 1 for x in path_sum_oracle(out))
    bg = out.level == out.block_level - 1
    cap = int(np.floor(np.sqrt(30) + 1)) + 1
    assert out.n_children[bg].max() <= cap
    # every block group lies inside one class (same entities)
    key = ents.remap(spine, out).block_keys()
    for u in np.flatnonzero(bg):
        kids = np.flatnonzero(out.parent == u) - out.blocks[0]
        assert np.unique(key[kids]).size == 1
    again = optimize_block_groups(out, ents.remap(spine, out), fanout_cutoff=1)
    assert list(again.names) == list(out.names)
    # OSED never worse than with the conventional block groups
    before, after = osed(spine, ents).to_numpy(), osed(out, ents.remap(spine, out)).to_numpy()
    assert lex_not_worse(np.sort(before)[::-1], np.sort(after)[::-1])


@pytest.mark.parametrize("scope", ["per_county", "global"])
def test_tract_groups_respect_cutoff_and_do_not_worsen_osed(scope):
    rng = np.random.default_rng(8)
    spine = _county_spine(rng, n_tracts=9, blocks=2)
    ents = Entities.from_sets(spine, {f"e{i}": spine.block_names[rng.random(spine.n_blocks) < 0.35]
                                      for i in range(6)})
    out = optimize_tract_groups(spine, ents, county_level="county", fanout_cutoff=0, entity_threshold=None,
                                premerge_identical=False, scope=scope)
    tg = out.level == out.level_index("tract_group")
    assert out.n_children[tg].max() <= 3  # floor(sqrt(9) + 0)
    assert all(x == 1 for x in path_sum_oracle(out))
    assert sorted(out.block_names) == sorted(spine.block_names)
    # the paper's start (one tract group per tract) vs the result: lexicographically not worse
    base = optimize_tract_groups(spine, Entities.from_sets(spine, {}), county_level="county", fanout_cutoff=-3,
                                 entity_threshold=None, premerge_identical=False)
    e_out = ents.remap(spine, out)
    e_base = ents.remap(spine, base)
    if scope == "global":
        v_out, v_base = osed(out, e_out).to_numpy(), osed(base, e_base).to_numpy()
    else:
        v_out = osed(out, e_out, scope="per_county").osed.to_numpy()
        v_base = osed(base, e_base, scope="per_county").osed.to_numpy()
    assert lex_not_worse(np.sort(v_base)[::-1], np.sort(v_out)[::-1])


def test_lexicographic_order():
    assert lex_not_worse(np.array([3, 2, 1]), np.array([3, 2, 1]))
    assert lex_not_worse(np.array([3, 2, 1]), np.array([2, 2, 2]))  # sorted: (2,2,2) < (3,2,1)
    assert not lex_not_worse(np.array([3, 1, 1]), np.array([2, 3, 1]))  # (3,2,1) > (3,1,1)
    assert lex_not_worse(np.array([3, 1, 1]), np.array([1, 3, 1]))  # same multiset


# ---------------------------------------------------------------------------------- two-pass variance
@pytest.mark.parametrize("seed,calculus,do_bypass", [(0, "zcdp", True), (1, "pure", True), (2, "zcdp", False),
                                                     (3, "pure", False)])
def test_two_pass_geounit_covariances_equal_the_dense_wls_covariance(seed, calculus, do_bypass):
    """Oracle: the dense from-scratch covariance (dense_variance) of every geounit's 4 cells,
    V = (indicator of u's blocks) ⊗ I_4, on random small spines (bypassed: unmeasured single
    children; unequal proportions)."""
    from hierdp.spines.variance import geounit_covariances, geounit_query_variances

    rng = np.random.default_rng(40 + seed)
    props = [F(int(x), 20) for x in rng.multinomial(15, [0.2] * 5) + 1]
    spine = random_spine(rng, depth=4, max_fan=3, props=props)
    if do_bypass:
        spine = bypass(spine, privacy=calculus, scope="global", bypass_cutoff=None)
    shares = [F(1, 4)] * 4
    sets = block_sets(spine)
    col = {int(b): j for j, b in enumerate(spine.blocks)}
    inds = np.zeros((spine.n, spine.n_blocks))
    for u, s in enumerate(sets):
        inds[u, [col[b] for b in s]] = 1
    dense = dense_variance(spine, FIG2_W, shares, np.kron(inds, np.eye(4)), calculus)
    got = geounit_covariances(spine, FIG2_W, shares, calculus=calculus)
    want = np.stack([dense[4 * u:4 * u + 4, 4 * u:4 * u + 4] for u in range(spine.n)])
    # dense inverse of a matrix of size 4 * #blocks (<= 324) vs K x K recursions: round-off ~1e-13
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())
    if do_bypass:
        assert (~spine.measured).any()
    qv = geounit_query_variances(spine, FIG2_W, shares, calculus=calculus)
    W = np.vstack(FIG2_W)
    np.testing.assert_allclose(qv[:, 0], np.einsum("k,ukl,l->u", W[0], want, W[0]), rtol=1e-8)


def test_two_pass_refuses_a_rank_deficient_strategy_and_bad_shares():
    from hierdp.spines.variance import geounit_covariances

    spine = frame_spine([["a", "a1"], ["a", "a2"], ["b", "b1"]], ["county", "block"], [F(1, 3)] * 3)
    with pytest.raises(SpineError, match=r"do not determine|does not determine"):
        geounit_covariances(spine, [np.ones((1, 2))], [1])
    with pytest.raises(SpineError, match="sum to exactly 1"):
        geounit_covariances(spine, [np.eye(2)], [F(1, 2)])


# ---------------------------------------------------------------------------------- matrix form
@pytest.mark.parametrize("seed,calculus", [(0, "zcdp"), (1, "pure")])
def test_matrix_form_and_dense_wls_variance_equal_the_from_scratch_oracle(seed, calculus):
    """B (geounits x blocks) equals the block sets found by walking parents; wls_variance equals the
    from-scratch dense covariance (dense_variance) for geounit queries and random off-spine sets."""
    from hierdp.spines.matrices import spine_matrix, wls_variance, workload

    rng = np.random.default_rng(60 + seed)
    props = [F(int(x), 20) for x in rng.multinomial(16, [0.25] * 4) + 1]
    spine = bypass(random_spine(rng, depth=3, max_fan=3, props=props), privacy=calculus, scope="global",
                   bypass_cutoff=None)
    B = spine_matrix(spine).toarray()
    sets = block_sets(spine)
    col = {int(b): j for j, b in enumerate(spine.blocks)}
    for u, s in enumerate(sets):
        assert set(np.flatnonzero(B[u])) == {col[b] for b in s}
    W = np.vstack(FIG2_W)
    assert np.array_equal(workload(B, W).toarray(), np.kron(B, W))
    V, _ = _queries(spine, rng, FIG2_W)
    shares = [F(1, 4)] * 4
    want = dense_variance(spine, FIG2_W, shares, V, calculus)
    got = wls_variance(spine, FIG2_W, shares, V, calculus=calculus, full=True)
    # two dense inverses of the same matrix (size 4 * #blocks <= 108): round-off far below 1e-9
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
