"""``hierdp release --unit ...`` (group sizes): a good run checked against the library, and bad
input table-driven in the style of tests/cli/test_cli_bad_inputs.py: exit code, one stderr line
naming the culprit, nothing created or changed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main

HH = "household,state,county,size\nh1,01,01001,3\nh2,01,01001,1\nh3,01,01003,2\nh4,02,02001,5\nh5,02,02001,1\nh6,NA,NA1,2\n"
GEO = "state,county\n01,01001\n01,01003\n01,01005\n02,02001\nNA,NA1\n"
PEOPLE = "pid,hh,state,county\n1,a,01,01001\n2,a,01,01001\n3,b,01,01003\n4,c,02,02001\n"
BASE = ["release", "hh.csv", "-o", "out.csv", "--unit", "household", "--levels", "state,county", "--size", "size",
        "--max-size", "6", "--geo", "geo.csv", "--epsilon", "1", "--seed", "0", "--quiet"]
PERSONS = ["release", "p.csv", "-o", "out.csv", "--unit", "hh", "--person", "pid", "--levels", "state,county",
           "--max-size", "4", "--geo", "geo.csv", "--epsilon", "1", "--seed", "0", "--quiet"]


def _with(argv, **changes):
    out = list(argv)
    for flag, value in changes.items():
        opt = "--" + flag.replace("_", "-")
        if opt in out:
            i = out.index(opt)
            takes = i + 1 < len(out) and not out[i + 1].startswith("--")
            if value is None:
                del out[i:i + (2 if takes else 1)]
            else:
                out[i + 1] = value
        elif value is not None:
            out += [opt] if value == "" else [opt, value]
    return out


CASES = [
    ("no-region-domain", _with(BASE, geo=None), {}, r"refusing to release: the set of regions.*--geo.*--observed-domain-public"),
    ("no-k", _with(BASE, max_size=None), {}, r"largest size K.*--max-size.*--observed-max-size-public"),
    ("k-and-observed-k", _with(BASE, observed_max_size_public=""), {}, r"either --max-size or --observed-max-size-public"),
    ("k-too-small", _with(BASE, max_size="4"), {}, r"K=4 is smaller than an observed size: the unit at row 3 is larger"),
    ("top-code-without-k", _with(BASE, max_size=None, observed_max_size_public="", top_code=""), {},
     r"--top-code needs --max-size"),
    ("size-zero", BASE, {"hh.csv": HH.replace("h2,01,01001,1", "h2,01,01001,0")}, r"size 0 in column 'size', row 1"),
    ("size-negative", BASE, {"hh.csv": HH.replace("h2,01,01001,1", "h2,01,01001,-2")}, r"'size'.*row 1"),
    ("size-text", BASE, {"hh.csv": HH.replace("h2,01,01001,1", "h2,01,01001,two")}, r"'two'.*'size'.*row 1"),
    ("size-fraction", BASE, {"hh.csv": HH.replace("h2,01,01001,1", "h2,01,01001,1.5")}, r"'1.5'.*'size'.*row 1"),
    ("unit-in-two-regions", BASE, {"hh.csv": HH + "h1,02,02001,3\n"}, r"rows 0 and 6 put one unit in two regions"),
    ("unit-twice", BASE, {"hh.csv": HH + "h1,01,01001,3\n"}, r"rows 0 and 6 list the same unit"),
    ("person-in-two-units", PERSONS, {"p.csv": PEOPLE + "1,c,02,02001\n"}, r"rows 0 and 4 put one person in two units"),
    ("empty-input", BASE, {"hh.csv": "household,state,county,size\n"}, r"no rows"),
    ("region-outside-domain", BASE, {"hh.csv": HH + "h9,03,03001,1\n"}, r"row 6: its path is not in the declared domain"),
    ("unknown-size-column", _with(BASE, size="members"), {}, r"column 'members'|'members'"),
    ("unknown-unit-column", _with(BASE, unit="hid"), {}, r"unknown column 'hid'"),
    ("no-levels", _with(BASE, levels=None), {}, r"needs --levels"),
    ("size-and-person", _with(BASE, person="pid"), {}, r"--size .* or --person .*not both"),
    ("same-column-twice", _with(BASE, size="household"), {}, r"column 'household' is given for two roles"),
    ("rho", _with(BASE, epsilon=None, rho="0.5"), {}, r"pure epsilon-DP.*not --rho"),
    ("no-epsilon", _with(BASE, epsilon=None), {}, r"give --epsilon"),
    ("zero-epsilon", _with(BASE, epsilon="0"), {}, r"--epsilon"),
    ("unbounded", _with(BASE, unbounded=""), {}, r"--unbounded, --contributions.*do not apply to group sizes"),
    ("contributions", _with(BASE, contributions="2"), {}, r"do not apply to group sizes"),
    ("wrong-mechanism", _with(BASE, mechanism="inftda"), {}, r"--mechanism inftda does not release group sizes"),
    ("solver-cannot-honour-cumulative", _with(BASE, mechanism="pgsr_mhc", solver="costtable"), {},
     r"cannot honour the cumulative"),
    ("costtable-region-totals", _with(BASE, region_totals_public=""), {}, r"region_totals_public"),
    ("trips-flag", _with(BASE, origin="state"), {}, r"--origin does not apply to the group-size layout"),
    ("geo-and-observed", _with(BASE, observed_domain_public=""), {}, r"either --geo .* or --observed-domain-public"),
    ("geo-lacks-level", BASE, {"geo.csv": "state\n01\n02\n"}, r"--geo geo.csv: no level column 'county'"),
    ("seed-and-secure", _with(BASE, secure=""), {}, r"--seed and --secure exclude each other"),
    ("output-exists", BASE, {"out.csv": "old\n"}, r"out.csv.*exists.*--overwrite"),
    # memory, bounded from public parameters (issue 20, item 11): before reading, then before any noise
    ("max-size-beyond-memory", _with(BASE, max_size="5000000"), {},
     r"--max-size 5,000,000 over at least 3 regions \(one per level\) would take about .* GiB with --mechanism "
     r"pgsr_mdp .* more than the 4.0 GiB"),
    ("max-size-beyond-memory-regions", _with(BASE, max_size="1200000"), {},
     r"--max-size 1,200,000 over \d+ regions would take about .* GiB"),
]


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): ("dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*"))}


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    (tmp_path / "hh.csv").write_text(HH)
    (tmp_path / "geo.csv").write_text(GEO)
    (tmp_path / "p.csv").write_text(PEOPLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name, argv, files, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_group_size_input(workdir, capsys, name, argv, files, pattern):
    for fname, content in files.items():
        (workdir / fname).write_text(content)
    before = _snapshot(workdir)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert __import__("re").search(pattern, lines[0]), lines[0]
    assert _snapshot(workdir) == before


def test_a_release_matches_the_library(workdir, capsys):
    from hierdp.hierarchy.count_of_counts import CountOfCounts
    from hierdp.mechanisms import create

    assert main(BASE) == 0
    out = capsys.readouterr().out
    assert "randomness: seeded" in out and "#CV): 0" in out and "group-size neighbours" in out
    got = pd.read_csv(workdir / "out.csv", dtype={"node": str, "parent": str})
    df = pd.read_csv(workdir / "hh.csv", dtype=str, keep_default_na=False).astype({"size": int})
    data = CountOfCounts.from_units(df, unit="household", levels=["state", "county"], size="size", K=6,
                                    domain=pd.read_csv(workdir / "geo.csv", dtype=str, keep_default_na=False))
    rel = create("pgsr_mdp", epsilon=1.0).release(data, seed=0)
    assert np.array_equal(got["value"].to_numpy(), rel.to_frame()["value"].to_numpy())
    assert len(got) == data.n_regions * 6 and set(got["size"]) == set(range(1, 7))
    # every level sums to G = 6 and children sum to parents
    assert (got.groupby("level")["value"].sum() == 6).all()


def test_persons_layout_and_observed_statements(workdir, capsys):
    argv = _with(PERSONS, max_size=None, observed_max_size_public="", geo=None, observed_domain_public="",
                 mechanism="pgsr_chain_dp")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "largest group size K" in out and "observed in the input is assumed public" in out


def test_a_budget_too_small_to_draw_is_refused_before_anything_is_written(tmp_path):
    # found by review: epsilon 1e-300 wrote the true histograms labelled 1e-300-DP
    from hierdp.cli import main

    (tmp_path / "hh.csv").write_text("hh,st,co,size\n1,A,a1,2\n2,A,a2,1\n3,B,b1,3\n")
    (tmp_path / "geo.csv").write_text("st,co\nA,a1\nA,a2\nB,b1\n")
    out = tmp_path / "r.csv"
    code = main(["release", str(tmp_path / "hh.csv"), "-o", str(out), "--unit", "hh", "--levels", "st,co",
                 "--size", "size", "--max-size", "5", "--geo", str(tmp_path / "geo.csv"), "--epsilon", "1e-300",
                 "--seed", "0"])
    assert code == 2 and not out.exists()
