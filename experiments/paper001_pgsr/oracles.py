"""Independent oracles for the group-size tests (written without the code under test).

* :func:`leaf_histograms_total` - every non-negative integer leaf assignment with a given total
  (Model 1's feasible set, parents implied);
* :func:`region_tree` - parent, level and children of a small region tree from an edge list;
* :func:`postorder` - a recursive post-order (the §9.2 chain of one size subtree);
* :func:`model1_value`, :func:`model3_value`, :func:`model2_value` - the objectives evaluated by loops.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np


def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """All tuples of ``parts`` non-negative integers summing to ``total`` (stars and bars)."""
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        prev, out = -1, []
        for b in bars:
            out.append(b - prev - 1)
            prev = b
        out.append(total + parts - 1 - prev - 1)
        yield tuple(out)


def full_histograms(parent: list[int], leaves: list[int], leaf_values: np.ndarray, K: int) -> np.ndarray:
    """``(n_regions, K)`` histograms from leaf histograms (``leaf_values[i]`` for ``leaves[i]``),
    summed by walking up parents one node at a time."""
    n = len(parent)
    h = np.zeros((n, K), np.int64)
    for leaf, row in zip(leaves, leaf_values, strict=False):
        r = leaf
        while r >= 0:
            h[r] += row
            r = parent[r]
    return h


def model1_bruteforce(parent: list[int], noisy: np.ndarray, G: int) -> float:
    """min over Model 1's feasible set of sum (h - noisy)^2 (``noisy``: ``(n_regions, K)``)."""
    n, K = noisy.shape
    kids = {i for i in range(n) for j in range(n) if parent[j] == i}
    leaves = [i for i in range(n) if i not in kids]
    best = np.inf
    for comp in compositions(G, len(leaves) * K):
        h = full_histograms(parent, leaves, np.array(comp).reshape(len(leaves), K), K)
        best = min(best, float(((h - noisy) ** 2).sum()))
    return best


def feasible_set(parent: list[int], K: int, G: int) -> Iterator[np.ndarray]:
    n = len(parent)
    kids = {i for i in range(n) for j in range(n) if parent[j] == i}
    leaves = [i for i in range(n) if i not in kids]
    for comp in compositions(G, len(leaves) * K):
        yield full_histograms(parent, leaves, np.array(comp).reshape(len(leaves), K), K)


def postorder(parent: list[int]) -> list[int]:
    """Recursive post-order of a tree given by ``parent`` (children in index order)."""
    n = len(parent)
    children = {i: [j for j in range(n) if parent[j] == i] for i in range(n)}
    root = parent.index(-1)
    out: list[int] = []

    def visit(i: int) -> None:
        for c in children[i]:
            visit(c)
        out.append(i)

    visit(root)
    return out


def level_of(parent: list[int]) -> list[int]:
    out = []
    for i in range(len(parent)):
        d, r = 0, i
        while parent[r] >= 0:
            r = parent[r]
            d += 1
        out.append(d)
    return out


def chain_coordinates(parent: list[int], h: np.ndarray) -> list[tuple[tuple[int, int], int]]:
    """The §9.2 chain of the dynamic-programming hierarchy: ``[((k, r), s)]`` in post-order, size-major, the dummy
    root last as ``((0, -1), G)``; ``s`` = running sum over earlier chain nodes of the same level
    (levels: the root 0, region level + 1)."""
    K = h.shape[1]
    po = postorder(parent)
    lev = level_of(parent)
    seq = [(k, r) for k in range(1, K + 1) for r in po]
    running: dict[int, int] = {}
    out = []
    for k, r in seq:
        running[lev[r]] = running.get(lev[r], 0) + int(h[r, k - 1])
        out.append(((k, r), running[lev[r]]))
    out.append(((0, -1), int(h[parent.index(-1)].sum())))
    return out
