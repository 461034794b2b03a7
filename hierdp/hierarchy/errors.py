"""The one exception family for bad hierarchy input.

Every error is a :class:`HierarchyError` (itself a ``ValueError``), so callers can catch the whole
family at once; the subclasses let tests and users react to one kind of problem. Messages always
name the offending node, column, row or value.
"""

from __future__ import annotations

from hierdp.errors import HierdpError


class HierarchyError(HierdpError, ValueError):
    """Base class: the input does not describe a valid hierarchy."""


class CycleError(HierarchyError):
    """The parent -> child edges contain a cycle (the message names a node on it)."""


class MultipleParentsError(HierarchyError):
    """A node has two different parents (the message names the node and both parents)."""


class CountError(HierarchyError):
    """A count is negative, non-integer, non-numeric, infinite, NaN or missing."""


class InconsistentCountError(HierarchyError):
    """A parent's count differs from the sum of its children's counts."""


class UnknownColumnError(HierarchyError):
    """A column named by the caller is not in the data frame."""


class EmptyInputError(HierarchyError):
    """No rows, no edges or no nodes were given."""


class NotATreeError(HierarchyError):
    """The structure has several roots or is disconnected."""


class MissingValueError(HierarchyError):
    """A level column of a data frame holds NaN / None (the message names column and row)."""


class UnknownNodeError(HierarchyError, KeyError):
    """A node name is not in the hierarchy (also a ``KeyError``, as for a mapping)."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes; keep the plain message.
        return Exception.__str__(self)


class UnknownLevelError(HierarchyError, KeyError):
    """A level name or number is not in the hierarchy (also a ``KeyError``)."""

    def __str__(self) -> str:
        return Exception.__str__(self)


__all__ = [
    "CountError",
    "CycleError",
    "EmptyInputError",
    "HierarchyError",
    "InconsistentCountError",
    "MissingValueError",
    "MultipleParentsError",
    "NotATreeError",
    "UnknownColumnError",
    "UnknownLevelError",
    "UnknownNodeError",
]
