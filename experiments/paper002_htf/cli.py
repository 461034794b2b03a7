"""The command line on location points: every point mechanism through ``hierdp release``.

Run: ``python -m experiments.paper002_htf.cli [--quick] [--in-process]``.

Two CSV files are written to ``results/paper002_htf/`` (git-ignored): the centroids of the active
standard ZIP codes inside the contiguous-US box (``zipcodes``; longitude / latitude, the box fixed a
priori, points outside it filtered here, explicitly) and 10^6 points of one Gaussian cluster
(σ = 50 cells, on ``[0, 1024]^2``). Each mechanism is run by the command line - the console script in
a subprocess (``--in-process``: :func:`hierdp.cli.main`, for the tests) - at ε = 0.5, seed 0. The
table gives the wall time of the whole command (start-up, reading, binning, release, atomic write)
and the phases the command prints (read + bin, release, write), the leaves written, the MRE (%) of the *written file's* leaves on 2,000 random rectangles, and
whether the file equals the library's release with the same seed and parameters.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table
from experiments.paper002_htf.common import OUT
from hierdp.datasets.points import CONTIGUOUS_US_BOX, gaussian_cluster_points
from hierdp.hierarchy.spatial import SpatialDomain, SpatialGrid
from hierdp.mechanisms import create
from hierdp.metrics.spatial import mean_relative_error, random_rectangles
from hierdp.release.spatial import SpatialRelease

MECHANISMS = ("htf", "identity", "uniform", "ug", "ag", "quadtree", "kdtree", "privelet")


def _zip_points() -> pd.DataFrame:
    import zipcodes

    rows = [z for z in zipcodes.list_all() if z.get("active") and z.get("zip_code_type") == "STANDARD"]
    df = pd.DataFrame({"zip": [z["zip_code"] for z in rows], "lon": [float(z["long"]) for z in rows],
                       "lat": [float(z["lat"]) for z in rows]})
    x0, x1, y0, y1 = CONTIGUOUS_US_BOX
    return df[df["lon"].between(x0, x1) & df["lat"].between(y0, y1)].reset_index(drop=True)


_CLI = "import sys; from hierdp.cli import main; sys.exit(main(sys.argv[1:]))"


def _run(argv: list[str], in_process: bool) -> dict[str, float]:
    """Run one command; its wall time and the phases it prints (read + bin, release, write)."""
    t0 = time.perf_counter()
    if in_process:
        from hierdp.cli import main as cli_main

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = cli_main(argv)
        text = buf.getvalue()
    else:
        done = subprocess.run([sys.executable, "-c", _CLI, *argv], capture_output=True, text=True)
        code, text = done.returncode, done.stdout
    wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"hierdp {' '.join(argv)} exited {code}")
    phases = re.search(r"seconds per phase: (.*)", text).group(1)
    return {"command_s": wall, "read_bin_s": float(re.search(r"binned in ([\d.]+) s", text).group(1)),
            "release_s": sum(float(v) for v in re.findall(r" ([\d.]+)(?:,|$)", phases)),
            "write_s": float(re.search(r" in ([\d.]+) s$", text.strip().splitlines()[-1]).group(1))}


def _startup(in_process: bool) -> float:
    """Seconds to start Python and import the command line (what every command pays first)."""
    if in_process:
        return 0.0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import hierdp.cli"], check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Run every point mechanism through the command line on two data sets; print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="256 x 256, 20,000 Gaussian points, htf / ag / quadtree (h = 5)")
    ap.add_argument("--in-process", action="store_true", help="call hierdp.cli.main instead of a subprocess")
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    out = args.out / OUT
    out.mkdir(parents=True, exist_ok=True)
    side = 256 if args.quick else 1024
    n_gauss = 20_000 if args.quick else 1_000_000
    x, y = gaussian_cluster_points(n_gauss, 50.0 * side / 1024, side, seed=0)
    data = {"gauss50": (pd.DataFrame({"x": x, "y": y}), ("--x", "x", "--y", "y"), (0.0, float(side), 0.0, float(side)),
                        (side, side))}
    if not args.quick:
        data["zipcodes"] = (_zip_points(), ("--lon", "lon", "--lat", "lat"), CONTIGUOUS_US_BOX, (512, 1024))
    mechanisms = ("htf", "ag", "quadtree") if args.quick else MECHANISMS
    qt_height = 5 if args.quick else 8
    rows = []
    for name, (df, cols, box, shape) in data.items():
        src = out / f"cli_{name}.csv"
        df.to_csv(src, index=False)
        xcol, ycol = cols[1], cols[3]
        grid = SpatialGrid.from_points(df[xcol].to_numpy(), df[ycol].to_numpy(), shape=shape, box=box)
        queries = random_rectangles(shape, 2000, rng=1)
        truth = grid.query_counts(queries)
        for mech in mechanisms:
            dst = out / f"cli_{name}_{mech}.csv"
            params = ["--param", f"height={qt_height}"] if mech == "quadtree" else []
            argv = ["release", str(src), "-o", str(dst), "--overwrite", *cols, "--box", *(f"{v:g}" for v in box),
                    "--grid", f"{shape[0]}x{shape[1]}", "--epsilon", str(args.epsilon), "--mechanism", mech,
                    "--seed", "0", "--quiet", *params]
            seconds = _run(argv, args.in_process)
            leaves = pd.read_csv(dst)
            rects = leaves[["r0", "r1", "c0", "c1"]].to_numpy()
            written = SpatialRelease(domain=SpatialDomain(*box, *shape), rects=rects, values=leaves["value"].to_numpy(),
                                     accounting=None)
            lib = create(mech, epsilon=args.epsilon, **({"height": qt_height} if mech == "quadtree" else {})).release(
                grid, seed=0)
            same = bool(np.array_equal(rects, lib.rects) and np.allclose(leaves["value"].to_numpy(), lib.values,
                                                                         rtol=1e-12, atol=1e-9))
            rows.append({"data": name, "points": len(df), "grid": f"{shape[0]}x{shape[1]}", "mechanism": mech,
                         **seconds, "leaves": len(leaves),
                         "mre_pct": mean_relative_error(written.answer(queries), truth), "same_as_library": same})
    table = pd.DataFrame(rows)
    table.to_csv(out / "cli.csv", index=False)
    how = "in process" if args.in_process else "console script in a subprocess"
    print(f"hierdp release on location points (epsilon {args.epsilon}, seed 0; {how}). command_s: the whole "
          f"command; start-up (Python + import hierdp.cli) alone: {_startup(args.in_process):.2f} s")
    print(format_table(table, "{:,.2f}"))
    return 0 if table["same_as_library"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
