"""``hierdp.compare`` / ``hierdp compare`` and ``hierdp.plot`` (issue 7, item 10).

Oracles: per-level errors recomputed here from each release's own rows joined to the true counts
by node name (pandas merge, independent of :mod:`hierdp.metrics`); the frame's shape from the
configurations asked for; statuses from the solvers' documented capabilities."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main
from hierdp.comparison import COMMON_COLUMNS, METRICS, compare, configurations, summary
from hierdp.hierarchy import Hierarchy
from hierdp.mechanisms import registry
from hierdp.privacy.domain import ObservedDomainError
from hierdp.datasets import world_cities_hierarchy
from hierdp.mechanisms import create
from hierdp.release import Accounting

PNG = b"\x89PNG\r\n\x1a\n"
COLUMNS = COMMON_COLUMNS + METRICS["tree"]


@pytest.fixture(scope="module")
def tree() -> Hierarchy:
    rng = np.random.default_rng(5)
    dom = pd.DataFrame([(r, f"{r}{p}", f"{r}{p}{c}") for r in "AB" for p in range(3) for c in range(4)],
                       columns=["region", "province", "city"])
    rows = dom.sample(18, random_state=1).assign(n=rng.integers(1, 60, 18))
    return Hierarchy.from_frame(rows, ["region", "province", "city"], count="n", domain=dom)


def _errors_by_name(release, tree: Hierarchy) -> pd.Series:
    """max |released - true| per level over every node of the tree and of the release."""
    rel = release.to_frame()[["level", "node", "value"]]
    true = pd.DataFrame({"level": tree.level, "node": tree.names.astype(str), "count": tree.counts})
    both = true.merge(rel, on=["level", "node"], how="outer").fillna({"count": 0, "value": 0})
    return (both["value"] - both["count"]).abs().groupby(both["level"]).max()


def test_frame_matches_independent_recomputation(tree) -> None:
    mechs = ["inftda", "tda_l2_exact", "vanilla"]
    frame = compare(tree, mechs, epsilon=1.0, delta=1e-8, seeds=[0, 3])
    assert list(frame.columns) == COLUMNS
    assert (frame["status"] == "ok").all()
    assert len(frame) == len(mechs) * 2 * tree.n_levels
    for mech in mechs:
        for seed in (0, 3):
            rel = registry.create(mech, epsilon=1.0, delta=1e-8).release(tree, seed=seed)
            got = frame[(frame["mechanism"] == mech) & (frame["seed"] == seed)].set_index("level")["max_abs_error"]
            want = _errors_by_name(rel, tree)
            assert np.array_equal(got.to_numpy(float), want.reindex(range(tree.n_levels)).to_numpy(float))


def test_solvers_and_refusals_become_statuses(tree) -> None:
    frame = compare(tree, ["inftda", "vanilla", "sh"], solvers=["intopt", "projection"], epsilon=None, rho=0.5,
                    delta=1e-8, seeds=2)
    confs = frame.drop_duplicates(["mechanism", "status", "message"])
    by = {(m, s): (st, msg) for m, s, st, msg in zip(frame["mechanism"], frame["solver"], frame["status"],
                                                   frame["message"], strict=False)}
    assert by[("inftda", "intopt")][0] == "ok"
    assert by[("inftda", "projection")][0] == "unsupported"  # projection solves l2, not the L-inf levels
    assert "linf" in by[("inftda", "projection")][1]
    assert by[("vanilla", "-")][0] == "ok"  # no solver step: run once, solver "-"
    assert by[("sh", "-")][0] == "unsupported" and "epsilon" in by[("sh", "-")][1]  # SH is (eps, delta) only
    assert len(frame[frame["status"] != "ok"]) == 2  # one row per refused configuration, seeds skipped
    assert set(confs["mechanism"]) == {"inftda", "vanilla", "sh"}


def test_time_out_is_a_status_and_skips_the_other_seeds(tree, monkeypatch) -> None:
    from hierdp.mechanisms.topdown import InfTDA
    from hierdp.solvers.base import SolverFailed

    def slow(self, *a, **k):
        raise SolverFailed("highs", "time limit")

    monkeypatch.setattr(InfTDA, "release", slow)
    frame = compare(tree, ["inftda", "tda_l2"], seeds=4, time_limit=1.0)
    inf = frame[frame["mechanism"] == "inftda"]
    assert len(inf) == 1 and inf["status"].iloc[0] == "time_limit"
    assert (frame[frame["mechanism"] == "tda_l2"]["status"] == "ok").all()


def test_observed_domain_is_refused_before_any_run() -> None:
    observed = Hierarchy.from_frame(pd.DataFrame({"a": ["x", "y"], "n": [3, 4]}), ["a"], count="n")
    with pytest.raises(ObservedDomainError):
        compare(observed, ["inftda"], seeds=1)
    frame = compare(observed.with_domain_assumption(), ["inftda"], seeds=1)
    assert (frame["status"] == "ok").all()


def test_configurations_and_bad_names(tree) -> None:
    confs = configurations(["inftda", "vanilla", "tda_linf"], ["intopt", "ortools"])
    assert [c.label for c in confs] == ["inftda/intopt", "inftda/ortools", "vanilla", "tda_linf/intopt",
                                        "tda_linf/ortools"]
    with pytest.raises(KeyError, match="'magic'"):
        compare(tree, ["magic"])
    with pytest.raises(KeyError, match="'cplex'"):
        compare(tree, ["inftda"], solvers=["cplex"])
    with pytest.raises(ValueError, match="seeds"):
        compare(tree, ["inftda"], seeds=0)


def test_summary_is_the_mean_over_seeds_at_the_leaves(tree) -> None:
    frame = compare(tree, ["inftda", "vanilla"], seeds=3)
    table = summary(frame)
    leaf = frame[frame["level"] == tree.n_levels - 1]
    for (mech, solver), row in table.iterrows():
        sub = leaf[(leaf["mechanism"] == mech) & (leaf["solver"] == solver)]
        assert row["runs"] == 3
        assert row["max_abs_error"] == pytest.approx(sub["max_abs_error"].mean(), rel=0, abs=1e-12)


def test_figure_draws_every_configuration(tree, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from hierdp.plot import compare_figure, save_compare_figure

    frame = compare(tree, ["inftda", "tda_l2", "vanilla"], solvers=["intopt", "projection"], seeds=3)
    fig = compare_figure(frame)
    assert len(fig.axes) == 4
    max_ax = fig.axes[0]
    labels = [ln.get_label() for ln in max_ax.lines]
    # tda_l2 with intopt and inftda with projection cannot run (objective mismatch): noted, not drawn
    assert labels == ["inftda (intopt)", "tda_l2 (projection)", "vanilla"]
    # the plotted line is the median over the seeds (oracle: groupby on the frame)
    ok = frame[(frame["status"] == "ok") & (frame["mechanism"] == "vanilla")]
    want = ok.groupby("level")["max_abs_error"].median().to_numpy(float)
    assert np.array_equal(max_ax.lines[-1].get_ydata(), want)
    seconds_ax = fig.axes[3]
    rows = [t.get_text() for t in seconds_ax.get_yticklabels()]
    assert rows[-2:] == ["inftda (projection)", "tda_l2 (intopt)"]  # listed with their status
    assert [t.get_text() for t in seconds_ax.texts][-2:] == ["not run: unsupported"] * 2
    path = save_compare_figure(frame, tmp_path / "c.png")
    assert path.read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="nothing to plot"):
        compare_figure(frame[frame["status"] != "ok"])


def test_cli_compare_on_the_bundled_data(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--mechanisms", "inftda,vanilla", "--seeds", "2", "--quiet", "-o", "r.csv"]) == 0
    out = capsys.readouterr().out
    assert "randomness: seeded (reproducible, not for publication), seeds 0..1" in out
    assert "level 4 (city), mean over seeds" in out
    frame = pd.read_csv(tmp_path / "r.csv")
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 2 * 2 * 5 and (frame["status"] == "ok").all()
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.csv.accounting.json", "r.png"]  # nothing partial
    # the accounting of every configuration travels with the results (issue 20, item 4)
    doc = json.loads((tmp_path / "r.csv.accounting.json").read_text())
    assert doc["format"] == "hierdp-compare" and sorted(doc["configurations"]) == ["inftda", "vanilla"]
    for label, conf in doc["configurations"].items():
        rel = create(label, epsilon=1.0, delta=1e-8).release(world_cities_hierarchy(), seed=0)
        assert Accounting.from_dict(conf["accounting"]) == rel.accounting  # the same accounting, exactly
        assert conf["randomness"] == {"mode": "seeded", "seed": "0", "publishable": False,
                                      "note": conf["randomness"]["note"]} and conf["seeds"] == [0, 1]
        assert conf["versions"]["hierdp"] and conf["guarantee"] == rel.guarantee


def test_cli_compare_on_an_input_file(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"r": ["a", "a", "b"], "c": ["x", "y", "z"], "n": [5, 7, 9]}).to_csv("in.csv", index=False)
    pd.DataFrame({"r": ["a", "a", "b", "b"], "c": ["x", "y", "z", "w"]}).to_csv("geo.csv", index=False)
    assert main(["compare", "in.csv", "--levels", "r,c", "--count", "n", "--geo", "geo.csv", "--rho", "1",
                 "--mechanisms", "inftda,tda_l2", "--seeds", "0,7", "--no-plot", "--quiet", "-o", "r.parquet"]) == 0
    frame = pd.read_parquet(tmp_path / "r.parquet")
    assert sorted(frame["seed"].unique()) == [0, 7] and set(frame["mechanism"]) == {"inftda", "tda_l2"}
    assert not (tmp_path / "r.png").exists()
    assert "domain: declared by --geo geo.csv" in capsys.readouterr().out


HOUSEHOLDS = "hh,state,county,size\n" + "\n".join(
    f"h{i},{'AB'[i % 2]},{'AB'[i % 2]}{i % 3},{1 + (i * 7) % 5}" for i in range(60)) + "\n"
POINTS = "px,py\n" + "\n".join(f"{(i * 37) % 100 / 10},{(i * 53) % 100 / 10}" for i in range(200)) + "\n"


@pytest.mark.parametrize("layout", ["groups", "points"])
def test_cli_compare_on_group_sizes_and_points_writes_its_csv_and_figure(tmp_path, monkeypatch, capsys, layout):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    if layout == "groups":
        (tmp_path / "in.csv").write_text(HOUSEHOLDS)
        flags = ["--unit", "hh", "--levels", "state,county", "--size", "size", "--max-size", "5",
                 "--observed-domain-public", "--mechanisms", "pgsr_mdp,pgsr_chain_dp"]
        kind, levels, mechs = "group_sizes", 3, 2
    else:
        (tmp_path / "in.csv").write_text(POINTS)
        flags = ["--x", "px", "--y", "py", "--box", "0", "10", "0", "10", "--grid", "16", "--queries", "40",
                 "--mechanisms", "identity,ag,htf", "--solvers", "twopass"]
        kind, levels, mechs = "points", 4, 3
    assert main(["compare", "in.csv", "-o", "r.csv", "--seeds", "2", "--quiet", *flags]) == 0
    out = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "r.csv")
    assert list(frame.columns) == COMMON_COLUMNS + METRICS[kind]
    assert len(frame) == mechs * 2 * levels and (frame["status"] == "ok").all() and set(frame["input"]) == {kind}
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG
    assert "mean over seeds" in out and "wrote" in out


def test_cli_compare_refuses_mechanisms_of_another_layout_and_release_only_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text(HOUSEHOLDS)
    base = ["compare", "in.csv", "--unit", "hh", "--levels", "state,county", "--size", "size", "--max-size", "5",
            "--observed-domain-public", "--quiet"]
    assert main([*base, "--mechanisms", "inftda"]) == 2
    assert "--mechanisms inftda does not release group sizes" in capsys.readouterr().err
    assert main([*base, "--region-totals-public"]) == 2
    assert "applies to hierdp release, not to compare" in capsys.readouterr().err
    assert main([*base, "--rho", "0.5"]) == 2
    assert "give --epsilon, not --rho" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # nothing written
