"""What ``hierdp release`` prints and writes depends on the data only through the DP values
(issue 20, item 2; P2, P10).

One table, one row per layout: the command runs on two neighbouring inputs (one person moved, or
added under unbounded neighbours and for points) with the same seed - or in secure mode - and
three things are compared:

* the **printed text**, with the DP values masked where they appear (per-level counts of non-zero
  released nodes, leaves released, level totals) and the timings masked (run diagnostics);
* the **written table**, every column but the released values (the tree layout lists every node
  of the declared domain, so its rows are public; an O/D or a data-adaptive output lists DP rows,
  compared by their columns);
* the **accounting file** beside it, every field but the time it was written and the hash of the
  table (which holds the values).

The input line used to print ``total=401`` vs ``total=400`` under ``--unbounded``, the number of
non-zero O/D pairs and trips, of persons, of points.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from hierdp.cli import main

GEO = "region,city\nA,a1\nA,a2\nA,a3\nB,b1\nB,b2\n"
COUNTS = {"a1": 40, "a2": 25, "b1": 30, "b2": 12}
REGION = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B"}


def _counts(moved: bool, added: bool) -> str:
    c = dict(COUNTS)
    if moved:
        c["a1"] -= 1
    if moved or added:
        c["a3"] = c.get("a3", 0) + 1  # a city that was empty
    return "region,city,people\n" + "".join(f"{REGION[k]},{k},{v}\n" for k, v in c.items())


def _trips(moved: bool, added: bool) -> str:
    rows = [("a1", "b1")] * 6 + [("a2", "b1")] * 4 + [("b2", "a1")] * 5
    if moved:
        rows = rows[1:]
    if moved or added:
        rows.append(("a3", "b2"))  # a pair that had no trip
    return "from,to\n" + "".join(f"{o},{d}\n" for o, d in rows)


def _households(moved: bool, added: bool) -> str:
    sizes = [3, 1, 2, 4, 1, 2]
    if moved or added:
        sizes[1] += 1  # one person joins household h1
    return "hh,state,size\n" + "".join(f"h{i},{'S1' if i < 3 else 'S2'},{s}\n" for i, s in enumerate(sizes))


def _persons(moved: bool, added: bool) -> str:
    people = [("p0", "h0", "S1"), ("p1", "h0", "S1"), ("p2", "h1", "S1"), ("p3", "h2", "S2")]
    if moved or added:
        people.append(("p4", "h2", "S2"))
    return "pid,hh,state\n" + "".join(f"{p},{h},{s}\n" for p, h, s in people)


def _points(moved: bool, added: bool) -> str:
    pts = [(1.0 + (i % 7), 1.0 + (i % 3)) for i in range(60)]
    if moved or added:
        pts.append((7.5, 3.5))  # in a corner cell that was empty
    return "x,y\n" + "".join(f"{x},{y}\n" for x, y in pts)


TREE = ["--levels", "region,city", "--count", "people", "--geo", "g.csv"]
TRIPS = ["--origin", "from", "--destination", "to", "--geo", "g.csv", "--geo-levels", "region,city"]
GROUPS = ["--unit", "hh", "--levels", "state", "--size", "size", "--max-size", "5", "--geo", "s.csv"]
PERSONS = ["--unit", "hh", "--person", "pid", "--levels", "state", "--max-size", "5", "--geo", "s.csv"]
POINTS = ["--x", "x", "--y", "y", "--box", "0", "8", "0", "4", "--grid", "4x8"]

# id -> (input writer, arguments, neighbour kind, rows of the output are public)
ROWS = {
    "tree-bounded": (_counts, [*TREE, "--epsilon", "1"], "moved", True),
    "tree-unbounded": (_counts, [*TREE, "--epsilon", "1", "--unbounded"], "added", True),
    "tree-unbounded-secure": (_counts, [*TREE, "--epsilon", "1", "--unbounded", "--secure"], "added", True),
    "tree-sh": (_counts, [*TREE, "--epsilon", "2", "--delta", "1e-3", "--mechanism", "sh"], "moved", True),
    "tree-vanilla": (_counts, [*TREE, "--rho", "0.5", "--mechanism", "vanilla"], "moved", True),
    "trips": (_trips, [*TRIPS, "--epsilon", "1"], "moved", False),
    "group-sizes": (_households, [*GROUPS, "--epsilon", "1"], "added", True),
    "group-sizes-persons": (_persons, [*PERSONS, "--epsilon", "1"], "added", True),
    "points-htf": (_points, [*POINTS, "--epsilon", "1", "--param", "stop_count=5"], "added", False),
    "points-quadtree": (_points, [*POINTS, "--epsilon", "1", "--mechanism", "quadtree", "--param", "height=2"],
                        "added", True),
}

_TIME = re.compile(r"\d+\.\d+ s\b|\b\d+\.\d{3}\b")


def _mask(text: str) -> str:
    """The printed text with DP values and timings masked (every other character compared)."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"^(\s+\d+ \S+\s+)[\d,]+(\s+)\S+$", r"\1<dp>\2<t>", line)  # per level: count, seconds
        line = re.sub(r"level totals: .*\(G = ", "level totals: <dp> (G = ", line)
        line = re.sub(r"released [\d,]+ leaves", "released <dp> leaves", line)
        line = re.sub(r"^wrote [\d,]+ rows \(one per leaf\)", "wrote <dp> rows (one per leaf)", line)
        out.append(_TIME.sub("<t>", line))
    return "\n".join(out)


