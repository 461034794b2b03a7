"""Per-node intervals for consistent integer releases, at no privacy cost (issue 23).

``hierdp.intervals.intervals(release, level=0.9, method="auto", ...)`` - or
``release.intervals(...)`` - returns the release's frame with ``lower`` / ``upper`` columns. The
intervals use only the release, the public noise law its accounting records, and public
structure: they are post-processing. Which method is valid for which release, and which are
guarantees rather than estimates: :mod:`hierdp.intervals.api` and docs/intervals.md.

Modules: :mod:`.noise_law` (the exact law of one measurement), :mod:`.construct` (intervals from
simulated re-releases), :mod:`.topdown` (the TopDown bootstrap, vectorized over draws),
:mod:`.linf_bound` (paper 000's bound), :mod:`.histogram` (group sizes, Census TopDown),
:mod:`.wls` (exact two-pass WLS variances), :mod:`.spatial`, :mod:`.table` (SafeTab),
:mod:`.api` (the entry point).
"""

from hierdp.intervals.api import PRIVACY_STATEMENT, IntervalInfo, intervals, tree_intervals
from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.noise_law import NoiseLaw

__all__ = ["PRIVACY_STATEMENT", "IntervalInfo", "IntervalsUnsupported", "NoiseLaw", "intervals", "tree_intervals"]
