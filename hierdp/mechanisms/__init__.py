"""End-to-end mechanisms from the papers.

* TopDown for hierarchies and origin/destination trees (paper 000): :class:`InfTDA`, :class:`TDA`;
  baselines :class:`VanillaGauss` and the stability histogram :class:`StabilityHistogram` (``SH``).
* SafeTab adaptive tabulation of population groups (paper 004): :func:`safetab`.
"""

from hierdp.mechanisms.baselines import SH, StabilityHistogram, VanillaGauss
from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTabError, SafeTabRelease, safetab
from hierdp.mechanisms.topdown import TDA, InfTDA

__all__ = ["InfTDA", "TDA", "VanillaGauss", "StabilityHistogram", "SH",
           "safetab", "PopulationGroupLevel", "SafeTabRelease", "SafeTabError"]
