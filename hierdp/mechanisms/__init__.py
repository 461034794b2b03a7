"""End-to-end mechanisms of the papers, one subpackage per family, on one contract.

* :mod:`.base` - the contract every mechanism follows (:class:`Mechanism`: build with a privacy
  spec, ``release(data, seed= | rng= | secure=, accountant=)`` → a release with typed accounting),
  :class:`RunContext` (the one way to spend, measure, account and abort) and
  :class:`ReleaseAborted`;
* :mod:`.registry` - name → constructor and metadata (``create("inftda", epsilon=1, delta=1e-8)``,
  ``info(name).input``), used by the CLI, ``hierdp.compare`` and the experiments;
* :mod:`.testing` - :func:`~hierdp.mechanisms.testing.check_mechanism`, the contract as a check;
* :mod:`.topdown` (paper 000), :mod:`.pgsr` (paper 001), :mod:`.spatial` (paper 002),
  :mod:`.census` (paper 003), :mod:`.safetab` (paper 004).

The families are imported when one of their names is first used (``hierdp.mechanisms.InfTDA``),
not with this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hierdp.mechanisms import registry
from hierdp.mechanisms.base import Mechanism, MechanismError, MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.registry import create, describe, get, info, names, register

if TYPE_CHECKING:
    from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTab, SafeTabError, SafeTabRelease
    from hierdp.mechanisms.spatial import AG, HTF, UG, Identity, KdTree, Privelet, QuadTree, Uniform
    from hierdp.mechanisms.topdown import SH, TDA, InfTDA, StabilityHistogram, TopDownMechanism, VanillaGauss

#: name -> the family that defines it (imported on first use)
_LAZY = {
    **dict.fromkeys(("PopulationGroupLevel", "SafeTab", "SafeTabError", "SafeTabRelease"),
                    "hierdp.mechanisms.safetab"),
    **dict.fromkeys(("AG", "HTF", "UG", "Identity", "KdTree", "Privelet", "QuadTree", "Uniform"),
                    "hierdp.mechanisms.spatial"),
    **dict.fromkeys(("SH", "TDA", "InfTDA", "StabilityHistogram", "TopDownMechanism", "VanillaGauss"),
                    "hierdp.mechanisms.topdown"),
}

__all__ = [
           "AG",
           "HTF",
           "SH",
           "TDA",
           "UG",
           "Identity",
           "InfTDA",
           "KdTree",
           "Mechanism",
           "MechanismError",
           "MechanismParameterError",
           "PopulationGroupLevel",
           "Privelet",
           "QuadTree",
           "ReleaseAborted",
           "SafeTab",
           "SafeTabError",
           "SafeTabRelease",
           "StabilityHistogram",
           "TopDownMechanism",
           "Uniform",
           "VanillaGauss",
           "create",
           "describe",
           "get",
           "info",
           "names",
           "register",
           "registry",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'hierdp.mechanisms' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
