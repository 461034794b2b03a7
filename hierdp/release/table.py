"""A release that is a table of counts (SafeTab's population groups; a histogram per node).

A :class:`TableRelease` is a tidy frame, one row per released count, plus the typed accounting.
It promises less than a tree: counts are integers, but different rows need not add up (paper
004's SafeTab is "No Consistency"). What a table does promise is declared by its subclass in
:meth:`TableRelease.check_consistency` (e.g. one tabulation per population group, complete cell
sets); post-processing into consistent totals is a separate step
(:func:`hierdp.mechanisms.safetab.groups.consistent_totals`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hierdp.release.base import BaseRelease

__all__ = ["TableRelease"]


@dataclass(kw_only=True, eq=False)
class TableRelease(BaseRelease):
    """A table of released counts.

    Attributes:
        frame: one row per released count; ``value_column`` holds the count.
        accounting: a :class:`~hierdp.release.accounting.Accounting`.
        mechanism: the mechanism's name.
        params: the mechanism's parameters.
        timings: seconds per phase.
        value_column: the column of released counts.
    """

    frame: pd.DataFrame
    accounting: Any
    mechanism: str = "table"
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    value_column: str = "value"

    def to_frame(self) -> pd.DataFrame:
        """The released table (the frame itself, not a copy: it can be large)."""
        return self.frame

    def check_consistency(self) -> list[str]:
        """Every released count is a finite integer (subclasses add their own invariants)."""
        if self.value_column not in self.frame.columns:
            return [f"the table has no {self.value_column!r} column"]
        v = self.frame[self.value_column]
        if not pd.api.types.is_integer_dtype(v.dtype):
            return [f"column {self.value_column!r} is not integer ({v.dtype})"]
        return []

    #: fields that travel as the table, the accounting and the parameters, not in the structure
    _SAVED_ELSEWHERE = frozenset({"frame", "accounting", "params", "timings"})

    def _saved_structure(self) -> dict[str, Any]:
        from hierdp.release.encoding import encode

        return {f.name: encode(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in self._SAVED_ELSEWHERE}

    @classmethod
    def _from_saved(cls, frame: pd.DataFrame, structure: dict[str, Any], *, accounting: Any,
                    params: dict[str, Any], tables: dict[str, pd.DataFrame]) -> TableRelease:
        return cls(frame=frame, accounting=accounting, params=params, **structure)

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(mechanism={self.mechanism!r}, rows={len(self.frame):,}, "
                f"guarantee={self.guarantee!r})")


