"""Secure-mode noise: draws per second of the exact samplers, side by side (issue 12, item 2).

Compared in one run, for the discrete Gaussian (sigma2 = 1, 100, 1e4, 1e6) and the discrete
Laplace (scale = 1, 10, 100, 1000):

* ``vectorized`` -- hierdp's default secure sampler (:mod:`hierdp.privacy.secure_sampling`):
  exact CKS20 in numpy int64 arithmetic over buffers of OS random bytes;
* ``opendp``     -- OpenDP's exact samplers (``SecureRandom(backend="opendp")``);
* ``python``     -- the old pure-Python exact sampler, one draw at a time
  (``SecureRandom(backend="python")``);
* ``numpy``      -- the seeded floating-point sampler for experiments (``make_rng(seed)``), not
  for releases: the speed ceiling of a vectorized sampler.

Rates are draws per CPU-second of this process (``time.process_time``; every sampler here is
single-threaded, so this is per core and robust to other jobs on a shared machine) and per
wall-second; each figure is the best of ``--repeats`` runs. The slow samplers run on fewer draws
(their per-draw cost does not depend on the size). Also printed: random bytes per draw, per-entry
parameters (10 and 100,000 distinct values among 10^6 entries), the memory of a large draw (bounded
temporaries: the work is chunked) and the Ctrl-C latency: how long
after a SIGINT a large secure draw stops (vectorized; OpenDP in chunks of ``CALL_SIZE`` calls).

Usage: ``python experiments/bench/secure_sampling.py [--quick] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time

import numpy as np

from hierdp.privacy import SecureRandom, discrete_gaussian, discrete_laplace, make_rng
from hierdp.privacy import opendp_backend, secure_sampling

SIGMA2 = (1.0, 100.0, 1e4, 1e6)
SCALES = (1.0, 10.0, 100.0, 1000.0)


def rate(draw, n: int, repeats: int) -> tuple[float, float]:
    """Best draws per CPU-second and per wall-second of ``draw(n)`` over ``repeats`` runs."""
    best_cpu = best_wall = 0.0
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = draw(n)
        c1, w1 = time.process_time(), time.perf_counter()
        assert out.shape == (n,)
        best_cpu = max(best_cpu, n / max(c1 - c0, 1e-9))
        best_wall = max(best_wall, n / max(w1 - w0, 1e-9))
    return best_cpu, best_wall


def fmt(x: float) -> str:
    return f"{x / 1e6:8.3f}M" if x >= 1e5 else f"{x / 1e3:8.1f}k"


def compare(kind: str, params: tuple[float, ...], sizes: dict[str, int], repeats: int) -> None:
    sampler = discrete_gaussian if kind == "gaussian" else discrete_laplace
    sources = {
        "vectorized": SecureRandom(),
        "opendp": SecureRandom(backend="opendp"),
        "python": SecureRandom(backend="python"),
        "numpy": make_rng(0),
    }
    label = "sigma2" if kind == "gaussian" else "scale"
    print(f"\ndiscrete {kind}: draws per CPU-second (per wall-second), best of {repeats}")
    print(f"{label:>8} {'n(vec)':>9} | {'vectorized':>22} | {'opendp':>22} | {'python':>22} | "
          f"{'numpy seeded':>22} | vec/opendp vec/python numpy/vec")
    for p in params:
        row = {}
        for name, src in sources.items():
            n = sizes[name]
            row[name] = rate(lambda m, s=src, p=p: sampler(p, m, s), n, repeats)
        v = row["vectorized"][0]
        cells = " | ".join(f"{fmt(c)} ({fmt(w)})" for c, w in row.values())
        print(f"{p:8g} {sizes['vectorized']:9d} | {cells} | {v / row['opendp'][0]:9.0f}x "
              f"{v / row['python'][0]:9.0f}x {row['numpy'][0] / v:8.1f}x")


def sizes_scan(repeats: int, quick: bool) -> None:
    print("\nvectorized secure sampler by size (draws per CPU-second; bytes of OS randomness per draw)")
    ns = (10_000, 100_000, 1_000_000) if quick else (1_000, 10_000, 100_000, 1_000_000, 4_000_000)
    print(f"{'law':>18} " + " ".join(f"{n:>10d}" for n in ns) + "   bytes/draw")
    for kind, p in [("gaussian", 1.0), ("gaussian", 1e6), ("laplace", 1.0), ("laplace", 1000.0)]:
        fn = secure_sampling.discrete_gaussian if kind == "gaussian" else secure_sampling.discrete_laplace
        rates = [rate(lambda m, fn=fn, p=p: fn(np.full(m, p)), n, repeats)[0] for n in ns]
        src = secure_sampling.OsRandomBytes()
        fn(np.full(200_000, p), src)
        print(f"{kind + ' ' + format(p, 'g'):>18} " + " ".join(f"{fmt(r):>10}" for r in rates)
              + f"   {src.bytes_drawn / 200_000:9.1f}")


def per_entry(repeats: int) -> None:
    print("\nper-entry parameters, 10^6 entries (draws per CPU-second, vectorized secure)")
    gen = np.random.default_rng(1)
    for distinct in (1, 10, 100_000):
        values = gen.uniform(1.0, 1e6, distinct)
        sigma2 = values[gen.integers(0, distinct, 1_000_000)]
        g = rate(lambda m, s2=sigma2: discrete_gaussian(s2[:m], None, SecureRandom()), sigma2.size, repeats)[0]
        lap = rate(lambda m, s2=sigma2: discrete_laplace(np.sqrt(s2[:m]), None, SecureRandom()), sigma2.size,
                   repeats)[0]
        print(f"  {distinct:>7d} distinct values: discrete Gaussian {fmt(g)}, discrete Laplace {fmt(lap)}")


def memory() -> None:
    import tracemalloc

    print("\nmemory of one vectorized secure draw (tracemalloc peak; the int64 output is 8 bytes a draw)")
    for n in (1_000_000, 10_000_000):
        tracemalloc.start()
        out = discrete_gaussian(1e4, n, SecureRandom())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {n:>10d} draws: peak {peak / 2**20:7.1f} MiB = output {out.nbytes / 2**20:6.1f} MiB "
              f"+ {(peak - out.nbytes) / 2**20:5.1f} MiB of per-chunk temporaries")
        del out


def interrupt_latency(draw, delay: float = 1.0) -> tuple[float, bool]:
    """Seconds from a SIGINT (sent ``delay`` s into ``draw()``) to the KeyboardInterrupt."""
    sent: list[float] = []

    def fire() -> None:
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(delay, fire)
    timer.start()
    try:
        draw()
    except KeyboardInterrupt:
        return time.perf_counter() - sent[0], True
    finally:
        timer.cancel()
    time.sleep(0.1)  # the draw finished first: let the pending signal arrive here
    return float("nan"), False


def latency() -> None:
    print("\nCtrl-C latency during a large secure draw (SIGINT after 1 s)")
    big = 60_000_000  # ~30-60 s of vectorized drawing: the signal always lands inside
    for name, draw in [
        ("vectorized, discrete Gaussian sigma2=1e4", lambda: discrete_gaussian(1e4, big, SecureRandom())),
        ("vectorized, discrete Laplace scale=100", lambda: discrete_laplace(100.0, big, SecureRandom())),
        (f"opendp in calls of {opendp_backend.CALL_SIZE}",
         lambda: discrete_gaussian(1e4, 2_000_000, SecureRandom(backend="opendp"))),
    ]:
        try:
            lat, hit = interrupt_latency(draw)
        except KeyboardInterrupt:  # the signal arrived just after the draw returned
            lat, hit = float("nan"), False
        print(f"  {name:<45} " + (f"{lat * 1e3:8.1f} ms" if hit else "draw finished first"))
    c0 = time.perf_counter()
    opendp_backend._bulk("gaussian", np.full(opendp_backend.CALL_SIZE, 1e4))
    print(f"  one OpenDP call of {opendp_backend.CALL_SIZE} draws (uninterruptible): "
          f"{time.perf_counter() - c0:.2f} s; before chunking a 10^6-draw release held Ctrl-C "
          "for the whole call (~20-35 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-latency", action="store_true", help="skip the Ctrl-C measurement")
    args = parser.parse_args()
    sizes = {"vectorized": 1_000_000, "opendp": 20_000, "python": 3_000, "numpy": 1_000_000}
    if args.quick:
        sizes = {"vectorized": 200_000, "opendp": 5_000, "python": 1_000, "numpy": 200_000}
    print(f"secure sampling benchmark; sizes per run: {sizes}; CPU count {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    compare("gaussian", SIGMA2, sizes, args.repeats)
    compare("laplace", SCALES, sizes, args.repeats)
    sizes_scan(args.repeats, args.quick)
    per_entry(1 if args.quick else args.repeats)
    memory()
    if not args.no_latency:
        latency()


if __name__ == "__main__":
    main()
