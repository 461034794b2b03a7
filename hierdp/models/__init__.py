"""The declarative post-processing problem (:mod:`~hierdp.models.problem`), its vectorized blocks
(:mod:`~hierdp.models.blocks`), its solver-neutral arrays (:mod:`~hierdp.models.arrays`) and its
translation to Pyomo (:mod:`~hierdp.models.pyomo`, imported lazily: it needs pyomo)."""

from hierdp.models.blocks import LinearConstraint, LinearRows, QueryTerms
from hierdp.models.problem import FEATURES, OBJECTIVES, Problem, ProblemError

__all__ = ["FEATURES", "OBJECTIVES", "LinearConstraint", "LinearRows", "Problem", "ProblemError", "QueryTerms"]
