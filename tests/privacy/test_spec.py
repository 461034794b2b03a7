"""Privacy specs: exactly one budget, named errors, extreme values; implied guarantees against
independent high-precision formulas; one wording."""

from __future__ import annotations

import math

import mpmath
import pytest

from hierdp.privacy.budget import Budget
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.guarantees import implied_guarantees
from hierdp.privacy.spec import PrivacySpec, describe_guarantee
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import Accounting


def _analytic_eps(rho: float, delta: float) -> float:
    """rho + 2 sqrt(rho log(1/delta)) at 50 digits (paper 000 Lemma 3)."""
    with mpmath.workdps(50):
        r = mpmath.mpf(rho)
        return float(r + 2 * mpmath.sqrt(r * mpmath.log(1 / mpmath.mpf(delta))))


def _tight_eps(rho: float, delta: float) -> float:
    """min over alpha of rho*alpha + (log(1/delta) + (alpha-1) log(1-1/alpha) - log(alpha))/(alpha-1)
    (paper 004 eq. 7), minimised by mpmath at 50 digits from the analytic optimum."""
    with mpmath.workdps(50):
        r, d = mpmath.mpf(rho), mpmath.mpf(delta)

        def f(a):
            return r * a + (mpmath.log(1 / d) + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)) / (a - 1)

        a0 = 1 + mpmath.sqrt(mpmath.log(1 / d) / r)
        a_star = mpmath.findroot(lambda a: mpmath.diff(f, a), a0)
        return float(f(a_star))


@pytest.mark.parametrize("kwargs,culprit", [
    ({}, "got none"),
    ({"epsilon": 1.0, "rho": 0.1, "delta": 1e-8}, "epsilon, rho"),
    ({"epsilon": 1.0}, "delta"),
    ({"epsilon": -1.0, "delta": 1e-8}, "epsilon"),
    ({"epsilon": float("nan"), "delta": 1e-8}, "epsilon"),
    ({"epsilon": 1.0, "delta": 1.5}, "delta"),
    ({"rho": 0.0}, "rho"),
    ({"rho": "0.1"}, "rho"),
    ({"budget": 0.5}, "budget"),
    ({"epsilon": 1.0, "delta": 1e-8, "conversion": "exact"}, "conversion"),
])
def test_resolve_refuses_bad_specs_naming_the_parameter(kwargs, culprit):
    with pytest.raises(PrivacyParameterError, match=culprit):
        PrivacySpec.resolve(**kwargs)


def test_resolve_in_each_calculus():
    z = PrivacySpec.resolve(rho=0.25, delta=1e-6)
    assert z.calculus == "zcdp" and z.rho == 0.25 and z.epsilon is None
    p = PrivacySpec.resolve(epsilon=2.0, calculus="pure")
    assert p.calculus == "pure" and p.epsilon == 2.0 and p.rho == 2.0  # eps^2/2 exactly
    with pytest.raises(PrivacyParameterError, match="rho"):
        PrivacySpec.resolve(rho=0.1, calculus="pure")
    with pytest.raises(PrivacyParameterError, match="budget"):
        PrivacySpec.resolve(budget=Budget.zcdp(0.1), calculus="pure")
    a = PrivacySpec.resolve(epsilon=1.0, delta=1e-6, calculus="approx")
    assert a.calculus == "approx" and a.rho is None
    with pytest.raises(PrivacyParameterError, match="rho"):
        PrivacySpec.resolve(rho=0.1, calculus="approx")
    with pytest.raises(PrivacyParameterError, match="delta"):
        PrivacySpec.resolve(epsilon=1.0, calculus="approx")
    # an (eps, delta) budget given to a zCDP mechanism is a target, converted like epsilon=
    b = PrivacySpec.resolve(budget=Budget.approx(1.0, 1e-8))
    assert b.rho == PrivacySpec.resolve(epsilon=1.0, delta=1e-8).rho and b.epsilon_target == 1.0


