"""Sensitivities by enumerating every neighbour (one person added to / removed from an existing
group, sizes kept in 1..K), and the noise each mechanism records against them (decision A1:
the chain's level-wide vector has sensitivity m_l, never 1)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.mechanisms import create

K = 4


def _vectors(groups: list[tuple[str, str, int]], leaves: list[tuple[str, str]]) -> dict[str, list[np.ndarray]]:
    """Per region level (nation, state, county): histograms, per-region cumulatives and the
    level-wide running sum in size-major order - all by loops."""
    states = sorted({s for s, _ in leaves})
    levels = [[("all",)], [(s,) for s in states], sorted(leaves)]

    def member(g: tuple[str, str, int], region: tuple) -> bool:
        return region == ("all",) or region == (g[0],) or region == (g[0], g[1])

    out: dict[str, list[np.ndarray]] = {"hist": [], "cum": [], "level": []}
    for regs in levels:
        h = np.zeros((len(regs), K), np.int64)
        for i, reg in enumerate(regs):
            for g in groups:
                if member(g, reg):
                    h[i, g[2] - 1] += 1
        cum = np.array([[h[i, :k + 1].sum() for k in range(K)] for i in range(len(regs))])
        running, lv = 0, []
        for k in range(K):
            for i in range(len(regs)):
                running += h[i, k]
                lv.append(running)
        out["hist"].append(h.ravel())
        out["cum"].append(cum.ravel())
        out["level"].append(np.array(lv))
    return out


def _neighbours(groups: list[tuple[str, str, int]]):
    for i, (s, c, size) in enumerate(groups):
        for d in (-1, 1):
            if 1 <= size + d <= K:
                yield [*groups[:i], (s, c, size + d), *groups[i + 1:]]


def test_enumerated_sensitivities_match_the_lemmas():
    rng = np.random.default_rng(0)
    seen = {"hist": set(), "cum": set(), "level": set()}
    for _ in range(60):
        leaves = [("A", "a1"), ("A", "a2"), ("B", "b1")][: int(rng.integers(2, 4))]
        m = [1, len({s for s, _ in leaves}), len(leaves)]
        groups = [(s, c, int(rng.integers(1, K + 1))) for s, c in leaves for _ in range(int(rng.integers(1, 4)))]
        base = _vectors(groups, leaves)
        worst = {key: [0, 0, 0] for key in base}
        for nb in _neighbours(groups):
            other = _vectors(nb, leaves)
            for key in base:
                for lev in range(3):
                    worst[key][lev] = max(worst[key][lev], int(np.abs(other[key][lev] - base[key][lev]).sum()))
            assert len(nb) == len(groups)  # G and every G_r unchanged: groups never appear or vanish
        assert all(w <= 2 for w in worst["hist"])
        assert all(w <= 1 for w in worst["cum"])
        assert all(w <= m[lev] for lev, w in enumerate(worst["level"]))
        for key in base:
            seen[key].add(tuple(worst[key]))
    # the bounds are attained (so they are the sensitivities, not loose bounds)
    assert (2, 2, 2) in seen["hist"] and (1, 1, 1) in seen["cum"]
    assert any(w == (1, 2, 3) for w in seen["level"])  # m_l = 1, 2, 3 regions


def _tiny() -> CountOfCounts:
    df = pd.DataFrame({"u": range(12), "s": list("AAAABBBBAABB"), "c": ["a1", "a2"] * 2 + ["b1"] * 4 + ["a1", "a2", "b1", "b1"],
                       "size": [1, 2, 3, 4, 1, 2, 3, 4, 2, 2, 1, 1]})
    dom = pd.DataFrame({"s": ["A", "A", "B"], "c": ["a1", "a2", "b1"]})
    return CountOfCounts.from_units(df, unit="u", levels=["s", "c"], size="size", K=K, domain=dom)


@pytest.mark.parametrize("name, kwargs, expected", [
    ("pgsr_mdp", {}, [2, 2, 2]),
    ("pgsr_mh", {}, [2, 2, 2]),
    ("pgsr_mh_relaxed", {}, [2, 2, 2]),
    ("pgsr_mhc", {}, [1, 1, 1]),
    ("pgsr_cumulative_dp", {}, [1, 1, 1]),
    ("pgsr_chain_dp", {}, [1, 1, 1]),
    ("pgsr_chain_dp", {"measure": "level_vector"}, [1, 2, 3]),
    ("pgsr_topdown", {}, [2, 2, 2]),
])
def test_every_mechanism_calibrates_to_the_enumerated_sensitivity(name, kwargs, expected):
    data = _tiny()
    rel = create(name, epsilon=0.9, **kwargs).release(data, seed=1)
    spends = [s for s in rel.accounting.spends]
    assert len(spends) == 3
    for s, sens in zip(spends, expected, strict=False):
        eps = s.budget.exact_parameters["epsilon"]
        assert eps == Fraction(0.9) / 3 or abs(float(eps) - 0.3) < 1e-15
        assert s.details["l1_sensitivity"] == sens
        # the delivered epsilon of the float scale never exceeds the part (exact rationals)
        assert Fraction(sens) / Fraction(s.details["scale"]) <= eps
        assert s.details["scale"] == pytest.approx(sens / float(eps), rel=1e-15)
    assert sum((s.budget.exact_parameters["epsilon"] for s in spends), Fraction(0)) == Fraction(0.9)


def test_chain_target_variances_match_the_linear_map_built_by_loops():
    """The chain's inverse-variance weights: each target is a linear map of independent noisy values;
    its variance is sum(coef^2) * var(one draw). The map is built here from the definition (the
    level-wide running sum in size-major order, with c_k = s_k - s_{k-1} per region)."""
    from hierdp.mechanisms.pgsr.problems import chain_target_variances

    level_ptr = np.array([0, 1, 3, 7])  # 1, 2 and 4 regions
    K = 3
    scales = [1.5, 2.0, 3.0]
    for measure in ("per_region", "level_vector"):
        got = chain_target_variances(level_ptr, K, scales, measure)
        for lev in range(3):
            a, b = level_ptr[lev], level_ptr[lev + 1]
            alpha = np.exp(-1 / scales[lev])
            one = 2 * alpha / (1 - alpha) ** 2
            for k in range(K):
                for j in range(b - a):
                    if measure == "level_vector":
                        coef = {(k, j): 1}
                    else:
                        coef: dict = {}
                        for kk in range(K):  # running sum of c over positions up to (k, j)
                            for jj in range(b - a):
                                if (kk, jj) <= (k, j):
                                    coef[(kk, jj)] = coef.get((kk, jj), 0) + 1
                                    if kk > 0:
                                        coef[(kk - 1, jj)] = coef.get((kk - 1, jj), 0) - 1
                    want = sum(c * c for c in coef.values()) * one
                    assert got[k, a + j] == pytest.approx(want, rel=1e-12)
