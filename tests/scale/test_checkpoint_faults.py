"""Checkpoints under faults and concurrency (issue 20, items 3, 8; reproducers P5, P11, C4, C5).

* A secure run whose level stopped after its noise (a solver time-out), resumed - once or after a
  second failure - states every draw it made: the resumed release's guarantee equals the
  composition of the draws a spy on the sampler counted (oracle: rho = Delta^2 / (2 sigma^2) of
  each draw, with Delta^2 = 2 for one record moved under bounded neighbours).
* One run per checkpoint: a resume while another run holds the checkpoint is refused before any
  noise (in this process, and across processes through the command line); a run killed with
  SIGKILL releases its lock at once.
* The manifest holds no plain fingerprint of the counts: keyed with a per-checkpoint salt, two
  checkpoints of the same data differ, and the neighbouring dataset is still refused on resume.
* The time limit is not part of a checkpoint's identity: a run stopped at its time limit resumes
  with a longer one (Python API and command line, exit 3 then 0).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from hierdp.mechanisms import InfTDA, ReleaseAborted, TopDownMechanism
from hierdp.privacy import Accountant, Budget
from hierdp.privacy.noise import DiscreteGaussianNoise
from hierdp.scale import CheckpointError
from hierdp.scale.checkpoint import LOCK, MANIFEST, CheckpointLock
from hierdp.scale.fingerprint import tree_fingerprint
from hierdp.solvers.base import SolverFailed

from scale.scale_helpers import random_tree, same_levels

TREE = random_tree(seed=1)


@pytest.fixture
def draws(monkeypatch):
    """Every discrete Gaussian draw made (its sigma^2 and size), in order."""
    seen: list[tuple[float, int]] = []
    original = DiscreteGaussianNoise.draw

    def spy(self, parameter, size, rng):
        seen.append((float(parameter), int(np.prod(size))))
        return original(self, parameter, size, rng)

    monkeypatch.setattr(DiscreteGaussianNoise, "draw", spy)
    return seen


def _time_out_at(monkeypatch, level: int, times: int) -> list[int]:
    """Make the solve of ``level`` stop at its time limit the first ``times`` times (after its noise)."""
    original = TopDownMechanism._process_chunk
    count = [0]

    def chunk(self, tree, L, *args, **kwargs):
        if level == L + 1 and count[0] < times:
            count[0] += 1

            def timed_out(*a, **k):
                raise SolverFailed("highs", "time_limit", "time limit reached")

            self._solve_level = timed_out
            try:
                return original(self, tree, L, *args, **kwargs)
            finally:
                del self._solve_level
        return original(self, tree, L, *args, **kwargs)

    monkeypatch.setattr(TopDownMechanism, "_process_chunk", chunk)
    return count


def _rho_of_draws(draws: list[tuple[float, int]]) -> float:
    return sum(2.0 / (2.0 * sigma2) for sigma2, _ in draws)  # Delta_2^2 = 2: one record moved


@pytest.mark.parametrize("failures", [1, 2])
def test_a_resumed_secure_release_states_every_draw_made(tmp_path, monkeypatch, draws, failures):
    ck = tmp_path / "ck"
    mech = InfTDA(epsilon=1.0, delta=1e-8, secure=True)
    count = _time_out_at(monkeypatch, 3, failures)
    with pytest.raises(ReleaseAborted, match="level 3") as info:
        mech.release(TREE, checkpoint=ck)
    assert "time_limit" in str(info.value)
    for _ in range(failures - 1):  # resumed, and the level stops again
        with pytest.raises(ReleaseAborted, match="level 3"):
            InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, resume=ck)
    assert count[0] == failures
    resumed = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, resume=ck)
    assert resumed.check_consistency() == []
    # levels 1, 2 once; level 3 failures + 1 times; level 4 once
    assert len(draws) == 4 + failures
    acc = resumed.accounting
    per_level = Fraction(mech.spec.budget.exact_parameters["rho"]) / 4
    assert acc.total.calculus == "zcdp"
    assert Fraction(acc.total.exact_parameters["rho"]) == per_level * (4 + failures)  # exact composition
    assert acc.spent == acc.total
    assert acc.guarantee("zcdp").parameters["rho"] == pytest.approx(_rho_of_draws(draws), rel=1e-9)
    assert acc.guarantee("zcdp").parameters["rho"] >= _rho_of_draws(draws) * (1 - 1e-12)  # never less
    labels = [s.label for s in acc.spends]
    assert labels.count("level 3 (level3) (discarded draw)") == failures
    assert labels.count("level 3 (level3)") == 1
    assert "(discarded draw)" in resumed.accounting_text()
    manifest = json.loads((ck / MANIFEST).read_text())
    assert manifest["pending"] is None and len(manifest["discarded"]) == failures
    # the complete checkpoint resumes to the same release and the same accounting
    again = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(TREE, resume=ck)
    assert same_levels(resumed, again) and again.accounting.total == acc.total


def test_a_seeded_resume_after_a_time_out_is_the_uninterrupted_release(tmp_path, monkeypatch):
    full = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=5)
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _time_out_at(m, 3, 1)
        with pytest.raises(ReleaseAborted):
            InfTDA(epsilon=1.0, delta=1e-8).release(TREE, seed=5, checkpoint=ck)
    resumed = InfTDA(epsilon=1.0, delta=1e-8).release(TREE, resume=ck)
    # the redraw is the same draw (counter-based noise): nothing more to state
    assert same_levels(full, resumed) and resumed.accounting.spends == full.accounting.spends
    assert json.loads((ck / MANIFEST).read_text())["discarded"] == []


def test_a_checkpoint_in_use_is_refused_before_any_noise(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _time_out_at(m, 2, 1)
        with pytest.raises(ReleaseAborted):
            InfTDA(rho=0.5, secure=True).release(TREE, checkpoint=ck)
    holder = CheckpointLock.acquire(ck)  # another run holds it
    acc = Accountant(Budget.zcdp(1.0))
    before = (ck / MANIFEST).read_bytes()
    with pytest.raises(CheckpointError, match=rf"in use by another run \(process {os.getpid()}\)"):
        InfTDA(rho=0.5, secure=True).release(TREE, resume=ck, accountant=acc)
    assert acc.spent.is_zero and (ck / MANIFEST).read_bytes() == before
    holder.release()
    fresh = tmp_path / "fresh"  # a new run into a directory another run is starting in
    fresh.mkdir()
    other = CheckpointLock.acquire(fresh)
    with pytest.raises(CheckpointError, match="in use by another run"):
        InfTDA(rho=0.5, secure=True).release(TREE, checkpoint=fresh, accountant=acc)
    other.release()
    assert acc.spent.is_zero
    rel = InfTDA(rho=0.5, secure=True).release(TREE, resume=ck, accountant=acc)
    assert rel.check_consistency() == []
    # the run gave its lock up when it ended: the lock can be taken again
    CheckpointLock.acquire(ck).release()


def test_a_new_checkpoint_holds_its_lock_for_the_run(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    seen = []
    original = TopDownMechanism._process_chunk

    def chunk(self, tree, L, *args, **kwargs):
        try:
            CheckpointLock.acquire(ck).release()
            seen.append("free")
        except CheckpointError:
            seen.append("held")
        return original(self, tree, L, *args, **kwargs)

    monkeypatch.setattr(TopDownMechanism, "_process_chunk", chunk)
    InfTDA(rho=0.5).release(TREE, seed=1, checkpoint=ck)
    assert seen and set(seen) == {"held"}
    CheckpointLock.acquire(ck).release()  # released at the end


HOLD = textwrap.dedent('''
    import os, sys, time
    from hierdp.mechanisms.topdown import TopDownMechanism
    original = TopDownMechanism._process_chunk
    def slow(self, tree, L, *a, **k):
        if L + 1 == int(os.environ["HOLD_AT_LEVEL"]):
            print("HOLDING", flush=True)
            time.sleep(600)
        return original(self, tree, L, *a, **k)
    TopDownMechanism._process_chunk = slow
    from hierdp.cli import main
    sys.exit(main(sys.argv[1:]))
''')


def _files(tmp_path: Path) -> list[str]:
    frame = TREE.to_frame()
    leaves = frame[frame["level"] == TREE.n_levels - 1]
    parts = leaves["node"].str.split(".", expand=True)
    data = parts.iloc[:, 1:].set_axis([f"l{i}" for i in range(1, TREE.n_levels)], axis=1)
    data["n"] = leaves["count"].to_numpy()
    data.to_csv(tmp_path / "data.csv", index=False)
    data.drop(columns="n").to_csv(tmp_path / "geo.csv", index=False)
    return [str(tmp_path / "data.csv"), "--levels", "l1,l2,l3,l4", "--count", "n", "--geo", str(tmp_path / "geo.csv"),
            "--epsilon", "1", "--secure", "--quiet"]


def test_two_resumes_of_one_checkpoint_at_once_the_second_is_refused(tmp_path, monkeypatch):
    from hierdp.cli import main

    common = _files(tmp_path)
    ck = str(tmp_path / "ck")
    with monkeypatch.context() as m:
        _time_out_at(m, 3, 1)
        assert main(["release", common[0], "-o", str(tmp_path / "x.csv"), *common[1:], "--checkpoint", ck]) == 3
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    first = subprocess.Popen([sys.executable, str(script), "release", common[0], "-o", str(tmp_path / "a.csv"),
                              *common[1:], "--resume", ck], env={**os.environ, "HOLD_AT_LEVEL": "4"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "HOLDING" not in line:  # the first resume is inside level 4, holding the checkpoint
            line = first.stdout.readline()
            assert line or first.poll() is None, first.stderr.read()
        before = (Path(ck) / MANIFEST).read_bytes()
        err = _run_cli(["release", common[0], "-o", str(tmp_path / "b.csv"), *common[1:], "--resume", ck])
        assert err[0] == 2
        assert re.search(rf"in use by another run \(process {first.pid}\)", err[1]), err[1]
        assert not (tmp_path / "b.csv").exists() and (Path(ck) / MANIFEST).read_bytes() == before
        # the holder is killed: the kernel drops its lock, and the checkpoint resumes at once
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert (Path(ck) / LOCK).exists()  # the file stays; the lock it carried is gone
    code, text = _run_cli(["release", common[0], "-o", str(tmp_path / "c.csv"), *common[1:], "--resume", ck])
    assert code == 0, text
    manifest = json.loads((Path(ck) / MANIFEST).read_text())
    # level 3 drawn three times (time-out, the killed resume, this one); level 4 twice (killed, this one)
    assert [e["level"] for e in manifest["discarded"]] == [3, 4]
    assert manifest["complete"]


def _run_cli(argv: list[str]) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", "import sys; from hierdp.cli import main; sys.exit(main())", *argv],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr


def test_the_manifest_holds_a_salted_fingerprint(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    InfTDA(rho=0.5).release(TREE, seed=1, checkpoint=a)
    InfTDA(rho=0.5).release(TREE, seed=1, checkpoint=b)
    ma, mb = (json.loads((d / MANIFEST).read_text()) for d in (a, b))
    plain = tree_fingerprint(TREE)
    assert plain not in json.dumps(ma) and plain not in json.dumps(mb)
    assert ma["salt"] != mb["salt"] and ma["fingerprint"] != mb["fingerprint"]
    # a neighbouring dataset (one more person in one leaf) is refused on resume, the same data accepted
    counts = np.where(TREE.is_leaf, TREE.counts, np.nan)
    counts[TREE.leaves[0]] += 1
    with pytest.raises(CheckpointError, match="made from another input"):
        InfTDA(rho=0.5).release(TREE.with_counts(counts), resume=a)
    InfTDA(rho=0.5).release(TREE, resume=a)
    # created for its owner only
    assert (a.stat().st_mode & 0o077) == 0 and ((a / MANIFEST).stat().st_mode & 0o077) == 0


def test_a_checkpoint_stopped_at_its_time_limit_resumes_with_a_longer_one(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    with monkeypatch.context() as m:
        _time_out_at(m, 2, 1)
        with pytest.raises(ReleaseAborted):
            InfTDA(rho=0.5, solver="highs", time_limit=0.5).release(TREE, seed=2, checkpoint=ck)
    rel = InfTDA(rho=0.5, solver="highs", time_limit=60).release(TREE, resume=ck)
    assert rel.params["time_limit"] == 60 and rel.check_consistency() == []
    full = InfTDA(rho=0.5, solver="highs", time_limit=60).release(TREE, seed=2)
    assert same_levels(full, rel)
    with pytest.raises(CheckpointError, match="other parameters: solver"):  # other parameters still refused
        InfTDA(rho=0.5, solver="intopt").release(TREE, resume=ck)


def test_the_command_line_resumes_a_time_out_with_a_longer_limit(tmp_path):
    common = _files(tmp_path)
    common = [a for a in common if a != "--secure"] + ["--seed", "3", "--mechanism", "tda_linf", "--solver", "highs"]
    ck = str(tmp_path / "ck")
    t0 = time.monotonic()
    code, err = _run_cli(["release", common[0], "-o", str(tmp_path / "o.csv"), *common[1:], "--time-limit", "1e-6",
                          "--checkpoint", ck])
    assert code == 3, err  # the documented code of a solver's stop
    assert "status time_limit" in err and f"--resume {ck}" in err and "a longer --time-limit" in err
    assert time.monotonic() - t0 < 300
    assert not (tmp_path / "o.csv").exists()
    code, err = _run_cli(["release", common[0], "-o", str(tmp_path / "o.csv"), *common[1:], "--time-limit", "120",
                          "--resume", ck])
    assert code == 0, err
    assert (tmp_path / "o.csv").exists()
