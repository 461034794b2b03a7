"""TopDown mechanisms with constraints=: the guarantee, the accounting, failures and the failsafe."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import hierdp
from hierdp.constraints import Constraints, ConstraintsInfeasible
from hierdp.mechanisms import TDA, InfTDA, MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.topdown import TopDownMechanism
from hierdp.privacy import Accountant, Budget
from hierdp.solvers import UnsupportedProblem

from .oracles import released_vector


@pytest.fixture
def tree():
    edges = [("US", s) for s in "PQRS"] + [(s, f"{s}/{i}") for s in "PQRS" for i in range(4)]
    rng = np.random.default_rng(7)
    counts = {f"{s}/{i}": int(rng.integers(50, 400)) for s in "PQRS" for i in range(4)}
    return hierdp.Hierarchy.from_edges(edges, counts=counts)


def caps(tree) -> Constraints:
    v = {str(n): int(c) for n, c in zip(tree.names, tree.counts, strict=True)}
    return (Constraints().add_linear({"P/0": 1, "Q/0": 1}, upper=v["P/0"] + v["Q/0"] - 30, name="cross-state cap")
            .add_linear({"R/0": 1, "R/1": 1}, upper=v["R/0"] + v["R/1"] - 20, name="within-state cap")
            .add_bounds("S/2", lower=v["S/2"] + 25, name="lower bound"))


@pytest.mark.parametrize("make", [
    lambda **k: InfTDA(epsilon=1.0, delta=1e-8, **k),
    lambda **k: TDA("l2", epsilon=1.0, delta=1e-8, **k),
    lambda **k: TDA("l2", epsilon=1.0, delta=1e-8, rounding="exact", **k),
    lambda **k: TDA("linf", epsilon=1.0, delta=1e-8, **k),
    lambda **k: TopDownMechanism(epsilon=1.0, noise="geometric", objective="l1", **k),
], ids=["inftda", "tda_l2", "tda_l2_exact", "tda_linf", "topdown_l1_geometric"])
def test_rows_hold_and_the_guarantee_is_the_one_without_rows(tree, make):
    c = caps(tree)
    rel = make(constraints=c).release(tree, seed=3)
    base = make().release(tree, seed=3)
    assert rel.check_consistency() == []
    assert c.resolve(tree).check(rel) == []
    v = released_vector(rel, tree)
    assert (v >= 0).all()
    assert v[tree.index_of("P/0")] + v[tree.index_of("Q/0")] <= caps(tree)["cross-state cap"].upper
    # the same noise, ledger and guarantee as without the rows
    assert rel.accounting.guarantees == base.accounting.guarantees
    assert [(s.label, s.budget) for s in rel.accounting.spends] == [(s.label, s.budget) for s in base.accounting.spends]
    assert rel.accounting.total == base.accounting.total
    # level 1 has no row and no interval here... except what the lower bound carries up to state S
    d = rel.accounting.details["constraints"]
    assert d["sha256"] == c.digest() and d["entries"] == 3 and d["relaxations"] == []
    assert Constraints([hierdp.constraints.records.entry_from_record(r, default_name="x") for r in d["records"]]) == c
    assert any("post-processed under public constraints" in n for n in rel.accounting.notes)
    assert rel.params["constraints"] == c.digest()


def test_groups_the_rows_do_not_reach_are_solved_as_without_them(tree):
    c = Constraints().add_linear({"P/0": 1, "P/1": 1}, upper=10, name="p")  # reaches state P's group only
    rel = InfTDA(epsilon=1.0, delta=1e-8, constraints=c).release(tree, seed=5)
    base = InfTDA(epsilon=1.0, delta=1e-8).release(tree, seed=5)
    v, b = released_vector(rel, tree), released_vector(base, tree)
    level1 = [tree.index_of(s) for s in "PQRS"]
    assert np.array_equal(v[level1], b[level1])  # nothing applies at level 1
    others = [tree.index_of(f"{s}/{i}") for s in "QRS" for i in range(4)]
    assert np.array_equal(v[others], b[others])  # same noise, same solver (intopt) for Q, R, S
    assert v[tree.index_of("P/0")] + v[tree.index_of("P/1")] <= 10
    st = rel.solver_stats[2]
    first_general = hierdp.solvers.preference(("linf", True, True))[5]  # auto's measured order for the rows
    assert st["solver"] == "intopt" and st["constraint_solver"] == first_general and st["constrained_groups"] == 1


@pytest.mark.parametrize("make", [lambda **k: InfTDA(rho=0.5, **k), lambda **k: TDA("l2", rho=0.5, **k)],
                         ids=["inftda", "tda_l2"])
def test_rows_that_the_release_already_satisfies_change_nothing(tree, make):
    """The mechanism's own answer is kept wherever it satisfies the rows (it is optimal under them)."""
    total = int(tree.counts[0])
    slack = (Constraints().add_linear({"P/0": 1, "Q/0": 1}, upper=total, name="loose cap")
             .add_bounds("S/2", lower=0, upper=total, name="loose bounds"))
    rel, base = make(constraints=slack).release(tree, seed=2), make().release(tree, seed=2)
    for a, b in zip(rel.levels, base.levels, strict=True):
        assert np.array_equal(a.keys, b.keys) and np.array_equal(a.values, b.values)
    assert rel.solver_stats[2]["constrained_groups"] == 0


