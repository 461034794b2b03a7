"""Shared fixtures of the scale-out tests: a small Dask LocalCluster and a process pool, started from
fork servers (clean processes: no fork of a parent that already runs threads), once per session."""

from __future__ import annotations

import logging
from concurrent.futures import ProcessPoolExecutor

import pytest


@pytest.fixture(scope="session")
def dask_client():
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def process_pool():
    from hierdp.scale.executors import pool_context

    pool = ProcessPoolExecutor(max_workers=2, mp_context=pool_context("forkserver"))
    yield pool
    pool.shutdown(wait=True)
