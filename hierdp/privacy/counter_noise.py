"""Counter-based noise for seeded runs: a node's noise is a pure function of (seed, level, node key).

A sequential generator hands out numbers in the order they are asked for, so a seeded TopDown
release changes as soon as a level is split differently (chunks, processes, a Dask cluster) and a
distributed run cannot be checked against a serial one. Here every random word is instead the
output of a keyed bijection of a *counter* that names what it is for:

* the **key** (64 bits) comes from the run's seed (:meth:`CounterRandom.from_seed`, or from a
  numpy generator the caller passed, :meth:`CounterRandom.from_generator`);
* the **counter** (128 bits) is ``(node key: 64 bits, level: 32 bits, attempt: 32 bits)``;
* the bijection is **Philox4x32-10** (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers:
  as easy as 1, 2, 3"; the Random123 generator that also underlies numpy's ``Philox`` and
  cuRAND's), computed with numpy on whole arrays of counters: no per-node generator objects.

One Philox block (128 bits) serves one *attempt* of a node's rejection sampler: two 64-bit words,
the first giving a uniform on (0, 1] (its top 53 bits) and a sign (its lowest bit), the second the
acceptance uniform. A node whose attempt ``a`` is rejected moves on to attempt ``a + 1``, so its
value is the first accepted attempt of its own stream whatever else is drawn in the same call:
a level drawn in one call, in chunks, in several processes or on a Dask cluster gives the same
values bit for bit, and so does a run resumed from a checkpoint.

Laws (the seeded samplers' purpose: reproducible experiments, floating point like numpy's own):

* discrete Laplace, scale ``t``: with ``q = exp(-1/t)``, ``P(|X| >= k) = 2 q^k / (1 + q)`` for
  ``k >= 1``, so ``|X| = floor(-t * (log V + log((1 + q)/2)))`` for ``V`` uniform on (0, 1]
  (inversion), and a fair sign for ``|X| > 0``;
* discrete Gaussian ``N_Z(0, sigma2)``: CKS20 Alg. 3, a discrete Laplace proposal of scale
  ``t = floor(sigma) + 1`` accepted with probability ``exp(-(|Y| - sigma2/t)^2 / (2 sigma2))``.

Both are tested against the exact pmfs (chi-square) like the sequential samplers. The only
inexactness is the one of every float sampler: 53-bit uniforms (the tail beyond ``37 t`` is cut,
probability below 2^-53) and correctly rounded ``log``/``exp`` (a last-bit difference between two
machines' libm changes a draw only when a uniform falls within an ulp of a decision boundary,
about 1e-16 per draw). Secure mode does not use this module: OS randomness is not reproducible by
design (:mod:`hierdp.privacy.secure_sampling`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError

__all__ = ["CounterRandom", "NodeStreams", "philox4x32", "discrete_laplace", "discrete_gaussian",
           "uniform_words"]

# Philox4x32 constants (Random123): multipliers and Weyl key increments
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = 0x9E3779B9
_W1 = 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)
_U32 = 0xFFFFFFFF
_SHIFT32 = np.uint64(32)
_SHIFT11 = np.uint64(11)
_ONE = np.uint64(1)
_TWO_M53 = 2.0 ** -53
ROUNDS = 10
#: nodes per vectorized sub-block: four uint64 lanes and two products of this size stay in cache
BLOCK = 1 << 14


def philox4x32(counter: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], key: tuple[int, int],
               rounds: int = ROUNDS) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox4x32 on arrays: ``counter`` is four arrays of 32-bit words (any integer dtype, values
    below 2**32, broadcast together), ``key`` two 32-bit words. Returns four uint64 arrays holding
    the 32-bit output words (Random123's ``philox4x32_R(rounds, ctr, key)``).
    """
    k0, k1 = int(key[0]) & _U32, int(key[1]) & _U32
    arrays = np.broadcast_arrays(*(np.asarray(c) for c in counter))
    x0, x1, x2, x3 = (np.array(a, dtype=np.uint64) for a in arrays)  # copies: updated in place
    if np.any((x0 | x1 | x2 | x3) > _MASK32):
        raise ValueError("philox4x32: counter words must be below 2**32")
    p0 = np.empty_like(x0)
    p1 = np.empty_like(x0)
    for _ in range(rounds):
        # (hi, lo) of the two 32x32 -> 64-bit products; the round's new words (Random123 order)
        np.multiply(x0, _M0, out=p0)
        np.multiply(x2, _M1, out=p1)
        np.right_shift(p1, _SHIFT32, out=x0)
        x0 ^= x1
        x0 ^= np.uint64(k0)
        np.right_shift(p0, _SHIFT32, out=x2)
        x2 ^= x3
        x2 ^= np.uint64(k1)
        np.bitwise_and(p1, _MASK32, out=x1)
        np.bitwise_and(p0, _MASK32, out=x3)
        k0 = (k0 + _W0) & _U32
        k1 = (k1 + _W1) & _U32
    return x0, x1, x2, x3


