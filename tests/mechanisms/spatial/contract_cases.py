"""Contract cases of the spatial mechanisms, merged into ``tests/mechanisms/test_contract.py``'s
``CASES`` (name -> (constructor parameters, data, calculus)): every registered mechanism runs
through the shared contract (release, frame, consistency, accounting, secure mode, seeds,
accountants, public domain, contributions)."""

from __future__ import annotations

import numpy as np

from hierdp.hierarchy.spatial import SpatialGrid

DELTA = 1e-8


def small_grid() -> SpatialGrid:
    """A 16 x 16 grid with a dense corner and sparse noise (declared box)."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.normal(4, 1.5, 400), rng.uniform(0, 16, 100)]).clip(0, 16)
    y = np.concatenate([rng.normal(5, 2.0, 400), rng.uniform(0, 16, 100)]).clip(0, 16)
    return SpatialGrid.from_points(x, y, shape=(16, 16), box=(0, 16, 0, 16))


SPATIAL_CASES = {
    "htf": (lambda: {"epsilon": 1.0, "delta": DELTA, "eps_prt_per_level": 0.01, "eps_height": 0.01, "stop_count": 5},
            small_grid, "pure"),
    "identity": (lambda: {"epsilon": 1.0, "delta": DELTA}, small_grid, "pure"),
    "uniform": (lambda: {"epsilon": 1.0, "delta": DELTA}, small_grid, "pure"),
    "ug": (lambda: {"epsilon": 1.0, "delta": DELTA}, small_grid, "pure"),
    "ag": (lambda: {"epsilon": 1.0, "delta": DELTA}, small_grid, "pure"),
    "quadtree": (lambda: {"epsilon": 1.0, "delta": DELTA, "height": 3}, small_grid, "pure"),
    "kdtree": (lambda: {"epsilon": 1.0, "delta": DELTA, "height": 4}, small_grid, "pure"),
    "privelet": (lambda: {"epsilon": 1.0, "delta": DELTA}, small_grid, "pure"),
}
