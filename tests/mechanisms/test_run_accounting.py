"""What a run charges a caller's accountant, in every calculus (issue 20, item 3).

Oracles: the composition theorems themselves, evaluated by brute force over the paths of a tiny
public tree (one person's records sit on one root-to-leaf path under unbounded neighbours), and
exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hierdp.hierarchy import Hierarchy
from hierdp.mechanisms.base import ReleaseAborted
from hierdp.mechanisms.topdown.mechanism import TopDownMechanism
from hierdp.mechanisms.topdown.plan import PerNodePlan
from hierdp.privacy import Accountant, Budget

# two root-to-leaf paths with per-node fractions (0.1, 0.5, 0.4, 0) and (0.1, 0.1, 0.8, 0)
EDGES = [("r", "a"), ("r", "b"), ("a", "a1"), ("b", "b1"), ("a1", "a11"), ("b1", "b11")]
FRACTIONS = {"r": 0.1, "a": 0.5, "a1": 0.4, "a11": 0.0, "b": 0.1, "b1": 0.8, "b11": 0.0}
MAX_PATH_SUMS = [0.1, 0.6, 1.0, 1.0]


def _tree() -> Hierarchy:
    return Hierarchy.from_edges(EDGES, counts={"a11": 5, "b11": 7})


def _mechanism(eps: float = 0.5, **kw) -> TopDownMechanism:
    names = np.asarray(_tree().names)
    plan = PerNodePlan(lambda level, keys: np.array([FRACTIONS[names[k]] for k in keys]), MAX_PATH_SUMS)
    return TopDownMechanism(epsilon=eps, noise="geometric", plan=plan, bounded=False, objective="l2", solver="highs",
                            **kw)


def _worst_path_zcdp(eps: Fraction) -> Fraction:
    """max over paths of the sum of (eps * f)^2 / 2 over its nodes: the zCDP of one person's records
    (each node an (eps f)-DP measurement, hence (eps f)^2/2-zCDP, composed along the path)."""
    paths = [["r", "a", "a1", "a11"], ["r", "b", "b1", "b11"]]
    return max(sum(((eps * Fraction(FRACTIONS[n])) ** 2 / 2 for n in p), Fraction(0)) for p in paths)


def test_per_node_pure_budgets_charge_a_zcdp_accountant_what_the_release_states() -> None:
    """P4: the parts (0.1, 0.5, 0.4, 0) of the largest path sums used to be charged as independent
    mechanisms, sum (eps * part)^2 / 2 = 0.0525, below one person's own zCDP (0.0825 on path b) and
    the release's statement (0.125)."""
    eps = Fraction(0.5)
    acct = Accountant(Budget.zcdp(1.0))
    rel = _mechanism().release(_tree(), seed=0, accountant=acct)
    stated = rel.accounting.guarantee("zcdp")
    assert stated is not None and Fraction(stated.parameters["rho"]) == eps * eps / 2
    assert acct.spent == Budget("zcdp", rho=eps * eps / 2)  # exactly what the release states
    worst = _worst_path_zcdp(eps)
    assert abs(float(worst) - 0.0825) < 1e-15 and acct.spent.exact_parameters["rho"] >= worst
    # the charges telescope: after each part, the sum so far is (the pure epsilon so far)^2 / 2
    so_far, eps_so_far = Fraction(0), Fraction(0)
    for (_, charged), spend in zip(acct.ledger, rel.accounting.spends, strict=True):
        so_far += charged.exact_parameters["rho"]
        eps_so_far += spend.budget.exact_parameters["epsilon"]
        assert so_far == eps_so_far * eps_so_far / 2


def test_per_node_pure_budgets_are_refused_up_front_by_a_short_zcdp_accountant() -> None:
    """An accountant that holds the old charge (0.0525) but not the stated 0.125 is refused before any
    noise, not part-way."""
    acct = Accountant(Budget.zcdp(0.1))
    with pytest.raises(Exception, match="needs") as err:
        _mechanism().release(_tree(), seed=0, accountant=acct)
    assert not isinstance(err.value, ReleaseAborted) and acct.spent.is_zero


