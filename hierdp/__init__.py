"""hierdp: differentially private release of hierarchical counts.

Layers: :mod:`hierdp.hierarchy` (the counts), :mod:`hierdp.privacy` (noise and accounting),
:mod:`hierdp.models` (the declarative post-processing Problem), :mod:`hierdp.solvers` (plug-ins
chosen by name), :mod:`hierdp.mechanisms` (the papers' algorithms).
"""

from hierdp.models import Problem, ProblemError
from hierdp.solvers import available, solve

__version__ = "0.1.0"
__all__ = ["Problem", "ProblemError", "available", "solve", "__version__"]
