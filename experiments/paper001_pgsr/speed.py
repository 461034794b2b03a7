"""Paper 001 speed claims, in one run: census-like M_DP in under a minute, and M_DP against the
exact MIP and the relaxed QP on the same instances.

1. The census-like hierarchy (1 → 52 → 3,144, K = 1,000, 3.2 M nodes): one noisy measurement
   at ε = 1 (ε/3 per level, sensitivity 2), then every post-processing on that same vector:
   M_DP (cost-table dynamic program), the approximate cumulative DP and the chain dynamic program (on their own
   measurements), the relaxation by PDLP (the OP baseline's QP), and the exact HiGHS MIP
   (refused or stopped at ``--mip-limit``).
2. Census-shaped instances small enough for the exact MIP (1 → 6 → 30 regions, K ∈ {5, 10, 20},
   a few thousand households): M_DP, the exact HiGHS MIP, the exact CP-SAT model and HiGHS's
   continuous QP on the same noisy vector; objectives must agree; ratios printed.

Run: ``python -m experiments.paper001_pgsr.speed`` (``--mip-limit`` seconds per exact solve).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from experiments.common import peak_rss_mb
from hierdp.datasets.group_sizes import census_like
from hierdp.mechanisms.pgsr import MDynProg, MH, ChainDynProg, CumulativeDynProg
from hierdp.mechanisms.pgsr.transforms import cumulative
from hierdp.privacy import samplers
from hierdp.privacy.budget import Budget
from hierdp.privacy.calibration import laplace_scale


def _noisy(data, eps: float, sens: int, seed: int, cum: bool = False) -> tuple[np.ndarray, list[float]]:
    rng = np.random.default_rng(seed)
    scale = laplace_scale(Budget.pure(eps).split_uniform(data.n_levels)[0], sens)
    true = cumulative(data.by_size) if cum else data.by_size
    return true + samplers.discrete_laplace(scale, true.shape, rng), [scale] * data.n_levels


def _timed(fn, *a):
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mip-limit", type=float, default=600.0)
    ap.add_argument("--skip-census", action="store_true")
    args = ap.parse_args(argv)

    if not args.skip_census:
        print("1. census-like: nation -> 52 states -> 3,144 counties, K = 1,000, eps = 1")
        (data, t_gen) = _timed(census_like, 0)
        print(f"   {data}; nodes {1 + data.K * data.n_regions:,}; generated in {t_gen:.1f} s")
        noisy, scales = _noisy(data, 1.0, 2, 1)
        (vals, info), t_mdp = _timed(MDynProg(epsilon=1.0).post_process, data, noisy, scales)
        ok = (np.abs(vals.sum(axis=0)[:1] - data.G) == 0).all()
        print(f"   M_DP (costtable): {t_mdp:.2f} s post-processing, objective {info['objective']:.6g}, "
              f"faithful root {ok}; full release (measurement included): ", end="", flush=True)
        (_, t_rel) = _timed(MDynProg(epsilon=1.0).release, data)
        print(f"{t_rel:.2f} s  [{'under' if t_rel < 60 else 'OVER'} 60 s]")
        ncum, cscales = _noisy(data, 1.0, 1, 2, cum=True)
        (_, t_cum) = _timed(CumulativeDynProg(epsilon=1.0).post_process, data, ncum, cscales)
        (_, t_chain) = _timed(ChainDynProg(epsilon=1.0).post_process, data, ncum, cscales)
        print(f"   approx cumulative DP: {t_cum:.2f} s; chain dynamic program: {t_chain:.2f} s (post-processing)")
        try:
            (_rv, rinfo), t_qp = _timed(MH(epsilon=1.0, relaxed=True, solver="pdlp", time_limit=args.mip_limit)
                                       .post_process, data, noisy, scales)
            print(f"   relaxed QP (PDLP, rel. tol. 1e-8): {t_qp:.1f} s, objective {rinfo['objective']:.6g} "
                  f"(<= M_DP's {info['objective']:.6g}); M_DP is {t_qp / t_mdp:.1f}x faster")
        except Exception as exc:
            print(f"   relaxed QP (PDLP): {type(exc).__name__}: {exc}")
        t0 = time.perf_counter()
        try:
            MH(epsilon=1.0, time_limit=args.mip_limit).post_process(data, noisy, scales)
            print(f"   exact MIP (HiGHS): finished in {time.perf_counter() - t0:.1f} s")
        except Exception as exc:
            print(f"   exact MIP (HiGHS): did not finish ({type(exc).__name__}: {str(exc)[:200]}) after "
                  f"{time.perf_counter() - t0:.1f} s")
        print(f"   peak resident memory so far: {peak_rss_mb():,.0f} MiB")

    print("\n2. census-shaped instances small enough for the exact MIP (1 -> 6 -> 30 regions), eps = 1")
    print(f"   {'K':>4} {'nodes':>6} {'G':>6} {'M_DP s':>8} {'MIP s':>8} {'ratio':>8} {'CP-SAT s':>9} {'ratio':>8} "
          f"{'QP s':>7} {'ratio':>7}  objectives")
    for K in (5, 10, 20):
        data = census_like(K, K=K, households=20 * K, n_states=6, n_counties=30, outlier_rate=0.0, min_households=2)
        noisy, scales = _noisy(data, 1.0, 2, K)
        (_, a), t_dp = _timed(MDynProg(epsilon=1.0).post_process, data, noisy, scales)
        row = [f"   {K:>4} {1 + K * data.n_regions:>6} {data.G:>6} {t_dp:>8.3f}"]
        objs = [a["objective"]]
        for solver in ("highs", "ortools"):
            try:
                (_, b), t = _timed(MH(epsilon=1.0, solver=solver, time_limit=args.mip_limit).post_process,
                                   data, noisy, scales)
                objs.append(b["objective"])
                row.append(f"{t:>8.2f} {t / t_dp:>7.0f}x")
            except Exception as exc:
                row.append(f"{'stopped':>8} {'':>8}")
                print(f"   ({solver}: {type(exc).__name__}: {str(exc)[:120]})")
        (_, q), t_qp = _timed(MH(epsilon=1.0, relaxed=True).post_process, data, noisy, scales)
        row.append(f"{t_qp:>7.2f} {t_qp / t_dp:>6.0f}x")
        same = all(abs(o - objs[0]) < 1e-6 for o in objs)
        row.append(f"  {'equal' if same else 'DIFFER'} ({objs[0]:.6g}; QP relaxation {q['objective']:.6g})")
        print(" ".join(row), flush=True)


if __name__ == "__main__":
    main()
