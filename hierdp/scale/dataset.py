"""Reading a Parquet dataset larger than memory: check its schema, aggregate it file by file.

A release needs only the count of every distinct leaf path, never the rows. :func:`aggregate_parquet`
sums each file (in record batches, so no file has to fit in memory either) into its distinct
paths, as one Dask task per file, on a distributed cluster when a client is given or active, else
on Dask's local scheduler; the partial sums are then added up. Before any of that,
:func:`check_schema` reads every file's footer and refuses a dataset whose files disagree on a
column the release reads (a renamed column, an integer id column that became text in one file, a
missing count column): such a dataset would otherwise be summed wrongly or fail half way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hierdp.hierarchy.counts import checked_total, coerce_counts
from hierdp.hierarchy.errors import CountError, EmptyInputError, HierarchyError, MissingValueError
from hierdp.scale.errors import DatasetSchemaError

__all__ = ["COUNT", "aggregate_parquet", "check_schema", "parquet_files"]

#: name of the count column of an aggregated dataset
COUNT = "count"
#: rows per record batch when a file is read (bounds the memory of one task)
BATCH_ROWS = 1 << 22


def parquet_files(path: Any) -> list[str]:
    """The files of a dataset: a directory (every ``*.parquet`` / ``*.pq`` below it, sorted,
    skipping names that start with ``_`` or ``.``, as Parquet tools do), a file, or a list."""
    if isinstance(path, (list, tuple)):
        files = [str(p) for p in path]
    else:
        p = Path(path)
        if p.is_dir():
            files = sorted(str(f) for f in p.rglob("*") if f.is_file() and f.suffix in (".parquet", ".pq")
                           and not any(part.startswith(("_", ".")) for part in f.relative_to(p).parts))
        elif p.exists():
            files = [str(p)]
        else:
            raise FileNotFoundError(f"Parquet dataset {str(path)!r}: no such file or directory")
    if not files:
        raise EmptyInputError(f"Parquet dataset {str(path)!r} holds no .parquet files")
    return files


def check_schema(files: Sequence[str], columns: Sequence[str]) -> dict[str, Any]:
    """Every file must have every column of ``columns`` with the same Arrow type as the first file.

    Returns the ``{column: arrow type}`` of the first file.

    Raises:
        DatasetSchemaError: naming the first file that lacks a column or types it differently,
            the column, both types and the file the type was taken from.
    """
    import pyarrow.parquet as pq

    reference: dict[str, Any] = {}
    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except Exception as exc:  # not a Parquet file, truncated footer, ...
            raise DatasetSchemaError(f"Parquet dataset: cannot read the schema of {f}: {exc}") from exc
        names = set(schema.names)
        for col in columns:
            if col not in names:
                raise DatasetSchemaError(f"Parquet dataset: file {f} has no column {col!r} (its columns: "
                                         f"{schema.names})" + (f"; {first} has it" if first else ""))
        if first is None:
            first = f
            reference = {c: schema.field(c).type for c in columns}
            continue
        for col in columns:
            typ = schema.field(col).type
            if typ != reference[col]:
                raise DatasetSchemaError(
                    f"Parquet dataset: the files disagree on column {col!r}: {first} has type {reference[col]}, "
                    f"{f} has type {typ}; rewrite the dataset with one schema")
    return reference


_INT64_MAX = int(np.iinfo(np.int64).max)


def _partial_sums(path: str, levels: list[str], count: str | None, name: str | None = None) -> pd.DataFrame:
    """One file's distinct leaf paths and their summed counts (read in record batches); ``path`` is
    opened (absolute: a worker's working directory is not the caller's), ``name`` is how messages
    name the file (as the caller gave it)."""
    import pyarrow.parquet as pq

    columns = levels + ([count] if count is not None else [])
    parts = []
    offset = 0
    opened, path = path, name if name is not None else path
    running = 0
    what = f"{path}: column {count!r}" if count is not None else f"{path}: rows"
    with pq.ParquetFile(opened) as pf:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            df = batch.to_pandas()
            df.index = pd.RangeIndex(offset, offset + len(df))  # row numbers within the file
            offset += len(df)
            for col in levels:
                na = df[col].isna().to_numpy()
                if na.any():
                    i = int(np.flatnonzero(na)[0])
                    raise MissingValueError(f"{path}: level column {col!r} has a missing value (NaN/None) in row "
                                            f"{df.index[i]}" + (f" ({int(na.sum())} rows)" if na.sum() > 1 else ""))
            if count is None:
                weights = np.ones(len(df), np.int64)
            else:
                try:
                    weights, _ = coerce_counts(df[count], df.index, noun="row")
                except HierarchyError as exc:  # name the file: rows are numbered within it
                    raise type(exc)(f"{path}: {exc}") from None
            frame = df[levels].copy()
            frame[COUNT] = weights
            # the file's running total stays within int64, so no (non-negative) sum of it can wrap
            running += checked_total(weights, what=what)
            if running > _INT64_MAX:
                raise CountError(f"{what}: the counts sum to more than 2**63 - 1, beyond int64")
            parts.append(frame.groupby(levels, sort=False, observed=True)[COUNT].sum().reset_index())
    if not parts:
        return pd.DataFrame({**{c: [] for c in levels}, COUNT: np.zeros(0, np.int64)})
    out = pd.concat(parts, ignore_index=True)
    if len(parts) > 1:
        out = out.groupby(levels, sort=False, observed=True)[COUNT].sum().reset_index()
    return out


def aggregate_parquet(path: Any, levels: Sequence[str], count: str | None = None, *, client: Any = None,
                      progress: bool = False) -> pd.DataFrame:
    """The distinct leaf paths of a Parquet dataset and their summed counts.

    Args:
        path: a directory, a file or a list of files (see :func:`parquet_files`).
        levels: the level columns, coarse to fine.
        count: the count column (non-negative integers); ``None``: one unit per row.
        client: a ``distributed.Client`` to run on (default: the active one, else Dask's local
            scheduler).
        progress: show a tqdm bar over files.

    Returns:
        A frame with the level columns and :data:`COUNT` (int64), one row per distinct path.

    Raises:
        DatasetSchemaError: files disagree on a column, or lack one (before anything is summed).
        MissingValueError, CountError: a row has no level value or a bad count (naming the file
            and its row number within the file).
    """
    import dask

    levels = [levels] if isinstance(levels, str) else list(levels)
    if not levels:
        raise HierarchyError("aggregate_parquet needs at least one level column")
    if count is not None and count in levels:
        raise HierarchyError(f"column {count!r} cannot be both a level and the count")
    files = parquet_files(path)
    check_schema(files, levels + ([count] if count is not None else []))
    tasks = [dask.delayed(_partial_sums)(os.path.abspath(f), levels, count, f) for f in files]
    if client is not None:
        futures = client.compute(tasks)
        partials = _gather(client, futures, progress)
    else:
        partials = list(dask.compute(*tasks))
    frame = pd.concat(partials, ignore_index=True)
    if len(frame) == 0:
        raise EmptyInputError(f"Parquet dataset {str(path)!r} has no rows")
    # one checked sum over every file's partial sums: within int64, no group's sum can wrap
    checked_total(frame[COUNT].to_numpy(), what=f"Parquet dataset {str(path)!r}"
                  + (f", column {count!r}" if count is not None else ""))
    out = frame.groupby(levels, sort=False, observed=True)[COUNT].sum().reset_index()
    out[COUNT] = out[COUNT].astype(np.int64)
    return out


def _gather(client: Any, futures: Iterable[Any], progress: bool) -> list[pd.DataFrame]:
    futures = list(futures)
    if progress:
        from distributed import as_completed
        from tqdm.auto import tqdm

        with tqdm(total=len(futures), desc="read", unit="file") as bar:
            for _ in as_completed(futures):
                bar.update(1)
    return client.gather(futures)
