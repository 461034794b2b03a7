"""Batches of the general solvers mapped over executors give the serial optimum."""

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers.intopt import linf_optimum


def level(n_groups: int = 60, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, n_groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    totals = rng.integers(0, 40, n_groups)
    noisy = rng.normal(3, 4, offsets[-1])
    return noisy, offsets, totals


@pytest.mark.parametrize("solver, objective", [("highs", "linf"), ("highs", "l2"), ("ortools", "linf")])
def test_executors_match_the_closed_form_optimum(solver, objective):
    noisy, offsets, totals = level()
    p = Problem.from_groups(noisy, offsets, totals, objective=objective)
    serial = hierdp.solve(p, solver, batch_size=7)
    with ThreadPoolExecutor(2) as ex:
        threaded = hierdp.solve(p, solver, batch_size=7, executor=ex, progress=True)
    with ProcessPoolExecutor(2) as ex:
        processes = hierdp.solve(p, solver, batch_size=7, executor=ex)
    assert serial.stats["batches"] == threaded.stats["batches"] == 9
    for sol in (threaded, processes):
        assert sol.objective == pytest.approx(serial.objective, rel=1e-9, abs=1e-9)
        assert p.violations(sol.values) == []
    if objective == "linf":  # independent oracle: the closed-form per-group integer optimum
        assert serial.objective == pytest.approx(linf_optimum(noisy, offsets, totals).sum(), rel=1e-9)


def test_executor_reports_infeasibility():
    noisy, offsets, totals = level(10)
    p = Problem.from_groups(noisy, offsets, totals, objective="l1")
    p.add_linear({int(p.n) - 1: 1.0}, lower=totals.max() + 100)  # a child above any parent total
    with ThreadPoolExecutor(2) as ex, pytest.raises(hierdp.solvers.SolverFailed, match="infeasible"):
        hierdp.solve(p, "highs", executor=ex)


def test_dask_cluster_executor():
    distributed = pytest.importorskip("distributed")
    noisy, offsets, totals = level(40)
    p = Problem.from_groups(noisy, offsets, totals, objective="linf")
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        sol = hierdp.solve(p, "ortools", batch_size=5, executor=client.get_executor())
    assert sol.objective == pytest.approx(linf_optimum(noisy, offsets, totals).sum(), rel=1e-9)
    assert p.violations(sol.values) == []
