"""docs/solvers.md: its self-contained Python blocks run and print what their comments say, and its
limits table is the one ``hierdp.solvers.limits_text()`` prints."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem, registry

DOC = (Path(__file__).resolve().parents[2] / "docs" / "solvers.md").read_text(encoding="utf-8")


def fenced(text: str) -> list[tuple[str, str]]:
    """``(info string, body)`` of every fenced block, fences paired in order."""
    blocks, info, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                blocks.append((info, "\n".join(body) + "\n"))
                info = None
        elif info is not None:
            body.append(line)
    return blocks


BLOCKS = [b for info, b in fenced(DOC) if info == "python" and "import numpy" in b]


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setattr(registry, "_ENTRY_POINTS_SCANNED", True)


def run(block: str) -> tuple[str, dict]:
    out = io.StringIO()
    namespace = {"__name__": "__main__"}
    with contextlib.redirect_stdout(out):
        exec(compile(block, "docs/solvers.md", "exec"), namespace)
    return out.getvalue(), namespace


def test_blocks_example():
    (block,) = [b for b in BLOCKS if "add_query_terms" in b]
    out, ns = run(block)
    assert out.strip() == "['cumulative', 'linear_constraints', 'query_terms']"
    assert ns["p"].n_constraints == 3 and ns["p"].n_query_terms == 1


def test_plug_in_example_is_exact_and_refuses_what_it_cannot_do(clean_registry):
    (block,) = [b for b in BLOCKS if "class MeanShift" in b]
    out, ns = run(block)
    assert out.strip() == "[10.  2.  3.  5.] True"
    # by hand: 1 + 2 + 4 = 7, each child takes (10 - 7) / 3 = 1 more
    assert ns["sol"].values.tolist() == [10.0, 2.0, 3.0, 5.0]
    signed = Problem.from_groups([1.0, 2.0, 4.0], [0, 3], [10.0], objective="l2", integer=False)
    with pytest.raises(UnsupportedProblem, match="non-negativity"):
        hierdp.solve(signed, solver="mean_shift")
    assert hierdp.solvers.choose(signed).name != "mean_shift"  # auto takes the next capable one
    with pytest.raises(TypeError, match="unknown option"):
        hierdp.solve(ns["p"], solver="mean_shift", tolerance=1)


def test_limits_table_in_the_doc_is_current():
    (table,) = [b for info, b in fenced(DOC) if b.startswith("intopt: ")]
    # back ends missing on this machine are listed as such; the limits are the same
    current = hierdp.solvers.limits_text().replace("NOT available here", "available")
    assert table.strip() == current.strip(), "regenerate the table of docs/solvers.md: hierdp solvers --limits"
