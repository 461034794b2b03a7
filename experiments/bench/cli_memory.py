"""Peak memory of ``hierdp release`` per cell: the figures behind :mod:`hierdp.cli.memory`.

For every point mechanism (``--grid`` N x N at two sizes, 500 points) and every group-size
mechanism (``--max-size`` K at two values, 5 households in 6 regions), runs ``hierdp release`` in a
fresh process, samples its peak resident memory (``VmHWM`` from ``/proc``, Linux) and prints the
slope between the two sizes in bytes per cell next to the figure the command line assumes
(``POINT_BYTES_PER_CELL`` / ``GROUP_BYTES_PER_CELL``, the measured slope with a margin of a
quarter). A run longer than ``--timeout`` seconds is stopped and its peak so far reported (a lower
bound; the general-solver group-size models are slow at large K).

Usage: ``python -m experiments.bench.cli_memory [--grids 1024 2048] [--sizes 100000 300000]
[--general-sizes 2000 6000] [--timeout 120] [--only htf,pgsr_mdp]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hierdp.cli.memory import GROUP_BYTES_PER_CELL, POINT_BYTES_PER_CELL
from hierdp.mechanisms import registry

HIERDP = [sys.executable, "-c", "import sys; from hierdp.cli import main; sys.exit(main())"]
#: the general-solver group-size models (a model row per cell): measured at smaller K
GENERAL = {"pgsr_mh", "pgsr_mh_relaxed", "pgsr_mhc", "pgsr_mhc_relaxed"}
N_REGIONS = 6  # root, 2 states, 3 counties


def peak_mib(argv: list[str], cwd: Path, timeout: float) -> tuple[float, str]:
    """Peak resident MiB of one command (and how it ended)."""
    proc = subprocess.Popen([*HIERDP, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0, hwm = time.monotonic(), 0
    while proc.poll() is None and time.monotonic() - t0 < timeout:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM"):
                    hwm = max(hwm, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        return hwm / 1024, f"stopped at {timeout:g} s"
    err = [x for x in proc.stderr.read().splitlines() if "error" in x]
    return hwm / 1024, "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {err[-1][:80] if err else ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, nargs=2, default=[1024, 2048])
    ap.add_argument("--sizes", type=int, nargs=2, default=[100_000, 300_000])
    ap.add_argument("--general-sizes", type=int, nargs=2, default=[2_000, 6_000])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", default=None, help="comma-separated mechanisms")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rng = np.random.default_rng(0)
        pd.DataFrame({"x": rng.uniform(0, 10, 500), "y": rng.uniform(0, 10, 500)}).to_csv(work / "p.csv", index=False)
        (work / "hh.csv").write_text("hh,state,county,size\nh1,A,A1,1\nh2,A,A1,2\nh3,A,A2,3\nh4,B,B1,2\nh5,B,B1,1\n")
        common = ["--epsilon", "1", "--seed", "0", "--quiet", "--overwrite"]
        print(f"{'mechanism':<20} {'sizes':>16} {'peak MiB':>18} {'bytes/cell':>11} {'assumed':>8}  status")
        for name in registry.names(input="points"):
            if only and name not in only:
                continue
            peaks, notes = [], []
            for n in args.grids:
                mib, note = peak_mib(["release", "p.csv", "-o", "r.parquet", "--x", "x", "--y", "y", "--box", "0", "10",
                                      "0", "10", "--grid", f"{n}x{n}", "--mechanism", name, *common], work, args.timeout)
                peaks.append(mib)
                notes.append(note)
            cells = [n * n for n in args.grids]
            slope = (peaks[1] - peaks[0]) * 2**20 / (cells[1] - cells[0])
            print(f"{name:<20} {'x'.join(map(str, args.grids)):>16} {peaks[0]:>8.0f} {peaks[1]:>9.0f} {slope:>11.0f} "
                  f"{POINT_BYTES_PER_CELL.get(name, '-'):>8}  {'; '.join(notes)}", flush=True)
        for name in registry.names(input="group_sizes"):
            if only and name not in only:
                continue
            sizes = args.general_sizes if name in GENERAL else args.sizes
            peaks, notes = [], []
            for k in sizes:
                mib, note = peak_mib(["release", "hh.csv", "-o", "g.parquet", "--unit", "hh", "--levels", "state,county",
                                      "--size", "size", "--max-size", str(k), "--observed-domain-public", "--mechanism",
                                      name, *common], work, args.timeout)
                peaks.append(mib)
                notes.append(note)
            slope = (peaks[1] - peaks[0]) * 2**20 / (N_REGIONS * (sizes[1] - sizes[0]))
            print(f"{name:<20} {'/'.join(map(str, sizes)):>16} {peaks[0]:>8.0f} {peaks[1]:>9.0f} {slope:>11.0f} "
                  f"{GROUP_BYTES_PER_CELL.get(name, '-'):>8}  {'; '.join(notes)}", flush=True)


if __name__ == "__main__":
    main()
