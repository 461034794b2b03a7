"""``hierdp release --constraints FILE`` (tree layouts): honoured, stated, bad files refused in one line."""

from __future__ import annotations

import pandas as pd
import pytest

from hierdp.cli import main

COUNTS = ("state,county,pop\nIL,COOK,5105\nIL,LAKE,516\nIL,DU PAGE,782\nIN,LAKE,475\nIN,CASS,38\n"
          "WI,DANE,367\nWI,IRON,6\n")
GEO = "state,county\nIL,COOK\nIL,LAKE\nIL,DU PAGE\nIN,LAKE\nIN,CASS\nIN,POSEY\nWI,DANE\nWI,IRON\n"
CAPS = """{"format": "hierdp.constraints", "version": 1}
{"kind": "linear", "name": "cross-state cap", "terms": {"IL/COOK": 1, "IN/LAKE": 1}, "upper": 5500}
{"kind": "linear", "name": "within-state cap", "terms": [[["IL", "LAKE"], 1], [["IL", "DU PAGE"], 1]], "upper": 1250}
{"kind": "bounds", "name": "lower bound", "node": {"state": "WI", "county": "DANE"}, "lower": 380}
"""
BASE = ["release", "c.csv", "-o", "out.csv", "--levels", "state,county", "--count", "pop", "--geo", "g.csv",
        "--epsilon", "1", "--seed", "0", "--quiet"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.csv").write_text(COUNTS)
    (tmp_path / "g.csv").write_text(GEO)
    (tmp_path / "caps.jsonl").write_text(CAPS)
    return tmp_path


def _values(path) -> dict[str, int]:
    df = pd.read_csv(path, dtype={"node": str})
    return dict(zip(df["node"], df["value"], strict=True))


@pytest.mark.parametrize("mechanism", ["inftda", "tda_l2", "tda_linf", "topdown"])
def test_rows_hold_in_the_written_release(folder, capsys, mechanism):
    assert main([*BASE, "--constraints", "caps.jsonl", "--mechanism", mechanism]) == 0
    out = capsys.readouterr().out
    assert "post-processed under public constraints (3 entries: 2 linear, 1 bounds; sha256 " in out
    v = _values(folder / "out.csv")
    get = lambda n: int(v.get(n, 0))
    assert get("IL/COOK") + get("IN/LAKE") <= 5500
    assert get("IL/LAKE") + get("IL/DU PAGE") <= 1250
    assert get("WI/DANE") >= 380
    assert get("IL") == sum(get(n) for n in ("IL/COOK", "IL/LAKE", "IL/DU PAGE"))


def test_the_failsafe_flag_is_stated(folder, capsys):
    (folder / "tight.jsonl").write_text('{"kind": "linear", "name": "tight", "terms": '
                                        '{"IL/COOK": 1, "IL/LAKE": 1, "IL/DU PAGE": 1, "IN/LAKE": 1}, "upper": 50}\n')
    code = main([*BASE, "--constraints", "tight.jsonl"])
    err = capsys.readouterr().err
    assert code == 2 and "'tight'" in err and "Spent so far" in err and len(err.strip().splitlines()) == 1
    assert not (folder / "out.csv").exists()
    assert main([*BASE, "--constraints", "tight.jsonl", "--constraints-failsafe"]) == 0
    assert "failsafe: constraint 'tight' relaxed at level 2 (county): upper bound raised by" in capsys.readouterr().out


@pytest.mark.parametrize("content, extra, match", [
    ('{"kind": "linear", "terms": {"IL/COOK": 1}, "upper": NaN}\n', [],
     "--constraints bad.jsonl: line 1: NaN is not allowed"),
    ('{"kind": "bounds", "node": "IL", "upper": 1}\n{"kind": "linear", "terms": {"IL/COOK": 1}, "upper": 1 }}\n', [],
     "--constraints bad.jsonl: line 2, column"),
    ('{"kind": "linear", "name": "x", "terms": {"IL/COOKK": 1}, "upper": 9}\n', [],
     r"linear 'x' \(line 1\): unknown node 'IL/COOKK'"),
    ('{"kind": "linear", "name": "x", "terms": {"IL/COOK": 0.5}, "upper": 9}\n', [],
     r"coefficient 0.5 of 'IL/COOK' is not an integer"),
    ('{"kind": "bounds", "name": "x", "node": "IL", "upper": 9}\n{"kind": "bounds", "node": "IL/COOK", "lower": 10}\n',
     [], "the constraints cannot all hold on this tree with the public root total"),
    ('{"kind": "bounds", "name": "x", "node": "IL", "upper": 9}\n', ["--mechanism", "vanilla"],
     "--constraints applies to mechanisms with a post-processing solve"),
])
def test_bad_constraints_are_refused_before_any_noise_in_one_line(folder, capsys, content, extra, match):
    import re

    (folder / "bad.jsonl").write_text(content)
    assert main([*BASE, "--constraints", "bad.jsonl", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err), err
    assert "Spent" not in err
    assert not (folder / "out.csv").exists()


def test_failsafe_needs_a_file_and_other_layouts_refuse_the_flag(folder, capsys):
    assert main([*BASE, "--constraints-failsafe"]) == 2
    assert "--constraints-failsafe needs --constraints FILE" in capsys.readouterr().err
    assert main(["release", "c.csv", "-o", "o.csv", "--x", "x", "--y", "y", "--grid", "4x4", "--epsilon", "1",
                 "--constraints", "caps.jsonl"]) == 2
    assert "--constraints does not apply to the point layout" in capsys.readouterr().err


def test_help_mentions_the_flag(capsys):
    assert main(["release", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--constraints FILE" in text and "--constraints-failsafe" in text


# ---------------------------------------------------------------------------------- group sizes (--unit)
HOUSEHOLDS = "hh,state,county,size\n" + "".join(
    f"{s}{c}{i},{s},{c},{1 + (i * 7 + ord(c)) % 6}\n" for s in ("IL", "IN") for c in "ABC" for i in range(30))
REGIONS = "state,county\n" + "".join(f"{s},{c}\n" for s in ("IL", "IN") for c in "ABC")
SIZES = ('{"kind": "zero", "name": "no 6 in IL/A", "node": "IL/A", "cells": [6]}\n'
         '{"kind": "cell_rule", "name": "1 >= 2", "terms": {"1": 1, "2": -1}, "lower": 0, "levels": ["county"]}\n'
         '{"kind": "linear", "name": "size-1 cap", "terms": {"IL/B": 1, "IN/B": 1}, "cells": [1], "upper": 9}\n')
GROUPS = ["release", "hh.csv", "-o", "sizes.csv", "--unit", "hh", "--levels", "state,county", "--size", "size",
          "--max-size", "6", "--geo", "regions.csv", "--epsilon", "1", "--seed", "0", "--quiet"]


@pytest.fixture
def households(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hh.csv").write_text(HOUSEHOLDS)
    (tmp_path / "regions.csv").write_text(REGIONS)
    (tmp_path / "sizes.jsonl").write_text(SIZES)
    return tmp_path


@pytest.mark.parametrize("mechanism", ["pgsr_mdp", "pgsr_mh", "pgsr_mhc", "pgsr_chain_dp", "pgsr_topdown"])
def test_group_size_rows_hold_in_the_written_release(households, capsys, mechanism):
    assert main([*GROUPS, "--constraints", "sizes.jsonl", "--mechanism", mechanism]) == 0
    out = capsys.readouterr().out
    assert "post-processed under public constraints (3 entries: 1 zero, 1 cell_rule, 1 linear; sha256 " in out
    df = pd.read_csv(households / "sizes.csv")
    v = {(n, int(k)): int(x) for n, k, x in zip(df["node"], df["size"], df["value"], strict=True)}
    assert v[("IL/A", 6)] == 0
    assert all(v[(f"{s}/{c}", 1)] >= v[(f"{s}/{c}", 2)] for s in ("IL", "IN") for c in "ABC")
    assert v[("IL/B", 1)] + v[("IN/B", 1)] <= 9


@pytest.mark.parametrize("content, extra, match", [
    ('{"kind": "zero", "node": "IL/Z"}\n', [], "unknown node 'IL/Z'"),
    ('{"kind": "zero", "node": "IL/A", "cells": [7]}\n', [], "unknown size 7"),
    ('{"kind": "zero", "node": "IL/A", "cells": [1], "uper": 3}\n', [], "unknown key 'uper'"),
    ('{"kind": "bounds", "node": "IL", "lower": 100000}\n', [], "cannot hold"),
    (SIZES, ["--constraints-failsafe"], "applies to pgsr_topdown"),
    (SIZES, ["--mechanism", "pgsr_mh_relaxed"], "rounds per cell"),
])
def test_bad_group_size_constraints_are_one_line_and_nothing_is_written(households, capsys, content, extra, match):
    (households / "bad.jsonl").write_text(content)
    assert main([*GROUPS, "--constraints", "bad.jsonl", *extra]) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1
    assert not (households / "sizes.csv").exists()
