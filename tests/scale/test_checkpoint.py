"""Checkpoint and restart: a run interrupted after level k and resumed equals the uninterrupted run
(values and accounting), nothing is spent twice, finished levels are never redrawn (secure mode
included), and a checkpoint of another input, other parameters or another seed - or a missing or
damaged one - is refused before any noise."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hierdp.mechanisms import InfTDA, TDA, TopDownMechanism
from hierdp.mechanisms.topdown import PerNodePlan
from hierdp.privacy import Accountant, Budget, BudgetExceeded, PrivacyParameterError
from hierdp.scale import CheckpointError, DaskEngine, read_level
from hierdp.scale.checkpoint import MANIFEST

from scale.scale_helpers import random_tree, same_levels

TREE = random_tree(seed=1)


class _Interrupt(BaseException):
    """Stands for the process being killed: not an Exception, so nothing in the engine catches it."""


def _interrupt_at(monkeypatch, level: int) -> None:
    """Make the run die while it computes ``level`` (after that level's spend, like a real kill)."""
    original = TopDownMechanism._process_chunk

    def dying(self, tree, L, *args, **kwargs):
        if level == L + 1:
            raise _Interrupt(f"killed in level {level}")
        return original(self, tree, L, *args, **kwargs)

    monkeypatch.setattr(TopDownMechanism, "_process_chunk", dying)


def _committed(ck: Path) -> list[int]:
    return [e["level"] for e in json.loads((ck / MANIFEST).read_text())["levels"]]


@pytest.mark.parametrize("k", [0, 2, 3])
def test_resume_after_an_interruption_equals_the_uninterrupted_run(tmp_path, monkeypatch, k):
    full = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=7)
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_at(m, k + 1)
        with pytest.raises(_Interrupt):
            InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=7, checkpoint=ck)
    assert _committed(ck) == list(range(k + 1))
    resumed = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, resume=ck)  # the checkpoint's seed
    assert same_levels(full, resumed)
    assert resumed.accounting.spends == full.accounting.spends
    assert resumed.accounting.spent == full.accounting.spent == full.accounting.total
    assert _committed(ck) == list(range(TREE.n_levels))
    # the same seed given again is accepted too, and a completed checkpoint resumes to the same release
    again = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=7, resume=ck)
    assert same_levels(full, again) and again.accounting.spends == full.accounting.spends


def test_the_checkpoint_is_a_parquet_dataset_of_the_levels(tmp_path):
    pd = pytest.importorskip("pandas")
    ck = tmp_path / "ck"
    rel = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=3, checkpoint=ck)
    frame = pd.read_parquet(ck)  # Hive partitions level=L; the manifest (_...) is skipped
    manifest = json.loads((ck / MANIFEST).read_text())
    assert manifest["complete"] and manifest["randomness"] == "seeded"
    for L, lv in enumerate(rel.levels):
        rows = frame[frame["level"].astype(int) == L]
        np.testing.assert_array_equal(rows["key"].to_numpy(), lv.keys)
        np.testing.assert_array_equal(rows["value"].to_numpy(), lv.values)
        _keys, parent, _values, _ = read_level(ck, manifest["levels"][L])
        np.testing.assert_array_equal(parent, lv.parent)


def test_a_caller_accountant_is_charged_once_per_level_measured(tmp_path, monkeypatch):
    rho = Budget.zcdp(0.6)
    with pytest.raises(BudgetExceeded):  # refused before any noise: no checkpoint is left behind
        InfTDA(rho=0.6).release(TREE, seed=4, checkpoint=tmp_path / "refused", accountant=Accountant(Budget.zcdp(0.1)))
    assert not (tmp_path / "refused").exists()
    full = InfTDA(rho=0.6).release(TREE, seed=4)
    per_level = [s.budget for s in full.accounting.spends]
    ck = tmp_path / "ck"
    first = Accountant(Budget.zcdp(1.0))
    with monkeypatch.context() as m:
        _interrupt_at(m, 3)
        with pytest.raises(_Interrupt):
            InfTDA(rho=0.6).release(TREE, seed=4, checkpoint=ck, accountant=first)
    # levels 1, 2 finished; level 3's spend was recorded before its noise, then the run died
    assert first.spent == per_level[0] + per_level[1] + per_level[2]
    second = Accountant(Budget.zcdp(1.0))
    resumed = InfTDA(rho=0.6).release(TREE, resume=ck, accountant=second)
    assert second.spent == per_level[2] + per_level[3]  # only the levels this run measured
    assert resumed.accounting.spent == rho and resumed.accounting.spends == full.accounting.spends
    # an (epsilon, delta) accountant was charged the whole release by the first run: refused
    with pytest.raises(PrivacyParameterError, match="whole guarantee once"):
        InfTDA(rho=0.6).release(TREE, resume=ck, accountant=Accountant(Budget.approx(5.0, 1e-6)))


