"""Parquet datasets read with Dask: the aggregate equals pandas' group-by of all the rows (whatever
the record-batch size), the tree equals the one built from the concatenated frame, and files
that disagree on a column, lack one, or hold bad rows are refused naming the file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import CountError, MissingValueError
from hierdp.scale import DatasetSchemaError, LevelTree, aggregate_parquet, dataset
from hierdp.scale.dataset import parquet_files


@pytest.fixture()
def persons(tmp_path):
    rng = np.random.default_rng(3)
    frames = []
    for i in range(4):
        n = 500 + 100 * i
        f = pd.DataFrame({"state": rng.integers(0, 3, n).astype(np.int32), "county": rng.integers(0, 4, n),
                          "w": rng.integers(0, 6, n)})
        f["county"] = f["state"] * 10 + f["county"]
        f.to_parquet(tmp_path / f"part-{i}.parquet", index=False)
        frames.append(f)
    (tmp_path / "_SUCCESS").write_text("")  # marker files are skipped
    return tmp_path, pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("batch", [7, 1 << 22])
def test_the_aggregate_is_the_group_by_of_all_rows(persons, monkeypatch, batch):
    path, whole = persons
    monkeypatch.setattr(dataset, "BATCH_ROWS", batch)
    for count in ("w", None):
        got = aggregate_parquet(path, ["state", "county"], count).sort_values(["state", "county"])
        expected = whole.groupby(["state", "county"]).agg(count=(count, "sum") if count else ("w", "size"))
        np.testing.assert_array_equal(got["count"].to_numpy(), expected["count"].to_numpy())
        np.testing.assert_array_equal(got[["state", "county"]].to_numpy(), np.stack(expected.index.to_numpy()).tolist())


def test_the_tree_of_a_dataset_is_the_tree_of_its_rows(persons, dask_client):
    path, whole = persons
    domain = pd.DataFrame({"state": np.repeat([0, 1, 2, 3], 4),
                           "county": [s * 10 + c for s in range(4) for c in range(4)]})
    a = LevelTree.from_parquet(path, ["state", "county"], "w", domain=domain, client=dask_client)
    b = LevelTree.from_frame(whole, ["state", "county"], "w", domain=domain)
    assert a.fingerprint() == b.fingerprint()
    assert a.level_size(1) == 4 and a.root_count == int(whole["w"].sum())  # state 3 is in the domain only
    c = LevelTree.from_parquet(path, ["state", "county"], observed_domain_public=True)
    assert c.root_count == len(whole) and c.domain_source == "observed" and c.domain_assumption


def test_files_that_disagree_on_a_column_are_refused(persons):
    path, _ = persons
    pd.DataFrame({"state": ["0"], "county": [1], "w": [1]}).to_parquet(path / "part-9.parquet", index=False)
    with pytest.raises(DatasetSchemaError, match=r"column 'state'.*part-0.parquet has type int32.*part-9.parquet "
                                                 r"has type (string|large_string)"):
        aggregate_parquet(path, ["state", "county"], "w")
    (path / "part-9.parquet").unlink()
    pd.DataFrame({"state": [0], "weight": [1], "county": [1]}).to_parquet(path / "part-9.parquet", index=False)
    with pytest.raises(DatasetSchemaError, match=r"part-9.parquet has no column 'w'"):
        aggregate_parquet(path, ["state", "county"], "w")
    (path / "part-9.parquet").write_text("state,county\n0,1\n")
    with pytest.raises(DatasetSchemaError, match=r"cannot read the schema of .*part-9.parquet"):
        aggregate_parquet(path, ["state", "county"], "w")


def test_bad_rows_are_named_with_their_file(persons):
    path, _ = persons
    pd.DataFrame({"state": np.array([0, 1], np.int32), "county": [1, 2], "w": [3, -2]}).to_parquet(
        path / "part-5.parquet", index=False)
    with pytest.raises(CountError, match=r"part-5.parquet: .*row 1"):
        aggregate_parquet(path, ["state", "county"], "w")
    pd.DataFrame({"state": np.array([0, 1], np.int32), "county": [1.0, None], "w": [3, 2]}).to_parquet(
        path / "part-5.parquet", index=False)
    with pytest.raises(DatasetSchemaError):  # county became float in this file
        aggregate_parquet(path, ["state", "county"], "w")


def test_missing_level_values_are_refused(tmp_path):
    pd.DataFrame({"state": ["a", None, "b"], "w": [1, 2, 3]}).to_parquet(tmp_path / "p.parquet", index=False)
    with pytest.raises(MissingValueError, match=r"p.parquet: level column 'state' has a missing value .* row 1"):
        aggregate_parquet(tmp_path, ["state"], "w")


def test_empty_and_missing_datasets(tmp_path):
    with pytest.raises(FileNotFoundError):
        parquet_files(tmp_path / "nothing")
    from hierdp.hierarchy import EmptyInputError

    with pytest.raises(EmptyInputError, match=r"holds no .parquet files"):
        parquet_files(tmp_path)


def test_a_relative_dataset_path_is_read_on_workers_in_another_folder(tmp_path, monkeypatch, dask_client):
    """The cluster's worker processes started elsewhere: a relative path is resolved by the caller."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "persons").mkdir()
    rows = pd.DataFrame({"state": ["s1", "s1", "s2"], "county": ["a", "b", "c"]})
    rows.iloc[:2].to_parquet("persons/part-0.parquet")
    rows.iloc[2:].to_parquet("persons/part-1.parquet")
    assert dask_client.run(lambda: __import__("os").getcwd()) != {}  # the workers run elsewhere
    out = aggregate_parquet("persons", ["state", "county"], client=dask_client)
    assert sorted(out["county"]) == ["a", "b", "c"] and int(out.iloc[:, -1].sum()) == 3
    bad = pd.DataFrame({"state": ["s1", None], "county": ["a", "b"]})
    bad.to_parquet("persons/part-2.parquet")
    with pytest.raises(MissingValueError, match=r"persons/part-2\.parquet"):  # messages keep the given name
        aggregate_parquet("persons", ["state", "county"], client=dask_client)
