"""``hierdp release --x/--y`` or ``--lon/--lat`` (location points, paper 002).

Good runs are checked against an independent oracle (exact binning with fractions at an epsilon so
large that the noise is zero) and against the library; bad input is table-driven in the style of
tests/cli/test_cli_bad_inputs.py: exit code, one stderr line naming the culprit, nothing created or
changed in the working folder.
"""

from __future__ import annotations

import hashlib
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hierdp.cli import main

# x in [0, 8], y in [0, 4] on a 4 x 8 grid: unit cells. Points on inner cell boundaries belong to the
# cell above / to the right (half-open cells); points on the box's upper edges to the last cell.
PTS = ("px,py,n\n0,0,1\n0.5,0.5,2\n1,0.25,1\n7.999,3.999,1\n8,4,3\n8,0,1\n0,4,1\n3.5,2,4\n3.5,1.999,1\n"
       "6.25,2.75,0\n2,3,1\n")
BASE = ["release", "p.csv", "-o", "out.csv", "--x", "px", "--y", "py", "--box", "0", "8", "0", "4", "--grid", "4x8",
        "--epsilon", "0.5", "--seed", "0", "--quiet"]


def _with(argv, **changes):
    """``argv`` with options replaced (None: removed with its values; "": a bare flag added)."""
    out = list(argv)
    for flag, value in changes.items():
        opt = "--" + flag.replace("_", "-")
        if opt in out:
            i = out.index(opt)
            j = i + 1
            while j < len(out) and not out[j].startswith("--"):
                j += 1
            if value is None:
                del out[i:j]
            else:
                out[i + 1:j] = value if isinstance(value, list) else [value]
        elif value is not None:
            out += [opt] if value == "" else [opt] + (value if isinstance(value, list) else [value])
    return out


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): ("dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*"))}


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    (tmp_path / "p.csv").write_text(PTS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _exact_cells(text: str, box, shape, xcol, ycol, count=None) -> dict[tuple[int, int], int]:
    """Independent oracle: bin the decimal text exactly (fractions), half-open cells, upper edges
    in the last cell."""
    df = pd.read_csv(pd.io.common.StringIO(text), dtype=str)
    x0, x1, y0, y1 = (Fraction(str(v)) for v in box)
    rows, cols = shape
    out: dict[tuple[int, int], int] = {}
    for _, r in df.iterrows():
        fx, fy = Fraction(r[xcol]), Fraction(r[ycol])
        j = min(math.floor((fx - x0) * cols / (x1 - x0)), cols - 1)
        i = min(math.floor((fy - y0) * rows / (y1 - y0)), rows - 1)
        out[(i, j)] = out.get((i, j), 0) + (int(r[count]) if count else 1)
    return out


def _tiles(frame: pd.DataFrame, shape) -> bool:
    cover = np.zeros(shape, np.int64)
    for r0, r1, c0, c1 in frame[["r0", "r1", "c0", "c1"]].itertuples(index=False):
        cover[r0:r1, c0:c1] += 1
    return bool((cover == 1).all())


def test_noise_free_identity_equals_exact_binning(workdir, capsys):
    """At epsilon 1e6 the discrete Laplace noise (scale 1e-6) is 0 with probability 1 - 2e^(-1e6)/(1+...):
    the released cells are the exact counts, with and without --count."""
    for count in (None, "n"):
        argv = _with(BASE, epsilon="1e6", mechanism="identity", count=count, overwrite="")
        assert main(argv) == 0, capsys.readouterr().err
        got = pd.read_csv(workdir / "out.csv")
        want = _exact_cells(PTS, (0, 8, 0, 4), (4, 8), "px", "py", count)
        assert len(got) == 32 and _tiles(got, (4, 8))
        for row in got.itertuples(index=False):
            assert row.value == want.get((row.r0, row.c0), 0), (row.r0, row.c0)
            # coordinates of unit cells
            assert (row.x_min, row.x_max, row.y_min, row.y_max) == (row.c0, row.c1, row.r0, row.r1)
    out = capsys.readouterr().out
    assert "unbounded neighbours" in out and "declared by --box" in out


def test_lon_lat_with_negative_box_matches_the_library(workdir, capsys):
    from hierdp.hierarchy.spatial import SpatialGrid
    from hierdp.mechanisms import create

    rng = np.random.default_rng(5)
    lon = np.round(rng.uniform(-125, -66, 3000), 4)
    lat = np.round(rng.uniform(24, 50, 3000), 4)
    pd.DataFrame({"name": [""] * 3000, "longitude": lon, "latitude": lat}).to_csv(workdir / "us.csv", index=False)
    argv = ["release", "us.csv", "-o", "us_out.csv", "--lon", "longitude", "--lat", "latitude", "--box", "-125", "-66",
            "24", "50", "--grid", "32x64", "--epsilon", "0.5", "--seed", "3", "--quiet", "--param", "stop_count=20"]
    assert main(argv) == 0, capsys.readouterr().err
    got = pd.read_csv(workdir / "us_out.csv")
    assert list(got.columns) == ["leaf", "r0", "r1", "c0", "c1", "lon_min", "lon_max", "lat_min", "lat_max", "cells",
                                 "value"]
    assert _tiles(got, (32, 64))
    grid = SpatialGrid.from_points(lon, lat, shape=(32, 64), box=(-125, -66, 24, 50))
    rel = create("htf", epsilon=0.5, stop_count=20).release(grid, seed=3)
    assert np.array_equal(got["value"].to_numpy(), rel.values)
    assert np.array_equal(got[["r0", "r1", "c0", "c1"]].to_numpy(), rel.rects)
    # coordinates: lon = -125 + c * 59/64, lat = 24 + r * 26/32 (float rounding of the library's formula)
    assert np.allclose(got["lon_min"], -125 + got["c0"] * 59 / 64, rtol=0, atol=1e-12)
    assert np.allclose(got["lat_max"], 24 + got["r1"] * 26 / 32, rtol=0, atol=1e-12)
    out = capsys.readouterr().out
    assert "mechanism: HTF" in out and "height estimate" in out  # the accounting is printed
    assert re.search(r"released \d+ leaves tiling the 32 x 64 grid", out)


def test_observed_box_is_stated_and_parquet_input_gives_the_same_release(workdir, capsys):
    df = pd.read_csv(workdir / "p.csv")
    df.to_parquet(workdir / "p.parquet")
    argv = _with(BASE, box=None, observed_domain_public="", mechanism="ug")
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "assumed public" in out
    csv_frame = pd.read_csv(workdir / "out.csv")
    # the observed box is the points' extremes
    assert csv_frame["x_min"].min() == 0 and csv_frame["x_max"].max() == 8 and csv_frame["y_max"].max() == 4
    argv = _with(argv, output="out2.csv")
    argv[1] = "p.parquet"
    assert main(argv) == 0, capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "out2.csv"), csv_frame)


