"""Compare mechanisms and solvers on one tree and budget over several seeds, as one tidy frame.

``hierdp.compare(tree, mechanisms=["inftda", "tda_l2"], solvers=["intopt", "ortools"],
epsilon=1, delta=1e-8, seeds=5)`` runs every (mechanism, solver) configuration on the same tree
with the same budget, once per seed, and returns one row per (configuration, seed, level) with
the metrics of :func:`hierdp.metrics.level_report` (the researcher's first question: how much
error, where in the tree, at what cost). :mod:`hierdp.plot` draws it; ``hierdp compare`` is the
same from the command line.

Runs are *experiments*: seeded numpy randomness, reproducible, not for publication. Every
configuration sees the same seeds, so differences between configurations at one seed come
from the post-processing (for mechanisms with the same noise) and not from luck alone.

A configuration that cannot run is reported, not hidden: ``status`` is ``"ok"``, ``"time
limit"`` (a general solver stopped at ``time_limit`` seconds on some level), ``"unsupported"``
(the solver cannot post-process this mechanism's levels exactly, or the mechanism takes no
solver) or ``"failed"`` (another error; ``message`` says which). After a configuration fails its
remaining seeds are skipped (they would fail the same way, or wait for the same time limit).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "DEFAULT_MECHANISMS", "Configuration", "compare", "configurations", "summary"]

#: what ``hierdp compare`` runs when not told otherwise (all finish in seconds on the bundled data)
DEFAULT_MECHANISMS = ("inftda", "tda_l2", "tda_l2_exact", "vanilla", "sh")

#: columns of the frame :func:`compare` returns, in order
COLUMNS = ["mechanism", "solver", "seed", "level", "level_name", "released_nodes", "true_nonzero",
           "max_abs_error", "mean_abs_error", "false_discovery_rate_pct", "false_negative_rate_pct",
           "level_seconds", "run_seconds", "status", "message", "epsilon", "delta", "rho", "guarantee"]

#: built-in mechanisms with a solver step (others run once, with solver "-")
_SOLVER_MECHANISMS = frozenset({"inftda", "tda_l2", "tda_l2_exact", "tda_linf"})


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
    """Every (mechanism, solver) pair: each solver for the mechanisms with a solver step, the
    mechanism's default solver when ``solvers`` is None, one run for the others."""
    out: list[Configuration] = []
    for m in mechanisms:
        if solvers and m in _SOLVER_MECHANISMS:
            out.extend(Configuration(m, s) for s in solvers)
        else:
            out.append(Configuration(m, None))
    return out


def _budget(name: str, epsilon: float | None, delta: float | None, rho: float | None) -> dict[str, Any]:
    if (epsilon is None) == (rho is None):
        from hierdp.privacy.errors import PrivacyParameterError

        raise PrivacyParameterError("give exactly one of epsilon (with delta) or rho")
    if epsilon is not None:
        return {"epsilon": epsilon, "delta": 1e-8 if delta is None else delta}
    if name == "sh":
        return {}  # SH is (epsilon, delta)-DP only: reported as unsupported below
    return {"rho": rho, "delta": delta}


def _create(conf: Configuration, budget: dict[str, Any], params: dict[str, Any], time_limit: float | None) -> Any:
    from hierdp.mechanisms import registry

    kw = dict(budget, **params)
    if conf.solver is not None:
        kw["solver"] = conf.solver
    if time_limit is not None and conf.mechanism in _SOLVER_MECHANISMS:
        kw["time_limit"] = time_limit
    return registry.create(conf.mechanism, **kw)


def _status_of(exc: BaseException) -> str:
    from hierdp.solvers.base import SolverFailed, Status, UnsupportedProblem

    if isinstance(exc, SolverFailed) and exc.status == Status.TIME_LIMIT:
        return str(Status.TIME_LIMIT)
    if isinstance(exc, (UnsupportedProblem, TypeError)):
        return "unsupported"
    return "failed"


