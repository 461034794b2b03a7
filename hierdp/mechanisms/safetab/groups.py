"""Building SafeTab's population groups, and post-processing its totals over a geography.

* :func:`geography_entities` - each record's entity at one level of a geography
  :class:`~hierdp.hierarchy.Hierarchy` (node names are "/"-joined paths, e.g. ``"CA/Alameda"``;
  the root level gives the root's name, e.g. ``"total"`` for the nation).
* :func:`race_iterations` - characteristic iterations from race codes (paper 004 §1): a record
  is in race group R *alone* if all its codes are in R, *alone or in combination* if any is.
* :func:`population_groups` - the record -> groups map of one level: (entity, iteration) pairs,
  labelled ``"<entity>|<iteration>"``, plus the level's public universe.
* :func:`consistent_totals` - SafeTab's counts are not consistent; this poses the totals of
  one iteration over the geography tree as a :class:`~hierdp.models.Problem` (integer,
  non-negative, children sum to parents) and solves it with any registered solver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hierdp.mechanisms.safetab.levels import SafeTabError

__all__ = ["consistent_totals", "geography_entities", "population_groups", "race_iterations"]


def geography_entities(df: pd.DataFrame, hierarchy: Any, level: int | str) -> pd.Series:
    """Each record's geographic entity (a node name of ``hierarchy``) at ``level``.

    The frame must have one column per non-root level of the hierarchy, named as its
    ``level_names[1:]`` (the layout :meth:`Hierarchy.from_frame` reads); the entity at level k is
    the first k of those values joined by "/".

    Raises:
        SafeTabError: missing columns, or a path that is not a node of the hierarchy.
    """
    k = hierarchy.level_index(level)
    cols = list(hierarchy.level_names[1:k + 1])
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SafeTabError(f"unknown column(s) {missing} for geography level {level!r}")
    if k == 0:
        return pd.Series(np.full(len(df), hierarchy.names[0], dtype=object), index=df.index,
                         name="entity")
    path = df[cols[0]].astype(str)
    for c in cols[1:]:
        path = path + "/" + df[c].astype(str)
    known = set(hierarchy.level_counts(k).index)
    unknown = ~path.isin(known)
    if unknown.any():
        raise SafeTabError(f"geography path {path[unknown].iloc[0]!r} is not a node at level "
                           f"{hierarchy.level_names[k]!r}")
    return path.rename("entity")


def race_iterations(codes: pd.DataFrame, race_groups: Mapping[str, Sequence[Any]], *,
                    record: str = "record", code: str = "code",
                    alone: bool = True, in_combination: bool = True) -> pd.DataFrame:
    """Characteristic iterations from a (record, race code) frame.

    Returns a (record, iteration) frame with ``"<group> alone"`` and/or
    ``"<group> alone or in combination"`` memberships, vectorized over records (one pass per
    race group).
    """
    missing = [c for c in (record, code) if c not in codes.columns]
    if missing:
        raise SafeTabError(f"race code frame lacks column(s) {missing}")
    if not (alone or in_combination):
        raise SafeTabError("ask for alone and/or in_combination iterations")
    out = []
    for name, members in race_groups.items():
        hit = codes[code].isin(list(members)).to_numpy()
        per = pd.DataFrame({"record": codes[record].to_numpy(), "hit": hit}).groupby(
            "record", sort=False)["hit"].agg(["all", "any"])
        if alone:
            recs = per.index[per["all"].to_numpy()]
            out.append(pd.DataFrame({"record": recs, "iteration": f"{name} alone"}))
        if in_combination:
            recs = per.index[per["any"].to_numpy()]
            out.append(pd.DataFrame({"record": recs,
                                     "iteration": f"{name} alone or in combination"}))
    return pd.concat(out, ignore_index=True)


def population_groups(entities: pd.Series, iterations: pd.DataFrame,
                      entity_universe: Sequence[Any] | None = None,
                      iteration_universe: Sequence[Any] | None = None
                      ) -> tuple[pd.DataFrame, list[str]]:
    """The (record, group) map of one level and its universe.

    ``entities``: record -> entity (index = record labels); ``iterations``: (record, iteration)
    rows. Group labels are ``"<entity>|<iteration>"``. The universe is the product of the
    entity and iteration universes (default: the values seen).
    """
    if not {"record", "iteration"} <= set(iterations.columns):
        raise SafeTabError("iterations must have columns 'record' and 'iteration'")
    ent = entities.reindex(iterations["record"].to_numpy())
    if ent.isna().any():
        raise SafeTabError(f"record {iterations['record'][ent.isna().to_numpy()].iloc[0]!r} has "
                           "an iteration but no geographic entity")
    groups = ent.astype(str).to_numpy(dtype=object) + "|" + iterations["iteration"].astype(str).to_numpy(dtype=object)
    pairs = pd.DataFrame({"record": iterations["record"].to_numpy(), "group": groups})
    eu = list(pd.unique(entities)) if entity_universe is None else list(entity_universe)
    iu = list(pd.unique(iterations["iteration"])) if iteration_universe is None else list(iteration_universe)
    universe = [f"{e}|{i}" for e in eu for i in iu]
    return pairs, universe


def consistent_totals(hierarchy: Any, noisy_totals: Mapping[str, float] | pd.Series, *,
                      solver: str = "auto", fix_root: bool = False, objective: str = "l2",
                      root_value: float | None = None) -> pd.Series:
    """Integer, non-negative totals over ``hierarchy`` closest to SafeTab's noisy totals.

    ``noisy_totals`` is keyed by node name (nodes without a value get no objective term). The
    structure comes from ``hierarchy`` (its counts are ignored unless ``fix_root=True``, which
    fixes the root at its *true* count - an invariant, outside the DP guarantee; with
    ``root_value`` the root is fixed at that value instead, e.g. a published total). Returns the
    solved values by node name.
    """
    from hierdp.models import Problem
    from hierdp.solvers import solve

    target = pd.Series(noisy_totals, dtype=float)
    problem = Problem.from_hierarchy(hierarchy, target, fix_root=fix_root, objective=objective, integer=True)
    if root_value is not None:
        problem.fix(hierarchy.names[0], float(root_value))  # through fix(): keeps cached structure valid
    solution = solve(problem, solver=solver)
    return pd.Series(np.asarray(solution.values), index=pd.Index(hierarchy.names, dtype=object),
                     name="consistent")
