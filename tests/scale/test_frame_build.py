"""The faster frame builder against a plain reference: same nodes, names, parents and counts as a
dictionary-and-sort construction of the tree, on random frames (integers, strings, domains, and
level sizes whose product overflows one int64 key); and LevelTree equals the Hierarchy of the
same frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.builders import frame_structure
from hierdp.scale import LevelTree


def reference_tree(df: pd.DataFrame, levels: list[str], count: str | None, domain: pd.DataFrame | None = None):
    """``(names, parent, counts, level sizes)`` in canonical order, from Python dicts: every path
    prefix is a node, children sorted by their value, levels in order, names "/"-joined."""
    weights = np.ones(len(df), np.int64) if count is None else df[count].to_numpy(np.int64)
    paths = {}
    rows = [tuple(r) for r in df[levels].itertuples(index=False)]
    if domain is not None:
        for r in domain[levels].itertuples(index=False):
            for k in range(1, len(levels) + 1):
                paths.setdefault(tuple(r)[:k], 0)
    for r, w in zip(rows, weights, strict=False):
        for k in range(1, len(levels) + 1):
            paths[r[:k]] = paths.get(r[:k], 0) + int(w)
    order = [[()]]
    for k in range(1, len(levels) + 1):
        prev = {p: i for i, p in enumerate(order[-1])}
        level = sorted((p for p in paths if len(p) == k), key=lambda p: (prev[p[:-1]], p[-1]))
        order.append(level)
    names, parent, counts, index = [], [], [], {}
    for k, level in enumerate(order):
        for p in level:
            index[p] = len(names)
            names.append("total" if k == 0 else "/".join(str(v) for v in p))
            parent.append(-1 if k == 0 else index[p[:-1]])
            counts.append(int(weights.sum()) if k == 0 else paths[p])
    return np.array(names, dtype=object), np.array(parent), np.array(counts), [len(x) for x in order]


def looks_fine_to_coarse(df: pd.DataFrame, levels: list[str], domain: pd.DataFrame | None = None) -> bool:
    """The builder's refusal, brute force: a level k below the first whose values are a many-to-one
    map of level k - 1's values (each value of k - 1 with one value of k, a value of k with
    several of k - 1)."""
    rows = {tuple(r) for r in df[levels].itertuples(index=False)}
    if domain is not None:
        rows |= {tuple(r) for r in domain[levels].itertuples(index=False)}
    for k in range(1, len(levels)):
        with_value: dict = {}
        for r in rows:
            with_value.setdefault(r[k - 1], set()).add(r[k])
        values = {r[k] for r in rows}
        if all(len(v) == 1 for v in with_value.values()) and len(values) < len(with_value):
            return True
    return False


def _check(df, levels, count, domain=None):
    from hierdp.hierarchy import MultipleParentsError

    if looks_fine_to_coarse(df, levels, domain):
        with pytest.raises(MultipleParentsError, match="is coarser than"):
            Hierarchy.from_frame(df, levels, count, domain=domain, observed_domain_public=domain is None)
        with pytest.raises(MultipleParentsError, match="is coarser than"):
            LevelTree.from_frame(df, levels, count, domain=domain, observed_domain_public=domain is None)
        return
    names, parent, counts, sizes = reference_tree(df, levels, count, domain)
    h = Hierarchy.from_frame(df, levels, count, domain=domain) if domain is not None else \
        Hierarchy.from_frame(df, levels, count, observed_domain_public=True)
    assert h.names.tolist() == names.tolist()
    np.testing.assert_array_equal(h.parent, parent)
    np.testing.assert_array_equal(h.counts, counts)
    np.testing.assert_array_equal(np.diff(h.level_ptr), sizes)
    lt = LevelTree.from_frame(df, levels, count, domain=domain, observed_domain_public=domain is None)
    for L in range(h.n_levels):
        keys = np.arange(h.level_ptr[L], h.level_ptr[L + 1])
        assert lt.key_names(L, keys).tolist() == names[keys].tolist()
        np.testing.assert_array_equal(lt.counts(L, keys), counts[keys])
        if h.n_levels > L + 1:
            kids, offsets, _true = lt.expand(L, keys)
            np.testing.assert_array_equal(parent[kids], np.repeat(keys, np.diff(offsets)))
    assert lt.to_hierarchy().names.tolist() == names.tolist()
    assert lt.fingerprint() == LevelTree.from_frame(df, levels, count, domain=domain,
                                                    observed_domain_public=domain is None).fingerprint()


rows = st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["b", "a", "c", "aa"]), st.integers(-3, 30),
                          st.integers(0, 9)), min_size=1, max_size=40)


@settings(max_examples=60)
@given(rows, st.booleans())
def test_the_builder_matches_the_reference(data, shuffled):
    df = pd.DataFrame(data, columns=["g", "s", "i", "n"])
    if shuffled:
        df = df.sample(frac=1.0, random_state=1)
    _check(df, ["g", "s", "i"], "n")
    _check(df, ["s", "g"], None)


def test_a_declared_domain_adds_its_empty_nodes():
    df = pd.DataFrame({"a": [1, 1, 2], "b": ["x", "y", "x"], "n": [3, 0, 4]})
    domain = pd.DataFrame({"a": [1, 1, 2, 2, 3], "b": ["x", "y", "x", "z", "w"]})
    _check(df, ["a", "b"], "n", domain)


def test_levels_whose_sizes_overflow_one_key_are_ranked_level_by_level():
    rng = np.random.default_rng(0)
    m = 3_000  # six levels of ~2,000 distinct values each: the product exceeds 2**62
    df = pd.DataFrame({f"l{k}": rng.integers(0, 2_000, m) for k in range(6)})
    df["n"] = rng.integers(0, 5, m)
    st_ = frame_structure(df, [f"l{k}" for k in range(6)], "n")
    assert st_.level_ptr[-1] > 0
    _check(df, [f"l{k}" for k in range(6)], "n")


def test_sorted_unique_and_duplicated_rows_take_the_fast_paths_with_the_same_result():
    base = pd.DataFrame({"a": [2, 1, 1, 2], "b": [5, 7, 5, 5], "n": [1, 2, 3, 4]})
    for df in (base, base.sort_values(["a", "b"]), pd.concat([base, base])):
        _check(df, ["a", "b"], "n")


def test_wide_integer_ids_and_strings_with_the_separator():
    df = pd.DataFrame({"a": [10 ** 12, 5, 10 ** 12], "b": ["p/q", "r", "s"], "n": [1, 2, 3]})
    _check(df, ["a", "b"], "n")
    bad = pd.DataFrame({"a": ["x/y", "x"], "b": ["z", "y/z"], "n": [1, 1]})
    from hierdp.hierarchy import MultipleParentsError

    with pytest.raises(MultipleParentsError, match="x/y/z"):
        Hierarchy.from_frame(bad, ["a", "b"], "n", observed_domain_public=True)
    with pytest.raises(MultipleParentsError, match="x/y/z"):
        LevelTree.from_frame(bad, ["a", "b"], "n", observed_domain_public=True)
