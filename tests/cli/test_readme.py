"""The README's Python blocks run as written (issue 7, item 11), and print what their comments say.

Each ```python block is executed on its own (a fresh namespace, as a reader pasting it into a new
session would), as ``__main__``, in an empty temporary folder."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)

# what a block's comments promise, checked against what it prints (key: a line unique to the block)
PROMISES = {
    "Hierarchy.from_frame(df": ["guarantee: ", "implies (1, 1e-08)-DP", "True"],
    "add_linear": ["[100  58  40   2] 38.66", "[100  60  38   2]", "user linear constraints not supported"],
    "ProcessPoolExecutor": ["True"],
    "hierdp.compare(": ["inftda", "vanilla"],
    "census_like(": ["county   0         0", "htf mean relative error", "guarantee: 0.5-DP (pure"],
}


def test_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 4
    for key in PROMISES:
        assert sum(key in b for b in BLOCKS) == 1, key


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{k}" for k in range(len(BLOCKS))])
def test_readme_block_runs(block, tmp_path, monkeypatch) -> None:
    if "savefig(" in block:
        pytest.importorskip("matplotlib")  # the `plot` extra (also in `test`)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {"__name__": "__main__"})
    printed = out.getvalue()
    for key, expected in PROMISES.items():
        if key in block:
            for text in expected:
                assert text in printed, f"{text!r} not printed by the block with {key!r}:\n{printed}"
    if "release.parquet" in block:
        assert (tmp_path / "release.parquet").exists() and (tmp_path / "release.parquet.accounting.json").exists()
    if "savefig(" in block:
        assert (tmp_path / "compare.png").read_bytes()[:4] == b"\x89PNG"
