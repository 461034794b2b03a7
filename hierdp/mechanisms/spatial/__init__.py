"""Paper 002 (HTF): private spatial partitions of a grid of location counts, and the spatial baselines.

* :mod:`.htf` - :class:`HTF`, the homogeneous tree framework (height estimate, Alg. 1-3);
* :mod:`.baselines` - :class:`Identity` (Singular), :class:`Uniform`, :class:`UG`, :class:`AG`,
  :class:`QuadTree`, :class:`KdTree` (standard and hybrid), :class:`Privelet`;
* :mod:`.objective` - the homogeneity split objective (eq. 5) in exact integer arithmetic;
* :mod:`.budgets` - exact geometric (eq. 17) and uniform level budgets;
* :mod:`.consistency` - Hay et al.'s consistency as a hierdp Problem (solved by ``twopass``);
* :mod:`.trees` - quadtree / kd-tree construction and the private median.

Every mechanism takes a :class:`~hierdp.hierarchy.spatial.SpatialGrid` and returns a
:class:`~hierdp.release.spatial.SpatialRelease` (see ``docs/spatial.md``).
"""

from hierdp.mechanisms.spatial.baselines import AG, UG, Identity, KdTree, Privelet, QuadTree, Uniform
from hierdp.mechanisms.spatial.htf import HTF

__all__ = ["AG", "HTF", "UG", "Identity", "KdTree", "Privelet", "QuadTree", "Uniform"]
