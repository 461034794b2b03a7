"""Paper 001 exactness, on hundreds of instances: M_DP and the chain dynamic program against brute force
(tiny hierarchies) and the exact HiGHS / CP-SAT MIPs (small random hierarchies: K up to 20, depth
up to 4, noisy targets including negative ones); every DP release consistent, valid and faithful.

Oracles: enumeration of Model 1's feasible set (every non-negative leaf assignment summing to G);
the ``highs`` plug-in (QP centre + exact PWL-epigraph MIP) and the ``ortools`` plug-in (CP-SAT);
for the chain dynamic program, Model 3's objective evaluated on the enumerated Model 1 points (tiny) and the
chain problem solved by CP-SAT with the implied bounds ``0 <= s <= G`` (small).

Run: ``python -m experiments.paper001_pgsr.exactness [--tiny 300] [--small 300]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hierdp
from hierdp.datasets.group_sizes import random_count_of_counts
from hierdp.mechanisms import create
from hierdp.mechanisms.pgsr import MDynProg, MH, ChainDynProg, chain_problem

from experiments.paper001_pgsr.oracles import chain_coordinates, feasible_set, model1_bruteforce


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", type=int, default=300)
    ap.add_argument("--small", type=int, default=300)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(2024)
    t0 = time.perf_counter()
    tiny = {"M_DP vs brute force": [0, 0], "chain dynamic program vs brute force": [0, 0]}
    while tiny["M_DP vs brute force"][0] < args.tiny:
        data = random_count_of_counts(rng, depth=int(rng.integers(1, 3)), max_fanout=2, K=int(rng.integers(1, 4)),
                                      max_groups_per_leaf=2)
        leaves = int((data.regions.n_children == 0).sum())
        if leaves * data.K > 8 or data.G > 6:
            continue
        parent = [int(p) for p in data.regions.parent]
        noisy = data.by_size + rng.integers(-3, 4, data.by_size.shape)
        _, info = MDynProg(epsilon=1).post_process(data, noisy)
        tiny["M_DP vs brute force"][0] += 1
        tiny["M_DP vs brute force"][1] += info["objective"] != model1_bruteforce(parent, noisy.T, data.G)
        coords = chain_coordinates(parent, data.h)
        t = np.array([s for _, s in coords[:-1]], float) + rng.integers(-3, 4, len(coords) - 1)
        best = min(float(((np.array([s for _, s in chain_coordinates(parent, h)[:-1]]) - t) ** 2).sum())
                   for h in feasible_set(parent, data.K, data.G))
        tgt = np.zeros((data.K, data.n_regions))
        for ((k, r), _), val in zip(coords[:-1], t, strict=False):
            tgt[k - 1, r] = val
        _, cinfo = ChainDynProg(epsilon=1, measure="level_vector").post_process(data, tgt, [1.0] * data.n_levels)
        tiny["chain dynamic program vs brute force"][0] += 1
        tiny["chain dynamic program vs brute force"][1] += abs(cinfo["objective"] - best) > 1e-9
    small = {"M_DP vs HiGHS MIP": [0, 0], "M_DP vs CP-SAT": [0, 0], "chain dynamic program vs CP-SAT": [0, 0]}
    negative = 0
    releases = [0, 0]
    sizes = []
    while sum(v[0] for v in small.values()) < args.small:
        depth = int(rng.integers(1, 5))
        K = int(rng.integers(1, 21))
        data = random_count_of_counts(rng, depth=depth, max_fanout=2 if depth > 2 else 3, K=K, max_groups_per_leaf=2)
        if data.n_regions * K > 150:
            continue
        scale = float(rng.choice([0.5, 2.0, 6.0]))
        noisy = data.by_size + np.round(rng.laplace(0, scale, data.by_size.shape)).astype(np.int64)
        negative += int((noisy < 0).any())
        sizes.append((depth, K, 1 + K * data.n_regions))
        _, a = MDynProg(epsilon=1).post_process(data, noisy)
        which = ["M_DP vs HiGHS MIP", "M_DP vs CP-SAT", "chain dynamic program vs CP-SAT"][len(sizes) % 3]
        if which == "chain dynamic program vs CP-SAT":
            lv = np.cumsum(noisy, axis=0)
            p, _ = chain_problem(data, lv)
            mine = hierdp.solve(p, solver="chain").objective
            bounded = hierdp.models.Problem(p.parent, p.target, fixed=p.fixed, objective="l2",
                                            upper=np.full(p.n, float(data.G)))
            bounded.add_constraints(p.constraints.matrix, p.constraints.lower, p.constraints.upper)
            ref = hierdp.solve(bounded, solver="ortools").objective
            ok = abs(mine - ref) <= 1e-6
        else:
            solver = "highs" if which == "M_DP vs HiGHS MIP" else "ortools"
            try:
                _, b = MH(epsilon=1, solver=solver, time_limit=120).post_process(data, noisy)
            except Exception as exc:
                print(f"  ({which}: skipped one instance: {str(exc)[:100]})")
                continue
            ok = abs(a["objective"] - b["objective"]) <= 1e-6
        small[which][0] += 1
        small[which][1] += not ok
        if len(sizes) % 10 == 0:  # a full release now and then: its promises hold exactly
            for name in ("pgsr_mdp", "pgsr_chain_dp", "pgsr_cumulative_dp", "pgsr_topdown"):
                rel = create(name, epsilon=0.5).release(data, seed=len(sizes))
                releases[0] += 1
                releases[1] += bool(rel.check_consistency())
    print(f"exactness oracles ({time.perf_counter() - t0:.0f} s)")
    for k, (n, bad) in {**tiny, **small}.items():
        print(f"  {k:<26} {n:4d} instances, {bad} mismatches")
    print(f"  small instances: depth 1-{max(s[0] for s in sizes)}, K 1-{max(s[1] for s in sizes)}, "
          f"up to {max(s[2] for s in sizes)} nodes; {negative} with negative noisy counts")
    print(f"  full releases checked (consistent, non-negative integers, every level sums to G): {releases[0]}, "
          f"{releases[1]} violations")


if __name__ == "__main__":
    main()
