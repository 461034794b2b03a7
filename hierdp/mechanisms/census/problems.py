"""The per-parent models of the Census-style TopDown: :class:`LevelChunk` and its Problem
translations live in :mod:`hierdp.models.histogram` (below the solver layer, so the histogram
plug-ins can read them); their names stay importable from here and from
:mod:`hierdp.mechanisms.census`."""

from hierdp.models.histogram import HistogramRounding, HistogramWLS, LevelChunk, continuous_problem, rounding_problem

__all__ = ["HistogramRounding", "HistogramWLS", "LevelChunk", "continuous_problem", "rounding_problem"]
