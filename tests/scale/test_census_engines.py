"""census_topdown on the level-wise engine: the same seeded release serially (in chunks of any
size), on a process pool and on a Dask cluster, and after an interruption - a SIGKILL of the
process included - resumed on another engine.

Oracles: the serial release of the same seed (value for value, and its ledger), and the release's
invariants checked here independently (cells sum to the parent in every geounit, non-negative
integers, the public total).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms.census import CensusTopDown, QueryStrategy, SpineHistograms
from hierdp.scale import DaskEngine, ProcessEngine
from hierdp.scale.checkpoint import MANIFEST
from hierdp.spines import Spine, bypass

STRATEGY = QueryStrategy.marginals((2, 3, 2))  # 12 cells: total, three one-way, three two-way, detailed


def census_data(seed: int = 0) -> SpineHistograms:
    """3 states x 4 counties x 5 tracts x 1-8 blocks (275 blocks), bypassed single children."""
    rng = np.random.default_rng(seed)
    rows = [[f"s{s}", f"s{s}c{c}", f"s{s}c{c}t{t}", f"s{s}c{c}t{t}b{b}"]
            for s in range(3) for c in range(4) for t in range(5) for b in range(int(rng.integers(1, 9)))]
    levels = ["state", "county", "tract", "block"]
    spine = bypass(Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 5)] * 5, root="US"),
                   privacy="zcdp")
    return SpineHistograms(spine, rng.poisson(1.5, (spine.n_blocks, STRATEGY.n_cells)))


DATA = census_data()


def _independent_checks(rel, data):
    v, spine = rel.values, data.spine
    assert v.dtype.kind == "i" and (v >= 0).all()
    assert v[0].sum() == data.counts.sum()
    for u in np.flatnonzero(spine.n_children > 0):
        assert np.array_equal(v[spine.parent == u].sum(0), v[u]), spine.names[u]


def _same(a, b):
    assert np.array_equal(a.values, b.values)
    assert a.accounting.spends == b.accounting.spends
    drop = ("post_processing",)  # per-level statistics hold timings
    assert {k: v for k, v in a.params.items() if k not in drop} == {k: v for k, v in b.params.items() if k not in drop}


def test_seeded_census_topdown_is_the_same_on_every_engine(process_pool, dask_client):
    serial = CensusTopDown(rho=1.0, strategy=STRATEGY, batch_children=16).release(DATA, seed=3)
    _independent_checks(serial, DATA)
    chunked = CensusTopDown(rho=1.0, strategy=STRATEGY, batch_children=16)
    chunked.chunk_children = 5
    _same(serial, chunked.release(DATA, seed=3))
    pool = CensusTopDown(rho=1.0, strategy=STRATEGY, batch_children=16,
                         engine=ProcessEngine(process_pool, partition_children=30))
    _same(serial, pool_rel := pool.release(DATA, seed=3))
    dask = CensusTopDown(rho=1.0, strategy=STRATEGY, batch_children=16,
                         engine=DaskEngine(dask_client, partition_children=30))
    _same(serial, dask_rel := dask.release(DATA, seed=3))
    # the work was split: several partitions at the block level, on two workers
    blocks = dask_rel.params["post_processing"][-1]
    assert blocks["partitions"] >= 3 and blocks["engine"] == "dask"
    assert pool_rel.params["post_processing"][-1]["partitions"] >= 3
    other = CensusTopDown(rho=1.0, strategy=STRATEGY).release(DATA, seed=4)
    assert not np.array_equal(other.values, serial.values)  # the seed matters (no constant release)


class _Interrupt(BaseException):
    """Stands for a kill: not an Exception, so nothing in the engine catches it."""


@pytest.mark.parametrize("k", [0, 2])
def test_an_interrupted_census_run_resumes_on_another_engine_to_the_same_release(tmp_path, monkeypatch, k,
                                                                                 dask_client):
    full = CensusTopDown(rho=1.0, strategy=STRATEGY).release(DATA, seed=5)
    ck = tmp_path / "ck"
    original = CensusTopDown._run_census_chunk

    def dying(self, tree, plan, job, *a, **kw):
        parents_level = job.L
        if parents_level == k + 1:  # while computing engine level k + 2 (geolevel k + 1)
            raise _Interrupt
        return original(self, tree, plan, job, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(CensusTopDown, "_run_census_chunk", dying)
        with pytest.raises(_Interrupt):
            CensusTopDown(rho=1.0, strategy=STRATEGY).release(DATA, seed=5, checkpoint=ck)
    done = [e["level"] for e in json.loads((ck / MANIFEST).read_text())["levels"]]
    assert done == list(range(k + 2))  # the virtual total, then geolevels 0 .. k
    resumed = CensusTopDown(rho=1.0, strategy=STRATEGY,
                            engine=DaskEngine(dask_client, partition_children=30)).release(DATA, resume=ck)
    _same(full, resumed)
    assert resumed.accounting.spent == full.accounting.spent == full.accounting.total


KILLED = textwrap.dedent('''
    import os, signal, sys
    sys.path.insert(0, os.environ["TESTS_DIR"])
    from scale.test_census_engines import DATA, STRATEGY
    from hierdp.mechanisms.census import CensusTopDown
    original = CensusTopDown._run_census_chunk
    def killed(self, tree, plan, job, *a, **k):
        if job.L == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)   # no cleanup, no exception handler: a real kill
        return original(self, tree, plan, job, *a, **k)
    CensusTopDown._run_census_chunk = killed
    CensusTopDown(rho=1.0, strategy=STRATEGY).release(DATA, seed=11, checkpoint=sys.argv[1])
''')


def test_a_sigkilled_census_run_resumes_on_a_process_pool_to_the_same_release(tmp_path, process_pool):
    full = CensusTopDown(rho=1.0, strategy=STRATEGY).release(DATA, seed=11)
    script = tmp_path / "run.py"
    script.write_text(KILLED)
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "KILL_AT": "3", "TESTS_DIR": tests_dir}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "ck")], env=env, capture_output=True,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    manifest = json.loads((tmp_path / "ck" / MANIFEST).read_text())
    assert [e["level"] for e in manifest["levels"]] == [0, 1, 2, 3] and not manifest["complete"]
    resumed = CensusTopDown(rho=1.0, strategy=STRATEGY,
                            engine=ProcessEngine(process_pool, partition_children=30)).release(DATA,
                                                                                               resume=tmp_path / "ck")
    _same(full, resumed)
    _independent_checks(resumed, DATA)


def test_post_processing_of_measurements_runs_on_every_engine_with_checkpoints(tmp_path, process_pool, dask_client):
    """CensusPostProcess (measurements made elsewhere) on the same engines: equal releases, and a
    completed checkpoint resumes to the same release."""
    from hierdp.mechanisms.census import CensusPostProcess

    meas = CensusTopDown(rho=1.0, strategy=STRATEGY).measure(DATA, seed=1)
    total = int(DATA.counts.sum())
    serial = CensusPostProcess(batch_children=16).release(meas, total=total)
    assert np.array_equal(serial.values, CensusTopDown(rho=1.0, strategy=STRATEGY, batch_children=16)
                          .release(DATA, seed=1).values)
    pool = CensusPostProcess(batch_children=16, engine=ProcessEngine(process_pool, partition_children=30))
    assert np.array_equal(pool.release(meas, total=total, checkpoint=tmp_path / "a").values, serial.values)
    dask = CensusPostProcess(batch_children=16, engine=DaskEngine(dask_client, partition_children=30))
    assert np.array_equal(dask.release(meas, total=total, checkpoint=tmp_path / "b").values, serial.values)
    again = CensusPostProcess(batch_children=16).release(meas, total=total, resume=tmp_path / "b")
    assert np.array_equal(again.values, serial.values)


def test_das_style_constraints_on_every_engine_give_the_serial_release(process_pool, dask_client):
    """Each chunk carries its geolevel's constraint plan to the workers: the same release, every
    constraint holding in every geounit."""
    from mechanisms.census.test_constraints import STRATEGY as CELLS, _holds, census, das_constraints

    data = census()
    c, county, total = das_constraints(data)
    make = lambda **kw: CensusTopDown(rho=0.5, strategy=CELLS, constraints=c, batch_children=4, **kw)
    serial = make().release(data, seed=2)
    _holds(serial, data, county, total)
    for engine in (ProcessEngine(process_pool, partition_children=6), DaskEngine(dask_client, partition_children=6)):
        _same(serial, make(engine=engine).release(data, seed=2))
