"""The memory bound of the command line (issue 20, item 11): every registered point and group-size
mechanism has a measured figure (``python -m experiments.bench.cli_memory`` measures them), and a
release beyond the bound is refused from its public parameters before the input is read."""

from __future__ import annotations

import pytest

from hierdp.cli import main
from hierdp.cli.memory import GROUP_BYTES_PER_CELL, MEMORY_BOUND, POINT_BYTES_PER_CELL, estimate_bytes
from hierdp.mechanisms import registry


def test_every_point_and_group_size_mechanism_has_a_measured_figure() -> None:
    assert set(registry.names(input="points")) <= set(POINT_BYTES_PER_CELL)
    assert set(registry.names(input="group_sizes")) <= set(GROUP_BYTES_PER_CELL)
    # an unknown (third-party) mechanism is estimated with its layout's largest figure
    assert estimate_bytes(POINT_BYTES_PER_CELL, "someone_elses", 10) == estimate_bytes(
        POINT_BYTES_PER_CELL, max(POINT_BYTES_PER_CELL, key=POINT_BYTES_PER_CELL.get), 10)


@pytest.mark.parametrize("argv, flag", [
    (["release", "p.csv", "-o", "o.csv", "--x", "x", "--y", "y", "--box", "0", "1", "0", "1", "--grid", "8192x8192",
      "--epsilon", "1", "--seed", "0"], "--grid 8192x8192"),
    (["release", "h.csv", "-o", "o.csv", "--unit", "h", "--levels", "s,c", "--size", "n", "--max-size", "5000000",
      "--observed-domain-public", "--epsilon", "1", "--seed", "0"], "--max-size 5,000,000"),
])
def test_a_release_beyond_the_bound_is_refused_before_the_input_is_read(tmp_path, monkeypatch, capsys, argv,
                                                                        flag) -> None:
    import hierdp.cli.io as io

    (tmp_path / "p.csv").write_text("x,y\n0.5,0.5\n")
    (tmp_path / "h.csv").write_text("h,s,c,n\na,1,11,2\n")
    monkeypatch.chdir(tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("the input was read")

    monkeypatch.setattr(io, "read_table", never)
    for module in ("hierdp.cli.points", "hierdp.cli.group_sizes"):
        monkeypatch.setattr(f"{module}.read_table", never)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and f"more than the {MEMORY_BOUND / 2**30:.1f} GiB" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv", "p.csv"]
