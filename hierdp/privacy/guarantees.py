"""The guarantees a spend implies, in every calculus: one function for every release and every
ledger.

pure ε-DP ⇒ (ε²/2)-zCDP ⇒ RDP ⇒ (ε, δ)-DP; ρ-zCDP ⇒ RDP α ↦ ρα ⇒ (ε, δ)-DP by the analytic bound
(paper 000 Lemma 3, paper 004 eq. 8), the tight numeric one (eq. 7) and the RDP conversion (paper
004 Lemma 4). :class:`~hierdp.release.Accounting` and :class:`~hierdp.privacy.budget.Accountant`
both state what :func:`implied_guarantees` says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hierdp.privacy.conversions import check_delta, rdp_to_approx_dp, zcdp_to_approx_dp

if TYPE_CHECKING:
    from hierdp.privacy.budget import Budget

__all__ = ["Guarantee", "implied_guarantees"]


@dataclass(frozen=True)
class Guarantee:
    """One guarantee a release satisfies.

    Attributes:
        calculus: ``"pure"``, ``"zcdp"``, ``"rdp"`` or ``"approx"``.
        parameters: ``{"epsilon"}``, ``{"rho"}``, ``{"alpha", "tau"}`` or ``{"epsilon", "delta"}``.
        method: how it follows from what was spent (e.g. ``"as spent"``, ``"Lemma 3 (analytic)"``).
        valid: False for figures reported only for comparison (a paper's formula that is not a
            bound); such entries never count as the release's guarantee.
    """

    calculus: str
    parameters: Mapping[str, float]
    method: str
    valid: bool = True

    def __str__(self) -> str:
        p = self.parameters
        if self.calculus == "pure":
            return f"{p['epsilon']:.6g}-DP"
        if self.calculus == "zcdp":
            return f"{p['rho']:.6g}-zCDP"
        if self.calculus == "rdp":
            return f"(alpha={p['alpha']:.6g}, {p['tau']:.6g})-RDP"
        return f"({p['epsilon']:.6g}, {p['delta']:.3g})-DP"

    def as_dict(self) -> dict[str, Any]:
        """Flat dict (one row of :meth:`Accounting.to_frame`)."""
        return {"calculus": self.calculus, **{k: float(v) for k, v in self.parameters.items()},
                "method": self.method, "valid": self.valid}


def _pure_rdp(eps: float) -> Callable[[np.ndarray], np.ndarray]:
    half_sq = eps * eps / 2.0
    return lambda a: np.minimum(eps, np.asarray(a, dtype=np.float64) * half_sq)


def _zcdp_rdp(rho: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda a: rho * np.asarray(a, dtype=np.float64)


def implied_guarantees(total: Budget, delta: float | None = None, *,
                       rdp_curve: Callable[[np.ndarray], np.ndarray] | None = None,
                       zcdp_rho: float | None = None) -> tuple[Guarantee, ...]:
    """Every guarantee ``total`` implies (at ``delta`` for the (ε, δ) ones).

    Args:
        total: what was spent (one calculus).
        delta: δ of the (ε, δ) figures; ``None`` gives none (and no RDP point).
        rdp_curve: a tighter valid RDP curve than the generic one, if the mechanism has one
            (e.g. the exact curve of the geometric mechanism, paper 004).
        zcdp_rho: a tighter valid zCDP ρ than the generic ε²/2 of a pure spend, if known.
    """
    out: list[Guarantee] = []
    calc = total.calculus
    if calc == "approx":
        out.append(Guarantee("approx", {"epsilon": float(total.epsilon), "delta": float(total.delta)}, "as spent"))
        return tuple(out)
    if calc == "pure":
        eps = float(total.epsilon)
        out.append(Guarantee("pure", {"epsilon": eps}, "as spent"))
        rho = eps * eps / 2.0 if zcdp_rho is None else min(zcdp_rho, eps * eps / 2.0)
        out.append(Guarantee("zcdp", {"rho": rho}, "pure eps-DP implies (eps^2/2)-zCDP (Bun & Steinke 2016)"
                             if zcdp_rho is None else "composed per count (eps^2/2-zCDP each)"))
        curve = rdp_curve if rdp_curve is not None else _pure_rdp(eps)
    else:
        rho = float(total.rho)
        out.append(Guarantee("zcdp", {"rho": rho}, "as spent"))
        curve = rdp_curve if rdp_curve is not None else _zcdp_rdp(rho)
    if delta is None:
        return tuple(out)
    d = check_delta(delta, "delta")
    eps_rdp, alpha = rdp_to_approx_dp(curve, d)
    out.append(Guarantee("rdp", {"alpha": alpha, "tau": float(np.asarray(curve(np.array([alpha])))[0])},
                         "RDP curve at the order best for delta"))
    if calc == "pure":
        out.append(Guarantee("approx", {"epsilon": float(total.epsilon), "delta": 0.0}, "pure (delta = 0)"))
    out.append(Guarantee("approx", {"epsilon": zcdp_to_approx_dp(rho, d, "analytic"), "delta": d},
                         "zCDP, analytic (paper 000 Lemma 3)"))
    out.append(Guarantee("approx", {"epsilon": zcdp_to_approx_dp(rho, d, "numeric"), "delta": d},
                         "zCDP, tight numeric (paper 004 eq. 7)"))
    out.append(Guarantee("approx", {"epsilon": eps_rdp, "delta": d}, "RDP (paper 004 Lemma 4)"))
    return tuple(out)
