"""``hierdp release`` with --engine, --scheduler, --workers, --checkpoint and --resume, and a Parquet
dataset directory as input: the same seeded output file on every engine and from CSV or Parquet,
and one-line errors (exit 2, nothing written) for flags that do not fit, a scheduler that cannot be
reached and a dataset whose files disagree."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main
from hierdp.cli import scaleout as cli_release


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    rows = [(f"s{s}", f"c{s}{c}", f"b{s}{c}{b}") for s in range(3) for c in range(4) for b in range(5)]
    geo = pd.DataFrame(rows, columns=["state", "county", "block"])
    data = geo.sample(frac=0.8, random_state=1).reset_index(drop=True)
    data["n"] = rng.integers(0, 40, len(data))
    data.to_csv(tmp_path / "data.csv", index=False)
    geo.to_csv(tmp_path / "geo.csv", index=False)
    (tmp_path / "ds").mkdir()
    shuffled = data.sample(frac=1.0, random_state=2).reset_index(drop=True)
    for i, rows in enumerate(np.array_split(np.arange(len(shuffled)), 3)):
        shuffled.iloc[rows].to_parquet(tmp_path / "ds" / f"part-{i}.parquet", index=False)
    return tmp_path


def _args(t, source="data.csv", out="out.csv", *extra):
    return ["release", str(t / source), "-o", str(t / out), "--levels", "state,county,block", "--count", "n",
            "--geo", str(t / "geo.csv"), "--epsilon", "1", "--quiet", *extra]


def test_every_engine_and_a_parquet_dataset_write_the_same_file(files, dask_client):
    assert main(_args(files, "data.csv", "serial.csv", "--seed", "4")) == 0
    assert main(_args(files, "ds", "dataset.csv", "--seed", "4")) == 0
    assert main(_args(files, "data.csv", "procs.csv", "--seed", "4", "--engine", "processes", "--workers", "2")) == 0
    # the dataset read and released on a running cluster, reached by its address
    address = dask_client.scheduler.address
    assert main(_args(files, "ds", "dask.csv", "--seed", "4", "--scheduler", address)) == 0
    serial = (files / "serial.csv").read_bytes()
    for name in ("dataset.csv", "procs.csv", "dask.csv"):
        assert (files / name).read_bytes() == serial, name
    out = pd.read_csv(files / "serial.csv")
    assert int(out.loc[out["level"] == 0, "value"].iloc[0]) == int(pd.read_csv(files / "data.csv")["n"].sum())


def test_checkpoint_then_resume_from_the_command_line(files, capsys):
    assert main(_args(files, "data.csv", "a.csv", "--seed", "9", "--checkpoint", str(files / "ck"))) == 0
    assert main(_args(files, "data.csv", "b.csv", "--resume", str(files / "ck"))) == 0
    assert (files / "a.csv").read_bytes() == (files / "b.csv").read_bytes()
    assert "the checkpoint's seed" in capsys.readouterr().out
    code = main(_args(files, "data.csv", "c.csv", "--resume", str(files / "ck"), "--epsilon", "2"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "other parameters: epsilon" in err[0]
    assert not (files / "c.csv").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BAD = [
    (["--engine", "processes", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler .* needs --engine dask"),
    (["--workers", "2"], "--workers needs --engine processes or --engine dask"),
    (["--checkpoint", "x", "--resume", "y"], "not both"),
    (["--mechanism", "vanilla", "--engine", "dask"], "--engine applies to the TopDown mechanisms"),
    (["--mechanism", "sh", "--checkpoint", "ck"], "--checkpoint applies to the TopDown mechanisms"),
    (["--resume", "nothing-here"], "no checkpoint to resume: .*nothing-here is not a directory"),
]


@pytest.mark.parametrize("extra,pattern", BAD, ids=[b[1][:25] for b in BAD])
def test_flags_that_do_not_fit_are_refused_in_one_line(files, capsys, extra, pattern):
    code = main(_args(files, "data.csv", "out.csv", *extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert pytest.importorskip("re").search(pattern, err[0]), err[0]
    assert not (files / "out.csv").exists()


def test_an_unreachable_scheduler_stops_before_reading(files, capsys, monkeypatch):
    monkeypatch.setattr(cli_release, "CONNECT_TIMEOUT", 1.0)
    address = f"tcp://127.0.0.1:{_free_port()}"
    code = main(_args(files, "data.csv", "out.csv", "--scheduler", address))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"cannot reach the Dask scheduler at '{address}'" in err[0]
    assert not (files / "out.csv").exists()


def test_a_dataset_whose_files_disagree_is_refused(files, capsys):
    pd.DataFrame({"state": ["s0"], "county": ["c00"], "block": ["b000"], "n": [1.5]}).to_parquet(
        files / "ds" / "part-9.parquet", index=False)
    code = main(_args(files, "ds", "out.csv", "--seed", "1"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "the files disagree on column 'n'" in err[0] and "part-9.parquet has type double" in err[0]
    assert not (files / "out.csv").exists()
    code = main(_args(files, "ds", "out.csv", "--seed", "1", "--origin", "state", "--destination", "county"))
    assert code == 2


def test_constraints_run_on_every_engine_to_the_same_file(files, dask_client):
    """--constraints with --engine processes / a Dask scheduler: each chunk carries its level's rows;
    the rows hold and the file is the serial one, byte for byte (tda_linf: a general solver)."""
    (files / "caps.jsonl").write_text('{"kind": "linear", "name": "cap", "terms": {"s0/c00": 1, "s1/c10": 1}, '
                                      '"upper": 100}\n{"kind": "bounds", "name": "floor", "node": "s2/c20/b200", '
                                      '"lower": 30}\n')
    common = ["--seed", "8", "--mechanism", "tda_linf", "--constraints", str(files / "caps.jsonl")]
    assert main(_args(files, "data.csv", "serial.csv", *common)) == 0
    assert main(_args(files, "data.csv", "procs.csv", *common, "--engine", "processes", "--workers", "2")) == 0
    assert main(_args(files, "data.csv", "dask.csv", *common, "--scheduler", dask_client.scheduler.address)) == 0
    serial = (files / "serial.csv").read_bytes()
    assert (files / "procs.csv").read_bytes() == serial and (files / "dask.csv").read_bytes() == serial
    out = pd.read_csv(files / "serial.csv").set_index("node")["value"]
    assert out.get("s0/c00", 0) + out.get("s1/c10", 0) <= 100 and out["s2/c20/b200"] >= 30
