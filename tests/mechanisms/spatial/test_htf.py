"""HTF end to end: the chosen splits, the stop conditions, the two public DPHIS_2D defects as
regression tests (re-seeded noise; floating-point dust budgets), independence of node noise,
reproducibility, the release's consistency.

Oracles: a scalar re-implementation of Alg. 1 written from the paper (with midpoints) over the
brute-force objective in Fractions; exhaustive argmin for eq. (8); the exact discrete Laplace pmf
(chi-square); the instrumented sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hierdp.hierarchy.spatial import SpatialGrid
from hierdp.mechanisms.spatial.htf import HTF, alg1_search
from hierdp.metrics.spatial import mre, random_rectangles
from hierdp.privacy import samplers



def _gridded_exact(block, axis, k, bits=20):
    """floor(A 2^bits / n1) + floor(B 2^bits / n2) from the brute-force parts, in Python integers."""
    b = block if axis == 0 else block.T
    p1, p2 = b[:k].ravel().tolist(), b[k:].ravel().tolist()
    s1, s2, n1, n2 = sum(p1), sum(p2), len(p1), len(p2)
    a = sum(abs(n1 * c - s1) for c in p1)
    bb = sum(abs(n2 * c - s2) for c in p2)
    return (a << bits) // n1 + (bb << bits) // n2


def alg1_oracle(values, length, T):
    """Alg. 1 of the paper with midpoints, one node, no noise: ``values[k]`` for k = 1..L-1."""
    lo, hi = 1, length - 1
    k = (lo + hi) // 2
    for _ in range(T):
        k1, k2 = (lo + k) // 2, -((-(k + hi)) // 2)  # floor, ceil: the three inner points of four sub-intervals
        m = min(values[k1], values[k], values[k2])
        if values[k] == m:
            lo, hi = k1, k2
        elif values[k1] == m:
            hi, k = k, k1
        else:
            lo, k = k, k2
    return k


def test_alg1_probes_midpoints_and_keeps_the_smallest_probe():
    probes = []
    seq = np.random.default_rng(0).normal(size=1024)

    def probe(k):
        probes.append(int(k[0]))
        return np.array([seq[int(k[0])]])

    k = alg1_search(probe, np.array([1024]), 3, lambda n: np.zeros(n))
    assert probes[:3] == [512, 256, 768]  # midpoints (the printed floor((r-l)/2) gives 511, 255, 256)
    assert seq[int(k[0])] == min(seq[p] for p in probes) and len(probes) == 7
    assert int(k[0]) == alg1_oracle(seq, 1024, 3)


def test_alg1_finds_the_argmin_of_unimodal_objectives():
    rng = np.random.default_rng(1)
    for _ in range(200):
        L = int(rng.integers(2, 300))
        best = int(rng.integers(1, L))
        vals = np.abs(np.arange(L) - best).astype(float) + rng.uniform(0, 0.1)  # unimodal, unique min
        T = max(1, math.ceil(math.log2(L)))
        got = alg1_search(lambda k, vals=vals: vals[k], np.array([L]), T, lambda n: np.zeros(n))
        assert int(got[0]) == best


def test_alg1_batched_equals_the_scalar_oracle_on_many_nodes():
    rng = np.random.default_rng(2)
    lengths = rng.integers(2, 60, 300)
    tables = [rng.integers(0, 50, L) for L in lengths]
    for T in (0, 1, 3, 6):
        def probe(k):
            return np.array([t[int(x)] for t, x in zip(tables, k, strict=False)])
        got = alg1_search(probe, lengths.astype(np.int64), T, lambda n: np.zeros(n, np.int64))
        want = [alg1_oracle(t, int(L), T) for t, L in zip(tables, lengths, strict=False)]
        assert got.tolist() == want


def _root_split(rel, shape):
    """The boundary of a height-1 tree's two leaves: ('rows' | 'cols', k)."""
    (a, b) = rel.rects
    if a[3] - a[2] == shape[1] and b[3] - b[2] == shape[1]:
        return "rows", int(min(a[1], b[1]))
    return "cols", int(min(a[3], b[3]))


