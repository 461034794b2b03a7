"""Files for the command line: verbatim identifiers, exact counts, atomic writes, one-line errors.

* **Reading.** CSV cells are read as text, verbatim: ``01001`` stays ``01001`` and ``NA``
  (Namibia) is an id, not a missing value. Only the count column becomes numbers, through the
  exact parser :func:`hierdp.hierarchy.counts.parse_count_text` (the bad cell is named). An
  empty identifier cell is refused. Parquet keeps the file's own types; identifier columns are
  turned into strings, counts go through the same checked conversion as everywhere else.
  Rows are numbered from 0, the header not counted (row 0 is line 2 of a CSV file).
* **Writing.** A release is written to a hidden temporary file beside the target, flushed to
  disk, then renamed over the target in one step: a reader sees the old file or the whole new
  one, never part of one, and the temporary file is removed on any failure or interruption.
* **Checks before any work.** The output must not be an input, a directory, or (without
  ``--overwrite``) an existing file, and its folder must be writable.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hierdp.errors import HierdpError

__all__ = [
    "FIGURE_SUFFIXES",
    "OUTPUT_SUFFIXES",
    "CliError",
    "check_figure_path",
    "check_input_file",
    "check_output_path",
    "format_of",
    "read_table",
    "read_table_header",
    "write_figure_atomic",
    "write_table_atomic",
]

OUTPUT_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
#: pandas >= 3 parses CSV floats correctly rounded by default (and deprecates the option); before,
#: only "round_trip" (Python's own parser) was
_FLOAT_PRECISION: dict = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
_PARQUET = (".parquet", ".pq")
#: compressed CSV that pandas infers from the name (besides .gz)
_COMPRESSED = (".xz", ".bz2", ".zip", ".zst", ".tar", ".tgz")


class CliError(HierdpError, ValueError):
    """A command-line failure with its one-line message and exit code (2: bad input or usage)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def format_of(path: Path) -> str:
    """``"parquet"``, ``"csv.gz"`` or ``"csv"`` from the file name."""
    name = path.name.lower()
    if name.endswith(_PARQUET):
        return "parquet"
    return "csv.gz" if name.endswith(".gz") else "csv"


