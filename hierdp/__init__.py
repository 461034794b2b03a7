"""hierdp: differentially private release of hierarchical counts.

Layers: :mod:`hierdp.hierarchy` (the counts), :mod:`hierdp.privacy` (noise and accounting),
:mod:`hierdp.models` (the declarative post-processing Problem), :mod:`hierdp.solvers` (plug-ins
chosen by name), :mod:`hierdp.mechanisms` (the papers' algorithms on one contract, by name:
``hierdp.mechanisms.create("inftda", epsilon=1, delta=1e-8)``), :mod:`hierdp.release` (what a
mechanism returns, with typed accounting), :mod:`hierdp.metrics`.

``import hierdp`` is quick: every name below is imported when it is first used (numpy, pandas,
scipy and the solver back ends load with the layer that needs them). Library code logs through
:mod:`logging` (logger ``"hierdp"``); only the command line prints.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from hierdp._version import __version__

if TYPE_CHECKING:  # the names, for type checkers and editors
    from hierdp import mechanisms, plot
    from hierdp.comparison import compare
    from hierdp.constraints import Constraints
    from hierdp.hierarchy import Hierarchy, HierarchyError, ODTree
    from hierdp.mechanisms import Mechanism, ReleaseAborted
    from hierdp.models import Problem, ProblemError
    from hierdp.privacy import Accountant, Budget, make_rng
    from hierdp.privacy.unit import PrivacyUnit
    from hierdp.release import Accounting, BaseRelease, TableRelease, TreeRelease, load_release
    from hierdp.solvers import available, solve

logging.getLogger(__name__).addHandler(logging.NullHandler())

#: name -> the module it lives in (imported on first use)
_LAZY = {
    "Accountant": "hierdp.privacy",
    "Accounting": "hierdp.release",
    "BaseRelease": "hierdp.release",
    "Budget": "hierdp.privacy",
    "Constraints": "hierdp.constraints",
    "Hierarchy": "hierdp.hierarchy",
    "HierarchyError": "hierdp.hierarchy",
    "Mechanism": "hierdp.mechanisms",
    "ODTree": "hierdp.hierarchy",
    "PrivacyUnit": "hierdp.privacy.unit",
    "Problem": "hierdp.models",
    "ProblemError": "hierdp.models",
    "ReleaseAborted": "hierdp.mechanisms",
    "TableRelease": "hierdp.release",
    "TreeRelease": "hierdp.release",
    "available": "hierdp.solvers",
    "compare": "hierdp.comparison",
    "load_release": "hierdp.release",
    "make_rng": "hierdp.privacy",
    "solve": "hierdp.solvers",
}
_SUBMODULES = ("mechanisms", "plot", "metrics", "datasets", "hierarchy", "privacy", "models", "solvers",
               "release", "scale", "spines", "constraints", "intervals")

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
    "load_release",
    "make_rng",
    "mechanisms",
    "plot",
    "solve",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"hierdp.{name}")
    else:
        raise AttributeError(f"module 'hierdp' has no attribute {name!r}")
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
