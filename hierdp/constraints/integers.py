"""The numbers of a constraint set on integer counts: integer coefficients and bounds, in exact ranges.

Every TopDown and group-size release is integer, so a constraint set bound to one must state
integers (a coefficient 0.5 or a bound 2.5 is refused rather than rounded), small enough that every
sum the solvers and the exact checks form stays exact.
"""

from __future__ import annotations

from typing import Any

from hierdp.constraints.entries import CellRule, Invariant, LinearRow, NodeBounds, entry_label
from hierdp.constraints.errors import ConstraintError

__all__ = ["MAX_BOUND", "MAX_COEFFICIENT", "check_numbers"]

#: largest |coefficient| of a row (products with counts below 2^52 stay exact in int64 sums)
MAX_COEFFICIENT = 2 ** 31
#: largest |bound| (float64 holds every integer up to 2^53)
MAX_BOUND = 2 ** 52


def check_numbers(e: Any) -> None:
    """Integer coefficients and bounds within the exact ranges (the counts are integers)."""
    nums: list[tuple[str, Any]] = []
    if isinstance(e, (LinearRow, CellRule)):
        for node, c in e.terms:
            if not isinstance(c, int):
                raise ConstraintError(f"{e.kind} {entry_label(e)}: coefficient {c} of {node!r} is not an integer (the "
                                      "counts are integers; scale the row to integer coefficients)")
            if abs(c) > MAX_COEFFICIENT:
                raise ConstraintError(f"{e.kind} {entry_label(e)}: coefficient {c} of {node!r} is beyond ±2^31")
        nums += [("lower bound", e.lower), ("upper bound", e.upper)]
    elif isinstance(e, NodeBounds):
        nums += [("lower bound", e.lower), ("upper bound", e.upper)]
    elif isinstance(e, Invariant):
        nums.append(("value", e.value))
    for what, v in nums:
        if v is None:
            continue
        if not isinstance(v, int):
            raise ConstraintError(f"{e.kind} {entry_label(e)}: {what} {v} is not an integer (the counts are integers)")
        if abs(v) > MAX_BOUND:
            raise ConstraintError(f"{e.kind} {entry_label(e)}: {what} {v} is beyond ±2^52 (not exact in float64)")
