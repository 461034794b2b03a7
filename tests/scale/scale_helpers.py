"""Helpers of the scale-out tests (not a test module)."""

from __future__ import annotations

import numpy as np

from hierdp.hierarchy import Hierarchy


def random_tree(fan: tuple[int, ...] = (4, 5, 6, 7), seed: int = 0, zero_share: float = 0.3) -> Hierarchy:
    """A tree with the given fan-out per level (declared domain: built from edges), leaf counts
    Poisson(20) with a share of empty leaves, so InfTDA drops some nodes on the way down."""
    rng = np.random.default_rng(seed)
    edges, frontier = [], ["r"]
    for f in fan:
        nxt = []
        for p in frontier:
            for k in range(f):
                c = f"{p}.{k}"
                edges.append((p, c))
                nxt.append(c)
        frontier = nxt
    counts = rng.poisson(20, len(frontier)) * (rng.random(len(frontier)) > zero_share)
    return Hierarchy.from_edges(edges, counts=dict(zip(frontier, counts.tolist(), strict=False)))


def same_levels(a, b) -> bool:
    """Two tree releases with the same nodes, parents and values at every level."""
    return len(a.levels) == len(b.levels) and all(
        np.array_equal(x.keys, y.keys) and np.array_equal(x.parent, y.parent) and np.array_equal(x.values, y.values)
        for x, y in zip(a.levels, b.levels, strict=False))
