"""One checked count conversion on every path (issue 7, items 3 and 8): exact, int64-bounded,
culprit named. Oracles: Python integers (exact, unbounded) and hand-written expectations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hierdp.hierarchy import CountError, Hierarchy, ODTree
from hierdp.hierarchy.counts import checked_total, parse_count_text

INT64_MAX = 2**63 - 1
GEO = pd.DataFrame({"zone": ["z1", "z1", "z2"], "area": ["a", "b", "c"]})


# ------------------------------------------------------------------ text cells
@given(st.lists(st.integers(0, INT64_MAX), min_size=1, max_size=30))
def test_text_counts_are_exact_up_to_int64(values) -> None:
    text = [str(v) for v in values]
    assert parse_count_text(text, range(len(text)), column="n").tolist() == values


@pytest.mark.parametrize("text, value", [("12", 12), ("+12", 12), (" 7 ", 7), ("12.0", 12), ("1e3", 1000),
                                         ("9007199254740993", 2**53 + 1), (str(INT64_MAX), INT64_MAX),
                                         ("0", 0), ("-0", 0)])
def test_text_count_forms(text, value) -> None:
    assert parse_count_text(["1", text], ["r0", "r1"], column="n").tolist() == [1, value]


@pytest.mark.parametrize("text, what", [("abc", "non-numeric count 'abc'"), ("", "missing count ''"),
                                        ("-3", "negative count '-3'"), ("2.5", "non-integer count '2.5'"),
                                        ("inf", "infinite count 'inf'"), ("nan", r"missing \(NaN\) count 'nan'"),
                                        ("1e20", "out-of-range count '1e20'"),
                                        (str(INT64_MAX + 1), "out-of-range count '9223372036854775808'"),
                                        ("1,350", "non-numeric count '1,350'")])
def test_text_count_errors_name_the_cell(text, what) -> None:
    # the bad cell is the third one; valid cells around it must not be blamed
    with pytest.raises(CountError, match=rf"{what} in column 'n', row 2"):
        parse_count_text(["1350", "4", text, "5"], [0, 1, 2, 3], column="n")


# ------------------------------------------------------------------ totals
def test_checked_total_is_exact_and_refuses_overflow() -> None:
    assert checked_total(np.array([INT64_MAX, 0]), what="x") == INT64_MAX
    big = np.array([2**62, 2**62 - 1, 0], np.int64)
    assert checked_total(big, what="x") == 2**63 - 1  # python-int oracle: the sum fits exactly
    with pytest.raises(CountError, match=r"sum to more than 2\*\*63 - 1, beyond int64") as info:
        checked_total(np.array([2**62, 2**62], np.int64), what="x")
    assert "9223372036854775808" not in str(info.value)  # the (private) total is not quoted


# ------------------------------------------------------------------ O/D path (review C2)
def test_od_counts_beyond_int64_are_refused() -> None:
    trips = pd.DataFrame({"o": ["a", "b"], "d": ["c", "c"], "n": [INT64_MAX, INT64_MAX]})
    with pytest.raises(CountError, match="beyond int64"):
        ODTree.from_trips(trips, origin="o", destination="d", count="n", origin_geo=GEO)
    with pytest.raises(CountError, match=r"count column 'n'.*1e\+20.*row 1"):
        ODTree.from_trips(trips.assign(n=[1.0, 1e20]), origin="o", destination="d", count="n", origin_geo=GEO)
    with pytest.raises(CountError, match=r"count column 'n'.*'abc'.*row 1"):
        ODTree.from_trips(trips.assign(n=[1, "abc"]), origin="o", destination="d", count="n", origin_geo=GEO)


def test_od_counts_stay_exact_beyond_float64() -> None:
    # 2**53 + 1 is not a float64: a float aggregation would lose the unit
    trips = pd.DataFrame({"o": ["a", "a", "b"], "d": ["c", "c", "a"], "n": [2**53 + 1, 2, 1]})
    t = ODTree.from_trips(trips, origin="o", destination="d", count="n", origin_geo=GEO)
    assert t.root_count == 2**53 + 4
    _keys, counts = t.nonzero(t.n_levels - 1)
    assert sorted(int(c) for c in counts) == [1, 2**53 + 3]


def test_from_arrays_filled_totals_cannot_wrap() -> None:
    with pytest.raises(CountError, match="beyond int64"):
        Hierarchy.from_arrays(["r", "a", "b"], [-1, 0, 0], [None, INT64_MAX, 1])
    h = Hierarchy.from_arrays(["r", "a", "b"], [-1, 0, 0], [None, INT64_MAX - 1, 1])
    assert int(h.counts[0]) == INT64_MAX


# ------------------------------------------------------------------ the hidden root name
def test_a_level_value_spelled_total_does_not_clash() -> None:
    df = pd.DataFrame({"kind": ["total", "partial", "total"], "n": [1, 2, 3]})
    h = Hierarchy.from_frame(df, ["kind"], count="n", observed_domain_public=True)
    assert h.names[0] == "(total)" and h.counts[h.index_of("total")] == 4 and h.counts[0] == 6
    with pytest.raises(Exception, match="root_name 'total' is also a value of level column 'kind'"):
        Hierarchy.from_frame(df, ["kind"], count="n", root_name="total")
    geo = pd.DataFrame({"total": ["x", "y"], "area": ["a", "b"]})  # a level column named total
    t = ODTree.from_trips(pd.DataFrame({"o": ["a"], "d": ["b"]}), origin="o", destination="d", origin_geo=geo)
    assert len(set(t.level_names)) == t.n_levels
