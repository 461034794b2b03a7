"""Generalized parallel composition (paper 004 Lemmas 9-12) against brute force."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.parallel import (
    StabilityError,
    check_stability,
    max_degree,
    membership_pairs,
    parallel_compose,
    parallel_compose_groups,
    record_degrees,
    sequential_compose,
)
from hierdp.privacy.rdp_geometric import discrete_laplace_logpmf, geometric_rdp_exact, renyi_divergence


def _random_map(seed: int, n_records: int = 30, n_groups: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random((n_records, n_groups)) < rng.uniform(0.05, 0.6)


def _as_forms(incidence: np.ndarray):
    recs, grps = np.nonzero(incidence)
    frame = pd.DataFrame({"record": [f"r{r}" for r in recs], "group": [f"g{g}" for g in grps]})
    # duplicate a few rows: a record is in a group or not
    frame = pd.concat([frame, frame.head(3)], ignore_index=True)
    mapping = {f"r{r}": [f"g{g}" for g in np.flatnonzero(row)] for r, row in enumerate(incidence)}
    seq = [[f"g{g}" for g in np.flatnonzero(row)] for row in incidence]
    return frame, mapping, seq


@pytest.mark.parametrize("seed", range(12))
def test_max_degree_matches_brute_force(seed):
    inc = _random_map(seed)
    brute = max(sum(1 for g in range(inc.shape[1]) if inc[r, g]) for r in range(inc.shape[0]))
    for form in _as_forms(inc):
        assert max_degree(form) == brute
        assert check_stability(form, max(brute, 1)) == brute
        if brute > 1:
            with pytest.raises(StabilityError, match=f"observed stability {brute} exceeds"):
                check_stability(form, brute - 1)


@pytest.mark.parametrize("seed", range(6))
def test_heterogeneous_costs_match_brute_force(seed):
    inc = _random_map(seed)
    rng = np.random.default_rng(seed + 100)
    costs = {f"g{g}": float(c) for g, c in enumerate(rng.uniform(0.1, 2.0, inc.shape[1]))}
    frame, _, _ = _as_forms(inc)
    brute = max(sum(costs[f"g{g}"] for g in np.flatnonzero(row)) for row in inc)
    # sums of a few doubles in different orders: a few ulps
    assert parallel_compose_groups(costs, frame, "pure") == pytest.approx(brute, rel=1e-14)
    # RDP: per order
    alphas = np.array([1.5, 2.0, 8.0])
    curves = pd.DataFrame({k: geometric_rdp_exact(alphas, v) for k, v in costs.items()}).T
    brute_rdp = np.max([curves.loc[[f"g{g}" for g in np.flatnonzero(row)]].sum(axis=0).to_numpy()
                        for row in inc], axis=0)
    np.testing.assert_allclose(parallel_compose_groups(curves, frame, "rdp"), brute_rdp)
    # never above the lemma's degree * max(cost)
    assert brute <= parallel_compose(max(costs.values()), max_degree(frame), "pure") + 1e-12


def test_lemmas_by_exact_divergence_of_the_joint_mechanism():
    # Three groups; record r is in groups 0 and 2 (degree 2). Geometric mechanisms with eps_g on
    # each group's count: the joint output's Renyi divergence between neighbours differing in r
    # is computed on the 3-D product pmf and must equal the sum over r's groups (Lemmas 11, 12),
    # and is <= degree * max (Lemma 12) and its alpha -> inf value = eps_0 + eps_2 (Lemma 9).
    eps = np.array([0.8, 0.5, 0.3])
    x = np.arange(-90, 92)  # tails below e^-27
    lp = [discrete_laplace_logpmf(x, 1 / e) for e in eps]
    lq = [discrete_laplace_logpmf(x - (1 if g in (0, 2) else 0), 1 / e) for g, e in enumerate(eps)]
    joint_p = lp[0][:, None, None] + lp[1][None, :, None] + lp[2][None, None, :]
    joint_q = lq[0][:, None, None] + lq[1][None, :, None] + lq[2][None, None, :]
    for a in (1.5, 3.0, 10.0):
        d_joint = renyi_divergence(joint_p.ravel(), joint_q.ravel(), a)
        d_sum = geometric_rdp_exact(a, eps[0]) + geometric_rdp_exact(a, eps[2])
        # the product pmf is truncated where the tails fall below e^-27 (~2e-12 of the mass):
        # the truncated divergence is within ~1e-11 relative; 1e-7 is generous
        assert d_joint == pytest.approx(d_sum, rel=1e-7)
        assert d_joint <= parallel_compose(geometric_rdp_exact(a, eps.max()), 2, "rdp") + 1e-12
    # pure DP: the largest log-likelihood ratio over outputs is eps_0 + eps_2
    ratio = (joint_p - joint_q)[10:-10, 10:-10, 10:-10]
    assert ratio.max() == pytest.approx(eps[0] + eps[2], rel=1e-13)  # sums of log-pmf differences
    assert parallel_compose(eps.max(), 2, "pure") >= ratio.max()


def test_record_degrees_and_pairs():
    pairs = membership_pairs({"a": ["x", "y", "x"], "b": [], "c": ["y"]})
    assert len(pairs) == 3
    deg = record_degrees(pairs)
    assert deg.to_dict() == {"a": 2, "c": 1}
    assert max_degree([]) == 0


def test_sequential_compose():
    assert sequential_compose([0.1, 0.2, 0.3]) == pytest.approx(0.6, rel=1e-15)  # one float sum
    np.testing.assert_allclose(sequential_compose([np.array([1.0, 2.0]), np.array([0.5, 0.5])],
                                                  "rdp"), [1.5, 2.5])


@pytest.mark.parametrize("call", [
    lambda: check_stability({"a": ["x"]}, 0),
    lambda: check_stability({"a": ["x"]}, 1.5),
    lambda: membership_pairs(pd.DataFrame({"rec": [1], "group": ["x"]})),
    lambda: membership_pairs({"a": "xy"}),
    lambda: membership_pairs(42),
    lambda: parallel_compose(-1.0, 2),
    lambda: parallel_compose(1.0, 2, "approx"),
    lambda: parallel_compose_groups({"x": 1.0}, {"a": ["x", "y"]}),
])
def test_bad_input_raises(call):
    with pytest.raises(PrivacyParameterError):
        call()
