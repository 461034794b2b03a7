"""highs: certified presolve with fallback, named infeasibility, hard time limits, recentring."""

import time

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem, get
from hierdp.solvers import highs as highs_mod
from hierdp.solvers._deadline import DeadlineExceeded
from hierdp.solvers.intopt import linf_optimum


def random_level(seed: int, groups: int = 40):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 11, groups)
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = rng.integers(0, 200, groups).astype(float)
    return np.repeat(totals / sizes, sizes) + rng.normal(0, 10, offsets[-1]), offsets, totals


def test_integer_linf_levels_use_certified_presolve(monkeypatch):
    x, offsets, totals = random_level(0)
    p = Problem.from_groups(x, offsets, totals, objective="linf")
    sol = hierdp.solve(p, solver="highs")
    assert sol.stats["presolve"] == "on"
    assert sol.objective == pytest.approx(linf_optimum(x, offsets, totals).sum(), rel=1e-12)
    # when the certificate rejects a batch, the batch is solved again with presolve off
    seen = []
    real_run = highs_mod._DirectRunner.run

    def spy(self, problem, arr, settings, deadline):
        seen.append(settings["presolve"])
        return real_run(self, problem, arr, settings, deadline)

    monkeypatch.setattr(highs_mod._DirectRunner, "run", spy)
    monkeypatch.setattr(highs_mod, "_batch_certified", lambda *a: False)
    again = hierdp.solve(p, solver="highs", batch_size=20)
    assert seen == ["on", "off", "on", "off"]
    assert again.objective == pytest.approx(sol.objective, rel=1e-12)
    # other MIPs keep presolve off (HiGHS 1.14 presolve bugs, no certificate)
    q = Problem.from_groups(x, offsets, totals, objective="l1")
    assert hierdp.solve(q, solver="highs").stats["presolve"] == "off"


def test_infeasible_names_the_constraint():
    p = Problem.from_groups([3.0, 4.0, 1.0, 2.0], [0, 2, 4], [10, 5])
    p.add_linear({3: 1, 4: 1}, lower=100, name="too big")
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(p, solver="highs")
    assert info.value.termination == "infeasible"
    assert "linear constraint too big" in info.value.message and "consistency of node 1" in info.value.message


def test_time_limited_solves_run_in_a_killable_worker_and_agree():
    from hierdp.solvers._deadline import worker

    x, offsets, totals = random_level(1, 10)
    p = Problem.from_groups(x, offsets, totals, objective="l1")
    hard = hierdp.solve(p, solver="highs", time_limit=60)
    soft = hierdp.solve(p, solver="highs", time_limit=60, hard_time_limit=False)
    assert hard.stats.get("hard_time_limit") and not soft.stats.get("hard_time_limit")
    assert hard.objective == pytest.approx(soft.objective, rel=1e-12)
    # hooks that cannot be pickled: HiGHS's own limit applies, in process
    p.on_pyomo_model(lambda m, prob: None)
    assert not hierdp.solve(p, solver="highs", time_limit=60).stats.get("hard_time_limit")
    w = worker()  # this thread's worker, the one the hard solve used
    assert w.alive
    with pytest.raises(ZeroDivisionError):
        w.call(divmod, (1, 0), timeout=60)  # errors come back as errors
    t0 = time.perf_counter()
    with pytest.raises(DeadlineExceeded):
        w.call(time.sleep, (30,), timeout=0.5)
    assert time.perf_counter() - t0 < 10 and not w.alive  # killed, not waited for


def test_recentred_paths_agree_at_large_counts():
    x, offsets, totals = random_level(2, 8)
    base = 2.0 ** 36
    sizes = np.diff(offsets)
    p = Problem.from_groups(x + base, offsets, totals + base * sizes, objective="l2")
    # the same deviations, exactly: (x + base) - base is exact, non-negativity cannot bind at 2^36
    small = Problem.from_groups((x + base) - base, offsets, totals, objective="l2", nonnegative=False)
    ref = hierdp.solve(small, solver="highs").objective
    for path in ("direct", "pyomo"):
        sol = hierdp.solve(p, solver="highs", path=path)
        assert sol.stats["recentred"]
        assert sol.objective == pytest.approx(ref, rel=1e-9, abs=1e-6)
    hooked = Problem.from_groups(x + base, offsets, totals + base * sizes, objective="l2")
    hooked.on_pyomo_model(lambda m, prob: None)
    assert any("hooks" in w for w in get("highs").unsupported(hooked))


def test_targets_far_from_any_consistent_point_are_refused():
    # noise of 10^9 around counts of 10^10: even recentred, HiGHS would see 10^9-sized numbers
    p = Problem.from_groups([1e10 + 3e9, 1e10 - 2e9], [0, 2], [2e10], objective="l1")
    assert any("consistent point" in w for w in get("highs").unsupported(p))
    with pytest.raises(UnsupportedProblem):
        hierdp.solve(p, solver="highs")


def test_the_worker_starts_without_the_whole_package():
    from hierdp.solvers._deadline import DeadlineWorker

    w = DeadlineWorker()  # a fresh one: this thread's worker may already have completed the package
    try:
        w.start()
        # the solver modules only: pandas (imported by hierdp/__init__ via metrics, datasets) is not
        loaded = w.call(eval, ("sorted(m for m in __import__('sys').modules if m in ('pandas', 'networkx'))",),
                        timeout=60)
        assert loaded == []
        # and the package completes itself when asked for something of its own (names load on first use)
        assert w.call(eval, ("__import__('hierdp').solve.__name__",), timeout=60) == "solve"
        assert w.call(eval, ("__import__('hierdp').Hierarchy.__name__",), timeout=60) == "Hierarchy"
        assert w.call(eval, ("'pandas' in __import__('sys').modules",), timeout=60)
    finally:
        w.kill()
