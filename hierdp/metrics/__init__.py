"""Accuracy metrics of releases, one module per release shape.

* :mod:`hierdp.metrics.tree` - tree releases (TopDown, baselines): max / mean absolute error, false
  discovery and false negative rates per level, :func:`level_report`.
* :mod:`hierdp.metrics.spatial` - spatial releases (paper 002): random rectangle / square workloads and
  the mean relative error with smoothing 20.
* :mod:`hierdp.metrics.histogram` - histogram-per-node releases (group sizes): L1 error per level,
  #CV and faithfulness violations.
* :mod:`hierdp.metrics.intervals` - coverage and width of a release's intervals against the truth.
"""

from hierdp.metrics import spatial
from hierdp.metrics.intervals import interval_coverage_by_level
from hierdp.metrics.histogram import constraint_violations, histogram_report, l1_error_by_level
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
    "constraint_violations",
    "false_discovery_rate_by_level",
    "false_negative_rate_by_level",
    "histogram_report",
    "interval_coverage_by_level",
    "l1_error_by_level",
    "level_errors",
    "level_report",
    "max_abs_error_by_level",
    "mean_abs_error_by_level",
    "runtime_by_level",
    "spatial",
]