@pytest.mark.parametrize("split", ["alg1", "baseline"])
def test_htf_root_split_equals_brute_force_without_noise(split):
    """With a partition budget so large that the noise is 0 except with probability < 1e-20, the root
    split is the exhaustive argmin (eq. 8) or the scalar Alg. 1 (midpoints) over the exact objective."""
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(40):
        rows, cols = (int(v) for v in rng.integers(2, 9, 2))
        counts = rng.poisson(rng.uniform(0.5, 8), (rows, cols))
        grid = SpatialGrid.from_counts(counts)
        for height, axis in ((1, 1), (2, 0)):  # height 1 (odd) splits columns, 2 (even) rows
            if (rows, cols)[axis] < 2:
                continue
            rel = HTF(epsilon=4e9, eps_prt_per_level=1e9, height=height, stop_count=None, stop_cells=0, T=3,
                      split=split).release(grid, seed=0)
            if height == 2:
                continue  # only the root's axis is checked below, on height-1 trees
            got_axis, k = _root_split(rel, (rows, cols))
            assert got_axis == ("cols" if axis == 1 else "rows")
            L = (rows, cols)[axis]
            g = {j: _gridded_exact(counts, axis, j) for j in range(1, L)}
            if split == "baseline":
                assert g[k] == min(g.values())
            else:
                assert k == alg1_oracle(g, L, 3)
            checked += 1
    assert checked > 20


def test_rows_are_split_at_even_heights():
    counts = np.zeros((8, 8), np.int64)
    counts[:, 0] = 50  # a heavy column: a column split would isolate it
    rel = HTF(epsilon=4e9, eps_prt_per_level=1e9, height=2, stop_count=None, stop_cells=0).release(
        SpatialGrid.from_counts(counts), seed=0)
    # the root (height 2) splits rows: every leaf spans rows of one half
    r = rel.rects
    assert set(r[:, 0].tolist()) | set(r[:, 1].tolist()) >= {0, 8} and len({(a, b) for a, b in r[:, :2]}) == 2


def _leaf_noise_grid(side=64):
    rng = np.random.default_rng(7)
    return SpatialGrid.from_counts(rng.poisson(1.0, (side, side)))


def test_node_noise_is_independent_not_repeated(monkeypatch):
    """DPHIS_2D re-seeded its generator at every node (1,919 nodes' noise took 39 values). Here the
    1,500+ leaves at height 0 of a height-11 tree, each drawn once at the same scale: their noise must
    look like that many independent discrete Laplace draws."""
    grid = _leaf_noise_grid(128)
    rel = HTF(epsilon=0.05, eps_prt_per_level=1e-4, height=11, stop_count=None, stop_cells=0).release(grid, seed=11)
    at0 = rel.details["leaf_heights"] == 0  # one draw each, all at the leaf level's scale
    assert at0.sum() >= 1500
    truth = grid.query_counts(rel.rects[at0])
    noise = (rel.values[at0] - truth).astype(np.int64)
    scale = HTF(epsilon=0.05).scale_for(rel.details["exact"]["epsilon_data_levels"][0])
    q = math.exp(-1 / scale)
    pmf = lambda x: (1 - q) / (1 + q) * q ** np.abs(x)
    n = noise.size
    # distinct values: expected count for iid draws, sum over x of 1 - (1 - p_x)^n
    xs = np.arange(-4000, 4001)
    p = pmf(xs)
    expected = float(np.sum(1 - (1 - p) ** n))
    sd = math.sqrt(float(np.sum((1 - p) ** n * (1 - (1 - p) ** n))))
    assert abs(len(np.unique(noise)) - expected) < 6 * sd
    # goodness of fit: bins of equal width on |x| in units of the scale
    edges = np.concatenate([[-np.inf], np.arange(-3, 3.01, 0.5) * scale, [np.inf]])
    obs = np.histogram(noise, edges)[0]
    cdf = np.cumsum(p)
    probs = np.diff(np.interp(edges, xs + 0.5, cdf, left=0.0, right=1.0))
    chi2 = float(np.sum((obs - n * probs) ** 2 / (n * probs)))
    assert stats.chi2.sf(chi2, len(obs) - 1) > 1e-4
    # neighbouring leaves (mostly siblings) are uncorrelated
    corr = np.corrcoef(noise[:-1], noise[1:])[0, 1]
    assert abs(corr) < 5 / math.sqrt(n)
    # the two halves of the tree did not get the same noise sequence
    half = n // 2
    assert not np.array_equal(noise[:half], noise[half:2 * half])


