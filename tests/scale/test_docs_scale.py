"""Every Python example of docs/scale.md runs as written (in order, one namespace, in a fresh
folder), and prints what the page shows after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale.md"


def _examples(text: str) -> list[tuple[str, str | None]]:
    """``(code, shown output or None)`` per Python block: the output is the plain block right after."""
    out = []
    for m in re.finditer(r"```python\n(.*?)```\n(?:\n```\n(.*?)```)?", text, flags=re.S):
        out.append((m.group(1), m.group(2)))
    return out


@pytest.mark.skipif(not DOC.exists(), reason="docs/ not present")
def test_every_example_of_the_scale_page_runs_and_prints_what_it_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    examples = _examples(DOC.read_text(encoding="utf-8"))
    assert len(examples) >= 6
    namespace: dict = {"__name__": "__main__"}
    for code, shown in examples:
        capsys.readouterr()
        exec(compile(code, str(DOC), "exec"), namespace)
        printed = capsys.readouterr().out
        if shown is not None:
            assert printed.strip() == shown.strip(), code
    assert namespace["noise"].shape == (4,)
