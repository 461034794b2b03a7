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


# ------------------------------------------------------------------------------ intervals
def _small_tree():
    from hierdp.hierarchy import Hierarchy

    rng = np.random.default_rng(11)
    edges = [("W", f"R{i}") for i in range(3)] + [(f"R{i}", f"R{i}-{j}") for i in range(3) for j in range(5)]
    leaves = [b for _, b in edges if "-" in b]
    return Hierarchy.from_edges(edges, counts={leaf: int(c) for leaf, c in
                                               zip(leaves, rng.choice([0, 3, 40, 300], len(leaves)), strict=True)})


def test_tree_interval_scores_against_a_node_by_node_recount() -> None:
    """Coverage and width per level, recounted here from the release's own intervals frame and the
    true counts looked up by node name (not by the keys the library uses)."""
    from hierdp.mechanisms import InfTDA

    tree = _small_tree()
    frame = compare(tree, mechanisms=["inftda"], seeds=[4], intervals=0.9, interval_draws=30)
    assert list(frame.columns[-5:]) == ["interval_level", "interval_method", "interval_nodes",
                                        "interval_coverage_pct", "interval_mean_width"]
    rel = InfTDA(epsilon=1.0, delta=1e-8).release(tree, seed=4)
    iv = rel.intervals(0.9, domain=tree, draws=30, seed=4)
    true_by_name = {str(n): int(tree.graph.nodes[n].get("count", 0)) for n in tree.graph.nodes}
    for lev, part in iv.groupby("level"):
        true = np.array([true_by_name[str(n)] for n in part["node"]])
        covered = (part["lower"].to_numpy() <= true) & (true <= part["upper"].to_numpy())
        row = frame[frame["level"] == lev].iloc[0]
        assert row["interval_nodes"] == len(part)
        assert row["interval_coverage_pct"] == pytest.approx(100.0 * covered.mean())
        assert row["interval_mean_width"] == pytest.approx(float((part["upper"] - part["lower"]).mean()))
        assert row["interval_method"] == "bootstrap (estimate)" and row["interval_level"] == 0.9


def test_group_size_interval_scores_against_loops(sizes) -> None:
    frame = compare(sizes, mechanisms=["pgsr_mdp"], epsilon=1.0, seeds=[2], intervals=0.95, interval_draws=20)
    mech = registry.create("pgsr_mdp", epsilon=1.0, delta=1e-8)
    rel = mech.release(sizes, seed=2)
    iv = rel.intervals(0.95, mechanism=mech, draws=20, seed=2)
    names = list(rel.names)
    for lev, part in iv.groupby("level"):
        hits = [lo <= sizes.h[names.index(node), size - 1] <= hi
                for node, size, lo, hi in zip(part["node"], part["size"], part["lower"], part["upper"], strict=True)]
        row = frame[frame["level"] == lev].iloc[0]
        assert row["interval_nodes"] == len(part)
        assert row["interval_coverage_pct"] == pytest.approx(100.0 * np.mean(hits))


def test_intervals_refused_for_points_and_bad_levels_and_reported_where_a_release_has_none(grid) -> None:
    with pytest.raises(ValueError, match="range queries"):
        compare(grid, mechanisms=["identity"], seeds=1, intervals=0.9)
    for bad in (0, 1, 1.5, True, "0.9"):
        with pytest.raises(ValueError, match="intervals must be a level"):
            compare(_small_tree(), mechanisms=["inftda"], seeds=1, intervals=bad)
    frame = compare(_small_tree(), mechanisms=["vanilla"], seeds=1, intervals=0.9)
    assert frame["interval_method"].str.startswith("none: ").all() and frame["interval_coverage_pct"].isna().all()


def test_compare_figure_draws_error_bands_and_states_coverage(tmp_path) -> None:
    from hierdp.plot import compare_figure

    frame = compare(_small_tree(), mechanisms=["inftda", "vanilla"], seeds=2, intervals=0.9, interval_draws=20)
    fig = compare_figure(frame)
    ax = fig.axes[1]
    assert "half-width of the 90 % intervals" in ax.get_title()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    ok = frame[frame["mechanism"] == "inftda"]
    cover = (ok["interval_coverage_pct"] * ok["interval_nodes"]).sum() / ok["interval_nodes"].sum()
    assert f"inftda (intopt); 90 % intervals cover {cover:.1f} %" in labels and "vanilla" in labels
    assert len(ax.collections) >= 1  # the band
    fig.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG
