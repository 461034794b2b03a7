"""SafeTab: adaptive tabulation of population groups (paper 004, Alg. 1-5).

A *population group* is a pair (geographic entity, characteristic iteration), e.g. (North
Carolina, "Asian alone or in combination"). Groups are organised in *levels*
(:class:`PopulationGroupLevel`), each with its own budget ``rho_i`` and a record -> groups map
``g_i`` whose stability ``Delta(g_i)`` the user declares (and :func:`safetab` checks on the data).
For each group SafeTab releases (Alg. 2):

* a *TotalOnly* group: one noisy total with the per-group budget ``b = rho_i / Delta(g_i)``;
* any other group, adaptively: a noisy total with ``gamma b`` (Step 1, not released), then with
  ``(1 - gamma) b`` (Step 2) the total if it is below ``theta1``, else Sex x Age4 if below
  ``theta2``, Sex x Age9 if below ``theta3``, else Sex x Age23.

Noise is the geometric mechanism (``b`` is a pure-DP epsilon, noise ``L_Z(1/b)``) or the discrete
Gaussian (``b`` is a zCDP rho, noise ``N_Z(1/(2b))``), drawn with a seeded numpy generator
(experiments) or :class:`~hierdp.privacy.rng.SecureRandom` (releases).

The output (:class:`SafeTabRelease`) is a tidy frame, one row per released count: level, group,
tabulation, cell, sex, age bin, noisy count, its margin of error at ``moe_level`` (exact discrete
quantile of the noise actually added) - plus the release's accounting in every calculus
(:mod:`hierdp.mechanisms.safetab_accounting`). Everything that can be wrong with the input
(budgets, thresholds, columns, group maps, declared stabilities, an accountant that cannot pay)
raises before the first noise draw. Counts are not made consistent (the paper's "No
Consistency"); :func:`hierdp.mechanisms.safetab_groups.consistent_totals` post-processes totals
over a geography :class:`~hierdp.hierarchy.Hierarchy` with any solver.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from hierdp.mechanisms.safetab_accounting import (
    NOISES,
    SafeTabAccounting,
    safetab_accounting,
)
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.errors import PrivacyError, PrivacyParameterError
from hierdp.privacy.moe import discrete_gaussian_moe, geometric_moe
from hierdp.privacy.parallel import Memberships, StabilityError, membership_pairs
from hierdp.privacy.rng import SecureRandom, make_rng
from hierdp.privacy.samplers import discrete_gaussian, discrete_laplace

__all__ = ["SafeTabError", "PopulationGroupLevel", "SafeTabRelease", "safetab",
           "AGE_BINS", "TABULATIONS", "StabilityError"]

#: Age bin lower edges of the Census Sex x Age tables (last bin open-ended).
AGE_BINS: dict[str, tuple[int, ...]] = {
    "age4": (0, 18, 45, 65),
    "age9": (0, 5, 18, 25, 35, 45, 55, 65, 75),
    "age23": (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70,
              75, 80, 85),
}
#: Step-2 tabulations in threshold order (index = number of thresholds the noisy total reaches).
TABULATIONS = ("total", "sex_age4", "sex_age9", "sex_age23")


class SafeTabError(PrivacyError):
    """Bad SafeTab input (columns, thresholds, levels, group maps); raised before any noise."""


GroupMap = Memberships | Callable[[pd.DataFrame], Memberships]


@dataclass(frozen=True)
class PopulationGroupLevel:
    """One population-group level ``P_i`` of Alg. 1.

    Attributes:
        name: level label, e.g. ``"(State, Detailed)"``.
        budget: ``rho_i`` - a pure-DP epsilon for geometric noise, a zCDP rho for the discrete
            Gaussian - spent on the whole level.
        stability: declared ``Delta(g_i)``: the most groups of this level any possible record can
            be in. Checked against the data (an observed larger value is an error).
        groups: the record -> groups map ``g_i``: a frame with columns ``record`` (labels of the
            input frame's index) and ``group``; a mapping record -> groups; a sequence of group
            lists by row position; or a callable taking the input frame and returning one of
            these (the flatmap of Alg. 1).
        universe: every population group of the level (public). Groups with no records are
            released too (a noisy zero). ``None``: the groups seen in the data - then the *set* of
            groups released depends on the data, which a formal release must avoid.
        total_only: groups that get only a total (``True``: every group of the level).
    """

    name: str
    budget: float
    stability: int
    groups: GroupMap
    universe: Sequence[Any] | None = None
    total_only: Collection[Any] | bool = ()


@dataclass
class SafeTabRelease:
    """A SafeTab release: the tidy table, its accounting and the run's parameters.

    ``frame`` columns: ``run`` (only with ``repetitions``), ``level``, ``group``, ``tabulation``
    (``total_only`` or one of :data:`TABULATIONS`), ``cell`` (``"total"`` or
    ``"<sex>|<age bin>"``), ``sex``, ``age``, ``noisy_count``, ``moe`` (margin of error at
    ``moe_level``), ``noise_parameter`` (the count's epsilon or rho), and ``true_count`` only
    when asked for (never publish it).
    """

    frame: pd.DataFrame
    accounting: SafeTabAccounting
    noise: str
    gamma: float
    thresholds: tuple[float, float, float]
    moe_level: float
    observed_stability: dict[str, int] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- validation helpers
def _number(name: str, value: object, *, low: float | None = None, high: float | None = None,
            open_low: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or math.isnan(float(value)):
        raise SafeTabError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if low is not None and (v <= low if open_low else v < low):
        raise SafeTabError(f"{name} must be {'>' if open_low else '>='} {low}, got {value!r}")
    if high is not None and v >= high:
        raise SafeTabError(f"{name} must be < {high}, got {value!r}")
    return v


def _check_thresholds(thresholds: Sequence[float]) -> tuple[float, float, float]:
    t = tuple(thresholds)
    if len(t) != 3:
        raise SafeTabError(f"thresholds must be (theta1, theta2, theta3), got {thresholds!r}")
    vals = tuple(_number(f"theta{i + 1}", x) for i, x in enumerate(t))
    if not (vals[0] < vals[1] < vals[2]):
        raise SafeTabError(f"thresholds must satisfy theta1 < theta2 < theta3, got {vals}")
    return vals  # type: ignore[return-value]


def _check_age_bins(age_bins: Mapping[str, Sequence[int]] | None) -> dict[str, np.ndarray]:
    bins = dict(AGE_BINS if age_bins is None else age_bins)
    if set(bins) != {"age4", "age9", "age23"}:
        raise SafeTabError(f"age_bins needs keys age4, age9, age23, got {sorted(bins)}")
    out = {}
    for k, edges in bins.items():
        e = np.asarray(edges, dtype=np.float64)
        if e.ndim != 1 or e.size < 1 or np.any(np.diff(e) <= 0) or e[0] != 0:
            raise SafeTabError(f"age_bins[{k!r}] must be increasing lower edges starting at 0, "
                               f"got {edges!r}")
        out[k] = e
    return out


def _age_labels(edges: np.ndarray) -> list[str]:
    labels = []
    for i, lo in enumerate(edges):
        if i + 1 < edges.size:
            hi = edges[i + 1] - 1
            labels.append(f"{int(lo)}" if hi == lo else f"{int(lo)}-{int(hi)}")
        else:
            labels.append(f"{int(lo)}+")
    return labels


@dataclass
class _LevelWork:
    """A validated level, ready for noise (all checks done)."""

    name: str
    budget: float
    stability: int
    observed: int
    groups: np.ndarray          # universe labels (object)
    total_only: np.ndarray      # bool per group
    totals: np.ndarray          # true totals per group
    tables: dict[str, np.ndarray]  # tabulation -> (G, cells) true counts


def _resolve_memberships(level: PopulationGroupLevel, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(record positions, group labels) of a level's map; errors name the level."""
    spec = level.groups(df) if callable(level.groups) else level.groups
    try:
        pairs = membership_pairs(spec)
    except PrivacyParameterError as err:
        raise SafeTabError(f"level {level.name!r}: {err}") from None
    positional = isinstance(spec, Sequence) and not isinstance(spec, (str, bytes, pd.DataFrame))
    if positional:
        pos = pd.to_numeric(pairs["record"]).to_numpy(dtype=np.int64)
        bad = (pos < 0) | (pos >= len(df))
    else:
        pos = df.index.get_indexer(pairs["record"])
        bad = pos < 0
    if np.any(bad):
        raise SafeTabError(f"level {level.name!r}: group map names record "
                           f"{pairs['record'][bad].iloc[0]!r}, which is not in the input frame")
    return pos.astype(np.int64), pairs["group"].to_numpy(dtype=object)


def _prepare_level(level: PopulationGroupLevel, df: pd.DataFrame, sex_codes: np.ndarray,
                   n_sex: int, age_codes: dict[str, np.ndarray] | None,
                   n_age: dict[str, int]) -> _LevelWork:
    if not isinstance(level, PopulationGroupLevel):
        raise SafeTabError(f"levels must be PopulationGroupLevel objects, got {type(level).__name__}")
    budget = _number(f"level {level.name!r} budget", level.budget, low=0.0)
    if not math.isfinite(budget):
        raise SafeTabError(f"level {level.name!r} budget must be finite, got {level.budget!r}")
    if isinstance(level.stability, bool) or not isinstance(level.stability, (int, np.integer)) \
            or level.stability < 1:
        raise SafeTabError(f"level {level.name!r}: declared stability must be an integer >= 1, "
                           f"got {level.stability!r}")
    pos, labels = _resolve_memberships(level, df)
    # observed stability Delta(g_i) on the data (duplicates already removed)
    observed = int(np.bincount(pos, minlength=len(df)).max()) if pos.size else 0
    if observed > level.stability:
        worst = df.index[int(np.argmax(np.bincount(pos, minlength=len(df))))]
        raise StabilityError(
            f"level {level.name!r}: observed stability {observed} exceeds the declared "
            f"stability {level.stability} (record {worst!r} is in {observed} groups)")
    if level.universe is None:
        universe = pd.unique(pd.Series(labels, dtype=object))
    else:
        universe = pd.unique(pd.Series(list(level.universe), dtype=object))
        if len(universe) != len(list(level.universe)):
            raise SafeTabError(f"level {level.name!r}: universe has duplicate groups")
    index = pd.Index(universe)
    gi = index.get_indexer(labels)
    if np.any(gi < 0):
        raise SafeTabError(f"level {level.name!r}: group {labels[gi < 0][0]!r} is not in the "
                           "level's universe")
    n_groups = len(index)
    if n_groups == 0:
        raise SafeTabError(f"level {level.name!r} has no population groups")
    if level.total_only is True:
        total_only = np.ones(n_groups, dtype=bool)
    elif level.total_only is False:
        total_only = np.zeros(n_groups, dtype=bool)
    else:
        to = list(level.total_only)
        t_idx = index.get_indexer(pd.Index(to, dtype=object)) if to else np.zeros(0, np.int64)
        if np.any(t_idx < 0):
            raise SafeTabError(f"level {level.name!r}: TotalOnly group "
                               f"{to[int(np.argmax(t_idx < 0))]!r} is not a group of the level")
        total_only = np.zeros(n_groups, dtype=bool)
        total_only[t_idx] = True
    totals = np.bincount(gi, minlength=n_groups).astype(np.int64)
    tables = {}
    if age_codes is None:  # no age column: only TotalOnly groups are allowed (checked by caller)
        if not total_only.all():
            raise SafeTabError(f"level {level.name!r}: group "
                               f"{index[int(np.argmin(total_only))]!r} is not TotalOnly, and "
                               "adaptive Sex x Age tabulation needs an age column (age=None)")
        return _LevelWork(level.name, budget, int(level.stability), observed,
                          np.asarray(index, dtype=object), total_only, totals, tables)
    for k in ("age4", "age9", "age23"):
        cells = n_sex * n_age[k]
        flat = gi * cells + sex_codes[pos] * n_age[k] + age_codes[k][pos]
        tables[f"sex_{k}"] = np.bincount(flat, minlength=n_groups * cells).reshape(n_groups, cells)
    return _LevelWork(level.name, budget, int(level.stability), observed,
                      np.asarray(index, dtype=object), total_only, totals, tables)


def _draw(noise: str, param: float, size: tuple[int, ...], rng: Any) -> np.ndarray:
    """Integer noise for counts with per-count budget ``param`` (epsilon or rho)."""
    if noise == "geometric":
        return discrete_laplace(1.0 / param, size, rng)
    return discrete_gaussian(1.0 / (2.0 * param), size, rng)


def _moe(noise: str, param: float, level: float, method: str) -> int:
    if noise == "geometric":
        return int(geometric_moe(param, level, method))  # type: ignore[arg-type]
    return discrete_gaussian_moe(param, level, method)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the mechanism
def safetab(df: pd.DataFrame, levels: Sequence[PopulationGroupLevel], *,
            noise: Literal["geometric", "discrete_gaussian"] = "geometric",
            gamma: float = 0.1, thresholds: Sequence[float] = (10, 100, 1000),
            sex: str = "sex", age: str | None = "age", sex_values: Sequence[Any] | None = None,
            age_bins: Mapping[str, Sequence[int]] | None = None,
            rng: np.random.Generator | SecureRandom | None = None, seed: int | None = None,
            delta: float = 1e-10, moe_level: float = 0.95,
            moe_method: Literal["exact", "paper"] = "exact",
            accountant: Accountant | None = None, repetitions: int | None = None,
            include_true: bool = False) -> SafeTabRelease:
    """Run SafeTab (Alg. 1) on a person-level frame.

    Args:
        df: one row per person, with columns ``sex`` and ``age`` (plus whatever the group maps
            read). Its index labels identify records in the group maps; it must be unique.
        sex, age: the column names. ``age=None``: the frame has no age; then every group of
            every level must be TotalOnly (no Sex x Age tabulation is possible), else
            :class:`SafeTabError` before any noise.
        levels: the population-group levels, each with budget, declared stability, map.
        noise: ``"geometric"`` (pure DP; budgets are epsilons) or ``"discrete_gaussian"`` (zCDP;
            budgets are rhos).
        gamma: fraction of each group's budget spent on the Step-1 noisy total, in (0, 1).
        thresholds: ``(theta1, theta2, theta3)``, strictly increasing.
        sex_values: the public domain of ``sex`` (default: categories of a categorical column,
            else the sorted values seen - data-dependent, avoid for formal releases).
        age_bins: lower edges for ``age4``, ``age9``, ``age23`` (default :data:`AGE_BINS`).
        rng / seed: randomness (``rng`` wins; a seeded numpy generator is for experiments, use
            ``make_rng(secure=True)`` for releases).
        delta: the delta of the reported (epsilon, delta) figures.
        moe_level, moe_method: margin-of-error level and method (``"exact"`` discrete quantile,
            or the paper's formulas) for the ``moe`` column.
        accountant: if given, the release's cost is spent from it first (pure epsilon for
            geometric noise, rho for the discrete Gaussian, or (epsilon, delta) if the
            accountant is in that calculus); an overspend raises before any noise.
        repetitions: run the mechanism this many times at once (vectorized: each run's noise
            is independent); the frame gets a ``run`` column. For coverage studies.
        include_true: add the true counts (for evaluation only; never publish them).

    Raises:
        SafeTabError: unknown columns, bad thresholds/gamma/budgets/age bins, a map naming
            unknown records or groups outside the universe, sex values outside ``sex_values``.
        StabilityError: a level's observed stability exceeds the declared one.
        BudgetExceeded: the accountant cannot pay for the release.
        PrivacyParameterError: bad delta / moe_level.
    """
    # ---- everything below up to the first _draw call only validates and tabulates
    if not isinstance(df, pd.DataFrame):
        raise SafeTabError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if noise not in NOISES:
        raise SafeTabError(f"noise must be one of {NOISES}, got {noise!r}")
    g = _number("gamma", gamma, low=0.0, high=1.0)
    theta = _check_thresholds(thresholds)
    missing = [c for c in (sex, age) if c is not None and c not in df.columns]
    if missing:
        raise SafeTabError(f"unknown column(s) {missing}; the frame has {list(df.columns)}")
    if not df.index.is_unique:
        raise SafeTabError("the input frame's index must be unique (it identifies records)")
    if len(df) == 0:
        raise SafeTabError("the input frame is empty")
    if not isinstance(levels, Sequence) or isinstance(levels, (str, bytes)) or len(levels) == 0:
        raise SafeTabError("levels must be a non-empty sequence of PopulationGroupLevel")
    names = [getattr(lv, "name", None) for lv in levels]
    if len(set(names)) != len(names):
        raise SafeTabError(f"level names must be unique, got {names}")
    reps = 1 if repetitions is None else repetitions
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise SafeTabError(f"repetitions must be a positive integer, got {repetitions!r}")
    bins = _check_age_bins(age_bins)
    age_codes: dict[str, np.ndarray] | None = None
    if age is not None:
        ages = pd.to_numeric(df[age], errors="coerce").to_numpy(dtype=np.float64)
        if np.any(~np.isfinite(ages)) or np.any(ages < 0):
            raise SafeTabError(f"column {age!r} must hold finite ages >= 0")
        age_codes = {k: (np.searchsorted(e, ages, side="right") - 1).astype(np.int64)
                     for k, e in bins.items()}
    n_age = {k: e.size for k, e in bins.items()}
    sex_col = df[sex]
    if sex_col.isna().any():
        raise SafeTabError(f"column {sex!r} has missing values")
    if sex_values is None:
        sexes = list(sex_col.cat.categories) if isinstance(sex_col.dtype, pd.CategoricalDtype) \
            else sorted(pd.unique(sex_col))
    else:
        sexes = list(sex_values)
    sex_codes = pd.Index(sexes).get_indexer(sex_col)
    if np.any(sex_codes < 0):
        raise SafeTabError(f"column {sex!r} has value {sex_col[sex_codes < 0].iloc[0]!r} "
                           f"outside sex_values {sexes}")
    work = [_prepare_level(lv, df, sex_codes.astype(np.int64), len(sexes), age_codes, n_age)
            for lv in levels]
    accounting = safetab_accounting(
        [w.budget for w in work], [w.stability for w in work], noise=noise, gamma=g, delta=delta,
        branches=[(bool((~w.total_only).any()), bool(w.total_only.any())) for w in work])
    moe_params = {}
    for w in work:
        b = w.budget / w.stability
        moe_params[w.name] = (b, (1.0 - g) * b)
    moes = {name: (_moe(noise, b, moe_level, moe_method), _moe(noise, b2, moe_level, moe_method))
            for name, (b, b2) in moe_params.items()}
    if accountant is not None:
        if not isinstance(accountant, Accountant):
            raise SafeTabError(f"accountant must be an Accountant, got {type(accountant).__name__}")
        total = sum(w.budget for w in work)
        if accountant.total.calculus == "approx":
            cost = Budget.approx(accounting.best_epsilon, delta)
        else:
            cost = Budget.pure(total) if noise == "geometric" else Budget.zcdp(total)
        accountant.spend(cost, f"safetab[{noise}]")  # raises BudgetExceeded before any noise
    gen = rng if rng is not None else make_rng(seed)

    # ---- noise
    age_labels = {k: _age_labels(e) for k, e in bins.items()}
    pieces = []
    for w in work:
        pieces.extend(_run_level(w, noise, g, theta, reps, gen, sexes, age_labels,
                                 moes[w.name], moe_params[w.name], include_true))
    frame = pd.concat(pieces, ignore_index=True)
    for col in ("level", "group", "tabulation", "cell", "sex", "age"):
        frame[col] = frame[col].astype("category")
    if repetitions is None:
        frame = frame.drop(columns="run")
    return SafeTabRelease(frame=frame, accounting=accounting, noise=noise, gamma=g,
                          thresholds=theta, moe_level=float(moe_level),
                          observed_stability={w.name: w.observed for w in work},
                          parameters={"sex_values": sexes, "age_bins": {k: list(v) for k, v in
                                                                        bins.items()},
                                      "moe_method": moe_method, "repetitions": reps})


def _cells_frame(level: str, groups: np.ndarray, runs: np.ndarray, tab: str, cells: list[tuple[str, Any, Any]],
                 noisy: np.ndarray, true: np.ndarray, moe: int, param: float,
                 include_true: bool) -> pd.DataFrame:
    """Rows for ``len(groups)`` (run, group) pairs times ``len(cells)`` cells (row-major)."""
    k = len(cells)
    cell_names = np.array([c[0] for c in cells], dtype=object)
    out = {
        "run": np.repeat(runs, k),
        "level": np.full(groups.size * k, level, dtype=object),
        "group": np.repeat(groups, k),
        "tabulation": np.full(groups.size * k, tab, dtype=object),
        "cell": np.tile(cell_names, groups.size),
        "sex": np.tile(np.array([c[1] for c in cells], dtype=object), groups.size),
        "age": np.tile(np.array([c[2] for c in cells], dtype=object), groups.size),
        "noisy_count": noisy.ravel(),
        "moe": np.full(groups.size * k, moe, dtype=np.int64),
        "noise_parameter": np.full(groups.size * k, param),
    }
    if include_true:
        out["true_count"] = true.ravel()
    return pd.DataFrame(out)


def _run_level(w: _LevelWork, noise: str, gamma: float, theta: tuple[float, float, float],
               reps: int, rng: Any, sexes: list, age_labels: dict[str, list[str]],
               moes: tuple[int, int], params: tuple[float, float],
               include_true: bool) -> list[pd.DataFrame]:
    """Alg. 2 for every group of one level and every run, vectorized per tabulation."""
    b, b2 = params
    out = []
    total_cell = [("total", None, None)]
    n_groups = w.groups.size
    to_idx = np.flatnonzero(w.total_only)
    ad_idx = np.flatnonzero(~w.total_only)
    if to_idx.size:  # TotalOnly: one count with the whole per-group budget
        true = np.broadcast_to(w.totals[to_idx], (reps, to_idx.size))
        noisy = true + _draw(noise, b, (reps, to_idx.size), rng)
        runs = np.repeat(np.arange(reps), to_idx.size)
        out.append(_cells_frame(w.name, np.tile(w.groups[to_idx], reps), runs, "total_only",
                                total_cell, noisy, true, moes[0], b, include_true))
    if ad_idx.size:
        # Step 1: noisy totals with gamma * b choose the Step-2 tabulation
        step1 = w.totals[ad_idx][None, :] + _draw(noise, gamma * b, (reps, ad_idx.size), rng)
        choice = np.searchsorted(np.asarray(theta), step1, side="right")  # 0..3
        for c, tab in enumerate(TABULATIONS):
            run_i, col_i = np.nonzero(choice == c)
            if run_i.size == 0:
                continue
            grp = ad_idx[col_i]
            if tab == "total":
                true = w.totals[grp][:, None]
                cells = total_cell
            else:
                key = tab.split("_", 1)[1]
                true = w.tables[tab][grp]
                cells = [(f"{s}|{a}", s, a) for s in sexes for a in age_labels[key]]
            noisy = true + _draw(noise, b2, true.shape, rng)
            out.append(_cells_frame(w.name, w.groups[grp], run_i, tab, cells, noisy, true,
                                    moes[1], b2, include_true))
    if not out:  # cannot happen (a level has groups), kept for clarity
        raise SafeTabError(f"level {w.name!r} produced no output ({n_groups} groups)")
    return out
