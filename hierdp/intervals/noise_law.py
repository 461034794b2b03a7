"""The public noise law of one measurement: discrete Gaussian or geometric (discrete Laplace).

An interval is post-processing only when it uses nothing but the release and the law of the noise
the mechanism added, which is public: its family and its parameter (``sigma2`` or ``scale``) are
in the release's accounting (:class:`~hierdp.release.accounting.Spend` details). :class:`NoiseLaw`
holds one such law and gives what interval constructions need from it, exactly from the pmf:

* :meth:`NoiseLaw.tail` - ``P(|Y| > t)`` for integers ``t >= 0`` (vectorized);
* :meth:`NoiseLaw.margin` - the smallest integer ``m`` with ``P(|Y| <= m) >= level`` (the noise-only
  margin of error: what a raw noisy count's interval ``noisy ± m`` would be);
* :meth:`NoiseLaw.variance` and :meth:`NoiseLaw.draw` (numpy generator: interval draws are not
  privacy noise; they re-simulate a public law).

The discrete Gaussian's pmf is summed over ``±(40 σ + 1)`` (the mass beyond is below e^-800); the
geometric law has closed forms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from hierdp.privacy import samplers

__all__ = ["NoiseLaw", "law_from_details"]

_KINDS = ("discrete_gaussian", "geometric")


@dataclass(frozen=True)
class NoiseLaw:
    """The law of one integer noise draw.

    Attributes:
        kind: ``"discrete_gaussian"`` (``param`` = σ², ``P(y) ∝ exp(-y²/(2σ²))``) or
            ``"geometric"`` (``param`` = scale b, ``P(y) ∝ exp(-|y|/b)``).
        param: the law's parameter, as recorded in the release's accounting.
    """

    kind: str
    param: float

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"noise kind must be one of {_KINDS}, got {self.kind!r}")
        if not (math.isfinite(self.param) and self.param > 0):
            raise ValueError(f"noise parameter must be finite and > 0, got {self.param!r}")

    # -- exact tail ------------------------------------------------------------------------------
    @cached_property
    def _dg_tail(self) -> np.ndarray:
        """``tail[t] = P(|Y| > t)`` for t = 0..K of the discrete Gaussian (exact pmf)."""
        k = math.ceil(40.0 * math.sqrt(self.param)) + 1
        x = np.arange(0, k + 1, dtype=np.float64)
        two_sided = np.where(x == 0, 1.0, 2.0) * np.exp(-x * x / (2.0 * self.param))
        # suffix sums from the small end up: no cancellation in the far tail
        suffix = np.cumsum(two_sided[::-1])[::-1]
        total = float(suffix[0])
        tail = np.append(suffix[1:], 0.0) / total
        return np.minimum(tail, 1.0)

    def tail(self, t: Any) -> np.ndarray:
        """``P(|Y| > t)`` for integer(s) ``t`` (negative t: 1)."""
        tt = np.floor(np.asarray(t, dtype=np.float64))
        if self.kind == "geometric":
            a = math.exp(-1.0 / self.param)
            # P(|Y| > t) = 2 a^(t+1) / (1 + a) for t >= 0
            out = np.where(tt < 0, 1.0, 2.0 * np.power(a, np.maximum(tt, 0.0) + 1.0) / (1.0 + a))
            return np.minimum(out, 1.0)
        tab = self._dg_tail
        idx = np.clip(tt, 0, tab.size - 1).astype(np.int64)
        return np.where(tt < 0, 1.0, tab[idx])

    def threshold(self, alpha: Any) -> np.ndarray:
        """The smallest integer ``t >= 0`` with ``P(|Y| > t) <= alpha`` (vectorized over alpha)."""
        a = np.asarray(alpha, dtype=np.float64)
        if np.any(~(a > 0)):
            raise ValueError("alpha must be > 0")
        if self.kind == "geometric":
            q = math.exp(-1.0 / self.param)
            # 2 q^(t+1)/(1+q) <= a  <=>  t >= log(a (1+q)/2)/log(q) - 1
            t = np.ceil(np.log(a * (1.0 + q) / 2.0) / math.log(q) - 1.0 - 1e-9)
            t = np.maximum(t, 0.0)
            # guard the float ceiling with the exact tail on both sides
            t = np.where(self.tail(t) > a, t + 1.0, t)
            t = np.where((t > 0) & (self.tail(t - 1.0) <= a), t - 1.0, t)
            return t.astype(np.int64)
        tab = self._dg_tail  # decreasing: first index with tab <= a
        return np.searchsorted(-tab, -a, side="left").astype(np.int64)

    def margin(self, level: float) -> int:
        """The noise-only margin of error: smallest integer m with ``P(|Y| <= m) >= level``."""
        return int(self.threshold(1.0 - float(level)))

    @property
    def variance(self) -> float:
        """The exact variance of one draw."""
        if self.kind == "geometric":
            q = math.exp(-1.0 / self.param)
            return 2.0 * q / (1.0 - q) ** 2
        k = math.ceil(40.0 * math.sqrt(self.param)) + 1
        x = np.arange(-k, k + 1, dtype=np.float64)
        w = np.exp(-x * x / (2.0 * self.param))
        return float(np.sum(w * x * x) / np.sum(w))

    def draw(self, size: Any, rng: np.random.Generator) -> np.ndarray:
        """int64 draws of this law (a numpy generator: intervals re-simulate a public law)."""
        if self.kind == "geometric":
            return samplers.discrete_laplace(self.param, size, rng)
        return samplers.discrete_gaussian(self.param, size, rng)

    def describe(self) -> str:
        """``"discrete Gaussian sigma2=302.678"`` / ``"geometric scale=2"``."""
        if self.kind == "geometric":
            return f"geometric scale={self.param:.6g}"
        return f"discrete Gaussian sigma2={self.param:.6g}"


def law_from_details(details: Any, *, key_suffix: str = "") -> NoiseLaw:
    """The law recorded in a spend's details (``noise`` and ``sigma2`` / ``scale`` [+ suffix]).

    Raises:
        ValueError: the details name no noise parameter.
    """
    noise = str(details.get("noise", ""))
    for key, kind in (("sigma2", "discrete_gaussian"), ("scale", "geometric")):
        if key + key_suffix in details:
            if noise and noise not in (kind, "gaussian" if kind == "discrete_gaussian" else "discrete_laplace"):
                raise ValueError(f"spend records noise {noise!r} with a {key} parameter")
            return NoiseLaw(kind, float(details[key + key_suffix]))
    raise ValueError(f"the spend's details name no noise parameter (sigma2/scale{key_suffix}): {sorted(details)}")