def test_level_plans_keep_the_tighter_independent_charge() -> None:
    """Uniform level parts are independent eps_l-DP mechanisms: sum eps_l^2 / 2 stays valid."""
    acct = Accountant(Budget.zcdp(1.0))
    TopDownMechanism(epsilon=0.6, noise="geometric", bounded=False).release(_tree(), seed=0, accountant=acct)
    part = Fraction(0.6) / 4  # root + three levels, equal parts
    assert acct.spent == Budget("zcdp", rho=4 * part * part / 2)


def test_path_sums_round_up_and_the_path_check_is_exact() -> None:
    """P7 (the per-node plan's path check allowed 1e-12 relative above the declared maximum): the sums
    are now upper bounds of the exact rational sums, and what a path spends (fractions times the
    calibration margin) never exceeds the declared maximum - checked in rationals."""
    from hierdp.mechanisms.base import MechanismParameterError
    from hierdp.mechanisms.topdown.plan import CALIBRATION_MARGIN, path_sums_up

    rng = np.random.default_rng(0)
    a, b = rng.random(20_000), rng.random(20_000) * 10.0 ** rng.integers(-20, 1, 20_000)
    up = path_sums_up(a, b)
    for x, y, s in zip(a[:2000], b[:2000], up[:2000], strict=True):
        exact = Fraction(x) + Fraction(y)
        assert Fraction(s) >= exact and Fraction(float(np.nextafter(s, -np.inf))) < exact
    plan = PerNodePlan(lambda level, keys: np.zeros(len(keys)), [0.6, 1.0])
    decimal = path_sums_up(path_sums_up(np.array([0.1]), np.array([0.2])), np.array([0.3]))
    assert Fraction(0.1) + Fraction(0.2) + Fraction(0.3) > Fraction(0.6)  # the floats' binary values
    plan.check_paths(0, decimal)  # accepted: with the margin it spends at most 0.6 exactly
    spent = (Fraction(0.1) + Fraction(0.2) + Fraction(0.3)) * CALIBRATION_MARGIN
    assert spent <= Fraction(0.6)
    # the largest accepted path sum, and the next float above it
    limit = plan._limits[0]
    assert Fraction(limit) * CALIBRATION_MARGIN <= Fraction(0.6)
    assert Fraction(float(np.nextafter(limit, np.inf))) * CALIBRATION_MARGIN > Fraction(0.6)
    plan.check_paths(0, np.array([limit]))
    with pytest.raises(MechanismParameterError, match="max_path_sums"):
        plan.check_paths(0, np.array([np.nextafter(limit, np.inf)]))
    with pytest.raises(MechanismParameterError, match="max_path_sums"):
        plan.check_paths(0, np.array([0.61]))


def test_a_spatial_consistency_failure_after_the_noise_aborts_with_the_spends() -> None:
    """P9: a consistency solve that fails after the noise raises ReleaseAborted carrying every spend
    (the caller's accountant charged the whole budget), not a bare SolverFailed."""
    import hierdp
    from hierdp.datasets.points import gaussian_cluster
    from hierdp.solvers.base import SolverFailed

    grid = gaussian_cluster(n=5000, sigma=8.0, side=32, seed=0)
    mech = hierdp.mechanisms.create("quadtree", epsilon=1.0, height=5, consistency_solver="highs", time_limit=1e-9)
    acct = Accountant(Budget.pure(1.0))
    with pytest.raises(ReleaseAborted) as err:
        mech.release(grid, seed=0, accountant=acct)
    aborted = err.value
    assert isinstance(aborted.cause, SolverFailed) and aborted.partial is None
    assert sum(s.budget for s in aborted.spends) == Budget.pure(1.0) == aborted.spent
    assert acct.spent == Budget.pure(1.0) and aborted.external_accountant is acct
