"""Typed privacy budgets (:class:`Budget`) and a spending ledger (:class:`Accountant`).

A :class:`Budget` is an immutable value in one *calculus*:

* ``"pure"``   - epsilon-DP;
* ``"zcdp"``   - rho-zCDP;
* ``"approx"`` - (epsilon, delta)-DP.

Parameters are stored as exact :class:`fractions.Fraction` (the exact binary value of the float
given), so that splitting a budget and composing the parts gives back exactly the whole: no
rounding can make the parts of a split add up to more than what the user granted.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real
from typing import Any, Literal
from collections.abc import Iterable

from hierdp.privacy.conversions import (
    Method,
    approx_dp_to_zcdp,
    check_delta,
    check_epsilon,
    check_rho,
    zcdp_to_approx_dp,
)
from hierdp.privacy.guarantees import implied_guarantees
from hierdp.privacy.errors import BudgetExceeded, PrivacyError, PrivacyParameterError

__all__ = ["Accountant", "Budget", "Calculus"]

Calculus = Literal["pure", "zcdp", "approx"]
_ZERO = Fraction(0)
_SPLIT_SUM_TOL = 1e-12


def _exact(value: object, name: str, check: Any) -> Fraction:
    """``value`` validated by ``check`` and converted to an exact Fraction."""
    check(value, name)
    if isinstance(value, (Fraction, int)) and not isinstance(value, bool):
        return Fraction(value)
    return Fraction(float(value))  # type: ignore[arg-type]


def _check_non_negative(value: object, name: str) -> None:
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, (Real, Fraction)):
        raise PrivacyParameterError(f"{name} must be a number, got {value!r}")
    if not (math.isfinite(float(value)) and float(value) >= 0):
        raise PrivacyParameterError(f"{name} must be finite and >= 0, got {value!r}")


class Budget:
    """An immutable privacy budget in one calculus (see the module docstring).

    Build with :meth:`pure`, :meth:`zcdp` or :meth:`approx`. ``a + b`` is sequential
    composition; ``k * a`` is k-fold composition; :meth:`split_uniform` / :meth:`split` divide a
    budget into parts that compose back exactly to it.
    """

    __slots__ = ("_calculus", "_delta", "_epsilon", "_rho")

    _calculus: str
    _epsilon: Fraction | None
    _rho: Fraction | None
    _delta: Fraction | None

    def __init__(self, calculus: str, *, epsilon: Fraction | None = None,
                 rho: Fraction | None = None, delta: Fraction | None = None) -> None:
        # Low-level: accepts zero (an empty spend). Users call pure / zcdp / approx.
        if calculus not in ("pure", "zcdp", "approx"):
            raise PrivacyParameterError(
                f"calculus must be 'pure', 'zcdp' or 'approx', got {calculus!r}")
        needed = {"pure": ("epsilon",), "zcdp": ("rho",), "approx": ("epsilon", "delta")}[calculus]
        given = {"epsilon": epsilon, "rho": rho, "delta": delta}
        for name, value in given.items():
            if (value is None) == (name in needed):
                raise PrivacyParameterError(
                    f"{name}: a {calculus} budget takes exactly {', '.join(needed)}")
            if value is not None:
                given[name] = _exact(value, name, _check_non_negative)
        epsilon, rho, delta = given["epsilon"], given["rho"], given["delta"]
        if delta is not None and delta >= 1:
            raise PrivacyParameterError(f"delta must be below 1, got {float(delta)}")
        object.__setattr__(self, "_calculus", calculus)
        object.__setattr__(self, "_epsilon", epsilon)
        object.__setattr__(self, "_rho", rho)
        object.__setattr__(self, "_delta", delta)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Budget is immutable")

    def __reduce__(self) -> tuple:
        # Pickle / copy support (budgets travel to process executors) despite __setattr__.
        return (_rebuild_budget, self._key())

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: float | Fraction) -> Budget:
        """epsilon-DP, epsilon finite and > 0."""
        return cls("pure", epsilon=_exact(epsilon, "epsilon", check_epsilon))

    @classmethod
    def zcdp(cls, rho: float | Fraction) -> Budget:
        """rho-zCDP, rho finite and > 0."""
        return cls("zcdp", rho=_exact(rho, "rho", check_rho))

    @classmethod
    def approx(cls, epsilon: float, delta: float) -> Budget:
        """(epsilon, delta)-DP, epsilon finite and > 0, delta in (0, 1)."""
        return cls("approx", epsilon=_exact(epsilon, "epsilon", check_epsilon),
                   delta=_exact(delta, "delta", check_delta))

    @classmethod
    def _zero(cls, calculus: str) -> Budget:
        if calculus == "pure":
            return cls("pure", epsilon=_ZERO)
        if calculus == "zcdp":
            return cls("zcdp", rho=_ZERO)
        return cls("approx", epsilon=_ZERO, delta=_ZERO)

    # -- parameters -------------------------------------------------------------------------
    @property
    def calculus(self) -> str:
        """``"pure"``, ``"zcdp"`` or ``"approx"``."""
        return self._calculus

    @property
    def epsilon(self) -> float:
        """epsilon of a pure or approx budget (a zCDP budget has none: use to_approx_dp)."""
        if self._epsilon is None:
            raise PrivacyError("a zcdp budget has no epsilon; use .to_approx_dp(delta)")
        return float(self._epsilon)

    @property
    def rho(self) -> float:
        """rho of a zCDP budget (for a pure budget use .to_zcdp().rho)."""
        if self._rho is None:
            raise PrivacyError(f"a {self._calculus} budget has no rho; use .to_zcdp()")
        return float(self._rho)

    @property
    def delta(self) -> float:
        """delta of an approx budget; 0.0 for a pure budget (zCDP has none: use to_approx_dp)."""
        if self._calculus == "pure":
            return 0.0
        if self._delta is None:
            raise PrivacyError("a zcdp budget has no delta; use .to_approx_dp(delta)")
        return float(self._delta)

    @property
    def parameters(self) -> dict[str, float]:
        """The calculus' own parameters as floats, e.g. ``{"rho": 0.5}``."""
        return {k: float(v) for k, v in self.exact_parameters.items()}

    @property
    def exact_parameters(self) -> dict[str, Fraction]:
        """The calculus' own parameters as exact Fractions."""
        if self._calculus == "pure":
            return {"epsilon": self._epsilon}  # type: ignore[dict-item]
        if self._calculus == "zcdp":
            return {"rho": self._rho}  # type: ignore[dict-item]
        return {"epsilon": self._epsilon, "delta": self._delta}  # type: ignore[dict-item]

    @property
    def is_zero(self) -> bool:
        """True for an empty budget (nothing spent)."""
        return all(v == 0 for v in self.exact_parameters.values())

    # -- value semantics ----------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self._calculus, self._epsilon, self._rho, self._delta)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Budget) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={float(v)!r}" for k, v in self.exact_parameters.items())
        return f"Budget.{self._calculus}({args})"

    def __str__(self) -> str:
        names = {"epsilon": "eps", "rho": "rho", "delta": "delta"}
        args = ", ".join(f"{names[k]}={float(v):.6g}" for k, v in self.exact_parameters.items())
        return f"{self._calculus}({args})"

    # -- composition ----------------------------------------------------------------------------
    def _common_calculus(self, other: Budget) -> tuple[Budget, Budget]:
        """Both operands in one calculus: pure is converted to zCDP when the other is zCDP."""
        if not isinstance(other, Budget):
            raise TypeError(f"cannot compose a Budget with {type(other).__name__}")
        if self._calculus == other._calculus:
            return self, other
        pair = {self._calculus, other._calculus}
        if pair == {"pure", "zcdp"}:
            return self.to_zcdp(), other.to_zcdp()
        raise PrivacyError(
            f"cannot compose a {self._calculus} budget with a {other._calculus} budget; "
            "convert one explicitly (to_zcdp / to_approx_dp)")

    def __add__(self, other: Budget) -> Budget:
        """Sequential composition (pure: sum eps; zcdp: sum rho; approx: sum eps and sum delta)."""
        if not isinstance(other, Budget):
            return NotImplemented
        a, b = self._common_calculus(other)
        if a._calculus == "pure":
            return Budget("pure", epsilon=a._epsilon + b._epsilon)  # type: ignore[operator]
        if a._calculus == "zcdp":
            return Budget("zcdp", rho=a._rho + b._rho)  # type: ignore[operator]
        delta = a._delta + b._delta  # type: ignore[operator]
        if delta >= 1:
            raise PrivacyParameterError(f"delta: composed delta {float(delta)} is not below 1")
        return Budget("approx", epsilon=a._epsilon + b._epsilon,  # type: ignore[operator]
                      delta=delta)

    def __radd__(self, other: object) -> Budget:
        # Lets sum(parts) work: sum starts from the integer 0.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def _scaled(self, factor: Fraction) -> Budget:
        def mul(v: Fraction | None) -> Fraction | None:
            return None if v is None else v * factor
        return Budget(self._calculus, epsilon=mul(self._epsilon), rho=mul(self._rho),
                      delta=mul(self._delta))

    def __mul__(self, k: object) -> Budget:
        """k-fold composition (k > 0; every parameter, delta included, is multiplied by k)."""
        if isinstance(k, bool) or not isinstance(k, (Real, Fraction)):
            return NotImplemented
        factor = Fraction(k) if isinstance(k, (int, Fraction)) else Fraction(float(k))
        if not (math.isfinite(float(k)) and factor > 0):
            raise PrivacyParameterError(f"k must be finite and > 0, got {k!r}")
        out = self._scaled(factor)
        if out._delta is not None and out._delta >= 1:
            raise PrivacyParameterError(f"delta: {k} * delta = {float(out._delta)} is not below 1")
        return out

    __rmul__ = __mul__

    def within(self, limit: Budget, rtol: float = 0.0) -> bool:
        """True if this budget is at most ``limit`` (every parameter, up to relative ``rtol``)."""
        a, b = self._common_calculus(limit)
        slack = Fraction(1) + Fraction(rtol)
        return all(a.exact_parameters[k] <= v * slack for k, v in b.exact_parameters.items())

    def _minus_clamped(self, other: Budget) -> Budget:
        """``self - other`` parameter-wise, clamped at zero (same calculus)."""
        a, b = self._common_calculus(other)

        def sub(x: Fraction | None, y: Fraction | None) -> Fraction | None:
            return None if x is None else max(_ZERO, x - y)  # type: ignore[operator]
        return Budget(a._calculus, epsilon=sub(a._epsilon, b._epsilon),
                      rho=sub(a._rho, b._rho), delta=sub(a._delta, b._delta))

    # -- splitting --------------------------------------------------------------------------------
    def split_uniform(self, k: int) -> list[Budget]:
        """``k`` equal parts whose composition is exactly this budget."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise PrivacyParameterError(f"k must be a positive int, got {k!r}")
        part = self._scaled(Fraction(1, k))
        return [part] * k

    def split(self, proportions: Iterable[float]) -> list[Budget]:
        """Parts proportional to ``proportions``; their composition is exactly this budget.

        ``proportions`` must be positive and sum to 1 within 1e-12; they are then normalised
        exactly (as rationals), so the parts add up to the whole with no rounding.
        """
        props = list(proportions)
        if not props:
            raise PrivacyParameterError("proportions must not be empty")
        exact: list[Fraction] = []
        for i, p in enumerate(props):
            if isinstance(p, bool) or not isinstance(p, (Real, Fraction)) \
                    or not math.isfinite(float(p)) or p <= 0:
                raise PrivacyParameterError(
                    f"proportions[{i}] must be a finite number > 0, got {p!r}")
            exact.append(Fraction(p) if isinstance(p, (int, Fraction)) else Fraction(float(p)))
        total = sum(exact, _ZERO)
        if abs(float(total) - 1.0) > _SPLIT_SUM_TOL:
            raise PrivacyParameterError(
                f"proportions must sum to 1 (within {_SPLIT_SUM_TOL}), got {float(total)!r}")
        return [self._scaled(p / total) for p in exact]

    # -- conversions --------------------------------------------------------------------------
    def to_zcdp(self, method: Method = "numeric") -> Budget:
        """The budget as rho-zCDP.

        * pure: rho = eps**2 / 2 (a real implication: eps-DP implies it);
        * zcdp: itself;
        * approx: the largest rho whose zCDP guarantee converts to this (eps, delta)
          (:func:`approx_dp_to_zcdp`, ``method`` "numeric" = tight eq. 7, "analytic" = eq. 8).
          This is the convention of paper 000 (which uses the analytic one): the user's
          (eps, delta) *target* is met by running a rho-zCDP mechanism. It is not an
          implication ((eps, delta)-DP does not imply any zCDP).
        """
        if self._calculus == "zcdp":
            return self
        if self._calculus == "pure":
            return Budget("zcdp", rho=self._epsilon * self._epsilon / 2)  # type: ignore[operator]
        if self.is_zero:
            return Budget._zero("zcdp")
        rho = approx_dp_to_zcdp(float(self._epsilon), float(self._delta), method)  # type: ignore[arg-type]
        return Budget("zcdp", rho=Fraction(rho))

    def to_approx_dp(self, delta: float, method: Method = "numeric") -> Budget:
        """The (eps, delta)-DP guarantee this budget implies at the given ``delta``.

        * zcdp: eps by :func:`zcdp_to_approx_dp` (``method``);
        * pure: min(eps, the zCDP route via eps**2/2) - both are valid, the smaller is returned;
        * approx: (eps, delta) for any delta >= its own delta (a smaller delta is refused).
        """
        d = check_delta(delta)
        if self._calculus == "approx":
            if Fraction(d) < self._delta:  # type: ignore[operator]
                raise PrivacyParameterError(
                    f"delta: an ({self.epsilon}, {self.delta})-DP budget does "
                    f"not imply delta={d}")
            return Budget("approx", epsilon=self._epsilon, delta=Fraction(d))
        if self.is_zero:
            return Budget("approx", epsilon=_ZERO, delta=Fraction(d))
        rho = float(self.to_zcdp()._rho)  # type: ignore[arg-type]
        eps = Fraction(zcdp_to_approx_dp(rho, d, method))
        if self._calculus == "pure":
            eps = min(eps, self.exact_parameters["epsilon"])
        return Budget("approx", epsilon=eps, delta=Fraction(d))


def _rebuild_budget(calculus: str, epsilon: Fraction | None, rho: Fraction | None,
                    delta: Fraction | None) -> Budget:
    return Budget(calculus, epsilon=epsilon, rho=rho, delta=delta)


class Accountant:
    """A ledger that refuses to spend beyond a total budget.

    Spends are composed sequentially in the total's calculus (a pure spend is converted to
    zCDP when the total is zCDP; other mixes are refused). Every comparison with the total is
    exact (rational arithmetic, no tolerance): a spend that would take the composition even one
    ulp above the grant is refused.
    """

    def __init__(self, total: Budget) -> None:
        if not isinstance(total, Budget):
            raise TypeError(f"total must be a Budget, got {type(total).__name__}")
        if total.is_zero:
            raise PrivacyParameterError(f"total: an Accountant needs a positive budget, got {total}")
        self._total = total
        self._spent = Budget._zero(total.calculus)
        self._ledger: list[tuple[str, Budget]] = []

    @property
    def total(self) -> Budget:
        """The budget granted."""
        return self._total

    @property
    def spent(self) -> Budget:
        """Everything spent so far (composed)."""
        return self._spent

    @property
    def remaining(self) -> Budget:
        """``total - spent``, parameter-wise, clamped at zero."""
        return self._total._minus_clamped(self._spent)

    @property
    def ledger(self) -> list[tuple[str, Budget]]:
        """A copy of the spends, in order: ``(label, amount in the total's calculus)``."""
        return list(self._ledger)

    def _convert(self, amount: Budget) -> Budget:
        if not isinstance(amount, Budget):
            raise TypeError(f"amount must be a Budget, got {type(amount).__name__}")
        if amount.calculus == self._total.calculus:
            return amount
        if amount.calculus == "pure" and self._total.calculus == "zcdp":
            return amount.to_zcdp()
        raise PrivacyError(f"cannot spend a {amount.calculus} amount from a "
                           f"{self._total.calculus} total; convert it explicitly")

    def can_spend(self, amount: Budget) -> bool:
        """True if :meth:`spend` of ``amount`` would succeed."""
        return (self._spent + self._convert(amount)).within(self._total)

    def spend(self, amount: Budget, label: str) -> Budget:
        """Record ``amount`` under ``label`` and return it (in the total's calculus).

        Raises:
            BudgetExceeded: the cumulative spend would exceed the total - compared exactly, in
                rational arithmetic, with no tolerance; nothing is recorded.
        """
        if not isinstance(label, str) or not label:
            raise PrivacyParameterError(f"label must be a non-empty str, got {label!r}")
        converted = self._convert(amount)
        new_spent = self._spent + converted
        if not new_spent.within(self._total):
            raise BudgetExceeded(
                f"spending {converted} for {label!r} would exceed the total {self._total}: "
                f"already spent {self._spent}, remaining {self.remaining}")
        self._spent = new_spent
        self._ledger.append((label, converted))
        return converted

    def summary(self, delta: float | None = None) -> dict[str, Any]:
        """Machine-readable accounting: total, spent, remaining, ledger, implied guarantees.

        ``implied`` (of what was spent) and ``implied_total`` (of the whole budget) list every
        guarantee :func:`~hierdp.privacy.guarantees.implied_guarantees` gives (with ``delta``, the
        (eps, delta)-DP ones too), each as ``{"calculus", parameters..., "method", "valid"}``.
        """
        spent_implied = ([g.as_dict() for g in implied_guarantees(self._spent, delta)] if not self._spent.is_zero
                         else [{"calculus": self._spent.calculus, **self._spent.parameters, "method": "as spent",
                                "valid": True}])
        return {
            "calculus": self._total.calculus,
            "total": self._total.parameters,
            "spent": self._spent.parameters,
            "remaining": self.remaining.parameters,
            "ledger": [{"label": label, **b.parameters} for label, b in self._ledger],
            "implied": spent_implied,
            "implied_total": [g.as_dict() for g in implied_guarantees(self._total, delta)],
        }

    def report(self, delta: float | None = None) -> str:
        """Human-readable accounting (see :meth:`summary`)."""
        s = self.summary(delta)

        def fmt(params: dict[str, float]) -> str:
            return ", ".join(f"{k}={v:.6g}" for k, v in params.items())

        lines = [f"Privacy accounting ({s['calculus']})",
                 f"  total:     {fmt(s['total'])}",
                 f"  spent:     {fmt(s['spent'])}",
                 f"  remaining: {fmt(s['remaining'])}"]
        if self._ledger:
            lines.append("  ledger:")
            width = max(len(label) for label, _ in self._ledger)
            for label, b in self._ledger:
                lines.append(f"    {label:<{width}}  {fmt(b.parameters)}")
        lines.append("  implied by the spend:")
        for g in s["implied"]:
            params = {k: v for k, v in g.items() if k not in ("calculus", "method", "valid")}
            lines.append(f"    {g['calculus']:<7} {fmt(params):<36} {g['method']}")
        return "\n".join(lines)
