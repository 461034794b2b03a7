"""The privacy unit: who is protected, and how far one person can move a histogram.

A :class:`PrivacyUnit` is one typed value for what papers spread over loose arguments:

* the neighbouring relation: **bounded** (substitution: one person's records are replaced by
  someone else's; the number of records ``n`` is public and fixed) or **unbounded** (add/remove
  one person; ``n`` is private);
* ``contributions`` ``m``: how many records (trips, rows) one person can own - a positive
  integer, refused otherwise (``2.7`` would silently become 2 and understate the noise);
* ``distinct``: whether a person's ``m`` records are declared to be distinct cells of the
  *finest* level (distinct finest origin/destination pairs, paper 000 §4.1).

From these follow the sensitivities of one level's histogram (every mechanism asks the unit,
never recomputes them):

=================  ====================================  ==========================
                   bounded                               unbounded
=================  ====================================  ==========================
L2² (squared)      2m² (2m at the finest level if        m² (m at the finest level
                   distinct)                             if distinct)
L1                 2m                                    m
L∞                 m (1 at the finest level if distinct) same
one count (total)  0 (n is public)                       m
=================  ====================================  ==========================

Why distinctness helps only at the finest level: two distinct finest pairs can share a coarser
cell, so above the finest level the worst case is a person's ``m`` records in one cell (paper
000 §4.1 states √(2m) for every level, which undercounts the coarser levels when m > 1). The
tests enumerate every neighbouring pair of tiny datasets and check each entry of this table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from hierdp.privacy.errors import PrivacyParameterError

__all__ = ["PrivacyUnit", "check_contributions"]


def check_contributions(value: object, name: str = "contributions") -> int:
    """``value`` as a positive ``int``; refuses non-integers (2.7), booleans, NaN and strings.

    An integral float (``2.0``) is accepted: it is the integer 2.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise PrivacyParameterError(f"{name} must be a positive integer (records per person), got {value!r}")
    if not isinstance(value, Integral):
        f = float(value)
        if not (math.isfinite(f) and f.is_integer()):
            raise PrivacyParameterError(
                f"{name} must be a positive integer (records per person), got {value!r}: a fractional "
                "count of records per person has no meaning, and rounding it down would understate the noise")
        value = int(f)
    m = int(value)
    if m < 1:
        raise PrivacyParameterError(f"{name} must be a positive integer (records per person), got {value!r}")
    return m


def _check_flag(value: object, name: str) -> bool:
    # bool, numpy bool, or the integers 0 / 1; anything else ("no", 2, None) is a mistake
    if type(value).__name__ not in ("bool", "bool_", "int") or value not in (0, 1):
        raise PrivacyParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


@dataclass(frozen=True)
class PrivacyUnit:
    """The neighbouring relation and the contribution bound of a release.

    Attributes:
        bounded: True for bounded (substitution) neighbours, n public; False for unbounded
            (add/remove) neighbours.
        contributions: m, records per person (a positive integer).
        distinct: a person's m records are distinct cells of the finest level.
        record: the noun used in guarantee texts ("record", "trip", "person").
    """

    bounded: bool = True
    contributions: int = 1
    distinct: bool = False
    record: str = "record"

    def __post_init__(self) -> None:
        object.__setattr__(self, "bounded", _check_flag(self.bounded, "bounded"))
        object.__setattr__(self, "contributions", check_contributions(self.contributions))
        object.__setattr__(self, "distinct", _check_flag(self.distinct, "distinct"))
        if not isinstance(self.record, str) or not self.record:
            raise PrivacyParameterError(f"record must be a non-empty noun, got {self.record!r}")

    # -- construction from a mechanism's keyword arguments --------------------------------------
    @classmethod
    def resolve(cls, unit: PrivacyUnit | None = None, *, bounded: bool = True, contributions: Any = 1,
                distinct: bool = False) -> PrivacyUnit:
        """``unit`` if given (then the loose keywords must be left at their defaults), else a unit
        built from ``bounded`` / ``contributions`` / ``distinct``."""
        if unit is None:
            return cls(bounded=bounded, contributions=contributions, distinct=distinct)
        if not isinstance(unit, PrivacyUnit):
            raise PrivacyParameterError(f"unit must be a hierdp.privacy.unit.PrivacyUnit, got {type(unit).__name__}")
        if (bounded, contributions, distinct) != (True, 1, False):
            raise PrivacyParameterError("give either unit= or bounded/contributions/distinct, not both")
        return unit

    # -- sensitivities (exact integers) ---------------------------------------------------------
    @property
    def m(self) -> int:
        """Records per person."""
        return self.contributions

    def l2_sensitivity_sq(self, *, finest: bool = True) -> int:
        """Squared L2 sensitivity of one level's histogram (see the module table)."""
        m = self.contributions
        base = m if (self.distinct and finest) else m * m
        return 2 * base if self.bounded else base

    def l2_sensitivity(self, *, finest: bool = True) -> float:
        """L2 sensitivity of one level's histogram."""
        return math.sqrt(self.l2_sensitivity_sq(finest=finest))

    def l1_sensitivity(self) -> int:
        """L1 sensitivity of one level's histogram: 2m (bounded) or m (unbounded), at every level."""
        return 2 * self.contributions if self.bounded else self.contributions

    def linf_sensitivity(self, *, finest: bool = True) -> int:
        """The most one cell can change: m, or 1 at the finest level for distinct records."""
        return 1 if (self.distinct and finest) else self.contributions

    def count_sensitivity(self) -> int:
        """Sensitivity of the total number of records: 0 (bounded: n is public) or m."""
        return 0 if self.bounded else self.contributions

    # -- words ----------------------------------------------------------------------------------
    @property
    def neighbours(self) -> str:
        """``"bounded neighbours (n public)"`` or ``"unbounded neighbours"``."""
        return "bounded neighbours (n public)" if self.bounded else "unbounded neighbours"

    def describe(self) -> str:
        """One phrase, the same in every guarantee: ``"bounded neighbours (n public), m=1 records per
        person"``."""
        kind = f"distinct {self.record}s" if self.distinct else f"{self.record}s"
        return f"{self.neighbours}, m={self.contributions} {kind} per person"

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form (for frames and JSON)."""
        return {"bounded": self.bounded, "contributions": self.contributions, "distinct": self.distinct,
                "record": self.record}