class CounterRandom:
    """The seeded, counter-based randomness of one run (see the module docstring).

    Args:
        key: the 64-bit Philox key (``0 <= key < 2**64``); usually from :meth:`from_seed`.
    """

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= int(key) < 2 ** 64:
            raise PrivacyParameterError(f"key must be an integer in [0, 2**64), got {key!r}")
        self.key = int(key)

    @classmethod
    def from_generator(cls, generator: np.random.Generator) -> "CounterRandom":
        """The key drawn from a numpy generator (one 64-bit word): a run given ``rng=make_rng(s)``
        gets the same key as a run given ``seed=s``."""
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
        return cls(int(generator.integers(0, 2 ** 64, dtype=np.uint64)))

    @classmethod
    def from_seed(cls, seed: int | None) -> "CounterRandom":
        """``from_generator(numpy.random.default_rng(seed))``."""
        return cls.from_generator(np.random.default_rng(seed))

    @property
    def key_words(self) -> tuple[int, int]:
        """The key as Philox's two 32-bit words (low, high)."""
        return self.key & _U32, self.key >> 32

    def nodes(self, level: int, keys: Any) -> "NodeStreams":
        """The noise streams of the given node ``keys`` (int64) of ``level`` (what the samplers of
        :mod:`hierdp.privacy.samplers` take as ``rng`` to draw one value per node)."""
        return NodeStreams(self, level, keys)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CounterRandom) and other.key == self.key

    def __hash__(self) -> int:
        return hash(("CounterRandom", self.key))

    def __repr__(self) -> str:
        return f"CounterRandom(key={self.key:#018x})"


class NodeStreams:
    """One independent stream per node of a level: attempt ``a`` of node ``k`` is the Philox block
    of counter ``(k, level, a)`` under the run's key. Pass it as ``rng`` to
    :func:`hierdp.privacy.samplers.discrete_gaussian` / ``discrete_laplace`` / ``geometric`` with
    ``size`` equal to the number of nodes."""

    __slots__ = ("source", "level", "keys")

    def __init__(self, source: CounterRandom, level: int, keys: Any) -> None:
        if not isinstance(source, CounterRandom):
            raise TypeError(f"source must be a CounterRandom, got {type(source).__name__}")
        level = int(level)
        if not 0 <= level <= _U32:
            raise PrivacyParameterError(f"level must be in [0, 2**32), got {level}")
        k = np.asarray(keys)
        if k.ndim != 1 or (k.size and k.dtype.kind not in "iu"):
            raise PrivacyParameterError(f"keys must be a 1-d integer array, got dtype {k.dtype} and shape {k.shape}")
        self.source = source
        self.level = level
        self.keys = k.astype(np.int64, copy=False)

    def __len__(self) -> int:
        return int(self.keys.size)

    def subset(self, index: Any) -> "NodeStreams":
        """The streams of ``keys[index]``."""
        return NodeStreams(self.source, self.level, self.keys[index])

    def __repr__(self) -> str:
        return f"NodeStreams({self.source!r}, level={self.level}, {self.keys.size} nodes)"


