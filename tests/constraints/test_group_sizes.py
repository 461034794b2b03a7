"""Constraint sets inside the group-size mechanisms (paper 001): every post-processing solve under
the rows against brute force over tiny count-of-counts hierarchies, feasibility before any noise
against brute force, the noise, the ledger and the accounting of the release without rows, and
the refusals before any noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

import hierdp
from experiments.paper001_pgsr.oracles import chain_coordinates, feasible_set
from hierdp.constraints import ConstraintError, Constraints, ConstraintsInfeasible
from hierdp.datasets.group_sizes import random_count_of_counts
from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.mechanisms import InfTDA, MechanismParameterError
from hierdp.mechanisms.pgsr import MH, MHC, ChainDynProg, CumulativeDynProg, GroupSizeTopDown, MDynProg
from hierdp.mechanisms.pgsr import base as pgsr_base
from hierdp.mechanisms.pgsr.constraints import GroupSizeConstraints
from hierdp.privacy import Accountant, Budget


# ---------------------------------------------------------------------------------- an independent oracle
class Plain:
    """A constraint set as plain rows over (region index, size) cells, built here by loops from the
    same description as the hierdp set (never from hierdp's binding): ``rows = [({(r, k): coef}, lo, hi)]``."""

    def __init__(self) -> None:
        self.rows: list[tuple[dict[tuple[int, int], int], float, float]] = []

    def holds(self, h: np.ndarray) -> bool:
        """``h``: ``(n_regions, K)`` histograms."""
        for terms, lo, hi in self.rows:
            act = sum(c * int(h[r, k - 1]) for (r, k), c in terms.items())
            if not lo <= act <= hi:
                return False
        return True


def random_set(rng: np.random.Generator, data: CountOfCounts) -> tuple[Constraints, Plain]:
    """A random set of every kind of entry over regions and sizes, and the same set as plain rows."""
    names = [str(x) for x in data.regions.names]
    level = [int(x) for x in data.regions.level]
    K = data.K
    c, plain = Constraints(), Plain()
    inf = float("inf")
    for i in range(int(rng.integers(1, 4))):
        kind = rng.choice(["zero", "bounds", "linear", "rule", "invariant"])
        r = int(rng.integers(len(names)))
        cells = sorted({int(k) for k in rng.integers(1, K + 1, size=int(rng.integers(1, K + 1)))})
        whole = bool(rng.random() < 0.3)
        ks = list(range(1, K + 1)) if whole else cells
        if kind == "zero":
            c.add_zero(names[r], cells=None if whole else cells, name=f"e{i}")
            for k in ks:
                plain.rows.append(({(r, k): 1}, 0, 0))
        elif kind == "invariant":
            v = int(rng.integers(0, 3))
            c.add_invariant(names[r], v, cells=None if whole else cells, name=f"e{i}")
            plain.rows.append(({(r, k): 1 for k in ks}, v, v))
        elif kind == "bounds":
            lo, hi = sorted(int(x) for x in rng.integers(0, 4, size=2))
            c.add_bounds(names[r], lower=lo, upper=hi, cells=None if whole else cells, name=f"e{i}")
            plain.rows.append(({(r, k): 1 for k in ks}, lo, hi))
        elif kind == "linear":
            r2 = int(rng.integers(len(names)))
            a, b = int(rng.choice([1, 2, -1])), 1
            hi = int(rng.integers(0, 5))
            terms = {names[r]: a} if r2 == r else {names[r]: a, names[r2]: b}
            c.add_linear(terms, upper=hi, cells=None if whole else cells, name=f"e{i}")
            row: dict[tuple[int, int], int] = {}
            for rr, coef in ([(r, a)] if r2 == r else [(r, a), (r2, b)]):
                for k in ks:
                    row[(rr, k)] = row.get((rr, k), 0) + coef
            plain.rows.append((row, -inf, hi))
        else:  # a cell rule in every region of a level: size k1 at least size k2
            k1, k2 = (int(x) for x in rng.choice(np.arange(1, K + 1), size=2, replace=K < 2))
            if k1 == k2:
                continue
            L = int(rng.integers(0, max(level) + 1))
            c.add_cell_rule({k1: 1, k2: -1}, lower=0, levels=[data.regions.level_names[L]], name=f"e{i}")
            for rr in range(len(names)):
                if level[rr] == L:
                    plain.rows.append(({(rr, k1): 1, (rr, k2): -1}, 0, inf))
    return c, plain


def tiny(rng: np.random.Generator, count: int):
    """Count-of-counts small enough to enumerate (leaves x K <= 8 cells, G <= 5)."""
    for _ in range(count):
        data = random_count_of_counts(rng, depth=int(rng.integers(1, 3)), max_fanout=2, K=int(rng.integers(2, 4)),
                                      max_groups_per_leaf=2)
        leaves = int((data.regions.n_children == 0).sum())
        if leaves * data.K > 8 or data.G > 5 or data.G == 0:
            continue
        yield data


def feasible_points(data: CountOfCounts, plain: Plain, region_totals: bool = False) -> list[np.ndarray]:
    parent = [int(p) for p in data.regions.parent]
    out = []
    for h in feasible_set(parent, data.K, data.G):
        if region_totals and not np.array_equal(h.sum(axis=1), data.group_totals):
            continue
        if plain.holds(h):
            out.append(h)
    return out


# ---------------------------------------------------------------------------------- feasibility, before noise
@pytest.mark.parametrize("region_totals", [False, True])
def test_a_set_is_refused_before_noise_exactly_when_no_histogram_satisfies_it(region_totals):
    rng = np.random.default_rng(11 + region_totals)
    seen = {True: 0, False: 0}
    for data in tiny(rng, 150):
        c, plain = random_set(rng, data)
        points = feasible_points(data, plain, region_totals)
        try:
            GroupSizeConstraints.bind(c, data, region_totals=region_totals)
            refused = None
        except ConstraintsInfeasible as exc:
            refused = exc
        assert (refused is None) == bool(points), (c.entries, region_totals)
        seen[bool(points)] += 1
        if refused is not None and refused.entries:
            # the named subset is irreducible: infeasible as it is, feasible without any one of its entries
            keep = set(refused.entries)
            sub = Constraints([e for e in c if e.name in keep])
            with pytest.raises(ConstraintsInfeasible):
                GroupSizeConstraints.bind(sub, data, region_totals=region_totals)
            for drop in keep:
                GroupSizeConstraints.bind(Constraints([e for e in sub if e.name != drop]), data,
                                          region_totals=region_totals)
    assert seen[True] >= 20 and seen[False] >= 5


# ---------------------------------------------------------------------------------- the solves, exactly
def _solvable(rng, count):
    for data in tiny(rng, count):
        c, plain = random_set(rng, data)
        points = feasible_points(data, plain)
        if points:
            yield data, c, plain, points


def test_model1_under_constraints_equals_brute_force():
    """M_DP (the cost tables take bounds; a general solver takes rows), M_H with HiGHS and CP-SAT."""
    rng = np.random.default_rng(5)
    checked = 0
    for data, c, plain, points in _solvable(rng, 160):
        noisy = data.by_size + rng.integers(-3, 4, data.by_size.shape)
        best = min(float(((h - noisy.T) ** 2).sum()) for h in points)
        for mech in (MDynProg(epsilon=1, constraints=c), MH(epsilon=1, constraints=c),
                     MH(epsilon=1, solver="ortools", constraints=c)):
            values, info = mech.post_process(data, noisy)
            assert info["objective"] == pytest.approx(best, abs=1e-9)
            assert plain.holds(values.T)
            assert float(((values - noisy) ** 2).sum()) == pytest.approx(best, abs=1e-9)
            assert values[:, 0].sum() == data.G and (values >= 0).all()
        checked += 1
    assert checked >= 25


def test_model2_under_constraints_equals_brute_force_in_both_formulations():
    rng = np.random.default_rng(6)
    checked = 0
    for data, c, plain, points in _solvable(rng, 140):
        parent = [int(p) for p in data.regions.parent]
        root = parent.index(-1)
        s_noisy = np.cumsum(data.by_size, axis=0) + rng.integers(-2, 3, data.by_size.shape)
        mask = np.ones(s_noisy.shape, bool)
        mask[-1, root] = False  # the fixed national s^K = G has no term
        best = min(float((((np.cumsum(h.T, axis=0) - s_noisy) ** 2)[mask]).sum()) for h in points)
        values, info = MHC(epsilon=1, constraints=c).post_process(data, s_noisy)
        assert info["objective"] == pytest.approx(best, abs=1e-9) and plain.holds(values.T)
        values2, info2 = MHC(epsilon=1, formulation="prefix", constraints=c).post_process(data, s_noisy)
        assert info2["objective"] == pytest.approx(best + float((data.G - s_noisy[-1, root]) ** 2), abs=1e-9)
        assert plain.holds(values2.T)
        checked += 1
    assert checked >= 20


def test_model3_under_constraints_equals_brute_force():
    """The chain mechanism (level vectors as targets), its rows through a general solver."""
    rng = np.random.default_rng(7)
    checked = 0
    for data, c, plain, points in _solvable(rng, 140):
        parent = [int(p) for p in data.regions.parent]
        coords = chain_coordinates(parent, data.h)
        t = np.array([s for _, s in coords[:-1]], float) + rng.integers(-3, 4, len(coords) - 1)
        best = min(float(((np.array([s for _, s in chain_coordinates(parent, h)[:-1]]) - t) ** 2).sum())
                   for h in points)
        tgt = np.zeros((data.K, data.n_regions))
        for ((k, r), _), val in zip(coords[:-1], t, strict=True):
            tgt[k - 1, r] = val
        values, info = ChainDynProg(epsilon=1, measure="level_vector", constraints=c).post_process(
            data, tgt, [1.0] * data.n_levels)
        assert info["objective"] == pytest.approx(best, abs=1e-9) and plain.holds(values.T)
        got = np.array([s for _, s in chain_coordinates(parent, values.T)[:-1]])
        assert float(((got - t) ** 2).sum()) == pytest.approx(best, abs=1e-9)
        checked += 1
    assert checked >= 20


def test_the_approximate_cumulative_mechanism_solves_its_second_stage_under_constraints():
    rng = np.random.default_rng(8)
    checked = 0
    for data, c, plain, points in _solvable(rng, 100):
        s_noisy = np.cumsum(data.by_size, axis=0) + rng.integers(-2, 3, data.by_size.shape)
        # its targets, recomputed here: isotonic regression per region, clipped at 0, rounded half up, differenced
        iso = np.stack([np.maximum(isotonic_regression(s_noisy[:, r].astype(float)).x, 0.0)
                        for r in range(data.n_regions)], axis=1)
        cum = np.floor(iso + 0.5)
        targets = np.diff(cum, axis=0, prepend=0)
        best = min(float(((h - targets.T) ** 2).sum()) for h in points)
        values, info = CumulativeDynProg(epsilon=1, constraints=c).post_process(data, s_noisy)
        assert info["objective"] == pytest.approx(best, abs=1e-9) and plain.holds(values.T)
        checked += 1
    assert checked >= 15


# ---------------------------------------------------------------------------------- releases
def _data() -> CountOfCounts:
    rng = np.random.default_rng(3)
    regions = hierdp.Hierarchy.from_edges([("N", "A"), ("N", "B")] + [(p, f"{p}{i}") for p in "AB" for i in range(3)])
    return CountOfCounts.from_histograms(regions, rng.integers(0, 30, size=(6, 5)), K=5)


def _set() -> Constraints:
    return (Constraints().add_zero("A0", cells=[5], name="no size 5 in A0")
            .add_linear({"A1": 1, "B1": 1}, cells=[1], upper=20, name="size-1 cap")
            .add_cell_rule({2: 1, 3: -1}, lower=0, levels=["level2"], name="2 at least 3")
            .add_bounds("B", cells=[4, 5], lower=40, name="B large"))


MECHS = {
    "pgsr_mdp": lambda **k: MDynProg(epsilon=1.0, **k),
    "pgsr_mh": lambda **k: MH(epsilon=1.0, **k),
    "pgsr_mhc": lambda **k: MHC(epsilon=1.0, **k),
    "pgsr_cumulative_dp": lambda **k: CumulativeDynProg(epsilon=1.0, **k),
    "pgsr_chain_dp": lambda **k: ChainDynProg(epsilon=1.0, **k),
    "pgsr_topdown": lambda **k: GroupSizeTopDown(epsilon=1.0, **k),
}


class _Recording:
    """Wraps the geometric noise to keep every draw."""

    def __init__(self, inner):
        self.inner, self.draws = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def draw(self, *args, **kwargs):
        out = self.inner.draw(*args, **kwargs)
        self.draws.append(np.array(out))
        return out


@pytest.mark.parametrize("name", list(MECHS))
def test_releases_hold_every_entry_with_the_noise_ledger_and_guarantee_of_the_release_without_them(name, monkeypatch):
    data, c = _data(), _set()
    rec = _Recording(pgsr_base.GEOMETRIC)
    monkeypatch.setattr(pgsr_base, "GEOMETRIC", rec)
    rel = MECHS[name](constraints=c).release(data, seed=4)
    with_rows = list(rec.draws)
    rec.draws.clear()
    base = MECHS[name]().release(data, seed=4)
    if name != "pgsr_topdown":  # the TopDown engine draws through its own noise model (same seed: same draws)
        assert len(with_rows) == data.n_levels
        assert all(np.array_equal(a, b) for a, b in zip(with_rows, rec.draws, strict=True))
    # every entry holds, checked here by loops over the released histograms
    v = rel.values  # (n_regions, K)
    idx = {str(n): i for i, n in enumerate(data.regions.names)}
    assert v[idx["A0"], 4] == 0
    assert v[idx["A1"], 0] + v[idx["B1"], 0] <= 20
    assert all(v[idx[r], 1] >= v[idx[r], 2] for r in ("A0", "A1", "A2", "B0", "B1", "B2"))
    assert v[idx["B"], 3] + v[idx["B"], 4] >= 40
    assert rel.count_violations() == 0 and (v >= 0).all() and v[0].sum() == data.G
    # the same ledger and guarantee
    assert [(s.label, s.budget, s.details.get("scale")) for s in rel.accounting.spends] == \
        [(s.label, s.budget, s.details.get("scale")) for s in base.accounting.spends]
    assert rel.accounting.guarantees == base.accounting.guarantees and rel.accounting.total == base.accounting.total
    # stated as the TopDown family states it
    d = rel.accounting.details["constraints"]
    assert d["sha256"] == c.digest() and d["entries"] == 4 and d["relaxations"] == [] and d["feasibility_checked"]
    assert {"sha256", "entries", "kinds", "records", "on_infeasible", "relaxations", "feasibility_checked",
            "resolve_s"} <= set(d)
    assert sum(n.startswith("post-processed under public constraints (4 entries") for n in rel.accounting.notes) == 1
    assert rel.params["constraints"] == c.digest()


def test_the_accounting_is_stated_by_the_same_code_as_the_topdown_family():
    tree = hierdp.Hierarchy.from_edges([("R", "A"), ("R", "B")], counts={"A": 5, "B": 7})
    td = InfTDA(epsilon=1.0, delta=1e-8, constraints=Constraints().add_bounds("A", upper=9)).release(tree, seed=0)
    gs = MDynProg(epsilon=1.0, constraints=_set()).release(_data(), seed=0)
    common = {"sha256", "entries", "kinds", "records", "on_infeasible", "relaxations", "feasibility_checked",
              "resolve_s"}
    assert common <= set(td.accounting.details["constraints"]) and common <= set(gs.accounting.details["constraints"])
    note = next(n for n in gs.accounting.notes if n.startswith("post-processed under public constraints"))
    assert note.endswith("; the noise and the ledger are the mechanism's own")


def test_the_accounting_does_not_depend_on_the_private_histograms():
    """Neighbouring datasets (one person added to an existing group): the stated constraints are equal."""
    data = _data()
    by_size = data.by_size.copy()
    leaf = int(np.flatnonzero(data.regions.n_children == 0)[0])
    k = int(np.flatnonzero(by_size[:-1, leaf] > 0)[0])
    h = data.h[np.flatnonzero(data.regions.n_children == 0)].copy()
    h[0, k] -= 1
    h[0, k + 1] += 1
    neighbour = CountOfCounts.from_histograms(data.regions, h, K=data.K)
    assert np.array_equal(neighbour.group_totals, data.group_totals)
    for make in (MECHS["pgsr_mdp"], MECHS["pgsr_topdown"]):
        a = make(constraints=_set()).release(data, seed=1).accounting
        b = make(constraints=_set()).release(neighbour, seed=1).accounting
        da, db = dict(a.details["constraints"]), dict(b.details["constraints"])
        da.pop("resolve_s"), db.pop("resolve_s")
        assert da == db
        assert [n for n in a.notes if "constraints" in n] == [n for n in b.notes if "constraints" in n]


def test_rows_over_sizes_hold_at_every_level_of_the_topdown_baseline():
    """A cell rule in every leaf region is carried to every coarser region (summed), so TopDown's
    level-by-level solve cannot strand a finer level."""
    rng = np.random.default_rng(9)
    for seed in range(6):
        data = random_count_of_counts(rng, depth=2, max_fanout=3, K=4, max_groups_per_leaf=8)
        c = Constraints().add_cell_rule({1: 1, 2: -1}, lower=0, levels=[data.regions.level_names[-1]], name="rule")
        rel = GroupSizeTopDown(epsilon=0.5, constraints=c).release(data, seed=seed)
        leaves = data.regions.level == data.n_levels - 1
        assert (rel.values[leaves, 0] >= rel.values[leaves, 1]).all()
        assert rel.count_violations() == 0


# ---------------------------------------------------------------------------------- refusals before noise
class _NoNoise:
    def __getattr__(self, name):
        raise AssertionError("noise was drawn")


@pytest.mark.parametrize("entry, match", [
    (lambda c: c.add_zero("Z9", cells=[1]), "unknown node 'Z9'"),
    (lambda c: c.add_zero("A0", cells=[6]), "unknown size 6"),
    (lambda c: c.add_bounds("A0", cells=[1], upper=2.5), "not an integer"),
    (lambda c: c.add_cell_rule({1: 1}, upper=3, levels=["county"]), "unknown level 'county'"),
    (lambda c: c.add_bounds("N", lower=10_000), "cannot hold"),
    (lambda c: c.add_zero("A0", cells=[1]).add_bounds("A0", cells=[1], lower=1), "cannot all hold"),
])
def test_bad_sets_are_refused_before_any_noise(entry, match, monkeypatch):
    monkeypatch.setattr(pgsr_base, "GEOMETRIC", _NoNoise())
    acct = Accountant(Budget.pure(1.0))
    with pytest.raises(ConstraintError, match=match):
        MDynProg(epsilon=1.0, constraints=entry(Constraints())).release(_data(), seed=0, accountant=acct)
    assert acct.spent.is_zero


def test_region_totals_make_a_zero_region_infeasible_before_noise(monkeypatch):
    monkeypatch.setattr(pgsr_base, "GEOMETRIC", _NoNoise())
    c = Constraints().add_zero("A0", name="empty A0")
    with pytest.raises(ConstraintsInfeasible, match="group totals") as info:
        MH(epsilon=1.0, region_totals_public=True, constraints=c).release(_data(), seed=0)
    assert info.value.entries == ("empty A0",)


def test_options_that_cannot_honour_rows_are_refused_when_built():
    c = _set()
    with pytest.raises(MechanismParameterError, match="rounds per cell"):
        MH(epsilon=1.0, relaxed=True, constraints=c)
    with pytest.raises(MechanismParameterError, match="rounds per cell"):
        MHC(epsilon=1.0, relaxed=True, constraints=c)
    with pytest.raises(MechanismParameterError, match="cannot honour constraint rows"):
        MDynProg(epsilon=1.0, constraints=c, constraint_solver="costtable")
    with pytest.raises(MechanismParameterError, match="only with constraints"):
        MDynProg(epsilon=1.0, constraint_solver="highs")
    with pytest.raises(MechanismParameterError, match="constraints must be"):
        MDynProg(epsilon=1.0, constraints=3)


def test_bounds_alone_stay_with_the_cost_tables_and_rows_go_to_a_general_solver():
    data = _data()
    only_bounds = Constraints().add_zero("A0", cells=[5]).add_bounds("B1", cells=[2], upper=3)
    rel = MDynProg(epsilon=1.0, constraints=only_bounds).release(data, seed=2)
    assert rel.params["constraint_solver"] == "costtable" and rel.solver == "costtable"
    rel = MDynProg(epsilon=1.0, constraints=_set()).release(data, seed=2)
    assert rel.params["constraint_solver"] in ("highs", "ortools")


def test_a_constraint_file_names_regions_and_sizes(tmp_path):
    path = tmp_path / "sizes.jsonl"
    path.write_text('{"kind": "zero", "name": "no 5", "node": "A0", "cells": [5]}\n'
                    '{"kind": "cell_rule", "name": "rule", "terms": {"2": 1, "3": -1}, "lower": 0, '
                    '"levels": ["level2"]}\n'
                    '{"kind": "linear", "name": "cap", "terms": {"A1": 1, "B1": 1}, "cells": [1], "upper": 20}\n',
                    encoding="utf-8")
    rel = MDynProg(epsilon=1.0, constraints=str(path)).release(_data(), seed=0)
    c = Constraints.read(path)
    assert Constraints.read(c.write(tmp_path / "again.jsonl")) == c
    b = GroupSizeConstraints.bind(c, _data())
    assert b.check(rel.values.T) == []
    a0 = list(rel.names).index("A0")
    assert rel.values[a0, 4] == 0


def test_a_solver_the_user_named_is_kept_and_refused_before_noise_when_it_cannot_take_the_problem(monkeypatch):
    regions = hierdp.Hierarchy.from_edges([("N", "A"), ("N", "B"), ("A", "A0"), ("A", "A1"), ("B", "B0")])
    data = CountOfCounts.from_histograms(regions, [[4000, 3000, 2500], [3500, 2000, 1000], [5000, 1200, 900]], K=3)
    c = Constraints().add_linear({"A0": 1, "B0": 1}, cells=[1], upper=8_000, name="cap")
    monkeypatch.setattr(pgsr_base, "GEOMETRIC", _NoNoise())
    with pytest.raises(MechanismParameterError, match="ortools cannot solve the constrained problem: CP-SAT"):
        MH(epsilon=1.0, solver="ortools", constraints=c).release(data, seed=0)
    monkeypatch.undo()
    rel = MH(epsilon=1.0, constraints=c).release(data, seed=0)  # the default gives way to an exact plug-in
    assert rel.params["constraint_solver"] == rel.solver == "highs"
    v = rel.values
    assert v[list(rel.names).index("A0"), 0] + v[list(rel.names).index("B0"), 0] <= 8_000
