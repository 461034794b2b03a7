"""Parametric bootstrap of a TopDown release (paper 000's InfTDA / TDA and the TopDown engine).

A TopDown release is re-simulated from its own values: the released tree (zero for every node
it does not list) is taken as the truth, every level is re-measured with the noise law its
accounting records (σ² or scale per level) and post-processed by the same registered solver with
the same objective, exactly as the engine does (expand the positive nodes, noise all their children,
solve the groups "children sum to the parent, non-negative integers", keep the positive ones).

Vectorized over draws: a level is expanded once for the parents of *all* draws of a batch, its
noise drawn in one call, and its groups - ``draws x parents`` of them - solved in one
:func:`hierdp.solvers.solve_groups` call (IntOpt and the projection solve millions of groups per
second). Batches of draws keep about :data:`CHILDREN_PER_BATCH` children at once: on the cities (37k
nodes) a few draws per batch, on small trees hundreds (where one call per draw would be Python
overhead); experiments/bench/intervals.py measures both.

What it needs besides the release: the **public structure** of the tree it was made from (which
children every node has, zero nodes included: a TopDown release lists only positive nodes, but
the engine measures every child of a positive node). :class:`PublicStructure` wraps the tree the
caller passes and reads only its keys and offsets; its counts are never read (a test passes a tree
with scrambled counts and gets the same intervals).
"""

from __future__ import annotations


import logging
import re
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.noise_law import NoiseLaw

__all__ = ["CHILDREN_PER_BATCH", "LevelDraws", "PublicStructure", "TopDownLaw", "level_margins", "simulate",
           "topdown_law"]

log = logging.getLogger(__name__)

#: children held in memory per batch of draws (a level of the batch is one solve_groups call)
CHILDREN_PER_BATCH = 1 << 18


