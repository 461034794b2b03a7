"""What SafeTab returns: a tidy table of noisy counts with margins of error, and its accounting."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hierdp.mechanisms.safetab.guarantee import SafeTabAccounting
from hierdp.release.table import TableRelease

__all__ = ["SafeTabRelease"]


@dataclass(kw_only=True, eq=False, repr=False)
class SafeTabRelease(TableRelease):
    """A SafeTab release: the tidy table, its accounting and the run's parameters.

    ``frame`` columns: ``run`` (only with ``repetitions``), ``level``, ``group``, ``tabulation``
    (``total_only`` or one of :data:`TABULATIONS`), ``cell`` (``"total"`` or
    ``"<sex>|<age bin>"``), ``sex``, ``age``, ``noisy_count``, ``moe`` (margin of error at
    ``moe_level``), ``noise_parameter`` (the count's epsilon or rho), and ``true_count`` only
    when asked for (never publish it).
    """

    accounting: SafeTabAccounting
    noise: str
    gamma: float
    thresholds: tuple[float, float, float]
    moe_level: float
    mechanism: str = "SafeTab"
    value_column: str = "noisy_count"

    def check_consistency(self) -> list[str]:
        """What SafeTab promises (it does not promise additivity, paper 004's "No Consistency"):
        integer counts; one tabulation per (run, level, group); each tabulation's complete cell set."""
        bad = super().check_consistency()
        f = self.frame
        keys = [c for c in ("run", "level", "group") if c in f.columns]
        tabs = f.groupby(keys, observed=True)["tabulation"].nunique()
        if (tabs > 1).any():
            bad.append(f"group {tabs.index[int(np.argmax(tabs.to_numpy() > 1))]!r} has more than one tabulation")
        sizes = f.groupby([*keys, "tabulation"], observed=True).size().reset_index(name="cells")
        bins = self.params.get("age_bins", {})
        n_sex = len(self.params.get("sex_values", []))
        expected = {"total": 1, "total_only": 1,
                    **{f"sex_{k}": n_sex * len(v) for k, v in bins.items()}}
        want = sizes["tabulation"].astype(str).map(expected)
        wrong = sizes[want.to_numpy() != sizes["cells"].to_numpy()]
        if len(wrong):
            r = wrong.iloc[0]
            bad.append(f"group {r['group']!r} ({r['tabulation']}) has {int(r['cells'])} cells, expected "
                       f"{int(expected.get(str(r['tabulation']), -1))}")
        return bad
