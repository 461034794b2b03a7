"""The Census-style TopDown (paper 003's spines with the DAS's post-processing): a histogram per
geounit, marginal query strategies with exact shares, per-geounit budgets from a
:class:`~hierdp.spines.Spine`, weighted least squares then an integer rounder per parent.

* :class:`QueryStrategy` (:mod:`.strategy`), :class:`SpineHistograms` and :class:`CensusTopDown`
  (:mod:`.mechanism`), the per-parent chunks and their problem kinds (:mod:`.problems`, at home in
  :mod:`hierdp.models.histogram`), the solve of a chunk (:mod:`.level_solver`), the 2020 PL 94-171
  strategy (:mod:`.pl94`);
* :class:`NoisyMeasurements` (:mod:`.measurements`: measurements files) and
  :class:`CensusPostProcess` (:mod:`.postprocess`: the post-processing of given measurements).
"""

from hierdp.mechanisms.census.measurements import MeasurementsError, NoisyMeasurements
from hierdp.mechanisms.census.mechanism import CensusTopDown, SpineHistograms
from hierdp.mechanisms.census.postprocess import CensusPostProcess
from hierdp.mechanisms.census.problems import LevelChunk, continuous_problem, rounding_problem
from hierdp.mechanisms.census.pl94 import pl94_strategy
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
           "pl94_strategy",
           "rounding_problem",
]
