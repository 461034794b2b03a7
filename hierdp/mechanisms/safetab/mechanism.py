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

:class:`SafeTab` is the mechanism (the shared contract of :mod:`hierdp.mechanisms.base`). The output (:class:`SafeTabRelease`, a
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
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from hierdp.mechanisms.base import Mechanism, refuse_solver
from hierdp.mechanisms.safetab.guarantee import NOISES, Noise, SafeTabAccounting, level_zcdp, safetab_accounting
from hierdp.mechanisms.safetab.levels import (
    AGE_BINS,
    PopulationGroupLevel,
    SafeTabError,
    StabilityError,
    _age_labels,
    _check_age_bins,
    _check_levels,
    _check_thresholds,
    _LevelWork,
    _number,
    _prepare_level,
)
from hierdp.mechanisms.safetab.release import SafeTabRelease
from hierdp.mechanisms.safetab.tabulate import TABULATIONS, _moe, _run_level, _scale
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.conversions import check_delta
from hierdp.privacy.domain import OBSERVED_DOMAIN_ASSUMPTION, ObservedDomainError, check_public_domain
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.spec import PrivacySpec
from hierdp.release.accounting import Accounting

__all__ = [
    "AGE_BINS",
    "TABULATIONS",
    "PopulationGroupLevel",
    "SafeTab",
    "SafeTabError",
    "SafeTabRelease",
    "StabilityError",
]

#: what the accounting of a (seeded) release made with include_true=True says
TRUE_COUNTS_NOTE = ("NOT A PRIVATE RELEASE: its frame holds the true counts (include_true=True, for evaluation); "
                    "the guarantee covers the noisy counts only - never publish this frame")
#: the fields every Accounting has (the run context fills them); SafeTab's analysis adds the others
_SHARED_FIELDS = frozenset(f.name for f in dataclasses.fields(Accounting))


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
        include_true: add the true counts (for evaluation with seeded randomness only: a secure
            run - the default without a seed - refuses it, and a seeded release that carries them
            says so in its accounting; never publish them).
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
        self.noise: Noise = cast(Noise, str(noise))
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
        self.spec = PrivacySpec(budget=sum(parts[1:], parts[0]), delta=self.delta, epsilon_target=None)
        from hierdp.mechanisms.safetab.guarantee import SAFETAB_UNIT

        self.unit = SAFETAB_UNIT

    def params(self) -> dict[str, Any]:
        return {**super().params(), "noise": self.noise, "gamma": self.gamma, "thresholds": self.thresholds,
                "levels": [lv.name for lv in self.levels], "moe_method": self.moe_method,
                "repetitions": self.repetitions}

    def observed_stability(self, df: pd.DataFrame) -> dict[str, int]:
        """Each level's stability observed on ``df`` (the most groups one record is in): a statistic
        of the private data, for evaluation only - :meth:`release` checks it against the declared
        stabilities but never attaches it to a release (one record can change it)."""
        work, _ = self._validate(df)
        return {w.name: int(w.observed) for w in work}

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
        if self.include_true and self._secure_for(secure, seed=seed, rng=rng):
            raise SafeTabError("include_true=True adds the true counts to the release's frame: it is for evaluating "
                               "seeded experiments (seed= or rng=), and a secure release - the default without a "
                               "seed - refuses it; drop include_true for a release you publish")
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
                      for w, br in zip(work, branches, strict=False)]
        ext_zcdp = (accountant is not None and isinstance(accountant, Accountant)
                    and accountant.total.calculus == "zcdp" and self.noise == "geometric")
        ctx = self.start(domain, seed=seed, rng=rng, secure=secure, accountant=accountant,
                         external_total=sum(zcdp_parts[1:], zcdp_parts[0]) if ext_zcdp else None,
                         approx_cost=lambda: Budget.approx(accounting.best_epsilon, self.delta))
        t_valid = time.perf_counter() - t0

        # ---- noise, level by level, each spend recorded first
        g = Fraction(self.gamma)
        age_labels = {k: _age_labels(e) for k, e in self.bins.items()}
        pieces = []
        for w, zpart in zip(work, zcdp_parts, strict=False):
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
        notes: tuple[str, ...] = (f"repetitions={self.repetitions} independent runs: each has this guarantee",) \
            if self.repetitions > 1 else ()
        if self.include_true:
            notes += (TRUE_COUNTS_NOTE,)
        analysis = {f.name: getattr(accounting, f.name) for f in dataclasses.fields(SafeTabAccounting)
                    if f.name not in _SHARED_FIELDS}
        accounting = cast(SafeTabAccounting, ctx.accounting(kind=SafeTabAccounting, notes=notes, **analysis))
        params = ctx.params(sex_values=sexes, age_bins={k: [int(x) for x in v] for k, v in self.bins.items()})
        return SafeTabRelease(frame=frame, accounting=accounting, noise=self.noise, gamma=self.gamma,
                              thresholds=self.thresholds, moe_level=self.moe_level,
                              params=params,
                              timings={"validate_s": t_valid, "noise_s": time.perf_counter() - t0 - t_valid})
