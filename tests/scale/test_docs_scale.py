"""The counter-noise example of docs/scale.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_the_counter_noise_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)
    assert namespace["noise"].shape == (4,)
