"""Counter-based noise for seeded runs: a node's noise is a pure function of (seed, level, node key).

A sequential generator hands out numbers in the order they are asked for, so a seeded TopDown
release changes as soon as a level is split differently (chunks, processes, a Dask cluster) and a
distributed run cannot be checked against a serial one. Here every random word is instead the
output of a keyed bijection of a *counter* that names what it is for:

* the **key** (128 bits) comes from the run's seed (:meth:`CounterRandom.from_seed`, or from a
  numpy generator the caller passed, :meth:`CounterRandom.from_generator`);
* the **counter** (256 bits) is ``(node key + 1, level, block, 0)``;
* the bijection is **Philox4x64-10** (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers:
  as easy as 1, 2, 3"), the generator numpy ships as ``numpy.random.Philox``.

Blocks are computed for whole arrays of nodes, never with a generator object per node: where a
level's keys are dense (children of a Hierarchy's or LevelTree's surviving parents, an O/D tree's
destination refinements), numpy's Philox encrypts the consecutive counters of a key range in C
(one call per range); scattered keys go through a numpy implementation of the same Philox4x64-10
round function, checked against numpy's Philox and Random123's published answers. Either way a
node's block is the same.

A node draws from word 0 of its block 0: the top 53 bits give a uniform on (0, 1], the lowest bit
a sign. The rejection sampler (a discrete Gaussian with sigma above ~110,000) reads attempt ``a``
from words ``2 (a mod 2)``, ``2 (a mod 2) + 1`` of block ``a // 2`` (proposal and sign,
acceptance), so a rejected node moves on to its own next attempt. A node's value therefore depends
on the seed, its level, its key and its noise parameter only, whatever else is drawn in the same
call: a level drawn in one call, in chunks, in several processes or on a Dask cluster gives the
same values bit for bit, and so does a run resumed from a checkpoint.

Laws (the seeded samplers' purpose: reproducible experiments, floating point like numpy's own):

* discrete Laplace, scale ``t``: with ``q = exp(-1/t)``, ``P(|X| >= k) = 2 q^k / (1 + q)`` for
  ``k >= 1``, so ``|X| = floor(-t * (log V + log((1 + q)/2)))`` for ``V`` uniform on (0, 1]
  (inversion), and a fair sign for ``|X| > 0``;
* discrete Gaussian ``N_Z(0, sigma2)``: inversion of the tail table ``P(|X| >= m)``
  (:func:`gaussian_tail_table`, ``9.5 sigma`` entries summed from the smallest, cached per
  ``sigma2``): ``|X| = #{m >= 1 : P(|X| >= m) >= V}`` and a fair sign; for a larger sigma,
  CKS20 Alg. 3 - a discrete Laplace proposal of scale ``t`` accepted with probability
  ``exp(-(|Y| - sigma2/t)^2 / (2 sigma2))``, whose accepted values have the law
  ``∝ exp(-y^2 / (2 sigma2))`` for every ``t > 0``; ``t = sigma`` accepts 60-76% of the attempts.

All are tested against the exact pmfs (chi-square) like the sequential samplers. The only
inexactness is the one of every float sampler: 53-bit uniforms (tails below probability 2^-53
are cut), probabilities computed in double precision (relative error ~1e-16) and correctly
rounded ``log``/``exp`` (a last-bit difference between two machines' libm changes a draw only
when a uniform falls within an ulp of a decision boundary, about 1e-16 per draw). Secure mode does
not use this module: OS randomness is not reproducible by design
(:mod:`hierdp.privacy.secure_sampling`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, cast

import numpy as np

from hierdp.privacy.calibration import check_representable
from hierdp.privacy.errors import PrivacyParameterError

__all__ = [
    "CounterRandom",
    "NodeStreams",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian_tail_table",
    "node_blocks",
    "philox4x64",
]

# Philox4x64 constants (Random123): multipliers and Weyl key increments
_M0 = 0xD2E7470EE14C6C93
_M1 = 0xCA5A826395121157
_W0 = 0x9E3779B97F4A7C15
_W1 = 0xBB67AE8584CAA73B
_U64 = (1 << 64) - 1
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SHIFT11 = np.uint64(11)
_ONE = np.uint64(1)
_TWO_M53 = 2.0 ** -53
ROUNDS = 10
#: nodes per sub-block of a draw (bounds its temporaries: 64 bytes of words a node)
BLOCK = 1 << 16
#: a key range is encrypted whole when it spans at most DENSE times its keys plus SPAN_SLACK blocks:
#: numpy's Philox takes ~20 ns a block, the vectorized round function ~25x more a key plus ~0.75 ms
#: of numpy call overhead a call (about 250 array operations)
DENSE = 25
SPAN_SLACK = 1 << 15
#: the discrete Gaussian is drawn by inverting its tail table when the table (9.5 sigma entries)
#: has at most this many entries (sigma up to ~110,000), else by rejection
TABLE_LIMIT = 1 << 20
#: scattered keys are grouped into ranges only when a range holds at least this many keys
MIN_RANGE = 256


def _mulhilo(a: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``(hi, lo)`` 64-bit halves of the 128-bit products ``a * b`` (``a`` uint64, ``b`` a constant),
    from 32-bit partial products (each below 2**64)."""
    b_lo, b_hi = np.uint64(b & 0xFFFFFFFF), np.uint64(b >> 32)
    a_lo = a & _MASK32
    a_hi = a >> _SHIFT32
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    mid = (ll >> _SHIFT32) + (lh & _MASK32) + (hl & _MASK32)  # below 3 * 2**32
    hi = a_hi * b_hi + (lh >> _SHIFT32) + (hl >> _SHIFT32) + (mid >> _SHIFT32)
    return hi, a * np.uint64(b)  # the low half is the product modulo 2**64


