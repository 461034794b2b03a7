"""TopDown mechanisms of paper 000: InfTDA (Alg. 1 bounded, Alg. 3 unbounded) and TDA baselines.

Every mechanism walks a :class:`~hierdp.hierarchy.topdown_tree.TopDownTree` level by level. At
level L it takes the surviving (released, positive) nodes, asks the tree for *all* their
children at once (zero-count children included), adds discrete Gaussian noise to every child,
and post-processes the whole level as one batch of independent groups "children of parent g sum
to the parent's released value, non-negative integers". Children released as 0 are dropped: by
consistency their subtrees are all zero and are never expanded (Alg. 1, line 9).

Budget (paper 000 §4.1, §5 "Privacy budget", App. B):

* the user gives ρ, or (ε, δ) converted to ρ with Lemma 3 (``conversion="analytic"``, what the
  paper uses: ε = ρ + 2√(ρ log 1/δ) inverted), or a :class:`~hierdp.privacy.budget.Budget`;
* bounded DP (Alg. 1): the root n is public; ρ is split uniformly over the T levels below the
  root; unbounded (Alg. 3): over T + 1 parts, one for the noisy root (sensitivity m);
* a level is a histogram whose L2 sensitivity is Δ₂ = √2·m (bounded) or m (unbounded) for m
  trips per user; only at the finest level, and only when the user's m trips are declared
  distinct pairs (``distinct=True``), is it √(2m) or √m. (§4.1 states √(2m) for every level;
  distinct finest pairs can share a coarser cell, so that undercounts the coarser levels.)
  σ² = Δ₂² / (2 ρ_level) (Thm 6). Bounded with m = 1 gives σ² = T/ρ, exactly Alg. 1 line 6.

App. B noises the root with the same σ² as the levels and states the resulting guarantee
(m²/T + GS₂²)ρ/2; hierdp instead spends exactly the granted ρ (one equal share for the root), so
the stated guarantee is the one delivered. Each spend goes through an
:class:`~hierdp.privacy.budget.Accountant`.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hierdp.hierarchy.topdown_tree import TopDownTree, as_topdown_tree
from hierdp.privacy import samplers
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.rng import resolve_rng
from hierdp.release import Release, ReleaseLevel

__all__ = ["InfTDA", "TDA", "TopDownMechanism", "PrivacySpec", "level_sensitivity_sq"]


# ---------------------------------------------------------------------------------- privacy plan
def level_sensitivity_sq(bounded: bool, contributions: int, distinct: bool = False, *,
                         finest: bool = True) -> float:
    """Squared L2 sensitivity of one level's histogram (paper 000 §2.1 and §4.1).

    Bounded (substitution) neighbours: 2m for m distinct trips per user, 2m² otherwise;
    unbounded (add/remove): m, or m². Distinctness only helps at the *finest* level
    (``finest=True``): two distinct finest pairs can fall in the same coarser cell, so above it
    the worst case is a user's m trips all in one cell (2m², m²). Paper 000 (§4.1, after Thm 6)
    states sqrt(2m) for every level, which undercounts the coarser levels when m > 1.
    """
    m = int(contributions)
    if m < 1:
        raise PrivacyParameterError(f"contributions must be a positive integer, got {contributions!r}")
    base = m if (distinct and finest) else m * m
    return float(2 * base if bounded else base)


@dataclass
class PrivacySpec:
    """How a mechanism's budget was given and what it amounts to in zCDP.

    Attributes:
        rho: total ρ (zCDP) the mechanism spends.
        delta: δ for the implied (ε, δ) statement (``None`` if only ρ was given).
        epsilon_target: the ε the user asked for (``None`` if given as ρ).
        conversion: ``"analytic"`` (paper 000 Lemma 3) or ``"numeric"``.
    """

    rho: float
    delta: float | None
    epsilon_target: float | None
    conversion: str
    budget: Budget

    @classmethod
    def resolve(cls, epsilon: float | None, delta: float | None, rho: float | None,
                budget: Budget | None, conversion: str) -> "PrivacySpec":
        """Exactly one of (epsilon, delta), rho, budget; raises :class:`PrivacyParameterError`."""
        given = [epsilon is not None, rho is not None, budget is not None]
        if sum(given) != 1:
            raise PrivacyParameterError("give exactly one of epsilon (with delta), rho, or budget")
        if conversion not in ("analytic", "numeric"):
            raise PrivacyParameterError(f"conversion must be 'analytic' or 'numeric', got {conversion!r}")
        if epsilon is not None:
            if delta is None:
                raise PrivacyParameterError("epsilon needs delta (zCDP Gaussian noise gives (eps, delta)-DP)")
            target = Budget.approx(epsilon, delta)
            z = target.to_zcdp(conversion)
            return cls(float(z.rho), float(delta), float(epsilon), conversion, z)
        if rho is not None:
            z = Budget.zcdp(rho)
            return cls(float(z.rho), None if delta is None else float(delta), None, conversion, z)
        if not isinstance(budget, Budget):
            raise PrivacyParameterError(f"budget must be a hierdp.privacy.budget.Budget, got {type(budget).__name__}")
        if budget.calculus == "approx":
            z = budget.to_zcdp(conversion)
            return cls(float(z.rho), float(budget.delta), float(budget.epsilon), conversion, z)
        z = budget.to_zcdp()
        return cls(float(z.rho), None if delta is None else float(delta), None, conversion, z)

    def implied_epsilon(self, method: str | None = None) -> float | None:
        """ε of the (ε, δ)-DP guarantee implied by ρ-zCDP at ``self.delta``."""
        if self.delta is None:
            return None
        from hierdp.privacy.accounting import zcdp_to_approx_dp

        return float(zcdp_to_approx_dp(self.rho, self.delta, method or self.conversion))


def guarantee_text(spec: PrivacySpec, neighbours: str, extra: str = "") -> str:
    """``"ρ=...-zCDP (...), implies (ε=..., δ=...)-DP"``."""
    s = f"{spec.rho:.6g}-zCDP ({neighbours}{extra})"
    if spec.delta is not None:
        eps_a = spec.implied_epsilon("analytic")
        eps_n = spec.implied_epsilon("numeric")
        s += f", implies ({eps_a:.6g}, {spec.delta:.3g})-DP by Lemma 3 [tight: ({eps_n:.6g}, {spec.delta:.3g})-DP]"
    return s


# ---------------------------------------------------------------------------------- the engine
LevelSolver = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, dict[str, Any]]]


class TopDownMechanism(ABC):
    """Shared TopDown engine; subclasses define :meth:`_solve_level` and a name."""

    name = "TopDown"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *,
                 rho: float | None = None, budget: Budget | None = None, bounded: bool = True,
                 contributions: int = 1, distinct: bool = False, secure: bool = False,
                 conversion: str = "analytic") -> None:
        self.spec = PrivacySpec.resolve(epsilon, delta, rho, budget, conversion)
        self.bounded = bool(bounded)
        self.contributions = int(contributions)
        self.distinct = bool(distinct)
        self.secure = bool(secure)

    def level_sens_sq(self, level: int, n_levels: int) -> float:
        """Squared L2 sensitivity of ``level`` in a tree with ``n_levels`` levels (root = 0)."""
        return level_sensitivity_sq(self.bounded, self.contributions, self.distinct,
                                    finest=level == n_levels - 1)

    # -- subclass hooks
    solver_name: str | None = None

    @abstractmethod
    def _solve_level(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Post-process one level: non-negative integers per group summing to ``totals``, plus stats."""

    def params(self) -> dict[str, Any]:
        """The mechanism's parameters (for the release)."""
        return {"rho": self.spec.rho, "epsilon": self.spec.epsilon_target, "delta": self.spec.delta,
                "conversion": self.spec.conversion, "bounded": self.bounded,
                "contributions": self.contributions, "distinct": self.distinct, "secure": self.secure}

    #: target number of children per batch: a level is processed in chunks of parents so that
    #: peak memory stays bounded on wide levels (groups are independent, so chunks are too)
    chunk_children: int = 1 << 21

    def _run_level(self, tree: TopDownTree, L: int, prev: ReleaseLevel, sigma2: float,
                   rng: Any) -> tuple[ReleaseLevel, dict[str, Any]]:
        """Expand the positive nodes of level L, noise their children, solve, keep positives."""
        alive = np.flatnonzero(prev.values > 0)
        out_keys, out_par, out_val = [], [], []
        st: dict[str, Any] = {"parents": 0, "children": 0, "released": 0, "max_group": 0, "chunks": 0,
                              "expand_s": 0.0, "noise_s": 0.0, "solve_s": 0.0}
        start, step, seen_parents, seen_children = 0, max(1, min(4096, self.chunk_children)), 0, 0
        while start < alive.size:
            chunk = alive[start:start + step]
            start += chunk.size
            t0 = time.perf_counter()
            child_keys, offsets, true = tree.expand(L, prev.keys[chunk])
            sizes = np.diff(offsets)
            t1 = time.perf_counter()
            has = sizes > 0  # parents without children (leaves above the last level) pose no problem
            rows = chunk[has]
            offs = np.concatenate([[0], offsets[1:][has]]).astype(np.int64)
            totals = prev.values[rows]
            noisy = true + samplers.discrete_gaussian(sigma2, child_keys.size, rng) if child_keys.size else true
            t2 = time.perf_counter()
            if child_keys.size:
                sol, sstats = self._solve_level(noisy, offs, totals)
            else:
                sol, sstats = np.zeros(0, np.int64), {}
            sol = np.asarray(sol, dtype=np.int64)
            t3 = time.perf_counter()
            keep = sol > 0
            out_keys.append(child_keys[keep])
            out_par.append(np.repeat(rows, sizes[has])[keep])
            out_val.append(sol[keep])
            st["parents"] += int(rows.size)
            st["children"] += int(child_keys.size)
            st["released"] += int(keep.sum())
            st["max_group"] = max(st["max_group"], int(sizes.max()) if sizes.size else 0)
            st["chunks"] += 1
            st["expand_s"] += t1 - t0
            st["noise_s"] += t2 - t1
            st["solve_s"] += t3 - t2
            for k, v in sstats.items():  # numbers add up over chunks, the rest is kept as is
                st[k] = st.get(k, 0) + v if isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and isinstance(st.get(k, 0), (int, float)) else v
            # size the next chunk from the fan-out seen so far
            seen_parents += chunk.size
            seen_children += int(child_keys.size)
            fan = max(1.0, seen_children / max(seen_parents, 1))
            step = max(1, int(self.chunk_children / fan))
        if not out_keys:
            empty = np.zeros(0, np.int64)
            return ReleaseLevel(empty, empty.copy(), empty.copy()), st
        return ReleaseLevel(np.concatenate(out_keys), np.concatenate(out_par), np.concatenate(out_val)), st

    # -- the run
    def release(self, tree: Any, *, seed: int | None = None, rng: Any = None, progress: bool = False) -> Release:
        """Run the mechanism on ``tree`` (a TopDownTree such as an ODTree, or a Hierarchy).

        Args:
            seed: seed of a reproducible numpy generator (experiments).
            rng: an explicit generator (``make_rng(...)``); overrides ``seed``.
            progress: show a tqdm bar over levels.
        """
        tree = as_topdown_tree(tree)
        T = int(tree.n_levels) - 1
        if T < 1:
            raise ValueError("the tree has no level below the root: nothing to release")
        rng = resolve_rng(rng, seed, secure=self.secure)
        parts = self.spec.budget.split_uniform(T if self.bounded else T + 1)
        acct = Accountant(self.spec.budget)
        per_level: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        if self.bounded:
            root_value = int(tree.root_count)
            per_level.append({"level": 0, "name": tree.level_names[0], "spend": "public (bounded DP)", "rho": 0.0})
        else:
            b = acct.spend(parts[0], f"level 0 ({tree.level_names[0]}) noisy root")
            sigma2_root = float(self.contributions) ** 2 / (2.0 * float(b.rho))
            noisy = int(tree.root_count) + int(samplers.discrete_gaussian(sigma2_root, 1, rng)[0])
            root_value = max(noisy, 0)  # post-processing: a count cannot be negative
            per_level.append({"level": 0, "name": tree.level_names[0], "rho": float(b.rho), "sigma2": sigma2_root,
                              "spend": f"rho={float(b.rho):.6g} sigma2={sigma2_root:.6g}"})
        levels = [ReleaseLevel(np.array([tree.root_key], np.int64), np.array([-1], np.int64),
                               np.array([root_value], np.int64))]
        timings = [time.perf_counter() - t0]
        stats: list[dict[str, Any]] = [{"released": 1}]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=T, desc=self.name, unit="level")
        share = parts[1] if not self.bounded else parts[0]
        for L in range(T):
            t_start = time.perf_counter()
            b = acct.spend(share, f"level {L + 1} ({tree.level_names[L + 1]})")
            sens_sq = self.level_sens_sq(L + 1, T + 1)
            sigma2 = sens_sq / (2.0 * float(b.rho))
            per_level.append({"level": L + 1, "name": tree.level_names[L + 1], "rho": float(b.rho), "sigma2": sigma2,
                              "l2_sensitivity": math.sqrt(sens_sq),
                              "spend": f"rho={float(b.rho):.6g} sigma2={sigma2:.6g}"})
            prev = levels[-1]
            level, st_ = self._run_level(tree, L, prev, sigma2, rng)
            levels.append(level)
            timings.append(time.perf_counter() - t_start)
            stats.append(st_)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(level=L + 1, nodes=len(level))
        if bar is not None:
            bar.close()
        neighbours = "bounded neighbours (n public)" if self.bounded else "unbounded neighbours"
        extra = f", m={self.contributions} {'distinct ' if self.distinct else ''}records per user"
        accounting = {
            "rho": self.spec.rho, "delta": self.spec.delta, "epsilon_target": self.spec.epsilon_target,
            "epsilon": self.spec.implied_epsilon("analytic"), "epsilon_numeric": self.spec.implied_epsilon("numeric"),
            "conversion": self.spec.conversion, "bounded": self.bounded, "contributions": self.contributions,
            "l2_sensitivity": max(math.sqrt(self.level_sens_sq(L, T + 1)) for L in range(1, T + 1)),
            "split": f"uniform over {T if self.bounded else T + 1} parts",
            "per_level": per_level, "ledger": acct.summary(self.spec.delta),
            "guarantee": guarantee_text(self.spec, neighbours, extra),
        }
        return Release(levels, list(tree.level_names), self.name, self.solver_name, accounting, timings, stats,
                       namer=getattr(tree, "namer", None), params=self.params())


