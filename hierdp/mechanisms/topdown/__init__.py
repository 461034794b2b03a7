"""TopDown mechanisms of paper 000 and the TopDown algorithm they share.

* :mod:`.mechanism` - :class:`TopDownMechanism`: plan → per level expand, measure, post-process;
* :mod:`.plan` - how the budget is divided (uniform, proportions, geometric, per node);
* :mod:`.level_solver` - how a level is post-processed (any registered solver);
* :mod:`.inftda` - :class:`InfTDA` (Alg. 1 / 3, integer L∞ by IntOpt);
* :mod:`.tda` - :class:`TDA` (TDA_l2 with the paper's rounding, exact integer L2, TDA_linf);
* :mod:`.baselines` - :class:`VanillaGauss` and the stability histogram :class:`StabilityHistogram`.
"""

from hierdp.mechanisms.topdown.baselines import SH, StabilityHistogram, UniverseTooLarge, VanillaGauss, sh_threshold
from hierdp.mechanisms.topdown.mechanism import DEFAULT_SOLVERS, TopDownMechanism
from hierdp.mechanisms.topdown.inftda import InfTDA
from hierdp.mechanisms.topdown.level_solver import LevelSolver, check_level_solver
from hierdp.mechanisms.topdown.plan import BudgetPlan, GeometricPlan, PerNodePlan, ProportionsPlan, UniformPlan
from hierdp.mechanisms.topdown.tda import TDA

__all__ = [
           "DEFAULT_SOLVERS",
           "SH",
           "TDA",
           "BudgetPlan",
           "GeometricPlan",
           "InfTDA",
           "LevelSolver",
           "PerNodePlan",
           "ProportionsPlan",
           "StabilityHistogram",
           "TopDownMechanism",
           "UniformPlan",
           "UniverseTooLarge",
           "VanillaGauss",
           "check_level_solver",
           "sh_threshold",
]
