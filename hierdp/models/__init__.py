"""The declarative post-processing problem and its translation to Pyomo."""

from hierdp.models.problem import OBJECTIVES, LinearConstraint, Problem, ProblemError

__all__ = ["OBJECTIVES", "LinearConstraint", "Problem", "ProblemError"]
