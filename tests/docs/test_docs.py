"""Every ```python block of the README and of docs/*.md runs as written (issue 20, item 14).

Each page runs in a fresh interpreter (as a reader's new session or script), in an empty temporary
folder, its blocks in order and sharing one namespace (a later block uses what an earlier one
built), as ``__main__`` (:mod:`docs.run_page`). A block must not raise; where the page shows what a
block prints - a plain ``` (or ```text) fence right after it, with at most a line such as
"prints" between - the printed text must be that fence's text, line for line (trailing spaces
aside). Pages edited by anyone are checked: a new block that does not run fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNER = Path(__file__).with_name("run_page.py")
#: a fence and what follows it: ```python ... ``` then, optionally, the shown output
_BLOCK = re.compile(r"^```python\n(.*?)^```[ \t]*\n", flags=re.S | re.M)
_SHOWN = re.compile(r"\s*(?:(?:it |which )?prints:?\s*\n)?\s*^```(?:text)?[ \t]*\n(.*?)^```", flags=re.S | re.M)


def shown_outputs(text: str) -> list[str | None]:
    """Per ```python block of a page, the output the page shows right after it (None: none shown)."""
    out: list[str | None] = []
    for m in _BLOCK.finditer(text):
        shown = _SHOWN.match(text, m.end())
        out.append(shown.group(1) if shown else None)
    return out


def _lines(text: str) -> list[str]:
    lines = [ln.rstrip() for ln in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_every_page_with_code_is_covered() -> None:
    with_code = [p.name for p in PAGES if "```python" in p.read_text(encoding="utf-8")]
    assert {"README.md", "scale.md", "spines.md", "costtable.md", "pgsr.md", "solvers.md"} <= set(with_code)


def test_shown_outputs_are_found() -> None:
    page = "```python\nprint(1)\n```\n\nprints\n\n```\n1\n```\n\n```python\nx = 2\n```\n\ntext\n\n```\n2\n```\n"
    assert shown_outputs(page) == ["1\n", None]


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in p.read_text(encoding="utf-8")],
                         ids=lambda p: p.name)
def test_the_python_blocks_of_the_page_run(page: Path, tmp_path: Path) -> None:
    if page.name in ("scale.md",) or "savefig(" in page.read_text(encoding="utf-8"):
        pytest.importorskip("matplotlib")
    result = tmp_path / "result.json"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(RUNNER), str(page), str(result)], cwd=work, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0 and result.exists(), proc.stderr[-3000:]
    runs = json.loads(result.read_text(encoding="utf-8"))
    text = page.read_text(encoding="utf-8")
    shown = shown_outputs(text)
    assert len(runs) >= 1
    for entry in runs:
        assert entry["ok"], f"{page.name}, python block {entry['index']} raised:\n{entry['error']}"
    assert len(runs) == len(shown)
    for entry, expected in zip(runs, shown, strict=True):
        if expected is not None:
            assert _lines(entry["stdout"]) == _lines(expected), (
                f"{page.name}, python block {entry['index']} prints other text than the page shows")
