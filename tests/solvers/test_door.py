"""One door to the solvers: ``hierdp.solvers.check_solver`` - every family checks its solver there,
before any noise, on a probe of its own shape, and gets one error type (``UnsupportedProblem``).
Oracle: the plug-in's own refusal of the real problem (the release's model) - the door refuses
before noise exactly when the solver would refuse after it."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import hierdp
from hierdp.datasets.group_sizes import random_count_of_counts
from hierdp.hierarchy.core import Hierarchy
from hierdp.mechanisms import create
from hierdp.mechanisms.pgsr import MH, MHC, ChainDynProg, CumulativeDynProg, MDynProg
from hierdp.mechanisms.pgsr.base import _placeholder_targets
from hierdp.models import Problem
from hierdp.privacy.budget import Accountant, Budget
from hierdp.solvers import UnsupportedProblem, check_solver, get


def _level(objective="linf", total=5.0):
    return Problem.from_groups([total * 0.6, total * 0.4], [0, 2], [total], objective=objective)


def test_check_solver_returns_the_plug_in_or_one_error_type():
    assert check_solver("intopt", _level()).name == "intopt"
    assert check_solver("auto", _level()).name == "intopt"  # auto's first plug-in for this probe
    assert check_solver(get("highs"), _level()).name == "highs"
    with pytest.raises(UnsupportedProblem, match="cannot post-process a level exactly: objective 'linf'"):
        check_solver("projection", _level(), task="post-process a level")
    with pytest.raises(UnsupportedProblem, match="unknown solver 'nosuch'"):
        check_solver("nosuch", _level())
    with pytest.raises(UnsupportedProblem, match="registered name"):
        check_solver(42, _level())  # type: ignore[arg-type]
    with pytest.raises(UnsupportedProblem, match="no registered solver can"):
        check_solver("auto", _level(total=2.0 ** 60))


def _big_hierarchy(root: int) -> Hierarchy:
    return Hierarchy.from_arrays(["all", "a", "b"], [-1, 0, 0], [root, root - root // 3, root // 3],
                                 level_names=["root", "leaf"])


@pytest.mark.parametrize("solver", ["intopt", "auto", "highs"])
def test_topdown_refuses_counts_beyond_its_solver_from_the_public_root_before_noise(solver):
    """Bounded neighbours: the root total is public; a solver that cannot post-process levels at
    that magnitude (beyond 2^52: float64 units) is refused before the budget is spent."""
    tree = _big_hierarchy(2 ** 53 + 2)
    acct = Accountant(Budget.zcdp(1.0))
    rng = np.random.default_rng(0)
    state = copy.deepcopy(rng.bit_generator.state)
    with pytest.raises(UnsupportedProblem, match="magnitude"):
        create("inftda", rho=1.0, solver=solver).release(tree, rng=rng, accountant=acct)
    assert rng.bit_generator.state == state and acct.spent.is_zero
    # below the limit the same mechanism releases
    rel = create("inftda", rho=1.0, solver=solver).release(_big_hierarchy(2 ** 40), seed=0)
    assert rel.total == 2 ** 40 and int(rel.level(1).values.sum()) == 2 ** 40 and rel.check_consistency() == []


def _data(scale):
    return random_count_of_counts(np.random.default_rng(4), depth=2, max_fanout=3, K=6, max_groups_per_leaf=scale)


@pytest.mark.parametrize("cls, kwargs", [
    (MH, {"solver": "highs"}), (MH, {"solver": "ortools"}), (MHC, {"solver": "highs"}),
    (MHC, {"solver": "ortools"}), (MDynProg, {}), (ChainDynProg, {}), (CumulativeDynProg, {}),
    (MH, {"relaxed": True, "solver": "pdlp"}),
])
@pytest.mark.parametrize("scale", [3, 3000])
def test_group_size_models_are_refused_before_the_spend_iff_the_solver_refuses_them(cls, kwargs, scale):
    """Exact pgsr_mh / pgsr_mhc used to spend the whole budget and then refuse their model as too
    large (its size, nodes x G, is public): the door now asks the plug-in before any noise."""
    data = _data(scale)
    mech = cls(epsilon=1.0, **kwargs)
    # the oracle: the plug-in's refusal of every model of this release's public structure
    refuses = any(get(s).unsupported(_placeholder_targets(p)) for s, p in mech._probes(data))
    acct = Accountant(Budget.pure(1.0))
    if refuses:
        with pytest.raises(UnsupportedProblem, match=f"cannot post-process {mech.name}"):
            mech.release(data, seed=0, accountant=acct)
        assert acct.spent.is_zero
    else:
        rel = mech.release(data, seed=0, accountant=acct)
        assert rel.solver.split("+")[-1] == kwargs.get("solver", cls.default_solver)


def test_cumulative_dp_names_both_registered_plug_ins():
    rel = CumulativeDynProg(epsilon=1.0).release(_data(3), seed=0)
    assert rel.solver == "chain+costtable" and all(n in hierdp.solvers.names() for n in rel.solver.split("+"))


def test_census_gets_the_same_door():
    """census_topdown is cs's; the door is there for it: one call with a probe of its own shape."""
    probe = Problem.from_groups([1.5, 2.5], [0, 2], [4.0], objective="l2", integer=False)
    assert check_solver("highs", probe, task="solve a census parent (continuous WLS)").name == "highs"
    with pytest.raises(UnsupportedProblem, match="cannot solve a census parent"):
        check_solver("intopt", probe, task="solve a census parent (continuous WLS)")
