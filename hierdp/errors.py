"""The root of every exception hierdp raises on purpose.

Each layer keeps its own family (``HierarchyError``, ``PrivacyError``, ``ProblemError``,
``SolverError``, ...), and every family inherits :class:`HierdpError`, so a caller (the CLI, a batch
script) can catch "anything hierdp refused or could not do" in one clause without also catching
programming errors (``TypeError``, ``AttributeError``) raised by bugs.
"""

from __future__ import annotations

__all__ = ["HierdpError"]


class HierdpError(Exception):
    """Base class of every hierdp error (a mixin: families also subclass ``ValueError`` or
    ``RuntimeError`` so existing ``except ValueError`` code keeps working)."""
