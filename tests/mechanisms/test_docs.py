"""The Python examples of docs/mechanisms.md run as written (in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hierdp.mechanisms import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "mechanisms.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_mechanisms_doc_examples_run(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_EXTRA", dict(registry._EXTRA))  # the example registers a mechanism
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    out = capsys.readouterr().out
    assert "mechanism: InfTDA (solver intopt)" in out
    assert "0.5-DP (pure; bounded neighbours (n public), m=1 records per person)" in out
    assert namespace["rel"].check_consistency() == []
