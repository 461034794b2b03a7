"""Who is protected in a group-size release, and how far one person moves each measured vector.

Neighbour relation (paper 001 Def. 1 with Lemma 4's reading; decision A2 of the notes): two
datasets are neighbours when they differ by **one person added to or removed from an existing
group**. No group is created or deleted and no group moves region, so the list of groups, each
group's region, the total ``G`` and every regional total ``G_r`` are public; sizes stay in
``1..K`` (a move that would leave this range is outside the relation; with top-coding, size ``K``
means "K or more" and a move inside it changes nothing).

Sensitivities (L1, of one region level's vector; each is checked by enumerating every neighbour of
small datasets in ``tests/mechanisms/pgsr/test_unit.py``):

=======================================================  ==============================
vector measured at one level                             L1 sensitivity
=======================================================  ==============================
the histograms ``h[r, k]`` of every region (Lemma 4)     2 (bucket k loses, k+1 gains)
per-region cumulative counts ``Γ(h_r)_k`` (Lemma 6)      1 (only ``Γ_k`` of one region)
the level-wide cumulative of §9.2.1 (the chain's)        ``m_ℓ``, the number of regions
=======================================================  ==============================

The last row is **not** 1: the chain's running sum over all regions of a level, in size-major
order, moves at every position from ``(k, r)`` up to (excluding) ``(k+1, r)`` - exactly ``m_ℓ``
entries. A calibration to sensitivity 1 (Lemma 6 applied to that vector) would not be ε-DP; hierdp
never uses it (decision A1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hierdp.privacy.unit import PrivacyUnit

__all__ = ["CUMULATIVE_L1", "HISTOGRAM_L1", "GroupSizeUnit", "level_vector_l1"]

#: Lemma 4: L1 sensitivity of a level's histograms
HISTOGRAM_L1 = 2
#: Lemma 6: L1 sensitivity of a level's per-region cumulative vectors
CUMULATIVE_L1 = 1


def level_vector_l1(m_regions: int) -> int:
    """L1 sensitivity of the level-wide cumulative vector (§9.2.1) over ``m_regions`` regions."""
    return int(m_regions)


@dataclass(frozen=True)
class GroupSizeUnit(PrivacyUnit):
    """The group-size neighbour relation (see the module docstring).

    ``bounded`` is True in the sense TopDown uses it: the root total ``G`` is public and not
    measured. :meth:`l1_sensitivity` is Lemma 4's 2 (the TopDown engine calibrates its geometric
    noise with it on the dynamic-programming hierarchy, where a move changes two nodes of a level by one each).
    """

    record: str = "person"

    @property
    def neighbours(self) -> str:
        return "group-size neighbours (one person added to or removed from an existing group, its size staying " \
               "in 1..K; groups, their regions and G public)"

    def describe(self) -> str:
        return self.neighbours

    def l1_sensitivity(self) -> int:
        return HISTOGRAM_L1

    def l2_sensitivity_sq(self, *, finest: bool = True) -> int:
        return 2  # two cells change by one

    def linf_sensitivity(self, *, finest: bool = True) -> int:
        return 1

    def count_sensitivity(self) -> int:
        return 0  # G is public

    def cumulative_l1_sensitivity(self) -> int:
        """Lemma 6: per-region cumulative vectors of a level."""
        return CUMULATIVE_L1

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "neighbours": "group_member"}
