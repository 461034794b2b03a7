"""``python -m experiments.bench.census_pl94``, section 4 at a tiny size: the PL94-shaped release on
a 2-worker Dask LocalCluster is the serial release (the oracle: the same data, strategy and seed,
released in another process), compared here from the two saved arrays, and the section prints the
figures it promises (per geolevel wall and CPU, the workers' CPU and peak memory, the equality)."""

from __future__ import annotations

import numpy as np

from experiments.bench import census_pl94


def test_the_dask_section_releases_what_the_serial_release_does(tmp_path, capsys):
    blocks = 200  # 8 block-level parents (one solve batch of 2,048 children: one Dask task per geolevel;
    # tests/scale/test_census_engines.py splits geolevels between workers)
    figures = census_pl94.dask_section([blocks], seed=3, workers=2, out=tmp_path)
    assert len(figures) == 1 and "error" not in figures[0], figures
    serial, dask = np.load(tmp_path / f"serial_{blocks}.npy"), np.load(tmp_path / f"dask_{blocks}.npy")
    assert serial.dtype.kind == "i" and serial.shape[1] == 2016 and serial.min() >= 0 and serial.sum() > 0
    assert np.array_equal(serial, dask)
    f = figures[0]
    assert f["identical"] and f["differing"] == 0
    d = f["dask"]
    assert len(d["worker_cpu_s"]) == 2 and len(d["worker_peak_mib"]) == 2
    assert all(c > 0 for c in d["worker_cpu_s"].values()) and all(m > 0 for m in d["worker_peak_mib"].values())
    assert [lv["geolevel"] for lv in d["levels"]] == [lv["geolevel"] for lv in f["serial"]["levels"]]
    out = capsys.readouterr().out
    assert "serial and Dask releases identical" in out and out.rstrip().endswith(": True")
    assert "busiest worker CPU s" in out and "workers" in out
