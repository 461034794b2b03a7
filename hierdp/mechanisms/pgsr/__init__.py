"""Paper 001 (PGSR): private group-size (count-of-counts) releases over a region hierarchy.

* :mod:`.unit` - the neighbour relation and the sensitivities (Lemma 4: 2, Lemma 6: 1, the chain's
  level-wide vector: the number of regions of the level);
* :mod:`.transforms` - Γ, Γ⁻¹, level-wide running sums and the chain coordinates;
* :mod:`.base` - the shared flow (:class:`GroupSizeMechanism`: options, solver check, measurement,
  release);
* :mod:`.mechanisms` - :class:`MH` (exact or relaxed), :class:`MDynProg`, :class:`MHC` (exact or
  relaxed), :class:`CumulativeDynProg`, :class:`ChainDynProg`, :class:`GroupSizeTopDown`;
* :mod:`.problems` - Models 2 and 3 posed as Problems;
* :mod:`.topdown_tree` - the dynamic-programming hierarchy as a TopDown tree.

Data: :class:`hierdp.hierarchy.count_of_counts.CountOfCounts`. See ``docs/pgsr.md``.
"""

from hierdp.mechanisms.pgsr.base import GroupSizeMechanism
from hierdp.mechanisms.pgsr.mechanisms import MDynProg, MH, MHC, ChainDynProg, CumulativeDynProg, GroupSizeTopDown
from hierdp.mechanisms.pgsr.problems import chain_problem, cumulative_problem, prefix_problem
from hierdp.mechanisms.pgsr.unit import GroupSizeUnit

__all__ = [
    "MH",
    "MHC",
    "ChainDynProg",
    "CumulativeDynProg",
    "GroupSizeMechanism",
    "GroupSizeTopDown",
    "GroupSizeUnit",
    "MDynProg",
    "chain_problem",
    "cumulative_problem",
    "prefix_problem",
]