def philox4x64(counter: tuple[Any, Any, Any, Any], key: tuple[int, int],
               rounds: int = ROUNDS) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox4x64 on arrays: ``counter`` four arrays (or scalars) of 64-bit words, broadcast
    together; ``key`` two 64-bit words. Returns the four uint64 output words (Random123's
    ``philox4x64_R(rounds, ctr, key)``; numpy's ``Philox`` with ``rounds=10``)."""
    k0, k1 = int(key[0]) & _U64, int(key[1]) & _U64
    x0, x1, x2, x3 = (np.array(a, dtype=np.uint64) for a in np.broadcast_arrays(*(np.asarray(c) for c in counter)))
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            hi0, lo0 = _mulhilo(x0, _M0)
            hi1, lo1 = _mulhilo(x2, _M1)
            x0, x1, x2, x3 = hi1 ^ x1 ^ np.uint64(k0), lo1, hi0 ^ x3 ^ np.uint64(k1), lo0
            k0 = (k0 + _W0) & _U64
            k1 = (k1 + _W1) & _U64
    return x0, x1, x2, x3


def _range_blocks(first: int, count: int, level: int, block: int, key: tuple[int, int]) -> np.ndarray:
    """``(count, 4)``: block ``block`` of the node keys ``first .. first + count - 1`` from numpy's
    Philox (it increments its counter before each block: start one below ``first + 1``)."""
    gen = np.random.Philox(counter=np.array([first, level, block, 0], dtype=np.uint64),
                           key=np.array(key, dtype=np.uint64))
    return gen.random_raw(4 * count).reshape(count, 4)


def node_blocks(streams: NodeStreams, block: int, index: np.ndarray | None = None) -> np.ndarray:
    """``(n, 4)`` uint64: block ``block`` of the nodes ``streams.keys[index]`` (default all), that
    is Philox4x64-10 of the counter ``(k + 1, level, block, 0)`` under the run's key, ``k`` the
    node's key.

    Dense keys are encrypted as ranges by numpy's Philox (about 20 ns a node of the range),
    scattered ones by the vectorized round function (about 0.5 us a node and ~1 ms of numpy call
    overhead a call); both give the same words."""
    keys = streams.keys if index is None else streams.keys[index]
    n = keys.size
    if n == 0:
        return np.empty((0, 4), np.uint64)
    key = streams.source.key_words
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo + 1 <= DENSE * n + SPAN_SLACK:  # one range covers them all
        blocks = _range_blocks(lo, hi - lo + 1, streams.level, block, key)
        if hi - lo + 1 == n and (n == 1 or bool(np.all(keys[1:] > keys[:-1]))):
            return blocks  # the keys are exactly lo..hi in order
        return blocks[keys - lo]
    out = np.empty((n, 4), np.uint64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    cuts = np.flatnonzero(np.diff(sk) > DENSE) + 1  # runs of nearly consecutive keys
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [n]])
    big = (ends - starts >= MIN_RANGE) & (sk[ends - 1] - sk[starts] + 1 <= DENSE * (ends - starts))
    rest = np.ones(n, bool)
    for s, e in zip(starts[big].tolist(), ends[big].tolist(), strict=False):
        first = int(sk[s])
        out[order[s:e]] = _range_blocks(first, int(sk[e - 1]) - first + 1, streams.level, block, key)[sk[s:e] - first]
        rest[s:e] = False
    if rest.any():
        pos = order[rest]
        words = philox4x64((keys[pos].astype(np.uint64) + _ONE, np.uint64(streams.level), np.uint64(block),
                            np.uint64(0)), key)
        out[pos] = np.stack(words, axis=1)
    return out


