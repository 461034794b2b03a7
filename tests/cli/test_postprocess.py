"""``hierdp postprocess``: a measurements file hierdp wrote, post-processed from the command line, is
the in-process release of the same seed (the written file equals the release's frame); bad input
is refused in one line before anything is solved."""

from __future__ import annotations

import json
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main
from hierdp.mechanisms.census import CensusTopDown, QueryStrategy, SpineHistograms
from hierdp.spines import Spine

STRATEGY = QueryStrategy.marginals((2, 2))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(2)
    geo = pd.DataFrame([[f"s{s}", f"s{s}c{c}", f"s{s}c{c}b{b}"] for s in range(2) for c in range(2) for b in range(3)],
                       columns=["state", "county", "block"])
    geo.to_csv(tmp_path / "geo.csv", index=False)
    spine = Spine.from_frame(geo, ["state", "county", "block"], [F(1, 4)] * 4, root="US")
    data = SpineHistograms(spine, rng.poisson(3.0, (spine.n_blocks, 4)))
    mech = CensusTopDown(rho=1.0, strategy=STRATEGY)
    mech.measure(data, seed=5).write_parquet(tmp_path / "nmf.parquet")
    return tmp_path, data, mech.release(data, seed=5)


BASE = ["postprocess", "nmf.parquet", "-o", "out.csv", "--geo", "geo.csv", "--levels", "state,county,block",
        "--quiet"]


def test_the_command_line_post_processes_to_the_in_process_release(folder, capsys):
    tmp, data, rel = folder
    assert main([*BASE, "--total", str(int(data.counts.sum()))]) == 0
    out = capsys.readouterr().out
    assert "no guarantee stated: post-processing of noisy measurements made elsewhere" in out
    written = pd.read_csv(tmp / "out.csv")
    expected = rel.to_frame()
    assert len(written) == len(expected) == data.spine.n * 4
    assert written["value"].to_numpy().tolist() == expected["value"].to_numpy().tolist()
    # the same on a process pool, and with a stated guarantee
    assert main([*BASE, "--total", str(int(data.counts.sum())), "-o", "pool.csv", "--engine", "processes",
                 "--workers", "2", "--measurement-rho", "1"]) == 0
    assert "1-zCDP" in capsys.readouterr().out
    assert pd.read_csv(tmp / "pool.csv")["value"].tolist() == written["value"].tolist()
    # a file without the strategy in its metadata reads it from --strategy
    pd.read_parquet(tmp / "nmf.parquet").to_parquet(tmp / "plain.parquet", index=False)
    (tmp / "s.json").write_text(json.dumps({"shape": [2, 2], "groups": {g: list(k) for g, k in
                                                                        STRATEGY.groups.items()}}))
    assert main(["postprocess", "plain.parquet", "-o", "plain.csv", "--geo", "geo.csv", "--levels",
                 "state,county,block", "--quiet", "--total", str(int(data.counts.sum())), "--strategy", "s.json"]) == 0
    assert pd.read_csv(tmp / "plain.csv")["value"].tolist() == written["value"].tolist()


@pytest.mark.parametrize("extra,pattern", [
    (["--total", "-3"], "--total must be a non-negative integer"),
    (["--total", "10", "--levels", "state,county,blk"], "'blk'"),
    (["--total", "10", "--engine", "serial", "--workers", "2"], "--workers needs --engine processes or"),
])
def test_bad_input_is_refused_in_one_line(folder, capsys, extra, pattern):
    tmp, _, _ = folder
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and pattern in err, err
    assert not (tmp / "out.csv").exists()
