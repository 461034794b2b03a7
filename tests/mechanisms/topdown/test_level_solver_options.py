"""Solver options a level solver does not take are refused when the mechanism is built - before
any noise - not by the first level's solve after its budget was spent (a ReleaseAborted)."""

from __future__ import annotations

import pytest

from hierdp.mechanisms import InfTDA, TDA, TopDownMechanism
from hierdp.mechanisms.base import MechanismParameterError


@pytest.mark.parametrize("make,culprit", [
    (lambda: InfTDA(rho=1.0, solver_options={"bogus": 1}), r"intopt: unknown option\(s\) \['bogus'\]"),
    # TDA_l2's options go to the solver of its continuous step (projection by default)
    (lambda: TDA("l2", rho=1.0, solver_options={"batch_size": 1}), r"projection: unknown option\(s\) \['batch_size'\]"),
    (lambda: TopDownMechanism(rho=1.0, objective="l2", solver="costtable", solver_options={"order": "x"}),
     "costtable"),
])
def test_options_a_solver_does_not_take_are_refused_at_construction(make, culprit):
    with pytest.raises(MechanismParameterError, match=culprit):
        make()


def test_options_a_solver_takes_are_accepted():
    mech = TopDownMechanism(rho=1.0, objective="l1", solver="highs", solver_options={"batch_size": 1})
    assert mech.level_solver.options == {"batch_size": 1}


def test_tda_l2_passes_its_options_to_the_continuous_solver_it_names():
    mech = TDA("l2", rho=1.0, solver="highs", solver_options={"batch_size": 1})
    assert mech.level_solver.options == {"continuous_options": {"batch_size": 1}, "continuous_solver": "highs"}
