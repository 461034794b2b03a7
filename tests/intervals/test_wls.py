"""Two-pass WLS variances against the dense covariance computed from the definition."""

import numpy as np
import pytest

from hierdp.intervals.wls import tree_wls_variance


def _dense(parent: np.ndarray, var: np.ndarray) -> np.ndarray | None:
    """diag(S (S_M^T W S_M)^-1 S^T): S maps the leaves to every node, M the measured nodes."""
    n = parent.size
    leaves = [v for v in range(n) if v not in set(parent.tolist())]
    S = np.zeros((n, len(leaves)))
    for j, leaf in enumerate(leaves):
        v = leaf
        while v >= 0:
            S[v, j] = 1.0
            v = parent[v]
    m = np.isfinite(var)
    info = S[m].T @ np.diag(1.0 / var[m]) @ S[m]
    if np.linalg.matrix_rank(info) < len(leaves):
        return None
    return np.diag(S @ np.linalg.inv(info) @ S.T)


def test_two_pass_equals_dense_covariance_on_random_trees():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(2, 16))
        parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
        var = rng.uniform(0.2, 8.0, n)
        var[rng.random(n) < 0.3] = np.inf  # unmeasured nodes
        dense = _dense(parent, var)
        if dense is None:
            with pytest.raises(ValueError):
                tree_wls_variance(parent, var)
            continue
        assert np.allclose(tree_wls_variance(parent, var), dense, rtol=1e-9, atol=1e-12)
        checked += 1
    assert checked > 100


def test_released_gls_values_have_that_variance():
    """The GLS estimate of a quadtree's leaves (Monte Carlo over the noise) has the two-pass variance."""
    from hierdp.mechanisms.spatial.consistency import consistent_tree

    parent = np.array([-1, 0, 0, 0, 0, 1, 1, 1, 1])
    var = np.array([1.0, 2.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0])
    rng = np.random.default_rng(0)
    truth = np.array([40.0, 10, 10, 10, 10, 1, 2, 3, 4])
    est = np.array([consistent_tree(parent, truth + rng.normal(0, np.sqrt(var)), var)[0] for _ in range(800)])
    assert np.allclose(est.var(axis=0), tree_wls_variance(parent, var), rtol=0.2)
