"""Intervals of SafeTab releases (paper 004): exact, from the noise law of each released count.

SafeTab publishes noisy counts without post-processing. Each count is its true value plus one
draw of a recorded law (TotalOnly counts: the level's ``*_total_only`` parameter; Step-2 counts:
``*_step2``). Which tabulation a group gets depends on a separate Step-1 draw, independent of the
Step-2 noise, so given the tabulation the count's noise still has exactly that law: ``count ± m``
with ``m`` the exact margin at the level covers the true count with probability at least the level
(the ``moe`` column is the same at the release's ``moe_level``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.noise_law import law_from_details

__all__ = ["safetab_intervals"]


def safetab_intervals(release: Any, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` per row of a SafeTab release's frame.

    Raises:
        IntervalsUnsupported: a spend without the recorded noise parameters.
    """
    frame = release.frame
    by_level = {}
    for s in release.accounting.spends:
        if not s.label.startswith("level "):
            continue
        name = s.label[len("level "):]
        try:
            by_level[name] = (law_from_details(s.details, key_suffix="_total_only").margin(level),
                              law_from_details(s.details, key_suffix="_step2").margin(level))
        except ValueError as exc:
            raise IntervalsUnsupported(f"SafeTab level {name!r}: {exc}") from None
    names = frame["level"].astype(str).to_numpy()
    total_only = (frame["tabulation"].astype(str) == "total_only").to_numpy()
    missing = sorted(set(names) - set(by_level))
    if missing:
        raise IntervalsUnsupported(f"SafeTab: no recorded noise for level(s) {missing}")
    uniq, inv = np.unique(names, return_inverse=True)
    table = np.array([by_level[n] for n in uniq], dtype=np.float64).reshape(-1, 2)  # one row per level name
    m = table[inv.ravel(), np.where(total_only, 0, 1)]
    v = frame[release.value_column].to_numpy(dtype=np.float64)
    return v - m, v + m
