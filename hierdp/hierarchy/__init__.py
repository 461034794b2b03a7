"""Hierarchies of counts: the :class:`Hierarchy` type, its builders and its error family.

A :class:`Hierarchy` is a rooted tree (user view: a ``networkx.DiGraph``) with a consistent,
non-negative integer count on every node, compiled once to arrays in a canonical order where
levels and sibling groups are contiguous index ranges. Build one with
:meth:`Hierarchy.from_frame`, :meth:`Hierarchy.from_edges`, :meth:`Hierarchy.from_graph` or
:meth:`Hierarchy.from_arrays`.

Every tree says where its set of nodes came from (``domain_source``: ``"declared"`` public
structure or ``"observed"`` from the rows, see :mod:`hierdp.hierarchy.domain`); mechanisms refuse
an observed domain unless the user stated it is public.

Origin/destination data become an implicit :class:`~hierdp.hierarchy.od.ODTree` (children generated
only for surviving nodes, true counts in sparse tables); both kinds serve TopDown mechanisms through
the :mod:`~hierdp.hierarchy.topdown_tree` protocol. Paper 000's generators are in
:mod:`~hierdp.datasets.flows`.
"""

from hierdp.hierarchy.core import Hierarchy
from hierdp.hierarchy.errors import (
    CountError,
    CycleError,
    EmptyInputError,
    HierarchyError,
    InconsistentCountError,
    MissingValueError,
    MultipleParentsError,
    NotATreeError,
    UnknownColumnError,
    UnknownLevelError,
    UnknownNodeError,
)
from hierdp.hierarchy.geography import Geography
from hierdp.hierarchy.od import ODTree

__all__ = [
    "CountError",
    "CycleError",
    "EmptyInputError",
    "Geography",
    "Hierarchy",
    "HierarchyError",
    "InconsistentCountError",
    "MissingValueError",
    "MultipleParentsError",
    "NotATreeError",
    "ODTree",
    "UnknownColumnError",
    "UnknownLevelError",
    "UnknownNodeError",
]
