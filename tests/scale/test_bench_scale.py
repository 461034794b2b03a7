"""The census-scale benchmark end to end at a tiny scale: the generated persons are the blocks'
populations (counted back from the Parquet files), the tree's root is the population, and the
seeded serial and Dask releases it compares are equal."""

from __future__ import annotations

import pandas as pd

from experiments.bench import scale as bench


def test_the_scale_benchmark_runs_end_to_end_at_a_tiny_scale(tmp_path, dask_client, capsys):
    figures = bench.run(scale=2e-5, out=tmp_path / "run", chunk_rows=2_000, client=dask_client,
                        serial_in_process=True, keep=True)
    sizes = figures["generate"]["sizes"]
    assert sizes == {"state": 52, "county": 52, "tract": 52, "block": 160}
    persons = pd.read_parquet(tmp_path / "run" / "persons")
    geo = pd.read_parquet(tmp_path / "run" / "geo.parquet")
    assert len(persons) == figures["generate"]["persons"] and figures["generate"]["files"] >= 2
    # every person's coarser ids are those of its block in the geography
    merged = persons.merge(geo, on="block", suffixes=("", "_geo"))
    assert len(merged) == len(persons)
    assert (merged[["state", "county", "tract"]].to_numpy() == merged[["state_geo", "county_geo", "tract_geo"]]
            .to_numpy()).all()
    assert figures["equal"] and figures["serial"]["consistent"] and figures["dask"]["consistent"]
    assert figures["serial"]["released"][0] == 1 and figures["dask"]["parquet_parts"] >= 5
    out = capsys.readouterr().out
    assert "seeded serial and Dask releases equal (every level's keys, parents, values): True" in out


def test_the_census_part_of_the_benchmark_compares_equal_releases(dask_client, capsys):
    figures = bench.census_run(300, dask_client, restart=False)
    assert figures["equal"] and sum(r["parents solved"] for r in figures["levels"]) > 0
    assert "seeded serial and Dask census_topdown releases equal: True" in capsys.readouterr().out
