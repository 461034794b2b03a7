"""Accuracy metrics of releases, one module per release shape.

* :mod:`hierdp.metrics.tree` - tree releases (TopDown, baselines): max / mean absolute error, false
  discovery and false negative rates per level, :func:`level_report`.

* :mod:`hierdp.metrics.spatial` - spatial releases (paper 002): random rectangle / square workloads and
  the mean relative error with smoothing 20.

Papers add their own modules beside it (group-size histograms, ...).
"""

from hierdp.metrics import spatial

from hierdp.metrics.tree import (
    false_discovery_rate_by_level,
    false_negative_rate_by_level,
    level_errors,
    level_report,
    max_abs_error_by_level,
    mean_abs_error_by_level,
    runtime_by_level,
)

__all__ = [
    "level_errors", "max_abs_error_by_level", "mean_abs_error_by_level", "false_discovery_rate_by_level",
    "false_negative_rate_by_level", "runtime_by_level", "level_report", "spatial",
]
