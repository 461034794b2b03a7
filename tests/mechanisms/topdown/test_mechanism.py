"""The TopDown engine's seams: a level solver that fails (the error carries the partial release, the
spends and where it happened), solver options and instances reaching the solver, geometric noise,
and the budget plans (proportions, HTF's geometric, per node)."""

from __future__ import annotations

import copy
import math
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hierdp.hierarchy import Hierarchy
from hierdp.mechanisms import InfTDA, MechanismParameterError, ReleaseAborted, create
from hierdp.mechanisms.topdown import GeometricPlan, PerNodePlan, ProportionsPlan, TopDownMechanism
from hierdp.mechanisms.topdown.plan import CALIBRATION_MARGIN
from hierdp.privacy.noise import DiscreteGaussianNoise, GeometricNoise
from hierdp.privacy.budget import Accountant, Budget
from hierdp.solvers import Capabilities, GroupSolution, Solver, SolverFailed, get, registry, solve_groups


def _tree(depth: int = 3, fan: int = 3, base: int = 200) -> Hierarchy:
    """A complete tree with large counts (noise never zeroes a node at the budgets used here)."""
    edges, counts = [], {}
    frontier = ["r"]
    for _lev in range(depth):
        nxt = []
        for p in frontier:
            for k in range(fan):
                c = f"{p}.{k}"
                edges.append((p, c))
                nxt.append(c)
        frontier = nxt
    for i, leaf in enumerate(frontier):
        counts[leaf] = base + 7 * i
    return Hierarchy.from_edges(edges, counts=counts)


class _Failing(Solver):
    """Test plug-in: solves like intopt, but fails on batches of at least ``min_groups`` groups
    (TopDown level 2 and below), as a solver hitting its time limit would."""

    name = "test_failing_level"
    capabilities = Capabilities(objectives=frozenset({"linf"}), integer=True, continuous=False,
                                structures=frozenset({"level"}), free_sign=False, missing_targets=False,
                                description="test: fails on wide levels")

    def __init__(self, min_groups: int = 2, with_groups: bool = True) -> None:
        self.min_groups, self.with_groups, self.calls = min_groups, with_groups, []

    def _solve(self, problem, *, time_limit=None, **options):
        return get("intopt")._solve(problem, **options)

    def solve_groups(self, values, offsets, totals, *, objective, integer=True, weights=None, time_limit=None,
                     **options) -> GroupSolution:
        self.calls.append({"time_limit": time_limit, "n_groups": len(offsets) - 1, **options})
        if len(offsets) - 1 >= self.min_groups:
            err = SolverFailed(self.name, "time limit", "test plug-in pretends to run out of time")
            if self.with_groups:  # which group of the batch failed (SolverFailed.groups)
                err.groups = np.array([int(np.argmax(totals))])
            raise err
        return solve_groups(values, offsets, totals, solver="intopt", objective=objective, integer=integer)


@pytest.fixture()
def failing(monkeypatch):
    plugin = _Failing()
    monkeypatch.setitem(registry._EXTRA, plugin.name, plugin)  # registered for this test only
    return plugin


def test_a_failing_level_solver_raises_with_the_partial_release_and_the_spends(failing):
    tree = _tree(depth=3)
    acct = Accountant(Budget.zcdp(4.0))
    mech = InfTDA(rho=3.0, solver="test_failing_level")
    with pytest.raises(ReleaseAborted) as info:
        mech.release(tree, seed=0, accountant=acct)
    err = info.value
    assert err.level == 2 and err.level_name == tree.level_names[2]
    assert isinstance(err.cause, SolverFailed) and err.__cause__ is err.cause
    # the partial release: levels 0 and 1, complete and consistent, marked partial
    part = err.partial
    assert part.partial and part.n_levels == 2 and part.check_consistency() == []
    assert repr(part).startswith("PartialTreeRelease")
    # the spends: levels 1 and 2 (level 2's budget was spent before its noise); exactly 2/3 of rho
    assert [s.label for s in err.spends] == [f"level 1 ({tree.level_names[1]})", f"level 2 ({tree.level_names[2]})"]
    assert err.spent == Budget.zcdp(3.0) * Fraction(2, 3)
    assert acct.spent == err.spent and err.external_accountant is acct
    assert part.accounting.spends == err.spends and "partial" in part.guarantee
    # where: the parent of the failing group = the level-1 node with the largest released value
    lv1 = part.levels[1]
    assert list(err.parents) == [int(lv1.keys[np.argmax(lv1.values)])]
    name = tree.names[int(lv1.keys[np.argmax(lv1.values)])]
    assert f"level 2 ({tree.level_names[2]}), parent {name}" in str(err)


