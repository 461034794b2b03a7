"""Shared fixtures of the scale-out tests: a small Dask LocalCluster and a process pool, started from
fork servers (clean processes: no fork of a parent that already runs threads), once per session."""

from __future__ import annotations

import logging
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import pytest


def _preload_the_fork_server() -> None:
    """One fork server for the Dask workers and the process pools of this session, with hierdp (and
    distributed) imported before it forks: each worker then starts without importing hierdp itself,
    which takes seconds on a busy 2-core machine. distributed sets its own preload list the first
    time it makes its context, so that happens first and ours extends it. Without effect once the
    fork server runs (another test started it): the workers then import hierdp themselves."""
    from hierdp.scale.executors import PRELOAD

    modules = list(PRELOAD)
    try:
        import dask
        from distributed.utils import get_mp_context

        with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
            get_mp_context()
        modules = ["distributed", *modules]
    except ImportError:
        pass
    mp.get_context("forkserver").set_forkserver_preload(modules)


@pytest.fixture(scope="session")
def dask_client():
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    _preload_the_fork_server()
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def process_pool():
    _preload_the_fork_server()
    pool = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("forkserver"))
    yield pool
    pool.shutdown(wait=True)