@pytest.mark.parametrize("mechanism", ["htf", "identity", "uniform", "ug", "ag", "quadtree", "kdtree", "privelet"])
def test_every_point_mechanism_runs_and_tiles_the_grid(workdir, capsys, mechanism):
    argv = _with(BASE, mechanism=mechanism, grid="16x16", box=["0", "8", "0", "4"])
    if mechanism in ("quadtree", "kdtree"):
        argv += ["--param", "height=3"]
    assert main(argv) == 0, capsys.readouterr().err
    got = pd.read_csv(workdir / "out.csv")
    assert _tiles(got, (16, 16)) and np.isfinite(got["value"]).all()
    assert "wrote" in capsys.readouterr().out


def test_consistency_solver_and_parameters_pass_through(workdir, capsys):
    argv = [*_with(BASE, mechanism="quadtree", solver="highs"), "--param", "height=2", "--param", "budgets=uniform"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "consistency solver highs" in out
    # uniform budgets: eps / (height + 1) = 1/6 on each of the three depths, scale 6 (sensitivity 1)
    assert re.findall(r"counts, depth (\d)\s+epsilon=(\S+) scale=(\S+)", out) == [
        (str(d), "0.166667", "6") for d in range(3)]
    got = pd.read_csv(workdir / "out.csv")
    assert len(got) == 16  # a quadtree of height 2 over 4 x 8 cells: 16 leaves of 1 x 2 cells
    assert (got["cells"] == 2).all()


def test_coordinates_are_read_as_python_parses_them(tmp_path):
    """The fast numeric path of read_table gives exactly Python's float() (correct rounding), on
    hard cases (halfway points, subnormals, 17+ digits, exponents) and random decimals; CSV and
    Parquet agree; a bad cell still falls back to the text path that names it."""
    from hierdp.cli.io import CliError, read_table

    rng = np.random.default_rng(11)
    texts = ["-125", "179.99999999999997", "0.1", "9007199254740993",
             "1.00000000000000011102230246251565404236316680908203125", "2.2250738585072011e-308", "4.9e-324", "1e22", "-0.0", "123456789012345678901234567890", "+3.5", "7.0e-3"]
    texts += [f"{m}e{e}" for m, e in zip(rng.integers(-10**17, 10**17, 2000), rng.integers(-40, 40, 2000), strict=False)]
    texts += [f"{a}.{b:09d}" for a, b in zip(rng.integers(-180, 180, 2000), rng.integers(0, 10**9, 2000), strict=False)]
    (tmp_path / "c.csv").write_text("x,y\n" + "".join(f"{t},{t}\n" for t in texts))
    got = read_table(tmp_path / "c.csv", numbers=["x", "y"], columns=["x", "y"])
    want = np.array([float(t) for t in texts])
    assert got["x"].dtype == np.float64 and np.array_equal(got["x"].to_numpy(), want)
    assert np.array_equal(np.signbit(got["x"].to_numpy()), np.signbit(want))  # -0.0 stays -0.0
    pd.DataFrame({"x": want, "y": want}).to_parquet(tmp_path / "c.parquet")
    assert np.array_equal(read_table(tmp_path / "c.parquet", numbers=["x", "y"])["y"].to_numpy(), want)
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n3,4 \n5,six\n")
    with pytest.raises(CliError, match=r"column 'y', row 2: 'six' is not a number"):
        read_table(tmp_path / "bad.csv", numbers=["x", "y"])


OUTSIDE = PTS + "8.5,1,1\n"
CASES = [
    # the public domain
    ("no-box", _with(BASE, box=None), {}, r"refusing to release: the bounding box would be read from the private "
                                          r"points.*--box.*--observed-domain-public"),
    ("box-and-observed", _with(BASE, observed_domain_public=""), {}, r"either --box .* or --observed-domain-public"),
    ("box-three-numbers", _with(BASE, box=["0", "8", "0"]), {}, r"argument --box: expected 4 arguments"),
    ("box-text", _with(BASE, box=["0", "eight", "0", "4"]), {}, r"--box: x_max 'eight' is not a number"),
    ("box-nan", _with(BASE, box=["0", "8", "nan", "4"]), {}, r"--box: y_min must be a finite number"),
    ("box-inverted", _with(BASE, box=["8", "0", "0", "4"]), {}, r"--box: x_min 8 must be below x_max 0"),
    ("box-empty-lat", ["release", "p.csv", "-o", "out.csv", "--lon", "px", "--lat", "py", "--box", "0", "8", "4",
                       "4", "--grid", "4", "--epsilon", "1"], {}, r"--box: lat_min 4 must be below lat_max 4"),
    ("point-outside", BASE, {"p.csv": OUTSIDE},
     r"1 point\(s\) lie outside --box 0 8 0 4, e.g. row 11; enlarge the box"),
    # the grid
    ("no-grid", _with(BASE, grid=None), {}, r"needs --grid ROWSxCOLS"),
    ("grid-zero", _with(BASE, grid="0x8"), {}, r"--grid needs positive numbers of cells, got '0x8'"),
    ("grid-text", _with(BASE, grid="big"), {}, r"--grid must be ROWSxCOLS"),
    ("grid-three", _with(BASE, grid="4x4x4"), {}, r"--grid must be ROWSxCOLS"),
    ("grid-negative", _with(BASE, grid="4x-8"), {}, r"--grid must be ROWSxCOLS"),
    ("grid-too-large", _with(BASE, grid="100000x100000"), {}, r"10,000,000,000 cells, more than the command line"),
    # memory, bounded from the public grid before reading (issue 20, item 11)
    ("grid-beyond-memory", _with(BASE, grid="8192x8192"), {},
     r"--grid 8192x8192 \(67,108,864 cells\) would take about .* GiB with --mechanism htf .* more than the 4.0 GiB"),
    ("grid-beyond-memory-identity", _with(BASE, grid="5000x5000", mechanism="identity"), {},
     r"--grid 5000x5000 .* --mechanism identity"),
    # a box beyond double precision (issue 20, item 12): every point would land in one cell
    ("box-span-overflow", _with(BASE, box=["-1" + "0" * 308 + ".0", "1e308", "0", "4"]), {},
     r"--box with --grid 4x8: box: the x span x_max - x_min is beyond double precision"),
    ("box-cells-collapse", _with(BASE, box=["1e16", "10000000000000004", "0", "4"]), {},
     r"the x span cannot be cut into 8 distinct cells in double precision"),
    # one checked int64 sum (issue 20, item 9): the total of the weights, the column named, not the total
    ("weights-sum-beyond-int64", _with(BASE, count="n"), {"p.csv": "px,py,n\n1,1,5000000000000000000\n"
                                                                "7,3,5000000000000000000\n"},
     r"input p.csv: column 'n': the counts sum to more than 2\*\*63 - 1, beyond int64"),
    ("weight-beyond-int64", _with(BASE, count="n"), {"p.csv": "px,py,n\n1,1,9223372036854775808\n"},
     r"out-of-range count '9223372036854775808' in column 'n', row 0"),
    # the points
    ("nan-coordinate", BASE, {"p.csv": PTS + "nan,1,1\n"}, r"column 'px', row 11: 'nan' is not a finite number"),
    ("inf-coordinate", BASE, {"p.csv": PTS + "1,inf,1\n"}, r"column 'py', row 11: 'inf' is not a finite number"),
    ("empty-coordinate", BASE, {"p.csv": PTS + ",1,1\n"}, r"column 'px', row 11: is empty"),
    ("text-coordinate", BASE, {"p.csv": PTS + "1,north,1\n"}, r"column 'py', row 11: 'north' is not a number"),
    ("comma-decimal", BASE, {"p.csv": "px;py\n1,5;2\n"}, r"unknown column 'px'"),
    ("no-points", BASE, {"p.csv": "px,py,n\n"}, r"no points"),
    ("all-counts-zero", _with(BASE, count="n"), {"p.csv": "px,py,n\n1,1,0\n"}, r"every weight is 0"),
    ("negative-count", _with(BASE, count="n"), {"p.csv": PTS + "1,1,-2\n"}, r"'-2' in column 'n', row 11"),
    ("fractional-count", _with(BASE, count="n"), {"p.csv": PTS + "1,1,1.5\n"}, r"'1.5' in column 'n', row 11"),
    ("unknown-x-column", _with(BASE, x="lon"), {},
     r"input p.csv: unknown column 'lon'; columns are \['px', 'py', 'n'\]"),
    ("unknown-count-column", _with(BASE, count="weight"), {}, r"no count column 'weight'"),
    ("x-without-y", _with(BASE, y=None), {}, r"needs both --x and --y \(got only --x\)"),
    ("lat-without-lon", _with(BASE, x=None, y=None, lat="py"), {}, r"needs both --lon and --lat \(got only --lat\)"),
    ("x-and-lon", _with(BASE, lon="px"), {}, r"either --x/--y or --lon/--lat, not both"),
    ("same-column", _with(BASE, y="px"), {}, r"column 'px' is given for two roles"),
    ("count-is-x", _with(BASE, count="px"), {}, r"column 'px' is given for two roles"),
    # other layouts' flags
    ("unit-and-x", _with(BASE, unit="px"), {}, r"give one input layout: --unit .* or --x/--y"),
    ("levels-flag", _with(BASE, levels="a,b"), {}, r"--levels does not apply to the point layout"),
    ("geo-flag", _with(BASE, geo="g.csv"), {}, r"--geo does not apply to the point layout"),
    ("max-size-flag", _with(BASE, max_size="4"), {}, r"--max-size does not apply to the point layout"),
    ("engine-flag", _with(BASE, engine="processes"), {}, r"--engine does not apply to the point layout"),
    ("checkpoint-flag", _with(BASE, checkpoint="ck"), {}, r"--checkpoint does not apply to the point layout"),
    # mechanism, parameters, solver
    ("tree-mechanism", _with(BASE, mechanism="inftda"), {},
     r"--mechanism inftda does not release location points.*use one of htf, identity, uniform, ug, ag, quadtree, "
     r"kdtree, privelet"),
    ("group-size-mechanism", _with(BASE, mechanism="pgsr_mdp"), {}, r"--mechanism pgsr_mdp does not release location"),
    ("param-unknown", _with(BASE, param="depth=3"), {}, r"--param depth: --mechanism htf has no parameter 'depth'"),
    ("param-malformed", _with(BASE, param="stop_count"), {}, r"--param 'stop_count': expected NAME=VALUE"),
    ("param-reserved", _with(BASE, param="epsilon=2"), {}, r"--param epsilon: set it with --epsilon"),
    ("param-twice", [*BASE, "--param", "T=2", "--param", "T=3"], {}, r"--param T is given twice"),
    ("param-bad-value", _with(BASE, param="stop_cells=-1"), {}, r"--mechanism htf: stop_cells"),
    ("param-bad-stop-count", _with(BASE, param="stop_count=nan"), {}, r"--mechanism htf: stop_count must be"),
    ("htf-height-beyond-grid", _with(BASE, param="height=40"), {}, r"height 40 exceeds"),
    ("budgets-do-not-cover", _with(BASE, epsilon="0.0005"), {}, r"budgets do not cover the partitioning"),
    ("solver-for-htf", _with(BASE, solver="highs"), {}, r"--solver does not apply to --mechanism htf"),
    ("time-limit-for-ug", _with(BASE, mechanism="ug", time_limit="5"), {}, r"--time-limit does not apply to --mech"),
    ("solver-cannot", _with(BASE, mechanism="ag", solver="intopt"), {}, r"consistency_solver 'intopt' cannot solve"),
    ("solver-unknown", _with(BASE, mechanism="kdtree", solver="gurobi"), {}, r"unknown solver 'gurobi'"),
    # privacy
    ("rho", _with(BASE, epsilon=None, rho="0.5"), {}, r"pure epsilon-DP.*not --rho"),
    ("no-epsilon", _with(BASE, epsilon=None), {}, r"give --epsilon"),
    ("delta", _with(BASE, delta="1e-6"), {}, r"--delta does not apply"),
    ("distinct-pairs", _with(BASE, distinct_pairs=""), {}, r"--distinct-pairs applies to O/D trees"),
    ("conversion", _with(BASE, conversion="numeric"), {}, r"--conversion applies to"),
    ("ug-eps-n-too-large", _with(BASE, mechanism="ug", param="eps_n=0.5"), {}, r"eps_n 0.5 must be below epsilon"),
    ("seed-and-secure", _with(BASE, secure=""), {}, r"--seed and --secure exclude each other"),
    # files
    ("output-exists", BASE, {"out.csv": "old\n"}, r"out.csv.*exists.*--overwrite"),
    ("output-is-input", _with(BASE, output="p.csv", overwrite=""), {}, r"is also an input file"),
    ("output-suffix", _with(BASE, output="out.txt"), {}, r"output must end in .csv"),
    ("input-missing", ["release", "nope.csv", *BASE[2:]], {}, r"input file not found: nope.csv"),
]


@pytest.mark.parametrize("name, argv, files, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_point_input(workdir, capsys, name, argv, files, pattern):
    for fname, content in files.items():
        (workdir / fname).write_text(content)
    before = _snapshot(workdir)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert re.search(pattern, lines[0]), lines[0]
    assert _snapshot(workdir) == before
