"""What secure-by-default and the accounting file cost on a real hierarchy (issue 20, items 1, 4, 5).

On the bundled GeoNames world cities (37,054 nodes: world -> continent -> country -> admin1 ->
city), printed in one run (wall seconds, best of ``--repeats``; the machine is shared, so compare
the rows of one run, not runs):

1. an InfTDA release with a seed (numpy, counter-based noise) against the default, secure one (OS
   randomness, exact samplers): the price of the safe default;
2. ``release.with_domain(tree)`` (every node of the domain, zeros included) and ``to_frame()`` with
   the level columns;
3. ``release.save(path)`` (the table and its accounting, atomically) and ``hierdp.load_release``
   for CSV and Parquet, with the sizes written and a check that the release read back is equal.

Usage: ``python -m experiments.bench.release_files [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hierdp
from hierdp.datasets import world_cities_hierarchy
from hierdp.mechanisms import InfTDA


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    tree = world_cities_hierarchy()
    mech = InfTDA(epsilon=1.0, delta=1e-8)
    print(f"world cities: {tree.n:,} nodes; best of {args.repeats} (shared machine: compare rows of one run)")
    t_seeded, _ = _best(lambda: mech.release(tree, seed=0), args.repeats)
    t_secure, rel = _best(lambda: mech.release(tree), args.repeats)
    assert rel.params["randomness"] == "secure"
    print(f"  release, seeded (seed=0)            {t_seeded:8.3f} s")
    print(f"  release, secure (the default)       {t_secure:8.3f} s   ({t_secure / t_seeded:.1f}x)")
    t_dom, full = _best(lambda: rel.with_domain(tree), args.repeats)
    t_frame, frame = _best(full.to_frame, args.repeats)
    print(f"  with_domain(tree)                   {t_dom:8.3f} s   ({full.n_nodes:,} rows, {rel.n_nodes:,} released)")
    print(f"  to_frame() with level columns       {t_frame:8.3f} s   ({len(frame.columns)} columns)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("release.parquet", "release.csv"):
            path = Path(tmp) / name
            t_save, side = _best(lambda p=path: full.save(p, overwrite=True), args.repeats)
            t_load, back = _best(lambda p=path: hierdp.load_release(p), args.repeats)
            assert back == full
            print(f"  save {name:<16} {t_save:8.3f} s   load {t_load:7.3f} s   table {path.stat().st_size / 1e6:6.2f} MB, "
                  f"accounting {side.stat().st_size / 1e3:5.1f} kB; equal after load")


if __name__ == "__main__":
    main()
