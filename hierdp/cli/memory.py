"""The memory a release will take, bounded up front from public parameters (issue 20, item 11).

A point release holds a few arrays the size of its grid (``--grid ROWSxCOLS``), a group-size
release a few the size of its regions times its sizes (``--max-size K``): both are public, so the
command line estimates the peak memory before it reads the input (and again, for group sizes,
once the public regions are known, before any noise) and refuses a release that would exceed
:data:`MEMORY_BOUND`, naming the flag. The figures are the measured peak resident memory per cell
of each mechanism (``python -m experiments.bench.cli_memory`` prints them: peak RSS of ``hierdp
release`` at two sizes, the slope between them) with a margin of a quarter; a mechanism registered
by a third party gets the largest figure of its layout.
"""

from __future__ import annotations

from hierdp.cli.io import CliError

__all__ = ["BASE_BYTES", "GROUP_BYTES_PER_CELL", "MEMORY_BOUND", "POINT_BYTES_PER_CELL", "check_group_memory",
           "check_point_memory", "estimate_bytes"]

#: the most a release of the command line may take (its estimated peak resident memory)
MEMORY_BOUND = 4 * 2**30
#: what a release takes besides its cells: the interpreter, numpy, pandas, the solvers' libraries
BASE_BYTES = 300 * 2**20
#: bytes per grid cell at the peak of a point release (the largest measured slope x 1.25)
POINT_BYTES_PER_CELL = {"htf": 125, "identity": 230, "privelet": 220, "uniform": 50, "ug": 50, "ag": 50,
                        "quadtree": 50, "kdtree": 50}
#: bytes per (region, size) cell at the peak of a group-size release (the largest measured slope x
#: 1.25); the general-solver models (M_H, M_HC) hold a model row per cell
GROUP_BYTES_PER_CELL = {"pgsr_mdp": 580, "pgsr_cumulative_dp": 615, "pgsr_chain_dp": 470, "pgsr_topdown": 255,
                        "pgsr_mh": 2_600, "pgsr_mh_relaxed": 2_600, "pgsr_mhc": 15_000, "pgsr_mhc_relaxed": 15_000}


def estimate_bytes(table: dict[str, int], name: str, cells: int) -> int:
    """The estimated peak memory of mechanism ``name`` over ``cells`` cells (an unknown mechanism:
    the largest figure of ``table``)."""
    return BASE_BYTES + cells * table.get(name, max(table.values()))


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_point_memory(name: str, rows: int, cols: int) -> None:
    """Refuse a ``--grid`` whose release by ``name`` would exceed :data:`MEMORY_BOUND`."""
    cells = rows * cols
    need = estimate_bytes(POINT_BYTES_PER_CELL, name, cells)
    if need > MEMORY_BOUND:
        per = POINT_BYTES_PER_CELL.get(name, max(POINT_BYTES_PER_CELL.values()))
        fits = (MEMORY_BOUND - BASE_BYTES) // per
        raise CliError(f"--grid {rows}x{cols} ({cells:,} cells) would take about {_gib(need)} with --mechanism {name} "
                       f"(about {per} bytes a cell), more than the {_gib(MEMORY_BOUND)} the command line allows a "
                       f"release; use a grid of at most {fits:,} cells for {name} (e.g. {_side(fits)}), or the Python API")


def check_group_memory(name: str, K: int, n_regions: int, *, known: bool) -> None:
    """Refuse a ``--max-size K`` whose release by ``name`` over ``n_regions`` regions would exceed
    :data:`MEMORY_BOUND`; ``known``: the regions were counted (else ``n_regions`` is the fewest
    the ``--levels`` allow, checked before reading)."""
    cells = K * n_regions
    need = estimate_bytes(GROUP_BYTES_PER_CELL, name, cells)
    if need > MEMORY_BOUND:
        per = GROUP_BYTES_PER_CELL.get(name, max(GROUP_BYTES_PER_CELL.values()))
        fits = max(1, (MEMORY_BOUND - BASE_BYTES) // (per * n_regions))
        where = f"{n_regions:,} regions" if known else f"at least {n_regions} regions (one per level)"
        raise CliError(f"--max-size {K:,} over {where} would take about {_gib(need)} with --mechanism {name} (about "
                       f"{per:,} bytes a region and size), more than the {_gib(MEMORY_BOUND)} the command line allows "
                       f"a release; give --max-size {fits:,} or less (--top-code counts larger groups in the top "
                       "size), or use the Python API")


def _side(cells: int) -> str:
    side = int(cells ** 0.5)
    return f"--grid {side}x{side}"
