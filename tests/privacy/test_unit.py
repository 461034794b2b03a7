"""The privacy unit: every sensitivity it states is checked by enumerating all neighbouring
datasets of a tiny hierarchy (the oracle never uses the formulas), and bad contributions are refused."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.unit import PrivacyUnit, check_contributions

# a tiny geography: root -> {A, B} -> {A1, A2, A3} / {B1, B2, B3}; a person's records sit in finest
# cells (three leaves per parent, so that m <= 3 distinct records can all share one parent)
LEAVES = ["A1", "A2", "A3", "B1", "B2", "B3"]
PARENT = {leaf: leaf[0] for leaf in LEAVES}


def _histograms(records: tuple[str, ...]) -> dict[int, dict[str, int]]:
    """Per level (0 root, 1 middle, 2 finest) the counts one person's records add."""
    out: dict[int, dict[str, int]] = {0: {}, 1: {}, 2: {}}
    for r in records:
        for lev, key in ((0, "root"), (1, PARENT[r]), (2, r)):
            out[lev][key] = out[lev].get(key, 0) + 1
    return out


def _persons(m: int, distinct: bool) -> list[tuple[str, ...]]:
    """Every possible person with exactly m records (distinct finest cells if ``distinct``)."""
    if distinct:
        return list(itertools.combinations(LEAVES, m))
    return list(itertools.combinations_with_replacement(LEAVES, m))


def _diff_norms(a: dict[str, int], b: dict[str, int]) -> tuple[int, int, int]:
    keys = set(a) | set(b)
    d = [a.get(k, 0) - b.get(k, 0) for k in keys]
    return sum(x * x for x in d), sum(abs(x) for x in d), max((abs(x) for x in d), default=0)


def _enumerated_sensitivities(bounded: bool, m: int, distinct: bool) -> dict[int, tuple[int, int, int]]:
    """max over neighbouring datasets of (L2², L1, L∞) of each level's histogram change.

    A neighbour differs in one person: unbounded adds (or removes) a person with up to m records;
    bounded replaces a person's m records by another person's m records (n stays fixed). Only the
    changed person matters, so enumerating persons enumerates neighbours."""
    best = {lev: (0, 0, 0) for lev in range(3)}
    if bounded:
        pairs = [(_histograms(p), _histograms(q)) for p in _persons(m, distinct) for q in _persons(m, distinct)]
    else:
        pairs = [(_histograms(p), {0: {}, 1: {}, 2: {}})
                 for k in range(1, m + 1) for p in _persons(k, distinct)]
    for hp, hq in pairs:
        for lev in range(3):
            best[lev] = tuple(max(x, y) for x, y in zip(best[lev], _diff_norms(hp[lev], hq[lev]), strict=False))  # type: ignore[assignment]
    return best


@pytest.mark.parametrize("bounded", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("distinct", [False, True])
def test_sensitivities_equal_the_enumerated_worst_case(bounded, m, distinct):
    unit = PrivacyUnit(bounded=bounded, contributions=m, distinct=distinct)
    worst = _enumerated_sensitivities(bounded, m, distinct)
    finest, middle = worst[2], worst[1]
    assert unit.l2_sensitivity_sq(finest=True) == finest[0]
    assert unit.l2_sensitivity_sq(finest=False) == middle[0]
    assert unit.l1_sensitivity() == finest[1] == middle[1]
    assert unit.linf_sensitivity(finest=True) == finest[2]
    assert unit.linf_sensitivity(finest=False) == middle[2]
    # the total number of records: public (bounded) or changed by up to m (unbounded)
    assert unit.count_sensitivity() == worst[0][1]


def test_paper_000_undercounts_coarser_levels_for_distinct_pairs():
    """Paper 000 §4.1 states sqrt(2m) at every level for distinct pairs; the enumeration shows a
    coarser level reaches 2m² (two distinct finest cells share a parent)."""
    worst = _enumerated_sensitivities(True, 2, True)
    assert worst[1][0] == 8 > 2 * 2
    assert math.isclose(PrivacyUnit(True, 2, True).l2_sensitivity(finest=False), math.sqrt(8))


@pytest.mark.parametrize("bad", [2.7, 0, -1, 0.0, float("nan"), float("inf"), True, "2", None, 1.5])
def test_non_integer_contributions_are_refused(bad):
    with pytest.raises(PrivacyParameterError, match="contributions"):
        PrivacyUnit(contributions=bad)
    with pytest.raises(PrivacyParameterError, match="contributions"):
        check_contributions(bad)


def test_integral_values_are_accepted():
    assert PrivacyUnit(contributions=2.0).contributions == 2
    assert PrivacyUnit(contributions=np.int64(3)).contributions == 3
    assert isinstance(PrivacyUnit(contributions=np.float64(4.0)).contributions, int)


@pytest.mark.parametrize("field", ["bounded", "distinct"])
@pytest.mark.parametrize("bad", ["yes", 2, None, 0.5])
def test_flags_must_be_booleans(field, bad):
    with pytest.raises(PrivacyParameterError, match=field):
        PrivacyUnit(**{field: bad})


def test_resolve_and_words():
    u = PrivacyUnit.resolve(None, bounded=False, contributions=2, distinct=True)
    assert u == PrivacyUnit(False, 2, True)
    assert PrivacyUnit.resolve(u) is u
    with pytest.raises(PrivacyParameterError, match="not both"):
        PrivacyUnit.resolve(u, contributions=3)
    assert PrivacyUnit().describe() == "bounded neighbours (n public), m=1 records per person"
    assert PrivacyUnit(False, 3, True, record="trip").describe() == "unbounded neighbours, m=3 distinct trips per person"
