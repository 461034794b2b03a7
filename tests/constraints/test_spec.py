"""hierdp.Constraints: entries are checked when stated, names are unique, files round-trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hierdp
from hierdp.constraints import ByLevels, ConstraintError, Constraints


def test_public_name_and_chaining():
    assert hierdp.Constraints is Constraints
    c = (Constraints().add_linear({"IL/COOK": 1, "IN/LAKE": 1}, upper=5_850_000, name="cap")
         .add_bounds(("IL", "LAKE"), lower=500_000).add_zero("WI/MENOMINEE").add_invariant("IL", 11_430_602)
         .add_cell_rule({"gq_persons": 1, "gq_facilities": -1}, lower=0, levels=["block"]))
    assert [e.kind for e in c] == ["linear", "bounds", "zero", "invariant", "cell_rule"]
    assert c["cap"].upper == 5_850_000 and c["cap"].lower is None
    assert c.entries[1].node == ("IL", "LAKE")
    assert c.has_cells and len(c.cell_rules) == 1


@pytest.mark.parametrize("bad, match", [
    (lambda c: c.add_linear({"a": 1}, upper=float("nan")), "NaN"),
    (lambda c: c.add_linear({"a": 1}, upper=float("inf")), "infinite"),
    (lambda c: c.add_linear({"a": 1}, upper=True), "must be a number"),
    (lambda c: c.add_linear({"a": 1}, lower=5, upper=4), "lower bound 5 > upper bound 4"),
    (lambda c: c.add_linear({"a": 1}), "give a lower or an upper bound"),
    (lambda c: c.add_linear({"a": 0, "b": 1}, upper=1), "coefficient of a is 0"),
    (lambda c: c.add_linear({"a": float("nan")}, upper=1), "NaN"),
    (lambda c: c.add_linear([("a", 1), ("a", 2)], upper=1), "appears twice"),
    (lambda c: c.add_linear({}, upper=1), "at least one term"),
    (lambda c: c.add_linear("a", upper=1), "terms must be a mapping"),
    (lambda c: c.add_bounds(None, upper=1), "not a node name"),
    (lambda c: c.add_bounds((), upper=1), "empty tuple"),
    (lambda c: c.add_bounds({}, upper=1), "at least one column"),
    (lambda c: c.add_invariant("a", float("nan")), "NaN"),
    (lambda c: c.add_zero("a", cells=[]), "empty list of cells"),
    (lambda c: c.add_cell_rule({"x": 1}, lower=0), "either levels= or nodes="),
    (lambda c: c.add_cell_rule({"x": 1}, lower=0, levels=["block"], nodes=["a"]), "either levels= or nodes="),
    (lambda c: c.add_linear({"a": 1}, upper=1, name=""), "non-empty string"),
])
def test_bad_entries_are_refused_when_stated(bad, match):
    c = Constraints()
    with pytest.raises(ConstraintError, match=match):
        bad(c)
    assert len(c) == 0  # nothing half-added


def test_names_are_unique_and_defaults_never_collide():
    c = Constraints().add_linear({"a": 1}, upper=1, name="cap")
    with pytest.raises(ConstraintError, match="duplicate name 'cap'"):
        c.add_bounds("b", upper=3, name="cap")
    c.add_bounds("b", upper=3, name="bounds 2")   # the name a default would take
    c.add_bounds("c", upper=3)
    names = [e.name for e in c]
    assert len(set(names)) == len(names) == 3


def test_numbers_are_normalized_so_sets_compare_equal():
    a = Constraints().add_linear({"x": 1.0, "y": np.int64(2)}, upper=np.float64(5e6), name="r")
    b = Constraints().add_linear({"x": 1, "y": 2}, upper=5_000_000, name="r")
    assert a == b and a.digest() == b.digest()
    assert isinstance(a["r"].upper, int)
    # a non-integral number is kept as it is (refused later, against integer counts)
    assert Constraints().add_linear({"x": 0.5}, upper=1, name="h")["h"].terms[0][1] == 0.5


def test_digest_follows_content_not_where_it_was_read(tmp_path):
    c = Constraints().add_linear({"a": 1, "b": 1}, upper=10, name="r").add_bounds("a", lower=2, name="b")
    d = Constraints().add_linear({"a": 1, "b": 1}, upper=11, name="r").add_bounds("a", lower=2, name="b")
    assert c.digest() != d.digest()
    back = Constraints.read(c.write(tmp_path / "c.jsonl"))
    assert back == c and back.digest() == c.digest()
    assert back["r"].where == "line 2" and c["r"].where is None
    assert len(c.digest()) == 64 and c.summary().startswith("2 entries: 1 linear, 1 bounds; sha256 ")


# ------------------------------------------------------------------ round trip (property)
names = st.text(alphabet="ABCXYZ/ 01-", min_size=1, max_size=6)
refs = st.one_of(names, st.tuples(names, names), st.builds(lambda a, b: {"state": a, "county": b}, names, names),
                 st.integers(0, 99))
coefs = st.integers(-5, 5).filter(bool)
bound = st.one_of(st.none(), st.integers(-10**12, 10**12))


@st.composite
def constraint_sets(draw):
    c = Constraints()
    for i in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["linear", "bounds", "zero", "invariant", "cell_rule"]))
        name = f"e{i}"
        if kind == "linear":
            nodes = draw(st.lists(refs, min_size=1, max_size=4, unique_by=lambda r: json.dumps(r, sort_keys=True)))
            lo, hi = sorted([draw(st.integers(-100, 100)), draw(st.integers(-100, 100))])
            c.add_linear([(n, draw(coefs)) for n in nodes], lower=lo, upper=draw(st.sampled_from([hi, None])),
                         name=name)
        elif kind == "bounds":
            lo = draw(bound)
            hi = draw(st.integers(-10, 10)) if lo is None else draw(st.sampled_from([None, lo + 3]))
            c.add_bounds(draw(refs), lower=lo, upper=hi, name=name)
        elif kind == "zero":
            c.add_zero(draw(refs), cells=draw(st.one_of(st.none(), st.just(["gq", ("a", 1)]))), name=name)
        elif kind == "invariant":
            c.add_invariant(draw(refs), draw(st.integers(0, 10**15)), name=name)
        else:
            c.add_cell_rule({"gq_persons": 1, "gq_units": -1}, lower=0, levels=["block"], name=name)
    return c


@given(constraint_sets())
def test_any_set_round_trips_through_its_file(tmp_path_factory, c):
    path = tmp_path_factory.mktemp("rt") / "c.jsonl"
    back = Constraints.read(c.write(path))
    assert back == c
    assert back.digest() == c.digest()
    for e in back:
        if hasattr(e, "node") and isinstance(e.node, ByLevels):
            assert all(isinstance(k, str) for k, _ in e.node.items)


def test_integral_floats_become_ints_only_when_exact():
    c = Constraints().add_bounds("a", upper=2.0 ** 60, name="big")
    assert c["big"].upper == 2.0 ** 60 and isinstance(c["big"].upper, float)
    assert not math.isnan(c["big"].upper)