def test_a_secure_resume_never_redraws_finished_levels(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_at(m, 3)
        with pytest.raises(_Interrupt):
            InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, checkpoint=ck)
    manifest = json.loads((ck / MANIFEST).read_text())
    assert manifest["randomness"] == "secure" and manifest["noise_key"] is None
    before = [read_level(ck, e) for e in manifest["levels"]]
    resumed = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, resume=ck)
    for L, (keys, _parent, values, _) in enumerate(before):  # levels 0..2 exactly as released before
        np.testing.assert_array_equal(resumed.levels[L].keys, keys)
        np.testing.assert_array_equal(resumed.levels[L].values, values)
    assert resumed.check_consistency() == [] and resumed.params["randomness"] == "secure"
    ref = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE)
    parts = [(s.label, s.budget) for s in resumed.accounting.spends]
    expected = [(s.label, s.budget) for s in ref.accounting.spends]
    # level 3 was drawn by the run that died in it, then drawn again: both draws are stated
    assert parts == [*expected[:2], (expected[2][0] + " (discarded draw)", expected[2][1]), *expected[2:]]
    assert resumed.accounting.total == ref.accounting.total + expected[2][1] == resumed.accounting.spent
    # resuming the complete checkpoint draws nothing: the same values again
    again = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, resume=ck)
    assert same_levels(resumed, again)
    # a resume that says nothing about randomness follows the checkpoint's (secure by default)
    assert InfTDA(epsilon=1.0, delta=1e-8).release(TREE, resume=ck).params["randomness"] == "secure"
    # a secure checkpoint cannot be resumed with seeded randomness, nor the reverse
    for seeded in ({"secure": False}, {"seed": 0}):
        with pytest.raises(CheckpointError, match="secure randomness"):
            InfTDA(epsilon=1.0, delta=1e-8).release(TREE, resume=ck, **seeded)


def _one_more(tree):
    """The same tree with one more unit in its last leaf (parents re-aggregated)."""
    counts = np.where(tree.is_leaf, tree.counts, np.nan)
    counts[tree.leaves[-1]] += 1
    return tree.with_counts(counts)


def test_resuming_other_parameters_input_or_seed_is_refused(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_at(m, 2)
        with pytest.raises(_Interrupt):
            InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=7, checkpoint=ck)
    acct = Accountant(Budget.zcdp(1.0))
    cases = [
        (InfTDA(epsilon=2.0, delta=1e-8), TREE, {}, r"other parameters: epsilon \(checkpoint: 1.0, now: 2.0\)"),
        (InfTDA(epsilon=1.0, delta=1e-8, order="descending"), TREE, {}, "other parameters: .*order"),
        (TDA("linf", epsilon=1.0, delta=1e-8), TREE, {}, "other parameters: .*mechanism"),
        (InfTDA(epsilon=1.0, delta=1e-8, contributions=2), TREE, {}, "other parameters: .*contributions"),
        (InfTDA(epsilon=1.0, delta=1e-8), random_tree(seed=2), {}, "another input"),
        (InfTDA(epsilon=1.0, delta=1e-8), _one_more(TREE), {}, "another input"),
        (InfTDA(epsilon=1.0, delta=1e-8), TREE, {"seed": 8}, r"another seed \(7\)"),
        (InfTDA(epsilon=1.0, delta=1e-8), TREE, {"secure": True}, "seeded randomness"),
    ]
    for mech, tree, kw, pattern in cases:
        with pytest.raises(CheckpointError, match=pattern):
            mech.release(tree, resume=ck, accountant=acct, **kw)
    assert acct.spent.is_zero  # nothing was charged: every refusal came before any noise
    assert _committed(ck) == [0, 1]  # and the checkpoint is untouched


