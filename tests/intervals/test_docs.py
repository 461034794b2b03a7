"""docs/intervals.md: its examples run, and its coverage tables have the script's format."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "intervals.md"


def _tables(text: str) -> dict[str, list[str]]:
    """Section title -> the table's lines (header, rule, rows) under ``### Coverage ...``."""
    out = {}
    for m in re.finditer(r"### (Coverage [^\n]+)\n\n((?:\|[^\n]*\n?)+)", text):
        out[m.group(1)] = [line for line in m.group(2).splitlines() if line.startswith("|")]
    return out


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_doc_examples_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the page writes release.csv where it runs
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    ns: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), ns)  # our own documentation
    out = capsys.readouterr().out
    assert "estimate - post-processing of the release" in out and "bound" in out
    assert (ns["frame"]["lower"] <= ns["frame"]["value"]).all()


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_coverage_script_runs_tiny_and_prints_the_doc_tables():
    from experiments.intervals.coverage import main

    printed = _tables(main(["--tiny", "--no-csv"]) + "\n")
    documented = _tables(DOC.read_text(encoding="utf-8"))
    assert set(printed) == set(documented) == {"Coverage overall", "Coverage by true cell size", "Coverage by level"}
    for title, lines in documented.items():
        assert lines[:2] == printed[title][:2], title  # same columns, same rule
        width = lines[0].count("|")
        assert all(line.count("|") == width for line in lines), title  # every row fills the columns
        # the same families and methods (numbers differ: the doc is the full run)
        cells = {tuple(c.strip() for c in line.split("|")[1:3]) for line in lines[2:]}
        got = {tuple(c.strip() for c in line.split("|")[1:3]) for line in printed[title][2:]}
        assert {m for _, m in cells} == {m for _, m in got}, title
