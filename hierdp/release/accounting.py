"""The typed accounting every release carries: what was spent, on what, and what it guarantees.

An :class:`Accounting` holds

* the **calculus** and **total** :class:`~hierdp.privacy.budget.Budget` the mechanism spent;
* the **spends** per part (a level, a population-group level, a node set), copied from the
  :class:`~hierdp.privacy.budget.Accountant` ledger the mechanism wrote them to *before* drawing
  each part's noise, with the noise details (σ², scale, sensitivity);
* the **privacy unit** (:class:`~hierdp.privacy.unit.PrivacyUnit`: neighbouring relation and
  contributions);
* the **guarantee in every calculus** the spend implies (:attr:`Accounting.guarantees`): pure,
  zCDP, RDP, (ε, δ) - as applicable;
* the **assumptions** the guarantee rests on (e.g. "the observed domain is public") and
  **notes** on what the output is (e.g. "values may be negative").

:meth:`Accounting.text` words it with :func:`hierdp.privacy.spec.describe_guarantee`, the one
wording function, and :meth:`Accounting.lines` renders one line per spend: the spends are the only
ledger. Paper families subclass it when they have a tighter analysis (SafeTab's exact RDP curve of
the geometric mechanism, :class:`hierdp.mechanisms.safetab.SafeTabAccounting`). Mechanisms build
it with :meth:`hierdp.mechanisms.base.RunContext.accounting`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from hierdp.privacy.budget import Budget
from hierdp.privacy.guarantees import Guarantee, implied_guarantees
from hierdp.privacy.spec import describe_guarantee
from hierdp.privacy.unit import PrivacyUnit

__all__ = ["Accounting", "Spend"]


@dataclass(frozen=True)
class Spend:
    """One part of a release's budget, recorded before that part's noise was drawn.

    Attributes:
        label: what was measured, e.g. ``"level 2 (country)"``.
        budget: the amount, in the accounting's calculus (exact).
        details: the noise behind it: ``noise``, ``sigma2`` or ``scale``, ``sensitivity``, ...
    """

    label: str
    budget: Budget
    details: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``"rho=0.0033 sigma2=302.678"`` - the budget and its noise parameter."""
        params = " ".join(f"{k}={v:.6g}" for k, v in self.budget.parameters.items())
        noise = " ".join(f"{k}={self.details[k]:.6g}" for k in ("sigma2", "scale") if k in self.details)
        extra = self.details.get("note")
        return " ".join(x for x in (params, noise, extra) if x)

    def as_dict(self) -> dict[str, Any]:
        """Flat dict: label, calculus, budget parameters, scalar details."""
        out: dict[str, Any] = {"part": self.label, "calculus": self.budget.calculus, **self.budget.parameters}
        out.update({k: v for k, v in self.details.items() if np.isscalar(v) or v is None})
        return out


