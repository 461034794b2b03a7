"""``hierdp release`` round trips on tiny files: every layout, every output format, the domain
rule, verbatim identifiers, the randomness line, atomic overwrite.

Oracles: the invariants of a release (root = true total under bounded DP, children sum to their
parent, non-negative integers), the input's own identifiers (read back verbatim), and the
declared domain (nodes of the geography without rows are measured: they appear as keys)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main


def _check_output(out: pd.DataFrame, total: int) -> None:
    assert int(out.loc[out["level"] == 0, "value"].iloc[0]) == total
    assert (out["value"] >= 0).all()
    # children sum to parents (parent by name: the parent's node, one level up)
    child = out[out["level"] > 0]
    sums = child.groupby(["level", "parent"])["value"].sum()
    up = out.assign(level=out["level"] + 1).set_index(["level", "node"])["value"]
    assert np.array_equal(up.loc[sums.index].to_numpy(), sums.to_numpy())


def _read(path) -> pd.DataFrame:
    if str(path).endswith((".parquet", ".pq")):
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype={"node": str, "parent": str, "origin": str, "destination": str},
                       keep_default_na=False)


def test_trips_with_geography_to_csv(tmp_path, capsys) -> None:
    geo = pd.DataFrame({"region": ["N", "N", "S", "S"], "city": ["milano", "torino", "napoli", "bari"]})
    rng = np.random.default_rng(0)
    trips = pd.DataFrame({"from": rng.choice(geo.city[:3], 400), "to": rng.choice(geo.city[:3], 400)})
    geo.to_csv(tmp_path / "geo.csv", index=False)
    trips.to_csv(tmp_path / "trips.csv", index=False)
    code = main(["release", str(tmp_path / "trips.csv"), "-o", str(tmp_path / "out.csv"), "--epsilon", "1",
                 "--delta", "1e-8", "--origin", "from", "--destination", "to", "--geo", str(tmp_path / "geo.csv"),
                 "--seed", "3", "--quiet"])
    assert code == 0
    out = _read(tmp_path / "out.csv")
    _check_output(out, 400)
    assert {"origin", "destination", "origin_level", "destination_level"} <= set(out.columns)
    assert out["level"].max() == 4
    captured = capsys.readouterr()
    assert "zCDP" in captured.out and "per level" in captured.out
    assert "randomness: seeded (reproducible, not for publication), seed 3" in captured.out
    assert "domain: declared by --geo" in captured.out
    assert "warning" in captured.err and "drop --seed" in captured.err


@pytest.mark.parametrize("mech, suffix", [("inftda", ".parquet"), ("tda_l2", ".csv.gz"), ("tda_l2_exact", ".pq"),
                                          ("vanilla", ".csv"), ("sh", ".csv")])
def test_counts_with_declared_domain_every_mechanism_and_format(tmp_path, mech, suffix) -> None:
    df = pd.DataFrame({"state": ["01", "01", "NA", "02"], "county": ["01001", "01003", "NA1", "02001"],
                       "pop": [100, 50, 7, 63]})
    geo = pd.DataFrame({"state": ["01", "01", "01", "NA", "02"], "county": ["01001", "01003", "01005", "NA1", "02001"]})
    df.to_csv(tmp_path / "counts.csv", index=False)
    geo.to_csv(tmp_path / "geo.csv", index=False)
    out_path = tmp_path / f"out{suffix}"
    budget = ["--epsilon", "1"] if mech == "sh" else ["--rho", "1"]
    code = main(["release", str(tmp_path / "counts.csv"), "-o", str(out_path), *budget, "--levels", "state,county",
                 "--count", "pop", "--mechanism", mech, "--seed", "1", "--quiet", "--geo", str(tmp_path / "geo.csv")])
    assert code == 0
    out = _read(out_path)
    if mech not in ("vanilla", "sh"):  # TopDown: root public and consistent, non-negative
        _check_output(out, 220)
    # identifiers verbatim: leading zeros kept, "NA" (Namibia) an id and not a missing value
    names = set(out["node"].astype(str))
    assert names <= {"total", "01", "NA", "02", "01/01001", "01/01003", "01/01005", "NA/NA1", "02/02001"}
    assert "01" in names or "02" in names


def test_declared_domain_node_without_rows_is_measured(tmp_path) -> None:
    # county 01005 has no row; with the domain declared it is a node of the tree, measured like
    # the others, so over many seeds it is sometimes released (noise above 0) -- never when observed
    df = pd.DataFrame({"state": ["01", "01"], "county": ["01001", "01003"], "pop": [3, 2]})
    geo = pd.DataFrame({"state": ["01"] * 3, "county": ["01001", "01003", "01005"]})
    df.to_csv(tmp_path / "c.csv", index=False)
    geo.to_csv(tmp_path / "g.csv", index=False)
    seen = 0
    for seed in range(12):
        out = tmp_path / f"o{seed}.csv"
        assert main(["release", str(tmp_path / "c.csv"), "-o", str(out), "--rho", "0.05", "--levels", "state,county",
                     "--count", "pop", "--geo", str(tmp_path / "g.csv"), "--seed", str(seed), "--quiet"]) == 0
        seen += "01/01005" in set(_read(out)["node"])
    assert seen > 0
    for seed in range(12):
        out = tmp_path / f"p{seed}.csv"
        assert main(["release", str(tmp_path / "c.csv"), "-o", str(out), "--rho", "0.05", "--levels", "state,county",
                     "--count", "pop", "--observed-domain-public", "--seed", str(seed), "--quiet"]) == 0
        assert "01/01005" not in set(_read(out)["node"])


def test_level_layout_with_and_without_geography(tmp_path, capsys) -> None:
    df = pd.DataFrame({"L0_O": 0, "L1_O": [0, 0, 1], "L2_O": [0, 1, 2], "L0_D": 0, "L1_D": [1, 0, 1],
                       "L2_D": [2, 0, 3], "COUNT": [5, 3, 9]})
    df.to_csv(tmp_path / "lv.csv", index=False)
    layout = ["--origin-levels", "L0_O,L1_O,L2_O", "--destination-levels", "L0_D,L1_D,L2_D", "--count", "COUNT"]
    assert main(["release", str(tmp_path / "lv.csv"), "-o", str(tmp_path / "o.csv"), "--epsilon", "2", *layout,
                 "--mechanism", "sh", "--seed", "0", "--quiet", "--observed-domain-public"]) == 0
    assert "assumed public" in capsys.readouterr().out
    # the public geography has an area (4, in zone 1) without any trip: it joins the universe
    geo = pd.DataFrame({"L1": ["0", "0", "1", "1"], "L2": ["0", "1", "2", "4"]})
    bad_geo = pd.DataFrame({"L1": ["0", "0", "1"], "L2": ["0", "1", "2"]})  # area 3 missing
    geo.to_csv(tmp_path / "geo.csv", index=False)
    bad_geo.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["release", str(tmp_path / "lv.csv"), "-o", str(tmp_path / "g.csv"), "--rho", "1", *layout,
                 "--geo", str(tmp_path / "bad.csv"), "--seed", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "row 2 names an area" in err and "'3'" not in err  # the row, not the private area id
    geo.loc[len(geo)] = ["1", "3"]
    geo.to_csv(tmp_path / "geo.csv", index=False)
    assert main(["release", str(tmp_path / "lv.csv"), "-o", str(tmp_path / "g.csv"), "--rho", "1", *layout,
                 "--geo", str(tmp_path / "geo.csv"), "--seed", "0", "--quiet"]) == 0
    _check_output(_read(tmp_path / "g.csv"), 17)


def test_overwrite_replaces_atomically_and_secure_mode_says_so(tmp_path, capsys) -> None:
    src = tmp_path / "counts.csv"
    pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "r"], "n": [3, 4, 5]}).to_csv(src, index=False)
    out = tmp_path / "out.csv.gz"
    args = ["release", str(src), "--levels", "a,b", "--count", "n", "--epsilon", "1", "--quiet", "-o", str(out),
            "--observed-domain-public"]
    assert main([*args, "--seed", "0"]) == 0
    first = out.read_bytes()
    assert main([*args, "--seed", "0"]) == 2 and "--overwrite" in capsys.readouterr().err
    assert out.read_bytes() == first
    assert main([*args, "--secure", "--overwrite"]) == 0
    captured = capsys.readouterr()
    assert "randomness: secure" in captured.out and "warning" not in captured.err
    back = pd.read_csv(out)  # gzip inferred from the final name
    assert back["value"].iloc[0] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "out.csv.gz", "out.csv.gz.accounting.json"]


def test_parquet_input_and_csv_with_byte_order_mark(tmp_path) -> None:
    # Parquet keeps its own types: integer ids become their text, counts stay exact integers
    df = pd.DataFrame({"state": ["01", "01", "02"], "county": [1001, 1003, 2001],
                       "pop": np.array([10**12 + 1, 4, 5], dtype=np.int64)})
    df.to_parquet(tmp_path / "in.parquet")
    geo = pd.DataFrame({"state": ["01", "01", "02"], "county": ["1001", "1003", "2001"]})
    geo.to_csv(tmp_path / "geo.csv", index=False, encoding="utf-8-sig")  # a BOM, as Excel writes
    assert main(["release", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "o.csv"), "--levels", "state,county",
                 "--count", "pop", "--geo", str(tmp_path / "geo.csv"), "--rho", "1", "--seed", "0", "--quiet"]) == 0
    out = _read(tmp_path / "o.csv")
    assert int(out.loc[out["level"] == 0, "value"].iloc[0]) == 10**12 + 10
    assert set(out.loc[out["level"] == 2, "node"]) <= {"01/1001", "01/1003", "02/2001"}
