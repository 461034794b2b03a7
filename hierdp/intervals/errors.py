"""The one error type of the intervals package."""

from __future__ import annotations

from hierdp.errors import HierdpError

__all__ = ["IntervalsUnsupported"]


class IntervalsUnsupported(HierdpError, ValueError):
    """No valid interval method exists for this release (or for the method asked), said before any
    simulation: the reason names what is missing (a public structure, a recorded noise law, ...)."""
