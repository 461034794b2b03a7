"""SafeTab (paper 004): adaptive tabulation of population groups.

* :mod:`.levels` - :class:`PopulationGroupLevel` (the input) and its validation against the data;
* :mod:`.mechanism` - :class:`SafeTab` (the mechanism);
* :mod:`.tabulate` - the adaptive tabulation of one level (Alg. 2);
* :mod:`.release` - :class:`SafeTabRelease`;
* :mod:`.guarantee` - its privacy in every calculus (exact RDP of the geometric mechanism), and
  the MOE → budget calibration of App. F.1;
* :mod:`.groups` - building population groups from geographies and race codes, and consistent
  post-processing of the totals over a geography.
"""

from hierdp.mechanisms.safetab.guarantee import (
    NOISES,
    PAPER_ALPHAS,
    SafeTabAccounting,
    level_budgets_for_moe,
    rdp_curve_geometric_levels,
    safetab_accounting,
)
from hierdp.mechanisms.safetab.groups import consistent_totals, geography_entities, population_groups, race_iterations
from hierdp.mechanisms.safetab.mechanism import (
    AGE_BINS,
    TABULATIONS,
    PopulationGroupLevel,
    SafeTab,
    SafeTabError,
    SafeTabRelease,
    StabilityError,
)

__all__ = [
    "AGE_BINS",
    "NOISES",
    "PAPER_ALPHAS",
    "TABULATIONS",
    "PopulationGroupLevel",
    "SafeTab",
    "SafeTabAccounting",
    "SafeTabError",
    "SafeTabRelease",
    "StabilityError",
    "consistent_totals",
    "geography_entities",
    "level_budgets_for_moe",
    "population_groups",
    "race_iterations",
    "rdp_curve_geometric_levels",
    "safetab_accounting",
]
