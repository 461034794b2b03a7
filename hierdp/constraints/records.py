"""Entries as JSON-able records and back: the one encoding behind the file format and the digest.

A record is a dict with ``kind`` and the entry's fields (see docs/constraints.md for the format).
Node references are written as a string, a list (a tuple of level values; also any non-string
name) or an object (level columns); terms as an object ``{name: coefficient}`` when every node is
a plain string, else as a list of ``[node, coefficient]`` pairs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from hierdp.constraints.entries import (
    KINDS,
    ByLevels,
    CellRule,
    Entry,
    Invariant,
    LinearRow,
    NodeBounds,
    StructuralZero,
    cells_of,
    levels_of,
    node_ref,
    number,
    sides,
    terms_of,
)
from hierdp.constraints.errors import ConstraintError

__all__ = ["digest", "entry_from_record", "record_of"]

#: the keys each kind accepts (anything else is refused: a typo such as "uper" must not vanish)
_KEYS = {
    "linear": {"kind", "name", "terms", "lower", "upper", "cells"},
    "bounds": {"kind", "name", "node", "lower", "upper", "cells"},
    "zero": {"kind", "name", "node", "cells"},
    "invariant": {"kind", "name", "node", "value", "cells"},
    "cell_rule": {"kind", "name", "terms", "lower", "upper", "levels", "nodes"},
}
_REQUIRED = {"linear": {"terms"}, "bounds": {"node"}, "zero": {"node"}, "invariant": {"node", "value"},
             "cell_rule": {"terms"}}


def _ref_json(ref: Any) -> Any:
    if isinstance(ref, ByLevels):
        return {k: v for k, v in ref.items}
    if isinstance(ref, tuple):
        return list(ref)
    return ref


def _terms_json(terms: Iterable[tuple[Any, Any]]) -> Any:
    terms = list(terms)
    if all(isinstance(node, str) for node, _ in terms):
        return {node: coef for node, coef in terms}
    return [[_ref_json(node), coef] for node, coef in terms]


def record_of(entry: Entry) -> dict[str, Any]:
    """The JSON-able record of an entry (None fields left out)."""
    out: dict[str, Any] = {"kind": entry.kind, "name": entry.name}
    if isinstance(entry, LinearRow):
        out["terms"] = _terms_json(entry.terms)
        out.update({k: v for k, v in (("lower", entry.lower), ("upper", entry.upper)) if v is not None})
        if entry.cells is not None:
            out["cells"] = [_ref_json(c) for c in entry.cells]
    elif isinstance(entry, NodeBounds):
        out["node"] = _ref_json(entry.node)
        out.update({k: v for k, v in (("lower", entry.lower), ("upper", entry.upper)) if v is not None})
        if entry.cells is not None:
            out["cells"] = [_ref_json(c) for c in entry.cells]
    elif isinstance(entry, StructuralZero):
        out["node"] = _ref_json(entry.node)
        if entry.cells is not None:
            out["cells"] = [_ref_json(c) for c in entry.cells]
    elif isinstance(entry, Invariant):
        out["node"] = _ref_json(entry.node)
        out["value"] = entry.value
        if entry.cells is not None:
            out["cells"] = [_ref_json(c) for c in entry.cells]
    elif isinstance(entry, CellRule):
        out["terms"] = _terms_json(entry.terms)
        out.update({k: v for k, v in (("lower", entry.lower), ("upper", entry.upper)) if v is not None})
        if entry.levels is not None:
            out["levels"] = list(entry.levels)
        if entry.nodes is not None:
            out["nodes"] = [_ref_json(n) for n in entry.nodes]
    else:  # pragma: no cover - every Entry type is handled above
        raise TypeError(f"not a constraint entry: {entry!r}")
    return out


def entry_from_record(rec: Any, *, default_name: str, where: str | None = None) -> Entry:
    """The entry of a record, checked (messages name ``where``, e.g. ``line 3``)."""
    at = f" ({where})" if where else ""
    if not isinstance(rec, Mapping):
        raise ConstraintError(f"entry{at}: expected a JSON object, got {type(rec).__name__}")
    kind = rec.get("kind")
    if kind not in KINDS:
        raise ConstraintError(f"entry{at}: unknown kind {kind!r}; kinds are {', '.join(KINDS)}")
    name = rec.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConstraintError(f"entry{at}: name must be a non-empty string, got {name!r}")
    label = f"{kind} {name!r}{at}"
    unknown = sorted(set(rec) - _KEYS[kind])
    if unknown:
        raise ConstraintError(f"{label}: unknown key {unknown[0]!r}; a {kind} entry has "
                              f"{', '.join(sorted(_KEYS[kind]))}")
    missing = sorted(_REQUIRED[kind] - set(rec))
    if missing:
        raise ConstraintError(f"{label}: missing {missing[0]!r}")
    if kind == "linear":
        lo, hi = sides(rec.get("lower"), rec.get("upper"), label)
        return LinearRow(name, terms_of(rec["terms"], label), lo, hi, where, cells_of(rec.get("cells"), label))
    if kind == "bounds":
        lo, hi = sides(rec.get("lower"), rec.get("upper"), label)
        return NodeBounds(name, node_ref(rec["node"], label), lo, hi, where, cells_of(rec.get("cells"), label))
    if kind == "zero":
        return StructuralZero(name, node_ref(rec["node"], label), cells_of(rec.get("cells"), label), where)
    if kind == "invariant":
        return Invariant(name, node_ref(rec["node"], label), number(rec["value"], f"{label}: value"),
                         cells_of(rec.get("cells"), label), where)
    lo, hi = sides(rec.get("lower"), rec.get("upper"), label)
    levels = levels_of(rec.get("levels"), label)
    nodes = rec.get("nodes")
    if nodes is not None:
        if not isinstance(nodes, (list, tuple)) or not nodes:
            raise ConstraintError(f"{label}: nodes must be a non-empty list of nodes")
        nodes = tuple(node_ref(n, label) for n in nodes)
    if (levels is None) == (nodes is None):
        raise ConstraintError(f"{label}: give the geounits it holds in, either levels or nodes (one of them)")
    return CellRule(name, terms_of(rec["terms"], label), lo, hi, levels, nodes, where)


def digest(entries: Iterable[Entry]) -> str:
    """SHA-256 of the entries' canonical records (order-sensitive; the ``where`` of an entry is not
    part of it): a stable fingerprint of a constraint set, stated in releases."""
    h = hashlib.sha256()
    for e in entries:
        h.update(json.dumps(record_of(e), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
