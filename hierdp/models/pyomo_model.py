"""Compatibility module: the solver-neutral arrays moved to :mod:`hierdp.models.arrays` and the Pyomo
builder to :mod:`hierdp.models.pyomo`; every public name stays importable from here."""

from hierdp.models.arrays import (
    MAX_PWL_PIECES,
    ModelArrays,
    ModelInfeasible,
    ModelTooLarge,
    anchor_values,
    batch_components,
    consistent_point,
    model_arrays,
    pwl_rows,
)
from hierdp.models.pyomo import build_pyomo_model, values_from_model

__all__ = ["MAX_PWL_PIECES", "ModelArrays", "ModelInfeasible", "ModelTooLarge", "anchor_values",
           "batch_components", "build_pyomo_model", "consistent_point", "model_arrays", "pwl_rows", "values_from_model"]
