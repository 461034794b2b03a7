"""SafeTab as a mechanism of the shared contract: the class and the one-call function agree, and a
caller's accountant is charged per level in its own calculus (the amounts recomputed here with exact
fractions from paper 004's composition), or once for an (epsilon, delta) accountant."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTab, SafeTabError
from hierdp.privacy.budget import Accountant, Budget


def _data():
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 500), "age": rng.integers(0, 95, 500)})
    g = rng.choice(["a", "b", "c"], 500)
    one = pd.DataFrame({"record": df.index, "group": g})
    two = pd.concat([one, one.assign(group="all")], ignore_index=True)  # stability 2
    levels = [PopulationGroupLevel("one", 0.8, 1, one, universe=["a", "b", "c"], total_only=["c"]),
              PopulationGroupLevel("two", 1.2, 2, two, universe=["a", "b", "c", "all"], total_only=True)]
    return df, levels


def test_the_class_and_the_function_are_one_mechanism():
    df, levels = _data()
    a = SafeTab(levels, sex_values=["F", "M"]).release(df, seed=3)
    b = SafeTab(levels, sex_values=["F", "M"]).release(df, seed=3)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert a.accounting.text() == b.accounting.text()
    assert [s.label for s in a.accounting.spends] == ["level one", "level two"]


def test_a_zcdp_accountant_is_charged_each_levels_per_count_composition():
    df, levels = _data()
    acct = Accountant(Budget.zcdp(10.0))
    SafeTab(levels, sex_values=["F", "M"], gamma=0.1).release(df, seed=0, accountant=acct)
    g = Fraction(0.1)
    # level "one": adaptive and TotalOnly groups, stability 1, b = 0.8: worst of the two branches
    b1 = Fraction(0.8)
    one = max(((g * b1) ** 2 + ((1 - g) * b1) ** 2) / 2, b1 ** 2 / 2)
    # level "two": TotalOnly only, stability 2, b = 1.2 / 2
    b2 = Fraction(1.2) / 2
    two = 2 * b2 ** 2 / 2
    assert [amount.exact_parameters["rho"] for _, amount in acct.ledger] == [one, two]


def test_an_approx_accountant_is_charged_the_best_epsilon_once():
    df, levels = _data()
    acct = Accountant(Budget.approx(5.0, 1e-6))
    rel = SafeTab(levels, sex_values=["F", "M"], delta=1e-9).release(df, seed=0, accountant=acct)
    (label, amount), = acct.ledger
    assert label == "SafeTab (whole release)"
    assert amount.epsilon == rel.accounting.best_epsilon and amount.delta == 1e-9


def test_repetitions_cannot_be_charged_to_an_accountant():
    df, levels = _data()
    acct = Accountant(Budget.pure(100.0))
    with pytest.raises(SafeTabError, match="repetitions"):
        SafeTab(levels, sex_values=["F", "M"], repetitions=3).release(df, seed=0, accountant=acct)
    assert acct.spent.is_zero
    rel = SafeTab(levels, sex_values=["F", "M"], repetitions=3).release(df, seed=0)
    assert rel.frame["run"].nunique() == 3 and "repetitions=3" in rel.guarantee
