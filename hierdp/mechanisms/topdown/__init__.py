"""TopDown mechanisms of paper 000 and their engine.

* :mod:`.engine` - :class:`TopDownMechanism`: plan → per level expand, measure, post-process;
* :mod:`.plan` - how the budget is divided (uniform, proportions, geometric, per node);
* :mod:`.noise` - how a level's noise is drawn (discrete Gaussian / zCDP, geometric / pure DP);
* :mod:`.level_solver` - how a level is post-processed (any registered solver);
* :mod:`.inftda` - :class:`InfTDA` (Alg. 1 / 3, integer L∞ by IntOpt);
* :mod:`.tda` - :class:`TDA` (TDA_l2 with the paper's rounding, exact integer L2, TDA_linf);
* :mod:`.baselines` - :class:`VanillaGauss` and the stability histogram :class:`StabilityHistogram`.

``hierdp.mechanisms.topdown.InfTDA`` and the other names of the old single module still import
from here (``PrivacySpec``, ``level_sensitivity_sq`` and ``guarantee_text`` now live in
:mod:`hierdp.privacy`).
"""

from hierdp.mechanisms.topdown.baselines import SH, StabilityHistogram, UniverseTooLarge, VanillaGauss, sh_threshold
from hierdp.mechanisms.topdown.mechanism import DEFAULT_SOLVERS, TopDownMechanism
from hierdp.mechanisms.topdown.inftda import InfTDA
from hierdp.mechanisms.topdown.level_solver import LevelSolver, check_level_solver
from hierdp.privacy.noise import DiscreteGaussianNoise, GeometricNoise, NoiseModel
from hierdp.mechanisms.topdown.plan import BudgetPlan, GeometricPlan, PerNodePlan, ProportionsPlan, UniformPlan
from hierdp.mechanisms.topdown.tda import TDA
from hierdp.privacy.spec import PrivacySpec, guarantee_text
from hierdp.privacy.unit import level_sensitivity_sq

__all__ = [
           "DEFAULT_SOLVERS",
           "SH",
           "TDA",
           "BudgetPlan",
           "DiscreteGaussianNoise",
           "GeometricNoise",
           "GeometricPlan",
           "InfTDA",
           "LevelSolver",
           "NoiseModel",
           "PerNodePlan",
           "PrivacySpec",
           "ProportionsPlan",
           "StabilityHistogram",
           "TopDownMechanism",
           "UniformPlan",
           "UniverseTooLarge",
           "VanillaGauss",
           "check_level_solver",
           "guarantee_text",
           "level_sensitivity_sq",
           "sh_threshold",
]
