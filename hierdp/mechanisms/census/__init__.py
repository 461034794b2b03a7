"""The Census-style TopDown (paper 003's spines with the DAS's post-processing): a histogram per
geounit, marginal query strategies with exact shares, per-geounit budgets from a
:class:`~hierdp.spines.Spine`, weighted least squares then an integer rounder per parent.

* :class:`QueryStrategy` (:mod:`.strategy`), :class:`SpineHistograms` and :class:`CensusTopDown`
  (:mod:`.mechanism`), the per-parent :class:`~hierdp.models.Problem`\\ s (:mod:`.problems`);
* :class:`NoisyMeasurements` (:mod:`.measurements`: measurements files) and
  :class:`CensusPostProcess` (:mod:`.postprocess`: the post-processing of given measurements).
"""

from hierdp.mechanisms.census.measurements import MeasurementsError, NoisyMeasurements
from hierdp.mechanisms.census.mechanism import CensusTopDown, SpineHistograms
from hierdp.mechanisms.census.postprocess import CensusPostProcess
from hierdp.mechanisms.census.problems import LevelChunk, continuous_problem, rounding_problem
from hierdp.mechanisms.census.strategy import QueryStrategy

__all__ = [
           "CensusPostProcess",
           "CensusTopDown",
           "LevelChunk",
           "MeasurementsError",
           "NoisyMeasurements",
           "QueryStrategy",
           "SpineHistograms",
           "continuous_problem",
           "rounding_problem",
]
