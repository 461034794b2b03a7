"""Paper 001, Fig. 7: runtime against the number of sizes K, with a timeout per cell.

Data: the taxi-like hierarchy (NYC → 6 boroughs → 263 zones, 13,282 taxis) for K ∈ {10, 50, 100,
500, 1000, 5000, 13282}. The paper removed the groups above K from its taxi data; our taxi-like
sizes have a median near 1,300, so removal would leave almost nothing at small K: instead each K
regenerates the 13,282 sizes with a lognormal of median K/7.4 capped at K (same regions, same
seed), so every K has the same number of groups. One noisy measurement per K at ε = 1. Post-processing methods: the exact
M_H through HiGHS (PWL-epigraph MIP) and CP-SAT, the exact M_HC through HiGHS, the relaxation
(HiGHS QP, the OP baseline), M_DP (cost-table dynamic program), the approximate cumulative DP and the chain dynamic program.
A method that fails or exceeds ``--timeout`` at some K is not run at larger K (marked ``timeout``
or with its refusal).

Outputs: ``results/pgsr_fig7_runtime_vs_k.csv`` and ``pgsr_fig7_runtime_vs_k.png`` (log-y).
Run: ``python -m experiments.paper001_pgsr.runtime_vs_k [--timeout 120] [--ks 10,50,100]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table
from hierdp.datasets.group_sizes import taxi_like
from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.mechanisms.pgsr import MDynProg, MH, MHC, ChainDynProg, CumulativeDynProg
from hierdp.mechanisms.pgsr.transforms import cumulative
from hierdp.privacy import samplers
from hierdp.privacy.budget import Budget
from hierdp.privacy.calibration import laplace_scale

METHODS = {
    "M_H exact (HiGHS MIP)": (lambda t: MH(epsilon=1, solver="highs", time_limit=t), False),
    "M_H exact (CP-SAT)": (lambda t: MH(epsilon=1, solver="ortools", time_limit=t), False),
    "M_HC exact (HiGHS MIP)": (lambda t: MHC(epsilon=1, solver="highs", time_limit=t), True),
    "M~_H relaxation (HiGHS QP)": (lambda t: MH(epsilon=1, relaxed=True, time_limit=t), False),
    "M_DP (costtable)": (lambda t: MDynProg(epsilon=1, time_limit=t), False),
    "approx DP cumulative": (lambda t: CumulativeDynProg(epsilon=1, time_limit=t), True),
    "chain dynamic program": (lambda t: ChainDynProg(epsilon=1), True),
}


def sized(K: int) -> CountOfCounts:
    """13,282 taxis over the taxi-like regions with sizes spread over 1..K (median about K/7.4)."""
    return taxi_like(0, K=K, mean_log=float(np.log(K)) - 2.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="10,50,100,500,1000,5000,13282")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    rows, dead = [], {}
    for K in [int(k) for k in args.ks.split(",")]:
        data = sized(K)
        rng = np.random.default_rng(K)
        scale_h = laplace_scale(Budget.pure(1.0).split_uniform(3)[0], 2)
        scale_c = laplace_scale(Budget.pure(1.0).split_uniform(3)[0], 1)
        noisy_h = data.by_size + samplers.discrete_laplace(scale_h, data.by_size.shape, rng)
        noisy_c = cumulative(data.by_size) + samplers.discrete_laplace(scale_c, data.by_size.shape, rng)
        print(f"K = {K}: {data.G:,} groups, {1 + K * data.n_regions:,} nodes", flush=True)
        for name, (make, cum) in METHODS.items():
            if name in dead:
                rows.append({"K": K, "method": name, "seconds": np.nan, "status": f"skipped ({dead[name]} at smaller K)"})
                continue
            t0 = time.perf_counter()
            try:
                make(args.timeout).post_process(data, noisy_c if cum else noisy_h, [scale_c if cum else scale_h] * 3)
                sec, status = time.perf_counter() - t0, "ok"
                if sec > args.timeout:
                    status = "timeout"
            except Exception as exc:
                sec = time.perf_counter() - t0
                msg = str(exc)
                status = "timeout" if "time" in msg.lower() and "limit" in msg.lower() else f"refused/failed: {msg[:90]}"
            if status != "ok":
                dead[name] = "timeout" if status == "timeout" else "refused"
            rows.append({"K": K, "method": name, "seconds": sec if status == "ok" else np.nan, "status": status})
            print(f"   {name:<28} {sec:9.2f} s  {status}", flush=True)
    df = pd.DataFrame(rows)
    RESULTS.mkdir(exist_ok=True)
    df.to_csv(RESULTS / "pgsr_fig7_runtime_vs_k.csv", index=False)
    print(format_table(df.pivot_table(index="method", columns="K", values="seconds", sort=False).reset_index(), "{:,.2f}"))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, part in df.groupby("method", sort=False):
        ax.plot(part.K, part.seconds, marker="o", label=name)
    ax.axhline(args.timeout, color="grey", linestyle=":", label=f"timeout {args.timeout:g} s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of sizes K")
    ax.set_ylabel("seconds")
    ax.set_title("Fig. 7 - post-processing runtime vs K (taxi-like, eps = 1)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "pgsr_fig7_runtime_vs_k.png", dpi=110)
    print(f"wrote {RESULTS / 'pgsr_fig7_runtime_vs_k.csv'} and .png")


if __name__ == "__main__":
    main()
