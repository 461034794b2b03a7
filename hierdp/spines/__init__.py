"""Geographic spines (paper 003): geounits over a block base with per-geounit privacy-loss budgets.

* :class:`Spine` (:mod:`.core`): geolevels, exact per-geolevel proportions β and per-geounit γ,
  the Theorem 3 path-sum check run after every operation.
* :class:`Entities` (:mod:`.entities`): off-spine entities as sets of blocks.
* :func:`osed` (:mod:`.osed`): the off-spine entity distance (eq. 20-23, Algorithm 1).
* :func:`optimize_block_groups`, :func:`optimize_tract_groups` (:mod:`.regroup`): Algorithm 2.
* :func:`bypass` (:mod:`.bypass`): Theorem 2 / Algorithm 3 (pure-DP and zCDP rules).
* :mod:`.matrices`: the matrix form of §3 (B, B ⊗ W, the strategy S̃) and the WLS variance
  V (S̃ᵀS̃)⁻¹ Vᵀ for small spines.
* :mod:`.variance`: the same WLS variance of every geounit's estimate by two passes over the
  geolevels (O(#geounits)), for large spines.

See ``docs/spines.md``.
"""

from hierdp.spines.bypass import bypass, bypass_condition_exact, bypass_condition_paper
from hierdp.spines.core import Spine, SpineError, as_fraction, parse_proportions
from hierdp.spines.entities import Entities
from hierdp.spines.osed import OsedTable, osed, osed_table
from hierdp.spines.regroup import block_group_max_size, lex_not_worse, optimize_block_groups, optimize_tract_groups

# the operations as methods too (spine.osed(...), spine.bypass(...), ...)
Spine.osed = osed  # type: ignore[attr-defined]
Spine.bypass = bypass  # type: ignore[attr-defined]
Spine.optimize_block_groups = optimize_block_groups  # type: ignore[attr-defined]
Spine.optimize_tract_groups = optimize_tract_groups  # type: ignore[attr-defined]

__all__ = [
           "Entities",
           "OsedTable",
           "Spine",
           "SpineError",
           "as_fraction",
           "block_group_max_size",
           "bypass",
           "bypass_condition_exact",
           "bypass_condition_paper",
           "lex_not_worse",
           "optimize_block_groups",
           "optimize_tract_groups",
           "osed",
           "osed_table",
           "parse_proportions",
]

from hierdp.spines.matrices import entity_rows, spine_matrix, strategy, wls_variance, workload

__all__ += ["entity_rows", "spine_matrix", "strategy", "wls_variance", "workload"]
from hierdp.spines.variance import (
    geounit_covariances,
    geounit_query_variances,
    geounit_variance_factors,
    unit_information,
)

__all__ += ["geounit_covariances", "geounit_query_variances", "geounit_variance_factors", "unit_information"]
