"""``hierdp.compare`` on every input it covers (trees, group sizes, points), with every (mechanism,
solver) pair and ``time_limit`` reaching every mechanism with a solver step.

Oracles: group-size errors and #CV recomputed here by plain loops over the release's rows and the
true histograms; point errors by slicing the released cell matrix and the true counts query by
query (Identity's leaves are single cells, so a range answer is a plain sum); which pairs run, from
the cross product of the names asked for and the registry's documented solver steps (written out
here by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.comparison import COMMON_COLUMNS, METRICS, compare, input_kind, point_workloads, summary
from hierdp.datasets.group_sizes import random_count_of_counts
from hierdp.hierarchy.spatial import SpatialGrid
from hierdp.mechanisms import registry

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sizes():
    return random_count_of_counts(np.random.default_rng(3), depth=2, max_fanout=3, K=4, max_groups_per_leaf=6)


@pytest.fixture(scope="module")
def grid():
    rng = np.random.default_rng(8)
    return SpatialGrid.from_counts(rng.poisson(3.0, (16, 12)).astype(np.int64))


def test_input_kinds(sizes, grid) -> None:
    from hierdp.datasets import world_cities_hierarchy

    assert input_kind(sizes) == "group_sizes" and input_kind(grid) == "points"
    assert input_kind(world_cities_hierarchy()) == "tree" and input_kind(pd.DataFrame()) == "persons"
    with pytest.raises(ValueError, match="compare covers trees, group sizes and points"):
        compare(pd.DataFrame({"a": [1]}), ["safetab"])


def test_group_sizes_l1_and_cv_by_level_against_loops(sizes) -> None:
    frame = compare(sizes, ["pgsr_mdp", "pgsr_mh_relaxed"], epsilon=0.5, seeds=[0, 1])
    assert list(frame.columns) == COMMON_COLUMNS + METRICS["group_sizes"]
    assert (frame["status"] == "ok").all() and frame.attrs["input"] == "group_sizes"
    regions = sizes.regions
    true = sizes.by_size.T  # (regions, K)
    for mech in ("pgsr_mdp", "pgsr_mh_relaxed"):
        for seed in (0, 1):
            rel = registry.create(mech, epsilon=0.5, delta=1e-8).release(sizes, seed=seed)
            got = frame[(frame["mechanism"] == mech) & (frame["seed"] == seed)].set_index("level")
            vals = np.asarray(rel.values)
            for lev in range(regions.n_levels):
                l1 = cv = 0
                for r in range(regions.n):
                    if regions.level[r] != lev:
                        continue
                    kids = [c for c in range(regions.n) if regions.parent[c] == r]
                    for k in range(sizes.K):
                        l1 += abs(int(vals[r, k]) - int(true[r, k]))
                        if kids and int(vals[r, k]) != sum(int(vals[c, k]) for c in kids):
                            cv += 1
                assert got.loc[lev, "l1_total"] == l1
                assert got.loc[lev, "cv"] == cv
    # the exact mechanism is consistent; the relaxed baseline may not be (its #CV is what the frame says)
    assert (frame[frame["mechanism"] == "pgsr_mdp"]["cv"] == 0).all()


def test_points_mre_per_workload_against_query_by_query_sums(grid) -> None:
    frame = compare(grid, ["identity", "ug"], epsilon=1.0, seeds=[4], queries=50)
    assert list(frame.columns) == COMMON_COLUMNS + METRICS["points"]
    assert (frame["status"] == "ok").all()
    workloads = point_workloads(grid.domain.shape, 50)
    assert list(frame[frame["mechanism"] == "identity"]["level_name"]) == list(workloads)
    rel = registry.create("identity", epsilon=1.0).release(grid, seed=4)
    cells = np.asarray(rel.values, dtype=float).reshape(grid.domain.shape)
    counts = np.asarray(grid.counts, dtype=float)
    for lev, (name, q) in enumerate(workloads.items()):
        errs = []
        for r0, r1, c0, c1 in q.tolist():
            answer, truth = cells[r0:r1, c0:c1].sum(), counts[r0:r1, c0:c1].sum()
            errs.append(abs(answer - truth) / max(truth, 20.0))
        row = frame[(frame["mechanism"] == "identity") & (frame["level"] == lev)].iloc[0]
        assert row["level_name"] == name
        assert row["mre_pct"] == pytest.approx(100 * np.mean(errs), rel=1e-12)
    assert summary(frame).attrs["level_name"] == "random rectangles"


def test_every_solver_pair_runs_for_every_mechanism_with_a_solver_step(sizes, grid, monkeypatch) -> None:
    """solvers x mechanisms with a solver step, on group sizes and points; time_limit reaches each."""
    seen: list[tuple[str, dict]] = []
    create = registry.create

    def spy(name, **kw):
        seen.append((name, kw))
        return create(name, **kw)

    monkeypatch.setattr(registry, "create", spy)
    frame = compare(sizes, ["pgsr_mdp", "pgsr_mh", "pgsr_topdown"], solvers=["costtable", "highs"], seeds=1,
                    time_limit=20.0)
    assert [(n, kw["solver"], kw["time_limit"]) for n, kw in seen] == [
        ("pgsr_mdp", "costtable", 20.0), ("pgsr_mdp", "highs", 20.0), ("pgsr_mh", "costtable", 20.0),
        ("pgsr_mh", "highs", 20.0), ("pgsr_topdown", "costtable", 20.0), ("pgsr_topdown", "highs", 20.0)]
    pairs = set(zip(frame["mechanism"], frame["solver"], strict=False))
    assert pairs == {(m, s) for m in ("pgsr_mdp", "pgsr_mh", "pgsr_topdown") for s in ("costtable", "highs")}
    # every pair is an exact integer L2 solve both plug-ins support (costtable: levels and trees)
    assert (frame["status"] == "ok").all(), frame[frame["status"] != "ok"]["message"].tolist()
    seen.clear()
    frame = compare(grid, ["ag", "quadtree", "identity"], solvers=["twopass", "highs"], seeds=1, time_limit=15.0)
    assert [(n, kw.get("solver"), kw.get("time_limit")) for n, kw in seen] == [
        ("ag", "twopass", 15.0), ("ag", "highs", 15.0), ("quadtree", "twopass", 15.0), ("quadtree", "highs", 15.0),
        ("identity", None, None)]  # no solver step: run once, with neither
    assert set(zip(frame["mechanism"], frame["solver"], strict=False)) == {
        ("ag", "twopass"), ("ag", "highs"), ("quadtree", "twopass"), ("quadtree", "highs"), ("identity", "-")}


def test_time_limit_reaches_the_solves_of_every_family(sizes, grid) -> None:
    """A limit far too small to solve anything stops every general solve as a time-out (the status
    the registry reports), on group sizes and on points."""
    frame = compare(sizes, ["pgsr_mh"], solvers=["highs"], seeds=1, time_limit=1e-9)
    assert list(frame["status"]) == ["time_limit"]
    frame = compare(grid, ["quadtree"], solvers=["highs"], seeds=1, time_limit=1e-9)
    assert list(frame["status"]) == ["time_limit"], frame["message"].iloc[0]


def test_mechanisms_of_another_input_and_defaults(sizes) -> None:
    with pytest.raises(ValueError, match="'inftda' releases a tree of counts"):
        compare(sizes, ["inftda"])
    frame = compare(sizes, seeds=1)  # the registry's default set for group sizes
    assert sorted(frame["mechanism"].unique()) == sorted(
        n for n, m in registry.infos().items() if m.input == "group_sizes" and m.compare)


def test_group_size_figure(sizes, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from hierdp.plot import compare_figure

    frame = compare(sizes, ["pgsr_mdp", "pgsr_chain_dp"], seeds=2)
    fig = compare_figure(frame)
    assert next(ax.get_title() for ax in fig.axes).startswith("L1 error per level")
    want = frame[frame["mechanism"] == "pgsr_mdp"].groupby("level")["l1_total"].median().to_numpy(float)
    assert np.array_equal(fig.axes[0].lines[0].get_ydata(), want)
    fig.savefig(tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG
