"""A release on disk: its published table, and beside it the accounting that travels with it.

:func:`save_release` (``release.save(path)``) writes

* ``path`` - the release's table (:meth:`~hierdp.release.BaseRelease.to_frame`), as CSV (``.csv``,
  ``.csv.gz``) or Parquet (``.parquet``, ``.pq``);
* ``path.accounting.json`` - the **accounting document** (:func:`release_document`): the mechanism
  and its parameters, every guarantee and the conversions behind it, the ledger (one entry per
  spend, with its noise), what the release assumed public, the user's constraints, the randomness
  (``secure``, or ``seeded`` with its seed), the versions of hierdp and of its back ends, what is
  needed to read the table back into the same release object, and the table's SHA-256;
* for Parquet, the same document (without the hash of the file itself) in the file's key-value
  metadata under ``hierdp.release``, so the table never travels without its accounting.

Both files are written to hidden temporary files beside their targets, flushed to disk and renamed
into place (the document first): a reader never sees half a file, and a document whose SHA-256 does
not match the table beside it (a crash between the two renames, or a file edited since) is refused
by :func:`load_release`. The format is described field by field in ``docs/privacy.md``.

:func:`load_release` (``hierdp.load_release``) reads the pair back into a release equal to the one
saved (``==``: same type, table, accounting, parameters and structure; run diagnostics -
``timings``, ``solver_stats`` - are not part of a saved release: their size can follow the private
counts, so they are never written beside the data).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hierdp.release.encoding import decode, encode, hierdp_class

__all__ = ["ACCOUNTING_SUFFIX", "FORMAT", "PARQUET_KEY", "VERSION", "ReleaseFileError", "accounting_path",
           "load_release", "release_document", "save_release", "write_atomic"]

FORMAT = "hierdp-release"
VERSION = 1
#: the accounting document's name is the table's plus this suffix
ACCOUNTING_SUFFIX = ".accounting.json"
#: the Parquet key-value metadata key holding the document
PARQUET_KEY = b"hierdp.release"
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv.gz"}


class ReleaseFileError(ValueError):
    """A saved release that cannot be read back: no accounting beside it, a table that is not the
    one its accounting describes, or a file of another format."""


def accounting_path(path: str | Path) -> Path:
    """Where the accounting of the table ``path`` is written: ``path`` + ``.accounting.json``."""
    p = Path(path)
    return p.with_name(p.name + ACCOUNTING_SUFFIX)


def _format_of(path: Path) -> str:
    name = path.name.lower()
    for suffix in (".csv.gz", ".parquet", ".pq", ".csv"):
        if name.endswith(suffix) and name != suffix:
            return _SUFFIXES[suffix]
    raise ReleaseFileError(f"{path.name}: a release is saved as .csv, .csv.gz, .parquet or .pq")


# ---------------------------------------------------------------------------------------- the document
def release_document(release: Any, *, frame: pd.DataFrame | None = None, table: bool = True,
                     intervals: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The accounting document of ``release`` (plain JSON; see the module docstring and
    ``docs/privacy.md`` for every field). ``frame``: the table written beside it (default
    ``release.to_frame()``), described under ``"table"``; ``table=False`` leaves out what only reading
    a table back needs (``"release"``, ``"table"``: ``hierdp compare`` records accounting only);
    ``intervals``: how the table's ``lower`` / ``upper`` columns were computed
    (``frame.attrs["intervals"]`` of ``release.intervals(...)``), recorded under ``"intervals"``."""
    from hierdp._version import __version__, backend_versions
    from hierdp.privacy.domain import OBSERVED_DOMAIN_ASSUMPTION

    acc = release.accounting
    params = dict(getattr(release, "params", {}) or {})
    acc_dict = acc.to_dict()
    mode = params.get("randomness")
    seed = params.get("seed")
    details = dict(acc.details)
    observed = any(a.startswith(OBSERVED_DOMAIN_ASSUMPTION) or "assumed public" in a for a in acc.assumptions)
    document: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hierdp": __version__,
        "mechanism": release.mechanism,
        "solver": getattr(release, "solver", None),
        "guarantee": acc.text(),
        "randomness": {
            "mode": mode,
            "seed": None if seed is None else str(seed),
            "publishable": mode == "secure",
            "note": ("OS randomness and exact samplers: suitable for publication" if mode == "secure" else
                     "seeded randomness: reproducible from the seed, so NOT for publication (anyone with the seed "
                     "can subtract the noise)" if mode == "seeded" else "not recorded"),
        },
        "versions": encode(params.get("versions") or backend_versions()),
        "guarantees": encode([g.as_dict() for g in acc.guarantees]),
        "conversion": {"method": acc.conversion, "epsilon_target": encode(acc.epsilon_target), "delta": encode(acc.delta)},
        "unit": encode(acc.unit.as_dict() if acc.unit is not None else None),
        "ledger": encode([s.as_dict() for s in acc.spends]),
        "public": {"domain": ("read from the input and assumed public by the user (see assumptions)" if observed
                              else "declared (public input beside the data)"),
                   "neighbours": acc.unit.describe() if acc.unit is not None else None,
                   "assumptions": list(acc.assumptions), "notes": list(acc.notes),
                   "constraints": encode(details.get("constraints"))},
        "parameters": encode(params),
        "accounting": acc_dict,
    }
    if intervals is not None:
        document["intervals"] = encode(dict(intervals))
    if table:
        frame = release.to_frame() if frame is None else frame
        document["release"] = {"type": f"{type(release).__module__}:{type(release).__qualname__}",
                               "structure": release._saved_structure(),
                               "tables": {name: _table_json(t) for name, t in release._saved_tables().items()}}
        document["table"] = {"rows": len(frame), "columns": [_column_json(frame, c) for c in frame.columns]}
    return document


