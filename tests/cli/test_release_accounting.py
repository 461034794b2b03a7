"""A fresh ``hierdp release`` without ``--seed`` is secure and says so; the accounting file sits
beside the output and ``hierdp.load_release`` reads it back equal (issue 20, items 1 and 4).

Oracles: the files themselves (the table read with pandas, the JSON with ``json``), the guarantee
recomputed by the mechanism from the same parameters, and the SHA-256 of the table."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

import hierdp
from hierdp.cli import main
from hierdp.release import Accounting, ReleaseFileError, TreeRelease

GEO = "region,city\nN,Biel/Bienne\nN,Turin\nN,Capri\nS,Bolzano/Bozen\nS,Naples\n"
DATA = "region,city,people\nN,Biel/Bienne,40\nN,Turin,25\nS,Bolzano/Bozen,30\nS,Naples,12\n"
ARGS = ["--levels", "region,city", "--count", "people", "--geo", "g.csv", "--epsilon", "1", "--quiet"]


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.csv").write_text(DATA)
    (tmp_path / "g.csv").write_text(GEO)
    return tmp_path


@pytest.mark.parametrize("out", ["r.csv", "r.parquet", "r.csv.gz"])
def test_a_release_without_a_seed_is_secure_and_its_accounting_reads_back_equal(folder: Path, out: str,
                                                                                capsys) -> None:
    assert main(["release", "c.csv", "-o", out, *ARGS]) == 0
    captured = capsys.readouterr()
    assert "randomness: secure (OS entropy, exact samplers; the default): suitable for publication" in captured.out
    assert "warning" not in captured.err  # the seeded-randomness warning is for --seed only
    side = folder / f"{out}.accounting.json"
    assert f"its accounting to {out}.accounting.json" in captured.out
    doc = json.loads(side.read_text())
    assert doc["randomness"] == {"mode": "secure", "seed": None, "publishable": True, "note": doc["randomness"]["note"]}
    assert doc["file"]["sha256"] == hashlib.sha256((folder / out).read_bytes()).hexdigest()
    assert doc["versions"]["hierdp"] == hierdp.__version__ and "numpy" in doc["versions"]
    assert doc["mechanism"] == "InfTDA" and doc["parameters"]["epsilon"] == 1.0
    assert [e["part"] for e in doc["ledger"]] == ["level 1 (region)", "level 2 (city)"]
    assert doc["public"]["domain"].startswith("declared")
    assert {g["calculus"] for g in doc["guarantees"]} >= {"zcdp", "approx"}

    rel = hierdp.load_release(out)
    assert isinstance(rel, TreeRelease) and rel.params["randomness"] == "secure"
    assert rel.accounting == Accounting.from_dict(doc["accounting"])  # the file's accounting, exactly
    ref = hierdp.mechanisms.create("inftda", epsilon=1.0, delta=1e-8)
    assert rel.guarantee == doc["guarantee"] and rel.accounting.total == ref.spec.budget
    assert hierdp.load_release(side) == rel  # by the table's or the accounting's name
    again = rel.save(folder / f"again{out[1:]}")
    assert hierdp.load_release(again) == rel
    # the table: one row per node of the declared domain, zeros included, level columns, parents by name
    table = rel.to_frame()
    assert len(table) == 1 + 2 + 5 and list(table.columns) == ["level", "level_name", "region", "city", "node",
                                                                "parent", "key", "value"]
    capri = table[table["city"] == "Capri"].iloc[0]
    assert capri["region"] == "N" and capri["parent"] == "N" and capri["node"] == "N/Capri"
    biel = table[table["node"] == "N/Biel/Bienne"].iloc[0]
    assert biel["city"] == "Biel/Bienne" and biel["region"] == "N"  # identifiers with "/" stay whole
    assert rel.check_consistency() == []
    if out.endswith(".parquet"):  # the same document travels inside the Parquet file
        import pyarrow.parquet as pq

        inside = json.loads(pq.read_schema(folder / out).metadata[b"hierdp.release"])
        assert inside["accounting"] == doc["accounting"] and inside["randomness"] == doc["randomness"]
        side.unlink()
        assert hierdp.load_release(out) == rel  # read from the metadata alone
    else:
        side.unlink()
        with pytest.raises(FileNotFoundError, match="accounting"):
            hierdp.load_release(out)


def test_a_seeded_release_says_so_in_its_accounting(folder: Path, capsys) -> None:
    assert main(["release", "c.csv", "-o", "r.csv", *ARGS, "--seed", "7"]) == 0
    captured = capsys.readouterr()
    assert "randomness: seeded (reproducible, not for publication), seed 7" in captured.out
    assert "drop --seed" in captured.err
    doc = json.loads((folder / "r.csv.accounting.json").read_text())
    assert doc["randomness"]["mode"] == "seeded" and doc["randomness"]["seed"] == "7"
    assert doc["randomness"]["publishable"] is False


def test_a_table_that_does_not_match_its_accounting_is_refused(folder: Path) -> None:
    assert main(["release", "c.csv", "-o", "r.csv", *ARGS]) == 0
    text = (folder / "r.csv").read_text()
    lines = text.splitlines()
    lines[-1] = lines[-1].rsplit(",", 1)[0] + ",999"  # a value edited after the release
    (folder / "r.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ReleaseFileError, match="SHA-256"):
        hierdp.load_release("r.csv")


def test_an_existing_accounting_file_is_not_overwritten_without_overwrite(folder: Path, capsys) -> None:
    (folder / "r.csv.accounting.json").write_text("{}")
    assert main(["release", "c.csv", "-o", "r.csv", *ARGS]) == 2
    assert "r.csv.accounting.json already exists" in capsys.readouterr().err
    assert not (folder / "r.csv").exists() and (folder / "r.csv.accounting.json").read_text() == "{}"
    assert main(["release", "c.csv", "-o", "r.csv", *ARGS, "--overwrite"]) == 0
    assert json.loads((folder / "r.csv.accounting.json").read_text())["format"] == "hierdp-release"
    assert sorted(p.name for p in folder.iterdir()) == ["c.csv", "g.csv", "r.csv", "r.csv.accounting.json"]


def test_every_layout_writes_its_accounting(folder: Path) -> None:
    (folder / "hh.csv").write_text("hh,state,size\nh1,S1,2\nh2,S1,1\nh3,S2,3\n")
    (folder / "s.csv").write_text("state\nS1\nS2\n")
    (folder / "p.csv").write_text("x,y\n1,1\n2,3\n7,2\n")
    runs = {
        "sizes.parquet": ["hh.csv", "--unit", "hh", "--levels", "state", "--size", "size", "--max-size", "4",
                          "--geo", "s.csv", "--epsilon", "1"],
        "leaves.csv": ["p.csv", "--x", "x", "--y", "y", "--box", "0", "8", "0", "4", "--grid", "4x8", "--epsilon",
                       "1", "--mechanism", "quadtree", "--param", "height=2"],
    }
    for out, args in runs.items():
        assert main(["release", args[0], "-o", out, *args[1:], "--quiet"]) == 0
        rel = hierdp.load_release(out)
        assert rel.params["randomness"] == "secure"
        table = pd.read_parquet(out) if out.endswith(".parquet") else pd.read_csv(out)
        assert len(table) == len(rel.to_frame())
        assert rel == hierdp.load_release(f"{out}.accounting.json")
