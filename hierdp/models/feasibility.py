"""Whether a point satisfies a problem's constraints: exactly for integer problems, within a
tolerance scaled to each check's own magnitude for continuous ones.

Integer problems are checked **in integers**: values must be integers, fixed nodes equal, bounds
met after rounding them inward (``ceil(lower)``, ``floor(upper)``), every parent equal to the sum
of its children, every linear row's activity within its bounds. Sums run in int64 when a float
bound on their absolute value proves they cannot overflow, else in Python integers (and, for rows
with non-integer coefficients, in exact fractions). No relative tolerance ever applies to integer
data: at 10^12 a relative 1e-9 would let a row be violated by 1,000 units (reproducer n2).

Continuous problems are checked with a relative tolerance ``tol`` (the plug-in's stated
``Capabilities.tolerance``) applied to the magnitude of each check: a bound to ``max(1, |bound|)``,
a parent's sum to ``max(1, |parent| + sum |children|)``, a row to ``max(1, sum |a_j y_j| + |bound|)``.
That is the size of the numbers the check subtracts, so one float64 rounding at 10^12 (1.2e-4)
is not a violation, while a real one is (reproducer n10).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.errors import exact_number

__all__ = ["DEFAULT_TOLERANCE", "as_integers", "row_violations", "violations"]

#: relative tolerance of continuous checks when the caller states none
DEFAULT_TOLERANCE = 1e-9
#: int64 arithmetic is used while a float bound on the absolute sums stays below this (headroom
#: for the bound's own rounding: the true sums are below 2^62)
_INT64_SAFE = 2.0 ** 61
#: float64 sums of integers are exact while every partial sum stays below 2^53 (the bound: 2^52)
_FLOAT_EXACT = 2.0 ** 52


def as_integers(values: np.ndarray) -> np.ndarray | None:
    """``values`` as int64 when every entry is an integer below 2^62 in magnitude, else None."""
    v = np.asarray(values)
    if np.issubdtype(v.dtype, np.integer):
        v64 = v.astype(np.int64)
        return v64 if not v64.size or int(np.abs(v64).max()) < 2 ** 62 else None
    f = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(f)) or np.any(f != np.rint(f)) or (f.size and np.abs(f).max() >= 2.0 ** 62):
        return None
    return f.astype(np.int64)


def _int_bound(bound: np.ndarray, side: str) -> np.ndarray:
    """Integer bounds rounded inward (``ceil`` lower, ``floor`` upper) as int64, clipped to +-2^62
    (beyond every int64 sum this module forms, so the comparison keeps its truth value)."""
    b = np.ceil(bound) if side == "lower" else np.floor(bound)
    return np.clip(b, -(2.0 ** 62), 2.0 ** 62).astype(np.int64)


def _exact_rows(matrix: Any, lower: np.ndarray, upper: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rows violated by the integer point ``y`` (int64), in exact arithmetic."""
    m = matrix.shape[0]
    bad = np.zeros(m, bool)
    if m == 0:
        return bad
    ptr, idx, data = matrix.indptr, matrix.indices, matrix.data
    row = np.repeat(np.arange(m), np.diff(ptr))
    integral = data == np.rint(data)
    all_integral = np.bincount(row, weights=~integral, minlength=m) == 0
    size = np.bincount(row, weights=np.abs(data) * np.abs(y[idx].astype(float)), minlength=m)
    fast = all_integral & (size < _INT64_SAFE)
    if fast.any():
        take = fast[row]
        prod = data[take].astype(np.int64) * y[idx[take]]
        if size[fast].max() < _FLOAT_EXACT:  # partial sums below 2^53: float64 sums are exact
            act = np.rint(np.bincount(row[take], weights=prod.astype(float), minlength=m)).astype(np.int64)
        else:
            act = np.zeros(m, np.int64)
            np.add.at(act, row[take], prod)
        lo_i, hi_i = _int_bound(np.where(np.isfinite(lower), lower, 0.0), "lower"), \
            _int_bound(np.where(np.isfinite(upper), upper, 0.0), "upper")
        bad |= fast & np.isfinite(lower) & (act < lo_i)
        bad |= fast & np.isfinite(upper) & (act > hi_i)
    for r in np.flatnonzero(~fast):  # big or fractional rows: exact fractions, one row at a time
        s, e = int(ptr[r]), int(ptr[r + 1])
        act_r = sum((Fraction(float(a)) * int(v) for a, v in zip(data[s:e], y[idx[s:e]], strict=True)), Fraction(0))
        if (np.isfinite(lower[r]) and act_r < Fraction(float(lower[r]))) or \
                (np.isfinite(upper[r]) and act_r > Fraction(float(upper[r]))):
            bad[r] = True
    return bad


