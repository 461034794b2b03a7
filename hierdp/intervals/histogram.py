"""Parametric bootstrap of histogram releases (group sizes, paper 001; Census TopDown, paper 003).

These releases are post-processed by whole-tree or per-parent solvers that the interval code
does not re-implement: the bootstrap calls the mechanism's own code on a *pseudo-truth* built from
the release, so the re-releases go through exactly the post-processing of the real one.

* **Group sizes** (:class:`~hierdp.mechanisms.pgsr.mechanisms.GroupSizeMechanism`): the pseudo
  data is the released histograms on the released region tree; each draw re-measures them with
  the geometric scales the accounting records per region level (the vector the mechanism
  measures: histograms, cumulatives or level vectors) and calls the mechanism's
  ``post_process`` (cost tables, the chain DP, a general solver). The TopDown baseline re-runs its
  release on the pseudo data.
* **Census TopDown** (:class:`~hierdp.mechanisms.census.CensusTopDown`): the pseudo data is the
  released block histograms on the spine (``domain=`` the public spine); each draw re-runs the
  mechanism's release on it with a numpy generator.

A re-run draws its noise with the mechanism's own noise law (checked equal to the recorded one),
inside a throwaway run context: the pseudo data is the release itself, so nothing private is read,
and no caller's accountant is charged.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported

__all__ = ["histogram_margins", "simulate_histograms"]

log = logging.getLogger(__name__)


def _seeded_copy(mechanism: Any) -> Any:
    """The mechanism with seeded randomness (intervals re-simulate a public law; a secure
    mechanism refuses seeds)."""
    m = copy.copy(mechanism)
    if getattr(m, "secure", False):
        m.secure = False
    return m


def _pgsr_pseudo(release: Any) -> Any:
    """The released histograms as a CountOfCounts on the released region tree."""
    from hierdp.hierarchy import Hierarchy
    from hierdp.hierarchy.count_of_counts import CountOfCounts

    values = np.asarray(release.values, dtype=np.int64)
    regions = Hierarchy.from_arrays(release.names, release.parent, values.sum(axis=1),
                                    level_names=list(release.level_names))
    return CountOfCounts(regions, values.T.copy(), K=int(values.shape[1]))


def _pgsr_scales(release: Any) -> list[float]:
    # the spends are the ledger: one per region level, in level order, each with its geometric scale
    scales = [float(s.details["scale"]) for s in release.accounting.spends if "scale" in s.details]
    if len(scales) != int(np.max(release.level)) + 1:
        raise IntervalsUnsupported(f"{release.mechanism}: the accounting records {len(scales)} geometric scales "
                                   f"for {int(np.max(release.level)) + 1} region levels")
    return scales


def histogram_margins(release: Any, level: float) -> np.ndarray | None:
    """Per (node, cell) of a group-size release, the noise-only margin at ``level`` of one
    measurement at the node's region level (the near-zero rule's m); ``None`` for releases without
    per-level geometric scales (the Census TopDown: its coverage needs no near-zero rule,
    docs/intervals.md)."""
    from hierdp.intervals.noise_law import NoiseLaw

    try:
        scales = _pgsr_scales(release)
    except (IntervalsUnsupported, KeyError, TypeError):
        return None
    margins = np.array([NoiseLaw("geometric", s).margin(level) for s in scales], dtype=np.float64)
    k = np.asarray(release.values).shape[1]
    return np.repeat(margins[np.asarray(release.level, dtype=np.int64)], k)


def simulate_histograms(release: Any, mechanism: Any, draws: int, rng: np.random.Generator, *,
                        domain: Any = None, progress: bool = False) -> np.ndarray:
    """``(n_nodes, n_cells, draws)`` re-releases of a histogram release, from the release itself.

    Args:
        release: a :class:`~hierdp.release.NodeHistogramRelease`.
        mechanism: the mechanism that made it (public configuration).
        draws: number of re-releases.
        rng: numpy generator of the simulation.
        domain: the public spine (Census TopDown).
        progress: a tqdm bar over draws.

    Raises:
        IntervalsUnsupported: no mechanism, a mechanism of another family, a missing spine.
    """
    from hierdp.mechanisms.census import CensusTopDown
    from hierdp.mechanisms.pgsr import GroupSizeMechanism, GroupSizeTopDown

    if mechanism is None:
        raise IntervalsUnsupported(f"{release.mechanism}: the bootstrap of a histogram release re-runs its "
                                   "post-processing; pass mechanism= (the mechanism object that made it)")
    n, k = np.asarray(release.values).shape
    out = np.zeros((n, k, draws), np.int64)
    mech = _seeded_copy(mechanism)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=draws, desc=f"bootstrap {release.mechanism}", unit="draw")
    try:
        if isinstance(mechanism, GroupSizeMechanism) and not isinstance(mechanism, GroupSizeTopDown):
            measured = (release.accounting.details or {}).get("measurement")
            if measured is not None and measured != mechanism.measurement:
                raise IntervalsUnsupported(f"the release measured {measured!r} vectors, the mechanism passed measures "
                                           f"{mechanism.measurement!r}: not the mechanism that made it")
            pseudo = _pgsr_pseudo(release)
            scales = _pgsr_scales(release)
            true = mech._true_vectors(pseudo)
            lp = pseudo.regions.level_ptr
            for b in range(draws):
                noisy = np.empty(true.shape, np.int64)
                for lev in range(len(scales)):
                    a, e = int(lp[lev]), int(lp[lev + 1])
                    from hierdp.privacy import samplers

                    noisy[:, a:e] = true[:, a:e] + samplers.discrete_laplace(scales[lev], (true.shape[0], e - a), rng)
                values, _info = mech.post_process(pseudo, noisy, scales)
                out[:, :, b] = np.asarray(values, dtype=np.int64).T
                if bar is not None:
                    bar.update(1)
        elif isinstance(mechanism, (GroupSizeTopDown, CensusTopDown)):
            if isinstance(mechanism, GroupSizeTopDown):
                pseudo = _pgsr_pseudo(release)
            else:
                from hierdp.mechanisms.census import SpineHistograms
                from hierdp.spines import Spine

                if not isinstance(domain, Spine):
                    raise IntervalsUnsupported("the Census TopDown bootstrap needs the public spine: pass domain=spine")
                if domain.n != n:
                    raise IntervalsUnsupported(f"the spine has {domain.n} geounits, the release {n}")
                pseudo = SpineHistograms(domain, np.asarray(release.values, np.int64)[domain.blocks])
            _check_same_law(release, mech, pseudo, rng)
            for b in range(draws):
                rel = mech.release(pseudo, seed=int(rng.integers(2**62)))
                out[:, :, b] = np.asarray(rel.values, dtype=np.int64)
                if bar is not None:
                    bar.update(1)
        else:
            raise IntervalsUnsupported(f"{release.mechanism}: no bootstrap for mechanism {type(mechanism).__name__}")
    finally:
        if bar is not None:
            bar.close()
    return out


def _noise_parameters(accounting: Any) -> list[tuple[str, float]]:
    return [(s.label, float(v)) for s in accounting.spends for key, v in sorted(s.details.items())
            if key.startswith(("sigma2", "scale")) and isinstance(v, (int, float))]


def _check_same_law(release: Any, mech: Any, pseudo: Any, rng: np.random.Generator) -> None:
    """One re-run's recorded noise parameters must equal the release's: else the mechanism passed
    is not the one that made the release, and its re-runs would simulate another law."""
    probe = mech.release(pseudo, seed=int(rng.integers(2**62)))
    if _noise_parameters(probe.accounting) != _noise_parameters(release.accounting):
        raise IntervalsUnsupported(f"the mechanism passed ({type(mech).__name__}) measures with other noise "
                                   f"parameters than the release records: not the mechanism that made it")