def check_input_file(path: str | Path, what: str = "input") -> Path:
    """The path of an existing, readable regular file, else :class:`CliError` saying why.

    A FIFO, a socket or a device (``/dev/zero``, ``/dev/stdin``) is refused: it is read twice (the
    header, then the rows), could block forever or never end, and its size is unknown."""
    import stat

    p = Path(path)
    if not p.exists():
        raise CliError(f"{what} file not found: {p}")
    if p.is_dir():
        raise CliError(f"{what} {p} is a directory, not a file")
    mode = p.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise CliError(f"{what} {p} is {kind}; give a regular file (copy a stream to a file first)")
    if not os.access(p, os.R_OK):
        raise CliError(f"cannot read {what} {p}: permission denied")
    return p


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _check_target(out: Path, inputs: Iterable[Path], overwrite: bool, what: str) -> Path:
    for src in inputs:
        if _same_file(out, src):
            raise CliError(f"{what} {out} is also an input file; choose another path")
    if out.is_dir():
        raise CliError(f"{what} {out} is a directory; give a file name")
    if out.exists() and not overwrite:
        raise CliError(f"{what} {out} already exists; pass --overwrite to replace it")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise CliError(f"cannot write {out}: folder {folder}/ does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(f"cannot write {out}: folder {folder}/ is not writable")
    return out


def check_output_path(path: str | Path, inputs: Iterable[Path], *, overwrite: bool, what: str = "output") -> Path:
    """Refuse, before any work, an output that could not be written or would destroy a file.

    Raises:
        CliError: wrong suffix; an input file; a directory; an existing file without
            ``overwrite``; a missing or unwritable folder.
    """
    out = Path(path)
    name = out.name.lower()
    if out.is_dir():
        raise CliError(f"{what} {out} is a directory; give a file name (e.g. {out / 'release.csv'})")
    if not name.endswith(OUTPUT_SUFFIXES) or name in OUTPUT_SUFFIXES:
        raise CliError(f"{what} must end in .csv, .csv.gz, .parquet or .pq, got {out.name!r}")
    return _check_target(out, inputs, overwrite, what)


# ------------------------------------------------------------------ reading
def _read_error(p: Path, exc: BaseException) -> CliError:
    """A one-line message for a file that could not be parsed."""
    import gzip
    import lzma
    import zipfile
    import zlib

    msg = " ".join(str(exc).split())
    if isinstance(exc, (gzip.BadGzipFile, zlib.error, EOFError)) and p.name.lower().endswith(".gz"):
        return CliError(f"cannot read {p}: not a valid gzip file ({msg or type(exc).__name__})")
    if isinstance(exc, (lzma.LZMAError, zipfile.BadZipFile, zlib.error, EOFError, OSError)) \
            and p.name.lower().endswith(_COMPRESSED):
        return CliError(f"cannot read {p}: not a valid {p.suffix.lstrip('.').lower()} file "
                        f"({msg or type(exc).__name__})")
    if isinstance(exc, UnicodeDecodeError):
        return CliError(f"cannot read {p}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at "
                        f"offset {exc.start}); save it as UTF-8 CSV, or use Parquet")
    if isinstance(exc, pd.errors.EmptyDataError):
        return CliError(f"cannot read {p}: the file is empty (no header line)")
    if isinstance(exc, pd.errors.ParserError):
        return CliError(f"cannot read {p}: not valid CSV ({msg})")
    if isinstance(exc, OSError):
        return CliError(f"cannot read {p}: {exc.strerror or msg}")
    return CliError(f"cannot read {p}: {type(exc).__name__}: {msg}")


def _check_header(p: Path) -> list[str]:
    header = pd.read_csv(p, header=None, nrows=1, dtype=str, keep_default_na=False, na_filter=False,
                         encoding="utf-8-sig")
    names = [str(x) for x in header.iloc[0].tolist()] if len(header) else []
    seen: set[str] = set()
    for k, name in enumerate(names):
        if name == "":
            raise CliError(f"{p}: column {k} of the header has no name")
        if name in seen:
            raise CliError(f"{p}: the header names column {name!r} twice")
        seen.add(name)
    return names


def read_table(path: str | Path, *, counts: Sequence[str] = (), what: str = "input",
               columns: Sequence[str] | None = None, numbers: Sequence[str] = ()) -> pd.DataFrame:
    """Read a CSV (optionally compressed) or Parquet file; identifiers verbatim, counts exact.

    Args:
        path: ``.csv``, ``.csv.gz`` (any compression pandas infers from the name) or
            ``.parquet``/``.pq``.
        counts: the count columns: parsed exactly to int64 (the bad cell named). Every other
            column is read as strings, verbatim.
        what: how messages name the file (``"input"``, ``"--geo"``).
        columns: read only these columns (default: all) - the ones the release uses, so that a
            column it does not use (a note, blank in most rows) can neither refuse the input nor
            cost memory; a missing one is named.
        numbers: real-valued columns (coordinates): parsed to finite float64, correctly rounded
            (Python's ``float``); an empty, non-numeric, NaN or infinite cell is named.

    Raises:
        CliError: unreadable or malformed file, a missing column, a bad count or number.
    """
    from hierdp.hierarchy.counts import parse_count_text

    import lzma
    import tarfile
    import zipfile

    p = check_input_file(path, what)
    parquet = p.name.lower().endswith(_PARQUET)
    try:
        if parquet:
            if columns is not None:
                import pyarrow.parquet as pq

                names = [str(c) for c in pq.read_schema(p).names]
                _check_columns(names, columns, counts, what, p)
            df = pd.read_parquet(p, columns=list(dict.fromkeys(columns)) if columns is not None else None)
            df.columns = [str(c) for c in df.columns]
        else:
            names = _check_header(p)
            if columns is not None:
                _check_columns(names, columns, counts, what, p)
            # every column is parsed (as text): pandas checks each line's fields against the header
            # only then (with usecols it pads short lines and drops extra fields silently); the
            # columns the release does not use are dropped below, before any cell is checked
            kw: dict = dict(keep_default_na=False, na_filter=False, encoding="utf-8-sig")
            df = None
            if numbers:  # fast path: the C parser reads the numbers (20x faster than text + float())
                try:
                    df = pd.read_csv(p, dtype={c: (np.float64 if c in numbers else str) for c in names}, **kw,
                                     **_FLOAT_PRECISION)
                except ValueError:
                    df = None  # a cell that is not a number: the text path below names it
            if df is None:
                df = pd.read_csv(p, dtype=str, **kw)
    except CliError:
        raise
    except (ValueError, OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile, tarfile.TarError) as exc:
        # pandas / compression / Arrow errors
        if type(exc).__name__ == "ArrowInvalid" or "parquet" in str(exc).lower():
            raise CliError(f"cannot read {p}: not a valid Parquet file ({' '.join(str(exc).split())})") from None
        raise _read_error(p, exc) from None
    df = df.reset_index(drop=True)
    if columns is not None:
        lack = [c for c in columns if c not in df.columns]
        if lack:
            raise CliError(f"{what} {p.name}: unknown column {lack[0]!r}; columns are {list(df.columns)}")
        df = pd.DataFrame({c: df[c] for c in dict.fromkeys(columns)})  # a frame of its own (no view)
    for c in numbers:
        if c not in df.columns:
            raise CliError(f"{what} {p.name}: unknown column {c!r}; columns are {list(df.columns)}")
        df[c] = _parse_numbers(df[c], c, f"{what} {p.name}")
    for c in counts:
        if c not in df.columns:
            raise CliError(f"{what} {p.name}: no count column {c!r}; columns are {list(df.columns)}")
    for c in df.columns:
        col = df[c]
        if c in numbers:
            continue
        if c in counts:
            if col.dtype.kind in "biuf":
                continue  # numbers from Parquet: the builders' exact conversion checks them
            try:
                df[c] = parse_count_text(col, range(len(col)), column=c)
            except HierdpError as exc:
                raise CliError(f"{what} {p.name}: {exc}") from None
            continue
        missing = col.isna().to_numpy() | (col.astype(str) == "").to_numpy()
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise CliError(f"{what} {p.name}: column {c!r} is empty in row {i}"
                           + (f" ({int(missing.sum())} empty cells)" if missing.sum() > 1 else "")
                           + "; every identifier cell needs a value")
        if parquet:  # the file's own types: identifiers become their text (CSV cells already are)
            df[c] = col.astype(str)
    return df


def read_table_header(path: str | Path) -> list[str]:
    """The column names of a CSV or Parquet file (nothing else is read)."""
    p = Path(path)
    if p.name.lower().endswith(_PARQUET):
        import pyarrow.parquet as pq

        return [str(c) for c in pq.read_schema(p).names]
    return _check_header(p)


def _check_columns(names: Sequence[str], columns: Sequence[str], counts: Sequence[str], what: str, p: Path) -> None:
    """Refuse a column the release reads that the file lacks (the count column first)."""
    for c in counts:
        if c not in names:
            raise CliError(f"{what} {p.name}: no count column {c!r}; columns are {list(names)}")
    lack = [c for c in columns if c not in names]
    if lack:
        raise CliError(f"{what} {p.name}: unknown column {lack[0]!r}; columns are {list(names)}")


def _parse_numbers(col: pd.Series, column: str, where: str) -> np.ndarray:
    """A column of real numbers (text or numeric) as finite float64, the first bad cell named."""
    if col.dtype.kind in "iuf":
        values = col.to_numpy(dtype=np.float64)
    elif col.dtype.kind == "b":
        raise CliError(f"{where}: column {column!r} holds true/false values, not numbers")
    else:
        text = col.astype(str).str.strip().to_numpy(dtype=object)
        try:  # object -> float64 calls float() per cell: correctly rounded, as Python parses it
            values = text.astype(np.float64)
        except (TypeError, ValueError):
            for i, t in enumerate(text):  # the error path only: find the first bad cell
                try:
                    float(t)
                except (TypeError, ValueError):
                    what = "is empty" if t == "" else f"{col.iloc[i]!r} is not a number"
                    raise CliError(f"{where}: column {column!r}, row {i}: {what}; every point needs "
                                   "coordinates") from None
            raise
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CliError(f"{where}: column {column!r}, row {i}: {str(col.iloc[i]).strip()!r} is not a finite number"
                       + (f" ({int(bad.sum())} such cells)" if bad.sum() > 1 else ""))
    return values


# ------------------------------------------------------------------ writing
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_table_atomic(df: pd.DataFrame, out: Path) -> None:
    """Write ``df`` to ``out`` (format by extension) through a temporary file and one rename.

    The temporary file sits beside ``out`` (same file system, so the rename is atomic), is
    flushed to disk before the rename, and is removed on any exception, KeyboardInterrupt
    included; ``out`` is never left half-written.
    """
    fmt = format_of(out)
    folder = out.parent if str(out.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            if fmt == "parquet":
                df.to_parquet(fh, index=False)
            else:
                df.to_csv(fh, index=False, compression="gzip" if fmt == "csv.gz" else None)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise



def check_figure_path(path: str | Path, inputs: Iterable[Path], *, overwrite: bool) -> Path:
    """Like :func:`check_output_path`, for a figure (``.png``, ``.svg`` or ``.pdf``)."""
    out = Path(path)
    name = out.name.lower()
    if out.is_dir():
        raise CliError(f"figure {out} is a directory; give a file name (e.g. {out / 'compare.png'})")
    if not name.endswith(FIGURE_SUFFIXES) or name in FIGURE_SUFFIXES:
        raise CliError(f"figure must end in .png, .svg or .pdf, got {out.name!r}")
    return _check_target(out, inputs, overwrite, "figure")


def write_figure_atomic(fig: object, out: Path, *, dpi: int = 110, metadata: dict[str, str] | None = None) -> None:
    """Save a matplotlib figure through a temporary file and one rename (as
    :func:`write_table_atomic`); ``metadata``: text entries of the file (PNG text chunks)."""
    folder = out.parent if str(out.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fmt = out.suffix.lower().lstrip(".")
            extra = {"metadata": metadata} if metadata and fmt == "png" else {}
            fig.savefig(fh, dpi=dpi, format=fmt, **extra)  # type: ignore[attr-defined]
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
