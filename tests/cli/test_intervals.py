"""``hierdp release --intervals LEVEL`` and ``hierdp compare --intervals LEVEL`` (issue 23, item 3).

Oracles: invariants of an interval (``lower <= value <= upper``, non-negative where the release is);
the DP values and the ledger of the same seeded release without ``--intervals`` (intervals are
post-processing: they change neither); the accounting file read with ``json``; a mechanism without
an interval method refused before the input is read (a spy on the reader) and before any noise;
the compare CSV's coverage recounted from a Python run of the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main

GEO = "state,county\nIL,A\nIL,B\nIL,C\nIN,D\nIN,E\nIN,F\n"
COUNTS = "state,county,pop\nIL,A,500\nIL,B,40\nIN,D,300\nIN,E,7\nIN,F,90\n"
TREE = ["release", "c.csv", "-o", "out.csv", "--levels", "state,county", "--count", "pop", "--geo", "geo.csv",
        "--epsilon", "1", "--seed", "3", "--quiet"]
HH = "household,state,county,size\nh1,01,01001,3\nh2,01,01001,1\nh3,01,01003,2\nh4,02,02001,5\nh5,02,02001,1\n"
HGEO = "state,county\n01,01001\n01,01003\n02,02001\n"
GROUPS = ["release", "hh.csv", "-o", "out.csv", "--unit", "household", "--levels", "state,county", "--size", "size",
          "--max-size", "6", "--geo", "hgeo.csv", "--epsilon", "1", "--seed", "0", "--quiet"]
PTS = "px,py\n" + "".join(f"{x},{y}\n" for x, y in np.random.default_rng(2).uniform(0, 8, (300, 2)))
POINTS = ["release", "p.csv", "-o", "out.csv", "--x", "px", "--y", "py", "--box", "0", "8", "0", "8", "--grid", "16x16",
          "--epsilon", "1", "--seed", "0", "--quiet"]


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    for name, text in (("geo.csv", GEO), ("c.csv", COUNTS), ("hh.csv", HH), ("hgeo.csv", HGEO), ("p.csv", PTS)):
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv, method, kind", [(TREE, "bootstrap", "estimate"), (GROUPS, "bootstrap", "estimate"),
                                                (POINTS, "noise", "exact")], ids=["tree", "group sizes", "points"])
def test_intervals_are_written_beside_the_same_values_and_stated_in_the_accounting(workdir, capsys, argv, method,
                                                                                  kind) -> None:
    assert main([*argv, "-o", "plain.csv"]) == 0
    assert main([*argv, "--intervals", "0.9", "--interval-draws", "40"]) == 0
    printed = capsys.readouterr().out
    assert f"intervals: 90 % {method}" in printed and "no privacy budget spent" in printed
    plain, with_iv = pd.read_csv("plain.csv"), pd.read_csv("out.csv")
    assert list(with_iv.columns[: len(plain.columns)]) == list(plain.columns)
    pd.testing.assert_frame_equal(with_iv[plain.columns], plain)  # the DP values are the same
    value = with_iv["value"] if "value" in with_iv.columns else with_iv["count"]
    assert (with_iv["lower"] <= value).all() and (value <= with_iv["upper"]).all()
    if kind == "estimate":  # integer, non-negative releases: integer, non-negative bounds
        assert (with_iv["lower"] >= 0).all()
    doc = json.loads(Path("out.csv.accounting.json").read_text())
    first = json.loads(Path("plain.csv.accounting.json").read_text())
    assert doc["intervals"]["method"] == method and doc["intervals"]["kind"] == kind
    assert doc["intervals"]["level"] == 0.9 and doc["intervals"]["privacy"].startswith("post-processing")
    assert doc["ledger"] == first["ledger"] and doc["guarantees"] == first["guarantees"]  # no budget
    assert "intervals" not in first


def test_a_mechanism_without_intervals_is_refused_before_the_input_is_read(workdir, capsys, monkeypatch) -> None:
    import hierdp.cli.trees as trees

    def spy(*args, **kwargs):
        raise AssertionError("the input was read")

    monkeypatch.setattr(trees, "read_tree_input", spy)
    assert main([*TREE, "--mechanism", "vanilla", "--intervals", "0.9"]) == 2
    err = capsys.readouterr().err
    assert "--intervals: VanillaGauss" in err and not Path("out.csv").exists()
    assert main([*TREE, "--interval-draws", "10"]) == 2
    assert "--interval-draws applies with --intervals" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "x"])
def test_bad_levels_are_refused(workdir, capsys, bad) -> None:
    assert main([*TREE, "--intervals", bad]) == 2
    assert "expected a level in (0, 1)" in capsys.readouterr().err and not Path("out.csv").exists()


def test_constraints_with_intervals_are_refused_before_anything(workdir, capsys) -> None:
    Path("caps.jsonl").write_text('{"kind": "bounds", "node": "IL/A", "upper": 600}\n')
    assert main([*TREE, "--constraints", "caps.jsonl", "--intervals", "0.9"]) == 2
    assert "not supported" in capsys.readouterr().err and not Path("out.csv").exists()


def test_compare_scores_intervals_and_refuses_them_on_points(workdir, capsys) -> None:
    import hierdp
    from hierdp.hierarchy import Hierarchy

    argv = ["compare", "c.csv", "-o", "cmp.csv", "--levels", "state,county", "--count", "pop", "--geo", "geo.csv",
            "--mechanisms", "inftda", "--seeds", "2", "--intervals", "0.9", "--interval-draws", "30", "--quiet"]
    assert main(argv) == 0
    frame = pd.read_csv("cmp.csv")
    geo = pd.read_csv("geo.csv")
    tree = Hierarchy.from_frame(pd.read_csv("c.csv"), levels=["state", "county"], count="pop", domain=geo)
    again = hierdp.compare(tree, mechanisms=["inftda"], seeds=2, intervals=0.9, interval_draws=30)
    assert np.allclose(frame["interval_coverage_pct"], again["interval_coverage_pct"])
    assert "interval_coverage_pct" in capsys.readouterr().out
    assert main(["compare", "p.csv", "-o", "cmp2.csv", "--x", "px", "--y", "py", "--box", "0", "8", "0", "8", "--grid",
                 "16x16", "--intervals", "0.9", "--quiet"]) == 2
    assert "range queries" in capsys.readouterr().err and not Path("cmp2.csv").exists()
