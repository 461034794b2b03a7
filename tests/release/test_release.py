"""The release protocol and typed accounting: invariants checked exactly (Python integers as the
oracle), the accounting rendered from its spends, what each release promises."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms import create
from hierdp.mechanisms.safetab import PopulationGroupLevel
from hierdp.privacy.budget import Budget
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import Accounting, BaseRelease, ReleaseLevel, Spend, TableRelease, TreeRelease


#: the accounting of the hand-built releases below (what they spent does not matter there)
_ACC = Accounting(mechanism="hand", total=Budget.zcdp(1.0))


def _levels(root: int, kids: list[int]) -> list[ReleaseLevel]:
    return [ReleaseLevel(np.array([0]), np.array([-1]), np.array([root], np.int64)),
            ReleaseLevel(np.arange(len(kids)), np.zeros(len(kids), np.int64), np.array(kids, np.int64))]


def test_consistency_is_exact_beyond_float_precision():
    big = 2 ** 62
    ok = TreeRelease(_levels(big + 1, [big, 1]), ["t", "c"], "hand", None, _ACC, [0.0, 0.0])
    assert ok.check_consistency() == []
    # off by one at 2^62: equal in float64 (the sum rounds), different in integers
    assert float(big) + 1.0 == float(big)
    off = TreeRelease(_levels(big + 1, [big, 2]), ["t", "c"], "hand", None, _ACC, [0.0, 0.0])
    (msg,) = off.check_consistency()
    assert f"value {big + 1} but children sum to {big + 2}" in msg


def test_negative_values_break_a_tree_that_promises_non_negativity():
    rel = TreeRelease(_levels(3, [5, -2]), ["t", "c"], "hand", None, _ACC, [0.0, 0.0])
    assert rel.check_consistency() == ["level 1: negative values"]
    raw = TreeRelease(_levels(3, [5, -2]), ["t", "c"], "hand", None, _ACC, [0.0, 0.0], nonnegative=False)
    assert raw.check_consistency() == []


def _acc(total: Budget, spends: tuple[Spend, ...] = (), **kw) -> Accounting:
    return Accounting(mechanism="hand", total=total, unit=PrivacyUnit(contributions=2), delta=1e-8, spends=spends,
                      **kw)


def test_accounting_lines_are_rendered_from_the_spends_only():
    total = Budget.zcdp(0.3)
    parts = total.split_uniform(3)
    spends = (Spend("level 1 (c)", parts[0], {"sigma2": 2.5, "noise": "discrete_gaussian"}),
              Spend("level 2 (leaf)", parts[1], {"scale": 4.0, "note": "per node"}),
              Spend("level 3", parts[2]))
    acc = _acc(total, spends, details={"split": "uniform over 3 parts", "anything": [1, 2]})
    rel = TreeRelease(_levels(3, [1, 2]), ["t", "c"], "hand", None, acc, [0.0, 0.0])
    assert isinstance(rel, BaseRelease) and rel.guarantee == acc.text()
    # the lines, written out by hand: label padded to the longest, budget, noise parameter, note
    assert rel.accounting_text().splitlines() == [
        "mechanism: hand", f"guarantee: {acc.text()}",
        "  level 1 (c)     rho=0.1 sigma2=2.5",
        "  level 2 (leaf)  rho=0.1 scale=4 per node",
        "  level 3         rho=0.1"]


def test_accounting_adds_up_its_spends_and_converts():
    total = Budget.zcdp(0.3)
    parts = total.split_uniform(3)
    acc = _acc(total, tuple(Spend(f"level {i}", p, {"sigma2": 1.0}) for i, p in enumerate(parts, 1)),
               details={"split": "uniform over 3 parts"})
    assert acc.spent == total and acc.calculus == "zcdp" and acc.unit.contributions == 2 and acc.unit.bounded
    # the analytic conversion rho + 2 sqrt(rho log(1/delta)) (closed form: ulps)
    analytic = next(g for g in acc.guarantees if g.calculus == "approx" and g.method.startswith("zCDP, analytic"))
    assert analytic.parameters["epsilon"] == pytest.approx(0.3 + 2 * np.sqrt(0.3 * np.log(1e8)), rel=1e-13)
    assert acc.guarantee("zcdp").parameters["rho"] == pytest.approx(0.3, rel=1e-15)
    assert acc.rdp(np.array([2.0, 4.0])).tolist() == [0.6, 1.2]  # rho * alpha
    assert list(acc.spends_frame()["part"]) == ["level 1", "level 2", "level 3"]
    assert not hasattr(acc, "legacy") and not hasattr(acc, "__getitem__")  # no untyped dict view
    with pytest.raises(ValueError, match="calculus"):
        acc.guarantee("renyi")


def _safetab_release(**kw):
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 400), "age": rng.integers(0, 95, 400)})
    pairs = pd.DataFrame({"record": df.index, "group": rng.choice(["a", "b", "c"], 400)})
    levels = [PopulationGroupLevel("L", 50.0, 1, pairs, universe=["a", "b", "c"], total_only=["c"])]
    return create("safetab", levels=levels, sex_values=["F", "M"], thresholds=(10, 100, 1000), **kw).release(df, seed=0)


def test_a_table_release_checks_what_it_promises():
    rel = _safetab_release()
    assert isinstance(rel, TableRelease) and rel.check_consistency() == []
    assert rel.to_frame() is rel.frame
    # drop one Sex x Age cell of a group: the cell set is incomplete
    f = rel.frame
    adaptive = f[f["tabulation"].astype(str).str.startswith("sex_")]
    broken = type(rel)(**{**rel.__dict__, "frame": f.drop(index=adaptive.index[0])})
    (msg,) = broken.check_consistency()
    assert "cells, expected" in msg
    # a group given two tabulations
    two = f.copy()
    two["tabulation"] = two["tabulation"].astype(str)
    two.loc[adaptive.index[0], "tabulation"] = "total"
    assert any("more than one tabulation" in m for m in type(rel)(**{**rel.__dict__, "frame": two}).check_consistency())
    # non-integer counts
    floaty = f.assign(noisy_count=f["noisy_count"].astype(float))
    assert "not integer" in type(rel)(**{**rel.__dict__, "frame": floaty}).check_consistency()[0]


def test_vanilla_gauss_says_its_values_are_raw_or_clamps_them():
    df = pd.DataFrame({"a": np.repeat(np.arange(20), 10), "b": np.arange(200), "n": 0})
    df.loc[0, "n"] = 1
    from hierdp.hierarchy import Hierarchy

    h = Hierarchy.from_frame(df, levels=["a", "b"], count="n", observed_domain_public=True)
    raw = create("vanilla", rho=0.5).release(h, seed=0)
    assert (raw.levels[-1].values < 0).any() and raw.check_consistency() == []
    assert "can be negative" in raw.guarantee and "released total is noisy" in raw.guarantee
    clamped = create("vanilla", rho=0.5, clamp=True).release(h, seed=0)
    assert all((lv.values >= 0).all() for lv in clamped.levels) and clamped.check_consistency() == []
    assert "post-processing" in clamped.guarantee
    # clamping is post-processing of the same noise: each clamped leaf is max(raw leaf, 0)
    raw_leaf = dict(zip(raw.levels[-1].keys.tolist(), raw.levels[-1].values.tolist(), strict=False))
    for k, v in zip(clamped.levels[-1].keys.tolist(), clamped.levels[-1].values.tolist(), strict=False):
        assert v == max(raw_leaf[k], 0)
