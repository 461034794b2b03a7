"""Noise scales are rounded in the safe direction: the privacy the float actually used delivers,
computed exactly with fractions, never exceeds the budget part it was calibrated for - over many
configurations, directly and through every mechanism's release."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy.od import ODTree
from hierdp.mechanisms import create
from hierdp.mechanisms.safetab import PopulationGroupLevel
from hierdp.privacy.budget import Budget
from hierdp.privacy.calibration import delivered_epsilon, delivered_rho, gaussian_sigma2, laplace_scale
from hierdp.privacy.errors import PrivacyParameterError

EPSILONS = [0.01, 0.1, 0.3, 0.5, 0.7, 1.0, 1.1, 2.5, 3.0, 7.0, 10.0]
DELTAS = [1e-5, 1e-8, 1e-10]
PARTS = [1, 2, 3, 4, 5, 6, 7, 9, 13]


def _rho_parts():
    """Exact budget parts of many (eps, delta, levels) configurations, as mechanisms split them."""
    for eps, delta, k in itertools.product(EPSILONS, DELTAS, PARTS):
        total = Budget.approx(eps, delta).to_zcdp("analytic")
        yield from total.split_uniform(k)


def test_gaussian_sigma2_never_delivers_more_than_granted():
    naive_over = checked = 0
    for part in _rho_parts():
        rho = part.exact_parameters["rho"]
        for sens_sq in (1, 2, 4, 8, 18):
            s2 = gaussian_sigma2(part, sens_sq)
            # exact: Δ² / (2 σ²) <= ρ for the float that will be used ...
            assert Fraction(sens_sq) / (2 * Fraction(s2)) <= rho
            # ... and it is the smallest such float (one ulp less would overspend)
            below = math.nextafter(s2, 0.0)
            assert Fraction(sens_sq) / (2 * Fraction(below)) > rho
            assert delivered_rho(s2, sens_sq) == Fraction(sens_sq) / (2 * Fraction(s2))
            # the float formula this replaced overspends in some configurations
            naive = sens_sq / (2.0 * float(rho))
            naive_over += Fraction(sens_sq) / (2 * Fraction(naive)) > rho
            checked += 1
    assert checked > 1000
    assert naive_over > 0, "the test would not detect the defect it guards against"


def test_laplace_scale_never_delivers_more_than_granted():
    naive_over = 0
    for eps, k, sens in itertools.product(EPSILONS, PARTS, (1, 2, 3, 4, 6)):
        for part in Budget.pure(eps).split_uniform(k):
            e = part.exact_parameters["epsilon"]
            b = laplace_scale(part, sens)
            assert Fraction(sens) / Fraction(b) <= e
            assert Fraction(sens) / Fraction(math.nextafter(b, 0.0)) > e
            assert delivered_epsilon(b, sens) == Fraction(sens) / Fraction(b)
            naive = sens / float(e)
            naive_over += Fraction(sens) / Fraction(naive) > e
    assert naive_over > 0


@pytest.mark.parametrize("culprit,call", [
    ("rho=1e-310", lambda: gaussian_sigma2(1e-310, 2, culprit="rho=1e-310")),
    ("epsilon=1e-310", lambda: laplace_scale(1e-310, 2, culprit="epsilon=1e-310")),
])
def test_a_budget_too_small_for_double_precision_names_the_parameter(culprit, call):
    with pytest.raises(PrivacyParameterError, match=culprit.replace(".", r"\.")):
        call()


def test_a_budget_so_large_that_the_scale_underflows_is_refused():
    with pytest.raises(PrivacyParameterError, match="too large"):
        gaussian_sigma2(Fraction(10) ** 400, 1, culprit="rho=1e400")


# ------------------------------------------------------------------------- through the mechanisms
def _tree(seed: int = 0) -> ODTree:
    rng = np.random.default_rng(seed)
    geo = pd.DataFrame({"r": [f"R{i // 3}" for i in range(7)], "m": [f"m{i}" for i in range(7)]})
    trips = pd.DataFrame({"o": rng.choice(geo.m, 300), "d": rng.choice(geo.m, 300)})
    return ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)


def _unit_sens(name: str, bounded: bool, m: int, finest: bool, count: bool) -> int:
    """The sensitivity each noise calibrates to, written out here (not read from the library)."""
    if name == "geometric":
        return m if count else (2 * m if bounded else m)
    if count:
        return m * m
    return 2 * m * m if bounded else m * m


@pytest.mark.parametrize("eps", [0.1, 0.7, 1.0, 3.0])
@pytest.mark.parametrize("mech,extra", [
    ("inftda", {}), ("tda_l2", {}), ("tda_l2_exact", {}),
    ("topdown", {"noise": "geometric", "objective": "l2"}),
    ("topdown", {"noise": "geometric", "objective": "linf", "plan": "geometric"}),
])
@pytest.mark.parametrize("bounded,m", [(True, 1), (False, 1), (True, 2), (False, 3)])
def test_every_topdown_spend_delivers_at_most_its_part(eps, mech, extra, bounded, m):
    tree = _tree()
    budget = {"epsilon": eps} if extra.get("noise") == "geometric" else {"epsilon": eps, "delta": 1e-8}
    rel = create(mech, **budget, bounded=bounded, contributions=m, **extra).release(tree, seed=1)
    acc = rel.accounting
    T = tree.n_levels - 1
    noise = extra.get("noise", "discrete_gaussian")
    assert len(acc.spends) == (T if bounded else T + 1)
    total_delivered = Fraction(0)
    for spend in acc.spends:
        level = int(spend.label.split()[1])
        sens = _unit_sens(noise, bounded, m, finest=level == T, count=level == 0)
        granted = next(iter(spend.budget.exact_parameters.values()))
        if noise == "geometric":
            delivered = Fraction(sens) / Fraction(spend.details["scale"])
        else:
            delivered = Fraction(sens) / (2 * Fraction(spend.details["sigma2"]))
        assert delivered <= granted
        total_delivered += delivered
    assert total_delivered <= next(iter(acc.total.exact_parameters.values()))
    assert acc.spent == acc.total  # the parts compose exactly to the total


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_baselines_deliver_at_most_their_budget(eps):
    tree = _tree()
    van = create("vanilla", epsilon=eps, delta=1e-8).release(tree, seed=0).accounting
    rho = van.total.exact_parameters["rho"]
    assert Fraction(2) / (2 * Fraction(van.spends[0].details["sigma2"])) <= rho
    sh = create("sh", epsilon=eps, delta=1e-8).release(tree, seed=0).accounting
    assert Fraction(2) / Fraction(sh.spends[0].details["scale"]) <= Fraction(eps)
    # the threshold is at least Thm 8's 1 + 2 log(2/delta)/eps (larger is the safe side)
    assert sh.spends[0].details["threshold"] >= 1 + 2 * math.log(2 / 1e-8) / eps


@pytest.mark.parametrize("noise", ["geometric", "discrete_gaussian"])
@pytest.mark.parametrize("budget,stability,gamma", [(0.3, 1, 0.1), (1.7, 3, 0.1), (0.9, 2, 0.3), (2.2, 7, 0.25)])
def test_safetab_counts_deliver_at_most_their_level_budget(noise, budget, stability, gamma):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 200), "age": rng.integers(0, 90, 200)})
    pairs = pd.DataFrame({"record": df.index, "group": rng.choice(["a", "b", "c"], 200)})
    levels = [PopulationGroupLevel("L", budget, stability, pairs, universe=["a", "b", "c"], total_only=["c"])]
    rel = create("safetab", levels=levels, noise=noise, gamma=gamma, sex_values=["F", "M"]).release(df, seed=0)
    (spend,) = rel.accounting.spends
    key = "scale" if noise == "geometric" else "sigma2"

    def count_budget(p: float) -> Fraction:  # exact privacy of one count at this parameter
        return 1 / Fraction(p) if noise == "geometric" else 1 / (2 * Fraction(p))

    one, s1, s2 = (count_budget(spend.details[f"{key}_{w}"]) for w in ("total_only", "step1", "step2"))
    granted = Fraction(budget)
    # generalized parallel composition: stability x the worst branch of one group
    delivered = stability * max(one, s1 + s2)
    assert delivered <= granted


# ---------------------------------------------------------------- scales int64 draws cannot carry
@pytest.mark.parametrize("kind", ["scale", "sigma2"])
def test_scales_whose_int64_draws_could_wrap_are_refused_everywhere(kind):
    # found by review: at epsilon 1e-300 the seeded sampler's float-to-int64 cast collapsed to 0
    # and the release published the true counts under a "1e-300-DP" label
    from hierdp.privacy import counter_noise, samplers
    from hierdp.privacy.calibration import MAX_GAUSSIAN_SIGMA2, MAX_LAPLACE_SCALE, gaussian_sigma2, laplace_scale
    from hierdp.privacy.errors import PrivacyParameterError

    limit = MAX_LAPLACE_SCALE if kind == "scale" else MAX_GAUSSIAN_SIGMA2
    assert limit in (2.0 ** 48, 2.0 ** 96)
    with pytest.raises(PrivacyParameterError, match="epsilon is too small" if kind == "scale" else "rho is too small"):
        laplace_scale(1e-300, 2) if kind == "scale" else gaussian_sigma2(1e-300, 1)
    draw = samplers.discrete_laplace if kind == "scale" else samplers.discrete_gaussian
    streams = counter_noise.CounterRandom.from_seed(0).nodes(1, np.arange(4))
    by_counter = counter_noise.discrete_laplace if kind == "scale" else counter_noise.discrete_gaussian
    for call in (lambda v: draw(v, (4,), np.random.default_rng(0)), lambda v: by_counter(v, streams)):
        with pytest.raises(PrivacyParameterError, match="overflow"):
            call(limit * 2)
        out = call(limit)  # the limit itself still draws, far inside int64, not all zero
        assert out.dtype == np.int64 and np.all(np.abs(out) < 2 ** 62) and np.any(out != 0)
