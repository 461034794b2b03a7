"""The constraint file: JSON Lines, one entry per line (docs/constraints.md has the format).

::

    {"format": "hierdp.constraints", "version": 1}
    {"kind": "linear", "name": "cap", "terms": {"IL/COOK": 1, "IN/LAKE": 1}, "upper": 5850000}
    {"kind": "bounds", "name": "lake", "node": ["IL", "LAKE"], "lower": 500000}
    # comments and blank lines are skipped

Every error names the line (``line 3: ...``); nothing is read past the first bad line. NaN and
Infinity (which Python's ``json`` would accept) and keys repeated inside one object are refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Any

from hierdp.constraints.entries import Entry
from hierdp.constraints.errors import ConstraintError
from hierdp.constraints.records import entry_from_record, record_of

__all__ = ["FORMAT", "VERSION", "read_entries", "write_entries"]

FORMAT = "hierdp.constraints"
VERSION = 1


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed (omit a bound to leave that side open)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def parse_line(text: str, where: str) -> Any:
    """One JSON value, with errors that name ``where`` (and the column)."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ConstraintError(f"{where}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise ConstraintError(f"{where}: {exc}") from None


def read_entries(path: str | os.PathLike[str]) -> Iterator[Entry]:
    """The entries of a constraint file (JSON Lines), one line at a time (so that a caller adding
    them stops at the first bad line, whatever is wrong with it).

    Raises:
        ConstraintError: the file is missing or unreadable, or a line is bad (named: ``line 3: ...``).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConstraintError(f"constraint file not found: {p}") from None
    except IsADirectoryError:
        raise ConstraintError(f"constraint file {p} is a directory") from None
    except UnicodeDecodeError as exc:
        raise ConstraintError(f"constraint file {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConstraintError(f"constraint file {p}: {exc.strerror or exc}") from None
    return _entries(text)


def _entries(text: str) -> Iterator[Entry]:
    first = True
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"line {number}"
        rec = parse_line(stripped, where)
        if first and isinstance(rec, dict) and "format" in rec:
            first = False
            _check_header(rec, where)
            continue
        first = False
        yield entry_from_record(rec, default_name=where, where=where)


def _check_header(rec: dict[str, Any], where: str) -> None:
    if rec.get("format") != FORMAT:
        raise ConstraintError(f"{where}: format {rec.get('format')!r} is not {FORMAT!r}")
    if rec.get("version") != VERSION:
        raise ConstraintError(f"{where}: version {rec.get('version')!r} is not supported (this hierdp reads "
                              f"version {VERSION})")
    extra = sorted(set(rec) - {"format", "version"})
    if extra:
        raise ConstraintError(f"{where}: unknown key {extra[0]!r} in the header")


def write_entries(entries: Iterable[Entry], path: str | os.PathLike[str]) -> Path:
    """Write ``entries`` as JSON Lines (a header line, then one entry per line), atomically; returns
    the path. Reading the file back gives equal entries (:func:`read_entries`)."""
    p = Path(path)
    lines = [json.dumps({"format": FORMAT, "version": VERSION})]
    lines += [json.dumps(record_of(e), ensure_ascii=False, allow_nan=False) for e in entries]
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p
