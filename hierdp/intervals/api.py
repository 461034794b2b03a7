"""``intervals(release, level)``: per-node intervals for every release type, as a frame.

One entry point (also ``release.intervals(...)``) dispatches on the release's type and mechanism
to the methods that are valid for it (docs/intervals.md says why):

==========================  =============================  =========================================
release                     methods (first = ``"auto"``)   what the interval is
==========================  =============================  =========================================
TopDown tree (InfTDA, TDA,  ``bootstrap``, ``linf_bound``  bootstrap: an estimate; ``linf_bound``
``topdown``)                                               (L∞-optimal levels only): a proven bound
group sizes (paper 001)     ``bootstrap``                  an estimate
Census TopDown (paper 003)  ``bootstrap``, ``wls``         both estimates (``wls``: the real-valued
                                                           step's exact variances, normal approx.)
HTF leaves (paper 002)      ``noise``                      exact, given the released partition
QuadTree / kd-tree + GLS    ``wls``                        an estimate (normal approximation)
SafeTab (paper 004)         ``noise``                      exact
==========================  =============================  =========================================

Every method reads only the release, its accounting (the public noise law) and public structure
the caller passes (``domain=``: the tree or spine; ``mechanism=``: the mechanism object, for
histogram releases whose post-processing is re-run). Intervals are post-processing: they spend no
privacy budget and touch no accountant. The frame's ``attrs["intervals"]`` states the method,
whether the interval is a bound, exact or an estimate, and that no budget was spent.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from hierdp.intervals.construct import CONSTRUCTIONS, from_draws
from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.topdown import draws_needed

__all__ = ["PRIVACY_STATEMENT", "IntervalInfo", "intervals", "tree_intervals"]

log = logging.getLogger(__name__)

PRIVACY_STATEMENT = ("post-processing of the release and its public noise law (accounting): no privacy budget "
                     "spent, no accountant charged")
METHODS = ("auto", "bootstrap", "linf_bound", "noise", "wls")


@dataclass(frozen=True)
class IntervalInfo:
    """How a frame's intervals were computed (``frame.attrs["intervals"]`` holds ``as_dict()``).

    Attributes:
        level: the nominal level (two-sided).
        method: ``"bootstrap"``, ``"linf_bound"``, ``"noise"`` or ``"wls"``.
        kind: ``"bound"`` (proven: coverage >= level for every input), ``"exact"`` (the exact law
            of the released value's noise), or ``"estimate"`` (coverage near the level, measured,
            not guaranteed).
        description: the method in words.
        draws, seed, construction: the bootstrap's settings (else ``None``).
        privacy: what the intervals cost (nothing: post-processing).
    """

    level: float
    method: str
    kind: str
    description: str
    draws: int | None = None
    seed: int | None = None
    construction: str | None = None
    privacy: str = PRIVACY_STATEMENT

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (frame attrs, JSON)."""
        return asdict(self)


def _check(level: Any, method: Any, draws: Any, construction: Any) -> tuple[float, str]:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.9, got {level!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if draws is not None and (isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1):
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    if construction not in CONSTRUCTIONS:
        raise ValueError(f"construction must be one of {CONSTRUCTIONS}, got {construction!r}")
    return float(level), str(method)


def tree_intervals(release: Any, level: float, *, method: str = "bootstrap", domain: Any = None,
                   draws: int | None = None, seed: Any = None, progress: bool = False, construction: str = "hull",
                   implied: bool = False, near_zero: bool = True) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                                                   IntervalInfo]:
    """Per level of a TopDown :class:`~hierdp.release.TreeRelease`: ``(keys, released, lower, upper)``
    (released nodes in release order first; with ``implied`` also the children of released nodes
    that the release does not list, released 0 - the coverage experiment scores them too);
    ``near_zero`` applies the near-zero rule of :mod:`hierdp.intervals.construct` with each
    level's noise-only margin.

    Raises:
        IntervalsUnsupported: no ``domain``, not a TopDown release, ``linf_bound`` on an L2 release.
    """
    from hierdp.intervals.linf_bound import linf_bound
    from hierdp.intervals.topdown import PublicStructure, simulate, topdown_law

    if domain is None:
        raise IntervalsUnsupported(f"{release.mechanism}: intervals of a TopDown release need the public tree it was "
                                   "made from (domain=): the release lists positive nodes only, while every child of "
                                   "a positive node was measured. Only the tree's structure is read, never its counts")
    law = topdown_law(release)
    structure = PublicStructure(domain)
    if method in ("auto", "bootstrap"):
        B = int(draws) if draws is not None else draws_needed(level)
        sims = simulate(release, structure, B, np.random.default_rng(seed), implied=implied, progress=progress,
                        law=law)
        out = []
        for L, s in enumerate(sims):
            margin = float(law.noise[L].margin(level)) if (near_zero and L in law.noise) else None
            lo, hi = from_draws(s.released, s.draws, level, construction=construction, nonnegative=True, integer=True,
                                noise_margin=margin)
            out.append((s.keys, s.released, lo, hi))
        info = IntervalInfo(level, "bootstrap", "estimate",
                            f"parametric bootstrap ({construction} construction{', one-sided at zero below the noise margin' if near_zero else ''}, {B} re-releases from the released "
                            f"values, noise {law.noise[max(law.noise)].describe()} per level as recorded, solver "
                            f"{law.solver} ({law.objective}))", B, None if seed is None else int(seed), construction)
        return out, info
    if method == "linf_bound":
        if implied:
            raise IntervalsUnsupported("linf_bound reports released nodes only")
        bounds = linf_bound(release, structure, level, law)
        out = [(np.asarray(lv.keys), np.asarray(lv.values), lo, hi) for lv, (lo, hi) in zip(release.levels, bounds, strict=True)]
        info = IntervalInfo(level, "linf_bound", "bound",
                            "paper 000 Thm 4's L-inf bound per node with the exact tail of the recorded noise law "
                            "(union bound over the sibling groups on the node's path): a guarantee")
        return out, info
    raise IntervalsUnsupported(f"{release.mechanism}: method {method!r} does not apply to a TopDown tree release "
                               "(use 'bootstrap' or 'linf_bound')")


