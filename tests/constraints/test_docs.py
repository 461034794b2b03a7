"""Every code block of docs/constraints.md runs as written, in order, in one namespace: Python
blocks are executed, JSON Lines blocks are read as constraint files, ``hierdp`` command lines are
run through the CLI (exit 0). The figures quoted right after a block are checked against its output."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hierdp.cli import main
from hierdp.constraints import Constraints

DOC = Path(__file__).resolve().parents[2] / "docs" / "constraints.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_constraints_doc_blocks_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```(python|jsonl|bash|)\n(.*?)```", text, flags=re.S)
    kinds = [k for k, _ in blocks]
    assert kinds.count("python") >= 12 and "jsonl" in kinds and "bash" in kinds
    namespace: dict = {}
    outputs = []
    for kind, body in blocks:
        if kind == "python":
            exec(compile(body, str(DOC), "exec"), namespace)
            outputs.append(capsys.readouterr().out)
        elif kind == "jsonl":
            path = tmp_path / "doc.jsonl"
            path.write_text(body, encoding="utf-8")
            entries = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("#") and '"kind"' in ln]
            assert len(Constraints.read(path)) == len(entries)
        elif kind == "bash":
            for line in body.splitlines():
                if line.startswith("hierdp "):
                    assert main(shlex.split(line)[1:]) == 0, line
            capsys.readouterr()
    first = outputs[0]
    # the output shown under the first block is what it prints
    shown = re.search(r"```\n(      node  value.*?)```", text, flags=re.S).group(1)
    assert first.strip() == shown.strip()
    assert outputs[2].strip() == "('IL cap', 'Cook floor', 'Lake floor')"  # as the comment says
    assert outputs[3].splitlines() == ["['cap']", "['cap', 'cap (carried to level1)']"]
    assert outputs[4].startswith("('tight',) zcdp(rho=0.0132154)")
    assert outputs[5].splitlines()[1].startswith("failsafe: constraint 'tight' relaxed at level 2 (county)")
    # group sizes and the spatial step: each block's printed lines are the ones shown under it
    shown_blocks = re.findall(r"```python\n.*?```\n\n```\n(.*?)```", text, flags=re.S)
    assert outputs[6].strip() == shown_blocks[1].strip()                  # group sizes
    assert "entry 'N1 small': North/N1 <= 5 cannot hold" in outputs[7]
    assert "public group totals of the regions" in outputs[7]
    assert outputs[8].strip() == shown_blocks[2].strip()                  # spatial
    assert outputs[9].startswith("True ['gq edit']")
    assert outputs[10].strip() == shown_blocks[3].strip()                 # a histogram engine's calls
    assert outputs[11].splitlines()[0] == "[ 0  0 -1]"
