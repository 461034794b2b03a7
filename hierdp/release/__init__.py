"""Releases: what a mechanism returns, in one protocol for every shape of output.

* :class:`BaseRelease` - the protocol: ``to_frame()``, ``check_consistency()``, ``accounting``,
  ``accounting_text()``, ``guarantee``, ``mechanism``, ``params``, ``timings``.
* :class:`TreeRelease` and :class:`ReleaseLevel` - a private tree,
  level by level (TopDown, VanillaGauss, SH).
* :class:`TableRelease` - a table of counts (SafeTab).
* :class:`NodeHistogramRelease` - a histogram per node of a tree, consistent per cell (group sizes,
  attribute cells per geounit).
* :class:`SpatialRelease` and :class:`SpatialTree` - a partition of a point grid into rectangles
  with range queries (HTF and the spatial baselines, paper 002).
* :class:`Accounting` and :class:`Spend` - the typed accounting every release carries;
  :class:`~hierdp.privacy.spec.Guarantee` - one guarantee in one calculus.
* ``release.save(path)`` / :func:`load_release` - a release on disk: its table and, beside it, the
  accounting that travels with it (:mod:`hierdp.release.saved`).
"""

from hierdp.privacy.guarantees import Guarantee
from hierdp.release.accounting import Accounting, Spend
from hierdp.release.base import BaseRelease
from hierdp.release.histogram import NodeHistogramRelease
from hierdp.release.saved import ReleaseFileError, accounting_path, load_release, release_document
from hierdp.release.spatial import SpatialRelease, SpatialTree
from hierdp.release.table import TableRelease
from hierdp.release.tree import ReleaseLevel, TreeRelease

__all__ = [
           "Accounting",
           "BaseRelease",
           "Guarantee",
           "NodeHistogramRelease",
           "ReleaseFileError",
           "ReleaseLevel",
           "SpatialRelease",
           "SpatialTree",
           "Spend",
           "TableRelease",
           "TreeRelease",
           "accounting_path",
           "load_release",
           "release_document",
]