def _census_wls(release: Any, level: float, mechanism: Any, domain: Any) -> tuple[pd.DataFrame, IntervalInfo]:
    """Normal-approximation intervals from the Census TopDown's real-valued-step covariances."""
    from statistics import NormalDist

    from hierdp.intervals.census import census_topdown_covariances
    from hierdp.mechanisms.census import CensusTopDown
    from hierdp.spines import Spine

    if not isinstance(mechanism, CensusTopDown) or not isinstance(domain, Spine):
        raise IntervalsUnsupported("method 'wls' on a histogram release is the Census TopDown's: pass "
                                   "mechanism= (the CensusTopDown) and domain= (its spine)")
    values = np.asarray(release.values, dtype=np.float64)
    if domain.n != values.shape[0]:
        raise IntervalsUnsupported(f"the spine has {domain.n} geounits, the release {values.shape[0]}")
    V = census_topdown_covariances(mechanism, domain, values.shape[1])
    sd = np.sqrt(np.maximum(np.einsum("nkk->nk", V), 0.0)).ravel()
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    frame = release.to_frame()
    v = values.ravel()
    frame["lower"] = np.floor(np.maximum(v - z * sd, 0.0)).astype(np.int64)
    frame["upper"] = np.ceil(v + z * sd).astype(np.int64)
    return frame, IntervalInfo(level, "wls", "estimate",
                               "exact variances of the TopDown's real-valued step (top-down pass), normal "
                               "approximation; non-negativity and rounding not modelled")


