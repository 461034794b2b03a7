"""docs/spines.md, the Census TopDown sections: the PL94 block runs and prints what its comment says."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

DOC = (Path(__file__).resolve().parents[3] / "docs" / "spines.md").read_text(encoding="utf-8")


def _blocks(text: str) -> list[str]:
    out, body, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                out.append("\n".join(body) + "\n")
            inside, body = not inside and line[3:].strip() == "python", []
            continue
        if inside:
            body.append(line)
    return out


def test_pl94_block_runs_and_prints_its_comment():
    (block,) = [b for b in _blocks(DOC) if "pl94_strategy" in b]
    buf = io.StringIO()
    ns: dict = {}
    with contextlib.redirect_stdout(buf):
        exec(compile(block, "docs/spines.md", "exec"), ns)
    printed = buf.getvalue().strip()
    comment = next(line for line in block.splitlines() if line.startswith("print(")).split("#", 1)[1].strip()
    assert printed == comment
    assert set(ns["constraints"]) >= {"upper_zero", "gq_lower", "structural_zero_cells"}
