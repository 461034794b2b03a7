"""Serial, chunked, process-pool and Dask releases with the same seed are identical.

The tree (4 x 5 x 6 x 7 = 840 leaves) is cut into several partitions per level (``partition_children``
small), so each engine splits every level differently; counter-based noise and independent groups
make the releases equal node for node, value for value, with equal accounting.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from hierdp.mechanisms import InfTDA, TDA, TopDownMechanism
from hierdp.mechanisms.topdown import PerNodePlan
from hierdp.privacy import Accountant, Budget
from hierdp.scale import DaskEngine, EngineError, ProcessEngine, SchedulerUnreachable, SerialEngine, partition_rows

from scale.scale_helpers import random_tree, same_levels

TREE = random_tree()


def _mechanisms():
    yield "inftda", lambda **kw: InfTDA(epsilon=1.0, delta=1e-8, **kw)
    yield "tda_l2_unbounded", lambda **kw: TDA("l2", epsilon=2.0, delta=1e-8, bounded=False, **kw)
    yield "geometric_l2", lambda **kw: TopDownMechanism(epsilon=1.5, noise="geometric", objective="l2", **kw)


MECHS = list(_mechanisms())


def _serial_and_chunked(make):
    serial = make().release(TREE, seed=11)
    chunked_mech = make()
    chunked_mech.chunk_children = 5  # many tiny chunks in this process
    chunked = chunked_mech.release(TREE, seed=11)
    return serial, chunked


def _check(reference, other):
    assert same_levels(reference, other)
    assert other.accounting.spends == reference.accounting.spends
    assert other.check_consistency() == []
    assert other.params == reference.params


@pytest.mark.parametrize("name,make", MECHS, ids=[m[0] for m in MECHS])
def test_process_pool_and_dask_releases_equal_the_serial_one(name, make, process_pool, dask_client):
    serial, chunked = _serial_and_chunked(make)
    _check(serial, chunked)
    assert sum(s.get("chunks", 0) for s in chunked.solver_stats) > 100
    pool = make(engine=ProcessEngine(process_pool, partition_children=40)).release(TREE, seed=11)
    _check(serial, pool)
    dask = make(engine=DaskEngine(dask_client, partition_children=40)).release(TREE, seed=11)
    _check(serial, dask)
    # several partitions at every level below the first two (one per worker at least)
    for st in (pool.solver_stats[3:], dask.solver_stats[3:]):
        assert all(s["partitions"] >= 3 for s in st)
    assert dask.solver_stats[-1]["engine"] == "dask"
    if name == "inftda":  # a different seed is a different release (the engines do not return a constant)
        other = make(engine=DaskEngine(dask_client, partition_children=40)).release(TREE, seed=12)
        assert not same_levels(serial, other)


def test_a_per_node_plan_with_a_lambda_travels_to_workers(dask_client, process_pool):
    # a per-node plan needs a solver that accepts unmeasured nodes: costtable (exact integer L2,
    # each group on its own, so every partition gives the same groups the same answers)
    tree = random_tree((3, 4, 4, 5), seed=4)
    names = np.asarray(tree.names)

    def fractions(level, keys):  # bypass every node whose name ends in .0 (path sums stay <= 1)
        return np.where(np.char.endswith(names[keys].astype(str), ".0"), 0.0, 0.25)

    def make(**kw):
        return TopDownMechanism(rho=2.0, objective="l2", solver="costtable",
                                plan=PerNodePlan(fractions, [0, .25, .5, .75, 1]), **kw)

    serial = make().release(tree, seed=2)
    _check(serial, make(engine=DaskEngine(dask_client, partition_children=20)).release(tree, seed=2))
    _check(serial, make(engine=ProcessEngine(process_pool, partition_children=20)).release(tree, seed=2))


def test_a_general_solver_group_by_group_gives_the_same_release_in_any_chunking():
    # docs/scale.md: a batched general solver may return another optimum of equal objective when its
    # batch changes; solved group by group (batch_size=1) its answers do not depend on the split.
    # Chunks of 2 children in this process split every level as differently as partitions would.
    tree = random_tree((3, 3, 4), seed=6)
    # L1 levels (HiGHS by default) often have many optima: the case the rule is for
    make = lambda: TopDownMechanism(rho=1.0, objective="l1", solver_options={"batch_size": 1})
    whole = make().release(tree, seed=8)
    chunked_mech = make()
    chunked_mech.chunk_children = 2
    chunked = chunked_mech.release(tree, seed=8)
    _check(whole, chunked)
    assert sum(s.get("chunks", 0) for s in chunked.solver_stats) > sum(s.get("chunks", 0) for s in whole.solver_stats)


def test_string_engines_and_executors_resolve():
    assert isinstance(InfTDA(epsilon=1.0, delta=1e-8).engine, SerialEngine)
    assert isinstance(InfTDA(epsilon=1.0, delta=1e-8, engine="processes", executor=3).engine, ProcessEngine)
    assert InfTDA(epsilon=1.0, delta=1e-8, engine="processes", executor=3).engine.workers == 3
    assert isinstance(InfTDA(epsilon=1.0, delta=1e-8, engine="dask").engine, DaskEngine)
    with pytest.raises(EngineError, match="engine must be one of"):
        InfTDA(epsilon=1.0, delta=1e-8, engine="spark")
    with pytest.raises(EngineError, match="executor= needs"):
        InfTDA(epsilon=1.0, delta=1e-8, executor=2)
    with pytest.raises(EngineError, match="Client, a LocalCluster or a scheduler address"):
        InfTDA(epsilon=1.0, delta=1e-8, engine="dask", executor=object())
    with pytest.raises(EngineError, match="partition_children"):
        DaskEngine(partition_children=0)


def test_a_thread_pool_runs_the_process_engine_path_too():
    serial = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=5)
    with ThreadPoolExecutor(2) as pool:
        engine = ProcessEngine(pool, partition_children=30)
        threaded = InfTDA(epsilon=1.0, delta=1e-8, engine=engine).release(TREE, seed=5)
    _check(serial, threaded)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_refused_before_any_noise(tmp_path):
    acct = Accountant(Budget.zcdp(1.0))
    mech = InfTDA(rho=0.5, engine=DaskEngine(f"tcp://127.0.0.1:{_free_port()}", connect_timeout=1))
    with pytest.raises(SchedulerUnreachable, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:"):
        mech.release(TREE, seed=1, accountant=acct, checkpoint=tmp_path / "ck")
    assert acct.spent.is_zero and acct.ledger == []
    assert not (tmp_path / "ck").exists()  # no checkpoint of a run that never started


def test_a_mechanism_that_cannot_be_pickled_is_refused_before_any_noise(process_pool):
    acct = Accountant(Budget.zcdp(1.0))
    with ThreadPoolExecutor(1) as inner:  # a solver option that cannot travel to another process
        mech = InfTDA(rho=0.5, solver="highs", solver_options={"executor": inner}, engine=ProcessEngine(process_pool))
        with pytest.raises(EngineError, match="cannot be pickled"):
            mech.release(TREE, seed=1, accountant=acct)
    assert acct.spent.is_zero


def test_partitions_are_contiguous_balanced_and_cover_every_parent():
    rows = np.arange(10, 1010)
    sizes = np.random.default_rng(0).integers(0, 20, rows.size)
    parts = partition_rows(rows, sizes, target_children=500, min_parts=2)
    np.testing.assert_array_equal(np.concatenate(parts), rows)
    weights = [np.maximum(sizes[p - 10], 1).sum() for p in parts]
    assert len(parts) == int(np.ceil(np.maximum(sizes, 1).sum() / 500))
    assert max(weights) <= 500 + 20  # a cut falls at most one parent past its target
    assert len(partition_rows(rows[:3], None, target_children=10 ** 6, min_parts=8)) == 3
    assert partition_rows(np.zeros(0, np.int64), None, target_children=5) == []


def test_the_default_dask_engine_runs_on_a_local_cluster_of_its_own():
    # engine="dask" with no scheduler: a LocalCluster made for the release (1 worker here), closed
    # after it; forked from the session's preloaded fork server so the worker starts quickly
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    from scale.conftest import _preload_the_fork_server

    _preload_the_fork_server()
    tree = random_tree((3, 4, 5), seed=7)
    mech = InfTDA(epsilon=1.0, delta=1e-8, engine="dask", executor=1)
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        rel = mech.release(tree, seed=3)
    _check(InfTDA(epsilon=1.0, delta=1e-8).release(tree, seed=3), rel)
    assert rel.solver_stats[-1]["engine"] == "dask"


# -- every mechanism that promises identical seeded releases on every engine ----------------------
def _with_caps(tree):
    """Public rows over TREE's leaves: a cap coupling two states' first children and a lower bound."""
    from hierdp.constraints import Constraints

    names = [str(n) for n in tree.names]
    leaf = [n for n in names if n.count(".") == 4]
    v = dict(zip(names, tree.counts.tolist(), strict=True))
    a, b = "r.0.0.0.0", "r.1.0.0.0"
    return (Constraints().add_linear({a: 1, b: 1}, upper=max(0, v[a] + v[b] - 5), name="cap")
            .add_bounds(leaf[7], lower=v[leaf[7]] + 3, name="floor"))


PROMISED = [
    ("inftda", lambda **kw: InfTDA(epsilon=1.0, delta=1e-8, **kw)),
    ("tda_l2", lambda **kw: TDA("l2", epsilon=1.0, delta=1e-8, **kw)),
    ("tda_l2_exact", lambda **kw: TDA("l2", epsilon=1.0, delta=1e-8, rounding="exact", **kw)),
    ("tda_linf", lambda **kw: TDA("linf", epsilon=1.0, delta=1e-8, **kw)),
    ("topdown_l1_highs", lambda **kw: TopDownMechanism(epsilon=1.0, noise="geometric", objective="l1", **kw)),
    ("topdown_l2_highs", lambda **kw: TopDownMechanism(rho=0.5, objective="l2", solver="highs", **kw)),
    ("tda_linf_ortools", lambda **kw: TDA("linf", epsilon=1.0, delta=1e-8, solver="ortools", **kw)),
    ("inftda_constraints", lambda **kw: InfTDA(epsilon=1.0, delta=1e-8, constraints=_with_caps(TREE), **kw)),
    ("tda_linf_constraints", lambda **kw: TDA("linf", epsilon=1.0, delta=1e-8, constraints=_with_caps(TREE), **kw)),
]


@pytest.mark.parametrize("name,make", PROMISED, ids=[m[0] for m in PROMISED])
def test_every_mechanism_that_promises_it_releases_the_same_on_every_engine(name, make, process_pool, dask_client):
    """General solvers (highs, ortools) answer a batch of groups with one of several optima; the level
    solver's tie-break makes the answer a function of each group alone, so chunks of 5 children, a
    process pool and a Dask cluster (partitions of 40 children: every level split differently) give the
    release of one chunk per level, value for value; constraint rows are honoured on every engine."""
    whole = make().release(TREE, seed=29)
    chunked_mech = make()
    chunked_mech.chunk_children = 5
    _check(whole, chunked_mech.release(TREE, seed=29))
    _check(whole, make(engine=ProcessEngine(process_pool, partition_children=40)).release(TREE, seed=29))
    _check(whole, make(engine=DaskEngine(dask_client, partition_children=40)).release(TREE, seed=29))
    if "constraints" in name:
        assert _with_caps(TREE).resolve(TREE).check(whole) == []


def test_the_group_size_topdown_is_the_same_on_every_engine_and_after_a_resume(tmp_path, process_pool, dask_client):
    """pgsr_topdown (paper 001's TopDown baseline) runs on the same level-wise engine: its (region,
    size) cells are the nodes of the dynamic-programming tree."""
    from hierdp.datasets.group_sizes import random_count_of_counts
    from hierdp.mechanisms.pgsr import GroupSizeTopDown

    data = random_count_of_counts(np.random.default_rng(3), depth=3, max_fanout=4, K=6, max_groups_per_leaf=30)
    serial = GroupSizeTopDown(epsilon=1.0).release(data, seed=6)
    for engine in (ProcessEngine(process_pool, partition_children=8), DaskEngine(dask_client, partition_children=8)):
        other = GroupSizeTopDown(epsilon=1.0, engine=engine).release(data, seed=6, checkpoint=tmp_path / engine.name)
        assert np.array_equal(other.values, serial.values)
        assert other.accounting.spends == serial.accounting.spends
    resumed = GroupSizeTopDown(epsilon=1.0).release(data, resume=tmp_path / "dask")  # a completed checkpoint
    assert np.array_equal(resumed.values, serial.values)
    assert not np.array_equal(GroupSizeTopDown(epsilon=1.0).release(data, seed=7).values, serial.values)