def intervals(release: Any, level: float = 0.9, *, method: str = "auto", draws: int | None = None,
              seed: Any = None, progress: bool = False, domain: Any = None, mechanism: Any = None,
              construction: str = "hull", near_zero: bool = True) -> pd.DataFrame:
    """The release's frame (``release.to_frame()``) with ``lower`` and ``upper`` columns.

    Args:
        release: any hierdp release.
        level: the nominal two-sided level, e.g. 0.9.
        method: ``"auto"`` (the first valid method of the table in the module docstring),
            ``"bootstrap"``, ``"linf_bound"``, ``"noise"`` or ``"wls"``.
        draws: bootstrap re-releases (default: at least 10 per tail, 200 at 90 %).
        seed: seed of the bootstrap's simulation (its randomness is not privacy noise).
        progress: a tqdm bar over bootstrap draws.
        domain: the public structure the release was made from (TopDown: the tree; Census
            TopDown: the spine). Only its structure is read.
        mechanism: the mechanism that made a histogram release (group sizes, Census TopDown).
        construction: the bootstrap interval, ``"hull"`` (default), ``"basic"`` or ``"percentile"``
            (:mod:`hierdp.intervals.construct`).
        near_zero: the bootstrap's near-zero rule (default on): a node released below its level's
            noise-only margin m gets ``[0, max(upper, value + m)]``; such rows have ``near_zero``
            True (TopDown and group-size releases).

    Returns:
        the frame plus ``lower``, ``upper`` and ``interval`` (the method in words);
        ``attrs["intervals"]`` holds :class:`IntervalInfo` as a dict.

    Raises:
        ValueError: bad arguments. IntervalsUnsupported: no valid method for this release (or for
            the one asked), with the reason.
    """
    from hierdp.release import NodeHistogramRelease, SpatialRelease, TableRelease, TreeRelease

    lev, meth = _check(level, method, draws, construction)
    if (getattr(release.accounting, "details", None) or {}).get("constraints") is not None:
        # every method re-simulates or inverts the unconstrained post-processing; under public rows the
        # released values follow another law (rows move error between nodes)
        raise IntervalsUnsupported(f"{release.mechanism}: the release was post-processed under public constraints; "
                                   "its intervals would ignore the rows (not supported)")
    if isinstance(release, TreeRelease):
        per_level, info = tree_intervals(release, lev, method=meth, domain=domain, draws=draws, seed=seed,
                                         progress=progress, construction=construction, near_zero=near_zero)
        frame = release.to_frame()
        frame["lower"] = np.concatenate([lo for _, _, lo, _ in per_level]).astype(np.int64)
        frame["upper"] = np.concatenate([hi for _, _, _, hi in per_level]).astype(np.int64)
        if info.method == "bootstrap":
            from hierdp.intervals.construct import near_zero as low
            from hierdp.intervals.topdown import level_margins

            margins = level_margins(release, lev)
            frame["near_zero"] = low(frame["value"].to_numpy(), margins[frame["level"].to_numpy()]) \
                if near_zero else False
    elif isinstance(release, NodeHistogramRelease) and meth == "wls":
        frame, info = _census_wls(release, lev, mechanism, domain)
    elif isinstance(release, NodeHistogramRelease):
        if meth not in ("auto", "bootstrap"):
            raise IntervalsUnsupported(f"{release.mechanism}: histogram releases take method 'bootstrap' (and the "
                                       "Census TopDown 'wls')")
        from hierdp.intervals.histogram import simulate_histograms

        from hierdp.intervals.construct import near_zero as low
        from hierdp.intervals.histogram import histogram_margins

        B = int(draws) if draws is not None else draws_needed(lev)
        sims = simulate_histograms(release, mechanism, B, np.random.default_rng(seed), domain=domain,
                                   progress=progress)
        n, k = np.asarray(release.values).shape
        margin = histogram_margins(release, lev) if near_zero else None
        released = np.asarray(release.values).ravel()
        lo, hi = from_draws(released, sims.reshape(n * k, B), lev, construction=construction,
                            nonnegative=release.nonnegative, integer=release.integer, noise_margin=margin)
        frame = release.to_frame()
        frame["lower"], frame["upper"] = lo, hi
        frame["near_zero"] = low(released, margin)
        if release.integer:
            frame["lower"], frame["upper"] = frame["lower"].astype(np.int64), frame["upper"].astype(np.int64)
        info = IntervalInfo(lev, "bootstrap", "estimate",
                            f"parametric bootstrap ({construction} construction"
                            f"{', one-sided at zero below the noise margin' if margin is not None else ''}, {B} "
                            "re-releases of the mechanism's "
                            f"post-processing from the released values, noise as recorded)", B,
                            None if seed is None else int(seed), construction)
    elif isinstance(release, SpatialRelease):
        from hierdp.intervals.spatial import spatial_intervals

        lo, hi, desc, kind = spatial_intervals(release, lev, meth)
        frame = release.to_frame()
        frame["lower"], frame["upper"] = lo, hi
        info = IntervalInfo(lev, "noise" if kind == "exact" else "wls", kind, desc)
    elif isinstance(release, TableRelease) and release.mechanism == "SafeTab":
        if meth not in ("auto", "noise"):
            raise IntervalsUnsupported("SafeTab counts are not post-processed: method 'noise' (exact)")
        from hierdp.intervals.table import safetab_intervals

        lo, hi = safetab_intervals(release, lev)
        frame = release.to_frame().copy()
        frame["lower"], frame["upper"] = lo.astype(np.int64), hi.astype(np.int64)
        info = IntervalInfo(lev, "noise", "exact", "the exact margin of each count's recorded noise law")
    else:
        raise IntervalsUnsupported(f"no interval method for {type(release).__name__} ({release.mechanism})")
    frame["interval"] = f"{info.method} ({info.kind})"
    frame.attrs["intervals"] = info.as_dict()
    log.info("intervals of %s: %s", release.mechanism, info.description)
    return frame
