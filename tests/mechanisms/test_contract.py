"""The shared mechanism contract, asserted for every registered mechanism through the registry:
build → release → frame → consistency → accounting in every calculus; the same seed / secure /
accountant / public-domain / bad-option rules everywhere.

Oracles: the guarantees are recomputed here from the spec with independent formulas (mpmath for the
analytic conversion; ε²/2 for pure → zCDP; SafeTab's per-count composition by hand); the budget the
caller's accountant holds is compared with the release's own total; the generator state proves that
a refusal happened before any noise.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import mpmath
import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy.od import ODTree
from hierdp.mechanisms import MechanismParameterError, create, names
from hierdp.mechanisms.safetab import PopulationGroupLevel
from hierdp.mechanisms.testing import check_mechanism
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.domain import ObservedDomainError
from hierdp.privacy.errors import BudgetExceeded, PrivacyParameterError
from hierdp.release import Accounting, BaseRelease

DELTA = 1e-8


def _tree() -> ODTree:
    rng = np.random.default_rng(4)
    geo = pd.DataFrame({"r": [f"R{i // 3}" for i in range(6)], "m": [f"m{i}" for i in range(6)]})
    trips = pd.DataFrame({"o": rng.choice(geo.m, 400), "d": rng.choice(geo.m[:3], 400)})
    return ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], 300), "age": rng.integers(0, 95, 300),
                         "grp": rng.choice(["a", "b", "c"], 300)})


def _levels(df: pd.DataFrame, budget: float = 1.0) -> list[PopulationGroupLevel]:
    pairs = pd.DataFrame({"record": df.index, "group": df["grp"].to_numpy()})
    return [PopulationGroupLevel("grp", budget, 1, pairs, universe=["a", "b", "c", "d"], total_only=["d"])]


def _groups():
    from hierdp.datasets.group_sizes import random_count_of_counts

    return random_count_of_counts(np.random.default_rng(6), depth=2, max_fanout=3, K=5, max_groups_per_leaf=4)


# name -> (constructor parameters, data); calculus of the accounting
CASES = {
    "inftda": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, "zcdp"),
    "tda_l2": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, "zcdp"),
    "tda_l2_exact": (lambda: {"rho": 0.05, "delta": DELTA, "bounded": False}, _tree, "zcdp"),
    "tda_linf": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, "zcdp"),
    "vanilla": (lambda: {"epsilon": 1.0, "delta": DELTA, "clamp": True}, _tree, "zcdp"),
    "sh": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, "approx"),
    "topdown": (lambda: {"epsilon": 1.0, "delta": DELTA, "noise": "geometric", "objective": "l2"}, _tree, "pure"),
    "safetab": (lambda: {"levels": _levels(_people()), "sex_values": ["F", "M"], "delta": DELTA}, _people, "pure"),
    "census_topdown": (lambda: {"epsilon": 1.0, "delta": DELTA}, lambda: _spine_histograms(), "zcdp"),
    **{name: (lambda: {"epsilon": 1.0, "delta": DELTA}, _groups, "pure")
       for name in ("pgsr_mh", "pgsr_mh_relaxed", "pgsr_mdp", "pgsr_mhc", "pgsr_mhc_relaxed", "pgsr_cumulative_dp",
                    "pgsr_chain_dp", "pgsr_topdown")},
}


def _spine_histograms():
    from hierdp.mechanisms.census import SpineHistograms
    from hierdp.spines import Spine

    rows = pd.DataFrame({"county": ["c1", "c1", "c2"], "block": ["b1", "b2", "b3"]})
    spine = Spine.from_frame(rows, ["county", "block"], ["1/3", "1/3", "1/3"], root="US")
    return SpineHistograms(spine, np.array([[3, 1], [0, 2], [5, 0]]))


from mechanisms.spatial.contract_cases import SPATIAL_CASES

CASES.update(SPATIAL_CASES)
CALCULI = {"zcdp": {"zcdp", "rdp", "approx"}, "pure": {"pure", "zcdp", "rdp", "approx"}, "approx": {"approx"}}


def _analytic(rho: float, delta: float) -> float:
    with mpmath.workdps(40):
        r = mpmath.mpf(rho)
        return float(r + 2 * mpmath.sqrt(r * mpmath.log(1 / mpmath.mpf(delta))))


def test_every_registered_mechanism_has_a_contract_case():
    assert set(names()) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_check_mechanism_passes_for_every_registered_mechanism(name):
    """The public contract check (hierdp.mechanisms.testing), as a third party would run it."""
    params, data, _ = CASES[name]
    check_mechanism(name, params(), data())


@pytest.mark.parametrize("name", list(CASES))
def test_release_frame_consistency_accounting(name):
    params, data, calculus = CASES[name]
    mech = create(name, **params())
    rel = mech.release(data(), seed=0)
    assert isinstance(rel, BaseRelease) and rel.mechanism == mech.name
    frame = rel.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) > 0
    assert rel.check_consistency() == []
    acc = rel.accounting
    assert isinstance(acc, Accounting) and acc.calculus == calculus
    assert acc.total == mech.spec.budget and acc.unit == mech.unit
    assert acc.spent == acc.total  # the spends compose exactly to the total
    assert len(acc.spends) >= 1 and all(s.budget.calculus == calculus for s in acc.spends)
    # the guarantee in every calculus it implies, and none in the others
    have = {g.calculus for g in acc.guarantees if g.valid}
    assert have == CALCULI[calculus]
    for c in ("pure", "zcdp", "rdp", "approx"):
        assert (acc.guarantee(c) is not None) == (c in have)
    if calculus == "zcdp":
        rho = float(acc.total.rho)
        assert acc.guarantee("zcdp").parameters["rho"] == rho
        analytic = next(g for g in acc.guarantees if g.method.startswith("zCDP, analytic"))
        # closed form in doubles vs 40 digits: a few ulps
        assert analytic.parameters["epsilon"] == pytest.approx(_analytic(rho, DELTA), rel=1e-13)
        assert acc.guarantee("approx").parameters["epsilon"] <= analytic.parameters["epsilon"]
    if calculus == "pure":
        eps = float(acc.total.epsilon)
        assert acc.guarantee("pure").parameters["epsilon"] == eps
        assert acc.guarantee("zcdp").parameters["rho"] <= eps * eps / 2
        assert acc.guarantee("approx").parameters["epsilon"] <= eps
    if calculus == "approx":
        assert acc.guarantee("approx").parameters == {"epsilon": 1.0, "delta": DELTA}
    # the same words everywhere: the unit's phrase, and the text in the summary
    assert mech.unit.describe() in rel.guarantee
    text = rel.accounting_text()
    assert text.splitlines()[0].startswith(f"mechanism: {mech.name}") and rel.guarantee in text
    assert len(acc.to_frame()) == len(acc.guarantees) and len(acc.spends_frame()) == len(acc.spends)
    row = acc.as_dict()
    assert row["mechanism"] == mech.name and row["guarantee"] == rel.guarantee


def test_safetab_zcdp_of_a_geometric_release_is_composed_per_count():
    params, data, _ = CASES["safetab"]
    acc = create("safetab", **params()).release(data(), seed=0).accounting
    # one level, stability 1, budget 1, gamma 0.1: adaptive groups spend 0.1 and 0.9, TotalOnly 1;
    # each eps-DP count is eps^2/2-zCDP; the worst branch is the TotalOnly one: 1/2
    assert acc.guarantee("zcdp").parameters["rho"] == pytest.approx(max((0.1 ** 2 + 0.9 ** 2) / 2, 0.5), rel=1e-15)


def _state(rng: np.random.Generator) -> dict:
    return copy.deepcopy(rng.bit_generator.state)


@pytest.mark.parametrize("name", list(CASES))
def test_secure_mode_and_seeds(name):
    params, data, _ = CASES[name]
    d = data()
    with pytest.raises(PrivacyParameterError, match="seed"):
        create(name, **params(), secure=True).release(d, seed=1)
    with pytest.raises(PrivacyParameterError, match="seed"):
        create(name, **params()).release(d, secure=True, seed=1)
    with pytest.raises(PrivacyParameterError, match="rng"):
        create(name, **params(), secure=True).release(d, rng=np.random.default_rng(0))
    with pytest.raises(PrivacyParameterError, match="downgrade"):
        create(name, **params(), secure=True).release(d, secure=False)
    rel = create(name, **params()).release(d, secure=True)  # OS randomness, exact samplers
    assert rel.check_consistency() == []
    assert rel.params["randomness"] == "secure" and rel.accounting.spent == rel.accounting.total
    # seeds make runs reproducible
    a, b = (create(name, **params()).release(d, seed=7) for _ in range(2))
    assert a.params["randomness"] == "seeded"
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())


def _shared_accountant(calculus: str, total: Budget) -> Accountant:
    """Room for exactly two releases of ``total``."""
    if calculus == "approx":
        return Accountant(Budget.approx(2 * total.epsilon, 2 * total.delta))
    return Accountant(2 * total)


@pytest.mark.parametrize("name", list(CASES))
def test_a_callers_accountant_is_charged_before_noise_and_refuses_overspending(name):
    params, data, calculus = CASES[name]
    d = data()
    mech = create(name, **params())
    acct = _shared_accountant(calculus, mech.spec.budget)
    r1 = mech.release(d, seed=1, accountant=acct)
    assert acct.spent == r1.accounting.spent == mech.spec.budget
    assert [label for label, _ in acct.ledger] == [f"{mech.name}: {s.label}" for s in r1.accounting.spends]
    mech.release(d, seed=2, accountant=acct)
    assert acct.spent == 2 * mech.spec.budget if calculus != "approx" else acct.remaining.is_zero
    rng = np.random.default_rng(3)
    before, ledger = _state(rng), acct.ledger
    with pytest.raises(BudgetExceeded):
        mech.release(d, rng=rng, accountant=acct)
    assert _state(rng) == before and acct.ledger == ledger  # refused before any noise, nothing recorded


def test_one_zcdp_accountant_holds_mechanisms_of_different_calculi():
    tree, people = _tree(), _people()
    acct = Accountant(Budget.zcdp(1.0))
    create("inftda", rho=0.3).release(tree, seed=0, accountant=acct)
    create("topdown", epsilon=0.4, noise="geometric").release(tree, seed=0, accountant=acct)
    create("safetab", levels=_levels(people, 0.5), sex_values=["F", "M"]).release(people, seed=0, accountant=acct)
    # pure spends enter a zCDP ledger as eps^2/2 per part (topdown: T levels of 0.4/T each); SafeTab
    # charges its per-count composition (worst branch TotalOnly: 0.5^2/2)
    T = tree.n_levels - 1
    expected = Fraction(0.3) + T * (Fraction(0.4) / T) ** 2 / 2 + Fraction(0.5) ** 2 / 2
    assert acct.spent.exact_parameters["rho"] == expected
    with pytest.raises(PrivacyParameterError, match="pure-DP accountant"):
        create("inftda", rho=0.1).release(tree, seed=0, accountant=Accountant(Budget.pure(5.0)))


def test_an_approx_accountant_is_charged_once_per_release():
    tree = _tree()
    acct = Accountant(Budget.approx(3.0, 1e-6))
    rel = create("inftda", epsilon=1.0, delta=DELTA).release(tree, seed=0, accountant=acct)
    (label, amount), = acct.ledger
    assert label == "InfTDA (whole release)" and amount.delta == DELTA
    assert amount.epsilon == pytest.approx(rel.accounting.guarantee("approx").parameters["epsilon"], rel=1e-12)
    with pytest.raises(PrivacyParameterError, match="delta"):  # no delta to charge a rho at
        create("inftda", rho=0.1).release(tree, seed=0, accountant=acct)


class _Observed:
    """A tree whose nodes were read off the data (a wrapper, until trees carry the attribute)."""

    def __init__(self, tree, assumption=None):
        self._tree = tree
        self.domain_source = "observed"
        self.domain_assumption = assumption

    def __getattr__(self, name):
        return getattr(self._tree, name)


@pytest.mark.parametrize("name", [n for n in CASES if n != "safetab"])
def test_an_observed_domain_is_refused_before_noise_or_stated(name):
    params, data, _ = CASES[name]
    rng = np.random.default_rng(0)
    before = _state(rng)
    with pytest.raises(ObservedDomainError):
        create(name, **params()).release(_Observed(data()), rng=rng)
    assert _state(rng) == before
    said = "the set of nodes observed in the input is assumed public (declared by the user)"
    rel = create(name, **params()).release(_Observed(data(), said), seed=0)
    assert rel.accounting.assumptions == (said,) and rel.guarantee.endswith(f"assumes: {said}")


def test_safetab_domain_is_public_input_or_declared():
    df = _people()
    pairs = pd.DataFrame({"record": df.index, "group": df["grp"].to_numpy()})
    rng = np.random.default_rng(0)
    before = _state(rng)
    no_universe = [PopulationGroupLevel("grp", 1.0, 1, pairs)]
    with pytest.raises(ObservedDomainError, match="level 'grp'"):
        create("safetab", levels=no_universe, sex_values=["F", "M"]).release(df, rng=rng)
    with pytest.raises(ObservedDomainError, match="'sex'"):
        create("safetab", levels=_levels(df)).release(df, rng=rng)  # Sex x Age cells, sex values unknown
    assert _state(rng) == before
    rel = create("safetab", levels=no_universe, observed_domain_public=True).release(df, seed=0)
    (assumption,) = rel.accounting.assumptions
    assert "level 'grp'" in assumption and "'sex'" in assumption and "assumes:" in rel.guarantee
    # TotalOnly groups have no sex cells: the sex values are then not part of the domain
    only_totals = [PopulationGroupLevel("grp", 1.0, 1, pairs, universe=["a", "b", "c"], total_only=True)]
    assert create("safetab", levels=only_totals).release(df, seed=0).accounting.assumptions == ()


@pytest.mark.parametrize("name", [n for n in CASES if n != "safetab"])
def test_non_integer_contributions_are_refused(name):
    params, _, _ = CASES[name]
    with pytest.raises(PrivacyParameterError, match="contributions"):
        create(name, **params(), contributions=2.7)


@pytest.mark.parametrize("name", ["vanilla", "sh", "safetab"])
@pytest.mark.parametrize("option", [{"solver": "highs"}, {"solver_options": {"batch_size": 5}}])
def test_mechanisms_without_a_solver_refuse_one(name, option):
    params, _, _ = CASES[name]
    with pytest.raises(MechanismParameterError, match="does not use a solver"):
        create(name, **params(), **option)
