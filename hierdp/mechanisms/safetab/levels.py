"""SafeTab's input (paper 004, Alg. 1): population-group levels, and their validation against a
person-level frame (group maps, declared stabilities, universes, Sex x Age tables) before any noise."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from hierdp.privacy.errors import PrivacyError, PrivacyParameterError
from hierdp.privacy.parallel import Memberships, StabilityError, membership_pairs

__all__ = ["AGE_BINS", "GroupMap", "PopulationGroupLevel", "SafeTabError", "StabilityError"]

#: Age bin lower edges of the Census Sex x Age tables (last bin open-ended).
AGE_BINS: dict[str, tuple[int, ...]] = {
    "age4": (0, 18, 45, 65),
    "age9": (0, 5, 18, 25, 35, 45, 55, 65, 75),
    "age23": (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70,
              75, 80, 85),
}


class SafeTabError(PrivacyError):
    """Bad SafeTab input (columns, thresholds, levels, group maps); raised before any noise."""


GroupMap: TypeAlias = Memberships | Callable[[pd.DataFrame], Memberships]


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
    tables: dict[str, np.ndarray] = {}
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