def test_without_a_group_index_the_error_names_every_parent_of_the_batch(monkeypatch):
    plugin = _Failing(with_groups=False)
    monkeypatch.setitem(registry._EXTRA, plugin.name, plugin)
    with pytest.raises(ReleaseAborted) as info:
        InfTDA(rho=3.0, solver=plugin.name).release(_tree(), seed=1)
    lv1 = info.value.partial.levels[1]
    assert sorted(info.value.parents) == sorted(lv1.keys[lv1.values > 0].tolist())


def test_time_limit_and_options_reach_the_level_solver(failing):
    failing.min_groups = 10 ** 9  # never fails: records the calls
    sentinel = object()
    rel = InfTDA(rho=3.0, solver="test_failing_level", time_limit=2.5,
                 solver_options={"executor": sentinel, "batch_size": 3}).release(_tree(), seed=0)
    assert rel.check_consistency() == [] and rel.solver == "test_failing_level"
    assert failing.calls and all(c["time_limit"] == 2.5 and c["executor"] is sentinel and c["batch_size"] == 3
                                 for c in failing.calls)


def test_a_solver_instance_is_accepted_and_named():
    rel = InfTDA(rho=1.0, solver=get("intopt")).release(_tree(), seed=3)
    ref = InfTDA(rho=1.0).release(_tree(), seed=3)
    assert rel.solver == "intopt"
    assert all(np.array_equal(a.values, b.values) for a, b in zip(rel.levels, ref.levels, strict=False))


def test_an_executor_reaches_a_general_solver():
    tree = _tree(depth=2, fan=4)
    serial = InfTDA(rho=2.0, solver="highs").release(tree, seed=5)
    with ThreadPoolExecutor(2) as pool:
        mapped = InfTDA(rho=2.0, solver="highs", solver_options={"executor": pool}).release(tree, seed=5)
    assert mapped.check_consistency() == []
    # same noise, same optimum value per level (the L-inf optimum may not be unique, its value is)
    for a, b in zip(serial.solver_stats[1:], mapped.solver_stats[1:], strict=False):
        assert a["objective"] == pytest.approx(b["objective"], abs=1e-9)


def test_geometric_noise_is_the_discrete_laplace_of_its_scale():
    """The noise model's draws against the exact pmf P(k) = (1-q)/(1+q) q^|k|, q = exp(-1/scale)."""
    model = GeometricNoise()
    scale = model.calibrate(Fraction(1, 2), 2)  # eps = 1/2, L1 sensitivity 2: scale 4
    assert scale == 4.0
    x = model.draw(scale, 200_000, np.random.default_rng(11))
    q = math.exp(-1 / scale)
    ks = np.arange(-12, 13)
    pmf = (1 - q) / (1 + q) * q ** np.abs(ks)
    observed = np.array([(x == k).sum() for k in ks] + [(np.abs(x) > 12).sum()])
    expected = np.append(pmf, 1 - pmf.sum()) * x.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_topdown_with_geometric_noise_at_equal_privacy():
    tree = _tree()
    rel = create("topdown", epsilon=1.5, noise="geometric", objective="l2").release(tree, seed=2)
    assert rel.check_consistency() == [] and rel.solver == "projection"
    acc = rel.accounting
    assert acc.calculus == "pure" and acc.guarantee("pure").parameters["epsilon"] == 1.5
    for s in acc.spends:  # each level: eps/T, L1 sensitivity 2 (bounded, m = 1), scale = 2T/eps
        assert s.budget == Budget.pure(1.5) * Fraction(1, 3)
        assert s.details["scale"] == pytest.approx(2 * 3 / 1.5, rel=1e-15)


def test_geometric_plan_is_htf_equation_17():
    tree = _tree(depth=4, fan=2)
    eps = 2.0
    rel = create("topdown", epsilon=eps, noise="geometric", plan=GeometricPlan(), bounded=False).release(tree, seed=0)
    h = tree.n_levels - 1
    parts = [float(s.budget.epsilon) for s in rel.accounting.spends]
    # eq. 17 with i = height = h - level; weights rounded to doubles then split exactly: a few ulps
    c = 2 ** (1 / 3)
    for level, got in enumerate(parts):
        want = 2 ** ((h - (h - level)) / 3) * eps * (c - 1) / (2 ** ((h + 1) / 3) - 1)
        assert got == pytest.approx(want, rel=1e-12)
    assert rel.accounting.spent == Budget.pure(eps)


