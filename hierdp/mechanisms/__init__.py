"""End-to-end mechanisms of the papers, one subpackage per family, on one contract.

* :mod:`.base` - the contract every mechanism follows (:class:`Mechanism`: build with a privacy
  spec, ``release(data, seed= | rng= | secure=, accountant=)`` → a release with typed accounting)
  and :class:`ReleaseAborted`;
* :mod:`.registry` - name → constructor (``create("inftda", epsilon=1, delta=1e-8)``), used by
  the CLI and the experiments;
* :mod:`.topdown` - paper 000: the TopDown engine (budget plan, noise model, level solver),
  :class:`InfTDA`, :class:`TDA`, and the flat baselines :class:`VanillaGauss`,
  :class:`StabilityHistogram` (``SH``);
* :mod:`.safetab` - paper 004: :class:`SafeTab` adaptive tabulation of population groups.

Group sizes (paper 001), spatial trees (paper 002) and Census spines (paper 003) land here as
``pgsr/``, ``spatial/`` and ``census/`` on the same contract.
"""

from hierdp.mechanisms import registry
from hierdp.mechanisms.base import Mechanism, MechanismError, MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.registry import create, describe, get, names, register
from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTab, SafeTabError, SafeTabRelease
from hierdp.mechanisms.spatial import AG, HTF, UG, Identity, KdTree, Privelet, QuadTree, Uniform
from hierdp.mechanisms.topdown import SH, TDA, InfTDA, StabilityHistogram, TopDownMechanism, VanillaGauss

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
           "names",
           "register",
           "registry",
]
