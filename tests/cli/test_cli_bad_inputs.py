"""Bad input through the command line, table-driven (issue 7, items 0, 2-5, 7, 8).

Every case asserts three things: the exit code, a single line on stderr that names the culprit
(the cell, column, flag or file at fault), and that no file in the working folder was created
or changed (a snapshot of names, sizes and contents before and after).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hierdp.cli import main

INT64_MAX = 2**63 - 1

COUNTS = "state,county,pop\n01,01001,100\n01,01003,50\nNA,NA1,7\n02,02001,63\n"
GEO = "state,county\n01,01001\n01,01003\n01,01005\nNA,NA1\n02,02001\n"
TRIPS = "from,to,n\nmilano,napoli,3\ntorino,milano,5\nnapoli,napoli,1\n"
TGEO = "region,city\nN,milano\nN,torino\nS,napoli\nS,bari\n"
LEVEL = "L0_O,L1_O,L2_O,L0_D,L1_D,L2_D,COUNT\n0,0,0,0,1,2,5\n0,0,1,0,0,0,3\n0,1,2,0,1,3,9\n"
LGEO = "L1,L2\n0,0\n0,1\n1,2\n1,3\n"


def _counts(rows: list[tuple[str, str, str]]) -> str:
    return "state,county,pop\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)


def _trips(rows: list[tuple[str, str, str]]) -> str:
    return "from,to,n\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)


GOOD = [("01", "01001", "100"), ("01", "01003", "50"), ("NA", "NA1", "7")]
PLAIN = ["release", "c.csv", "-o", "out.csv", "--levels", "state,county", "--count", "pop", "--epsilon", "1",
         "--geo", "g.csv", "--seed", "0", "--quiet"]
TRIP = ["release", "trips.csv", "-o", "out.csv", "--origin", "from", "--destination", "to", "--count", "n",
        "--geo", "tg.csv", "--epsilon", "1", "--seed", "0", "--quiet"]
LAYOUT = ["release", "lv.csv", "-o", "out.csv", "--origin-levels", "L0_O,L1_O,L2_O", "--destination-levels",
          "L0_D,L1_D,L2_D", "--count", "COUNT", "--rho", "1", "--seed", "0", "--quiet"]


def _with(argv: list[str], **changes: str | None) -> list[str]:
    """``argv`` with options replaced (value None: option removed, with its value)."""
    out = list(argv)
    for flag, value in changes.items():
        opt = "--" + flag.replace("_", "-") if len(flag) > 1 else "-" + flag
        if opt in out:
            i = out.index(opt)
            takes_value = i + 1 < len(out) and not out[i + 1].startswith("--")
            if value is None:
                del out[i:i + (2 if takes_value else 1)]
            elif value == "":
                pass
            else:
                out[i + 1] = value
        elif value is not None:
            out += [opt] if value == "" else [opt, value]
    return out


# (id, argv, files to add or replace, exit code, regex the stderr line must match)
CASES: list[tuple[str, list[str], dict[str, bytes | str], int, str]] = [
    # ---- item 0: the public domain
    ("no-domain-levels", _with(PLAIN, geo=None), {}, 2, r"refusing to release.*--geo.*--observed-domain-public"),
    ("no-domain-level-layout", LAYOUT, {}, 2, r"refusing to release"),
    ("geo-and-observed", _with(PLAIN, observed_domain_public=""), {}, 2, r"either --geo.*or --observed-domain-public"),
    ("destination-geo-alone", _with(LAYOUT, destination_geo="lg.csv"), {}, 2, r"--destination-geo needs --geo"),
    ("destination-geo-levels", _with(PLAIN, destination_geo="g.csv"), {}, 2, r"--destination-geo applies to trips"),
    ("trips-without-geo", _with(TRIP, geo=None), {}, 2, r"trips need a geography file: --geo"),
    ("row-outside-domain", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02999", "1")])}, 2,
     r"row 3: its path is not in the declared domain"),
    ("geo-lacks-level-column", PLAIN, {"g.csv": "state\n01\n02\n"}, 2, r"--geo g.csv: no level column 'county'"),
    ("trip-area-not-in-geo", TRIP, {"trips.csv": _trips([("milano", "roma", "1")])}, 2,
     r"destination column 'to': row 0 names an area that is not a finest-level area"),
    ("layout-row-disagrees-with-geo", _with(LAYOUT, geo="lg.csv"), {"lg.csv": "L1,L2\n0,0\n1,1\n1,2\n1,3\n"}, 2,
     r"origin: row 1 puts its area under another parent \(column 'L1_O'\) than the geography does"),
    ("layout-area-not-in-geo", _with(LAYOUT, geo="lg.csv"), {"lg.csv": "L1,L2\n0,0\n0,1\n1,2\n"}, 2,
     r"row 2 names an area that is not a finest-level area"),
    ("geo-finest-id-twice", TRIP, {"tg.csv": "region,city\nN,milano\nS,milano\nS,napoli\nN,torino\n"}, 2,
     r"finest area 'milano'.*two different parent areas"),
    # ---- item 2: identifiers verbatim; empty cells
    ("empty-id-cell", PLAIN, {"c.csv": _counts([*GOOD, ("", "01001", "1")])}, 2, r"column 'state' is empty in row 3"),
    ("empty-geo-cell", PLAIN, {"g.csv": GEO + ",01009\n"}, 2, r"--geo g.csv: column 'state' is empty in row 5"),
    ("id-with-leading-zero-not-in-geo", PLAIN, {"c.csv": _counts([("1", "1001", "5")])}, 2,
     r"row 0: its path is not in the declared domain"),
    ("empty-trip-origin", TRIP, {"trips.csv": _trips([(" ", "milano", "1")]).replace(" ,", ",")}, 2,
     r"column 'from' is empty in row 0"),
    ("duplicate-header", PLAIN, {"c.csv": "state,county,county\n01,01001,1\n"}, 2, r"names column 'county' twice"),
    ("nameless-header", PLAIN, {"c.csv": "state,,pop\n01,01001,1\n"}, 2, r"column 1 of the header has no name"),
    ("unknown-level-column", _with(PLAIN, levels="state,town"), {}, 2, r"unknown column 'town'"),
    ("unknown-count-column", _with(PLAIN, count="people"), {}, 2, r"no count column 'people'"),
    ("count-is-a-level", _with(PLAIN, count="county"), {}, 2, r"--count 'county' is also a level column"),
    ("level-listed-twice", _with(PLAIN, levels="state,state"), {}, 2, r"level column 'state' is listed twice"),
    # issue 20, item 12: levels given fine to coarse (each county in one state, a state over several counties)
    ("levels-fine-to-coarse", _with(PLAIN, levels="county,state"), {}, 2,
     r"level column 'state' is coarser than 'county'.*give the levels coarse to fine"),
    ("levels-fine-to-coarse-observed", _with(PLAIN, levels="county,state", geo=None, observed_domain_public=""), {}, 2,
     r"level column 'state' is coarser than 'county'"),
    # ---- items 3, 8: counts (one checked conversion, the bad cell named)
    ("count-abc-row-2", PLAIN, {"c.csv": _counts([("01", "01001", "1350"), ("01", "01003", "4"),
                                                  ("02", "02001", "abc")])}, 2,
     r"non-numeric count 'abc' in column 'pop', row 2"),
    ("count-negative", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "-4")])}, 2, r"negative count '-4'.*row 3"),
    ("count-fraction", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "2.5")])}, 2, r"non-integer count '2.5'"),
    ("count-empty", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "")])}, 2, r"missing count ''.*row 3"),
    ("count-nan", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "nan")])}, 2, r"missing \(NaN\) count 'nan'"),
    ("count-inf", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "inf")])}, 2, r"infinite count 'inf'"),
    ("count-1e20", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", "1e20")])}, 2, r"out-of-range count '1e20'"),
    ("count-2-63", PLAIN, {"c.csv": _counts([*GOOD, ("02", "02001", str(2 ** 63))])}, 2,
     r"out-of-range count '9223372036854775808'"),
    ("count-thousands-separator", PLAIN, {"c.csv": _counts(GOOD[:1]) + '01,01003,"1,350"\n'}, 2,
     r"non-numeric count '1,350'"),
    ("counts-sum-beyond-int64", PLAIN, {"c.csv": _counts([("01", "01001", str(INT64_MAX)),
                                                          ("01", "01003", str(INT64_MAX))])}, 2, r"beyond int64"),
    ("od-count-1e20", TRIP, {"trips.csv": _trips([("milano", "napoli", "1"), ("torino", "bari", "1e20")])}, 2,
     r"out-of-range count '1e20' in column 'n', row 1"),
    ("od-counts-sum-beyond-int64", TRIP, {"trips.csv": _trips([("milano", "napoli", str(INT64_MAX)),
                                                               ("torino", "bari", str(INT64_MAX))])}, 2,
     r"beyond int64"),
    ("od-count-abc", TRIP, {"trips.csv": _trips([("milano", "napoli", "2"), ("torino", "bari", "abc")])}, 2,
     r"non-numeric count 'abc' in column 'n', row 1"),
    ("layout-count-negative", _with(LAYOUT, geo="lg.csv"), {"lv.csv": LEVEL.replace(",9\n", ",-9\n")}, 2,
     r"negative count '-9' in column 'COUNT', row 2"),
    # ---- item 4: files
    ("output-is-input", _with(PLAIN, o="c.csv", overwrite=""), {}, 2, r"output c.csv is also an input file"),
    ("output-is-geo", _with(PLAIN, o="g.csv", overwrite=""), {}, 2, r"output g.csv is also an input file"),
    ("output-exists", PLAIN, {"out.csv": "keep me\n"}, 2, r"output out.csv already exists; pass --overwrite"),
    ("output-is-directory", _with(PLAIN, o="outdir"), {"outdir/": ""}, 2, r"output outdir is a directory"),
    ("output-bad-suffix", _with(PLAIN, o="out.txt"), {}, 2, r"output must end in .csv.*got 'out.txt'"),
    ("output-folder-missing", _with(PLAIN, o="nowhere/out.csv"), {}, 2, r"folder nowhere/ does not exist"),
    ("input-missing", [*_with(PLAIN, **{})[:1], "missing.csv", *PLAIN[2:]], {}, 2, r"input file not found: missing.csv"),
    ("input-is-directory", ["release", "indir", *PLAIN[2:]], {"indir/": ""}, 2, r"input indir is a directory"),
    ("geo-missing", _with(PLAIN, geo="nogeo.csv"), {}, 2, r"--geo file not found: nogeo.csv"),
    ("geo-is-directory", _with(PLAIN, geo="indir"), {"indir/": ""}, 2, r"--geo indir is a directory"),
    ("gz-not-gzip", ["release", "c.csv.gz", *PLAIN[2:]], {"c.csv.gz": COUNTS}, 2, r"c.csv.gz: not a valid gzip file"),
    ("gz-truncated", ["release", "c.csv.gz", *PLAIN[2:]], {"c.csv.gz": gzip.compress(COUNTS.encode())[:30]}, 2,
     r"c.csv.gz: not a valid gzip file"),
    ("empty-file", PLAIN, {"c.csv": ""}, 2, r"c.csv: the file is empty"),
    ("header-only", PLAIN, {"c.csv": "state,county,pop\n"}, 2, r"no rows"),
    ("not-utf8", PLAIN, {"c.csv": b"state,county,pop\n01,\xff\xfe01,1\n"}, 2, r"c.csv: not UTF-8 text"),
    ("ragged-csv", PLAIN, {"c.csv": COUNTS + "01,01001,1,extra,fields\n"}, 2, r"c.csv: not valid CSV"),
    ("parquet-not-parquet", ["release", "c.parquet", *PLAIN[2:]], {"c.parquet": COUNTS}, 2,
     r"c.parquet: not a valid Parquet file"),
    # ---- item 7: privacy parameters, randomness, solver flags
    ("epsilon-nan", _with(PLAIN, epsilon="nan"), {}, 2, r"--epsilon: must be a positive finite number, got 'nan'"),
    ("epsilon-negative", _with(PLAIN, epsilon="-1"), {}, 2, r"--epsilon: must be a positive finite number"),
    ("epsilon-zero", _with(PLAIN, epsilon="0"), {}, 2, r"--epsilon: must be a positive finite number"),
    ("epsilon-inf", _with(PLAIN, epsilon="inf"), {}, 2, r"--epsilon: must be a positive finite number"),
    ("epsilon-text", _with(PLAIN, epsilon="one"), {}, 2, r"--epsilon: not a number: 'one'"),
    ("delta-above-one", _with(PLAIN, delta="2"), {}, 2, r"delta"),
    ("epsilon-tiny", _with(PLAIN, epsilon="1e-300"), {}, 2, r"privacy parameters --epsilon 1e-300 --delta 1e-08: "),
    ("rho-zero", _with(PLAIN, epsilon=None, rho="0"), {}, 2, r"--rho: must be a positive finite number"),
    ("epsilon-and-rho", _with(PLAIN, rho="1"), {}, 2, r"exactly one of --epsilon or --rho"),
    ("no-budget", _with(PLAIN, epsilon=None), {}, 2, r"exactly one of --epsilon or --rho"),
    ("contributions-fraction", _with(PLAIN, contributions="2.7"), {}, 2,
     r"--contributions: must be a positive integer, got '2.7'"),
    ("contributions-zero", _with(PLAIN, contributions="0"), {}, 2, r"--contributions: must be a positive integer"),
    ("seed-negative", _with(PLAIN, seed="-1"), {}, 2, r"--seed"),
    ("seed-with-secure", _with(PLAIN, secure=""), {}, 2, r"--seed and --secure exclude each other"),
    ("solver-with-vanilla", _with(PLAIN, mechanism="vanilla", solver="highs"), {}, 2,
     r"--solver does not apply to --mechanism vanilla"),
    ("solver-with-sh", _with(PLAIN, mechanism="sh", solver="intopt"), {}, 2, r"--solver does not apply to --mechanism sh"),
    ("time-limit-with-vanilla", _with(PLAIN, mechanism="vanilla", time_limit="5"), {}, 2,
     r"--time-limit does not apply to --mechanism vanilla"),
    ("time-limit-zero", _with(PLAIN, time_limit="0"), {}, 2, r"--time-limit: must be a positive finite number"),
    ("unknown-solver", _with(PLAIN, solver="gurobi"), {}, 2, r"gurobi"),
    ("solver-cannot-do-linf", _with(PLAIN, solver="projection"), {}, 2,
     r"solver 'projection' cannot post-process a TopDown level \(linf"),
    ("unknown-mechanism", _with(PLAIN, mechanism="magic"), {}, 2, r"--mechanism: invalid choice: 'magic'"),
    ("sh-with-rho", _with(PLAIN, mechanism="sh", epsilon=None, rho="1"), {}, 2, r"sh is \(epsilon, delta\)-DP"),
    # ---- layouts
    ("no-layout", _with(PLAIN, levels=None), {}, 2, r"say what the input is"),
    ("origin-only", _with(TRIP, destination=None), {}, 2, r"trips need both --origin and --destination"),
    ("trips-and-level-layout", [*TRIP, "--origin-levels", "a,b", "--destination-levels", "c,d"], {}, 2,
     r"either --origin/--destination \(trips\) or --origin-levels"),
    ("origin-levels-only", _with(LAYOUT, destination_levels=None, geo="lg.csv"), {}, 2,
     r"needs both --origin-levels and --destination-levels"),
    ("unequal-level-layout", _with(LAYOUT, destination_levels="L0_D,L2_D", geo="lg.csv"), {}, 2,
     r"origin_levels has 3 columns, destination_levels 2"),
    ("unknown-origin-column", _with(TRIP, origin="source"), {}, 2, r"unknown column 'source'"),
    ("geo-level-unknown", _with(TRIP, geo_levels="region,town"), {}, 2, r"unknown column 'town'"),
    # ---- hierdp compare
    ("compare-unknown-mechanism", ["compare", "--mechanisms", "inftda,magic", "--quiet"], {}, 2,
     r"unknown mechanism 'magic'"),
    ("compare-unknown-solver", ["compare", "--solvers", "cplex", "--quiet"], {}, 2, r"unknown solver 'cplex'"),
    ("compare-sh-with-rho", ["compare", "--rho", "1", "--quiet"], {}, 2, r"sh is \(epsilon, delta\)-DP"),
    ("compare-output-exists", ["compare", "--quiet"], {"compare.csv": "old\n"}, 2, r"compare.csv already exists"),
    ("compare-figure-exists", ["compare", "--quiet"], {"compare.png": "old\n"}, 2, r"compare.png already exists"),
    ("compare-bad-plot-suffix", ["compare", "--plot", "fig.jpg", "--quiet"], {}, 2, r"figure must end in .png"),
    ("compare-plot-is-output", ["compare", "-o", "x.csv", "--plot", "x.png", "--quiet", "--mechanisms", "nope"], {},
     2, r"unknown mechanism 'nope'"),
    ("compare-layout-without-input", ["compare", "--levels", "a,b", "--quiet"], {}, 2,
     r"layout options .* describe an input file"),
    ("compare-input-no-domain", ["compare", "c.csv", "--levels", "state,county", "--count", "pop", "--quiet"], {}, 2,
     r"refusing to release"),
    ("compare-seeds-zero", ["compare", "--seeds", "0", "--quiet"], {}, 2, r"--seeds: must be a number of runs"),
    ("compare-seeds-text", ["compare", "--seeds", "many", "--quiet"], {}, 2, r"--seeds: must be a number of runs"),
]


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    for name, text in {"c.csv": COUNTS, "g.csv": GEO, "trips.csv": TRIPS, "tg.csv": TGEO, "lv.csv": LEVEL,
                       "lg.csv": LGEO}.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, code, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input(workdir, capsys, name, argv, files, code, pattern) -> None:
    for fname, content in files.items():
        path = workdir / fname
        if fname.endswith("/"):
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    before = _snapshot(workdir)
    got = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert got == code, err
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith(("hierdp release: error: ", "hierdp compare: error: ")), lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    assert _snapshot(workdir) == before  # nothing created, nothing changed


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_unreadable_input(workdir, capsys) -> None:
    (workdir / "c.csv").chmod(0)
    try:
        assert main(PLAIN) == 2
        assert "cannot read input c.csv: permission denied" in capsys.readouterr().err
    finally:
        (workdir / "c.csv").chmod(0o644)


# ------------------------------------------------------------------ interruptions and failures mid-run
def test_ctrl_c_during_the_write_leaves_nothing(workdir, capsys, monkeypatch) -> None:
    def interrupted(self, *a, **k):  # the writer is cut off half way through the file
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted)
    before = _snapshot(workdir)
    assert main(PLAIN) == 130
    assert "interrupted; nothing was written" in capsys.readouterr().err
    assert _snapshot(workdir) == before


def test_ctrl_c_during_the_release_leaves_nothing(workdir, capsys, monkeypatch) -> None:
    from hierdp.mechanisms.topdown import InfTDA

    def interrupted(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(InfTDA, "release", interrupted)
    before = _snapshot(workdir)
    assert main(PLAIN) == 130
    assert _snapshot(workdir) == before
    assert capsys.readouterr().err.count("\n") == 1


def test_existing_output_survives_a_failed_overwrite(workdir, capsys, monkeypatch) -> None:
    (workdir / "out.csv").write_text("the previous release\n")

    def broken(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    before = _snapshot(workdir)
    assert main(_with(PLAIN, overwrite="")) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert _snapshot(workdir) == before


def test_solver_time_out_is_reported_as_a_status(workdir, capsys, monkeypatch) -> None:
    from hierdp.mechanisms.topdown import InfTDA
    from hierdp.solvers.base import SolverFailed

    def timed_out(self, *a, **k):
        raise SolverFailed("highs", "time limit")

    monkeypatch.setattr(InfTDA, "release", timed_out)
    before = _snapshot(workdir)
    assert main(_with(PLAIN, solver="highs", time_limit="5")) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("hierdp release: error: status time_limit:") and err.count("\n") == 0
    assert _snapshot(workdir) == before


def test_time_limit_reaches_the_mechanism(workdir, monkeypatch) -> None:
    from hierdp.mechanisms import registry

    seen = {}
    real = registry.create

    def spy(name, **params):
        seen.update(params)
        return real(name, **params)

    monkeypatch.setattr(registry, "create", spy)
    assert main(_with(PLAIN, solver="ortools", time_limit="7.5")) == 0
    assert seen["time_limit"] == 7.5 and seen["solver"] == "ortools"


def test_internal_error_is_one_line(workdir, capsys, monkeypatch) -> None:
    from hierdp.mechanisms.topdown import InfTDA

    def bug(self, *a, **k):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(InfTDA, "release", bug)
    assert main(PLAIN) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "internal error (ZeroDivisionError" in err and "HIERDP_DEBUG" in err


def test_broken_pipe_into_head(workdir) -> None:
    # a real pipe: `hierdp release ... | head -c 10`; the release is still written, one line on stderr
    cmd = [sys.executable, "-c", "import sys; from hierdp.cli import main; sys.exit(main())", *PLAIN]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir)
    proc.stdout.read(10)
    proc.stdout.close()  # the reader goes away, as head does
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err
    assert code in (0, 141)  # 0 if everything fitted in the pipe's buffer before it closed
    if code == 141:
        assert "stdout was closed early; the release was written to out.csv" in err
    assert (workdir / "out.csv").exists()


def test_closed_stdout_does_not_stop_the_release(workdir, capsys, monkeypatch) -> None:
    # deterministic version of the pipe test: every write to stdout fails as with a closed pipe
    import hierdp.cli.console as console

    def closed(*args, **kwargs):
        if kwargs.get("file") is None:
            raise BrokenPipeError(32, "Broken pipe")
        return print(*args, **kwargs)

    monkeypatch.setattr(console, "print", closed, raising=False)
    assert main(PLAIN) == 141
    err = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert err == ["hierdp release: error: stdout was closed early; the release was written to out.csv"]
    assert len(pd.read_csv(workdir / "out.csv")) > 0
