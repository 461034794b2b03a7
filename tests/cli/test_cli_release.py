"""``hierdp release`` round trips on tiny files."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main
from hierdp.cli_release import add_release_parser, run_release


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hierdp")
    sub = parser.add_subparsers(dest="command", required=True)
    add_release_parser(sub)
    return parser.parse_args(["release"] + argv)


def _check_output(out: pd.DataFrame, total: int) -> None:
    assert int(out.loc[out["level"] == 0, "value"].iloc[0]) == total
    assert (out["value"] >= 0).all()
    # children sum to parents (parent = global row number)
    child = out[out["parent"] >= 0]
    sums = child.groupby("parent")["value"].sum()
    assert np.array_equal(out.loc[sums.index, "value"].to_numpy(), sums.to_numpy())


def test_trips_with_geography_to_csv(tmp_path, capsys) -> None:
    geo = pd.DataFrame({"region": ["N", "N", "S"], "city": ["milano", "torino", "napoli"]})
    rng = np.random.default_rng(0)
    trips = pd.DataFrame({"from": rng.choice(geo.city, 400), "to": rng.choice(geo.city, 400)})
    geo.to_csv(tmp_path / "geo.csv", index=False)
    trips.to_csv(tmp_path / "trips.csv", index=False)
    args = _parse([str(tmp_path / "trips.csv"), "-o", str(tmp_path / "out.csv"), "--epsilon", "1", "--delta", "1e-8",
                   "--origin", "from", "--destination", "to", "--geo", str(tmp_path / "geo.csv"), "--seed", "3",
                   "--quiet"])
    assert run_release(args) == 0
    out = pd.read_csv(tmp_path / "out.csv")
    _check_output(out, 400)
    assert {"origin", "destination", "origin_level", "destination_level"} <= set(out.columns)
    assert out["level"].max() == 4
    printed = capsys.readouterr().out
    assert "zCDP" in printed and "per level" in printed


def test_counts_hierarchy_to_parquet_with_other_mechanisms(tmp_path) -> None:
    df = pd.DataFrame({"state": ["A", "A", "B", "B"], "county": ["a1", "a2", "b1", "b2"], "pop": [100, 50, 0, 70]})
    df.to_csv(tmp_path / "counts.csv", index=False)
    for mech in ("inftda", "tda_l2", "tda_l2_exact"):
        args = _parse([str(tmp_path / "counts.csv"), "-o", str(tmp_path / f"{mech}.parquet"), "--rho", "1",
                       "--levels", "state,county", "--count", "pop", "--mechanism", mech, "--seed", "1", "--quiet"])
        assert run_release(args) == 0
        out = pd.read_parquet(tmp_path / f"{mech}.parquet")
        _check_output(out, 220)
        assert "node" in out.columns


def test_level_layout_and_bad_input(tmp_path, capsys) -> None:
    df = pd.DataFrame({"L0_O": 0, "L1_O": [0, 0, 1], "L2_O": [0, 1, 2], "L0_D": 0, "L1_D": [1, 0, 1],
                       "L2_D": [2, 0, 3], "COUNT": [5, 3, 9]})
    df.to_csv(tmp_path / "lv.csv", index=False)
    args = _parse([str(tmp_path / "lv.csv"), "-o", str(tmp_path / "o.csv"), "--epsilon", "2",
                   "--origin-levels", "L0_O,L1_O,L2_O", "--destination-levels", "L0_D,L1_D,L2_D", "--count", "COUNT",
                   "--mechanism", "sh", "--seed", "0", "--quiet"])
    assert run_release(args) == 0
    bad = _parse([str(tmp_path / "lv.csv"), "-o", str(tmp_path / "o.csv"), "--epsilon", "1", "--levels", "nope",
                  "--quiet"])
    assert run_release(bad) == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _parse([str(tmp_path / "lv.csv"), "-o", "x.csv", "--mechanism", "magic"])


def test_unwritable_output_fails_before_any_release(tmp_path, capsys) -> None:
    src = tmp_path / "counts.csv"
    pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "r"], "n": [3, 4, 5]}).to_csv(src, index=False)
    code = main(["release", str(src), "--levels", "a,b", "--count", "n", "--epsilon", "1",
                 "-o", str(tmp_path / "missing" / "out.csv")])
    assert code == 2 and "cannot write" in capsys.readouterr().err
    out = tmp_path / "out.csv.gz"
    assert main(["release", str(src), "--levels", "a,b", "--count", "n", "--epsilon", "1", "--seed", "0",
                 "--quiet", "-o", str(out)]) == 0
    back = pd.read_csv(out)  # gzip inferred from the final name
    assert back["value"].iloc[0] == 12 and not list(tmp_path.glob(".*partial"))
