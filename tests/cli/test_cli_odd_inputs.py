"""Odd inputs and faults through the command line (issue 20, items 9, 10, 12; reproducers C6-C8, C11).

Table-driven like tests/cli/test_cli_bad_inputs.py: exit code, one stderr line naming the culprit
(never a private value), nothing created or changed in the working folder. Inputs that are not
plain files (a FIFO, a device) are refused at once instead of blocking or reading forever; corrupt
compressed files are bad input, not internal errors; a column the release does not use is not
read, so its blank cells refuse nothing; SIGHUP during the write leaves no temporary file.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import signal
import threading
from pathlib import Path

import pandas as pd
import pytest

from hierdp.cli import main

COUNTS = "state,county,pop\n01,01001,100\n01,01003,50\nNA,NA1,7\n02,02001,63\n"
GEO = "state,county\n01,01001\n01,01003\n01,01005\nNA,NA1\n02,02001\n"
PLAIN = ["release", "c.csv", "-o", "out.csv", "--levels", "state,county", "--count", "pop", "--epsilon", "1",
         "--geo", "g.csv", "--seed", "0", "--quiet"]
HH = "household,state,county,size\nh1,01,01001,3\nh2,01,01001,1\nh3,01,01003,2\nh4,02,02001,5\n"
GROUPS = ["release", "hh.csv", "-o", "out.csv", "--unit", "household", "--levels", "state,county", "--size", "size",
          "--max-size", "8", "--geo", "g.csv", "--epsilon", "1", "--seed", "0", "--quiet"]


def _input(argv: list[str], name: str) -> list[str]:
    return ["release", name, *argv[2:]]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device_input(argv: list[str]) -> list[str]:
    return ["release", "/dev/zero", *argv[2:]]


# (id, argv, files to add (bytes/str, or a callable making the file), exit code, regex of the stderr line)
CASES: list[tuple] = [
    ("input-fifo", _input(PLAIN, "fifo.csv"), {"fifo.csv": _fifo}, 2,
     r"input fifo.csv is a FIFO \(named pipe\); give a regular file"),
    ("geo-fifo", [a if a != "g.csv" else "gfifo.csv" for a in PLAIN], {"gfifo.csv": _fifo}, 2,
     r"--geo gfifo.csv is a FIFO"),
    ("input-dev-zero", _device_input(PLAIN), {}, 2, r"input /dev/zero is a device; give a regular file"),
    ("xz-truncated", _input(PLAIN, "c.csv.xz"), {"c.csv.xz": lzma.compress(COUNTS.encode())[:20]}, 2,
     r"cannot read c.csv.xz: not a valid xz file"),
    ("xz-garbage", _input(PLAIN, "c.csv.xz"), {"c.csv.xz": b"this is no xz stream"}, 2,
     r"cannot read c.csv.xz: not a valid xz file"),
    ("zip-garbage", _input(PLAIN, "c.csv.zip"), {"c.csv.zip": b"PK\x03\x04 not really a zip"}, 2,
     r"cannot read c.csv.zip: not a valid zip file"),
    ("bz2-garbage", _input(PLAIN, "c.csv.bz2"), {"c.csv.bz2": b"no bzip2 here"}, 2,
     r"cannot read c.csv.bz2: not a valid bz2 file"),
    ("ragged-line-beside-an-unused-column", PLAIN, {"c.csv": "state,county,pop,note\n01,01001,1,\n01,01003,1,x,y\n"},
     2, r"c.csv: not valid CSV"),
    ("short-line", PLAIN, {"c.csv": COUNTS + "02,02001\n"}, 2, r"missing count ''"),
    ("dataset-counts-sum-beyond-int64", [*_input(PLAIN, "ds"), "--overwrite"],
     {"ds/a.parquet": pd.DataFrame({"state": ["01"], "county": ["01001"], "pop": [6 * 10**18]}),
      "ds/b.parquet": pd.DataFrame({"state": ["01"], "county": ["01001"], "pop": [6 * 10**18]})}, 2,
     r"Parquet dataset 'ds', column 'pop': the counts sum to more than 2\*\*63 - 1, beyond int64"),
    ("dataset-file-sum-beyond-int64", [*_input(PLAIN, "ds"), "--overwrite"],
     {"ds/a.parquet": pd.DataFrame({"state": ["01", "01"], "county": ["01001", "01003"], "pop": [6 * 10**18] * 2})},
     2, r"a.parquet: column 'pop': the counts sum to more than 2\*\*63 - 1, beyond int64"),
]


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = "dir" if p.is_dir() else ("fifo" if p.is_fifo() else hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    for name, text in {"c.csv": COUNTS, "g.csv": GEO, "hh.csv": HH}.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _add(workdir: Path, files: dict) -> None:
    for fname, content in files.items():
        path = workdir / fname
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, pd.DataFrame):
            content.to_parquet(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.mark.parametrize("name, argv, files, code, pattern", CASES, ids=[c[0] for c in CASES])
def test_odd_input(workdir, capsys, name, argv, files, code, pattern) -> None:
    if name == "input-dev-zero" and not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    _add(workdir, files)
    before = _snapshot(workdir)
    done: dict = {}

    def run() -> None:  # a FIFO that were opened would block: run on a thread and bound the wait
        done["code"] = main(argv)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock the reader so the thread ends, then fail
        for fifo in workdir.glob("*fifo*"):
            with open(fifo, "w"):
                pass
        pytest.fail("the command blocked on its input")
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert done["code"] == code, err
    assert len(lines) == 1, err
    assert lines[0].startswith("hierdp release: error: "), lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    assert "internal error" not in lines[0]
    assert _snapshot(workdir) == before


@pytest.mark.parametrize("argv, target", [(PLAIN, "c.csv"), (GROUPS, "hh.csv")], ids=["tree", "group-sizes"])
def test_an_unused_column_with_blank_cells_is_not_read(workdir, capsys, argv, target) -> None:
    assert main(argv) == 0
    reference = (workdir / "out.csv").read_bytes()
    for written in workdir.glob("out.csv*"):  # the release and its accounting beside it
        written.unlink()
    # a note column, blank in most rows, in the input and in the --geo file: neither is used
    frame = pd.read_csv(workdir / target, dtype=str, keep_default_na=False)
    frame["note"] = [""] * (len(frame) - 1) + ["checked"]
    frame.to_csv(workdir / target, index=False)
    geo = pd.read_csv(workdir / "g.csv", dtype=str, keep_default_na=False)
    geo.insert(0, "comment", "")
    geo.to_csv(workdir / "g.csv", index=False)
    assert main(argv) == 0, capsys.readouterr().err
    assert (workdir / "out.csv").read_bytes() == reference  # the same release, seed for seed
    # the column is ignored, not dropped by luck: a used column with a blank cell is still refused
    frame.loc[0, "state"] = ""
    frame.to_csv(workdir / target, index=False)
    assert main([*argv, "--overwrite"]) == 2
    assert "column 'state' is empty in row 0" in capsys.readouterr().err


def test_sighup_during_the_write_leaves_nothing(workdir, capsys, monkeypatch) -> None:
    real = pd.DataFrame.to_csv

    def hung_up(self, buf, *a, **k):  # half the file is written, then the terminal goes away
        real(self.iloc[: len(self) // 2], buf, *a, **k)
        os.kill(os.getpid(), signal.SIGHUP)
        real(self, buf, *a, **k)

    monkeypatch.setattr(pd.DataFrame, "to_csv", hung_up)
    before = _snapshot(workdir)
    previous = signal.getsignal(signal.SIGHUP)
    assert main(PLAIN) == 129
    assert "terminated (SIGHUP); nothing was written" in capsys.readouterr().err
    assert _snapshot(workdir) == before  # no output, no hidden .out.csv.*.partial
    assert signal.getsignal(signal.SIGHUP) == previous  # the command's handler is gone again
