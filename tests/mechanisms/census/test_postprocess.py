"""Post-processing of given noisy measurements (census.measurements, census.postprocess).

Oracles: the in-process release of the same seed (a measurements file hierdp wrote post-processes to
it, value for value); on a file written by hand, enumeration of every integer histogram of the
children of each parent (the L1 and L∞ optima per parent, given the released parent); the release's
invariants checked independently; each malformed file refused with the row or geounit named.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms import MechanismParameterError
from hierdp.mechanisms.census import (
    CensusPostProcess,
    CensusTopDown,
    MeasurementsError,
    NoisyMeasurements,
    QueryStrategy,
    SpineHistograms,
)
from hierdp.privacy import Budget
from hierdp.spines import Spine, bypass

STRATEGY = QueryStrategy.marginals((2, 2))  # total, m0, m1, detailed


def _data(seed=0):
    rng = np.random.default_rng(seed)
    rows = [[f"s{s}", f"s{s}c{c}", f"s{s}c{c}b{b}"] for s in range(2) for c in range(3)
            for b in range(int(rng.integers(1, 5)))]
    levels = ["state", "county", "block"]
    spine = bypass(Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 4)] * 4, root="US"),
                   privacy="zcdp")
    return SpineHistograms(spine, rng.poisson(2.0, (spine.n_blocks, 4)))


def _independent_checks(rel, spine, total):
    v = rel.values
    assert v.dtype.kind == "i" and (v >= 0).all() and v[0].sum() == total
    for u in np.flatnonzero(spine.n_children > 0):
        assert np.array_equal(v[spine.parent == u].sum(0), v[u])


def test_a_measurements_file_hierdp_wrote_post_processes_to_the_in_process_release(tmp_path):
    data = _data()
    mech = CensusTopDown(rho=1.0, strategy=STRATEGY)
    rel = mech.release(data, seed=7)
    meas = mech.measure(data, seed=7)
    # the same ledger as the release (spent before the noise, geolevel by geolevel)
    assert meas.accounting.spends == rel.accounting.spends
    path = meas.write_parquet(tmp_path / "nmf.parquet")
    frame = pd.read_parquet(path)
    assert list(frame.columns) == ["geolevel", "geocode", "query_name", "query_index", "noisy_measurement",
                                   "variance"]
    assert len(frame) == int(data.spine.measured.sum()) * (1 + 2 + 2 + 4)
    back = NoisyMeasurements.read_parquet(path, data.spine)  # the strategy comes from the file's metadata
    post = CensusPostProcess().release(back, total=int(data.counts.sum()))
    assert np.array_equal(post.values, rel.values)
    _independent_checks(post, data.spine, int(data.counts.sum()))
    # the accounting says what happened: nothing spent, no guarantee claimed unless stated
    assert post.accounting.spends == () and post.accounting.guarantees == ()
    assert "made elsewhere" in post.guarantee and "no guarantee stated" in post.guarantee
    stated = CensusPostProcess(measurement_budget=Budget.zcdp(1.0)).release(back, total=int(data.counts.sum()))
    assert stated.accounting.guarantee("zcdp").parameters["rho"] == 1.0
    assert "as stated by the user" in stated.guarantee and stated.accounting.spends == ()
    assert np.array_equal(stated.values, rel.values)


# -- a file written by hand --------------------------------------------------------------------------
def _hand_spine():
    rows = pd.DataFrame({"county": ["A", "A", "B"], "block": ["a1", "a2", "b1"]})
    return Spine.from_frame(rows, ["county", "block"], ["1/3", "1/3", "1/3"], root="US")


def _hand_frame():
    """US -> counties A (blocks a1, a2), B (block b1); cells (0, 1); queries total and detailed."""
    rows = []
    noisy = {("US", "US"): (9.0, [6.0, 4.0]), ("county", "A"): (6.0, [3.0, 2.0]),
             ("county", "B"): (2.0, [-1.0, 3.0]), ("block", "a1"): (4.0, [3.0, 0.0]),
             ("block", "a2"): (1.0, [-2.0, 2.0]), ("block", "b1"): (3.0, [1.0, 1.0])}
    for (level, code), (tot, cells) in noisy.items():
        rows.append([level, code, "total", 0, tot, 4.0])
        rows += [[level, code, "detailed", i, v, 2.0] for i, v in enumerate(cells)]
    return pd.DataFrame(rows, columns=["geolevel", "geocode", "query_name", "query_index", "noisy_measurement",
                                       "variance"])


HAND_STRATEGY = QueryStrategy((2,), {"total": (), "detailed": (0,)}, {"total": F(1, 2), "detailed": F(1, 2)})


def _brute(parent, answers, variances, objective):
    """Least objective over every integer split of ``parent`` (K cells) into the children."""
    n, K = len(answers), parent.size
    cells = [[(a, parent[k] - a) for a in range(parent[k] + 1)] if n == 2 else [(parent[k],)] for k in range(K)]
    best = None
    for choice in itertools.product(*cells):
        x = np.array(choice).T  # (children, K)
        devs = []
        for c in range(n):
            tot, det = answers[c]
            vt, vd = variances[c]
            devs.append(abs(x[c].sum() - tot) / np.sqrt(vt))
            devs += [abs(x[c, k] - det[k]) / np.sqrt(vd) for k in range(K)]
        val = sum(devs) if objective == "l1" else max(devs)
        best = val if best is None else min(best, val)
    return best


@pytest.mark.parametrize("objective", ["l1", "linf"])
def test_a_hand_written_file_is_read_and_post_processed_to_the_enumerated_optimum(tmp_path, objective):
    spine = _hand_spine()
    _hand_frame().to_parquet(tmp_path / "hand.parquet", index=False)
    meas = NoisyMeasurements.read_parquet(tmp_path / "hand.parquet", spine, HAND_STRATEGY)
    rel = CensusPostProcess(objective=objective).release(meas, total=10)
    v = rel.values
    _independent_checks(rel, spine, 10)
    frame = _hand_frame()

    def answers_of(code):
        f = frame[frame.geocode == code]
        return (float(f[f.query_name == "total"].noisy_measurement.iloc[0]),
                f[f.query_name == "detailed"].sort_values("query_index").noisy_measurement.tolist())

    names = list(spine.names)
    for parent, kids in (("A", ["a1", "a2"]), ("US", ["A", "B"])):
        p = v[names.index(parent)]
        got = _brute(p, [answers_of(k) for k in kids], [(4.0, 2.0)] * 2, objective)
        x = v[[names.index(k) for k in kids]]
        devs = []
        for c, k in enumerate(kids):
            tot, det = answers_of(k)
            devs.append(abs(x[c].sum() - tot) / 2.0)
            devs += [abs(x[c, i] - det[i]) / np.sqrt(2.0) for i in range(2)]
        assert (sum(devs) if objective == "l1" else max(devs)) == pytest.approx(got, abs=1e-9)
    assert np.array_equal(v[names.index("b1")], v[names.index("B")])  # a single child equals its parent


def test_a_hand_written_file_post_processes_with_the_das_two_stages():
    spine = _hand_spine()
    meas = NoisyMeasurements.from_frame(_hand_frame(), spine, HAND_STRATEGY)
    rel = CensusPostProcess().release(meas, total=10)
    _independent_checks(rel, spine, 10)
    shifted = _hand_frame()
    shifted.loc[(shifted.geocode == "A") & (shifted.query_name == "detailed"), "noisy_measurement"] += [4.0, -4.0]
    other = CensusPostProcess().release(NoisyMeasurements.from_frame(shifted, spine, HAND_STRATEGY), total=10)
    assert not np.array_equal(other.values, rel.values)  # the answers are what it follows


@pytest.mark.parametrize("change,pattern", [
    (lambda f: f.drop(columns="variance"), "missing column 'variance'"),
    (lambda f: f.assign(geocode=f.geocode.replace("a2", "zz")), "geounit 'zz' is not in geolevel 'block'"),
    (lambda f: f.assign(query_name=f.query_name.replace("total", "totl")), "unknown query group 'totl'"),
    (lambda f: f.assign(query_index=f.query_index.where(f.query_name != "detailed", 2)),
     "query_index 2 is not an answer of query group 'detailed'"),
    (lambda f: f.assign(variance=f.variance.where(f.index != 3, 0.0)), "variance is 0.0"),
    (lambda f: pd.concat([f, f.iloc[[2]]]), "a second answer"),
    (lambda f: f.drop(index=2), "has some answers but not every answer of query group 'detailed'"),
    (lambda f: f.assign(variance=f.variance.where(f.index != 1, 3.0)), "different variances"),
    (lambda f: f.assign(geolevel=f.geolevel.replace("US", "nation")), "unknown geolevel 'nation'"),
])
def test_a_malformed_file_is_refused_naming_the_row(change, pattern):
    with pytest.raises(MeasurementsError, match=pattern):
        NoisyMeasurements.from_frame(change(_hand_frame()), _hand_spine(), HAND_STRATEGY)


def test_refusals_before_any_solve():
    spine = _hand_spine()
    frame = _hand_frame()
    meas = NoisyMeasurements.from_frame(frame, spine, HAND_STRATEGY)
    with pytest.raises(MechanismParameterError, match="total must be"):
        CensusPostProcess().release(meas)
    with pytest.raises(MechanismParameterError, match="objective must be"):
        CensusPostProcess(objective="l3")
    lonely = NoisyMeasurements.from_frame(frame[frame.geocode != "a1"], spine, HAND_STRATEGY)
    with pytest.raises(MechanismParameterError, match="'a1' has no measurement but has siblings"):
        CensusPostProcess().release(lonely, total=10)
    with pytest.raises(MeasurementsError, match="does not record its query strategy"):
        import tempfile
        from pathlib import Path

        path = Path(tempfile.mkdtemp()) / "f.parquet"
        frame.to_parquet(path, index=False)
        NoisyMeasurements.read_parquet(path, spine)
