"""``hierdp solvers --limits``: every registered plug-in's limits, readable (issue 15, item 8)."""

from __future__ import annotations

import re

import hierdp
from hierdp.cli import main


def test_solvers_limits_lists_every_plug_in_with_its_limits(capsys) -> None:
    assert main(["solvers", "--limits"]) == 0
    out = capsys.readouterr().out
    blocks = dict(re.findall(r"^(\S+): .*\n((?:  .*\n?)*)", out, flags=re.M))
    assert list(blocks) == hierdp.solvers.names()  # one block per plug-in, in auto's order
    # float64 holds every integer up to 2^53: intopt's integer range is 2^52, projection's
    # real-valued one 2^44 (a unit must stay above the spacing of the doubles)
    assert "max_magnitude: 2^52" in blocks["intopt"] and "max_magnitude: 2^44" in blocks["projection"]
    heuristics = [name for name, text in blocks.items() if "HEURISTIC" in text]
    assert heuristics == ["paper_round"]
    for name, text in blocks.items():
        assert "time_limit:" in text, f"{name} does not say how it honours a time limit"
        assert "tolerance:" in text, f"{name} does not state its tolerance"


def test_solvers_without_limits_is_the_short_listing(capsys) -> None:
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["solver", "ok"] and "max_magnitude" not in out
