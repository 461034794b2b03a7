"""`hierdp solvers` and `hierdp mechanisms` list what the registries hold (the registries are the oracle)."""

from __future__ import annotations

from hierdp.cli import main
from hierdp.mechanisms import registry as mechanism_registry
from hierdp.solvers import names as solver_names


def test_mechanisms_lists_every_registered_mechanism_once(capsys) -> None:
    assert main(["mechanisms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[1:lines.index("")]  # the table, then a blank line and the legend
    listed = [line.split()[0] for line in table]
    assert listed == list(mechanism_registry.describe())
    assert set(listed) >= {"inftda", "safetab", "htf", "pgsr_mdp", "census_topdown"}
    # the solver column is the registry's metadata: "-" exactly for the mechanisms without a solver step
    solver_col = {line.split()[0]: line[lines[0].index("solver"):].split()[0] for line in table}
    for name, meta in mechanism_registry.infos().items():
        assert (solver_col[name] == "-") == (not meta.takes_solver)


def test_solvers_lists_every_registered_plug_in(capsys) -> None:
    assert main(["solvers"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert listed == solver_names()
