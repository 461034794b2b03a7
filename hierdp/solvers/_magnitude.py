"""Keep a recentred model's numbers small, whatever the counts (shared by ``highs`` and ``ortools``).

Models are expressed in ``d = y - z`` for a consistent integer point ``z`` near the targets
(:func:`hierdp.models.arrays.consistent_point`), so targets and right-hand sides are small. Two
things stay large and are handled here:

* **far bounds.** A bound of the original problem far from ``z`` (non-negativity under counts of
  1e11: ``d >= -1e11``) becomes a huge bound in the model. HiGHS 1.14 stops looking at its clock on
  such models (measured: a 5-variable MIP with bounds of 2e11 ran past a 5 s limit for minutes;
  the same bounds at 1e9 or dropped: 10 ms). :func:`relax_far_bounds` drops every bound farther than
  :data:`FAR` from ``z``: the model becomes a *relaxation*, and an optimum of a relaxation that
  satisfies the dropped bounds is an optimum of the problem. :func:`dropped_violated` says which
  dropped bounds the answer breaks; the caller restores those and solves again.
* **rounding in right-hand sides.** With fractional fixed values (continuous problems) the
  consistency right-hand side ``fixed - sum z`` is computed in doubles and carries the rounding of
  the magnitude (``-1.19e-7`` for a zero at 1e9): HiGHS's QP solver then ended in "solve error"
  (its absolute 1e-7 feasibility tolerance). :func:`snap_rounding` sets right-hand sides within a
  few ulps of the problem's magnitude to zero - a change of the data below its own precision.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FAR", "dropped_violated", "relax_far_bounds", "snap_rounding"]

#: bounds farther than this from the recentring point are dropped (and checked after the solve)
FAR = 1e7


def relax_far_bounds(lower: np.ndarray, upper: np.ndarray, far: float = FAR
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lower', upper', dropped_lower, dropped_upper)``: bounds beyond ``far`` (in the recentred
    space) replaced by infinities, with masks of the dropped ones."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    drop_lo = np.isfinite(lo) & (lo < -far)
    drop_hi = np.isfinite(hi) & (hi > far)
    return np.where(drop_lo, -np.inf, lo), np.where(drop_hi, np.inf, hi), drop_lo, drop_hi


def dropped_violated(x: np.ndarray, lower: np.ndarray, upper: np.ndarray, drop_lo: np.ndarray,
                     drop_hi: np.ndarray) -> np.ndarray:
    """Mask of variables whose value breaks a bound that was dropped."""
    x = np.asarray(x, dtype=float)
    return (drop_lo & (x < lower)) | (drop_hi & (x > upper))


def snap_rounding(rhs: np.ndarray, magnitude: float) -> np.ndarray:
    """``rhs`` with entries below the rounding of ``magnitude`` (64 ulps) set to exactly zero."""
    tol = 64 * np.finfo(float).eps * max(1.0, float(magnitude))
    rhs = np.asarray(rhs, dtype=float)
    return np.where(np.abs(rhs) <= tol, 0.0, rhs)
