"""Error bands in hierdp.plot."""

import numpy as np
import pytest

import hierdp
from hierdp.mechanisms import InfTDA


def test_interval_figure_draws_every_level(tmp_path):
    edges = [("r", c) for c in "abc"] + [(c, f"{c}{i}") for c in "abc" for i in range(3)]
    tree = hierdp.Hierarchy.from_edges(edges, counts={f"{c}{i}": 10 * (i + 1) for c in "abc" for i in range(3)})
    f = InfTDA(rho=1.0).release(tree, seed=0).intervals(0.9, domain=tree, draws=30, seed=0)
    fig = hierdp.plot.interval_figure(f)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == f["level"].nunique()
    # one bar per node, spanning exactly [lower, upper]
    segs = visible[2].collections[0].get_segments()
    lv = f[f["level"] == 2].nlargest(30, "value")
    assert sorted((s[0][1], s[1][1]) for s in segs) == sorted(zip(lv["lower"].astype(float),
                                                                  lv["upper"].astype(float), strict=True))
    assert "bootstrap (estimate)" in fig._suptitle.get_text()
    fig.savefig(tmp_path / "bands.png")
    with pytest.raises(ValueError, match="lower"):
        hierdp.plot.interval_figure(f.drop(columns=["lower"]))


def test_interval_bands_fill_on_a_continuous_axis():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    art = hierdp.plot.interval_bands(ax, np.array([0.0, 1.0, 2.0]), [1, 2, 3], [2, 3, 5])
    assert art.get_paths()  # a filled band