def test_extreme_epsilons_give_clear_messages():
    # tiny: named, not "total must be a positive budget"
    with pytest.raises(PrivacyParameterError, match=r"epsilon=1e-300 .*too small"):
        PrivacySpec.resolve(epsilon=1e-300, delta=1e-8)
    # huge: resolves, and its implied (eps, delta) is finite and no internal array leaks out
    for eps in (1e20, 1e300):
        spec = PrivacySpec.resolve(epsilon=eps, delta=1e-8)
        tight = spec.implied_epsilon("numeric")
        # the tight conversion is never looser than the analytic one, whose round trip returns eps;
        # relative slack 1e-12: both are float evaluations of closed forms at magnitude eps
        assert 0 < tight <= eps * (1 + 1e-12)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.3, 2.0, 50.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_zcdp_guarantees_match_high_precision_formulas(rho, delta):
    gs = implied_guarantees(Budget.zcdp(rho), delta)
    by = {(g.calculus, g.method.split(",")[1].strip() if "," in g.method else g.method): g for g in gs}
    assert by[("zcdp", "as spent")].parameters["rho"] == rho
    analytic = by[("approx", "analytic (paper 000 Lemma 3)")].parameters["epsilon"]
    tight = by[("approx", "tight numeric (paper 004 eq. 7)")].parameters["epsilon"]
    # analytic: a closed form in doubles, a few ulps from the 50-digit value
    assert analytic == pytest.approx(_analytic_eps(rho, delta), rel=1e-13)
    # tight: a numeric minimum; the library's value is a valid bound (the objective at a real order),
    # so it is >= the true minimum, and within the minimiser's tolerance of it (1e-9 relative)
    ref = _tight_eps(rho, delta)
    assert ref * (1 - 1e-12) <= tight <= ref * (1 + 1e-9)
    rdp = next(g for g in gs if g.calculus == "rdp")
    assert rdp.parameters["tau"] == pytest.approx(rho * rdp.parameters["alpha"], rel=1e-15)


def test_pure_guarantees():
    gs = implied_guarantees(Budget.pure(0.5), 1e-8)
    cal = {g.calculus for g in gs}
    assert cal == {"pure", "zcdp", "rdp", "approx"}
    z = next(g for g in gs if g.calculus == "zcdp")
    assert z.parameters["rho"] == 0.125  # eps^2 / 2, exact in binary
    assert any(g.calculus == "approx" and g.parameters == {"epsilon": 0.5, "delta": 0.0} for g in gs)
    # every valid (eps, delta>0) figure is a true implication: none may beat the pure epsilon by
    # more than what RDP can give; at eps = 0.5, delta = 1e-8 none is below 0.5
    assert min(g.parameters["epsilon"] for g in gs if g.calculus == "approx") == 0.5


def test_one_wording_for_every_calculus():
    unit = PrivacyUnit()
    z = Accounting(mechanism="m", total=Budget.zcdp(0.0132154), unit=unit, delta=1e-8)
    assert describe_guarantee(z).startswith("0.0132154-zCDP (bounded neighbours (n public), m=1 records per person), "
                                            "implies (")
    assert "by Lemma 3 [tight: (" in z.text()
    p = Accounting(mechanism="m", total=Budget.pure(1.0), unit=PrivacyUnit(bounded=False), notes=("values rounded",),
                   assumptions=("the observed domain is public",))
    assert p.text() == ("1-DP (pure; unbounded neighbours, m=1 records per person), implies 0.5-zCDP; values rounded; "
                        "assumes: the observed domain is public")
    a = Accounting(mechanism="m", total=Budget.approx(1.0, 1e-6), unit=unit, delta=1e-6)
    assert a.text() == "(1, 1e-06)-DP (bounded neighbours (n public), m=1 records per person)"
    spec = PrivacySpec.resolve(epsilon=1.0, delta=1e-8)
    assert math.isclose(spec.implied_epsilon("analytic"), 1.0, rel_tol=1e-12)
