"""The Python examples of docs/spatial.md run as written (in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "spatial.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_spatial_doc_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert "guarantee: 0.5-DP (pure; unbounded neighbours, m=1 records per person)" in out
    assert "(exact Fractions)" in out and "% MRE" in out
    assert namespace["rel"].check_consistency() == []
