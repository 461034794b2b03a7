"""Compare mechanisms and solvers on one input and budget over several seeds, as one tidy frame.

``hierdp.compare(data, mechanisms=[...], solvers=[...], epsilon=1, delta=1e-8, seeds=5)`` runs
every (mechanism, solver) configuration on the same data with the same budget, once per seed, and
returns one row per (configuration, seed, level) with the metrics that fit the input (the
researcher's first question: how much error, where, at what cost). :mod:`hierdp.plot` draws it;
``hierdp compare`` is the same from the command line.

Which mechanisms fit the data, which take a solver and how ``time_limit`` reaches them are read
from the mechanism registry's metadata (:class:`hierdp.mechanisms.registry.MechanismInfo`): every
solver of ``solvers`` is tried on every mechanism with a solver step, with ``time_limit`` seconds
per solve; a mechanism without one runs once (solver ``"-"``). The input decides the metrics:

============  ===================================  =====================================================
input         "levels" of the frame                metrics
============  ===================================  =====================================================
tree          the tree's levels                    released and true non-zero nodes, max / mean absolute
                                                   error, false discovery / negative rates, seconds
group sizes   the region levels                    L1 error (total, per cell, relative), max absolute
                                                   error, #CV (cells differing from their children's
                                                   sum), negative cells
points        range workloads (random rectangles;  mean relative error (%, smoothing 20), its 95th
              squares of 2, 6 and 10 % of the      percentile, mean absolute error per query
              grid), 1,000 queries each
============  ===================================  =====================================================

With ``intervals=0.9`` every successful release also gets its per-node intervals
(``release.intervals(0.9)``, :mod:`hierdp.intervals`: post-processing, no budget) and the frame
gains, per level, how many nodes they were scored on, the percentage whose interval holds the true
value and their mean width (:func:`hierdp.metrics.interval_coverage_by_level`), plus the method
and its kind (bound / exact / estimate); the figure draws them as error bands. Trees and group
sizes have intervals; point releases answer range queries, whose intervals hierdp does not
compute, so ``intervals=`` is refused there.

Runs are *experiments*: seeded numpy randomness, reproducible, not for publication. Every
configuration sees the same seeds, so differences between configurations at one seed come
from the post-processing (for mechanisms with the same noise) and not from luck alone.

A configuration that cannot run is reported, not hidden: ``status`` is ``"ok"``,
``"time_limit"`` (a solver stopped at ``time_limit`` seconds, also after the noise was drawn), ``"unsupported"`` (the solver cannot
post-process this mechanism's problems exactly, or an option does not apply to it) or
``"failed"`` (another error; ``message`` says which). After a configuration fails its remaining
seeds are skipped (they would fail the same way, or wait for the same time limit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COMMON_COLUMNS", "INTERVAL_COLUMNS", "METRICS", "Configuration", "compare", "configurations", "input_kind", "point_workloads",
           "summary"]

#: columns every comparison frame has, in order (the input's metric columns follow)
COMMON_COLUMNS = ["input", "mechanism", "solver", "seed", "level", "level_name", "run_seconds", "status", "message",
                  "epsilon", "delta", "rho", "guarantee"]

#: the metric columns of each input kind, in order
METRICS: dict[str, list[str]] = {
    "tree": ["released_nodes", "true_nonzero", "max_abs_error", "mean_abs_error", "false_discovery_rate_pct",
             "false_negative_rate_pct", "level_seconds"],
    "group_sizes": ["regions", "cells", "l1_total", "l1_per_cell", "l1_relative", "max_abs_error", "cv", "negative"],
    "points": ["queries", "mre_pct", "p95_relative_error_pct", "mean_abs_error", "leaves"],
}

#: the columns ``intervals=`` adds after the metrics
INTERVAL_COLUMNS = ["interval_level", "interval_method", "interval_nodes", "interval_coverage_pct",
                    "interval_mean_width"]


@dataclass(frozen=True)
class Configuration:
    """One (mechanism, solver) pair to run. ``solver=None``: the mechanism's default."""

    mechanism: str
    solver: str | None

    @property
    def label(self) -> str:
        """``"inftda"`` or ``"inftda/highs"``."""
        return self.mechanism if self.solver is None else f"{self.mechanism}/{self.solver}"


