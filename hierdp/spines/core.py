"""The :class:`Spine`: a geographic hierarchy of geounits over a base of blocks, with a privacy-loss
budget (PLB) proportion per geounit (paper 003, §3).

* **Geolevels** run from the root (level 0, e.g. the US) to the blocks (the last level). Every block
  is at the last level (uniform depth: TopDown runs level by level), and the blocks partition the
  base: each base block is a leaf exactly once.
* **Proportions**: the user gives one proportion β[l] > 0 per geolevel, exact
  (:class:`fractions.Fraction`), summing to exactly 1 (Theorem 1). Every geounit starts with
  γ[u] = β[level(u)]; bypass (§5) moves γ down paths, so geounits of one level may differ and
  γ[u] = 0 marks an unmeasured geounit (Theorem 3's y = ∞).
* **Theorem 3 check** (:meth:`Spine.check_path_sums`): for every block the γ summed along its
  root-to-block path equals Σ_l β[l] = 1 exactly. Every operation returns a new spine and runs it;
  a geounit with γ = 0 must be the only child of its parent (its estimate is its parent's).

γ is stored exactly as integer numerators over one common denominator (the least common multiple
of the β denominators; bypass only adds proportions, so it never needs a new denominator), which
makes the path sums exact *and* vectorized (int64 arithmetic over the block-level arrays).

A spine is built from public geography only (block ids and their containing geounits): nothing in
it depends on counts, so the spine operations cost no privacy (paper 003 §5.1; notes A13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from hierdp._segments import children_csr, gather_ranges
from hierdp.errors import HierdpError

__all__ = ["Spine", "SpineError", "as_fraction", "parse_proportions"]

#: denominators larger than this are refused (the int64 path sums must stay exact)
MAX_DENOMINATOR = 1 << 40


class SpineError(HierdpError, ValueError):
    """A spine, its proportions or its entities are malformed; the message names the culprit."""


def as_fraction(value: Any, what: str) -> Fraction:
    """``value`` as an exact :class:`Fraction`.

    Fractions and integers are taken as they are; strings as ``Fraction(str)`` ("1/6", "0.25");
    floats through their shortest decimal repr (``0.1`` is 1/10, not the binary double), which is
    what a user who typed ``0.1`` meant.
    """
    if isinstance(value, bool):
        raise SpineError(f"{what} must be a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise SpineError(f"{what} must be finite, got {value!r}")
        return Fraction(repr(float(value)))
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise SpineError(f"{what}: cannot read {value!r} as a fraction") from None
    raise SpineError(f"{what} must be a number or a fraction, got {value!r}")


def parse_proportions(proportions: Mapping[str, Any] | Sequence[Any], level_names: Sequence[str],
                      what: str = "proportions") -> tuple[Fraction, ...]:
    """One exact proportion per geolevel (root first), each > 0, summing to exactly 1.

    Raises:
        SpineError: a missing or unknown level, a proportion <= 0, or a sum other than 1 (the
            message names the level or the sum).
    """
    names = list(level_names)
    if isinstance(proportions, Mapping):
        unknown = [k for k in proportions if k not in names]
        if unknown:
            raise SpineError(f"{what}: unknown geolevel {unknown[0]!r}; geolevels: {names}")
        missing = [n for n in names if n not in proportions]
        if missing:
            raise SpineError(f"{what}: no proportion for geolevel {missing[0]!r}")
        vals = [as_fraction(proportions[n], f"{what}[{n!r}]") for n in names]
    else:
        seq = list(proportions)
        if len(seq) != len(names):
            raise SpineError(f"{what}: {len(seq)} proportions for {len(names)} geolevels {names}")
        vals = [as_fraction(v, f"{what}[{n!r}]") for v, n in zip(seq, names, strict=False)]
    for n, v in zip(names, vals, strict=False):
        if v <= 0:
            raise SpineError(f"{what}: geolevel {n!r} has proportion {v} (every proportion must be > 0)")
    total = sum(vals, Fraction(0))
    if total != 1:
        raise SpineError(f"{what} must sum to exactly 1, got {total} (= {float(total):.12g})")
    return tuple(vals)


@dataclass(frozen=True)
class _Ops:
    """What has been done to a spine (for provenance and guards)."""

    items: tuple[str, ...] = ()

    def plus(self, text: str) -> _Ops:
        return _Ops((*self.items, text))


@dataclass(frozen=True, eq=False)
class Spine:
    """A geographic spine (see the module docstring). Build with :meth:`from_frame` or
    :meth:`from_arrays`; every operation returns a new spine.

    Attributes:
        level_names: geolevel names, root first, blocks last.
        names: one name per geounit (unique within its level), level by level.
        parent: int64 parent index (-1 for the root); every parent precedes its children.
        level: int64 geolevel of every geounit.
        proportions: the input per-geolevel proportions β (exact).
        gamma_num, gamma_den: γ[u] = gamma_num[u] / gamma_den, exactly.
        operations: what was done to the spine, in order.
        domain_source: ``"declared"``: the geography is public input (the default); see
            :mod:`hierdp.privacy.domain`.
    """

    level_names: tuple[str, ...]
    names: np.ndarray
    parent: np.ndarray
    level: np.ndarray
    proportions: tuple[Fraction, ...]
    gamma_num: np.ndarray
    gamma_den: int
    operations: _Ops = field(default_factory=_Ops)
    domain_source: str = "declared"
    domain_assumption: str | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, level_names: Sequence[str], names: Sequence[Any], parent: Sequence[int] | np.ndarray,
                    proportions: Mapping[str, Any] | Sequence[Any], *, gamma: Sequence[Any] | None = None,
                    base: Iterable[Any] | None = None, check: bool = True) -> Spine:
        """A spine from a parent array (any node order; it is put in level order).

        Args:
            level_names: geolevel names, root first, blocks last.
            names: one name per geounit (unique within a level).
            parent: parent index per geounit (-1 for the one root).
            proportions: one per geolevel (mapping by name, or a sequence root first).
            gamma: optional per-geounit proportions (exact), e.g. of an optimized spine; default
                γ[u] = β[level(u)].
            base: optional universe of block ids that the blocks must partition.
            check: run the Theorem 3 check (always on, except for internal rebuilds).
        """
        level_names = tuple(str(x) for x in level_names)
        if len(level_names) < 2:
            raise SpineError("a spine needs at least two geolevels (a root and blocks)")
        if len(set(level_names)) != len(level_names):
            raise SpineError(f"geolevel names repeat: {list(level_names)}")
        names_arr = np.asarray(list(names), dtype=object)
        par = np.asarray(parent)
        if par.ndim != 1 or par.size != names_arr.size:
            raise SpineError(f"parent has {par.size} entries for {names_arr.size} geounits")
        if par.size == 0:
            raise SpineError("a spine needs geounits")
        if not np.issubdtype(par.dtype, np.integer):
            raise SpineError("parent indices must be integers")
        par = par.astype(np.int64)
        n = par.size
        if np.any((par < -1) | (par >= n)):
            i = int(np.flatnonzero((par < -1) | (par >= n))[0])
            raise SpineError(f"geounit {names_arr[i]!r}: parent index {int(par[i])} out of range")
        roots = np.flatnonzero(par < 0)
        if roots.size != 1:
            raise SpineError(f"a spine has exactly one root; found {roots.size} geounits without a parent"
                             + (f" (e.g. {names_arr[roots[1]]!r})" if roots.size > 1 else ""))
        depth = _depths(par, names_arr)
        nlev = len(level_names)
        leaves = np.ones(n, bool)
        leaves[par[par >= 0]] = False
        bad = leaves & (depth != nlev - 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SpineError(f"geounit {names_arr[i]!r} at geolevel {level_names[min(depth[i], nlev - 1)]!r} has no "
                             f"blocks below it (every leaf must be a block at geolevel {level_names[-1]!r})")
        if int(depth.max()) != nlev - 1:
            raise SpineError(f"the tree has {int(depth.max()) + 1} levels for {nlev} geolevel names")
        # level order, stable within a level by parent position then input order
        order = _level_order(par, depth)
        inv = np.empty(n, np.int64)
        inv[order] = np.arange(n)
        names_arr = names_arr[order]
        par = np.where(par[order] >= 0, inv[np.maximum(par[order], 0)], -1)
        depth = depth[order]
        _check_unique_names(names_arr, depth, level_names)
        props = parse_proportions(proportions, level_names)
        den = math.lcm(*(p.denominator for p in props))
        if gamma is None:
            num = np.array([p.numerator * (den // p.denominator) for p in props], dtype=np.int64)[depth]
        else:
            g = [as_fraction(v, f"gamma[{names_arr[i]!r}]") for i, v in enumerate(np.asarray(list(gamma), object)[order])]
            if len(g) != n:
                raise SpineError(f"gamma has {len(g)} entries for {n} geounits")
            if any(v < 0 for v in g):
                i = next(i for i, v in enumerate(g) if v < 0)
                raise SpineError(f"geounit {names_arr[i]!r} has a negative proportion {g[i]}")
            den = math.lcm(den, *(v.denominator for v in g))
            num = np.array([v.numerator * (den // v.denominator) for v in g], dtype=np.int64)
        if den > MAX_DENOMINATOR:
            raise SpineError(f"the proportions' common denominator {den} exceeds {MAX_DENOMINATOR}: use simpler "
                             "fractions")
        spine = cls(level_names, _frozen(names_arr), _frozen(par), _frozen(depth), props, _frozen(num), int(den))
        if base is not None:
            spine.check_base(base)
        if check:
            spine.check_path_sums()
        return spine

    @classmethod
    def from_frame(cls, frame: Any, levels: Sequence[str], proportions: Mapping[str, Any] | Sequence[Any], *,
                   root: str = "root", root_level: str | None = None, base: Iterable[Any] | None = None) -> Spine:
        """A spine from one row per block and one column per geolevel below the root.

        ``levels`` names the columns from the coarsest geolevel below the root to the block id
        column (last). Codes must be unique within a geolevel (use hierarchical codes such as
        GEOIDs): a code with two parents, or a block listed twice, is refused.

        Args:
            frame: a pandas DataFrame.
            levels: column names, coarse to fine; the last is the block id.
            proportions: one per geolevel, the root's first (mapping by name or a sequence).
            root: the root geounit's name; ``root_level`` its geolevel name (default ``root``).
            base: the universe of block ids the blocks must partition (default: the blocks listed).
        """
        import pandas as pd

        levels = list(levels)
        missing = [c for c in levels if c not in frame.columns]
        if missing:
            raise SpineError(f"column {missing[0]!r} is not in the frame (columns: {list(frame.columns)})")
        if len(frame) == 0:
            raise SpineError("the frame has no blocks")
        df = frame[levels]
        if df.isna().any().any():
            col = df.columns[df.isna().any()][0]
            row = int(np.flatnonzero(df[col].isna().to_numpy())[0])
            raise SpineError(f"column {col!r} has a missing value at row {row}")
        blocks = df[levels[-1]].to_numpy(dtype=object)
        dup = pd.Index(blocks).duplicated()
        if dup.any():
            raise SpineError(f"block {blocks[np.flatnonzero(dup)[0]]!r} is listed twice: the blocks do not partition "
                             "the base")
        level_names = [root_level or root, *levels]
        names: list[Any] = [root]
        parent: list[np.ndarray] = [np.array([-1])]
        prev_codes = np.zeros(len(df), dtype=np.int64)  # index of each row's geounit at the previous level
        offset = 1
        for col in levels:
            codes = df[col].to_numpy(dtype=object)
            uniq, first, inv = np.unique(codes.astype(str), return_index=True, return_inverse=True)
            inv = inv.ravel()
            # a code with two parents: its rows disagree on the previous level's geounit
            par_of = np.full(uniq.size, -1, np.int64)
            par_of[inv] = prev_codes
            clash = par_of[inv] != prev_codes
            if clash.any():
                r = int(np.flatnonzero(clash)[0])
                raise SpineError(f"geounit {codes[r]!r} at geolevel {col!r} has two parents "
                                 f"({names[par_of[inv[r]]]!r} and {names[prev_codes[r]]!r})")
            names.extend(codes[first].tolist())
            parent.append(par_of)
            prev_codes = inv + offset
            offset += uniq.size
        par = np.concatenate(parent)
        par = np.where(par >= 0, par, -1)
        # parent indices above point at the previous level's global positions
        spine = cls.from_arrays(level_names, names, par, proportions, base=base)
        return spine

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        """Number of geounits."""
        return int(self.parent.size)

    @property
    def n_levels(self) -> int:
        """Number of geolevels (root and blocks included)."""
        return len(self.level_names)

    @property
    def block_level(self) -> int:
        """Index of the block geolevel (the last)."""
        return self.n_levels - 1

    @property
    def level_ptr(self) -> np.ndarray:
        """``level_ptr[l]:level_ptr[l+1]`` are the geounits of geolevel ``l``."""
        return np.searchsorted(self.level, np.arange(self.n_levels + 1)).astype(np.int64)

    @property
    def blocks(self) -> np.ndarray:
        """Geounit indices of the blocks (the base), in spine order."""
        p = self.level_ptr
        return np.arange(p[-2], p[-1], dtype=np.int64)

    @property
    def n_blocks(self) -> int:
        """Number of blocks."""
        return int(self.blocks.size)

    @property
    def block_names(self) -> np.ndarray:
        """Block ids in spine order."""
        return self.names[self.blocks]

    def level_index(self, level: str | int) -> int:
        """The index of a geolevel given by name or number."""
        if isinstance(level, (int, np.integer)) and not isinstance(level, bool):
            if not 0 <= int(level) < self.n_levels:
                raise SpineError(f"geolevel {level} out of range 0..{self.n_levels - 1}")
            return int(level)
        if level not in self.level_names:
            raise SpineError(f"unknown geolevel {level!r}; geolevels: {list(self.level_names)}")
        return self.level_names.index(level)

    def index_of(self, name: Any, level: str | int | None = None) -> int:
        """Geounit index of ``name`` (in ``level`` when names repeat across levels)."""
        mask = self.names == name
        if level is not None:
            mask &= self.level == self.level_index(level)
        hits = np.flatnonzero(mask)
        if hits.size == 0:
            raise SpineError(f"unknown geounit {name!r}")
        if hits.size > 1:
            raise SpineError(f"geounit name {name!r} exists at several geolevels; give level=")
        return int(hits[0])

    @property
    def n_children(self) -> np.ndarray:
        """Number of children of every geounit."""
        has = self.parent >= 0
        return np.bincount(self.parent[has], minlength=self.n).astype(np.int64)

    def children_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ptr, child)``: children of geounit u are ``child[ptr[u]:ptr[u+1]]`` (in spine order;
        level order makes them contiguous)."""
        return children_csr(self.parent, self.n)

    def gamma(self, u: int | np.integer) -> Fraction:
        """γ of geounit ``u``, exactly."""
        return Fraction(int(self.gamma_num[u]), self.gamma_den)

    @property
    def gamma_float(self) -> np.ndarray:
        """γ of every geounit as floats (for display and weights; privacy uses the exact values)."""
        return self.gamma_num / float(self.gamma_den)

    @property
    def measured(self) -> np.ndarray:
        """Mask of geounits that get a measurement (γ > 0)."""
        return self.gamma_num > 0

    def block_of_geounit(self) -> np.ndarray:
        """For every block (in spine order), the geounit index at every geolevel: an
        ``(n_blocks, n_levels)`` int64 array (column l = its ancestor at geolevel l)."""
        out = np.empty((self.n_blocks, self.n_levels), np.int64)
        cur = self.blocks.copy()
        for lev in range(self.n_levels - 1, -1, -1):
            out[:, lev] = cur
            cur = np.where(self.parent[cur] >= 0, self.parent[cur], cur)
        return out

    def n_blocks_below(self) -> np.ndarray:
        """Number of blocks below every geounit (b[l, u] in the paper)."""
        counts = np.zeros(self.n, np.int64)
        counts[self.blocks] = 1
        ptr = self.level_ptr
        for lev in range(self.n_levels - 1, 0, -1):
            kids = np.arange(ptr[lev], ptr[lev + 1])
            np.add.at(counts, self.parent[kids], counts[kids])
        return counts

    def block_positions(self, block_ids: Iterable[Any], what: str = "entity") -> np.ndarray:
        """Positions (0..n_blocks-1) of block ids; unknown ids are refused naming ``what``."""
        import pandas as pd

        ids = np.asarray(list(block_ids), dtype=object)
        idx = pd.Index(self.block_names.astype(str))
        pos = idx.get_indexer(ids.astype(str))
        if np.any(pos < 0):
            raise SpineError(f"{what}: unknown block {ids[np.flatnonzero(pos < 0)[0]]!r} (not a block of the spine)")
        return pos.astype(np.int64)

    def summary(self) -> Any:
        """One row per geolevel: geounits, measured geounits, fanout (max, mean), β, γ range."""
        import pandas as pd

        nch = self.n_children
        rows = []
        for lev, name in enumerate(self.level_names):
            idx = np.flatnonzero(self.level == lev)
            g = self.gamma_num[idx]
            fan = nch[idx]
            rows.append({"level": lev, "geolevel": name, "geounits": idx.size,
                         "measured": int((g > 0).sum()),
                         "max_fanout": int(fan.max()) if lev < self.block_level else 0,
                         "mean_fanout": float(fan.mean()) if lev < self.block_level else 0.0,
                         "beta": str(self.proportions[lev]),
                         "gamma_min": str(Fraction(int(g.min()), self.gamma_den)),
                         "gamma_max": str(Fraction(int(g.max()), self.gamma_den))})
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ checks
    def path_sums(self) -> np.ndarray:
        """Numerators (over :attr:`gamma_den`) of γ summed along every root-to-block path, per block
        (exact int64)."""
        acc = self.gamma_num.copy()
        ptr = self.level_ptr
        for lev in range(1, self.n_levels):
            idx = np.arange(ptr[lev], ptr[lev + 1])
            acc[idx] += acc[self.parent[idx]]
        return acc[self.blocks]

    def check_path_sums(self) -> None:
        """Theorem 3: γ summed along every root-to-block path equals 1 exactly; and every
        unmeasured geounit (γ = 0) is the only child of its parent.

        Raises:
            SpineError: naming the first block whose path sum differs, or the unmeasured geounit
                with siblings.
        """
        sums = self.path_sums()
        bad = sums != self.gamma_den
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            got = Fraction(int(sums[b]), self.gamma_den)
            raise SpineError(f"Theorem 3 check failed: the proportions along the path to block "
                             f"{self.block_names[b]!r} sum to {got}, not 1 ({int(bad.sum())} block(s) differ)")
        zero = (self.gamma_num == 0) & (self.parent >= 0)
        if zero.any():
            nch = self.n_children
            multi = zero & (nch[np.maximum(self.parent, 0)] > 1)
            if multi.any():
                u = int(np.flatnonzero(multi)[0])
                raise SpineError(f"geounit {self.names[u]!r} is unmeasured (proportion 0) but has siblings: its "
                                 "estimate would be undetermined (only single children may be unmeasured)")
        if self.gamma_num[0] == 0:
            raise SpineError(f"the root {self.names[0]!r} must be measured (proportion > 0)")

    def check_base(self, base: Iterable[Any]) -> None:
        """Refuse blocks that do not partition ``base``: a base block missing from the spine, or a
        spine block not in the base."""
        import pandas as pd

        base_ids = pd.Index(np.asarray(list(base), dtype=object).astype(str))
        if base_ids.duplicated().any():
            raise SpineError(f"the base lists block {base_ids[base_ids.duplicated()][0]!r} twice")
        mine = pd.Index(self.block_names.astype(str))
        extra = ~mine.isin(base_ids)
        if extra.any():
            raise SpineError(f"block {mine[extra][0]!r} of the spine is not in the base: the blocks do not partition "
                             "the base")
        missing = ~base_ids.isin(mine)
        if missing.any():
            raise SpineError(f"block {base_ids[missing][0]!r} of the base is in no geounit ({int(missing.sum())} "
                             "missing): the blocks do not partition the base")

    def with_arrays(self, names: np.ndarray, parent: np.ndarray, level: np.ndarray, gamma_num: np.ndarray,
                    operation: str, *, level_names: Sequence[str] | None = None,
                    proportions: Sequence[Fraction] | None = None) -> Spine:
        """A new spine from level-ordered arrays (internal rebuilds); runs the Theorem 3 check."""
        level = np.asarray(level, np.int64)
        if np.any(np.diff(level) < 0):
            raise SpineError("internal error: arrays are not in level order")
        par = np.asarray(parent, np.int64)
        has = par >= 0
        if np.any(par[has] >= np.flatnonzero(has)):
            raise SpineError("internal error: a parent does not precede its child")
        spine = Spine(tuple(level_names or self.level_names), _frozen(np.asarray(names, object)), _frozen(par),
                      _frozen(level), tuple(proportions or self.proportions), _frozen(np.asarray(gamma_num, np.int64)),
                      self.gamma_den, self.operations.plus(operation), self.domain_source, self.domain_assumption)
        _check_unique_names(spine.names, spine.level, spine.level_names)
        spine.check_path_sums()
        return spine

    def is_unoptimized(self, levels: Iterable[int]) -> bool:
        """True when every geounit of ``levels`` still has its geolevel's proportion (no bypass yet)."""
        for lev in levels:
            p = self.proportions[lev]
            want = p.numerator * (self.gamma_den // p.denominator)
            if np.any(self.gamma_num[self.level == lev] != want):
                return False
        return True

    def __repr__(self) -> str:
        counts = ", ".join(f"{n}: {int((self.level == i).sum()):,}" for i, n in enumerate(self.level_names))
        ops = f"; {len(self.operations.items)} operation(s)" if self.operations.items else ""
        return f"Spine({counts}; measured {int(self.measured.sum()):,} of {self.n:,}{ops})"

    # operations are attached by hierdp.spines.__init__ (osed, regrouping, bypass, matrices)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _depths(parent: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Depth of every node, breadth-first from the root over a children CSR (vectorized per
    level); refuses nodes not below the root (a cycle), naming one."""
    n = parent.size
    depth = np.full(n, -1, np.int64)
    ptr, kids_all = children_csr(parent, n)
    frontier = np.flatnonzero(parent < 0)
    depth[frontier] = 0
    d = 0
    while frontier.size:
        d += 1
        kids = kids_all[gather_ranges(ptr[frontier], ptr[frontier + 1] - ptr[frontier])[0]]
        kids = kids[depth[kids] < 0]
        depth[kids] = d
        frontier = kids
    if np.any(depth < 0):
        i = int(np.flatnonzero(depth < 0)[0])
        raise SpineError(f"geounit {names[i]!r} is not below the root (a cycle in the parent array)")
    return depth


def _level_order(parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Level order; within a level by the parent's position in that order, then input order."""
    n = parent.size
    pos = np.zeros(n, np.int64)
    order_parts = []
    placed = 0
    for d in range(int(depth.max()) + 1):
        idx = np.flatnonzero(depth == d)
        if d > 0:
            idx = idx[np.argsort(pos[parent[idx]], kind="stable")]
        pos[idx] = placed + np.arange(idx.size)
        placed += idx.size
        order_parts.append(idx)
    return np.concatenate(order_parts)


def _check_unique_names(names: np.ndarray, level: np.ndarray, level_names: Sequence[str]) -> None:
    import pandas as pd

    key = pd.MultiIndex.from_arrays([level, names.astype(str)])
    dup = key.duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise SpineError(f"geounit name {names[i]!r} repeats at geolevel {level_names[int(level[i])]!r}")