def uniform_words(streams: NodeStreams, attempt: int, index: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The two 64-bit words of attempt ``attempt`` of the nodes ``index`` (default: all)."""
    keys = streams.keys if index is None else streams.keys[index]
    k = keys.view(np.uint64)
    x0, x1, x2, x3 = philox4x32((k & _MASK32, k >> _SHIFT32, np.uint64(streams.level), np.uint64(attempt)),
                                streams.source.key_words)
    x0 <<= _SHIFT32
    x0 |= x1
    x2 <<= _SHIFT32
    x2 |= x3
    return x0, x2


def _unit_open_closed(word: np.ndarray) -> np.ndarray:
    """The top 53 bits of ``word`` as a uniform on (0, 1] (never 0: its log is finite)."""
    return ((word >> _SHIFT11).astype(np.float64) + 1.0) * _TWO_M53


def _laplace_from_word(word: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """Discrete Laplace of ``scale`` by inversion of one word (see the module docstring)."""
    scale = np.asarray(scale, dtype=np.float64)
    c = np.log1p(np.expm1(-1.0 / scale) / 2.0)  # log((1 + q) / 2), q = exp(-1/scale)
    magnitude = np.floor(-scale * (np.log(_unit_open_closed(word)) + c)).astype(np.int64)
    negative = (word & _ONE).astype(bool)
    return np.where(negative, -magnitude, magnitude)


def _per_node(params: np.ndarray | float, streams: NodeStreams, name: str) -> np.ndarray:
    """``params`` as one float per node (a scalar is broadcast); any other size is refused."""
    arr = np.asarray(params, dtype=np.float64)
    n = len(streams)
    if arr.ndim == 0:
        return np.broadcast_to(arr, (n,))
    if arr.size != n:
        raise PrivacyParameterError(f"{name}: {arr.size} values requested from {n} node streams; "
                                    "draw exactly one value per node")
    return arr.ravel()


def discrete_laplace(scale: np.ndarray | float, streams: NodeStreams) -> np.ndarray:
    """One discrete Laplace draw per node (``P(x) ∝ exp(-|x| / scale)``): int64, node order.

    ``scale``: one positive float per node (already broadcast), or a scalar.
    """
    n = len(streams)
    s = _per_node(scale, streams, "scale")
    out = np.empty(n, np.int64)
    constant = n > 0 and bool(np.all(s == s[0]))
    for lo in range(0, n, BLOCK):
        idx = np.arange(lo, min(n, lo + BLOCK))
        first, _ = uniform_words(streams, 0, idx)
        out[idx] = _laplace_from_word(first, s[0] if constant else s[idx])
    return out


def discrete_gaussian(sigma2: np.ndarray | float, streams: NodeStreams) -> np.ndarray:
    """One discrete Gaussian draw per node (``P(x) ∝ exp(-x^2 / (2 sigma2))``): int64, node order.

    CKS20 Alg. 3 with attempt ``a`` of a node read from its block ``a``; only the rejected nodes
    of a sub-block are redrawn, each from its own next attempt.
    """
    n = len(streams)
    s2_all = _per_node(sigma2, streams, "sigma2")
    out = np.empty(n, np.int64)
    constant = n > 0 and bool(np.all(s2_all == s2_all[0]))
    for lo in range(0, n, BLOCK):
        pending = np.arange(lo, min(n, lo + BLOCK))
        attempt = 0
        while pending.size:
            s2 = s2_all[0] if constant else s2_all[pending]
            t = np.floor(np.sqrt(s2)) + 1.0  # any t > 0 gives the exact law (CKS20); this one accepts often
            first, second = uniform_words(streams, attempt, pending)
            y = _laplace_from_word(first, t)
            accept_prob = np.exp(-np.square(np.abs(y) - s2 / t) / (2.0 * s2))
            accepted = _unit_open_closed(second) <= accept_prob  # P(U <= p) = p for U on (0, 1] (53-bit grid)
            out[pending[accepted]] = y[accepted]
            pending = pending[~accepted]
            attempt += 1
            if attempt > _U32:  # unreachable (acceptance > 1/3 per attempt); keeps the counter in range
                raise RuntimeError("discrete_gaussian: attempt counter exhausted")
    return out
