"""NoiseLaw: exact tails, thresholds and margins against independent computations."""

import math

import numpy as np
import pytest

from hierdp.intervals.noise_law import NoiseLaw, law_from_details
from hierdp.privacy.moe import discrete_gaussian_moe, geometric_moe


def _brute_tail(kind: str, param: float, t: int) -> float:
    """P(|Y| > t) by direct summation of the unnormalised pmf over a wide support."""
    xs = np.arange(-4000, 4001)
    w = np.exp(-xs.astype(float) ** 2 / (2 * param)) if kind == "discrete_gaussian" else np.exp(-np.abs(xs) / param)
    return float(w[np.abs(xs) > t].sum() / w.sum())


@pytest.mark.parametrize("kind,param", [("discrete_gaussian", 0.7), ("discrete_gaussian", 302.678),
                                        ("geometric", 0.9), ("geometric", 40.0)])
def test_tail_matches_direct_summation(kind, param):
    law = NoiseLaw(kind, param)
    for t in (0, 1, 3, 17, 60):
        assert law.tail(t) == pytest.approx(_brute_tail(kind, param, t), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("kind,param", [("discrete_gaussian", 3.0), ("discrete_gaussian", 302.678),
                                        ("geometric", 2.5), ("geometric", 0.3)])
def test_threshold_is_the_smallest_integer(kind, param):
    law = NoiseLaw(kind, param)
    for alpha in (0.5, 0.1, 0.05, 1e-3, 1e-7):
        t = int(law.threshold(alpha))
        assert law.tail(t) <= alpha
        assert t == 0 or law.tail(t - 1) > alpha


def test_margin_agrees_with_privacy_moe():
    # hierdp.privacy.moe computes the same margin by its own code (paper 004 App. D.3 / E.2)
    for rho in (0.5, 0.01, 0.00165):
        assert NoiseLaw("discrete_gaussian", 1 / (2 * rho)).margin(0.95) == discrete_gaussian_moe(rho, 0.95)
    for eps in (0.1, 1.0, 2.0):
        assert NoiseLaw("geometric", 1 / eps).margin(0.9) == geometric_moe(eps, 0.9)


def test_variance_and_draws():
    rng = np.random.default_rng(0)
    for law in (NoiseLaw("discrete_gaussian", 9.0), NoiseLaw("geometric", 3.0)):
        x = law.draw(200_000, rng)
        assert x.dtype == np.int64
        assert np.var(x) == pytest.approx(law.variance, rel=0.02)
    q = math.exp(-1 / 3.0)
    assert NoiseLaw("geometric", 3.0).variance == pytest.approx(2 * q / (1 - q) ** 2)


def test_law_from_details_and_refusals():
    assert law_from_details({"noise": "discrete_gaussian", "sigma2": 4.0}) == NoiseLaw("discrete_gaussian", 4.0)
    assert law_from_details({"noise": "geometric", "scale_step2": 2.0}, key_suffix="_step2") == \
        NoiseLaw("geometric", 2.0)
    with pytest.raises(ValueError):
        law_from_details({"noise": "geometric"})
    with pytest.raises(ValueError):
        NoiseLaw("laplace", 1.0)
    with pytest.raises(ValueError):
        NoiseLaw("geometric", 0.0)
