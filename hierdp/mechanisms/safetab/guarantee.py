"""Privacy accounting of SafeTab (paper 004, Thm. 1-3, App. F) in every calculus, and the
MOE -> budget calibration of App. F.1 (Tables 1 and 4).

SafeTab runs, for each population-group level i with budget ``rho_i`` and declared stability
``s_i``, TabulatePopulationGroup with the per-group budget ``b_i = rho_i / s_i`` on each group. A
group is either *TotalOnly* (one count with ``b_i``) or *adaptive* (a noisy total with
``gamma b_i``, then counts with ``(1 - gamma) b_i``). By generalized parallel composition
(Lemmas 9-12) and sequential composition (Lemmas 1-3) the release is

* geometric noise: ``sum_i rho_i``-DP (Thm. 1); ``sum_i s_i max_branch(zcdp)``-zCDP with
  eps-DP -> eps^2/2-zCDP per count; and ``(alpha, sum_i s_i max_branch(tau(alpha, .)))``-RDP
  (Thm. 2, eq. 30/39) with ``tau`` the geometric mechanism's RDP curve;
* discrete Gaussian noise: ``sum_i rho_i``-zCDP (Thm. 3), i.e. RDP ``alpha * sum_i rho_i``.

``max_branch`` runs over the branches present in the level (TotalOnly: ``c(b)``; adaptive:
``c(gamma b) + c((1-gamma) b)``); the paper's eq. 39 always takes the max of both.

``tau`` is :func:`~hierdp.privacy.rdp_geometric.geometric_rdp_exact` (the exact discrete
divergence, a valid bound). The paper's Cor. 1 is reported separately as ``rdp_paper`` for
comparison only: it under-states the divergence (see :mod:`hierdp.privacy.rdp_geometric`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Literal
from collections.abc import Callable, Sequence

import numpy as np

from hierdp.privacy.conversions import rdp_epsilon_term, rdp_to_approx_dp, zcdp_to_approx_dp
from hierdp.privacy.budget import Budget
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.moe import discrete_gaussian_rho_for_moe, geometric_epsilon_for_moe
from hierdp.privacy.rdp_geometric import geometric_rdp_exact, geometric_rdp_paper
from hierdp.privacy.guarantees import Guarantee, implied_guarantees
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release.accounting import Accounting

__all__ = [
    "NOISES",
    "PAPER_ALPHAS",
    "SAFETAB_UNIT",
    "SafeTabAccounting",
    "level_budgets_for_moe",
    "level_zcdp",
    "rdp_curve_geometric_levels",
    "safetab_accounting",
]

#: SafeTab's privacy unit (paper 004 §2): one person's record added or removed.
SAFETAB_UNIT = PrivacyUnit(bounded=False, contributions=1, record="record")

NOISES = ("geometric", "discrete_gaussian")
Noise = Literal["geometric", "discrete_gaussian"]
#: The alpha grid of paper 004 App. F.2: 1.01, 1.02, ..., 10.00.
PAPER_ALPHAS = np.round(np.arange(101, 1001) / 100.0, 2)


def _check_noise(noise: object) -> str:
    if noise not in NOISES:
        raise PrivacyParameterError(f"noise must be one of {NOISES}, got {noise!r}")
    return str(noise)


def _check_gamma(gamma: object) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating)) \
            or not (0.0 < float(gamma) < 1.0):
        raise PrivacyParameterError(f"gamma must be in (0, 1), got {gamma!r}")
    return float(gamma)


def _level_arrays(budgets: Sequence[float] | np.ndarray, stabilities: Sequence[int] | np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(budgets, dtype=np.float64).ravel()
    s = np.asarray(stabilities).ravel()
    if b.size == 0 or b.size != s.size:
        raise PrivacyParameterError(
            f"need one budget and one stability per level, got {b.size} and {s.size}")
    if np.any(~np.isfinite(b)) or np.any(b <= 0):
        raise PrivacyParameterError(f"level budgets must be finite and > 0, got {list(b)}")
    if not np.issubdtype(s.dtype, np.integer) or np.any(s < 1):
        raise PrivacyParameterError(f"stabilities must be integers >= 1, got {list(s)}")
    return b, s.astype(np.int64)


def rdp_curve_geometric_levels(alpha: float | np.ndarray, budgets: Sequence[float] | np.ndarray,
                               stabilities: Sequence[int] | np.ndarray, gamma: float,
                               branches: Sequence[tuple[bool, bool]] | None = None,
                               formula: Literal["exact", "paper"] = "exact") -> np.ndarray:
    """RDP curve of SafeTab[Geometric] (paper 004 eq. 30 / 39) at the orders ``alpha``.

    ``branches[i] = (has_adaptive, has_total_only)`` for level i (default both, as in eq. 39).
    ``formula="paper"`` uses Cor. 1 (not a valid bound; for reproducing Table 2 only).
    """
    b, s = _level_arrays(budgets, stabilities)
    g = _check_gamma(gamma)
    tau = geometric_rdp_exact if formula == "exact" else geometric_rdp_paper
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    br = [(True, True)] * b.size if branches is None else list(branches)
    total = np.zeros_like(a)
    for bi, si, (adaptive, total_only) in zip(b, s, br, strict=False):
        per_group = bi / si
        parts = []
        if adaptive:
            parts.append(tau(a, g * per_group) + tau(a, (1.0 - g) * per_group))
        if total_only:
            parts.append(tau(a, per_group))
        total = total + si * np.max(np.stack(parts), axis=0)
    return total


@dataclass(frozen=True, kw_only=True, eq=False)
class SafeTabAccounting(Accounting):
    """The privacy of one SafeTab release in every calculus (a typed
    :class:`~hierdp.release.Accounting`, with SafeTab's tighter per-count analysis).

    Attributes:
        noise: ``"geometric"`` or ``"discrete_gaussian"``.
        level_budgets, stabilities: per level, as run (``rho_i`` and declared ``s_i``).
        pure_epsilon: epsilon-DP (``inf`` for the discrete Gaussian, which has no pure bound).
        zcdp_rho: rho-zCDP.
        delta: the delta of the (epsilon, delta) figures.
        approx: ``{analysis: epsilon}`` at ``delta``: ``"pure"`` (delta = 0, geometric only),
            ``"rdp"`` (exact RDP curve, optimal alpha), ``"rdp_paper_grid"`` (exact curve on the
            paper's alpha grid), ``"zcdp_numeric"`` (eq. 7), ``"zcdp_analytic"`` (eq. 8), and for
            the geometric mechanism ``"rdp_paper_cor1"`` (Cor. 1 on the paper's grid: NOT a valid
            bound, reported for comparison with Table 2).
        best_epsilon: the smallest valid epsilon of ``approx`` at ``delta``.
        best_alpha: the order at which the RDP conversion attains its minimum.
    """

    noise: str
    gamma: float
    level_budgets: tuple[float, ...]
    stabilities: tuple[int, ...]
    pure_epsilon: float
    zcdp_rho: float
    approx: dict[str, float] = field(default_factory=dict)
    best_epsilon: float = math.inf
    best_alpha: float = math.nan
    branches: tuple[tuple[bool, bool], ...] = ()

    def rdp_curve(self) -> Callable[[np.ndarray], np.ndarray] | None:
        if self.noise == "discrete_gaussian":
            return None
        return lambda a: rdp_curve_geometric_levels(a, self.level_budgets, self.stabilities, self.gamma,
                                                    self.branches, "exact")

    def zcdp_bound(self) -> float | None:
        return self.zcdp_rho if self.noise == "geometric" else None

    @cached_property
    def guarantees(self) -> tuple[Guarantee, ...]:
        out = list(implied_guarantees(self.total, self.delta, rdp_curve=self.rdp_curve(), zcdp_rho=self.zcdp_bound()))
        if self.delta is not None and "rdp_paper_grid" in self.approx:
            out.append(Guarantee("approx", {"epsilon": self.approx["rdp_paper_grid"], "delta": self.delta},
                                 "RDP on the paper's alpha grid 1.01..10"))
        if self.delta is not None and "rdp_paper_cor1" in self.approx:
            out.append(Guarantee("approx", {"epsilon": self.approx["rdp_paper_cor1"], "delta": self.delta},
                                 "paper 004 Cor. 1 (under-states the divergence; comparison only)", valid=False))
        return tuple(out)

    def rdp(self, alpha: float | np.ndarray) -> np.ndarray:
        """The release's (valid) RDP curve at ``alpha``."""
        a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
        if self.noise == "discrete_gaussian":
            return self.zcdp_rho * a
        return rdp_curve_geometric_levels(a, self.level_budgets, self.stabilities, self.gamma,
                                          self.branches, "exact")

    def as_dict(self) -> dict[str, object]:
        """Flat, machine-readable summary (the shared fields, plus SafeTab's figures)."""
        out: dict[str, object] = super().as_dict()
        out.update({"noise": self.noise, "pure_epsilon": self.pure_epsilon,
                                  "zcdp_rho": self.zcdp_rho, "delta": self.delta,
                    "best_epsilon": self.best_epsilon, "best_alpha": self.best_alpha})
        out.update({f"eps_{k}": v for k, v in self.approx.items()})
        return out


def level_zcdp(budget: float, stability: int, gamma: float, branches: tuple[bool, bool], noise: str) -> Fraction:
    """The exact zCDP rho of one level: ``s max_branch(sum of eps_count^2 / 2)`` for geometric noise
    (each eps-DP count is eps^2/2-zCDP), ``rho_i`` itself for the discrete Gaussian."""
    rho_i = Fraction(float(budget))
    if noise != "geometric":
        return rho_i
    b = rho_i / stability
    g = Fraction(float(gamma))
    parts = ([((g * b) ** 2 + ((1 - g) * b) ** 2) / 2] if branches[0] else []) + ([b * b / 2] if branches[1] else [])
    return stability * max(parts)


def safetab_accounting(level_budgets: Sequence[float], stabilities: Sequence[int], *,
                       noise: Noise, gamma: float = 0.1, delta: float = 1e-10,
                       branches: Sequence[tuple[bool, bool]] | None = None) -> SafeTabAccounting:
    """Account a SafeTab run (see the module docstring) in pure DP, zCDP, RDP and (eps, delta)."""
    b, s = _level_arrays(level_budgets, stabilities)
    nz = _check_noise(noise)
    g = _check_gamma(gamma)
    br = tuple((True, True) for _ in b) if branches is None else tuple(
        (bool(x), bool(y)) for x, y in branches)
    if len(br) != b.size or not all(x or y for x, y in br):
        raise PrivacyParameterError("branches needs one (has_adaptive, has_total_only) per level, "
                                    "with at least one True")
    approx: dict[str, float] = {}
    if nz == "geometric":
        pure = float(b.sum())
        # eps-DP => eps^2/2-zCDP for each count, composed as in Thm. 1
        rho = 0.0
        for bi, si, (adaptive, total_only) in zip(b, s, br, strict=False):
            e = bi / si
            parts = ([((g * e) ** 2 + ((1 - g) * e) ** 2) / 2] if adaptive else []) + \
                    ([e * e / 2] if total_only else [])
            rho += si * max(parts)

        def curve(a: np.ndarray) -> np.ndarray:
            return rdp_curve_geometric_levels(a, b, s, g, br, "exact")

        approx["pure"] = pure
        eps_rdp, alpha_rdp = rdp_to_approx_dp(curve, delta)
        approx["rdp"] = eps_rdp
        grid_vals = curve(PAPER_ALPHAS) + rdp_epsilon_term(PAPER_ALPHAS, delta)
        approx["rdp_paper_grid"] = float(grid_vals.min())
        approx["zcdp_numeric"] = zcdp_to_approx_dp(rho, delta, "numeric")
        approx["zcdp_analytic"] = zcdp_to_approx_dp(rho, delta, "analytic")
        best_alpha = alpha_rdp
        paper_vals = rdp_curve_geometric_levels(PAPER_ALPHAS, b, s, g, br, "paper") \
            + rdp_epsilon_term(PAPER_ALPHAS, delta)
        approx["rdp_paper_cor1"] = float(paper_vals.min())
        valid = [v for k, v in approx.items() if k != "rdp_paper_cor1"]
    else:
        pure = math.inf
        rho = float(b.sum())
        approx["zcdp_numeric"] = zcdp_to_approx_dp(rho, delta, "numeric")
        approx["zcdp_analytic"] = zcdp_to_approx_dp(rho, delta, "analytic")
        eps_rdp, best_alpha = rdp_to_approx_dp(lambda a: rho * np.asarray(a, dtype=np.float64), delta)
        approx["rdp"] = eps_rdp
        grid_vals = rho * PAPER_ALPHAS + rdp_epsilon_term(PAPER_ALPHAS, delta)
        approx["rdp_paper_grid"] = float(grid_vals.min())
        valid = list(approx.values())
    parts = [Budget.pure(x) if nz == "geometric" else Budget.zcdp(x) for x in b]
    return SafeTabAccounting(mechanism="SafeTab", total=sum(parts), unit=SAFETAB_UNIT,
                             noise=nz, gamma=g, level_budgets=tuple(float(x) for x in b),
                             stabilities=tuple(int(x) for x in s), pure_epsilon=pure,
                             zcdp_rho=float(rho), delta=float(delta), approx=approx,
                             best_epsilon=float(min(valid)), best_alpha=float(best_alpha),
                             branches=br)


def level_budgets_for_moe(moe_targets: Sequence[float], stabilities: Sequence[int] | int, *,
                          noise: Noise, gamma: float = 0.1, level: float = 0.95,
                          method: Literal["exact", "paper"] = "paper") -> np.ndarray:
    """Level budgets ``rho_i`` so that each Step-2 count has the target MOE (paper App. F.1).

    base parameter from the MOE (eq. 37 / 38 with ``method="paper"``, exact discrete quantile
    with ``"exact"``), per-group budget ``base / (1 - gamma)`` (the paper's text writes
    ``(1/gamma) rho_base``, a typo: Table 4's Step 2 is 90 % of the total), times ``s_i``.
    """
    nz = _check_noise(noise)
    g = _check_gamma(gamma)
    moes = list(moe_targets)
    s = np.broadcast_to(np.asarray(stabilities), (len(moes),))
    base = np.array([geometric_epsilon_for_moe(m, level, method) if nz == "geometric"
                     else discrete_gaussian_rho_for_moe(m, level, method) for m in moes])
    return s * base / (1.0 - g)