def _run(tmp: Path, write, args: list[str], moved: bool, added: bool, capsys,
         monkeypatch) -> tuple[str, pd.DataFrame, dict]:
    tmp.mkdir()
    monkeypatch.chdir(tmp)
    (tmp / "in.csv").write_text(write(moved, added))
    (tmp / "g.csv").write_text(GEO)
    (tmp / "s.csv").write_text("state\nS1\nS2\n")
    seeded = [] if "--secure" in args else ["--seed", "0"]
    assert main(["release", str(tmp / "in.csv"), "-o", str(tmp / "out.csv"), *args, *seeded, "--quiet"]) == 0
    printed = capsys.readouterr().out.replace(str(tmp), "<dir>")
    table = pd.read_csv(tmp / "out.csv", dtype=str, keep_default_na=False)
    doc = json.loads((tmp / "out.csv.accounting.json").read_text())
    return printed, table, doc


@pytest.mark.parametrize("row", list(ROWS))
def test_neighbours_print_and_write_the_same_beyond_the_dp_values(row: str, tmp_path: Path, capsys,
                                                                 monkeypatch) -> None:
    write, args, kind, public_rows = ROWS[row]
    p0, t0, d0 = _run(tmp_path / "d", write, args, False, False, capsys, monkeypatch)
    p1, t1, d1 = _run(tmp_path / "n", write, args, kind == "moved", kind == "added", capsys, monkeypatch)
    assert _mask(p0) == _mask(p1)
    assert "input:" in p0 and not re.search(r"(total|persons|points|trips|nonzero_pairs)=\d", p0)
    value = [c for c in t0.columns if c == "value"]
    assert list(t0.columns) == list(t1.columns) and value
    if public_rows:
        assert t0.drop(columns=value).equals(t1.drop(columns=value))
    for doc in (d0, d1):
        doc.pop("written")
        doc.pop("file")  # the hash of the table, which holds the values
        if not public_rows:
            doc["table"]["rows"] = "<dp>"  # an O/D table lists released pairs, a partition its leaves
            doc["accounting"]["fields"]["details"].pop("noisy_n", None)
            for part in ("parameters",):
                doc[part].pop("objective", None)
        doc["parameters"].pop("objective", None)  # group sizes: the solve's objective on the noisy histograms
        for table in doc["release"]["tables"].values():  # a spatial tree's nodes: their values are DP values
            table["data"].pop("value")
        if not public_rows:  # a data-adaptive partition: its shape and noisy N are DP output
            doc["release"]["structure"].pop("details", None)
            doc["release"]["tables"] = "<dp>"
    if not public_rows and "htf" in row:  # HTF's ledger follows the height it chose from a noisy N
        for doc in (d0, d1):
            for k in ("accounting", "ledger", "guarantees"):
                doc.pop(k)
    assert d0 == d1
    assert d0["randomness"]["mode"] == ("secure" if "--secure" in args else "seeded")