class CounterRandom:
    """The seeded, counter-based randomness of one run (see the module docstring).

    Args:
        key: the 128-bit Philox key (``0 <= key < 2**128``); usually from :meth:`from_seed`.
    """

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= int(key) < 2 ** 128:
            raise PrivacyParameterError(f"key must be an integer in [0, 2**128), got {key!r}")
        self.key = int(key)

    @classmethod
    def from_generator(cls, generator: np.random.Generator) -> CounterRandom:
        """The key drawn from a numpy generator (two 64-bit words): a run given
        ``rng=make_rng(s)`` gets the same key as a run given ``seed=s``."""
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
        lo, hi = (int(w) for w in generator.integers(0, 2 ** 64, size=2, dtype=np.uint64))
        return cls(lo | (hi << 64))

    @classmethod
    def from_seed(cls, seed: int | None) -> CounterRandom:
        """``from_generator(numpy.random.default_rng(seed))``."""
        return cls.from_generator(np.random.default_rng(seed))

    @property
    def key_words(self) -> tuple[int, int]:
        """The key as Philox's two 64-bit words (low, high)."""
        return self.key & _U64, self.key >> 64

    def nodes(self, level: int, keys: Any) -> NodeStreams:
        """The noise streams of the given node ``keys`` (non-negative int64) of ``level`` (what the
        samplers of :mod:`hierdp.privacy.samplers` take as ``rng`` to draw one value per node)."""
        return NodeStreams(self, level, keys)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CounterRandom) and other.key == self.key

    def __hash__(self) -> int:
        return hash(("CounterRandom", self.key))

    def __repr__(self) -> str:
        return f"CounterRandom(key={self.key:#034x})"


class NodeStreams:
    """One independent stream per node of a level: block ``b`` of node ``k`` is Philox4x64-10 of the
    counter ``(k + 1, level, b, 0)`` under the run's key. Pass it as ``rng`` to
    :func:`hierdp.privacy.samplers.discrete_gaussian` / ``discrete_laplace`` / ``geometric`` with
    ``size`` equal to the number of nodes."""

    __slots__ = ("keys", "level", "source")

    def __init__(self, source: CounterRandom, level: int, keys: Any) -> None:
        if not isinstance(source, CounterRandom):
            raise TypeError(f"source must be a CounterRandom, got {type(source).__name__}")
        level = int(level)
        if not 0 <= level < 2 ** 63:
            raise PrivacyParameterError(f"level must be in [0, 2**63), got {level}")
        k = np.asarray(keys)
        if k.ndim != 1 or (k.size and k.dtype.kind not in "iu"):
            raise PrivacyParameterError(f"keys must be a 1-d integer array, got dtype {k.dtype} and shape {k.shape}")
        k = k.astype(np.int64, copy=False)
        if k.size and int(k.min()) < 0:
            raise PrivacyParameterError(f"node keys must be non-negative, got {int(k.min())}")
        self.source = source
        self.level = level
        self.keys = k

    def __len__(self) -> int:
        return int(self.keys.size)

    def subset(self, index: Any) -> NodeStreams:
        """The streams of ``keys[index]``."""
        return NodeStreams(self.source, self.level, self.keys[index])

    def __repr__(self) -> str:
        return f"NodeStreams({self.source!r}, level={self.level}, {self.keys.size} nodes)"


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
    check_representable(name, arr)
    n = len(streams)
    if arr.ndim == 0:
        return np.broadcast_to(arr, (n,))
    if arr.size != n:
        raise PrivacyParameterError(f"{name}: {arr.size} values requested from {n} node streams; "
                                    "draw exactly one value per node")
    return arr.ravel()


def discrete_laplace(scale: np.ndarray | float, streams: NodeStreams) -> np.ndarray:
    """One discrete Laplace draw per node (``P(x) ∝ exp(-|x| / scale)``): int64, node order.

    ``scale``: one positive float per node, or a scalar. Node ``k`` reads word 0 of its block 0.
    """
    n = len(streams)
    s = _per_node(scale, streams, "scale")
    out = np.empty(n, np.int64)
    constant = n > 0 and bool(np.all(s == s[0]))
    for lo in range(0, n, BLOCK):
        idx = np.arange(lo, min(n, lo + BLOCK))
        out[idx] = _laplace_from_word(node_blocks(streams, 0, idx)[:, 0], s[0] if constant else s[idx])
    return out