def test_same_seed_same_release_and_different_seeds_differ():
    grid = _leaf_noise_grid()
    mech = HTF(epsilon=1.0, eps_prt_per_level=0.005, stop_count=20)
    a, b, c = mech.release(grid, seed=5), mech.release(grid, seed=5), mech.release(grid, seed=6)
    assert np.array_equal(a.rects, b.rects) and np.array_equal(a.values, b.values)
    assert not (np.array_equal(a.rects, c.rects) and np.array_equal(a.values, c.values))


def test_no_draw_spends_floating_point_dust(monkeypatch):
    """DPHIS_2D spent eps_count - eps_accu (about 1e-16) on a Laplace draw at paths ending exactly at the
    leaves, adding noise ~1e15. Here the remainder is exact: 0 at height 0 (no second draw), else the sum
    of the levels below; every count draw uses a scale of at most 1 / min(level budget)."""
    scales = []
    real = samplers.discrete_laplace

    def spy(scale, size, rng):
        scales.append(float(np.max(scale)))
        return real(scale, size, rng)

    monkeypatch.setattr(samplers, "discrete_laplace", spy)
    grid = _leaf_noise_grid()
    for stop_count in (None, 3.0, 40.0):
        scales.clear()
        rel = HTF(epsilon=0.5, eps_prt_per_level=0.001, eps_height=0.001, stop_count=stop_count,
                  stop_cells=0).release(grid, seed=2)
        ex = rel.details["exact"]
        budgets = [e for e in ex["epsilon_data_levels"]] + [ex["epsilon_height"]]
        worst = 1 / float(min(budgets))
        partition_scale = (2 * 2 ** 20 + 1) / float(ex["epsilon_prt_per_level"] / 7)
        count_scales = [s for s in scales if not math.isclose(s, partition_scale, rel_tol=1e-12)]
        assert count_scales and max(count_scales) <= worst * (1 + 1e-12)
        assert np.all(np.isfinite(rel.values)) and np.abs(rel.values).max() < 1e4
        queries = random_rectangles(grid.shape, 300, 0)
        assert mre(rel, grid, queries) < 100


def test_pruned_nodes_replace_or_combine_their_draw():
    grid = _leaf_noise_grid()
    base = dict(epsilon=1.0, eps_prt_per_level=0.002, stop_count=30.0, stop_cells=4)
    a = HTF(**base).release(grid, seed=9)
    b = HTF(**base, combine_pruned=True).release(grid, seed=9)
    assert np.array_equal(a.rects, b.rects)  # same randomness, same tree
    assert a.values.dtype == np.int64 and b.values.dtype == np.float64
    pruned = a.details["leaf_heights"] > 0
    assert pruned.any() and not np.array_equal(a.values[pruned], b.values[pruned])
    assert np.array_equal(a.values[~pruned], b.values[~pruned])  # height-0 leaves: one draw either way


def test_stop_conditions_prune():
    grid = _leaf_noise_grid()
    few = HTF(epsilon=1.0, eps_prt_per_level=0.002, stop_count=10 ** 9).release(grid, seed=1)
    assert few.n_leaves == 1  # every noisy count is below the threshold: the root is the only leaf
    cells = HTF(epsilon=1.0, eps_prt_per_level=0.002, stop_count=None, stop_cells=64 * 64).release(grid, seed=1)
    assert cells.n_leaves == 1
    assert few.check_consistency() == [] == cells.check_consistency()


def test_bounded_neighbours_make_the_height_free_and_double_sensitivities():
    grid = _leaf_noise_grid()
    rel = HTF(epsilon=1.0, eps_prt_per_level=0.002, bounded=True).release(grid, seed=0)
    assert rel.details["noisy_n"] == grid.n_points and not any(s.label == "height estimate"
                                                               for s in rel.accounting.spends)
    data = [s for s in rel.accounting.spends if s.label.startswith("data")]
    assert all(s.details["l1_sensitivity"] == 2 for s in data)


def test_secure_mode_runs_exact_samplers():
    grid = _leaf_noise_grid()
    rel = HTF(epsilon=1.0, eps_prt_per_level=0.005, stop_count=20, secure=True).release(grid)
    assert rel.params["randomness"] == "secure" and rel.check_consistency() == []


def test_matrix_input_and_bad_input():
    rel = HTF(epsilon=1.0, eps_prt_per_level=0.01).release(np.ones((8, 8), np.int64), seed=0)
    assert rel.check_consistency() == []
    with pytest.raises(Exception, match="SpatialGrid"):
        HTF(epsilon=1.0).release([[1, 2]], seed=0)