@dataclass(frozen=True, kw_only=True, eq=False)
class Accounting:
    """The privacy accounting of one release (see the module docstring).

    Attributes:
        mechanism: the mechanism's name.
        total: the budget the mechanism spends in all (its calculus is the accounting's).
        unit: the privacy unit (``None`` only for releases built by hand).
        delta: δ of the (ε, δ) figures (``None``: none requested).
        spends: the parts, in the order their noise was drawn.
        assumptions: what the guarantee assumes public or true, beyond the unit.
        notes: what the output is, where it matters to a reader (negative values, ...).
        conversion: how an (ε, δ) target became ρ (``"analytic"`` / ``"numeric"``), if it did.
        epsilon_target: the ε the user asked for, if given as (ε, δ).
        details: family-specific figures (per-level noise, thresholds, the ledger summary).
    """

    mechanism: str
    total: Budget
    unit: PrivacyUnit | None = None
    delta: float | None = None
    spends: tuple[Spend, ...] = ()
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    conversion: str | None = None
    epsilon_target: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    # -- what was spent ----------------------------------------------------------------------
    @property
    def calculus(self) -> str:
        """``"zcdp"``, ``"pure"`` or ``"approx"``: the calculus the release was accounted in."""
        return self.total.calculus

    @property
    def spent(self) -> Budget:
        """The spends composed (equal to :attr:`total` for a complete release)."""
        return sum((s.budget for s in self.spends), Budget._zero(self.calculus))

    # -- what it guarantees -----------------------------------------------------------------
    def rdp_curve(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """A valid RDP curve tighter than the generic one implied by :attr:`total` (override)."""
        return None

    def zcdp_bound(self) -> float | None:
        """A valid ρ tighter than the generic ε²/2 of a pure total (override)."""
        return None

    @cached_property
    def guarantees(self) -> tuple[Guarantee, ...]:
        """Every guarantee the release satisfies, in every calculus that applies."""
        return implied_guarantees(self.total, self.delta, rdp_curve=self.rdp_curve(), zcdp_rho=self.zcdp_bound())

    def guarantee(self, calculus: str) -> Guarantee | None:
        """The tightest valid guarantee in ``calculus`` (``"pure"``, ``"zcdp"``, ``"rdp"``,
        ``"approx"``), or ``None`` when the release has none in it (e.g. pure DP for Gaussian
        noise)."""
        key = {"pure": "epsilon", "zcdp": "rho", "approx": "epsilon", "rdp": "tau"}.get(calculus)
        if key is None:
            raise ValueError(f"calculus must be 'pure', 'zcdp', 'rdp' or 'approx', got {calculus!r}")
        cands = [g for g in self.guarantees if g.calculus == calculus and g.valid]
        if calculus == "approx" and self.delta is not None:
            cands = [g for g in cands if g.parameters["delta"] <= self.delta]
        return min(cands, key=lambda g: g.parameters[key]) if cands else None

    def rdp(self, alpha: float | np.ndarray) -> np.ndarray:
        """The release's RDP curve at the orders ``alpha`` (> 1)."""
        a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
        curve = self.rdp_curve()
        if curve is not None:
            return np.asarray(curve(a), dtype=np.float64)
        if self.calculus == "zcdp":
            return float(self.total.rho) * a
        if self.calculus == "pure":
            eps = float(self.total.epsilon)
            return np.minimum(eps, a * eps * eps / 2.0)
        return np.full(a.shape, np.inf)  # (eps, delta)-DP implies no RDP bound

    def text(self) -> str:
        """The guarantee in words (:func:`hierdp.privacy.spec.describe_guarantee`)."""
        return describe_guarantee(self)

    def __str__(self) -> str:
        return self.text()

    # -- tables ------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per guarantee: calculus, parameters, method, valid."""
        return pd.DataFrame([g.as_dict() for g in self.guarantees])

    def spends_frame(self) -> pd.DataFrame:
        """One row per spend: part, calculus, budget parameters, noise details."""
        return pd.DataFrame([s.as_dict() for s in self.spends])

    def lines(self) -> list[str]:
        """One line per spend (label, budget, noise parameter) for
        :meth:`hierdp.release.BaseRelease.accounting_text`."""
        width = max((len(s.label) for s in self.spends), default=0)
        return [f"  {s.label:<{width}}  {s.describe()}" for s in self.spends]

    # -- the accounting file -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The whole accounting as exact JSON (:mod:`hierdp.release.encoding`): ``kind`` (the class,
        for subclasses with their own analysis), ``fields`` (every field: total, unit, spends with
        their noise details, assumptions, notes, conversion, details - what :meth:`from_dict` reads)
        and ``summary`` (derived, for readers: the guarantee in words and in every calculus, what was
        spent)."""
        from hierdp.release.encoding import encode

        return {"kind": f"{type(self).__module__}:{type(self).__qualname__}", "fields": self._fields_json(),
                "summary": encode({"calculus": self.calculus, "guarantee": self.text(),
                                   "guarantees": [g.as_dict() for g in self.guarantees],
                                   "spent": self.spent.parameters})}

    def _fields_json(self) -> dict[str, Any]:
        from hierdp.release.encoding import encode

        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "spends":
                value = [{"label": sp.label, "budget": sp.budget, "details": dict(sp.details)} for sp in value]
            out[f.name] = encode(value)
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Accounting:
        """The :class:`Accounting` (or subclass, ``data["kind"]``) that :meth:`to_dict` wrote.

        Raises:
            ValueError: not an accounting written by :meth:`to_dict`, or of a class outside hierdp.
        """
        from hierdp.release.encoding import decode, hierdp_class

        if not isinstance(data, Mapping) or "fields" not in data:
            raise ValueError("not a hierdp accounting (no 'fields')")
        kind = hierdp_class(str(data.get("kind", "")), Accounting)
        fields = {k: decode(v) for k, v in data["fields"].items()}
        fields["spends"] = tuple(Spend(sp["label"], sp["budget"], sp["details"]) for sp in fields.get("spends", ()))
        known = {f.name for f in dataclasses.fields(kind)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"accounting of kind {kind.__name__} has no field(s) {unknown}")
        return kind(**fields)

    def __eq__(self, other: object) -> bool:
        """Same class and the same fields (compared in their exact JSON form: NaN equals NaN)."""
        return isinstance(other, Accounting) and type(other) is type(self) and self._fields_json() == other._fields_json()

    def __hash__(self) -> int:
        return hash(json.dumps(self._fields_json(), sort_keys=True))

    def as_dict(self) -> dict[str, Any]:
        """A flat, machine-readable summary (one row of a comparison frame)."""
        out: dict[str, Any] = {"mechanism": self.mechanism, "calculus": self.calculus,
                               **{f"total_{k}": v for k, v in self.total.parameters.items()},
                               "delta": self.delta}
        for calc in ("pure", "zcdp"):
            g = self.guarantee(calc)
            out[f"{calc}_{'epsilon' if calc == 'pure' else 'rho'}"] = \
                None if g is None else g.parameters["epsilon" if calc == "pure" else "rho"]
        g = self.guarantee("approx")
        out["approx_epsilon"] = None if g is None else g.parameters["epsilon"]
        if self.unit is not None:
            out.update(self.unit.as_dict())
        out["assumptions"] = "; ".join(self.assumptions)
        out["guarantee"] = self.text()
        return out