class PublicStructure:
    """The structure of a TopDown tree, without its counts: ``expand`` returns keys and offsets.

    Args:
        tree: the tree the release was made from (a :class:`~hierdp.hierarchy.Hierarchy`, an
            ``ODTree``, any :class:`~hierdp.hierarchy.topdown_tree.TopDownTree`); only its
            structure is read.
    """

    def __init__(self, tree: Any) -> None:
        from hierdp.hierarchy.topdown_tree import as_topdown_tree

        self._tree = as_topdown_tree(tree)
        self.n_levels = int(self._tree.n_levels)
        self.root_key = int(self._tree.root_key)
        self.level_names = list(self._tree.level_names)

    def children(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(child_keys, offsets)`` of the given keys of ``level`` (every potential child)."""
        keys, offsets, _counts = self._tree.expand(level, np.asarray(parent_keys, dtype=np.int64))
        return np.asarray(keys, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


@dataclass(frozen=True)
class TopDownLaw:
    """How a TopDown release was measured and post-processed (all public, from the release).

    Attributes:
        noise: the noise law of each measured level (level 0 only when the root was measured:
            unbounded neighbours).
        solver, objective, integer, options: the level solver, as the release records it.
    """

    noise: Mapping[int, NoiseLaw]
    solver: str
    objective: str
    integer: bool
    options: Mapping[str, Any]


def topdown_law(release: Any) -> TopDownLaw:
    """Read a TopDown release's measurement and post-processing from its accounting and params.

    Raises:
        IntervalsUnsupported: the release was not made by the TopDown engine with one noise
            parameter per level (per-node budget plans, baselines without a solver).
    """
    acc = release.accounting
    details = getattr(acc, "details", None) or {}
    params = release.params or {}
    if release.solver is None or "objective" not in params:
        raise IntervalsUnsupported(f"{release.mechanism}: not a TopDown release with a level solver; a bootstrap "
                                   "re-runs the level solver")
    if params.get("plan") == "per-node" or "per node" in str(details.get("split", "")):
        raise IntervalsUnsupported(f"{release.mechanism}: per-node budget plans are not supported by the TopDown "
                                   "bootstrap (the noise law differs node by node)")
    kind = str(details.get("noise", params.get("noise", "")))
    kind = {"gaussian": "discrete_gaussian", "discrete_laplace": "geometric"}.get(kind, kind)
    key = {"discrete_gaussian": "sigma2", "geometric": "scale"}.get(kind)
    if key is None:
        raise IntervalsUnsupported(f"{release.mechanism}: unknown noise {kind!r} in the accounting")
    noise: dict[int, NoiseLaw] = {}
    for spend in acc.spends:  # the spends are the ledger: "level L (name)", one per measured level
        m = re.match(r"level (\d+) ", spend.label)
        if m and spend.details.get(key) is not None:
            noise[int(m.group(1))] = NoiseLaw(kind, float(spend.details[key]))
    if not noise:
        raise IntervalsUnsupported(f"{release.mechanism}: the accounting records no {key} per level")
    shown = params.get("solver_options") or {}
    # objects (executors, pools) are recorded as "<TypeName>" placeholders: keep the re-usable ones
    options = {k: v for k, v in shown.items()
               if k != "executor" and not (isinstance(v, str) and v.startswith("<") and v.endswith(">"))}
    return TopDownLaw(noise=noise, solver=str(release.solver), objective=str(params["objective"]),
                      integer=bool(params.get("integer", True)), options=options)


def level_margins(release: Any, level: float, law: TopDownLaw | None = None) -> np.ndarray:
    """The noise-only margin at ``level`` of each level's measurement (0 for an unmeasured root)."""
    law = law or topdown_law(release)
    return np.array([float(law.noise[L].margin(level)) if L in law.noise else 0.0
                     for L in range(release.n_levels)])


@dataclass
class LevelDraws:
    """Simulated re-releases of one level's nodes of interest.

    Attributes:
        keys: the nodes (the released ones first, in release order, then the other children of
            released nodes, which the release implies are 0).
        released: their released values (0 for the implied ones).
        draws: ``(n, B)`` re-released values (0 where a draw does not release the node).
    """

    keys: np.ndarray
    released: np.ndarray
    draws: np.ndarray


def _lookup(sorted_keys: np.ndarray, sorted_values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Values of ``keys`` in a sorted table, 0 where absent."""
    if sorted_keys.size == 0:
        return np.zeros(keys.size, np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return np.where(sorted_keys[pos] == keys, sorted_values[pos], 0)


def _interest(release: Any, structure: PublicStructure, implied: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per level, the nodes to report (keys, released values): released nodes, then (``implied``)
    the children of released positive nodes that the release does not list (released 0)."""
    out = []
    for L, lv in enumerate(release.levels):
        keys, vals = np.asarray(lv.keys, np.int64), np.asarray(lv.values, np.int64)
        if implied and L > 0:
            prev = release.levels[L - 1]
            alive = np.asarray(prev.keys, np.int64)[np.asarray(prev.values) > 0]
            kids, _ = structure.children(L - 1, alive)
            extra = np.setdiff1d(kids, keys)
            keys = np.concatenate([keys, extra])
            vals = np.concatenate([vals, np.zeros(extra.size, np.int64)])
        out.append((keys, vals))
    return out


def simulate(release: Any, domain: Any, draws: int, rng: np.random.Generator, *, implied: bool = False,
             progress: bool = False, law: TopDownLaw | None = None,
             children_per_batch: int = CHILDREN_PER_BATCH) -> list[LevelDraws]:
    """Re-simulate ``draws`` releases from ``release`` (taken as the truth) on ``domain``'s structure.

    Args:
        release: a complete :class:`~hierdp.release.TreeRelease` of the TopDown engine.
        domain: the public tree the release was made from (only its structure is read).
        draws: number of simulated re-releases B.
        rng: numpy generator of the simulation (not privacy noise: it re-simulates a public law).
        implied: also report the children of released nodes that the release does not list.
        progress: a tqdm bar over draws.

    Raises:
        IntervalsUnsupported: see :func:`topdown_law`; a partial release.
    """
    from hierdp.solvers import solve_groups

    if getattr(release, "partial", False):
        raise IntervalsUnsupported("a partial release (aborted run) has no complete law to re-simulate")
    law = law or topdown_law(release)
    structure = domain if isinstance(domain, PublicStructure) else PublicStructure(domain)
    T = release.n_levels - 1
    if structure.n_levels != release.n_levels:
        raise IntervalsUnsupported(f"the domain has {structure.n_levels} levels, the release {release.n_levels}")
    missing = [L for L in range(1, T + 1) if L not in law.noise]
    if missing:
        raise IntervalsUnsupported(f"no noise law recorded for level(s) {missing}")
    # the pseudo-truth: released values, sorted by key per level
    truth = []
    for lv in release.levels:
        order = np.argsort(lv.keys, kind="stable")
        truth.append((np.asarray(lv.keys, np.int64)[order], np.asarray(lv.values, np.int64)[order]))
    root_value = int(release.levels[0].values[0])
    interest = _interest(release, structure, implied)
    sorted_interest = []
    for keys, _ in interest:
        order = np.argsort(keys, kind="stable")
        sorted_interest.append((keys[order], order))
    mats = [np.zeros((keys.size, draws), np.int64) for keys, _ in interest]
    per_draw = max(1, release.n_nodes * 2)
    batch = max(1, min(draws, children_per_batch // per_draw))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=draws, desc=f"bootstrap {release.mechanism}", unit="draw")
    try:
        for start in range(0, draws, batch):
            nb = min(batch, draws - start)
            ids = np.arange(start, start + nb, dtype=np.int64)
            if 0 in law.noise:  # unbounded: the root was measured (and clipped at 0)
                vals = np.maximum(root_value + law.noise[0].draw(nb, rng), 0).astype(np.int64)
            else:
                vals = np.full(nb, root_value, np.int64)
            keys = np.full(nb, structure.root_key, np.int64)
            _record(mats[0], sorted_interest[0], ids, keys, vals)
            for L in range(T):
                alive = vals > 0
                ids, keys, vals = ids[alive], keys[alive], vals[alive]
                kids, offs = structure.children(L, keys)
                sizes = np.diff(offs)
                has = sizes > 0
                if kids.size == 0:
                    ids = keys = vals = np.zeros(0, np.int64)
                    continue
                true = _lookup(*truth[L + 1], kids)
                noisy = true + law.noise[L + 1].draw(kids.size, rng)
                groups = np.concatenate([[0], offs[1:][has]]).astype(np.int64)
                sol = solve_groups(noisy, groups, vals[has], solver=law.solver, objective=law.objective,
                                   integer=law.integer, **law.options)
                out = np.rint(np.asarray(sol.values)).astype(np.int64)
                ids = np.repeat(ids, sizes)
                keys, vals = kids, out
                _record(mats[L + 1], sorted_interest[L + 1], ids, keys, vals)
            if bar is not None:
                bar.update(nb)
    finally:
        if bar is not None:
            bar.close()
    log.debug("simulated %d re-releases of %s in batches of %d", draws, release.mechanism, batch)
    return [LevelDraws(keys, vals, m) for (keys, vals), m in zip(interest, mats, strict=True)]


def _record(mat: np.ndarray, sorted_interest: tuple[np.ndarray, np.ndarray], ids: np.ndarray, keys: np.ndarray,
            vals: np.ndarray) -> None:
    """Write the draws' values of the nodes of interest into ``mat`` (rows: interest order)."""
    skeys, order = sorted_interest
    if skeys.size == 0 or keys.size == 0:
        return
    pos = np.minimum(np.searchsorted(skeys, keys), skeys.size - 1)
    hit = (skeys[pos] == keys) & (vals != 0)
    mat[order[pos[hit]], ids[hit]] = vals[hit]


def draws_needed(level: float) -> int:
    """A default number of draws for a two-sided interval at ``level``: enough that each tail
    holds at least 10 draws (90 %: 200; 95 %: 400; 99 %: 2,000)."""
    tail = (1.0 - level) / 2.0
    return int(max(200, math.ceil(10.0 / tail / 100.0) * 100))
