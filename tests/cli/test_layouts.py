"""Each input layout of ``hierdp release`` accepts only its own flags and the mechanisms that fit it
(tree layouts, group sizes with --unit, location points with --x/--y): a mismatch is one line on
stderr naming the mechanisms that fit, exit code 2, before any input is read, nothing written."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from hierdp.cli import main
from hierdp.cli.layouts import mechanisms_for
from hierdp.mechanisms import registry

COUNTS = "state,county,pop\n01,01001,100\n01,01003,50\n02,02001,63\n"
HH = "household,state,county,size\nh1,01,01001,3\nh2,01,01003,1\n"
PTS = "px,py\n1,1\n2,3\n"
ARGV = {
    "tree": ["release", "c.csv", "-o", "out.csv", "--levels", "state,county", "--count", "pop",
             "--observed-domain-public", "--epsilon", "1", "--seed", "0", "--quiet"],
    "groups": ["release", "hh.csv", "-o", "out.csv", "--unit", "household", "--levels", "state,county", "--size",
               "size", "--max-size", "4", "--observed-domain-public", "--epsilon", "1", "--seed", "0", "--quiet"],
    "points": ["release", "p.csv", "-o", "out.csv", "--x", "px", "--y", "py", "--box", "0", "4", "0", "4",
               "--grid", "4", "--epsilon", "1", "--seed", "0", "--quiet"],
}
# the oracle: what each built-in mechanism releases, written from the papers (independent of the
# registry's metadata, which the command line reads)
TREE_MECHANISMS = ("inftda", "tda_l2", "tda_l2_exact", "tda_linf", "vanilla", "sh", "topdown")
POINT_MECHANISMS = ("htf", "identity", "uniform", "ug", "ag", "quadtree", "kdtree", "privelet")
GROUP_SIZE_MECHANISMS = ("pgsr_mh", "pgsr_mh_relaxed", "pgsr_mdp", "pgsr_mhc", "pgsr_mhc_relaxed",
                         "pgsr_cumulative_dp", "pgsr_chain_dp", "pgsr_topdown")
OTHER_INPUT_MECHANISMS = ("census_topdown", "safetab")
FITS = {"tree": TREE_MECHANISMS, "groups": GROUP_SIZE_MECHANISMS, "points": POINT_MECHANISMS}
MISFITS = [(layout, m) for layout in ARGV for m in registry.names() if m not in FITS[layout]]


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))}


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    for name, text in (("c.csv", COUNTS), ("hh.csv", HH), ("p.csv", PTS)):
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_each_layout_offers_the_mechanisms_whose_registered_input_it_builds():
    """The registry's input metadata against the papers' oracle above: every built-in is in
    exactly one group, and each layout offers exactly its group."""
    groups = [set(TREE_MECHANISMS), set(POINT_MECHANISMS), set(GROUP_SIZE_MECHANISMS), set(OTHER_INPUT_MECHANISMS)]
    assert sum(len(g) for g in groups) == len(set().union(*groups))  # disjoint
    assert set().union(*groups) == set(registry.describe())
    for layout, names in FITS.items():
        assert sorted(mechanisms_for(layout)) == sorted(names)
    assert {registry.info(n).input for n in OTHER_INPUT_MECHANISMS} == {"spine_histograms", "persons"}


def _run(workdir, capsys, argv):
    before = _snapshot(workdir)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert _snapshot(workdir) == before
    return lines[0]


@pytest.mark.parametrize("layout, mechanism", MISFITS, ids=[f"{a}-{b}" for a, b in MISFITS])
def test_a_mechanism_that_does_not_fit_the_layout_is_refused(workdir, capsys, layout, mechanism):
    line = _run(workdir, capsys, ARGV[layout] + ["--mechanism", mechanism])
    assert f"--mechanism {mechanism} does not release" in line
    assert "use one of " + ", ".join(FITS[layout]) in line


@pytest.mark.parametrize("flags, pattern", [
    (["--max-size", "4"], r"--max-size does not apply to the tree layouts"),
    (["--top-code"], r"--top-code does not apply to the tree layouts"),
    (["--box", "0", "1", "0", "1"], r"--box does not apply to the tree layouts.*point layout"),
    (["--grid", "8"], r"--grid does not apply to the tree layouts"),
    (["--param", "height=3"], r"--param does not apply to the tree layouts"),
])
def test_flags_of_other_layouts_are_refused_on_trees(workdir, capsys, flags, pattern):
    assert re.search(pattern, _run(workdir, capsys, ARGV["tree"] + flags))


@pytest.mark.parametrize("flags, pattern", [
    (["--engine", "processes"], r"--engine does not apply to the group-size layout"),
    (["--checkpoint", "ck"], r"--checkpoint does not apply to the group-size layout"),
    (["--grid", "8"], r"--grid does not apply to the group-size layout"),
    (["--x", "px", "--y", "py"], r"give one input layout"),
])
def test_flags_of_other_layouts_are_refused_on_group_sizes(workdir, capsys, flags, pattern):
    assert re.search(pattern, _run(workdir, capsys, ARGV["groups"] + flags))


def test_compare_runs_tree_mechanisms_only(workdir, capsys):
    line = _run(workdir, capsys, ["compare", "c.csv", "-o", "cmp.csv", "--no-plot", "--levels", "state,county",
                                  "--count", "pop", "--observed-domain-public", "--epsilon", "1", "--seeds", "1",
                                  "--quiet", "--mechanisms", "inftda,htf"])
    assert "--mechanisms htf does not release a tree of counts" in line


def test_third_party_mechanisms_go_where_their_declared_input_says(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", dict(registry._EXTRA))  # undone after the test
    registry.register("my_tree_mech", lambda **kw: None, "a test mechanism", input="tree")
    registry.register("my_point_mech", lambda **kw: None, "a test mechanism", input="points", solver_shapes=["tree"])
    assert "my_tree_mech" in mechanisms_for("tree")
    assert "my_tree_mech" not in mechanisms_for("points") + mechanisms_for("groups")
    assert "my_point_mech" in mechanisms_for("points") and registry.info("my_point_mech").takes_solver
    with pytest.raises(ValueError, match="input must be one of"):
        registry.register("bad_mech", lambda **kw: None, input="cubes")
    with pytest.raises(ValueError, match="unknown problem shape 'cube'"):
        registry.register("bad_mech", lambda **kw: None, input="tree", solver_shapes=["cube"])


def test_the_mechanism_listing_shows_each_input(capsys):
    assert main(["mechanisms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:lines.index("")]}
    for names, label in ((TREE_MECHANISMS, "trees"), (POINT_MECHANISMS, "points"),
                         (GROUP_SIZE_MECHANISMS, "group sizes"), (tuple(OTHER_INPUT_MECHANISMS), "Python API")):
        for name in names:
            assert rows[name].split(None, 1)[1].startswith(label), rows[name]
