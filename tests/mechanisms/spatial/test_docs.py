"""The Python examples of docs/spatial.md run as written (in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "spatial.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_spatial_doc_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    out = capsys.readouterr().out
    assert "guarantee: 0.5-DP (pure; unbounded neighbours, m=1 records per person)" in out
    assert "(exact Fractions)" in out and "% MRE" in out
    assert namespace["rel"].check_consistency() == []


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_spatial_doc_command_lines_run(tmp_path, monkeypatch, capsys):
    """Every ``hierdp release`` line of docs/spatial.md runs on a points file with the columns it names."""
    import shlex

    import numpy as np
    import pandas as pd

    from hierdp.cli import main

    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = [shlex.split(c) for b in blocks for c in b.replace("\\\n", " ").splitlines()
                if c.startswith("hierdp release")]
    assert len(commands) >= 2
    rng = np.random.default_rng(0)
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"longitude": rng.uniform(-125, -66, 2000), "latitude": rng.uniform(24, 50, 2000)}).to_csv(
        "stops.csv", index=False)
    for argv in commands:
        assert main(argv[1:]) == 0, capsys.readouterr().err
        out = argv[argv.index("-o") + 1]
        frame = pd.read_parquet(out) if out.endswith(".parquet") else pd.read_csv(out)
        assert {"lon_min", "lat_max", "value"} <= set(frame.columns)
