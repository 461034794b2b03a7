"""Validation and conversion of user-supplied counts to int64 (vectorized, culprit named)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from hierdp.hierarchy.errors import CountError

_INT64_MAX = float(np.iinfo(np.int64).max)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _how_many(mask: np.ndarray) -> str:
    k = int(mask.sum())
    return "" if k == 1 else f" ({k} such counts)"


def _number_kind(v: Any) -> str | None:
    """``"int"`` / ``"float"`` for numbers (bools count as ints), None for anything else."""
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    return None


def coerce_counts(
    values: Any,
    labels: Sequence[Any],
    *,
    noun: str = "node",
    allow_missing: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Convert counts to ``(int64 array, missing mask)``.

    Accepts integer, boolean, float (NaN = missing) and object arrays (``None``/``pd.NA`` =
    missing; numeric strings are refused, as counts should be numbers). Raises CountError naming
    ``noun labels[i]`` of the first negative, non-integer, infinite, non-numeric or (unless
    ``allow_missing``) missing count.
    """
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.Index)) else np.asarray(values)
    arr = arr.ravel()
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(np.int64), np.zeros(arr.size, bool)
    if kind in "iu":
        if kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            i = _first(arr > np.iinfo(np.int64).max)
            raise CountError(f"count {arr[i]} for {noun} {labels[i]!r} does not fit in int64")
        out = arr.astype(np.int64)
        neg = out < 0
        if neg.any():
            i = _first(neg)
            raise CountError(f"negative count {out[i]} for {noun} {labels[i]!r}{_how_many(neg)}")
        return out, np.zeros(arr.size, bool)
    if kind == "f":
        x = arr.astype(np.float64)
    else:
        # object / string / nullable: numbers only; None, NaN and pd.NA mean "missing"
        items = pd.Series(arr, dtype=object)
        missing_in = items.isna().to_numpy()
        kinds = [_number_kind(v) for v in items.to_numpy()]  # per item: object input is rare
        bad = np.array([k is None for k in kinds], bool) & ~missing_in
        if bad.any():
            i = _first(bad)
            raise CountError(f"non-numeric count {arr[i]!r} for {noun} {labels[i]!r}")
        if all(k == "int" for k, m in zip(kinds, missing_in) if not m):
            try:  # plain Python ints: stay exact beyond 2**53
                ints = np.array([0 if m else v for v, m in zip(items, missing_in)], dtype=np.int64)
            except OverflowError:
                ints = None
            if ints is not None:
                if missing_in.any() and not allow_missing:
                    i = _first(missing_in)
                    raise CountError(f"missing (NaN) count for {noun} {labels[i]!r}{_how_many(missing_in)}")
                out, _ = coerce_counts(ints, labels, noun=noun)
                return out, missing_in
        x = np.array([np.nan if m else float(v) for v, m in zip(items, missing_in)], dtype=np.float64)
    missing = np.isnan(x)
    if missing.any() and not allow_missing:
        i = _first(missing)
        raise CountError(f"missing (NaN) count for {noun} {labels[i]!r}{_how_many(missing)}")
    inf = np.isinf(x)
    if inf.any():
        i = _first(inf)
        raise CountError(f"infinite count {float(x[i])!r} for {noun} {labels[i]!r}")
    xz = np.where(missing, 0.0, x)
    neg = xz < 0
    if neg.any():
        i = _first(neg)
        raise CountError(f"negative count {x[i]:g} for {noun} {labels[i]!r}{_how_many(neg)}")
    frac = xz != np.floor(xz)
    if frac.any():
        i = _first(frac)
        raise CountError(f"non-integer count {float(x[i])!r} for {noun} {labels[i]!r}{_how_many(frac)}")
    big = xz >= _INT64_MAX
    if big.any():
        i = _first(big)
        raise CountError(f"count {x[i]:g} for {noun} {labels[i]!r} does not fit in int64")
    return xz.astype(np.int64), missing
