"""Shared fixtures of the scale-out tests: a small Dask LocalCluster and a process pool (both forked,
so they start in a second, not in the ten seconds spawned interpreters need to import hierdp here)."""

from __future__ import annotations

import logging
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import pytest


@pytest.fixture(scope="session")
def dask_client():
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def process_pool():
    pool = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork"))
    yield pool
    pool.shutdown(wait=True)
