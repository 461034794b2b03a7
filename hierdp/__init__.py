"""hierdp: differentially private release of hierarchical counts.

Layers: :mod:`hierdp.hierarchy` (the counts), :mod:`hierdp.privacy` (noise and accounting),
:mod:`hierdp.models` (the declarative post-processing Problem), :mod:`hierdp.solvers` (plug-ins
chosen by name), :mod:`hierdp.mechanisms` (the papers' algorithms on one contract, by name:
``hierdp.mechanisms.create("inftda", epsilon=1, delta=1e-8)``), :mod:`hierdp.release` (what a
mechanism returns, with typed accounting), :mod:`hierdp.metrics`.

Solver back ends (highspy, ortools, pyomo) are imported only when a plug-in that needs them runs.
"""

from hierdp.constraints import Constraints
from hierdp.hierarchy import Hierarchy, HierarchyError, ODTree
from hierdp.models import Problem, ProblemError
from hierdp.privacy import Accountant, Budget, make_rng
from hierdp.privacy.unit import PrivacyUnit
from hierdp.solvers import available, solve
from hierdp import mechanisms
from hierdp.mechanisms import Mechanism, ReleaseAborted
from hierdp.release import Accounting, BaseRelease, TableRelease, TreeRelease
from hierdp.comparison import compare
from hierdp import plot  # matplotlib is imported only when a figure is drawn

__version__ = "0.1.0"
__all__ = [
           "Accountant",
           "Accounting",
           "BaseRelease",
           "Budget",
           "Constraints",
           "Hierarchy",
           "HierarchyError",
           "Mechanism",
           "ODTree",
           "PrivacyUnit",
           "Problem",
           "ProblemError",
           "ReleaseAborted",
           "TableRelease",
           "TreeRelease",
           "__version__",
           "available",
           "compare",
           "make_rng",
           "mechanisms",
           "plot",
           "solve",
]