def configurations(mechanisms: Sequence[str], solvers: Sequence[str] | None) -> list[Configuration]:
    """Every (mechanism, solver) pair: each solver for the mechanisms with a solver step (registry
    metadata), the mechanism's default solver when ``solvers`` is None, one run for the others."""
    from hierdp.mechanisms import registry

    out: list[Configuration] = []
    for m in mechanisms:
        if solvers and registry.info(m).takes_solver:
            out.extend(Configuration(m, s) for s in solvers)
        else:
            out.append(Configuration(m, None))
    return out


def input_kind(data: Any) -> str:
    """The registry input kind of ``data``: ``"group_sizes"`` (a count-of-counts hierarchy),
    ``"points"`` (a point grid), ``"spine_histograms"``, ``"persons"`` (a frame) or ``"tree"``."""
    if all(hasattr(data, a) for a in ("by_size", "regions", "K")):
        return "group_sizes"
    if all(hasattr(data, a) for a in ("counts", "domain", "prefix")):
        return "points"
    if hasattr(data, "spine") and hasattr(data, "geounit_histograms"):
        return "spine_histograms"
    if isinstance(data, pd.DataFrame):
        return "persons"
    return "tree"


def _default_mechanisms(kind: str) -> list[str]:
    """The mechanisms compared when none are named: every registered mechanism of the input that
    is tagged for the default comparison (registry metadata)."""
    from hierdp.mechanisms import registry

    return [n for n, m in registry.infos().items() if m.input == kind and m.compare]


def _budget(epsilon: float | None, delta: float | None, rho: float | None) -> dict[str, Any]:
    if (epsilon is None) == (rho is None):
        from hierdp.privacy.errors import PrivacyParameterError

        raise PrivacyParameterError("give exactly one of epsilon (with delta) or rho")
    if epsilon is not None:
        return {"epsilon": epsilon, "delta": 1e-8 if delta is None else delta}
    return {"rho": rho, "delta": delta}


def _create(conf: Configuration, budget: dict[str, Any], params: dict[str, Any], time_limit: float | None) -> Any:
    from hierdp.mechanisms import registry

    kw = dict(budget, **params)
    if conf.solver is not None:
        kw["solver"] = conf.solver
    if time_limit is not None and registry.info(conf.mechanism).takes_solver:
        kw["time_limit"] = time_limit
    return registry.create(conf.mechanism, **kw)


def _status_of(exc: BaseException) -> str:
    from hierdp.mechanisms.base import MechanismParameterError, ReleaseAborted
    from hierdp.privacy.errors import PrivacyParameterError
    from hierdp.solvers.base import SolverFailed, Status, UnsupportedProblem

    cause = exc.cause if isinstance(exc, ReleaseAborted) else exc
    if isinstance(cause, SolverFailed) and cause.status == Status.TIME_LIMIT:
        return str(Status.TIME_LIMIT)
    if isinstance(cause, (UnsupportedProblem, TypeError, MechanismParameterError, PrivacyParameterError)):
        return "unsupported"
    return "failed"