def row_violations(matrix: Any, lower: np.ndarray, upper: np.ndarray, values: np.ndarray, *, integer: bool,
                   tol: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """Mask of the rows ``lower <= matrix @ values <= upper`` that ``values`` violates.

    ``integer``: ``values`` are integers and the check is exact (see the module docstring);
    otherwise each side may be missed by ``tol * max(1, sum |a_j y_j| + |bound|)``.
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    if integer:
        y = as_integers(values)
        if y is None:
            return np.ones(matrix.shape[0], bool)
        return _exact_rows(matrix, lower, upper, y)
    v = np.asarray(values, dtype=float)
    act = matrix @ v
    size = abs(matrix) @ np.abs(v)
    with np.errstate(invalid="ignore"):
        low = np.isfinite(lower) & (act < lower - tol * np.maximum(1.0, size + np.abs(lower)))
        high = np.isfinite(upper) & (act > upper + tol * np.maximum(1.0, size + np.abs(upper)))
    return low | high


def _exact_sums(parent: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """Nodes with children whose value differs from their children's sum (integers, exact)."""
    has_parent = parent >= 0
    kids = np.flatnonzero(has_parent)
    nch = np.bincount(parent[kids], minlength=n)
    size = np.bincount(parent[kids], weights=np.abs(y[kids].astype(float)), minlength=n) + np.abs(y.astype(float))
    if not size.size or size.max() < _FLOAT_EXACT:  # every partial sum an integer below 2^53: exact in float64
        sums_f = np.bincount(parent[kids], weights=y[kids].astype(float), minlength=n)
        return (nch > 0) & (sums_f != y.astype(float))
    if size.max() < _INT64_SAFE:
        sums = np.zeros(n, np.int64)
        np.add.at(sums, parent[kids], y[kids])
        return (nch > 0) & (sums != y)
    big = np.zeros(n, dtype=object)
    big[:] = 0
    np.add.at(big, parent[kids], y[kids].astype(object))
    return (nch > 0) & (big != y.astype(object)).astype(bool)


def _activity_text(matrix: Any, r: int, values: np.ndarray, integer: bool) -> str:
    """Row ``r``'s activity, exactly (an integer or a fraction) for integer points."""
    s, e = int(matrix.indptr[r]), int(matrix.indptr[r + 1])
    coef, cols = matrix.data[s:e], matrix.indices[s:e]
    if not integer:
        return exact_number(float(np.dot(coef, np.asarray(values, dtype=float)[cols])))
    act = sum((Fraction(float(a)) * int(v) for a, v in zip(coef, np.asarray(values)[cols], strict=True)), Fraction(0))
    return str(act.numerator) if act.denominator == 1 else str(act)


def violations(problem: Any, values: np.ndarray, tol: float | None = None) -> list[str]:
    """Every constraint of ``problem`` that ``values`` violates (empty list: feasible).

    Consistency is read from ``problem.parent`` directly (no derived structure). Integer
    problems: exact; continuous ones: relative ``tol`` (default :data:`DEFAULT_TOLERANCE`) scaled
    per check (see the module docstring).
    """
    tol = DEFAULT_TOLERANCE if tol is None else float(tol)
    raw = np.asarray(values)
    n = problem.n
    if raw.shape != (n,):
        return [f"values has shape {raw.shape}, expected ({n},)"]
    if raw.dtype == object or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        return [f"values must be numbers, got dtype {raw.dtype}"]
    fv = raw.astype(float)
    if not np.all(np.isfinite(fv)):
        return ["values contain NaN or inf"]
    label = problem.label
    out: list[str] = []

    def report(mask: np.ndarray, what: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            out.append(f"{int(mask.sum())} {what}, e.g. {label(i)} = {exact_number(raw[i])}")

    fx = problem.is_fixed
    lo, hi = problem.effective_lower, problem.upper
    if problem.integer:
        y = as_integers(raw)
        if y is None:
            nonint = (fv != np.rint(fv)) if np.all(np.isfinite(fv)) else ~np.isfinite(fv)
            report(nonint, "non-integer value(s)")
            report(np.abs(fv) >= 2.0 ** 62, "value(s) beyond 2^62 (outside exact int64 checks)")
            return out
        fixed_i = np.rint(np.nan_to_num(problem.fixed)).astype(np.int64)
        report(fx & (y != fixed_i), "fixed node(s) changed")
        fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
        report(fin_lo & (y < _int_bound(np.where(fin_lo, lo, 0.0), "lower")), "value(s) below their lower bound")
        report(fin_hi & (y > _int_bound(np.where(fin_hi, hi, 0.0), "upper")), "value(s) above their upper bound")
        if out:
            return out
        report(_exact_sums(problem.parent, y, n), "node(s) differ from the sum of their children")
    else:
        f = np.nan_to_num(problem.fixed)
        report(fx & (np.abs(fv - f) > tol * np.maximum(1.0, np.abs(f))), "fixed node(s) changed")
        with np.errstate(invalid="ignore"):
            report(np.isfinite(lo) & (fv < lo - tol * np.maximum(1.0, np.abs(lo))), "value(s) below their lower bound")
            report(np.isfinite(hi) & (fv > hi + tol * np.maximum(1.0, np.abs(hi))), "value(s) above their upper bound")
        par = problem.parent
        kids = np.flatnonzero(par >= 0)
        nch = np.bincount(par[kids], minlength=n)
        sums = np.bincount(par[kids], weights=fv[kids], minlength=n)
        size = np.bincount(par[kids], weights=np.abs(fv[kids]), minlength=n) + np.abs(fv)
        report((nch > 0) & (np.abs(sums - fv) > tol * np.maximum(1.0, size)),
               "node(s) differ from the sum of their children")
    if problem.n_constraints:
        rows = problem.constraints
        bad = row_violations(rows.matrix, rows.lower, rows.upper, raw if problem.integer else fv,
                             integer=problem.integer, tol=tol)
        for r in np.flatnonzero(bad)[:3]:
            act = _activity_text(rows.matrix, int(r), raw, problem.integer)
            out.append(f"linear constraint {rows.name(int(r))} violated: {exact_number(rows.lower[r])} <= "
                       f"{act} <= {exact_number(rows.upper[r])} fails")
        if bad.sum() > 3:
            out.append(f"... {int(bad.sum()) - 3} more linear constraint(s) violated")
    return out