def _seeds(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive number of runs or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty")
    return out


def compare(
    tree: Any = None,
    mechanisms: Sequence[str] = DEFAULT_MECHANISMS,
    *,
    solvers: Sequence[str] | None = None,
    epsilon: float | None = 1.0,
    delta: float | None = 1e-8,
    rho: float | None = None,
    seeds: int | Iterable[int] = 5,
    time_limit: float | None = 30.0,
    progress: bool = False,
    **params: Any,
) -> pd.DataFrame:
    """Run several mechanisms and/or solvers on one tree and budget over several seeds.

    Args:
        tree: a Hierarchy or an O/D tree (default: the bundled world cities); its domain must
            be declared or explicitly assumed public (:mod:`hierdp.privacy.domain`).
        mechanisms: registry names (:func:`hierdp.mechanisms.registry.names`).
        solvers: solver names to try on every mechanism with a solver step (``inftda``,
            ``tda_*``); ``None`` = each mechanism's default.
        epsilon, delta / rho: the budget every configuration gets (pass ``epsilon=None`` with
            ``rho``).
        seeds: a number of runs (seeds 0..n-1) or the seeds themselves.
        time_limit: seconds per level for general solvers (``None``: no limit).
        progress: a progress bar over the runs.
        **params: further mechanism parameters for every configuration (``bounded=False``,
            ``contributions=2``, ...).

    Returns:
        A tidy frame with :data:`COLUMNS`: one row per (mechanism, solver, seed, level) for
        successful runs (``solver`` is the solver the release reports), one row with ``status``
        and ``message`` (and no level) for a configuration that could not run.
    """
    from hierdp.metrics import level_report
    from hierdp.privacy.domain import check_public_domain

    if tree is None:
        from hierdp.datasets import world_cities_hierarchy

        tree = world_cities_hierarchy()
    check_public_domain(tree, what="compare")  # refuse before any run, as every mechanism would
    names = [mechanisms] if isinstance(mechanisms, str) else list(mechanisms)
    if not names:
        raise ValueError("mechanisms is empty")
    from hierdp.mechanisms import registry

    known = registry.names()
    for m in names:
        if m not in known:
            raise KeyError(f"unknown mechanism {m!r}; registered: {', '.join(known)}")
    if solvers is not None:
        from hierdp.solvers import names as solver_names

        for s in solvers:
            if s not in solver_names():
                raise KeyError(f"unknown solver {s!r}; registered: {', '.join(solver_names())}")
    seed_list = _seeds(seeds)
    confs = configurations(names, solvers)
    rows: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(confs) * len(seed_list), desc="hierdp compare", unit="run")
    try:
        for conf in confs:
            budget = _budget(conf.mechanism, epsilon, delta, rho)
            base = {"mechanism": conf.mechanism, "solver": conf.solver or "-", "epsilon": budget.get("epsilon"),
                    "delta": budget.get("delta"), "rho": budget.get("rho")}
            for k, seed in enumerate(seed_list):
                try:
                    if not budget:
                        raise TypeError(f"{conf.mechanism} is (epsilon, delta)-DP only: give epsilon, not rho")
                    mech = _create(conf, budget, params, time_limit)
                    t0 = time.perf_counter()
                    rel = mech.release(tree, seed=seed)
                    run_s = time.perf_counter() - t0
                except Exception as exc:  # reported as a status; the remaining seeds are skipped
                    rows.append({**base, "seed": seed, "status": _status_of(exc), "message": " ".join(str(exc).split())})
                    if bar is not None:
                        bar.update(len(seed_list) - k)
                    break
                report = level_report(rel, tree).reset_index()
                acc = rel.accounting or {}
                for rec in report.to_dict("records"):
                    rec["level_seconds"] = rec.pop("seconds")
                    # the solver asked for (TDA_l2 reports its rounding plug-in whatever its continuous step)
                    solver = conf.solver or rel.solver or "-"
                    rows.append({**base, **rec, "solver": solver, "seed": seed, "run_seconds": run_s,
                                 "status": "ok", "message": "", "rho": acc.get("rho", base["rho"]),
                                 "guarantee": rel.guarantee})
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    frame = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in frame.columns:
            frame[c] = np.nan if c not in ("status", "message", "guarantee", "level_name") else ""
    frame = frame[COLUMNS]
    frame["level"] = frame["level"].astype("Int64")
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


def summary(frame: pd.DataFrame, level: int | None = None) -> pd.DataFrame:
    """Mean (and spread) over seeds per configuration at one level (default: the deepest),
    plus the mean run time: the table ``hierdp compare`` prints."""
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    lev = int(ok["level"].max()) if level is None else int(level)
    at = ok[ok["level"] == lev]
    g = at.groupby(["mechanism", "solver"], sort=False)
    out = pd.DataFrame({
        "runs": g["seed"].nunique(),
        "max_abs_error": g["max_abs_error"].mean(),
        "max_abs_error_sd": g["max_abs_error"].std(ddof=1),
        "mean_abs_error": g["mean_abs_error"].mean(),
        "false_discovery_rate_pct": g["false_discovery_rate_pct"].mean(),
        "run_seconds": g["run_seconds"].mean(),
    })
    out.attrs["level"] = lev
    out.attrs["level_name"] = str(at["level_name"].iloc[0]) if len(at) else ""
    return out
