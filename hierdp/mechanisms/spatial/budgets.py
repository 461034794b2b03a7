"""Exact per-level budgets for spatial trees: geometric (paper 002 eq. 11-17) and uniform.

Eq. (17) gives the level budgets that minimise ``sum_i 2^(h-i) / eps_i^2`` subject to
``sum_i eps_i = eps`` (i = node height, 0 = leaves ... h = root):

    eps_i = 2^((h - i)/3) * eps * (2^(1/3) - 1) / (2^((h + 1)/3) - 1).

(The printed eq. 16 misses the cube root; eq. 17 is right.) The shares are irrational, so they
cannot be exact Fractions. Here every level above the leaves gets its share rounded *down* to a
multiple of ``2^-bits`` (computed in 40-digit decimal arithmetic, the same on every machine) times
``eps``, and the leaf level gets the exact remainder ``eps - sum_{i >= 1} eps_i``: the parts are
exact Fractions that add up to ``eps`` with no rounding at all, and each share differs from
eq. (17) by less than ``(h + 1) 2^-bits``.
"""

from __future__ import annotations

import decimal
from fractions import Fraction

from hierdp.privacy.errors import PrivacyParameterError

__all__ = ["geometric_level_budgets", "geometric_shares_float", "path_remainders", "uniform_level_budgets"]

_BITS = 60


def _as_fraction(total: object, name: str = "epsilon") -> Fraction:
    if isinstance(total, Fraction):
        f = total
    elif isinstance(total, (int, float)) and not isinstance(total, bool):
        f = Fraction(total)
    else:
        raise PrivacyParameterError(f"{name} must be a number or Fraction, got {total!r}")
    if not f > 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {float(f)!r}")
    return f


def _check_height(h: object) -> int:
    if isinstance(h, bool) or not isinstance(h, int) or h < 0:
        raise PrivacyParameterError(f"height must be a non-negative int, got {h!r}")
    return h


def geometric_shares_float(h: int) -> list[float]:
    """Eq. (17)'s shares ``eps_i / eps`` in floating point, i = 0 (leaves) .. h (root) (for display)."""
    h = _check_height(h)
    c = 2.0 ** (1.0 / 3.0)
    return [2.0 ** ((h - i) / 3.0) * (c - 1.0) / (2.0 ** ((h + 1) / 3.0) - 1.0) for i in range(h + 1)]


def geometric_level_budgets(total: Fraction | float, h: int, *, bits: int = _BITS) -> list[Fraction]:
    """Eq. (17) budgets for heights ``0..h`` as exact Fractions summing exactly to ``total``.

    Shares of levels ``1..h`` are rounded down to multiples of ``2^-bits``; the leaf level (height 0, the
    largest share) takes the exact remainder, so it is never smaller than its eq. (17) value.

    Raises:
        PrivacyParameterError: ``total`` not > 0, a bad height, or a level whose rounded share
            would be 0 (``bits`` too small for the height).
    """
    eps = _as_fraction(total)
    h = _check_height(h)
    if h == 0:
        return [eps]
    ctx = decimal.Context(prec=40, rounding=decimal.ROUND_FLOOR)
    two = decimal.Decimal(2)
    third = ctx.divide(decimal.Decimal(1), decimal.Decimal(3))
    c = ctx.power(two, third)
    denom = ctx.subtract(ctx.power(two, ctx.multiply(decimal.Decimal(h + 1), third)), decimal.Decimal(1))
    scale = 2 ** bits
    out: list[Fraction] = [Fraction(0)] * (h + 1)
    for i in range(1, h + 1):
        grow = ctx.power(two, ctx.multiply(decimal.Decimal(h - i), third))
        share = ctx.divide(ctx.multiply(grow, ctx.subtract(c, decimal.Decimal(1))), denom)
        q = Fraction(share)  # the decimal share, exactly
        rounded = Fraction(q.numerator * scale // q.denominator, scale) * eps  # share rounded down, times eps
        if rounded <= 0:
            raise PrivacyParameterError(f"the geometric share of height {i} rounds to 0 at 2^-{bits}: a tree of height "
                                        f"{h} is too tall for {bits} bits")
        out[i] = rounded
    out[0] = eps - sum(out[1:], Fraction(0))
    if out[0] <= 0:  # impossible for bits >= 8: the leaf share is the largest
        raise PrivacyParameterError("geometric budgets: no budget left for the leaves")
    return out


def uniform_level_budgets(total: Fraction | float, h: int) -> list[Fraction]:
    """``h + 1`` equal exact parts of ``total`` (heights 0..h)."""
    eps = _as_fraction(total)
    h = _check_height(h)
    return [eps / (h + 1)] * (h + 1)


def path_remainders(levels: list[Fraction]) -> list[Fraction]:
    """``rem[i] = sum_{j < i} levels[j]``: what a node pruned at height ``i`` has left on its path
    after its own level's draw (Alg. 3's ``eps_data - eps_accu``), exact; ``rem[0] = 0``."""
    out = [Fraction(0)]
    for v in levels[:-1]:
        out.append(out[-1] + v)
    return out