def _seeds(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise ValueError(f"seeds must be a positive number of runs or a list of seeds, got {seeds}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive number of runs or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty")
    return out


# ------------------------------------------------------------------------------ metrics per input
def _tree_report(release: Any, data: Any, workloads: Any) -> pd.DataFrame:
    from hierdp.metrics import level_report

    return level_report(release, data).reset_index().rename(columns={"seconds": "level_seconds"})


def _group_size_report(release: Any, data: Any, workloads: Any) -> pd.DataFrame:
    from hierdp.metrics.histogram import constraint_violations_by_level, l1_error_by_level

    df = l1_error_by_level(release, data)
    df["cv"] = constraint_violations_by_level(release)
    values = np.asarray(release.values)
    df["negative"] = [int((values[release.level == lev] < 0).sum()) for lev in df["level"]]
    return df


def point_workloads(shape: tuple[int, int], queries: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
    """The range workloads a point comparison reports (paper 002 §5.1): random rectangles, and
    squares covering 2, 6 and 10 % of the grid, ``queries`` each, drawn from ``seed``."""
    from hierdp.metrics.spatial import random_rectangles, random_squares

    rng = np.random.default_rng(seed)
    out = {"random rectangles": random_rectangles(shape, queries, rng)}
    for f in (0.02, 0.06, 0.10):
        out[f"squares {f:.0%}"] = random_squares(shape, queries, f, rng)
    return out


def _point_report(release: Any, data: Any, workloads: dict[str, np.ndarray]) -> pd.DataFrame:
    from hierdp.metrics.spatial import relative_errors

    rows = []
    for k, (name, q) in enumerate(workloads.items()):
        answers = np.asarray(release.answer(q), dtype=np.float64)
        truth = np.asarray(data.query_counts(q), dtype=np.float64)
        rel = relative_errors(answers, truth)
        rows.append({"level": k, "level_name": name, "queries": int(q.shape[0]), "mre_pct": 100.0 * float(rel.mean()),
                     "p95_relative_error_pct": 100.0 * float(np.quantile(rel, 0.95)),
                     "mean_abs_error": float(np.abs(answers - truth).mean()), "leaves": int(release.n_leaves)})
    return pd.DataFrame(rows)


_REPORTS: dict[str, Callable[[Any, Any, Any], pd.DataFrame]] = {
    "tree": _tree_report, "group_sizes": _group_size_report, "points": _point_report}


def _interval_report(release: Any, data: Any, mech: Any, level: float, draws: int | None, seed: int,
                     kind: str) -> pd.DataFrame:
    """Per level: the intervals' method, scored nodes, coverage of the truth and mean width."""
    from hierdp.metrics.intervals import interval_coverage_by_level

    public = {"domain": data} if kind == "tree" else {"mechanism": mech}
    frame = release.intervals(level, draws=draws, seed=seed, **public)
    info = frame.attrs.get("intervals", {})
    out = interval_coverage_by_level(frame, release, data)
    out.insert(0, "interval_method", f"{info.get('method', '?')} ({info.get('kind', '?')})")
    out.insert(0, "interval_level", float(level))
    return out


def _interval_scores(release: Any, data: Any, mech: Any, level: float, draws: int | None, seed: int,
                     kind: str) -> pd.DataFrame:
    """:func:`_interval_report`, or one row of NaN scores naming why a release has no intervals."""
    from hierdp.intervals.errors import IntervalsUnsupported

    try:
        return _interval_report(release, data, mech, level, draws, seed, kind)
    except IntervalsUnsupported as exc:
        return pd.DataFrame({"level": range(len(getattr(release, "level_names", [])) or 1),
                             "interval_level": float(level), "interval_method": f"none: {exc}"})


def compare(
    data: Any = None,
    mechanisms: Sequence[str] | str | None = None,
    *,
    solvers: Sequence[str] | None = None,
    epsilon: float | None = 1.0,
    delta: float | None = 1e-8,
    rho: float | None = None,
    seeds: int | Iterable[int] = 5,
    time_limit: float | None = 30.0,
    progress: bool = False,
    queries: int = 1000,
    intervals: float | None = None,
    interval_draws: int | None = None,
    **params: Any,
) -> pd.DataFrame:
    """Run several mechanisms and/or solvers on one input and budget over several seeds.

    Args:
        data: a tree (Hierarchy or O/D tree; default: the bundled world cities), group sizes (a
            :class:`~hierdp.hierarchy.count_of_counts.CountOfCounts`) or points (a
            :class:`~hierdp.hierarchy.spatial.SpatialGrid`); its domain must be declared or
            explicitly assumed public (:mod:`hierdp.privacy.domain`).
        mechanisms: registry names (:func:`hierdp.mechanisms.registry.names`) whose input is the
            data's; default: those the registry tags for the default comparison of that input.
        solvers: solver names to try on every mechanism with a solver step (registry metadata);
            ``None`` = each mechanism's default.
        epsilon, delta / rho: the budget every configuration gets (pass ``epsilon=None`` with
            ``rho``); pure-DP mechanisms use ε (δ only sets their reported (ε, δ) figures).
        seeds: a number of runs (seeds 0..n-1) or the seeds themselves.
        time_limit: seconds per solve for the mechanisms with a solver step (``None``: no limit).
        progress: a progress bar over the runs.
        queries: queries per range workload (point inputs).
        intervals: a nominal level (e.g. 0.9) to score every release's per-node intervals against
            the truth (:data:`INTERVAL_COLUMNS`; trees and group sizes); ``None``: none.
        interval_draws: bootstrap draws per release (default: the method's own default).
        **params: further mechanism parameters for every configuration (``bounded=False``,
            ``contributions=2``, ...).

    Returns:
        A tidy frame: :data:`COMMON_COLUMNS` then the input's :data:`METRICS`, one row per
        (mechanism, solver, seed, level) for successful runs (``solver`` is the solver asked for,
        or the one the release reports), one row with ``status`` and ``message`` (and no level)
        for a configuration that could not run. ``frame.attrs["input"]`` is the input kind;
        ``frame.attrs["accounting"]`` maps each configuration that ran (``"inftda"``,
        ``"inftda/highs"``) to its accounting document
        (:func:`hierdp.release.saved.release_document`, of its first seed; ``"seeds"`` lists them
        all), which ``hierdp compare`` writes beside its CSV.

    Raises:
        ValueError: an input kind with no comparison metrics, or a mechanism for another input.
        KeyError: an unknown mechanism or solver name.
    """
    from hierdp.mechanisms import registry
    from hierdp.privacy.domain import check_public_domain

    if data is None:
        from hierdp.datasets import world_cities_hierarchy

        data = world_cities_hierarchy()
    kind = input_kind(data)
    if kind not in _REPORTS:
        raise ValueError(f"compare covers trees, group sizes and points; this input is {registry.INPUT_KINDS[kind]}")
    if intervals is not None:
        if kind == "points":
            raise ValueError("intervals= scores per-node intervals of trees and group sizes; point releases answer "
                             "range queries, which have none")
        if isinstance(intervals, bool) or not isinstance(intervals, (int, float)) or not 0.0 < intervals < 1.0:
            raise ValueError(f"intervals must be a level in (0, 1), e.g. 0.9, got {intervals!r}")
    check_public_domain(data, what="compare")  # refuse before any run, as every mechanism would
    names = _default_mechanisms(kind) if mechanisms is None else (
        [mechanisms] if isinstance(mechanisms, str) else list(mechanisms))
    if not names:
        raise ValueError("mechanisms is empty")
    known = registry.names()
    for m in names:
        if m not in known:
            raise KeyError(f"unknown mechanism {m!r}; registered: {', '.join(known)}")
        if registry.info(m).input != kind:
            raise ValueError(f"mechanism {m!r} releases {registry.info(m).input_text}, not "
                             f"{registry.INPUT_KINDS[kind]}; for this input: {', '.join(registry.names(input=kind))}")
    if solvers is not None:
        from hierdp.solvers import names as solver_names

        for s in solvers:
            if s not in solver_names():
                raise KeyError(f"unknown solver {s!r}; registered: {', '.join(solver_names())}")
    seed_list = _seeds(seeds)
    confs = configurations(names, solvers)
    budget = _budget(epsilon, delta, rho)
    report = _REPORTS[kind]
    workloads = point_workloads(tuple(data.domain.shape), queries) if kind == "points" else None
    rows: list[dict[str, Any]] = []
    accounting: dict[str, Any] = {}  # per configuration: its accounting document (the first seed's)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(confs) * len(seed_list), desc="hierdp compare", unit="run")
    try:
        for conf in confs:
            base = {"input": kind, "mechanism": conf.mechanism, "solver": conf.solver or "-",
                    "epsilon": budget.get("epsilon"), "delta": budget.get("delta"), "rho": budget.get("rho")}
            for k, seed in enumerate(seed_list):
                try:
                    mech = _create(conf, budget, params, time_limit)
                    t0 = time.perf_counter()
                    rel = mech.release(data, seed=seed)
                    run_s = time.perf_counter() - t0
                except Exception as exc:  # reported as a status; the remaining seeds are skipped
                    rows.append({**base, "seed": seed, "status": _status_of(exc), "message": " ".join(str(exc).split())})
                    if bar is not None:
                        bar.update(len(seed_list) - k)
                    break
                if conf.label not in accounting:
                    from hierdp.release.saved import release_document

                    accounting[conf.label] = {**release_document(rel, table=False), "seeds": [int(x) for x in seed_list]}
                rho_of = rel.accounting.guarantee("zcdp")
                # the solver asked for (TDA_l2 reports its rounding plug-in whatever its continuous step)
                solver = conf.solver or getattr(rel, "solver", None) or "-"
                levels = report(rel, data, workloads)
                if intervals is not None:
                    levels = levels.merge(_interval_scores(rel, data, mech, intervals, interval_draws, seed, kind),
                                          on="level", how="left")
                for rec in levels.to_dict("records"):
                    rows.append({**base, **rec, "solver": solver, "seed": seed, "run_seconds": run_s, "status": "ok",
                                 "message": "", "guarantee": rel.guarantee,
                                 "rho": rho_of.parameters["rho"] if rho_of is not None else base["rho"]})
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    columns = COMMON_COLUMNS + METRICS[kind] + (INTERVAL_COLUMNS if intervals is not None else [])
    frame = pd.DataFrame(rows)
    for c in columns:
        if c not in frame.columns:
            frame[c] = "" if c in ("status", "message", "guarantee", "level_name", "input", "interval_method") \
                else np.nan
    frame = frame[columns]
    frame["level"] = frame["level"].astype("Int64")
    frame["seed"] = frame["seed"].astype("Int64")
    frame.attrs["input"] = kind
    frame.attrs["accounting"] = accounting
    return frame


#: per input kind: the summary's columns and the level it reports (-1: the deepest)
_SUMMARY = {
    "tree": (["max_abs_error", "mean_abs_error", "false_discovery_rate_pct"], -1),
    "group_sizes": (["l1_total", "l1_per_cell", "max_abs_error", "cv"], -1),
    "points": (["mre_pct", "p95_relative_error_pct", "mean_abs_error"], 0),
}


def summary(frame: pd.DataFrame, level: int | None = None) -> pd.DataFrame:
    """Mean over seeds per configuration at one level (default: the deepest level of a tree or of
    group sizes; the random rectangles of points), with the spread of the first metric and the
    mean run time: the table ``hierdp compare`` prints."""
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    kind = str(ok["input"].iloc[0])
    cols, default = _SUMMARY[kind]
    levels = sorted(int(x) for x in ok["level"].dropna().unique())
    lev = (levels[-1] if default == -1 else levels[0]) if level is None else int(level)
    at = ok[ok["level"] == lev]
    g = at.groupby(["mechanism", "solver"], sort=False)
    out = pd.DataFrame({"runs": g["seed"].nunique()})
    for k, c in enumerate(cols):
        out[c] = g[c].mean()
        if k == 0:
            out[f"{c}_sd"] = g[c].std(ddof=1)
    if "interval_coverage_pct" in at.columns and at["interval_coverage_pct"].notna().any():
        out["interval_coverage_pct"] = g["interval_coverage_pct"].mean()
        out["interval_mean_width"] = g["interval_mean_width"].mean()
    out["run_seconds"] = g["run_seconds"].mean()
    out.attrs["level"] = lev
    out.attrs["level_name"] = str(at["level_name"].iloc[0]) if len(at) else ""
    return out