def test_a_missing_damaged_or_occupied_checkpoint_is_refused(tmp_path):
    mech = InfTDA(epsilon=1.0, delta=1e-8)
    with pytest.raises(CheckpointError, match="not a directory"):
        mech.release(TREE, resume=tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=f"{MANIFEST} is missing"):
        mech.release(TREE, resume=tmp_path / "empty")
    ck = tmp_path / "ck"
    mech.release(TREE, seed=1, checkpoint=ck)
    with pytest.raises(CheckpointError, match="already holds a checkpoint"):
        mech.release(TREE, seed=1, checkpoint=ck)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="not empty"):
        mech.release(TREE, seed=1, checkpoint=tmp_path / "busy")
    with pytest.raises(CheckpointError, match="give one directory"):
        mech.release(TREE, seed=1, checkpoint=tmp_path / "a", resume=ck)
    part = next((ck / "level=2").glob("*.parquet"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"level 2 file part-00000.parquet was altered"):
        mech.release(TREE, resume=ck)
    part.unlink()
    with pytest.raises(CheckpointError, match=r"level 2 file part-00000.parquet is missing"):
        mech.release(TREE, resume=ck)
    manifest = json.loads((ck / MANIFEST).read_text())
    manifest["version"] = 99
    (ck / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="format version 99"):
        mech.release(TREE, resume=ck)
    (ck / MANIFEST).write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot read"):
        mech.release(TREE, resume=ck)


def test_dask_checkpoint_parts_resume_on_the_serial_engine(tmp_path, monkeypatch, dask_client):
    full = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=9)
    ck = tmp_path / "ck"
    rel = InfTDA(epsilon=1.0, delta=1e-8, engine=DaskEngine(dask_client, partition_children=40)).release(
        TREE, seed=9, checkpoint=ck)
    assert same_levels(full, rel)
    parts = sorted(p.name for p in (ck / "level=4").glob("*.parquet"))
    assert len(parts) >= 3 and parts[0] == "part-00000.parquet"  # written by the workers, one per partition
    # drop the last two committed levels from the manifest: a run that died after level 2
    manifest = json.loads((ck / MANIFEST).read_text())
    manifest["levels"] = manifest["levels"][:3]
    manifest["spends"] = manifest["spends"][:2]
    manifest["complete"] = False
    (ck / MANIFEST).write_text(json.dumps(manifest))
    resumed = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, resume=ck)
    assert same_levels(full, resumed) and resumed.accounting.spends == full.accounting.spends
    assert not (ck / "_staging").exists()


def test_per_node_plans_and_unbounded_roots_resume_exactly(tmp_path, monkeypatch):
    tree = random_tree((3, 3, 4, 4), seed=3)
    names = np.asarray(tree.names).astype(str)

    def fractions(level, keys):  # the root measured; below it, nodes ending in .1 bypassed
        return np.where(np.char.endswith(names[keys], ".1"), 0.0, 0.2)

    def make():
        return TopDownMechanism(rho=1.0, objective="l2", solver="costtable", bounded=False,
                                plan=PerNodePlan(fractions, [0.2, 0.4, 0.6, 0.8, 1.0]))

    full = make().release(tree, seed=5)
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_at(m, 3)
        with pytest.raises(_Interrupt):
            make().release(tree, seed=5, checkpoint=ck)
    resumed = make().release(tree, resume=ck)
    assert same_levels(full, resumed) and resumed.accounting.spends == full.accounting.spends


SCRIPT = textwrap.dedent('''
    import os, signal, sys
    from hierdp.mechanisms.topdown import TopDownMechanism
    original = TopDownMechanism._process_chunk
    def killed(self, tree, L, *a, **k):
        if L + 1 == int(os.environ["KILL_AT_LEVEL"]):
            os.kill(os.getpid(), signal.SIGKILL)   # no cleanup, no exception handler: a real kill
        return original(self, tree, L, *a, **k)
    TopDownMechanism._process_chunk = killed
    from hierdp.cli import main
    sys.exit(main(sys.argv[1:]))
''')


@pytest.mark.parametrize("mechanism,engine", [("inftda", "serial"), ("tda_linf", "processes")])
def test_a_killed_command_line_run_resumes_to_the_uninterrupted_output(tmp_path, mechanism, engine):
    """SIGKILL in level 3 of a serial run; the resume (on the serial engine, or on a process pool:
    other chunks, so a general solver's batches differ) writes the uninterrupted file, byte for byte."""
    from hierdp.cli import main

    frame = TREE.to_frame()
    leaves = frame[frame["level"] == TREE.n_levels - 1]
    parts = leaves["node"].str.split(".", expand=True)
    data = parts.iloc[:, 1:].set_axis([f"l{i}" for i in range(1, TREE.n_levels)], axis=1)
    data["n"] = leaves["count"].to_numpy()
    data.to_csv(tmp_path / "data.csv", index=False)
    data.drop(columns="n").to_csv(tmp_path / "geo.csv", index=False)
    common = [str(tmp_path / "data.csv"), "--levels", "l1,l2,l3,l4", "--count", "n", "--geo", str(tmp_path / "geo.csv"),
              "--epsilon", "1", "--seed", "21", "--quiet", "--mechanism", mechanism]
    assert main(["release", *common[:1], "-o", str(tmp_path / "full.csv"), *common[1:]]) == 0
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "KILL_AT_LEVEL": "3"}
    proc = subprocess.run([sys.executable, str(script), "release", common[0], "-o", str(tmp_path / "out.csv"),
                           *common[1:], "--checkpoint", str(tmp_path / "ck")], env=env, capture_output=True,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert not (tmp_path / "out.csv").exists()  # no output presented as a release
    assert _committed(tmp_path / "ck") == [0, 1, 2]
    resumed = ["release", common[0], "-o", str(tmp_path / "resumed.csv"), *[a for a in common[1:] if a not in
                                                                         ("--seed", "21")], "--resume",
               str(tmp_path / "ck"), "--engine", engine]
    assert main(resumed) == 0
    assert (tmp_path / "resumed.csv").read_bytes() == (tmp_path / "full.csv").read_bytes()