def test_proportions_plan_is_exact_and_must_fit_the_tree():
    tree = _tree()
    mech = create("inftda", rho=1.0, plan=[0.2, 0.3, 0.5])
    rel = mech.release(tree, seed=0)
    got = [s.budget.exact_parameters["rho"] for s in rel.accounting.spends]
    props = [Fraction(0.2), Fraction(0.3), Fraction(0.5)]
    assert got == [p / sum(props) for p in props]
    rng = np.random.default_rng(0)
    state = copy.deepcopy(rng.bit_generator.state)
    with pytest.raises(MechanismParameterError, match="3 measured levels"):
        create("inftda", rho=1.0, plan=[0.5, 0.5]).release(tree, rng=rng)
    assert rng.bit_generator.state == state
    with pytest.raises(MechanismParameterError, match="sum to 1"):
        ProportionsPlan([0.5, 0.6])


class _SpyGaussian(DiscreteGaussianNoise):
    """Records the parameters the engine draws with."""

    def __init__(self) -> None:
        self.draws: list[np.ndarray] = []

    def draw(self, parameter, size, rng):
        self.draws.append(np.broadcast_to(np.asarray(parameter, dtype=float), (size,)).copy())
        return super().draw(parameter, size, rng)


def test_per_node_budgets_bypass_a_node_and_keep_every_path_within_the_total():
    # r -> {A, B} -> 2 children each; A bypassed (fraction 0), its children get the whole budget;
    # B and its children get half each: every root-to-leaf path sums to 1
    edges = [("r", "A"), ("r", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1"), ("B", "b2")]
    tree = Hierarchy.from_edges(edges, counts={"a1": 400, "a2": 300, "b1": 500, "b2": 600})
    names = list(tree.names)
    frac = {"A": 0.0, "B": 0.5, "a1": 1.0, "a2": 1.0, "b1": 0.5, "b2": 0.5}

    def fractions(level, keys):
        return np.array([frac.get(names[int(k)], 0.0) for k in keys])

    spy = _SpyGaussian()
    rho = 2.0
    mech = TopDownMechanism(rho=rho, noise=spy, objective="l2", solver="highs",
                            plan=PerNodePlan(fractions, [0.0, 0.5, 1.0]))
    rel = mech.release(tree, seed=4)
    assert rel.check_consistency() == []
    assert [s.budget for s in rel.accounting.spends] == [Budget.zcdp(rho) * Fraction(1, 2)] * 2
    # level 1 measures B only; level 2 measures every child, each at its own budget (Δ² = 2)
    # (each node's noise is calibrated to its fraction times the plan's margin 1 - 2**-40)
    sigma2 = {f: mech.noise.calibrate(Fraction(rho) * Fraction(f) * CALIBRATION_MARGIN, 2) for f in (0.5, 1.0)}
    lvl1, lvl2 = spy.draws
    assert lvl1.tolist() == [sigma2[0.5]]
    assert sorted(lvl2.tolist()) == sorted([sigma2[1.0]] * 2 + [sigma2[0.5]] * 2)
    for s2, f in ((sigma2[0.5], 0.5), (sigma2[1.0], 1.0)):  # safe rounding, exactly
        assert Fraction(2) / (2 * Fraction(s2)) <= Fraction(rho) * Fraction(f)
    # a declaration the paths break is refused before that level's noise
    spy2 = _SpyGaussian()
    bad = TopDownMechanism(rho=rho, noise=spy2, objective="l2", solver="highs",
                           plan=PerNodePlan(fractions, [0.0, 0.5, 0.9]))
    with pytest.raises(ReleaseAborted, match="max_path_sums"):
        bad.release(tree, seed=4)
    assert len(spy2.draws) == 1  # level 1 only


def test_a_per_node_plan_needs_a_solver_that_accepts_unmeasured_nodes():
    from hierdp.solvers import UnsupportedProblem

    with pytest.raises(UnsupportedProblem, match="intopt"):
        create("inftda", rho=1.0, plan=PerNodePlan(lambda lev, k: np.ones(len(k)), [0, 1, 1, 1]))
