"""Validation and conversion of user-supplied counts to int64 (vectorized, culprit named)."""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

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
    labels: Sequence[Any] | np.ndarray,
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
        if all(k == "int" for k, m in zip(kinds, missing_in, strict=False) if not m):
            try:  # plain Python ints: stay exact beyond 2**53
                ints = np.array([0 if m else v for v, m in zip(items, missing_in, strict=False)], dtype=np.int64)
            except OverflowError:
                ints = None
            if ints is not None:
                if missing_in.any() and not allow_missing:
                    i = _first(missing_in)
                    raise CountError(f"missing (NaN) count for {noun} {labels[i]!r}{_how_many(missing_in)}")
                out, _ = coerce_counts(ints, labels, noun=noun)
                return out, missing_in
        x = np.array([np.nan if m else float(v) for v, m in zip(items, missing_in, strict=False)], dtype=np.float64)
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


def checked_total(values: np.ndarray, *, what: str) -> int:
    """The exact sum of non-negative int64 counts, refusing a total beyond int64.

    Every partial sum of non-negative counts is at most the total, so a total that fits in int64
    makes every node count of a tree built from these values fit too. Sums in int64 when that
    cannot wrap, else in Python integers (no silent wrap-around either way).
    """
    v = np.asarray(values, dtype=np.int64)
    if v.size == 0:
        return 0
    if int(v.max()) <= np.iinfo(np.int64).max // v.size:
        return int(v.sum())
    total = int(np.sum(v.astype(object)))
    if total > np.iinfo(np.int64).max:  # the total itself is private: not quoted
        raise CountError(f"{what}: the counts sum to more than 2**63 - 1, beyond int64; every node count (the root "
                         "holds the total) must fit in a 64-bit integer")
    return total


_PLAIN_INT = r"[+]?[0-9]{1,18}"  # at most 18 digits: always within int64


def parse_count_text(values: Any, labels: Sequence[Any], *, column: str, noun: str = "row") -> np.ndarray:
    """Counts given as text (a CSV cell read verbatim) to int64, exactly, naming the bad cell.

    Accepts integer literals (``"12"``, ``"+12"``, ``" 12 "``) and integral decimal or
    scientific literals (``"12.0"``, ``"1e3"``), parsed with :class:`decimal.Decimal`, so nothing
    passes through float64 (``"9007199254740993"`` stays exact). Refuses empty cells,
    non-numbers, negative, fractional, infinite and NaN values and values beyond int64, each
    with the offending text and ``noun labels[i]``.
    """
    from decimal import Decimal, InvalidOperation

    s = pd.Series(values, dtype=object).reset_index(drop=True)
    text = s.astype(str).str.strip()
    out = np.zeros(len(s), np.int64)
    plain = text.str.fullmatch(_PLAIN_INT).to_numpy(dtype=bool)
    if plain.any():
        out[plain] = text[plain].astype(np.int64).to_numpy()
    for i in np.flatnonzero(~plain):  # rare: anything but short plain integers (error path included)
        raw = s.iloc[i]
        cell = f"{raw!r} in {noun} {labels[int(i)]!r}" if column is None else \
            f"{raw!r} in column {column!r}, {noun} {labels[int(i)]!r}"
        t = text.iloc[i]
        if t == "" or pd.isna(raw):
            raise CountError(f"missing count {cell}")
        try:
            d = Decimal(t)
        except InvalidOperation:
            raise CountError(f"non-numeric count {cell}") from None
        if d.is_nan() or d.is_infinite():
            raise CountError(f"{'missing (NaN)' if d.is_nan() else 'infinite'} count {cell}")
        if d < 0:
            raise CountError(f"negative count {cell}")
        if d != d.to_integral_value():
            raise CountError(f"non-integer count {cell}")
        if d > np.iinfo(np.int64).max:
            raise CountError(f"out-of-range count {cell}: beyond int64")
        out[i] = int(d)
    return out
