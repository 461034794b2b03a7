"""``python -m experiments.bench.solver_matrix --quick``: the researchers' table prints one row per
cell and one column per exact plug-in (and ``auto``), and every "optimal" entry equals its cell's
best proven bound (recomputed here from the per-plug-in CSV, not taken from the script)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import hierdp
from experiments.bench import solver_matrix


def test_quick_matrix_shape_and_optima(tmp_path, capsys):
    csv = tmp_path / "matrix.csv"
    assert solver_matrix.main(["--quick", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out.splitlines()
    plugins = [n for n in hierdp.solvers.names() if hierdp.solvers.get(n).exact
               and hierdp.solvers.get(n).capabilities.structures & {"level", "tree"}] + ["auto"]
    assert set(plugins) >= {"intopt", "projection", "costtable", "twopass", "chain", "highs", "ortools", "pdlp"}
    header = next(i for i, line in enumerate(out) if line.startswith("type obj  kind"))
    assert out[header].split()[-len(plugins):] == plugins
    rows = out[header + 2: header + 2 + 24]
    assert len(rows) == 24 and not out[header + 2 + 24].strip()  # 24 cells, then a blank line
    width = 38  # the cell label, then one 14-character column per plug-in
    for row in rows:
        entries = [row[width + 14 * k: width + 14 * (k + 1)].strip() for k in range(len(plugins))]
        assert all(e == "-" or e.split()[0] in {"opt", "tl", "inf", "err", "num", "bad", "late", "crash", "il"}
                   for e in entries), row
    assert "Every optimal entry equals its cell's best proven bound." in out

    frame = pd.read_csv(csv)
    assert len(frame) == 24 * len(plugins) and set(frame["solver"]) == set(plugins)
    assert not frame["outcome"].isin(["late", "crash", "bad"]).any()  # no contract breach on the quick grid
    for _, cell in frame.groupby(["type", "objective", "kind", "magnitude", "nodes"]):
        opt = cell[cell["outcome"] == "opt"]
        bounds = np.r_[cell["bound"].dropna().to_numpy(), opt["objective_value"].to_numpy()]
        if not bounds.size:
            continue
        best = bounds.max()
        for value in opt["objective_value"]:
            tol = 1e-6 * max(1.0, abs(best)) + (1e-3 if cell["type"].iloc[0] == "continuous" else 0.0)
            assert abs(value - best) <= tol, cell[["solver", "outcome", "objective_value", "bound"]]
    # the integer L∞ TopDown level has an exact fast path: intopt solves it, and auto picks it
    lvl = frame[(frame["type"] == "integer") & (frame["objective"] == "linf") & (frame["kind"] == "level")]
    assert lvl.set_index("solver").loc["intopt", "outcome"] == "opt"
    assert lvl.set_index("solver").loc["auto", "chosen"] == "intopt"