def _column_json(frame: pd.DataFrame, column: Any) -> dict[str, Any]:
    """How a CSV reader gets a column back exactly: name, dtype, whether it has missing cells (a
    CSV writes them empty), and a categorical column's categories in order."""
    col = frame[column]
    out: dict[str, Any] = {"name": str(column), "dtype": str(col.dtype), "missing": bool(col.isna().any())}
    if isinstance(col.dtype, pd.CategoricalDtype):
        out["categories"] = encode(col.cat.categories.to_numpy(dtype=object))
        out["categories_dtype"] = str(col.cat.categories.dtype)
        out["ordered"] = bool(col.cat.ordered)
    return out


def _table_json(frame: pd.DataFrame) -> dict[str, Any]:
    return {"columns": [[str(c), str(frame[c].dtype)] for c in frame.columns],
            "data": {str(c): encode(frame[c].to_numpy()) for c in frame.columns}}


def _table_from_json(obj: Mapping[str, Any]) -> pd.DataFrame:
    data = {c: decode(obj["data"][c]) for c, _ in obj["columns"]}
    return pd.DataFrame(data)[[c for c, _ in obj["columns"]]]


def identity(release: Any) -> dict[str, Any]:
    """What two equal releases share (``==``): type, mechanism, structure, extra tables,
    parameters and accounting, in their exact JSON form."""
    return {"type": f"{type(release).__module__}:{type(release).__qualname__}",
            "mechanism": release.mechanism, "structure": release._saved_structure(),
            "tables": {k: _table_json(v) for k, v in release._saved_tables().items()},
            "params": encode(dict(getattr(release, "params", {}) or {})),
            "accounting": release.accounting._fields_json()}


# ---------------------------------------------------------------------------------------- writing
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary(target: Path) -> tuple[int, Path]:
    folder = target.parent if str(target.parent) else Path(".")
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=folder)
    return fd, Path(name)


def _write_temp(target: Path, write: Callable[[Any], None]) -> Path:
    """``write(file)`` into a temporary file beside ``target``, flushed to disk; its path."""
    fd, tmp = _temporary(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(target: Path, data: bytes) -> None:
    """``data`` into ``target`` through a temporary file beside it and one rename."""
    tmp = _write_temp(target, lambda fh: fh.write(data))
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_table(frame: pd.DataFrame, fh: Any, fmt: str, document: dict[str, Any]) -> None:
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[PARQUET_KEY] = json.dumps(document).encode("utf-8")
        pq.write_table(table.replace_schema_metadata(meta), fh)
    else:
        frame.to_csv(fh, index=False, compression="gzip" if fmt == "csv.gz" else None)


def save_release(release: Any, path: str | Path, *, overwrite: bool = False,
                 frame: pd.DataFrame | None = None, intervals: Mapping[str, Any] | None = None) -> Path:
    """Write ``release``'s table to ``path`` and its accounting document beside it (see the module
    docstring); returns the document's path.

    Args:
        overwrite: replace existing files (else :class:`FileExistsError`, before anything is written).
        frame: the table to write (default ``release.to_frame()``; the command line renames a point
            release's coordinate columns through the release itself, not here).
        intervals: how the frame's ``lower`` / ``upper`` columns were computed, stated in the
            document (``"intervals"``); default: the frame's ``attrs["intervals"]`` (a frame from
            ``release.intervals(level)`` carries it).

    Raises:
        ReleaseFileError: an unknown suffix.
        FileExistsError: ``path`` or its document exists and ``overwrite`` is False.
    """
    out = Path(path)
    fmt = _format_of(out)
    side = accounting_path(out)
    for target in (out, side):
        if target.exists() and not overwrite:
            raise FileExistsError(f"{target} already exists (pass overwrite=True to replace it)")
    frame = release.to_frame() if frame is None else frame
    if intervals is None:
        intervals = frame.attrs.get("intervals")
    document = release_document(release, frame=frame, intervals=intervals)
    tmp_table = _write_temp(out, lambda fh: _write_table(frame, fh, fmt, document))
    tmp_doc: Path | None = None
    new_side = not side.exists()
    placed = False
    try:
        document["file"] = {"name": out.name, "format": fmt, "bytes": tmp_table.stat().st_size,
                            "sha256": _sha256(tmp_table)}
        text = json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8")
        tmp_doc = _write_temp(side, lambda fh: fh.write(text))
        os.replace(tmp_doc, side)  # the document first: a table never sits there without its accounting
        tmp_doc, placed = None, True
        os.replace(tmp_table, out)
    except BaseException:
        tmp_table.unlink(missing_ok=True)
        if tmp_doc is not None:
            tmp_doc.unlink(missing_ok=True)
        if placed and new_side and not out.exists():  # interrupted between the renames: no orphan document
            side.unlink(missing_ok=True)
        raise
    return side


# ---------------------------------------------------------------------------------------- reading
def _read_parquet_document(path: Path) -> dict[str, Any] | None:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PARQUET_KEY)
    return None if raw is None else json.loads(raw.decode("utf-8"))