# ---------------------------------------------------------------------------------- solvers
def check_level_solver(solver: str, objective: str, integer: bool) -> None:
    """Fail at construction, before any noise is drawn, if ``solver`` cannot solve a TopDown level.

    Raises:
        KeyError: unknown solver name. UnsupportedProblem: it cannot solve such a level exactly.
    """
    from hierdp.models import Problem
    from hierdp.solvers import UnsupportedProblem, get

    plugin = get(solver)
    probe = Problem.from_groups([0.6, 0.4], [0, 2], [1.0], objective=objective, integer=integer)
    why = plugin.unsupported(probe)
    if why:
        raise UnsupportedProblem(f"solver {solver!r} cannot post-process a TopDown level "
                                 f"({objective}, {'integer' if integer else 'continuous'}): " + "; ".join(why))


def _general_solve(noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray, objective: str,
                   solver: str, time_limit: float | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Pose the level as one :class:`~hierdp.models.Problem` and hand it to a registered solver."""
    from hierdp.models import Problem
    from hierdp.solvers import solve

    problem = Problem.from_groups(noisy.astype(float), offsets, totals.astype(float), objective=objective,
                                  integer=True, nonnegative=True)
    sol = solve(problem, solver=solver, time_limit=time_limit)
    g = totals.size
    return np.asarray(sol.values[g:], dtype=np.int64), {"solver": sol.solver, "objective": float(sol.objective),
                                                        "solver_s": float(sol.wall_time), **(sol.stats or {})}


class InfTDA(TopDownMechanism):
    """InfTDA (paper 000, Alg. 1 / Alg. 3): TopDown with Chebyshev-distance post-processing.

    Args:
        epsilon, delta: target (ε, δ)-DP, converted to ρ-zCDP with ``conversion``.
        rho: total ρ-zCDP instead of (ε, δ).
        budget: a :class:`~hierdp.privacy.budget.Budget` instead of the above.
        bounded: True = bounded neighbours (Alg. 1, root public); False = Alg. 3 (noisy root).
        solver: ``"intopt"`` (Alg. 4, vectorized, the default) or any registered solver name
            able to solve integer L∞ level problems (e.g. ``"highs"``, ``"ortools"``).
        contributions: m, trips per user; ``distinct``: whether they are distinct pairs.
        secure: draw noise from OS randomness with exact samplers (real releases).
        order: IntOpt's lowering order, ``"ascending"`` (paper: fewer false positives) or
            ``"descending"`` (fewer false negatives).
        time_limit: per-level limit for general solvers.
    """

    name = "InfTDA"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, solver: str = "intopt", contributions: int = 1,
                 secure: bool = False, distinct: bool = False, conversion: str = "analytic",
                 order: str = "ascending", time_limit: float | None = None) -> None:
        super().__init__(epsilon, delta, rho=rho, budget=budget, bounded=bounded, contributions=contributions,
                         distinct=distinct, secure=secure, conversion=conversion)
        if order not in ("ascending", "descending"):
            raise ValueError(f"order must be 'ascending' or 'descending', got {order!r}")
        if solver != "intopt":
            check_level_solver(solver, "linf", integer=True)
        self.solver_name = solver
        self.order = order
        self.time_limit = time_limit

    def params(self) -> dict[str, Any]:
        return {**super().params(), "solver": self.solver_name, "order": self.order}

    def _solve_level(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        if self.solver_name == "intopt":
            from hierdp.solvers.intopt import intopt_batch

            t = time.perf_counter()
            out = intopt_batch(noisy, offsets, totals, order=self.order)
            return np.asarray(out, dtype=np.int64), {"solver": "intopt", "solver_s": time.perf_counter() - t}
        return _general_solve(noisy, offsets, totals, "linf", self.solver_name, self.time_limit)


class TDA(TopDownMechanism):
    """TDA baselines of paper 000 §5 with the same noise and budget as :class:`InfTDA`.

    Args:
        objective: ``"l2"`` (TDA_l2) or ``"linf"`` (TDA_linf, the black-box Chebyshev baseline).
        rounding: for l2: ``"paper"`` = continuous projection onto the scaled simplex then the
            paper's rounding rule (:func:`~hierdp.mechanisms.rounding.paper_round_batch`);
            ``"exact"`` = the exact integer L2 optimum per group.
        solver: for l2 ``None`` uses the fast exact paths above; any registered solver name
            poses the level as a Problem instead (continuous for ``rounding="paper"``, integer for
            ``"exact"``). For linf the default is ``"highs"``.
        Other arguments as :class:`InfTDA`.
    """

    def __init__(self, objective: str = "l2", epsilon: float | None = None, delta: float | None = None, *,
                 rounding: str = "paper", solver: str | None = None, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, contributions: int = 1, secure: bool = False,
                 distinct: bool = False, conversion: str = "analytic", time_limit: float | None = None) -> None:
        if objective not in ("l2", "linf"):
            raise ValueError(f"objective must be 'l2' or 'linf', got {objective!r}")
        if rounding not in ("paper", "exact"):
            raise ValueError(f"rounding must be 'paper' or 'exact', got {rounding!r}")
        super().__init__(epsilon, delta, rho=rho, budget=budget, bounded=bounded, contributions=contributions,
                         distinct=distinct, secure=secure, conversion=conversion)
        self.objective = objective
        self.rounding = rounding
        self.time_limit = time_limit
        if solver is not None or objective == "linf":
            check_level_solver(solver or "highs", objective, integer=objective == "linf" or rounding == "exact")
        if objective == "linf":
            self.solver_name = solver or "highs"
            self.name = "TDA_linf"
        else:
            self.solver_name = solver or ("projection+paper_rounding" if rounding == "paper" else "integer_l2")
            self._general = solver is not None
            self.name = "TDA_l2" if rounding == "paper" else "TDA_l2_exact"

    def params(self) -> dict[str, Any]:
        return {**super().params(), "objective": self.objective, "rounding": self.rounding, "solver": self.solver_name}

    def _solve_level(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        from hierdp.mechanisms.rounding import paper_round_batch

        if self.objective == "linf":
            return _general_solve(noisy, offsets, totals, "linf", self.solver_name, self.time_limit)
        t = time.perf_counter()
        if self.rounding == "paper":
            if self._general:
                from hierdp.models import Problem
                from hierdp.solvers import solve

                p = Problem.from_groups(noisy.astype(float), offsets, totals.astype(float), objective="l2",
                                        integer=False, nonnegative=True)
                sol = solve(p, solver=self.solver_name, time_limit=self.time_limit)
                cont = np.asarray(sol.values[totals.size:], dtype=float)
            else:
                from hierdp.solvers.projection import project_batch

                cont = project_batch(noisy.astype(float), offsets, totals.astype(float))
            t_proj = time.perf_counter()
            out = paper_round_batch(cont, offsets, totals)
            return out, {"solver": self.solver_name, "projection_s": t_proj - t, "rounding_s": time.perf_counter() - t_proj}
        if self._general:
            return _general_solve(noisy, offsets, totals, "l2", self.solver_name, self.time_limit)
        from hierdp.solvers.projection import integer_l2_batch

        out = integer_l2_batch(noisy.astype(float), offsets, totals)
        return np.asarray(out, dtype=np.int64), {"solver": "integer_l2", "solver_s": time.perf_counter() - t}
