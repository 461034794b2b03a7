"""Run the ```python blocks of one Markdown page, in order, in one namespace (not a test module).

``python run_page.py PAGE RESULT.json`` - run from the folder the blocks should write into (the test
gives each page an empty temporary folder). Each block is compiled under the page's name and
executed as ``__main__`` (so ``if __name__ == "__main__":`` blocks run, as in a reader's script),
its stdout captured; the run stops at the first block that raises. The result file lists, per
block run, ``{"index", "ok", "stdout", "error"}``.

This file is the worker processes' main script too (``engine="processes"`` imports it again in
each worker): everything runs under the ``__main__`` guard below.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import traceback
from pathlib import Path

FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def python_blocks(text: str) -> list[str]:
    """The page's ```python blocks, in order."""
    return [m.group(1) for m in FENCE.finditer(text)]


def run(page: Path) -> list[dict]:
    namespace: dict = {"__name__": "__main__", "__file__": str(page)}
    results = []
    for index, block in enumerate(python_blocks(page.read_text(encoding="utf-8"))):
        out = io.StringIO()
        entry: dict = {"index": index, "ok": True, "stdout": "", "error": None}
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"{page.name} (python block {index})", "exec"), namespace)
        except BaseException:
            entry["ok"] = False
            entry["error"] = traceback.format_exc(limit=8)
        entry["stdout"] = out.getvalue()
        results.append(entry)
        if not entry["ok"]:
            break
    return results


if __name__ == "__main__":
    result = run(Path(sys.argv[1]))
    Path(sys.argv[2]).write_text(json.dumps(result), encoding="utf-8")
