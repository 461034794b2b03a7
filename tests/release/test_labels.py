"""Tree outputs agencies can use (issue 20, item 5): one row per node of the declared domain, zeros
included, one column per level, the parent by name; identifiers containing ``/`` kept whole, or
refused naming the separator when two paths would spell one name.

Oracles: the input frames themselves (each row's level values), brute-force sums over the table,
and the domain's size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.errors import MultipleParentsError
from hierdp.mechanisms import create
from hierdp.release.labels import level_columns, strip_parent

DOMAIN = pd.DataFrame({"country": ["CH", "CH", "CH", "IT", "IT", "IT"],
                       "canton": ["BE", "BE", "VD", "BZ", "BZ", "NA"],
                       "city": ["Biel/Bienne", "Bern", "Lausanne", "Bolzano/Bozen", "Meran/Merano", "Capri"]})


def _tree() -> Hierarchy:
    rows = DOMAIN.iloc[[0, 1, 3, 5]].assign(people=[55, 130, 107, 7])
    return Hierarchy.from_frame(rows, levels=["country", "canton", "city"], count="people", domain=DOMAIN)


@pytest.mark.parametrize("name", ["inftda", "tda_l2", "vanilla", "sh"])
def test_every_domain_node_with_its_level_columns_and_parent_name(name: str) -> None:
    tree = _tree()
    params = {"epsilon": 2.0, "delta": 1e-3} if name == "sh" else {"epsilon": 1.0, "delta": 1e-8}
    rel = create(name, **params).release(tree, seed=0)
    f = rel.with_domain(tree).to_frame()
    assert len(f) == tree.n == 1 + 2 + 4 + 6  # every node, the empty cities too
    assert list(f.columns) == ["level", "level_name", "country", "canton", "city", "node", "parent", "key", "value"]
    cities = f[f["level"] == 3]
    want = DOMAIN.sort_values(["country", "canton", "city"]).reset_index(drop=True)
    got = cities[["country", "canton", "city"]].sort_values(["country", "canton", "city"]).reset_index(drop=True)
    assert got.equals(want)  # the input's own values, "/" included
    cantons = f[f["level"] == 2]
    assert (cantons["city"] == "").all() and set(cantons["canton"]) == {"BE", "VD", "BZ", "NA"}
    # the parent by name: each node's parent is the node one level up whose name it names
    up = f.set_index(["level", "node"])["value"]
    for lev in (1, 2, 3):
        kids = f[f["level"] == lev]
        sums = kids.groupby("parent")["value"].sum()
        parents = up.loc[[(lev - 1, p) for p in sums.index]].to_numpy()
        assert np.array_equal(parents, sums.to_numpy())  # every mechanism here releases consistent sums
    assert f.loc[f["level"] == 0, "parent"].tolist() == [""]


def test_values_with_the_separator_that_spell_another_path_are_refused_naming_it() -> None:
    df = pd.DataFrame({"a": ["X", "X/Y"], "b": ["Y/Z", "Z"], "n": [1, 2]})  # both spell "X/Y/Z"
    with pytest.raises(MultipleParentsError, match="join the level values with '/'"):
        Hierarchy.from_frame(df, ["a", "b"], count="n", observed_domain_public=True)


def test_strip_parent_and_level_columns_against_the_paths() -> None:
    names = np.array(["N", "N/Biel/Bienne", "N/Biel/Bienne/x", "S", "free"], dtype=object)
    parents = np.array(["total", "N", "N/Biel/Bienne", "total", "N"], dtype=object)
    assert strip_parent(names, parents).tolist() == ["N", "Biel/Bienne", "x", "S", "free"]
    cols = level_columns(np.array(["total", "N", "N/a/b", "N/a/b/c"], dtype=object), np.array([-1, 0, 1, 2]),
                         np.array([0, 1, 2, 3]), ["total", "region", "level", "city"])
    assert list(cols) == ["region", "level_level", "city"]  # a level named like a frame column is prefixed
    assert cols["region"].tolist() == ["", "N", "N", "N"]
    assert cols["level_level"].tolist() == ["", "", "a/b", "a/b"] and cols["city"].tolist() == ["", "", "", "c"]
