"""Old import path of paper 000's flat baselines; they live in :mod:`hierdp.mechanisms.topdown.baselines`."""

from hierdp.mechanisms.topdown.baselines import SH, StabilityHistogram, UniverseTooLarge, VanillaGauss, sh_threshold

__all__ = ["VanillaGauss", "StabilityHistogram", "SH", "UniverseTooLarge", "sh_threshold"]
