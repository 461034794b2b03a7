"""Off-spine entities (OSEs): named sets of blocks (places, school districts, area codes, ...).

:class:`Entities` holds them as a CSR over block positions of one spine (vectorized; no Python
object per block). Build it from a mapping ``name -> block ids``, or from block-level columns
where each column is one *category* (a partition of the blocks: every block has one code per
category, e.g. its place), as in the Census production settings. Following the production code,
a category's "outside" code (blocks in none of its entities) is not an OSED target but still
splits optimized block groups (paper 003 notes, A9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from hierdp.spines.core import Spine, SpineError

__all__ = ["Entities"]


@dataclass(frozen=True, eq=False)
class Entities:
    """Off-spine entities over the blocks of a spine.

    Attributes:
        names: entity names.
        ptr, blocks: entity k holds block positions ``blocks[ptr[k]:ptr[k+1]]`` (sorted, unique).
        n_blocks: number of blocks of the spine they refer to.
        category: the category of each entity (``""`` for entities given one by one).
        key_codes: ``(n_blocks, n_categories)`` int64 codes per block and category (-1: outside
            every entity of that category), used to form optimized block groups; None when the
            entities were given as free sets (then the key is each block's set of entities).
    """

    names: np.ndarray
    ptr: np.ndarray
    blocks: np.ndarray
    n_blocks: int
    category: np.ndarray
    key_codes: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of entities."""
        return int(self.names.size)

    @property
    def sizes(self) -> np.ndarray:
        """Number of blocks per entity."""
        return np.diff(self.ptr)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(entity, block position)`` of every membership."""
        return np.repeat(np.arange(self.n, dtype=np.int64), self.sizes), self.blocks

    def indicator(self) -> Any:
        """A ``scipy.sparse.csr_matrix`` (entities x blocks) of 0/1 memberships."""
        from scipy.sparse import csr_matrix

        return csr_matrix((np.ones(self.blocks.size), self.blocks, self.ptr), shape=(self.n, self.n_blocks))

    def block_keys(self) -> np.ndarray:
        """An int64 code per block: blocks with equal codes lie in exactly the same entities."""
        if self.key_codes is not None:
            codes = self.key_codes
            if codes.shape[1] == 0:
                return np.zeros(self.n_blocks, np.int64)
            _, inv = np.unique(codes, axis=0, return_inverse=True)
            return inv.ravel().astype(np.int64)
        ent, blk = self.pairs()
        order = np.lexsort((ent, blk))
        ent, blk = ent[order], blk[order]
        keys: dict[tuple[int, ...], int] = {}
        out = np.zeros(self.n_blocks, np.int64)  # 0: in no entity
        keys[()] = 0
        bounds = np.searchsorted(blk, np.arange(self.n_blocks + 1))
        for b in np.flatnonzero(np.diff(bounds) > 0):  # preprocessing only (not a hot path)
            t = tuple(ent[bounds[b]:bounds[b + 1]].tolist())
            out[b] = keys.setdefault(t, len(keys))
        return out

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_sets(cls, spine: Spine, sets: Mapping[Any, Iterable[Any]]) -> Entities:
        """Entities from ``{name: block ids}``; unknown block ids are refused naming the entity."""
        names, ptr, parts = [], [0], []
        for name, ids in sets.items():
            pos = np.unique(spine.block_positions(list(ids), what=f"entity {name!r}"))
            parts.append(pos)
            names.append(name)
            ptr.append(ptr[-1] + pos.size)
        blocks = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return cls(np.asarray(names, dtype=object), np.asarray(ptr, np.int64), blocks.astype(np.int64),
                   spine.n_blocks, np.full(len(names), "", dtype=object))

    @classmethod
    def from_columns(cls, spine: Spine, frame: Any, block: str, categories: Sequence[str], *,
                     outside: Any = None) -> Entities:
        """Entities from block-level columns, one category (partition) per column.

        Args:
            spine: the spine whose blocks the frame lists (every block exactly once).
            frame: a pandas DataFrame with a ``block`` column and the ``categories`` columns.
            block: the block id column.
            categories: columns whose codes define entities (code ``c`` of column ``k`` is the
                entity ``"k=c"``).
            outside: the code meaning "in no entity of this category" (NaN always does): such
                blocks are no entity's target but their code still splits block groups.
        """
        import pandas as pd

        for col in [block, *categories]:
            if col not in frame.columns:
                raise SpineError(f"entities: column {col!r} is not in the frame")
        pos = spine.block_positions(frame[block].to_numpy(dtype=object), what="entities")
        if np.unique(pos).size != pos.size:
            raise SpineError("entities: a block is listed twice in the frame")
        if pos.size != spine.n_blocks:
            missing = np.setdiff1d(np.arange(spine.n_blocks), pos)
            raise SpineError(f"entities: block {spine.block_names[missing[0]]!r} has no row in the frame")
        names: list[Any] = []
        cat: list[Any] = []
        ptr: list[int] = [0]
        parts: list[Any] = []
        codes = np.full((spine.n_blocks, len(categories)), -1, np.int64)
        for j, col in enumerate(categories):
            vals = frame[col]
            inside = vals.notna().to_numpy().copy()
            if outside is not None:
                inside &= (vals != outside).to_numpy()
            v = vals.to_numpy(dtype=object)[inside].astype(str)
            p = pos[inside]
            uniq, inv = np.unique(v, return_inverse=True)
            inv = inv.ravel()
            codes[p, j] = inv
            order = np.lexsort((p, inv))
            counts = np.bincount(inv, minlength=uniq.size)
            parts.append(p[order])
            ptr.extend((ptr[-1] + np.cumsum(counts)).tolist())
            names.extend(f"{col}={u}" for u in uniq)
            cat.extend([col] * uniq.size)
        blocks = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        del pd
        return cls(np.asarray(names, dtype=object), np.asarray(ptr, np.int64), blocks.astype(np.int64),
                   spine.n_blocks, np.asarray(cat, dtype=object), codes)

    @classmethod
    def coerce(cls, spine: Spine, entities: Entities | Mapping[Any, Iterable[Any]]) -> Entities:
        """``entities`` as :class:`Entities` of ``spine`` (a mapping is read with :meth:`from_sets`)."""
        if isinstance(entities, Entities):
            if entities.n_blocks != spine.n_blocks:
                raise SpineError(f"entities refer to {entities.n_blocks} blocks; the spine has {spine.n_blocks}")
            return entities
        if isinstance(entities, Mapping):
            return cls.from_sets(spine, entities)
        raise SpineError("entities must be an Entities object or a mapping name -> block ids")

    def remap(self, old: Spine, new: Spine) -> Entities:
        """The same entities over ``new``'s block order (blocks matched by id)."""
        pos = new.block_positions(old.block_names, what="entities")  # old position -> new position
        blocks = pos[self.blocks]
        ent = np.repeat(np.arange(self.n), self.sizes)
        order = np.lexsort((blocks, ent))
        codes = None
        if self.key_codes is not None:
            codes = np.empty_like(self.key_codes)
            codes[pos] = self.key_codes
        return Entities(self.names, self.ptr, blocks[order], new.n_blocks, self.category, codes)
