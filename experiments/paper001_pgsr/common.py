"""What the paper-001 experiments share: the mechanism line-up (Table 7's rows), one measured run,
the paper's Table 7, and the chain calibration that is *not* differentially private (shown only to
explain the paper's chain rows, decision A1)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.mechanisms import create
from hierdp.mechanisms.pgsr import ChainDynProg
from hierdp.mechanisms.pgsr.transforms import level_vectors
from hierdp.metrics.histogram import constraint_violations, faithfulness_violations, l1_error_by_level
from hierdp.privacy import samplers
from hierdp.privacy.calibration import laplace_scale
from hierdp.privacy.budget import Budget


@dataclass(frozen=True)
class Row:
    """One mechanism of the line-up: a label, a registered name and its options."""

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    op: bool = False  # an OP (relaxed) baseline: slow at scale, optional
    not_dp: bool = False  # the sensitivity-1 chain calibration: NOT differentially private


LINEUP = [
    Row("M~_H (relaxed+round)", "pgsr_mh_relaxed", {"solver": "pdlp"}, op=True),
    Row("M_DP", "pgsr_mdp"),
    Row("M~_HC (relaxed+round)", "pgsr_mhc_relaxed", {"solver": "pdlp"}, op=True),
    Row("approx DP cumulative", "pgsr_cumulative_dp"),
    Row("chain DP (per-region, Model 3)", "pgsr_chain_dp"),
    Row("chain DP (per-region, inv-var)", "pgsr_chain_dp", {"weighting": "inverse_variance"}),
    Row("chain DP (level vector, m_l)", "pgsr_chain_dp", {"measure": "level_vector", "weighting": "inverse_variance"}),
    Row("chain DP, sensitivity 1 [NOT DP]", "chain_not_dp", not_dp=True),
    Row("TopDown", "pgsr_topdown"),
]

#: Table 7 of the paper (rows mapped as in the notes): (eps, row) -> (taxi L1, L2, L3, #CV, census L1, L2, L3, #CV)
PAPER_TABLE7 = {
    (0.1, "M~_H"): (25.4, 158.7, 904.4, 18206, 40.3, 54.3, 802.1, 1966),
    (0.1, "M_DP"): (26.6, 121.9, 915.7, 0, 10.3, 38.4, 825.4, 0),
    (0.1, "M~_HC"): (47.9, 153.2, 551.6, 19460, 23.1, 64.5, 632.2, 1715),
    (0.1, "approx DP cum."): (19.9, 65.6, 644.3, 0, 0.9, 23.2, 550.6, 0),
    (0.1, "chain DP"): (5.5, 39.3, 537.8, 0, 0.2, 13.9, 603.0, 0),
    (0.1, "TopDown"): (26.6, 93.0, 809.1, 0, 3.7, 35.0, 820.5, 0),
    (0.5, "M~_H"): (8.6, 81.2, 364.2, 18591, 39.4, 37.9, 216.3, 1990),
    (0.5, "M_DP"): (5.5, 31.0, 408.9, 0, 2.4, 9.4, 230.8, 0),
    (0.5, "M~_HC"): (46.7, 153.5, 450.7, 19531, 23.1, 61.0, 494.2, 1718),
    (0.5, "approx DP cum."): (4.0, 16.4, 352.9, 0, 0.2, 5.8, 159.1, 0),
    (0.5, "chain DP"): (1.2, 9.5, 150.6, 0, 0.0, 3.4, 165.3, 0),
    (0.5, "TopDown"): (5.3, 20.3, 242.1, 0, 0.9, 8.6, 228.4, 0),
    (1.0, "M~_H"): (7.7, 77.2, 279.0, 18085, 40.7, 39.2, 130.0, 1989),
    (1.0, "M_DP"): (3.1, 19.8, 328.5, 0, 1.2, 5.1, 128.8, 0),
    (1.0, "M~_HC"): (47.1, 154.2, 447.1, 19706, 24.1, 63.0, 494.5, 1728),
    (1.0, "approx DP cum."): (2.0, 8.7, 307.8, 0, 0.1, 3.2, 91.0, 0),
    (1.0, "chain DP"): (0.5, 4.5, 78.6, 0, 0.0, 1.7, 86.9, 0),
    (1.0, "TopDown"): (2.6, 10.3, 138.4, 0, 0.5, 4.6, 127.2, 0),
}
#: which of our rows each paper row corresponds to
PAPER_ROW_OF = {"M~_H (relaxed+round)": "M~_H", "M_DP": "M_DP", "M~_HC (relaxed+round)": "M~_HC",
                "approx DP cumulative": "approx DP cum.", "chain DP (per-region, Model 3)": "chain DP",
                "TopDown": "TopDown"}


def chain_not_dp(data: CountOfCounts, epsilon: float, seed: int) -> np.ndarray:
    """The chain mechanism with the level-wide vectors noised at sensitivity 1 (Lemma 6 misapplied).

    **Not ε-DP** (the true sensitivity is m_l): computed here only to show what such a calibration
    does to the chain rows of Table 7. Never offered by the library.
    """
    rng = np.random.default_rng(seed)
    L = data.n_levels
    scale = laplace_scale(Budget.pure(epsilon).split_uniform(L)[0], 1)
    true = level_vectors(data.by_size, data.regions.level_ptr)
    noisy = true + samplers.discrete_laplace(scale, true.shape, rng)
    values, _ = ChainDynProg(epsilon=epsilon, measure="level_vector").post_process(data, noisy, [scale] * L)
    return values.T


def run_row(row: Row, data: CountOfCounts, epsilon: float, seed: int, *, time_limit: float | None = None
            ) -> tuple[pd.DataFrame, float, Any]:
    """One release of one row: per-level metrics (a frame), seconds, and the release (None for the
    not-DP row)."""
    t0 = time.perf_counter()
    if row.not_dp:
        values = chain_not_dp(data, epsilon, seed)
        seconds = time.perf_counter() - t0
        from hierdp.release.histogram import NodeHistogramRelease

        rel = NodeHistogramRelease(names=data.regions.names, parent=data.regions.parent, level=data.regions.level,
                                   level_names=list(data.regions.level_names), cells=data.sizes, values=values,
                                   accounting=None, mechanism=row.label, level_totals=data.G, cell_name="size")
    else:
        opts = dict(row.options)
        if time_limit is not None:
            opts["time_limit"] = time_limit
        rel = create(row.name, epsilon=epsilon, **opts).release(data, seed=seed)
        seconds = time.perf_counter() - t0
    df = l1_error_by_level(rel, data)
    df.insert(0, "mechanism", row.label)
    df["epsilon"] = epsilon
    df["seed"] = seed
    df["seconds"] = seconds
    df["cv"] = constraint_violations(rel)
    df["faithfulness_violations"] = faithfulness_violations(rel, data.G)
    df["consistent_valid_faithful"] = (not rel.check_consistency()) and df["cv"].iloc[0] == 0 \
        and df["faithfulness_violations"].iloc[0] == 0
    df["not_dp"] = row.not_dp
    return df, seconds, rel
