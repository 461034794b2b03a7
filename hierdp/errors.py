"""The root of every exception hierdp raises on purpose.

Each layer keeps its own family (``HierarchyError``, ``PrivacyError``, ``ProblemError``,
``SolverError``, ...), and every family inherits :class:`HierdpError`, so a caller (the CLI, a batch
script) can catch "anything hierdp refused or could not do" in one clause without also catching
programming errors (``TypeError``, ``AttributeError``) raised by bugs.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["HierdpError", "exact_number"]


class HierdpError(Exception):
    """Base class of every hierdp error (a mixin: families also subclass ``ValueError`` or
    ``RuntimeError`` so existing ``except ValueError`` code keeps working)."""


def exact_number(value: Any) -> str:
    """A number as a message quotes it: exactly, never rounded for display.

    Integers (and floats holding integers) print as integers (``1000013``, not ``1.00001e+06``:
    two different counts must never read the same); other floats print their shortest repr, which
    reads back to the same float; infinities and NaN as ``inf``, ``-inf``, ``nan``.
    """
    if isinstance(value, bool):
        return str(value)
    try:  # Python and numpy integers, exactly (float() would round beyond 2^53)
        return str(operator.index(value))
    except TypeError:
        pass
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if v == int(v):
        return str(int(v))
    return repr(v)
