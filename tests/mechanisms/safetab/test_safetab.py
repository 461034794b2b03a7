"""SafeTab (paper 004): published Tables 2 and 4, the adaptive tabulation, coverage of the stated
MOE, and bad input refused before any noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms.safetab import AGE_BINS, PopulationGroupLevel, SafeTab, SafeTabError, StabilityError
from hierdp.mechanisms.safetab.guarantee import (
    PAPER_ALPHAS,
    level_budgets_for_moe,
    rdp_curve_geometric_levels,
    safetab_accounting,
)
from hierdp.privacy.conversions import rdp_epsilon_term, zcdp_to_approx_dp
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.errors import BudgetExceeded
from hierdp.privacy.moe import discrete_gaussian_rho_for_moe, geometric_epsilon_for_moe

MOE = [6, 6, 11, 11, 50, 50, 50]
S, GAMMA, DELTA = 9, 0.1, 1e-10


# ----------------------------------------------------------------------------- Table 4 / Table 1
def test_table4_cells_that_match_as_published():
    geo = level_budgets_for_moe(MOE, S, noise="geometric", gamma=GAMMA, method="paper")
    dg = level_budgets_for_moe(MOE, S, noise="discrete_gaussian", gamma=GAMMA, method="paper")
    assert round(geo[4], 2) == 0.59                         # geometric total, MOE 50
    assert [round(x, 3) for x in dg[2:]] == [0.159, 0.159, 0.008, 0.008, 0.008]
    assert [round(0.9 * x, 3) for x in dg[2:]] == [0.143, 0.143, 0.007, 0.007, 0.007]


def test_table4_cells_one_unit_off_and_why():
    # zCDP MOE 6: eq. 37's 1.92 gives 0.53333 (-> 0.533); the table used 1.96^2/2 (-> 0.534)
    dg6 = level_budgets_for_moe([6], S, noise="discrete_gaussian", gamma=GAMMA, method="paper")[0]
    assert dg6 == pytest.approx(0.533333, abs=1e-6) and round(dg6, 3) == 0.533
    assert round(S * 1.96 ** 2 / 2 / 36 / (1 - GAMMA), 3) == 0.534
    # geometric MOE 6 / 11: 4.2796 / 2.4964 round up; published 4.27 / 2.49 (ln 20 ~ 2.99)
    geo = level_budgets_for_moe([6, 11, 50], S, noise="geometric", gamma=GAMMA, method="paper")
    np.testing.assert_allclose(geo, [4.279618, 2.496444, 0.587398], atol=1e-6)
    assert [round(S * 2.99 / (m + 1) / (1 - GAMMA), 2) for m in (6, 11, 50)] == [4.27, 2.49, 0.59]
    # every published Step 2 cell is 0.9 x the published Total, rounded
    published = {6: (3.84, 4.27, 0.481, 0.534), 11: (2.24, 2.49, 0.143, 0.159),
                 50: (0.531, 0.59, 0.007, 0.008)}
    for g2, gt, z2, zt in published.values():
        assert round(0.9 * gt, 3 if gt < 1 else 2) == g2
        assert round(0.9 * zt, 3) == z2


# ----------------------------------------------------------------------------- Table 2
def test_table2_pure_and_zcdp_values_as_published():
    geo = level_budgets_for_moe(MOE, S, noise="geometric", gamma=GAMMA, method="paper")
    dg = level_budgets_for_moe(MOE, S, noise="discrete_gaussian", gamma=GAMMA, method="paper")
    acc_g = safetab_accounting(geo, [S] * 7, noise="geometric", gamma=GAMMA, delta=DELTA)
    acc_d = safetab_accounting(dg, [S] * 7, noise="discrete_gaussian", gamma=GAMMA, delta=DELTA)
    assert round(acc_g.pure_epsilon, 1) == 15.3
    assert round(acc_d.approx["zcdp_analytic"], 1) == 12.8
    assert round(acc_d.approx["zcdp_numeric"], 1) == 12.2
    assert round(acc_d.approx["rdp_paper_grid"], 1) == 12.2       # the paper's alpha grid
    # independent: eq. 8 and eq. 7 by hand
    rho = sum(1.92 / m ** 2 * S / (1 - GAMMA) for m in MOE)
    assert rho + 2 * math.sqrt(rho * math.log(1 / DELTA)) == pytest.approx(
        acc_d.approx["zcdp_analytic"])
    a = PAPER_ALPHAS
    by_hand = np.min(rho * a + (math.log(1 / DELTA) + (a - 1) * np.log(1 - 1 / a) - np.log(a)) / (a - 1))
    assert by_hand == pytest.approx(acc_d.approx["rdp_paper_grid"], rel=1e-12)
    # the same from the printed (rounded) Table 4 totals
    printed_rho = 2 * 0.534 + 2 * 0.159 + 3 * 0.008
    assert round(zcdp_to_approx_dp(printed_rho, DELTA, "analytic"), 1) == 12.8
    assert round(zcdp_to_approx_dp(printed_rho, DELTA, "numeric"), 1) == 12.2


def test_table2_rdp_value_is_not_reproduced_by_the_papers_formulas():
    geo = level_budgets_for_moe(MOE, S, noise="geometric", gamma=GAMMA, method="paper")
    term = rdp_epsilon_term(PAPER_ALPHAS, DELTA)
    cor1 = (rdp_curve_geometric_levels(PAPER_ALPHAS, geo, [S] * 7, GAMMA, formula="paper") + term)
    assert round(cor1.min(), 2) == 13.57 and PAPER_ALPHAS[np.argmin(cor1)] == pytest.approx(7.36)
    s10 = (rdp_curve_geometric_levels(PAPER_ALPHAS, geo, [10] * 7, GAMMA, formula="paper") + term)
    assert round(s10.min(), 1) == 13.2                    # the published cell, if s were 10
    acc = safetab_accounting(geo, [S] * 7, noise="geometric", gamma=GAMMA, delta=DELTA)
    assert round(acc.approx["rdp"], 2) == 14.19            # exact discrete divergence (valid)
    assert acc.approx["rdp_paper_cor1"] == pytest.approx(cor1.min())
    assert acc.best_epsilon == pytest.approx(acc.approx["rdp"])  # 14.19 < 15.31 < 18.0 (zCDP)


# ----------------------------------------------------------------------------- the mechanism
def _frame(n_per_group: dict[str, int], seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    groups = np.concatenate([[g] * n for g, n in n_per_group.items()])
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], groups.size),
                       "age": rng.integers(0, 100, groups.size), "grp": groups})
    df.index = [f"p{i}" for i in range(len(df))]
    pairs = pd.DataFrame({"record": df.index, "group": df["grp"].to_numpy()})
    return df, pairs


def test_thresholds_select_the_tabulation():
    # eps = 80 per count: P(noise != 0) ~ 2e-35, so the noisy total is the true total.
    sizes = {"tiny": 5, "at_theta1": 10, "small": 50, "mid": 500, "big": 5000}
    df, pairs = _frame(sizes)
    for noise, budget in (("geometric", 800.0), ("discrete_gaussian", 5e4)):
        rel = SafeTab([PopulationGroupLevel("L", budget, 1, pairs, total_only=["mid"])], noise=noise, thresholds=(10,
                      100, 1000), include_true=True, observed_domain_public=True).release(df, seed=1)
        tab = rel.frame.groupby("group", observed=True)["tabulation"].first().astype(str).to_dict()
        assert tab == {"tiny": "total", "at_theta1": "sex_age4", "small": "sex_age4",
                       "mid": "total_only", "big": "sex_age23"}
        f = rel.frame
        assert (f["noisy_count"] == f["true_count"]).all()
        sums = f.groupby("group", observed=True)["true_count"].sum()
        assert sums.to_dict() == sizes
        cells = f.groupby("group", observed=True).size().to_dict()
        assert cells == {"tiny": 1, "at_theta1": 8, "small": 8, "mid": 1, "big": 46}
    df2, pairs2 = _frame({"g": 500})
    rel = SafeTab([PopulationGroupLevel("L", 800.0, 1, pairs2)], thresholds=(10, 100, 1000),
                  observed_domain_public=True).release(df2, seed=2)
    assert set(rel.frame["tabulation"].astype(str)) == {"sex_age9"}
    assert len(rel.frame) == 2 * len(AGE_BINS["age9"])


@pytest.mark.parametrize("noise", ["geometric", "discrete_gaussian"])
def test_stated_moe_covers_95_percent_over_2000_runs(noise):
    df, pairs = _frame({"a": 40, "b": 300, "c": 3000}, seed=3)
    moe_target, s = 6, 2
    base = geometric_epsilon_for_moe(moe_target) if noise == "geometric" \
        else discrete_gaussian_rho_for_moe(moe_target)
    budget = s * base / (1 - GAMMA)
    pairs2 = pd.concat([pairs, pairs.assign(group="all")], ignore_index=True)   # stability 2
    mech = SafeTab([PopulationGroupLevel("L", budget, s, pairs2)], noise=noise, thresholds=(50, 500, 5000),
                   gamma=GAMMA, repetitions=2000, include_true=True, observed_domain_public=True)
    rel = mech.release(df, seed=11)
    f = rel.frame
    assert (f["moe"] == moe_target).all()
    assert f["run"].nunique() == 2000
    cover = (np.abs(f["noisy_count"] - f["true_count"]) <= f["moe"]).mean()
    assert 0.94 <= cover <= 0.96
    assert mech.observed_stability(df) == {"L": 2} and not hasattr(rel, "observed_stability")


def test_release_accounting_in_every_calculus():
    df, pairs = _frame({"a": 40, "b": 300})
    lv = [PopulationGroupLevel("A", 1.0, 1, pairs), PopulationGroupLevel("B", 2.0, 1, pairs,
                                                                         total_only=True)]
    g = SafeTab(lv, observed_domain_public=True).release(df, seed=0).accounting
    # sums and squares of binary-exact budgets (1, 2, 0.1 * 1, 0.9 * 1): a few ulps at most
    assert g.pure_epsilon == pytest.approx(3.0)
    assert g.approx["pure"] == pytest.approx(3.0)
    assert g.branches == ((True, False), (False, True))
    # zCDP of the geometric release: level A two-stage 0.1^2/2 + 0.9^2/2, level B 2^2/2
    assert g.zcdp_rho == pytest.approx((0.01 + 0.81) / 2 + 2.0)
    assert g.best_epsilon <= 3.0
    d = SafeTab(lv, noise="discrete_gaussian", observed_domain_public=True).release(df, seed=0).accounting
    assert d.zcdp_rho == pytest.approx(3.0) and math.isinf(d.pure_epsilon)
    np.testing.assert_allclose(d.rdp(np.array([2.0, 5.0])), [6.0, 15.0])


def test_accountant_is_charged():
    df, pairs = _frame({"a": 40})
    acc = Accountant(Budget.pure(5.0))
    SafeTab([PopulationGroupLevel("A", 2.0, 1, pairs)], observed_domain_public=True).release(df, seed=0, accountant=acc)
    assert acc.spent.epsilon == pytest.approx(2.0)
    accz = Accountant(Budget.zcdp(1.0))
    SafeTab([PopulationGroupLevel("A", 0.4, 1, pairs)], noise="discrete_gaussian",
            observed_domain_public=True).release(df, seed=0, accountant=accz)
    assert accz.spent.rho == pytest.approx(0.4)


# ----------------------------------------------------------------------------- bad input
def _state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


@pytest.mark.parametrize("case", ["overspend", "stability", "thresholds", "column", "universe",
                                  "record", "gamma", "total_only", "sex_value"])
def test_bad_input_raises_before_any_noise(case):
    df, pairs = _frame({"a": 40, "b": 30})
    double = pd.concat([pairs, pairs.assign(group="all")], ignore_index=True)
    kwargs: dict = {}
    level = PopulationGroupLevel("A", 1.0, 1, pairs)
    acc = Accountant(Budget.pure(0.5))
    expected: type[Exception] = SafeTabError
    if case == "overspend":
        kwargs["accountant"], expected = acc, BudgetExceeded
    elif case == "stability":
        level, expected = PopulationGroupLevel("A", 1.0, 1, double), StabilityError
    elif case == "thresholds":
        kwargs["thresholds"] = (100, 10, 1000)
    elif case == "column":
        kwargs["age"] = "AGEP"
    elif case == "universe":
        level = PopulationGroupLevel("A", 1.0, 1, pairs, universe=["a"])
    elif case == "record":
        level = PopulationGroupLevel("A", 1.0, 1, pairs.assign(record="nobody"))
    elif case == "gamma":
        kwargs["gamma"] = 1.0
    elif case == "total_only":
        level = PopulationGroupLevel("A", 1.0, 1, pairs, total_only=["zzz"])
    elif case == "sex_value":
        kwargs["sex_values"] = ["F"]
    rng = np.random.default_rng(123)
    before = _state(rng)
    with pytest.raises(expected) as info:
        accountant = kwargs.pop("accountant", None)
        SafeTab([level], observed_domain_public=True, **kwargs).release(df, rng=rng, accountant=accountant)
    assert _state(rng) == before, "noise was drawn before the error"
    assert acc.spent.is_zero
    if case == "stability":
        assert "observed stability 2 exceeds the declared stability 1" in str(info.value)
    if case == "column":
        assert "AGEP" in str(info.value)


# ----------------------------------------------------------------------------- hierarchy helpers
def test_population_groups_and_consistent_totals():
    from hierdp.hierarchy import Hierarchy
    from hierdp.mechanisms.safetab.groups import (
        consistent_totals,
        geography_entities,
        population_groups,
        race_iterations,
    )

    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame({"state": rng.choice(["CA", "NY", "TX"], n), "sex": rng.choice(["F", "M"], n),
                       "age": rng.integers(18, 90, n)})
    geo = Hierarchy.from_frame(df, levels=["state"])
    codes = pd.DataFrame({"record": np.arange(n), "code": rng.choice(["W", "B", "A"], n)})
    extra = codes.sample(50, random_state=1).assign(code="B")      # multi-race records
    codes = pd.concat([codes, extra], ignore_index=True).drop_duplicates()
    its = race_iterations(codes, {"White": ["W"], "Black": ["B"], "Asian or Black": ["A", "B"]})
    # a multi-race W+B record is "White alone or in combination" but not "White alone"
    multi = set(extra["record"]) & set(codes.loc[codes["code"] == "W", "record"])
    white_alone = set(its.loc[its["iteration"] == "White alone", "record"])
    assert multi and not (multi & white_alone)
    levels = []
    for lvl in ("total", "state"):
        ent = geography_entities(df, geo, lvl if lvl != "total" else 0)
        pairs, universe = population_groups(ent, its)
        levels.append(PopulationGroupLevel(lvl, 50.0, 6, pairs, universe=universe,
                                           total_only=True))
    rel = SafeTab(levels).release(df, seed=3)
    f = rel.frame
    white = f[f["group"].astype(str).str.endswith("|White alone or in combination")]
    noisy = {g.split("|")[0]: v for g, v in zip(white["group"].astype(str), white["noisy_count"], strict=False)}
    out = consistent_totals(geo, noisy, solver="highs")
    assert out["total"] == out[["CA", "NY", "TX"]].sum()
    assert (out >= 0).all() and np.allclose(out, np.round(out))


def test_secure_rng_and_paper_moe():
    from hierdp.privacy.rng import make_rng

    df, pairs = _frame({"a": 30, "b": 12})
    rel = SafeTab([PopulationGroupLevel("A", 1.0, 1, pairs)], thresholds=(20, 200, 2000), noise="discrete_gaussian",
                  moe_method="paper", observed_domain_public=True).release(df, rng=make_rng(secure=True))
    f = rel.frame
    assert np.issubdtype(f["noisy_count"].dtype, np.integer)
    # paper's discrete Gaussian MOE floor(1.96 sigma) with rho = 0.9 per Step-2 count
    assert set(f["moe"]) == {math.floor(1.96 * math.sqrt(1 / (2 * 0.9)))}
