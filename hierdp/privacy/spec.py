"""What a mechanism was asked to spend, what that implies, and how a release says it.

* :class:`PrivacySpec` - the budget a mechanism spends, resolved once from exactly one of
  ``epsilon`` (with ``delta``), ``rho`` or a :class:`~hierdp.privacy.budget.Budget`, in the
  calculus its noise lives in: ``"zcdp"`` (discrete Gaussian), ``"pure"`` (geometric / Laplace)
  or ``"approx"`` (noise plus thresholding, e.g. the stability histogram).
* the guarantees a spend implies are :func:`hierdp.privacy.guarantees.implied_guarantees` (one
  function, used by every release and every ledger);
* :func:`describe_guarantee` - the one function that words a guarantee (every release, every
  mechanism, the CLI), so that the same privacy reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence


from hierdp.privacy.conversions import (
    check_delta,
    check_epsilon,
    Method,
    check_rho,
    zcdp_to_approx_dp,
)
from hierdp.privacy.budget import Budget
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.guarantees import Guarantee

__all__ = [
    "CALCULI",
    "PrivacySpec",
    "describe_guarantee",
]

#: The calculi a mechanism's noise can be accounted in.
CALCULI = ("zcdp", "pure", "approx")
_CONVERSIONS = ("analytic", "numeric")
_NOISE_OF = {"zcdp": "discrete Gaussian noise (zCDP)", "pure": "geometric / Laplace noise (pure DP)",
             "approx": "noise with thresholding ((epsilon, delta)-DP)"}


def _method(conversion: str) -> Method:
    """A conversion name, checked (``"analytic"`` or ``"numeric"``)."""
    if conversion not in _CONVERSIONS:
        raise PrivacyParameterError(f"conversion must be 'analytic' or 'numeric', got {conversion!r}")
    return "analytic" if conversion == "analytic" else "numeric"


@dataclass(frozen=True)
class PrivacySpec:
    """The budget a mechanism spends, resolved from what the user gave.

    Attributes:
        budget: the total spent, in the mechanism's calculus (zCDP ρ, pure ε or (ε, δ)).
        delta: δ of the implied (ε, δ) statements (``None``: none requested).
        epsilon_target: the ε the user asked for as an (ε, δ) target (``None`` otherwise).
        conversion: how an (ε, δ) target became ρ: ``"analytic"`` (paper 000 Lemma 3) or
            ``"numeric"`` (the tight conversion).
    """

    budget: Budget
    delta: float | None
    epsilon_target: float | None
    conversion: str = "analytic"

    @property
    def calculus(self) -> str:
        """``"zcdp"``, ``"pure"`` or ``"approx"``."""
        return self.budget.calculus

    @property
    def rho(self) -> float | None:
        """ρ of a zCDP spec; for a pure spec the ρ = ε²/2 it implies; ``None`` for (ε, δ)."""
        if self.calculus == "approx":
            return None
        return float(self.budget.to_zcdp().rho)

    @property
    def epsilon(self) -> float | None:
        """ε of a pure or (ε, δ) spec (``None`` for zCDP: see :meth:`implied_epsilon`)."""
        return None if self.calculus == "zcdp" else float(self.budget.epsilon)

    @classmethod
    def resolve(cls, epsilon: float | None = None, delta: float | None = None, rho: float | None = None,
                budget: Budget | None = None, conversion: str = "analytic", *,
                calculus: str = "zcdp") -> PrivacySpec:
        """Exactly one of ``epsilon`` (with ``delta`` for zCDP), ``rho`` or ``budget``.

        ``calculus`` is the one the mechanism's noise lives in: ``"zcdp"`` accepts an (ε, δ)
        target (converted to the largest ρ meeting it by ``conversion``), a ρ, or any Budget;
        ``"pure"`` accepts ε (``delta`` then only sets the δ of the reported (ε, δ) figures) or a
        pure Budget; ``"approx"`` accepts (ε, δ) or an approx Budget.

        Raises:
            PrivacyParameterError: naming the parameter that is missing, extra or out of range.
        """
        if calculus not in CALCULI:
            raise PrivacyParameterError(f"calculus must be one of {CALCULI}, got {calculus!r}")
        given = [name for name, v in (("epsilon", epsilon), ("rho", rho), ("budget", budget)) if v is not None]
        if len(given) != 1:
            what = "epsilon (with delta), rho, or budget" if calculus == "zcdp" else \
                "epsilon or a pure budget" if calculus == "pure" else "epsilon with delta, or budget"
            raise PrivacyParameterError(
                f"give exactly one of {what}" + (f"; got {', '.join(given)}" if given else "; got none"))
        if conversion not in _CONVERSIONS:
            raise PrivacyParameterError(f"conversion must be 'analytic' or 'numeric', got {conversion!r}")
        d = None if delta is None else check_delta(delta, "delta")
        if budget is not None and not isinstance(budget, Budget):
            raise PrivacyParameterError(f"budget must be a hierdp.privacy.budget.Budget, got {type(budget).__name__}")
        if calculus == "zcdp":
            return cls._resolve_zcdp(epsilon, d, rho, budget, conversion)
        if calculus == "pure":
            if rho is not None:
                raise PrivacyParameterError(
                    f"rho: this mechanism's noise is pure epsilon-DP (geometric / Laplace); give epsilon, "
                    f"not rho={rho!r} (zCDP does not imply pure DP)")
            if budget is not None and budget.calculus != "pure":
                raise PrivacyParameterError(f"budget: this mechanism needs a pure epsilon budget, got {budget}")
            b = budget if budget is not None else Budget.pure(check_epsilon(epsilon, "epsilon"))
            return cls(b, d, None, conversion)
        # approx
        if rho is not None:
            raise PrivacyParameterError(
                f"rho: this mechanism is (epsilon, delta)-DP (noise plus a threshold), not zCDP; give epsilon and "
                f"delta, not rho={rho!r}")
        if budget is not None:
            if budget.calculus != "approx":
                raise PrivacyParameterError(f"budget: this mechanism needs an (epsilon, delta) budget, got {budget}")
            return cls(budget, float(budget.delta), float(budget.epsilon), conversion)
        if d is None:
            raise PrivacyParameterError("delta: this mechanism is (epsilon, delta)-DP; give delta with epsilon")
        eps = check_epsilon(epsilon, "epsilon")
        return cls(Budget.approx(eps, d), d, eps, conversion)

    @classmethod
    def _resolve_zcdp(cls, epsilon: float | None, delta: float | None, rho: float | None, budget: Budget | None,
                      conversion: str) -> PrivacySpec:
        if epsilon is not None:
            eps = check_epsilon(epsilon, "epsilon")
            if delta is None:
                raise PrivacyParameterError(
                    "delta: epsilon needs delta (zCDP Gaussian noise gives (epsilon, delta)-DP)")
            return cls(Budget.approx(eps, delta).to_zcdp(_method(conversion)), delta, eps, conversion)
        if rho is not None:
            return cls(Budget.zcdp(check_rho(rho, "rho")), delta, None, conversion)
        assert budget is not None
        if budget.calculus == "approx":
            return cls(budget.to_zcdp(_method(conversion)), float(budget.delta), float(budget.epsilon), conversion)
        return cls(budget.to_zcdp(), delta, None, conversion)

    def implied_epsilon(self, method: str | None = None) -> float | None:
        """ε of the (ε, δ)-DP guarantee implied at ``self.delta`` (``None`` without δ)."""
        if self.delta is None:
            return None
        if self.calculus == "approx":
            return float(self.budget.epsilon)
        eps = zcdp_to_approx_dp(float(self.budget.to_zcdp().rho), self.delta, _method(method or self.conversion))
        return min(eps, float(self.budget.epsilon)) if self.calculus == "pure" else float(eps)


def _best(guarantees: Sequence[Guarantee], calculus: str, method_prefix: str = "") -> Guarantee | None:
    cands = [g for g in guarantees if g.calculus == calculus and g.valid and g.method.startswith(method_prefix)]
    if not cands:
        return None
    key = {"pure": "epsilon", "zcdp": "rho", "approx": "epsilon", "rdp": "tau"}[calculus]
    return min(cands, key=lambda g: g.parameters[key])


def describe_guarantee(accounting: Any) -> str:
    """The guarantee of a release in words, the same for every mechanism.

    Reads ``accounting.total``, ``.unit`` (a :class:`~hierdp.privacy.unit.PrivacyUnit` or ``None``),
    ``.delta``, ``.guarantees``, ``.notes`` and ``.assumptions`` (any object with these attributes,
    normally a :class:`hierdp.release.Accounting`). Examples::

        0.0132154-zCDP (bounded neighbours (n public), m=1 records per person), implies (1, 1e-08)-DP
        by Lemma 3 [tight: (0.870686, 1e-08)-DP]
        1-DP (pure; unbounded neighbours, m=1 records per person), implies 0.5-zCDP
        (1, 1e-06)-DP (bounded neighbours (n public), m=1 trips per person; stability histogram, Thm 8)
    """
    total: Budget = accounting.total
    unit = getattr(accounting, "unit", None)
    who = unit.describe() if unit is not None and hasattr(unit, "describe") else ""
    gs = tuple(getattr(accounting, "guarantees", ()) or ())
    delta = getattr(accounting, "delta", None)
    calc = total.calculus
    if calc == "zcdp":
        s = f"{float(total.rho):.6g}-zCDP ({who})" if who else f"{float(total.rho):.6g}-zCDP"
        a, n = _best(gs, "approx", "zCDP, analytic"), _best(gs, "approx", "zCDP, tight")
        if a is not None and n is not None:
            s += (f", implies ({a.parameters['epsilon']:.6g}, {delta:.3g})-DP by Lemma 3 "
                  f"[tight: ({n.parameters['epsilon']:.6g}, {delta:.3g})-DP]")
    elif calc == "pure":
        s = f"{float(total.epsilon):.6g}-DP (pure; {who})" if who else f"{float(total.epsilon):.6g}-DP (pure)"
        z = _best(gs, "zcdp")
        if z is not None:
            s += f", implies {z.parameters['rho']:.6g}-zCDP"
        best = _best([g for g in gs if g.parameters.get("delta", 0.0) > 0], "approx")
        if best is not None and best.parameters["epsilon"] < float(total.epsilon):
            s += f" and ({best.parameters['epsilon']:.6g}, {delta:.3g})-DP by {best.method}"
    else:
        s = f"({float(total.epsilon):.6g}, {float(total.delta):.3g})-DP" + (f" ({who})" if who else "")
    notes = [str(x) for x in getattr(accounting, "notes", ()) or ()]
    if notes:
        s += "; " + "; ".join(notes)
    assumptions = [str(x) for x in getattr(accounting, "assumptions", ()) or ()]
    if assumptions:
        s += "; assumes: " + "; ".join(assumptions)
    return s
