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
Gaussian (``b`` is a zCDP rho, noise ``N_Z(1/(2b))``), each scale rounded up so that the exact
privacy of the float used never exceeds ``b`` (:mod:`hierdp.privacy.calibration`), drawn with a
seeded numpy generator (experiments) or :class:`~hierdp.privacy.rng.SecureRandom` (``secure=True``,
releases), with the same rules as every mechanism (:func:`~hierdp.privacy.rng.resolve_rng`).

The population groups of each level, and the sex values of the Sex x Age cells, are the
release's *domain*: they must be public input (a declared ``universe`` per level, ``sex_values``)
or the caller must declare the observed ones public (``observed_domain_public=True``, which the
release then states as an assumption); otherwise the run is refused before any noise
(:func:`~hierdp.privacy.domain.check_public_domain`).

:class:`SafeTab` is the mechanism (the shared contract of :mod:`hierdp.mechanisms.base`);
:func:`safetab` runs it in one call. The output (:class:`SafeTabRelease`, a
:class:`~hierdp.release.TableRelease`) is a tidy frame, one row per released count: level, group,
tabulation, cell, sex, age bin, noisy count, its margin of error at ``moe_level`` (exact discrete
quantile of the noise actually added) - plus the release's accounting in every calculus
(:mod:`hierdp.mechanisms.safetab.guarantee`). Everything that can be wrong with the input
(budgets, thresholds, columns, group maps, declared stabilities, an accountant that cannot pay)
raises before the first noise draw. Counts are not made consistent (the paper's "No
Consistency"); :func:`hierdp.mechanisms.safetab.groups.consistent_totals` post-processes totals
over a geography :class:`~hierdp.hierarchy.Hierarchy` with any solver.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import pandas as pd

from hierdp.mechanisms.base import Mechanism, refuse_solver
from hierdp.mechanisms.safetab.guarantee import (
    NOISES,
    SafeTabAccounting,
    level_zcdp,
    safetab_accounting,
)
from hierdp.privacy.conversions import check_delta
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import delivered_epsilon, delivered_rho, gaussian_sigma2, laplace_scale
from hierdp.privacy.domain import OBSERVED_DOMAIN_ASSUMPTION, ObservedDomainError, check_public_domain
from hierdp.privacy.errors import PrivacyError, PrivacyParameterError
from hierdp.privacy.moe import discrete_gaussian_moe, geometric_moe
from hierdp.privacy.parallel import Memberships, StabilityError, membership_pairs
from hierdp.privacy.rng import SecureRandom
from hierdp.privacy.samplers import discrete_gaussian, discrete_laplace
from hierdp.privacy.spec import PrivacySpec
from hierdp.release.table import TableRelease

__all__ = [
    "AGE_BINS",
    "TABULATIONS",
    "PopulationGroupLevel",
    "SafeTab",
    "SafeTabError",
    "SafeTabRelease",
    "StabilityError",
    "safetab",
]

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


@dataclass(kw_only=True)
class SafeTabRelease(TableRelease):
    """A SafeTab release: the tidy table, its accounting and the run's parameters.

    ``frame`` columns: ``run`` (only with ``repetitions``), ``level``, ``group``, ``tabulation``
    (``total_only`` or one of :data:`TABULATIONS`), ``cell`` (``"total"`` or
    ``"<sex>|<age bin>"``), ``sex``, ``age``, ``noisy_count``, ``moe`` (margin of error at
    ``moe_level``), ``noise_parameter`` (the count's epsilon or rho), and ``true_count`` only
    when asked for (never publish it).
    """

    accounting: SafeTabAccounting
    noise: str
    gamma: float
    thresholds: tuple[float, float, float]
    moe_level: float
    observed_stability: dict[str, int] = dataclasses.field(default_factory=dict)
    mechanism: str = "SafeTab"
    value_column: str = "noisy_count"

    @property
    def parameters(self) -> dict[str, Any]:
        """The run's parameters (old name of :attr:`params`)."""
        return self.params

    def check_consistency(self) -> list[str]:
        """What SafeTab promises (it does not promise additivity, paper 004's "No Consistency"):
        integer counts; one tabulation per (run, level, group); each tabulation's complete cell set."""
        bad = super().check_consistency()
        f = self.frame
        keys = [c for c in ("run", "level", "group") if c in f.columns]
        tabs = f.groupby(keys, observed=True)["tabulation"].nunique()
        if (tabs > 1).any():
            bad.append(f"group {tabs.index[int(np.argmax(tabs.to_numpy() > 1))]!r} has more than one tabulation")
        sizes = f.groupby(keys + ["tabulation"], observed=True).size().reset_index(name="cells")
        bins = self.params.get("age_bins", {})
        n_sex = len(self.params.get("sex_values", []))
        expected = {"total": 1, "total_only": 1,
                    **{f"sex_{k}": n_sex * len(v) for k, v in bins.items()}}
        want = sizes["tabulation"].astype(str).map(expected)
        wrong = sizes[want.to_numpy() != sizes["cells"].to_numpy()]
        if len(wrong):
            r = wrong.iloc[0]
            bad.append(f"group {r['group']!r} ({r['tabulation']}) has {int(r['cells'])} cells, expected "
                       f"{int(expected.get(str(r['tabulation']), -1))}")
        return bad


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


def _scale(noise: str, param: Fraction) -> float:
    """The noise parameter for a count with per-count budget ``param`` (exact), rounded up:
    geometric scale ``1/eps``, discrete Gaussian ``sigma2 = 1/(2 rho)`` (sensitivity 1)."""
    if noise == "geometric":
        return laplace_scale(param, 1, culprit="a level budget")
    return gaussian_sigma2(param, 1, culprit="a level budget")


def _draw(noise: str, scale: float, size: tuple[int, ...], rng: Any) -> np.ndarray:
    """Integer noise with the (already safely rounded) parameter ``scale``."""
    if noise == "geometric":
        return discrete_laplace(scale, size, rng)
    return discrete_gaussian(scale, size, rng)


def _moe(noise: str, scale: float, level: float, method: str) -> int:
    """Margin of error of the noise actually added (its exact delivered parameter)."""
    if noise == "geometric":
        return int(geometric_moe(float(delivered_epsilon(scale, 1)), level, method))  # type: ignore[arg-type]
    return discrete_gaussian_moe(float(delivered_rho(scale, 1)), level, method)  # type: ignore[arg-type]


def _check_levels(levels: object) -> list[PopulationGroupLevel]:
    """The levels' structure and budgets (everything that does not need the data)."""
    if not isinstance(levels, Sequence) or isinstance(levels, (str, bytes)) or len(levels) == 0:
        raise SafeTabError("levels must be a non-empty sequence of PopulationGroupLevel")
    for lv in levels:
        if not isinstance(lv, PopulationGroupLevel):
            raise SafeTabError(f"levels must be PopulationGroupLevel objects, got {type(lv).__name__}")
        budget = _number(f"level {lv.name!r} budget", lv.budget, low=0.0)
        if not math.isfinite(budget):
            raise SafeTabError(f"level {lv.name!r} budget must be finite, got {lv.budget!r}")
        if isinstance(lv.stability, bool) or not isinstance(lv.stability, (int, np.integer)) or lv.stability < 1:
            raise SafeTabError(f"level {lv.name!r}: declared stability must be an integer >= 1, "
                               f"got {lv.stability!r}")
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise SafeTabError(f"level names must be unique, got {names}")
    return list(levels)


# --------------------------------------------------------------------------- the mechanism
class SafeTab(Mechanism):
    """SafeTab (paper 004, Alg. 1): adaptive tabulation of population groups.

    The privacy spec is the list of levels, each with its own budget (a pure-DP epsilon for
    geometric noise, a zCDP rho for the discrete Gaussian); the release spends their sum.

    Args:
        levels: the population-group levels, each with budget, declared stability, map and (for a
            formal release) its public ``universe``.
        noise: ``"geometric"`` (pure DP; budgets are epsilons) or ``"discrete_gaussian"`` (zCDP;
            budgets are rhos).
        gamma: fraction of each group's budget spent on the Step-1 noisy total, in (0, 1).
        thresholds: ``(theta1, theta2, theta3)``, strictly increasing.
        sex, age: the column names. ``age=None``: the frame has no age; then every group of
            every level must be TotalOnly (no Sex x Age tabulation is possible).
        sex_values: the public domain of ``sex`` (needed when any group can get Sex x Age cells,
            unless ``observed_domain_public=True``).
        age_bins: lower edges for ``age4``, ``age9``, ``age23`` (default :data:`AGE_BINS`).
        delta: the delta of the reported (epsilon, delta) figures.
        moe_level, moe_method: margin-of-error level and method (``"exact"`` discrete quantile,
            or the paper's formulas) for the ``moe`` column.
        repetitions: run the mechanism this many times at once (vectorized; independent noise per
            run); the frame gets a ``run`` column. For coverage studies: each run has the stated
            guarantee, all of them together spend ``repetitions`` times it.
        include_true: add the true counts (for evaluation only; never publish them).
        observed_domain_public: declare that the groups / sex values seen in the data are public
            (the release states this assumption); without it a level with no ``universe`` or
            undeclared ``sex_values`` is refused before any noise.
        secure: OS randomness and exact samplers (real releases).
    """

    name = "SafeTab"

    def __init__(self, levels: Sequence[PopulationGroupLevel], *,
                 noise: Literal["geometric", "discrete_gaussian"] = "geometric", gamma: float = 0.1,
                 thresholds: Sequence[float] = (10, 100, 1000), sex: str = "sex", age: str | None = "age",
                 sex_values: Sequence[Any] | None = None, age_bins: Mapping[str, Sequence[int]] | None = None,
                 delta: float = 1e-10, moe_level: float = 0.95, moe_method: Literal["exact", "paper"] = "exact",
                 repetitions: int | None = None, include_true: bool = False, observed_domain_public: bool = False,
                 secure: bool = False, solver: Any = None, solver_options: Any = None) -> None:
        refuse_solver(self.name, solver, solver_options,
                      "its counts are not post-processed; see hierdp.mechanisms.safetab.groups.consistent_totals")
        if noise not in NOISES:
            raise SafeTabError(f"noise must be one of {NOISES}, got {noise!r}")
        self.noise = str(noise)
        self.gamma = _number("gamma", gamma, low=0.0, high=1.0)
        self.thresholds = _check_thresholds(thresholds)
        self.levels = _check_levels(levels)
        reps = 1 if repetitions is None else repetitions
        if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
            raise SafeTabError(f"repetitions must be a positive integer, got {repetitions!r}")
        self.repetitions, self._frame_runs = int(reps), repetitions is not None
        self.bins = _check_age_bins(age_bins)
        self.sex, self.age = sex, age
        self.sex_values = None if sex_values is None else list(sex_values)
        self.delta = check_delta(delta, "delta")
        self.moe_level = float(moe_level)
        if moe_method not in ("exact", "paper"):
            raise SafeTabError(f"moe_method must be 'exact' or 'paper', got {moe_method!r}")
        self.moe_method = moe_method
        self.include_true = bool(include_true)
        if type(observed_domain_public).__name__ not in ("bool", "bool_"):
            raise SafeTabError(f"observed_domain_public must be True or False, got {observed_domain_public!r}")
        self.observed_domain_public = bool(observed_domain_public)
        if type(secure).__name__ not in ("bool", "bool_"):
            raise PrivacyParameterError(f"secure must be True or False, got {secure!r}")
        self.secure = bool(secure)
        parts = [Budget.pure(lv.budget) if self.noise == "geometric" else Budget.zcdp(lv.budget) for lv in self.levels]
        self.spec = PrivacySpec(budget=sum(parts), delta=self.delta, epsilon_target=None)
        from hierdp.mechanisms.safetab.guarantee import SAFETAB_UNIT

        self.unit = SAFETAB_UNIT

    def params(self) -> dict[str, Any]:
        return {**super().params(), "noise": self.noise, "gamma": self.gamma, "thresholds": self.thresholds,
                "levels": [lv.name for lv in self.levels], "moe_method": self.moe_method,
                "repetitions": self.repetitions}

    # -- validation against the data (no noise) -------------------------------------------------
    def _validate(self, df: pd.DataFrame) -> tuple[list[_LevelWork], list[Any]]:
        if not isinstance(df, pd.DataFrame):
            raise SafeTabError(f"df must be a pandas DataFrame, got {type(df).__name__}")
        missing = [c for c in (self.sex, self.age) if c is not None and c not in df.columns]
        if missing:
            raise SafeTabError(f"unknown column(s) {missing}; the frame has {list(df.columns)}")
        if not df.index.is_unique:
            raise SafeTabError("the input frame's index must be unique (it identifies records)")
        if len(df) == 0:
            raise SafeTabError("the input frame is empty")
        age_codes: dict[str, np.ndarray] | None = None
        if self.age is not None:
            ages = pd.to_numeric(df[self.age], errors="coerce").to_numpy(dtype=np.float64)
            if np.any(~np.isfinite(ages)) or np.any(ages < 0):
                raise SafeTabError(f"column {self.age!r} must hold finite ages >= 0")
            age_codes = {k: (np.searchsorted(e, ages, side="right") - 1).astype(np.int64)
                         for k, e in self.bins.items()}
        n_age = {k: e.size for k, e in self.bins.items()}
        sex_col = df[self.sex]
        if sex_col.isna().any():
            raise SafeTabError(f"column {self.sex!r} has missing values")
        if self.sex_values is None:
            sexes = list(sex_col.cat.categories) if isinstance(sex_col.dtype, pd.CategoricalDtype) \
                else sorted(pd.unique(sex_col))
        else:
            sexes = list(self.sex_values)
        sex_codes = pd.Index(sexes).get_indexer(sex_col)
        if np.any(sex_codes < 0):
            raise SafeTabError(f"column {self.sex!r} has value {sex_col[sex_codes < 0].iloc[0]!r} "
                               f"outside sex_values {sexes}")
        work = [_prepare_level(lv, df, sex_codes.astype(np.int64), len(sexes), age_codes, n_age)
                for lv in self.levels]
        return work, sexes

    def _domain(self, work: list[_LevelWork]) -> SimpleNamespace:
        """The release's domain as the public-domain check sees it (groups, sex values)."""
        observed = [f"population groups of level {lv.name!r} (no universe)"
                    for lv in self.levels if lv.universe is None]
        cells = self.age is not None and any((~w.total_only).any() for w in work)
        if cells and self.sex_values is None:
            observed.append(f"values of {self.sex!r} (no sex_values)")
        assumption = f"{OBSERVED_DOMAIN_ASSUMPTION}: {', '.join(observed)}" if observed else None
        return SimpleNamespace(domain_source="observed" if observed else "declared",
                               domain_assumption=assumption if self.observed_domain_public else None,
                               observed=observed)

    # -- the run ----------------------------------------------------------------------------------
    def release(self, df: pd.DataFrame, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> SafeTabRelease:
        """Run SafeTab (Alg. 1) on a person-level frame (one row per person, columns ``sex`` and
        ``age`` plus whatever the group maps read; its unique index identifies records).

        Raises (all before any noise):
            SafeTabError: unknown columns, bad thresholds/gamma/budgets/age bins, a map naming
                unknown records or groups outside the universe, sex values outside ``sex_values``.
            StabilityError: a level's observed stability exceeds the declared one.
            ObservedDomainError: groups or sex values read from the data, not declared public.
            BudgetExceeded: the accountant cannot pay for the release.
            PrivacyParameterError: bad randomness (a seed with ``secure=True``, ...).
        """
        t0 = time.perf_counter()
        work, sexes = self._validate(df)
        domain = self._domain(work)
        try:
            check_public_domain(domain, what="run SafeTab")
        except ObservedDomainError as err:
            raise ObservedDomainError(
                f"refusing to run SafeTab: its domain is read from the private rows ({'; '.join(domain.observed)}), so "
                "a group or cell whose only record is one person would reveal that person. Declare each level's "
                "universe (population_groups(..., entity_universe=, iteration_universe=)) and sex_values, or pass "
                "observed_domain_public=True and the release will state that assumption") from err
        branches = [(bool((~w.total_only).any()), bool(w.total_only.any())) for w in work]
        accounting = safetab_accounting([w.budget for w in work], [w.stability for w in work], noise=self.noise,
                                        gamma=self.gamma, delta=self.delta, branches=branches)
        if accountant is not None and self.repetitions > 1:
            raise SafeTabError("repetitions > 1 is for coverage studies: an accountant would have to pay for every "
                               "repetition; run the releases one by one instead")
        zcdp_parts = [Budget.zcdp(level_zcdp(w.budget, w.stability, self.gamma, br, self.noise))
                      for w, br in zip(work, branches)]
        ext_zcdp = (accountant is not None and isinstance(accountant, Accountant)
                    and accountant.total.calculus == "zcdp" and self.noise == "geometric")
        ctx = self.start(domain, seed=seed, rng=rng, secure=secure, accountant=accountant,
                         external_total=sum(zcdp_parts) if ext_zcdp else None,
                         approx_cost=lambda: Budget.approx(accounting.best_epsilon, self.delta))
        t_valid = time.perf_counter() - t0

        # ---- noise, level by level, each spend recorded first
        g = Fraction(self.gamma)
        age_labels = {k: _age_labels(e) for k, e in self.bins.items()}
        pieces = []
        for w, zpart in zip(work, zcdp_parts):
            b = Fraction(w.budget) / w.stability
            scales = (_scale(self.noise, b), _scale(self.noise, g * b), _scale(self.noise, (1 - g) * b))
            part = Budget.pure(w.budget) if self.noise == "geometric" else Budget.zcdp(w.budget)
            key = "scale" if self.noise == "geometric" else "sigma2"
            ctx.spend(part, f"level {w.name}", external=zpart if ext_zcdp else None, noise=self.noise,
                      stability=w.stability, **{f"{key}_total_only": scales[0], f"{key}_step1": scales[1],
                                                f"{key}_step2": scales[2]})
            moes = (_moe(self.noise, scales[0], self.moe_level, self.moe_method),
                    _moe(self.noise, scales[2], self.moe_level, self.moe_method))
            pieces.extend(_run_level(w, self.noise, scales, self.thresholds, self.repetitions, ctx.rng, sexes,
                                     age_labels, moes, (float(b), float((1 - g) * b)), self.include_true))
        frame = pd.concat(pieces, ignore_index=True)
        for col in ("level", "group", "tabulation", "cell", "sex", "age"):
            frame[col] = frame[col].astype("category")
        if not self._frame_runs:
            frame = frame.drop(columns="run")
        notes = (f"repetitions={self.repetitions} independent runs: each has this guarantee",) \
            if self.repetitions > 1 else ()
        accounting = dataclasses.replace(accounting, spends=tuple(ctx.spends), assumptions=ctx.assumptions,
                                         notes=notes, details={"ledger": ctx.ledger.summary(self.delta)})
        params = {**self.params(), "randomness": ctx.randomness, "sex_values": sexes,
                  "age_bins": {k: [int(x) for x in v] for k, v in self.bins.items()}}
        return SafeTabRelease(frame=frame, accounting=accounting, noise=self.noise, gamma=self.gamma,
                              thresholds=self.thresholds, moe_level=self.moe_level,
                              observed_stability={w.name: w.observed for w in work}, params=params,
                              timings={"validate_s": t_valid, "noise_s": time.perf_counter() - t0 - t_valid})


def safetab(df: pd.DataFrame, levels: Sequence[PopulationGroupLevel], *,
            noise: Literal["geometric", "discrete_gaussian"] = "geometric",
            gamma: float = 0.1, thresholds: Sequence[float] = (10, 100, 1000),
            sex: str = "sex", age: str | None = "age", sex_values: Sequence[Any] | None = None,
            age_bins: Mapping[str, Sequence[int]] | None = None,
            rng: np.random.Generator | SecureRandom | None = None, seed: int | None = None,
            delta: float = 1e-10, moe_level: float = 0.95,
            moe_method: Literal["exact", "paper"] = "exact",
            accountant: Accountant | None = None, repetitions: int | None = None,
            include_true: bool = False, observed_domain_public: bool = False,
            secure: bool = False) -> SafeTabRelease:
    """Run SafeTab (Alg. 1) on a person-level frame: ``SafeTab(levels, ...).release(df, ...)`` in
    one call. See :class:`SafeTab` for the arguments; ``rng`` / ``seed`` / ``secure`` /
    ``accountant`` are those of :meth:`SafeTab.release`."""
    mech = SafeTab(levels, noise=noise, gamma=gamma, thresholds=thresholds, sex=sex, age=age,
                   sex_values=sex_values, age_bins=age_bins, delta=delta, moe_level=moe_level,
                   moe_method=moe_method, repetitions=repetitions, include_true=include_true,
                   observed_domain_public=observed_domain_public, secure=secure)
    return mech.release(df, seed=seed, rng=rng, accountant=accountant)


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


def _run_level(w: _LevelWork, noise: str, scales: tuple[float, float, float], theta: tuple[float, float, float],
               reps: int, rng: Any, sexes: list, age_labels: dict[str, list[str]],
               moes: tuple[int, int], params: tuple[float, float],
               include_true: bool) -> list[pd.DataFrame]:
    """Alg. 2 for every group of one level and every run, vectorized per tabulation.

    ``scales``: the noise parameters (TotalOnly, Step 1, Step 2), already rounded up;
    ``params``: the per-count budgets (TotalOnly, Step 2) reported in ``noise_parameter``."""
    b, b2 = params
    out = []
    total_cell = [("total", None, None)]
    n_groups = w.groups.size
    to_idx = np.flatnonzero(w.total_only)
    ad_idx = np.flatnonzero(~w.total_only)
    if to_idx.size:  # TotalOnly: one count with the whole per-group budget
        true = np.broadcast_to(w.totals[to_idx], (reps, to_idx.size))
        noisy = true + _draw(noise, scales[0], (reps, to_idx.size), rng)
        runs = np.repeat(np.arange(reps), to_idx.size)
        out.append(_cells_frame(w.name, np.tile(w.groups[to_idx], reps), runs, "total_only",
                                total_cell, noisy, true, moes[0], b, include_true))
    if ad_idx.size:
        # Step 1: noisy totals with gamma * b choose the Step-2 tabulation
        step1 = w.totals[ad_idx][None, :] + _draw(noise, scales[1], (reps, ad_idx.size), rng)
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
            noisy = true + _draw(noise, scales[2], true.shape, rng)
            out.append(_cells_frame(w.name, w.groups[grp], run_i, tab, cells, noisy, true,
                                    moes[1], b2, include_true))
    if not out:  # cannot happen (a level has groups), kept for clarity
        raise SafeTabError(f"level {w.name!r} produced no output ({n_groups} groups)")
    return out
