"""How a TopDown level is post-processed: any registered solver, through the registry.

A level is a batch of independent groups - the children of each released parent - that must become
non-negative values (integers) summing to the parent. :class:`LevelSolver` hands that batch to
:func:`hierdp.solvers.solve_groups` with the plug-in chosen by name (or a
:class:`~hierdp.solvers.Solver` instance) and its options (``executor=`` for a process pool or a
Dask cluster, ``batch_size``, ``order`` for IntOpt, ...). Nothing here calls a fast path directly:
fast paths are plug-ins that override ``Solver.solve_groups``, so ``hierdp solvers`` lists
everything a mechanism can use, and a release names the registered solver it used.

**Which optimum.** A level's groups often have several optima (L∞ and L1 always may; integer L2
on ties). The fast paths answer each group on its own, so a group's answer never depends on the
others in the call. A general solver answers a batch, and which optimum a group gets may change
with the batch - with the chunking of the level, hence with the engine or a resume. Its integer
answers are therefore moved to a canonical optimum per group (:mod:`.canonical`: the optimum closest
in L2 to the noisy values, ties to the earlier child; the objective is unchanged, checked exactly),
and constrained groups are solved one coupled component per Problem: a seeded level is the same
however it is cut.

The solver is checked through the registry's one door (:func:`hierdp.solvers.check_solver`) when
the mechanism is built (before any noise) on a probe level of the same kind, and again at the
release on a probe at the public bound on the counts (:meth:`LevelSolver.check_magnitude`): a
plug-in that cannot solve such levels exactly is refused with its reasons, and options it does not
take (a typo, an option of another plug-in) are refused by solving that probe with them.

**Constraints** (``rows=``, a :class:`~hierdp.constraints.LevelRows` from the mechanism's resolved
constraint set): the groups that a row or a child interval reaches are posed as one
:class:`~hierdp.models.Problem` (rows added with ``Problem.add_constraints``, intervals as node
bounds) and solved by the *constraint solver*; the other groups keep the mechanism's solver (each
group is an independent problem, so both parts are exact). The constraint solver is checked at
construction on a probe level that has a row coupling two groups and a bounded child; by default
it is the mechanism's solver when that accepts the probe, else ``"auto"``: the first exact plug-in
in the registry's preference order that accepts the actual problem (the fast paths refuse rows, so
a general solver; for integer L∞ ``ortools`` leads the measured order). For integer L∞, a second
exact solve picks, among all the component's L∞ optima, the one closest in L2 to the noisy values
(:meth:`LevelSolver._closest_linf_optimum`). An infeasible constrained part raises
:class:`~hierdp.constraints.ConstraintsInfeasible` naming an irreducible subset of its rows, or,
with ``on_infeasible="relax"``, is solved again with the minimal L1 relaxation of its rows, which
the level's statistics report row by row.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ON_INFEASIBLE", "LevelSolver", "check_constraint_solver", "check_level_solver", "level_probe",
           "recorded_option"]

#: what a level does when its rows cannot hold after its noise: stop, or relax them minimally (L1)
ON_INFEASIBLE = ("abort", "relax")


def level_probe(objective: str, integer: bool, *, missing_targets: bool = False, magnitude: float = 1.0,
                real_targets: bool = False) -> Any:
    """A one-group TopDown level of two children under a total of ``magnitude`` (the public bound on
    the level's counts): the probe every TopDown solver is checked on before any noise."""
    from hierdp.models import Problem

    total = float(max(1.0, np.floor(magnitude)))
    first = np.floor(total * 0.6) + (0.5 if real_targets else 0.0)
    values = [first, np.nan] if missing_targets else [first, total - first]
    return Problem.from_groups(values, [0, 2], [total], objective=objective, integer=integer)


def check_level_solver(solver: Any, objective: str, integer: bool, *, missing_targets: bool = False,
                       magnitude: float = 1.0, real_targets: bool = False) -> Any:
    """The plug-in for TopDown levels, checked through the registry's door
    (:func:`hierdp.solvers.check_solver`) before any noise is drawn, on a probe level at
    ``magnitude`` (the public bound on the counts, e.g. the root total under bounded neighbours).

    Raises:
        UnsupportedProblem: an unknown solver, or one that cannot solve such a level exactly (its
            reasons), or whose back end cannot be imported here.
    """
    from hierdp.solvers import check_solver

    probe = level_probe(objective, integer, missing_targets=missing_targets, magnitude=magnitude,
                        real_targets=real_targets)
    return check_solver(solver, probe, task=f"post-process a TopDown level ({objective}, "
                                            f"{'integer' if integer else 'continuous'})")


def _row_probe(objective: str, integer: bool, missing_targets: bool) -> Any:
    """Two groups of two children, a row coupling them and a child with bounds: the shape of a
    constrained level."""
    from hierdp.models import Problem

    nan = float("nan")
    target = [nan, nan, 0.6, nan if missing_targets else 0.4, 0.7, 0.3]
    p = Problem([-1, -1, 0, 0, 1, 1], target, fixed=[1, 1, nan, nan, nan, nan], objective=objective,
                integer=integer, lower=[-np.inf, -np.inf, 0, 0, 0, 0], upper=[np.inf, np.inf, 1, np.inf, np.inf, 1])
    p.add_constraints(np.array([[0, 0, 1, 0, 1, 0]]), upper=1, name="probe")
    return p


def check_constraint_solver(solver: Any, objective: str, integer: bool, *, missing_targets: bool = False) -> Any:
    """The solver of constrained groups, checked through the registry's door before any noise on a
    probe with a row and bounds. ``"auto"`` is accepted when some exact plug-in solves the probe.
    Returns the name (or Solver) as given.

    Raises:
        UnsupportedProblem: the plug-in cannot honour rows and bounds on such levels (its reasons).
    """
    from hierdp.solvers import UnsupportedProblem, check_solver

    probe = _row_probe(objective, integer, missing_targets)
    task = f"honour constraint rows on a TopDown level ({objective}, {'integer' if integer else 'continuous'})"
    try:
        check_solver(solver, probe, task=task)
    except UnsupportedProblem as exc:
        if isinstance(solver, str) and solver == "auto":
            raise
        raise UnsupportedProblem(f"{exc}; leave constraint_solver unset (auto: an exact general solver) or name "
                                 "one that accepts rows, e.g. 'highs' or 'ortools'") from None
    return solver


def recorded_option(value: Any) -> Any:
    """A solver option as a release records it: plain values (numbers, strings, booleans, None, and
    lists / dicts of them) verbatim, so the option can be passed again (intervals re-run the level
    solver); any other object (an executor, a pool) as ``"<TypeName>"``, which is not re-usable."""
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        inner = {k: recorded_option(v) for k, v in value.items()}
        return inner if not any(_is_placeholder(v) for v in inner.values()) else f"<{type(value).__name__}>"
    if isinstance(value, (list, tuple)):
        items = [recorded_option(v) for v in value]
        return items if not any(_is_placeholder(v) for v in items) else f"<{type(value).__name__}>"
    return f"<{type(value).__name__}>"


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("<") and value.endswith(">")


class LevelSolver:
    """Post-processes TopDown levels with one registered solver.

    Args:
        solver: a registered name or a :class:`~hierdp.solvers.Solver` instance.
        objective: ``"linf"``, ``"l2"`` or ``"l1"`` distance to the noisy children.
        integer: integer solutions (TopDown releases counts).
        options: plug-in options passed on every call (``executor``, ``batch_size``, ``order``, ...).
        time_limit: seconds per call (one call per chunk of a level); a plug-in that hits it
            raises :class:`~hierdp.solvers.SolverFailed`.
        missing_targets: levels may have children without a target (per-node budget plans).
        constraints: the mechanism has a constraint set: check a constraint solver now.
        constraint_solver: solver of the groups reached by rows or child intervals (default: the
            mechanism's solver if it accepts a probe with a row, else ``"auto"``).
        on_infeasible: ``"abort"`` (default) or ``"relax"`` (minimal L1 relaxation of the rows,
            reported in the level's statistics under ``relaxations``).
    """

    def __init__(self, solver: Any, *, objective: str, integer: bool = True,
                 options: Mapping[str, Any] | None = None, time_limit: float | None = None,
                 missing_targets: bool = False, constraints: bool = False, constraint_solver: Any = None,
                 on_infeasible: str = "abort") -> None:
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"solver_options must be a mapping of option -> value, got {type(options).__name__}")
        if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                       or not time_limit > 0):
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        if on_infeasible not in ON_INFEASIBLE:
            raise ValueError(f"on_infeasible must be one of {ON_INFEASIBLE}, got {on_infeasible!r}")
        check_level_solver(solver, objective, integer, missing_targets=missing_targets)
        self.missing_targets = bool(missing_targets)
        self.solver = solver
        self.objective = objective
        self.integer = bool(integer)
        self.options = dict(options or {})
        self.time_limit = time_limit
        self.on_infeasible = on_infeasible
        self.constraint_solver: Any = None
        self._constraint_options: dict[str, Any] = {}
        if constraints:
            self.constraint_solver = self._pick_constraint_solver(constraint_solver, missing_targets)
        if self.options:
            self._check_options(missing_targets)

    def _pick_constraint_solver(self, given: Any, missing_targets: bool) -> Any:
        from hierdp.solvers import UnsupportedProblem

        if given is not None:
            return check_constraint_solver(given, self.objective, self.integer, missing_targets=missing_targets)
        try:
            chosen = check_constraint_solver(self.solver, self.objective, self.integer, missing_targets=missing_targets)
            self._constraint_options = self.options  # the mechanism's own solver: its options apply
            return chosen
        except UnsupportedProblem:
            return check_constraint_solver("auto", self.objective, self.integer, missing_targets=missing_targets)

    def _check_options(self, missing_targets: bool) -> None:
        """Solve a one-group probe level with the options: a plug-in refuses options it does not
        take with ``TypeError`` only when it solves, which in a release is after the level's noise.

        Raises:
            MechanismParameterError: the plug-in refused the options (naming them and the reason).
        """
        from hierdp.mechanisms.base import MechanismParameterError
        from hierdp.solvers import solve_groups

        probe = np.array([0.6, np.nan if missing_targets else 0.4])
        try:
            solve_groups(probe, np.array([0, 2]), np.array([1.0]), solver=self.solver, objective=self.objective,
                         integer=self.integer, time_limit=self.time_limit, **self.options)
        except TypeError as exc:
            raise MechanismParameterError(f"solver_options {sorted(self.options)} are not options of solver "
                                          f"{self.name!r}: {exc}") from None

    def check_magnitude(self, bound: float, *, real_targets: bool = False) -> None:
        """Refuse, before any noise, a solver that cannot solve levels whose counts reach ``bound``
        (public: the root total under bounded neighbours, or a declared bound).

        Raises:
            UnsupportedProblem: the plug-in's reasons (e.g. a magnitude beyond its float64 range).
        """
        check_level_solver(self.solver, self.objective, self.integer, missing_targets=self.missing_targets,
                           magnitude=bound, real_targets=real_targets)

    @property
    def name(self) -> str:
        """The registered name of the plug-in."""
        return self.solver if isinstance(self.solver, str) else self.solver.name

    @property
    def constraint_solver_name(self) -> str | None:
        """The name of the constraint solver (None without constraints)."""
        cs = self.constraint_solver
        return None if cs is None else (cs if isinstance(cs, str) else cs.name)

    def solve(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray,
              rows: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        """One batch of groups: values (int64 when integer) in the order of ``noisy``, and stats.

        Args:
            rows: a :class:`~hierdp.constraints.LevelRows` over these children (or None).

        Raises:
            ConstraintsInfeasible: the rows cannot hold (``on_infeasible="abort"``); names an
                irreducible subset of them and the failing groups.
        """
        if rows is None or rows.empty:
            return self._solve_plain(noisy, offsets, totals)
        if self.constraint_solver is None:
            raise ValueError("this level solver was built without constraints (constraints=False)")
        from hierdp._segments import gather_ranges

        offsets = np.asarray(offsets, dtype=np.int64)
        totals = np.asarray(totals)
        sizes = np.diff(offsets)
        # the mechanism's solver first: a component of groups (joined by rows) whose answer already
        # satisfies its rows and intervals is optimal under them too (the rows only shrink its
        # feasible set), so only the components it breaks go to the constraint solver
        values, stats = self._solve_plain(noisy, offsets, totals)
        values = np.array(values, copy=True)
        comp = rows.group_components(offsets)
        broken = rows.violated_groups(values, offsets) if self.integer else rows.touched_groups(offsets)
        redo = np.flatnonzero(np.isin(comp, comp[broken]))
        stats.update({"constraint_solver": self.constraint_solver_name, "constrained_groups": int(redo.size),
                      "constraint_rows": int(rows.n_rows)})
        if not redo.size:
            return values, stats
        # one Problem per coupled component: its answer (one of possibly several optima) and the plug-in
        # "auto" picks for it then depend on the component alone, not on the other components that
        # share its chunk, so every chunking of the level (engine, resume) gives the same release
        by_comp = redo[np.argsort(comp[redo], kind="stable")]
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(comp[by_comp])) + 1, [by_comp.size]])
        seconds, relaxations = 0.0, []
        ties: dict[str, int] = {}
        for s, e in itertools.pairwise(bounds.tolist()):
            members = np.sort(by_comp[s:e])
            idx, off = gather_ranges(offsets[:-1][members], sizes[members])
            try:
                v, cstats = self._solve_constrained(np.asarray(noisy)[idx], off, totals[members], rows.restrict(idx),
                                                    members)
            except Exception as exc:
                if getattr(exc, "groups", None) is None:  # name the groups this solve was about
                    with contextlib.suppress(AttributeError):
                        exc.groups = members  # type: ignore[attr-defined]
                raise
            values[idx] = v
            seconds += cstats["constraint_s"]
            relaxations.extend(cstats.get("relaxations", ()))
            if "constraint_tie_break" in cstats:  # one line per outcome, with its count of components
                ties[cstats["constraint_tie_break"]] = ties.get(cstats["constraint_tie_break"], 0) + 1
            stats["constraint_solver"] = cstats["constraint_solver"]
        stats["constraint_s"] = seconds
        stats["constraint_components"] = int(bounds.size - 1)
        if relaxations:
            stats["relaxations"] = relaxations
        if ties:
            stats["constraint_tie_break"] = ties
        stats["objective"] = _level_objective(values, np.asarray(noisy, dtype=float), offsets, self.objective)
        return values, stats

    @property
    def batches_groups(self) -> bool:
        """Whether the plug-in answers a level's groups together (a general solver posing them as one
        :class:`~hierdp.models.Problem` in batches), so that which of several optima a group gets may
        depend on the other groups of its call. The fast paths override ``Solver.solve_groups`` and
        answer each group on its own. ``"auto"`` counts as batching: two chunks of a level may be
        answered by different plug-ins, so only the canonical optimum keeps them alike."""
        from hierdp.solvers import Solver, get

        if isinstance(self.solver, str) and self.solver == "auto":
            return True
        plugin = self.solver if isinstance(self.solver, Solver) else get(self.solver)
        return type(plugin).solve_groups is Solver.solve_groups

    def _solve_plain(self, noisy: np.ndarray, offsets: np.ndarray,
                     totals: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        from hierdp.solvers import solve_groups

        t0 = time.perf_counter()
        # values go as they are (int64 noisy counts stay exact for plug-ins that take integers)
        sol = solve_groups(np.asarray(noisy), offsets, np.asarray(totals),
                           solver=self.solver, objective=self.objective, integer=self.integer,
                           time_limit=self.time_limit, **self.options)
        values = np.asarray(sol.values)
        stats = {"solver": sol.solver, "objective": float(sol.objective),
                 "solver_s": float(sol.wall_time or (time.perf_counter() - t0)), **dict(sol.stats or {})}
        if self.integer:
            values = np.rint(values).astype(np.int64)
            if self.batches_groups:
                # a deterministic tie-break among the optima: the same answer whatever else was in
                # the call (another chunking, engine or resume gives the same release)
                from hierdp.mechanisms.topdown.canonical import canonical_optimum

                values, kept = canonical_optimum(values, np.asarray(noisy, dtype=float), offsets, totals,
                                                 self.objective)
                stats["tie_break"] = "canonical optimum (closest in L2 to the noisy values, ties to the earlier child)"
                if kept:
                    stats["tie_break_skipped_groups"] = kept
        return values, stats

    def _solve_constrained(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray, rows: Any,
                           groups: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Some groups (``groups``: their positions in the batch) with the rows and intervals over
        their children (``rows``, columns in the order of ``noisy``), as one Problem solved by the
        constraint solver."""
        from hierdp.constraints.feasibility import clone_problem, is_infeasible, minimal_relaxation
        from hierdp.models import Problem
        from hierdp.solvers import SolverFailed, solve

        t0 = time.perf_counter()
        G, nc = groups.size, int(np.asarray(noisy).size)
        sizes = np.diff(offsets)
        parent = np.concatenate([np.full(G, -1, np.int64), np.repeat(np.arange(G, dtype=np.int64), sizes)])
        target = np.concatenate([np.full(G, np.nan), np.asarray(noisy, dtype=float)])
        fixed = np.concatenate([np.asarray(totals, dtype=float), np.full(nc, np.nan)])
        lower = np.full(G + nc, -np.inf)
        upper = np.full(G + nc, np.inf)
        if rows.child_lower is not None:
            lower[G:], upper[G:] = rows.child_lower, rows.child_upper
        p = Problem(parent, target, fixed=fixed, objective=self.objective, integer=self.integer, nonnegative=True,
                    lower=lower, upper=upper)
        mat = rows.matrix if rows.n_rows else None
        if mat is not None:
            p.add_constraints(mat, rows.lower, rows.upper, nodes=np.arange(G, G + nc), name="constraints")
        relaxations: list[dict[str, Any]] = []
        options = self._constraint_options
        posed = p
        try:
            sol = solve(p, solver=self.constraint_solver, time_limit=self.time_limit, **options)
        except SolverFailed as exc:
            if not is_infeasible(exc) or mat is None:
                _remap_groups(exc, groups)
                raise
            if self.on_infeasible != "relax":
                raise self._infeasible(p, rows, sizes, groups) from exc
            cons = p.constraints
            lower_by, upper_by = minimal_relaxation(p, np.ones(len(cons), bool), time_limit=self.time_limit)
            relaxed = clone_problem(p, lower=cons.lower - lower_by, upper=cons.upper + upper_by, feasibility=False)
            sol = solve(relaxed, solver=self.constraint_solver, time_limit=self.time_limit, **options)
            posed = relaxed
            for r in np.flatnonzero((lower_by > 0) | (upper_by > 0)):
                relaxations.append({"row": str(rows.names[r]), "level": int(rows.level),
                                    "lower_by": float(lower_by[r]), "upper_by": float(upper_by[r])})
        values = np.asarray(sol.values)[G:]
        objective = float(sol.objective)
        tie_break = None
        if self.integer and self.objective == "linf":
            values, tie_break = self._closest_linf_optimum(posed, values, offsets, G)
        if self.integer:
            values = np.rint(values).astype(np.int64)
        stats: dict[str, Any] = {"constraint_solver": sol.solver, "constrained_groups": int(G),
                                 "constraint_rows": int(rows.n_rows), "constrained_objective": objective,
                                 "constraint_s": time.perf_counter() - t0}
        if tie_break is not None:
            stats["constraint_tie_break"] = tie_break
        if relaxations:
            stats["relaxations"] = relaxations
        return values, stats

    def _closest_linf_optimum(self, p: Any, values: np.ndarray, offsets: np.ndarray,
                              G: int) -> tuple[np.ndarray, str]:
        """Among *all* integer L∞ optima of a constrained component, the one closest in L2 to the
        noisy values (children without a measurement: to 0, as :mod:`.canonical` anchors them).

        Why: the L∞ objective only pins the sum of the groups' largest deviations, so a solver may
        move every other child up to them, or share the deviation between coupled groups in the
        worst way (a county level under one binding cap came back with all 102 counties of the
        capped state > 1,000 off, against ~10 without the cap). The second solve poses the optimum
        set exactly: one deviation variable ``d_g`` per group (a parentless node without a target),
        ``|y_i - x_i| <= d_g`` for the group's measured children, ``sum_g d_g <= OPT`` (the first
        solve's optimum, an integer), the same rows and bounds; integer L2 to the noisy values. Its
        answer is an L∞ optimum (checked exactly); among equally close optima, the plug-in's answer
        stands. If the second solve fails, the first optimum is kept and the statistics say so.
        """
        from scipy import sparse

        from hierdp.models import Problem
        from hierdp.solvers import SolverError, solve

        noisy = np.asarray(p.target, dtype=float)[G:]
        n = p.n
        measured = np.isfinite(noisy)
        sizes = np.diff(offsets)
        group = np.repeat(np.arange(G), sizes)
        x = np.rint(np.asarray(values, dtype=float))

        best = _level_objective(x, noisy, offsets, "linf")  # the first solve's optimum (integers: exact)
        # nodes: the component's G fixed parents, its children, then one deviation node per group
        parent = np.concatenate([np.asarray(p.parent), np.full(G, -1, np.int64)])
        target = np.concatenate([np.asarray(p.target, dtype=float)[:G], np.where(measured, noisy, 0.0),
                                 np.full(G, np.nan)])
        # |y_i - x_i| <= d_g <= OPT also as bounds: the same set, and domains a CP-SAT model can hold
        lower, upper = np.array(p.lower, dtype=float), np.array(p.upper, dtype=float)
        lower[G:][measured] = np.maximum(lower[G:][measured], np.ceil(noisy[measured] - best))
        upper[G:][measured] = np.minimum(upper[G:][measured], np.floor(noisy[measured] + best))
        q = Problem(parent, target, fixed=np.concatenate([np.asarray(p.fixed, dtype=float), np.full(G, np.nan)]),
                    objective="l2", integer=True, nonnegative=True,
                    lower=np.concatenate([lower, np.zeros(G)]), upper=np.concatenate([upper, np.full(G, best)]))
        if p.n_constraints:
            cons = p.constraints
            q.add_constraints(sparse.hstack([cons.matrix, sparse.csr_matrix((len(cons), G))]).tocsr(),
                              cons.lower, cons.upper, name="rows")
        kids = np.flatnonzero(measured)
        m = kids.size
        if m:  # y_i - d_g <= x_i and -y_i - d_g <= -x_i
            r = np.arange(2 * m)
            cols = np.concatenate([G + kids, G + kids, n + group[kids], n + group[kids]])
            rows_ix = np.concatenate([r[:m], r[m:], r[:m], r[m:]])
            coef = np.concatenate([np.ones(m), -np.ones(m), -np.ones(m), -np.ones(m)])
            mat = sparse.csr_matrix((coef, (rows_ix, cols)), shape=(2 * m, n + G))
            q.add_constraints(mat, np.full(2 * m, -np.inf), np.concatenate([noisy[kids], -noisy[kids]]),
                              name="deviations")
        q.add_constraints(sparse.csr_matrix((np.ones(G), (np.zeros(G, np.int64), n + np.arange(G))), shape=(1, n + G)),
                          np.array([-np.inf]), np.array([best]), name="optimum")
        try:
            second = solve(q, solver=self.constraint_solver, time_limit=self.time_limit, **self._constraint_options)
        except SolverError as exc:
            return values, f"the first L-inf optimum kept (the L2 tie-break failed: {type(exc).__name__})"
        y = np.rint(np.asarray(second.values, dtype=float)[G:n])
        if _level_objective(y, noisy, offsets, "linf") > best:  # cannot (its rows): never trade the optimum
            return values, "the first L-inf optimum kept (the L2 tie-break left the optimum)"
        return y, f"closest in L2 to the noisy values among the L-inf optima ({second.solver})"

    def _infeasible(self, p: Any, rows: Any, sizes: np.ndarray, groups: np.ndarray) -> Exception:
        """A :class:`ConstraintsInfeasible` naming an irreducible subset of the rows (deletion filter)."""
        from hierdp.constraints.errors import ConstraintsInfeasible
        from hierdp.constraints.feasibility import clone_problem, decide, irreducible_subset

        m = rows.n_rows
        subset = irreducible_subset(list(range(m)), lambda s: decide(clone_problem(p, rows=np.asarray(s, np.int64)),
                                                                      time_limit=self.time_limit))
        group_of_child = np.repeat(np.arange(groups.size), sizes)
        if subset:
            cols = rows.matrix[np.asarray(subset)].indices  # positions among these groups' children
            failing = groups[np.unique(group_of_child[cols])]
            named = ", ".join(repr(str(rows.names[r])) for r in subset)
            what = (f"row {named} cannot hold" if len(subset) == 1
                    else f"these {len(subset)} rows cannot hold together: {named}")
            msg = (f"the public constraint rows cannot all hold at level {rows.level} after its noise (the coarser "
                   f"levels were already released): {what}; pass on_infeasible='relax' to release the minimal L1 "
                   "relaxation of the rows instead")
            return ConstraintsInfeasible(msg, entries=[str(rows.names[r]) for r in subset],
                                         groups=failing.tolist(), level=int(rows.level))
        msg = (f"the public constraint rows cannot all hold at level {rows.level} after its noise"
               + (" (no irreducible subset could be named)" if subset is None else
                  " (the node intervals alone cannot hold under the released parents)"))
        return ConstraintsInfeasible(msg, groups=groups.tolist(), level=int(rows.level))

    def params(self) -> dict[str, Any]:
        """For the release's parameters."""
        shown = {k: recorded_option(v) for k, v in self.options.items()}
        out = {"solver": self.name, "objective": self.objective, "solver_options": shown,
               "time_limit": self.time_limit}
        if self.constraint_solver is not None:
            out["constraint_solver"] = self.constraint_solver_name
            out["on_infeasible"] = self.on_infeasible
        return out


def _level_objective(values: np.ndarray, noisy: np.ndarray, offsets: np.ndarray, objective: str) -> float:
    """The level's objective at ``values`` (children without a target have no term)."""
    d = np.abs(np.asarray(values, dtype=float) - noisy)
    has = ~np.isnan(d)
    if objective == "l1":
        return float(d[has].sum())
    if objective == "l2":
        return float((d[has] ** 2).sum())
    sizes = np.diff(offsets)
    group = np.repeat(np.arange(sizes.size), sizes)
    best = np.zeros(sizes.size)
    np.maximum.at(best, group[has], d[has])
    return float(best.sum())


def _remap_groups(exc: BaseException, groups: np.ndarray) -> None:
    """A solver failure on a subset of groups names them in the caller's numbering."""
    g = getattr(exc, "groups", None)
    if g is not None:
        with contextlib.suppress(IndexError, ValueError):  # a numbering we cannot map stays as it is
            exc.groups = groups[np.asarray(g, dtype=np.int64)]  # type: ignore[attr-defined]
