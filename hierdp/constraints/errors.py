"""Errors of constraint sets: bad input (named by entry and line), and sets that cannot hold."""

from __future__ import annotations

from collections.abc import Sequence

from hierdp.errors import HierdpError

__all__ = ["ConstraintError", "ConstraintsInfeasible"]


class ConstraintError(HierdpError, ValueError):
    """A constraint set is malformed, or does not fit the tree it is resolved against.

    The message names the entry (its name, and its line when it was read from a file) and what is
    wrong with it: an unknown node or level, a NaN or non-integer number, a duplicate name, ...
    Raised before any noise is drawn.
    """


class ConstraintsInfeasible(ConstraintError):
    """The constraints cannot all hold.

    Before any noise (on the tree's public structure) or, level by level, after a level's noise
    (the rows of a coarser level were already fixed). ``entries`` names an irreducible subset of
    the user's entries that cannot hold together (removing any one of them makes the rest
    feasible), when it could be computed; ``groups`` are the positions of the failing groups in
    the solved batch (the engine names their parents).
    """

    def __init__(self, message: str, *, entries: Sequence[str] = (), groups: Sequence[int] | None = None,
                 level: int | None = None) -> None:
        super().__init__(message)
        self.entries = tuple(entries)
        self.groups = None if groups is None else list(groups)
        self.level = level

    def __reduce__(self) -> tuple:  # travels back from worker processes with its attributes
        return (_rebuild, (str(self), self.entries, self.groups, self.level))


def _rebuild(message: str, entries: tuple[str, ...], groups: list[int] | None, level: int | None
             ) -> ConstraintsInfeasible:
    return ConstraintsInfeasible(message, entries=entries, groups=groups, level=level)
