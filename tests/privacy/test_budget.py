"""Budgets: input checks, composition, exact splits, conversions; the Accountant's ledger."""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.privacy import (
    Accountant,
    Budget,
    BudgetExceeded,
    PrivacyError,
    PrivacyParameterError,
    approx_dp_to_zcdp,
    zcdp_to_approx_dp,
)
from hierdp.privacy.guarantees import implied_guarantees

BAD_POSITIVE = [0.0, -1.0, float("nan"), float("inf"), "0.5", None, True]
BAD_DELTA = [0.0, 1.0, -0.1, 1.5, float("nan")]


# -- construction ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", BAD_POSITIVE)
def test_bad_epsilon_and_rho_are_named(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        Budget.pure(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        Budget.approx(bad, 1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        Budget.zcdp(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", BAD_DELTA)
def test_bad_delta_is_named(bad: float) -> None:
    with pytest.raises(PrivacyParameterError, match="delta"):
        Budget.approx(1.0, bad)
    with pytest.raises(PrivacyParameterError, match="delta"):
        Budget.zcdp(0.5).to_approx_dp(bad)


def test_properties_and_value_semantics() -> None:
    p, z, a = Budget.pure(1.5), Budget.zcdp(0.25), Budget.approx(2.0, 1e-8)
    assert (p.calculus, p.epsilon, p.delta) == ("pure", 1.5, 0.0)
    assert (z.calculus, z.rho) == ("zcdp", 0.25)
    assert (a.calculus, a.epsilon, a.delta) == ("approx", 2.0, 1e-8)
    assert a.parameters == {"epsilon": 2.0, "delta": 1e-8}
    with pytest.raises(PrivacyError, match="epsilon"):
        _ = z.epsilon
    with pytest.raises(PrivacyError, match="rho"):
        _ = p.rho
    assert Budget.zcdp(0.25) == z and hash(Budget.zcdp(0.25)) == hash(z) and z != p
    with pytest.raises(AttributeError):
        z._rho = Fraction(1)  # type: ignore[misc]
    assert repr(z) == "Budget.zcdp(rho=0.25)"
    for b in (p, z, a):  # budgets travel to process executors
        assert pickle.loads(pickle.dumps(b)) == b and copy.deepcopy(b) == b


# -- composition ----------------------------------------------------------------------------------
def test_sequential_composition_within_and_across_calculi() -> None:
    assert Budget.pure(1.0) + Budget.pure(0.5) == Budget.pure(1.5)
    assert Budget.zcdp(0.1) + Budget.zcdp(0.2) == Budget("zcdp", rho=Fraction(0.1) + Fraction(0.2))
    both = Budget.approx(1.0, 1e-8) + Budget.approx(2.0, 1e-9)
    assert both.epsilon == 3.0 and both.exact_parameters["delta"] == Fraction(1e-8) + Fraction(1e-9)
    # pure eps-DP is (eps**2/2)-zCDP when composed with zCDP (exact rationals).
    mixed = Budget.pure(0.5) + Budget.zcdp(0.1)
    assert mixed.calculus == "zcdp" and mixed.exact_parameters["rho"] == Fraction(1, 8) + Fraction(0.1)
    for a, b in [(Budget.pure(1.0), Budget.approx(1.0, 1e-6)),
                 (Budget.zcdp(1.0), Budget.approx(1.0, 1e-6))]:
        with pytest.raises(PrivacyError, match="cannot compose"):
            _ = a + b
    assert 3 * Budget.zcdp(0.5) == Budget.zcdp(1.5)
    assert sum([Budget.pure(1.0), Budget.pure(2.0)]) == Budget.pure(3.0)


def test_paper_004_table_2_from_table_1_totals() -> None:
    """Pure DP 15.3; zCDP analytic 12.8 and numeric 12.2 at delta = 1e-10 (paper 004 Table 2)."""
    eps_totals = [4.27, 4.27, 2.49, 2.49, 0.59, 0.59, 0.59]
    rho_totals = [0.534, 0.534, 0.159, 0.159, 0.008, 0.008, 0.008]
    pure = sum(Budget.pure(e) for e in eps_totals)
    assert round(pure.epsilon, 1) == 15.3
    zcdp = sum(Budget.zcdp(r) for r in rho_totals)
    assert round(zcdp.to_approx_dp(1e-10, "analytic").epsilon, 1) == 12.8
    assert round(zcdp.to_approx_dp(1e-10).epsilon, 1) == 12.2


# -- splitting ------------------------------------------------------------------------------------
@pytest.mark.parametrize("whole", [Budget.pure(1.0), Budget.zcdp(0.1), Budget.approx(0.3, 1e-9)])
@pytest.mark.parametrize("k", [1, 3, 7, 10, 1000])
def test_split_uniform_composes_back_exactly(whole: Budget, k: int) -> None:
    parts = whole.split_uniform(k)
    assert len(parts) == k and len(set(parts)) == 1
    assert sum(parts) == whole  # exact rational arithmetic: not one ulp more
    acc = Accountant(whole)
    for i, part in enumerate(parts):
        acc.spend(part, f"level {i}")
    assert acc.remaining.is_zero
    with pytest.raises(BudgetExceeded):
        acc.spend(parts[0], "one more")


@pytest.mark.parametrize("proportions", [[0.2, 0.3, 0.5], [1 / 3] * 3, [0.1] * 10, [1.0],
                                         [0.7, 0.2, 0.1]])
def test_split_proportions_compose_back_exactly(proportions: list[float]) -> None:
    whole = Budget.approx(1.7, 1e-7)
    parts = whole.split(proportions)
    assert sum(parts) == whole
    # Ratios are exactly the requested ones (normalisation is exact).
    for part, p in zip(parts, proportions, strict=False):
        assert part.exact_parameters["epsilon"] / whole.exact_parameters["epsilon"] \
            == Fraction(p) / sum(Fraction(q) for q in proportions)
    # Floats of the parts never sum to more than the whole beyond rounding of each part.
    assert math.fsum(p.epsilon for p in parts) <= whole.epsilon * (1 + 1e-15)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=30),
       st.floats(min_value=1e-4, max_value=50))
def test_split_property_exact(weights: list[float], rho: float) -> None:
    total = math.fsum(weights)
    proportions = [w / total for w in weights]
    whole = Budget.zcdp(rho)
    parts = whole.split(proportions)
    assert sum(parts) == whole
    acc = Accountant(whole)
    for part in parts:  # the exact parts are accepted: they compose to the whole exactly
        acc.spend(part, "part")
    assert acc.spent == whole and not acc.can_spend(Budget.zcdp(1e-300))
    # float-rounded parts are accepted exactly when their rational sum stays within the grant
    rounded = [Budget.zcdp(part.rho) for part in parts]
    fits = sum((Fraction(part.rho) for part in parts), Fraction(0)) <= Fraction(rho)
    acc = Accountant(whole)
    try:
        for part in rounded:
            acc.spend(part, "part")
        accepted = True
    except BudgetExceeded:
        accepted = False
    assert accepted == fits


@pytest.mark.parametrize("bad", [[0.5, 0.4], [0.5, 0.6], [1.2, -0.2], [0.0, 1.0],
                                 [float("nan"), 1.0], [], [True]])
def test_bad_proportions(bad: list) -> None:
    with pytest.raises(PrivacyParameterError, match="proportions"):
        Budget.zcdp(1.0).split(bad)
    for k in (0, -2, 1.5, True):
        with pytest.raises(PrivacyParameterError, match="k"):
            Budget.zcdp(1.0).split_uniform(k)  # type: ignore[arg-type]


# -- conversions ----------------------------------------------------------------------------------
def test_conversions() -> None:
    assert Budget.pure(0.4).to_zcdp() == Budget("zcdp", rho=Fraction(0.4) ** 2 / 2)
    target = Budget.approx(1.0, 1e-8)
    rho = target.to_zcdp()
    assert rho.rho == approx_dp_to_zcdp(1.0, 1e-8)
    assert rho.to_approx_dp(1e-8).epsilon <= 1.0  # the target is met
    # paper 000's analytic convention: rho = (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))**2
    log_inv = math.log(1e8)
    # the reference in its cancellation-free form eps / (sqrt(L + eps) + sqrt(L)), squared: a few
    # ulps; the library rounds rho down by at most a few ulps more so that eps is never exceeded
    assert target.to_zcdp("analytic").rho == pytest.approx(
        (1.0 / (math.sqrt(log_inv + 1.0) + math.sqrt(log_inv))) ** 2, rel=1e-13)
    z = Budget.zcdp(0.5)
    assert z.to_approx_dp(1e-6).epsilon == zcdp_to_approx_dp(0.5, 1e-6)
    # pure: the smaller of eps and the zCDP route
    assert Budget.pure(0.5).to_approx_dp(1e-6).epsilon == 0.5
    for eps, delta in [(0.5, 1e-6), (3.0, 1e-3), (0.2, 0.4), (1.0, 0.45)]:
        route = zcdp_to_approx_dp(eps * eps / 2, delta)
        assert Budget.pure(eps).to_approx_dp(delta).epsilon == min(eps, route)  # same computation
    # Composing many small pure steps in zCDP beats pure composition (100 x 0.1-DP).
    as_zcdp = sum(Budget.pure(0.1).to_zcdp() for _ in range(100))
    assert as_zcdp.exact_parameters["rho"] == 100 * Fraction(0.1) ** 2 / 2  # exact rationals
    assert as_zcdp.to_approx_dp(1e-6).epsilon < (Budget.pure(0.1) * 100).epsilon
    with pytest.raises(PrivacyParameterError, match="delta"):
        target.to_approx_dp(1e-9)  # a smaller delta is not implied
    g = {x.method: x for x in implied_guarantees(z, 1e-6)}
    assert {x.calculus for x in g.values()} == {"zcdp", "rdp", "approx"}
    assert g["zCDP, tight numeric (paper 004 eq. 7)"].parameters["epsilon"] == zcdp_to_approx_dp(0.5, 1e-6)
    assert (g["zCDP, tight numeric (paper 004 eq. 7)"].parameters["epsilon"]
            <= g["zCDP, analytic (paper 000 Lemma 3)"].parameters["epsilon"])
    assert {x.calculus for x in implied_guarantees(Budget.pure(1.0))} == {"pure", "zcdp"}
    assert {x.calculus for x in implied_guarantees(target, 1e-6)} == {"approx"}


# -- accountant -----------------------------------------------------------------------------------
def test_overspend_raises_and_leaves_ledger_unchanged() -> None:
    acc = Accountant(Budget.zcdp(1.0))
    acc.spend(Budget.zcdp(0.6), "root")
    before_ledger, before_spent = acc.ledger, acc.spent
    with pytest.raises(BudgetExceeded, match="level 1"):
        acc.spend(Budget.zcdp(0.5), "level 1")
    assert acc.ledger == before_ledger and acc.spent == before_spent
    assert acc.remaining.exact_parameters["rho"] == Fraction(1) - Fraction(0.6)  # exact rationals
    # no tolerance: 1e-13 relative above the remainder is refused, the exact remainder accepted
    with pytest.raises(BudgetExceeded):
        acc.spend(Budget.zcdp(0.4 * (1 + 1e-13)), "level 1")
    acc.spend(acc.remaining, "level 1")
    assert [label for label, _ in acc.ledger] == ["root", "level 1"] and acc.spent == acc.total
    with pytest.raises(BudgetExceeded):
        acc.spend(Budget.zcdp(1e-300), "extra")


def test_accountant_converts_pure_into_zcdp_and_refuses_other_mixes() -> None:
    acc = Accountant(Budget.zcdp(1.0))
    recorded = acc.spend(Budget.pure(1.0), "geometric root")
    assert recorded == Budget.zcdp(0.5)
    with pytest.raises(PrivacyError, match="cannot spend"):
        acc.spend(Budget.approx(0.1, 1e-9), "x")
    with pytest.raises(PrivacyParameterError, match="label"):
        acc.spend(Budget.zcdp(0.1), "")
    with pytest.raises(TypeError):
        acc.spend(0.1, "number")  # type: ignore[arg-type]
    assert len(acc.ledger) == 1


def test_approx_accountant_checks_both_parameters() -> None:
    acc = Accountant(Budget.approx(1.0, 1e-6))
    acc.spend(Budget.approx(0.5, 9e-7), "a")
    assert acc.can_spend(Budget.approx(0.5, 1e-7))
    assert not acc.can_spend(Budget.approx(0.1, 2e-7))  # delta would overflow
    with pytest.raises(BudgetExceeded):
        acc.spend(Budget.approx(0.1, 2e-7), "b")


def test_summary_and_report() -> None:
    acc = Accountant(Budget.zcdp(0.5))
    for i, part in enumerate(Budget.zcdp(0.5).split([0.25, 0.75])):
        acc.spend(part, f"level {i}")
    s = acc.summary(delta=1e-8)
    assert s["calculus"] == "zcdp" and s["total"] == {"rho": 0.5}
    assert s["spent"] == {"rho": 0.5} and s["remaining"] == {"rho": 0.0}
    assert [e["label"] for e in s["ledger"]] == ["level 0", "level 1"]
    numeric = next(g for g in s["implied"] if g["method"].startswith("zCDP, tight numeric"))
    assert numeric["epsilon"] == zcdp_to_approx_dp(0.5, 1e-8)  # the same conversion
    text = acc.report(delta=1e-8)
    for needle in ("zcdp", "level 0", "level 1", "remaining", "approx", "rho=0.5"):
        assert needle in text
    with pytest.raises(PrivacyParameterError):
        Accountant(Budget._zero("zcdp"))


# -- no tolerance above the grant (issue 20, P7) -------------------------------------------------
def test_accountant_refuses_any_excess_exactly() -> None:
    acc = Accountant(Budget.zcdp(1.0))
    assert not acc.can_spend(Budget.zcdp(1 + 5e-13))
    with pytest.raises(BudgetExceeded):
        acc.spend(Budget.zcdp(1 + 5e-13), "just above")
    assert acc.spent.is_zero  # nothing recorded
    acc.spend(Budget.pure(1.0), "half of it as pure")  # eps^2/2 = 0.5 rho
    acc.spend(Budget.zcdp(0.5), "the rest")
    assert acc.spent == Budget.zcdp(1.0)
    refused = 0
    for _ in range(5000):  # dust after the whole grant is gone: every spend refused
        try:
            acc.spend(Budget.zcdp(1e-16), "dust")
        except BudgetExceeded:
            refused += 1
    assert refused == 5000 and acc.spent == Budget.zcdp(1.0)
    pure = Accountant(Budget.pure(0.3))
    pure.spend(Budget.pure(0.1), "a")
    assert Fraction(0.1) + Fraction(0.2) > Fraction(0.3)  # the floats' exact binary values
    with pytest.raises(BudgetExceeded):
        pure.spend(Budget.pure(0.2), "b")  # 0.3000000000000000166... > 0.29999999999999998889...