@functools.lru_cache(maxsize=256)
def gaussian_tail_table(sigma2: float) -> np.ndarray | None:
    """``-P(|X| >= m)`` for ``m = 1 .. M`` (increasing) of ``X ~ N_Z(0, sigma2)``, or ``None`` when
    ``M`` would exceed :data:`TABLE_LIMIT`.

    ``M = ceil(9.5 sigma) + 2``: beyond it ``P(|X| >= m) < 2**-64``, below the 53-bit uniforms'
    resolution. The tails are summed from their smallest terms (a reversed cumulative sum), so
    every ``P(|X| >= m)`` keeps its relative precision.
    """
    sigma = math.sqrt(sigma2)
    size = math.ceil(9.5 * sigma) + 2
    if size > TABLE_LIMIT:
        return None
    m = np.arange(size + 1, dtype=np.float64)
    weight = np.exp(-np.square(m) / (2.0 * sigma2))
    weight[1:] *= 2.0  # |X| = m > 0 has two values, +m and -m
    tail = np.cumsum((weight / weight.sum())[::-1])[::-1]  # tail[m] = P(|X| >= m)
    table = -tail[1:]
    table.setflags(write=False)
    return table


def _gaussian_by_table(word: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``|X| = #{m >= 1 : P(|X| >= m) >= U}`` for ``U`` on (0, 1] (so ``P(|X| >= m)`` is exact up
    to the table's float precision), and a fair sign from the word's lowest bit for ``|X| > 0``."""
    magnitude = np.searchsorted(table, -_unit_open_closed(word), side="right").astype(np.int64)
    negative = (word & _ONE).astype(bool)
    return np.where(negative, -magnitude, magnitude)


def discrete_gaussian(sigma2: np.ndarray | float, streams: NodeStreams) -> np.ndarray:
    """One discrete Gaussian draw per node (``P(x) ∝ exp(-x^2 / (2 sigma2))``): int64, node order.

    A node whose ``sigma2`` has a tail table (:func:`gaussian_tail_table`: sigma up to ~110,000)
    inverts it with word 0 of its block 0; a larger ``sigma2`` uses CKS20 Alg. 3, attempt ``a``
    reading words ``2 (a mod 2)``, ``2 (a mod 2) + 1`` of block ``a // 2``. Which way a node goes
    depends on its own ``sigma2`` only, so its value never depends on the other nodes drawn with it.
    """
    n = len(streams)
    s2_all = _per_node(sigma2, streams, "sigma2")
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    values, inverse = (s2_all[:1], np.zeros(n, np.int64)) if bool(np.all(s2_all == s2_all[0])) else \
        np.unique(s2_all, return_inverse=True)
    inverse = inverse.ravel()
    tables = [gaussian_tail_table(float(v)) for v in values]
    use_table = np.array([t is not None for t in tables])
    for lo in range(0, n, BLOCK):
        idx = np.arange(lo, min(n, lo + BLOCK))
        kind = inverse[idx]
        by_table = use_table[kind]
        if values.size == 1 and by_table.all():  # one parameter (a TopDown level): one inversion
            out[idx] = _gaussian_by_table(node_blocks(streams, 0, idx)[:, 0], cast(np.ndarray, tables[0]))
        elif by_table.any():
            word = node_blocks(streams, 0, idx[by_table] if not by_table.all() else idx)[:, 0]
            groups = kind[by_table]
            for g in np.unique(groups).tolist():
                sel = groups == g
                out[idx[by_table][sel]] = _gaussian_by_table(word[sel], tables[g])
        if not by_table.all():
            out[idx[~by_table]] = _gaussian_by_rejection(s2_all, streams, idx[~by_table])
    return out


def _gaussian_by_rejection(s2_all: np.ndarray, streams: NodeStreams, pending: np.ndarray) -> np.ndarray:
    """CKS20 Alg. 3 for the nodes ``pending`` (sorted positions); returns their draws in order."""
    out = np.empty(pending.size, np.int64)
    where = pending.copy()  # positions in ``out`` of the still pending nodes
    pos = np.arange(pending.size)
    attempt = 0
    words = np.zeros((0, 4), np.uint64)
    held = where
    while where.size:
        if attempt % 2 == 0:
            words = node_blocks(streams, attempt // 2, where)
            held = where
            w = words
        else:  # the odd attempt reads the second half of the block the even one fetched
            w = words if where.size == held.size else words[np.searchsorted(held, where)]
        col = 2 * (attempt % 2)
        s2 = s2_all[where]
        t = np.sqrt(s2)  # any t > 0 gives the exact law; t = sigma accepts 60-76% (CKS20's floor+1: 54-76%)
        y = _laplace_from_word(w[:, col], t)
        accept_prob = np.exp(-np.square(np.abs(y) - s2 / t) / (2.0 * s2))
        accepted = _unit_open_closed(w[:, col + 1]) <= accept_prob  # P(U <= p) = p on the 53-bit grid
        out[pos[accepted]] = y[accepted]
        where, pos = where[~accepted], pos[~accepted]
        attempt += 1
    return out