def tight(tree) -> Constraints:
    """All of P's counties and one of Q's at most 5: feasible on the structure (P and Q may be small,
    the other states take the rest), not once state P is released above 5."""
    return Constraints().add_linear({"P/0": 1, "P/1": 1, "P/2": 1, "P/3": 1, "Q/0": 1}, upper=5, name="tight")


def test_a_row_that_cannot_hold_after_the_noise_names_itself_and_the_budget(tree):
    acct = Accountant(Budget.zcdp(1.0))
    with pytest.raises(ReleaseAborted) as info:
        InfTDA(rho=0.5, constraints=tight(tree)).release(tree, seed=0, accountant=acct)
    err = info.value
    assert isinstance(err.cause, ConstraintsInfeasible) and err.cause.entries == ("tight",)
    assert "'tight'" in str(err) and "Spent so far" in str(err) and err.level == 2
    assert err.spent == Budget.zcdp(0.5) and acct.spent == Budget.zcdp(0.5)  # both levels were measured
    assert sorted(str(tree.names[k]) for k in err.parents) == ["P", "Q"]  # the groups the row couples
    assert err.partial.n_levels == 2


def test_the_failsafe_releases_the_minimal_l1_relaxation_and_says_so(tree):
    rel = InfTDA(rho=0.5, constraints=tight(tree), on_infeasible="relax").release(tree, seed=0)
    v = released_vector(rel, tree)
    P = int(v[tree.index_of("P")])
    relax = rel.accounting.details["constraints"]["relaxations"]
    # P's counties sum to P, Q/0 can be 0: the smallest violation is P - 5
    assert relax == [{"row": "tight", "level": 2, "lower_by": 0.0, "upper_by": float(P - 5)}]
    assert v[tree.index_of("Q/0")] == 0
    assert any(n == f"failsafe: constraint 'tight' relaxed at level 2 (level2): upper bound raised by {P - 5:,}"
               for n in rel.accounting.notes)
    assert rel.check_consistency() == []


def test_the_failsafe_minimum_matches_enumeration_on_a_coupled_level():
    edges = [("R", "A"), ("R", "B")] + [(p, f"{p}{i}") for p in "AB" for i in range(3)]
    tree = hierdp.Hierarchy.from_edges(edges, counts={f"{p}{i}": 4 + i for p in "AB" for i in range(3)})
    rows = [({"A0": 1, "B0": 1}, 14, 14), ({"A0": 1, "A1": 1, "B0": 1, "B1": 1}, -np.inf, 16),
            ({"A2": 2, "B2": -1}, 6, np.inf)]
    c = Constraints()
    for i, (t, lo, hi) in enumerate(rows):
        c.add_linear(t, lower=None if lo == -np.inf else lo, upper=None if hi == np.inf else hi, name=f"r{i}")
    for seed in range(6):
        rel = TopDownMechanism(rho=0.02, objective="l1", constraints=c, on_infeasible="relax").release(tree, seed=seed)
        v = released_vector(rel, tree)
        A, B = int(v[tree.index_of("A")]), int(v[tree.index_of("B")])
        best = None
        for a in itertools.product(range(A + 1), repeat=2):
            if sum(a) > A:
                continue
            for b in itertools.product(range(B + 1), repeat=2):
                if sum(b) > B:
                    continue
                y = {"A0": a[0], "A1": a[1], "A2": A - sum(a), "B0": b[0], "B1": b[1], "B2": B - sum(b)}
                total = 0
                for t, lo, hi in rows:
                    act = sum(cf * y[n] for n, cf in t.items())
                    total += max(0, lo - act) + max(0, act - hi)
                best = total if best is None else min(best, total)
        relax = rel.accounting.details["constraints"]["relaxations"]
        assert sum(r["lower_by"] + r["upper_by"] for r in relax) == best, seed
        for r in relax:  # the release holds the relaxed rows
            t, lo, hi = rows[int(r["row"][1:])]
            act = sum(cf * int(v[tree.index_of(n)]) for n, cf in t.items())
            assert lo - r["lower_by"] <= act <= hi + r["upper_by"]