def _read_csv(path: Path, columns: list[dict[str, Any]]) -> pd.DataFrame:
    """A CSV table read back with the dtypes its document recorded (identifiers verbatim)."""
    import numpy as np

    frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    out: dict[str, Any] = {}
    for spec in columns:
        name, dtype = spec["name"], spec["dtype"]
        col = frame[name].astype(object)
        if spec.get("missing"):
            col = col.where(col != "", np.nan)
        if dtype == "bool":
            out[name] = col.map({"True": True, "False": False}).astype(bool)
        elif dtype == "category":
            cats = pd.Index(decode(spec["categories"]), dtype=spec.get("categories_dtype", "object"))
            out[name] = pd.Categorical(col, categories=cats, ordered=bool(spec.get("ordered")))
        elif dtype.startswith(("int", "uint", "float")):
            out[name] = col.astype(dtype)
        elif dtype == "object":
            out[name] = col
        else:
            out[name] = col.astype(dtype)
    return pd.DataFrame(out)[[spec["name"] for spec in columns]]


def load_release(path: str | Path) -> Any:
    """The release saved at ``path`` (its table; or the ``.accounting.json`` beside it), equal to the
    one :func:`save_release` wrote.

    Raises:
        FileNotFoundError: no table, or no accounting for it (a CSV needs its ``.accounting.json``;
            a Parquet file written by hierdp carries it inside).
        ReleaseFileError: the table is not the one its accounting describes (another SHA-256), or
            the document is not a hierdp release of a version this hierdp reads.
    """
    p = Path(path)
    if p.name.endswith(ACCOUNTING_SUFFIX):
        p = p.with_name(p.name[: -len(ACCOUNTING_SUFFIX)])
    fmt = _format_of(p)
    if not p.is_file():
        raise FileNotFoundError(f"no release table at {p}")
    side = accounting_path(p)
    document: dict[str, Any] | None = None
    if side.is_file():
        document = json.loads(side.read_text(encoding="utf-8"))
        recorded = (document.get("file") or {}).get("sha256")
        if recorded is not None and recorded != _sha256(p):
            raise ReleaseFileError(f"{p.name} is not the table its accounting {side.name} describes (SHA-256 "
                                   "differs): one of them was replaced or edited since they were written together")
    elif fmt == "parquet":
        document = _read_parquet_document(p)
    if document is None:
        raise FileNotFoundError(f"no accounting for {p}: expected {side.name} beside it" +
                                (" or hierdp metadata inside the Parquet file" if fmt == "parquet" else ""))
    if document.get("format") != FORMAT:
        raise ReleaseFileError(f"{p.name}: not a hierdp release document")
    if document.get("version") != VERSION:
        raise ReleaseFileError(f"{p.name}: release format version {document.get('version')!r}; this hierdp reads "
                               f"version {VERSION}")
    from hierdp.release.accounting import Accounting

    columns = document["table"]["columns"]
    frame = pd.read_parquet(p) if fmt == "parquet" else _read_csv(p, columns)
    if [str(c) for c in frame.columns] != [spec["name"] for spec in columns] or len(frame) != document["table"]["rows"]:
        raise ReleaseFileError(f"{p.name}: the table's columns or rows are not those its accounting describes")
    cls = hierdp_class(document["release"]["type"], object)  # (release.base imports this module: no edge back)
    if not callable(getattr(cls, "_from_saved", None)):
        raise ReleaseFileError(f"{p.name}: {document['release']['type']!r} is not a release type")
    accounting = Accounting.from_dict(document["accounting"])
    params = decode(document["parameters"])
    tables = {k: _table_from_json(v) for k, v in document["release"].get("tables", {}).items()}
    with contextlib.suppress(AttributeError):
        frame.attrs.clear()
    return cls._from_saved(frame, decode(document["release"]["structure"]), accounting=accounting, params=params,
                           tables=tables)