def test_rows_over_nodes_released_zero_are_checked(tree):
    edges = [("R", p) for p in "ABC"] + [(p, f"{p}{i}") for p in "ABC" for i in range(2)]
    t = hierdp.Hierarchy.from_edges(edges, counts={"A0": 0, "A1": 0, "B0": 0, "B1": 0, "C0": 500, "C1": 500})
    c = Constraints().add_linear({"A0": 1, "B0": 1}, lower=1, name="needs A or B")
    rel = InfTDA(rho=50.0, constraints=c, on_infeasible="relax").release(t, seed=0)
    v = released_vector(rel, t)
    assert v[t.index_of("A")] == 0 and v[t.index_of("B")] == 0  # little noise: A and B are released 0
    relax = rel.accounting.details["constraints"]["relaxations"]
    assert relax == [{"row": "needs A or B", "level": 2, "lower_by": 1.0, "upper_by": 0.0}]
    with pytest.raises(ReleaseAborted, match="'needs A or B' reads 0") as info:
        InfTDA(rho=50.0, constraints=c).release(t, seed=0)
    assert info.value.cause.entries == ("needs A or B",)


def test_unbounded_root_is_kept_in_its_interval(tree):
    c = Constraints().add_bounds("US", upper=100, name="cap").add_bounds("P", upper=100, name="p")
    rel = InfTDA(rho=1.0, bounded=False, constraints=c).release(tree, seed=0)
    assert 0 <= rel.levels[0].values[0] <= 100
    assert c.resolve(tree, root_public=False).check(rel) == []


def test_chunks_keep_coupled_parents_together_and_change_nothing(tree):
    """Chunks of one parent (except where a row couples several) reach the same optimum per level
    (L∞ optima are not unique, so the points may differ) and the canonical order of the nodes."""
    c = caps(tree)
    whole = InfTDA(epsilon=1.0, delta=1e-8, constraints=c).release(tree, seed=11)
    m = InfTDA(epsilon=1.0, delta=1e-8, constraints=c)
    m.chunk_children = 1  # one parent per chunk, unless a row couples several
    split = m.release(tree, seed=11)
    assert whole.solver_stats[2]["chunks"] == 1 and split.solver_stats[2]["chunks"] == 3  # P and Q together, R, S
    assert c.resolve(tree).check(split) == [] and split.check_consistency() == []
    for L, (a, b) in enumerate(zip(whole.levels, split.levels, strict=True)):
        assert np.array_equal(a.keys, b.keys) and np.array_equal(a.parent, b.parent)
        if L:
            assert whole.solver_stats[L]["objective"] == split.solver_stats[L]["objective"]
    assert np.array_equal(whole.levels[1].values, split.levels[1].values)


def test_refusals_before_any_noise(tree, tmp_path):
    c = caps(tree)
    with pytest.raises(UnsupportedProblem, match="'intopt' cannot honour constraint rows"):
        InfTDA(epsilon=1.0, delta=1e-8, constraints=c, constraint_solver="intopt")
    with pytest.raises(MechanismParameterError, match="only with constraints="):
        InfTDA(epsilon=1.0, delta=1e-8, on_infeasible="relax")
    with pytest.raises(ValueError, match="on_infeasible must be one of"):
        InfTDA(epsilon=1.0, delta=1e-8, constraints=c, on_infeasible="ignore")
    acct = Accountant(Budget.zcdp(1.0))
    bad = Constraints().add_bounds("P", upper=1, name="p").add_bounds("P/0", lower=5, name="p0")
    with pytest.raises(ConstraintsInfeasible, match=r"'p'.*'p0'"):
        InfTDA(rho=0.5, constraints=bad).release(tree, seed=0, accountant=acct)
    assert acct.ledger == []  # nothing was spent by either refusal
    # a constraint file path is read when the mechanism is built
    path = c.write(tmp_path / "caps.jsonl")
    assert InfTDA(rho=0.5, constraints=str(path)).constraints == c


def test_the_constraint_solver_is_named_in_the_parameters(tree):
    c = caps(tree)
    assert InfTDA(rho=0.5, constraints=c).params()["constraint_solver"] == "auto"
    assert TDA("linf", rho=0.5, constraints=c).params()["constraint_solver"] == "highs"  # the level solver takes rows
    assert TDA("l2", rho=0.5, constraints=c, constraint_solver="ortools").params()["constraint_solver"] == "ortools"
    assert "constraint_solver" not in InfTDA(rho=0.5).params()


def test_a_checkpoint_belongs_to_its_constraints(tree, tmp_path):
    from hierdp.scale.errors import CheckpointError

    c = caps(tree)
    d = tmp_path / "ckpt"
    InfTDA(rho=0.5, constraints=c).release(tree, seed=0, checkpoint=d)
    other = Constraints().add_bounds("P", upper=10 ** 6, name="loose")
    with pytest.raises(CheckpointError):
        InfTDA(rho=0.5, constraints=other).release(tree, seed=0, resume=d)
