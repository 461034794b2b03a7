"""Checkpoint and restart of TopDown releases, level by level.

``mech.release(tree, seed=s, checkpoint=DIR)`` writes every finished level to ``DIR`` and
``mech.release(tree, resume=DIR)`` continues from the last finished one (``--checkpoint`` /
``--resume`` on the command line). A checkpoint directory is a Hive-partitioned Parquet dataset of
the levels written so far (``level=L/part-00000.parquet``, columns ``key, parent, value`` and
``path_sum`` for per-node plans; ``dask.dataframe.read_parquet(DIR)`` reads it) plus a manifest,
``_hierdp_checkpoint.json``, rewritten atomically after each level:

* what the run is: the mechanism and its parameters (solver, objective, budget, plan, noise,
  privacy unit; not the engine), the input's fingerprint
  (:func:`~hierdp.scale.fingerprint.tree_fingerprint`), the randomness (``seeded`` with its
  counter-noise key, or ``secure``);
* what it has done: per finished level its files (rows, SHA-256), timing and statistics; the
  spends recorded so far (exact budgets, noise parameters) and their composition.

Resuming checks all of it before any noise: another input, other parameters, another seed or
another randomness mode, a missing or altered level file - each is refused with a
:class:`~hierdp.scale.errors.CheckpointError` naming the difference. The finished levels are read
back, never redrawn (in secure mode too: their noise came from the OS and is gone, and their
values are what was released), and their spends enter the resumed run's accounting as recorded,
so the resumed release's accounting equals the uninterrupted one's and nothing is spent twice. A
level that was running when the run died (its spend recorded, its values never committed) is
discarded unread - its staged files are deleted - and measured again: the discarded draw never
reaches the release. A seeded resume redraws exactly the same values (counter-based noise), so it
equals the uninterrupted run bit for bit.

Faults and concurrency (issue 20):

* **Every draw is accounted.** A level's spend is written to the manifest (``pending``) before its
  noise is drawn and cleared when the level is committed. A secure run that stopped inside a level
  (a solver time-out whose message names parents, a crash, a kill: the draw may have been
  observed) leaves that draw recorded; the resume moves it to ``discarded`` and states it: the
  resumed release's accounting lists it ("... (discarded draw)") and its guarantee is the
  composition of every draw made, above the budget by what was discarded. A seeded resume
  redraws the same noise, so its discarded draws cost nothing more.
* **One run at a time.** A run holds an exclusive lock on its checkpoint directory
  (:class:`CheckpointLock`: ``flock`` on ``_hierdp_checkpoint.lock``) from opening to its end;
  a second run or resume of the same checkpoint is refused, naming the holder's process id. The
  operating system drops the lock when its holder dies (SIGKILL included), so a checkpoint of a
  killed run can be resumed at once.
* **As sensitive as the input.** The manifest holds a fingerprint of the private counts, keyed
  with a random salt of this checkpoint (HMAC-SHA256: two checkpoints of the same data do not
  match, and no table of fingerprints helps), but whoever holds the directory can still test a
  candidate dataset against it - that is what a resume does - and a seeded checkpoint holds its
  noise key, from which its levels give back the true counts. Protect a checkpoint like the input
  (a new checkpoint directory is created readable by its owner only) and delete it after the
  release. The solver's time limit is not part of a checkpoint's identity: a run that stopped at
  its time limit resumes with a longer one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import hmac
import json
import math
import os
import shutil
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from hierdp.scale.errors import CheckpointError

__all__ = ["FORMAT", "LOCK", "MANIFEST", "VERSION", "CheckpointLock", "CheckpointRun", "identity_params",
           "keyed_fingerprint", "read_level", "recorded_randomness", "write_level_part"]

MANIFEST = "_hierdp_checkpoint.json"
LOCK = "_hierdp_checkpoint.lock"
STAGING = "_staging"
FORMAT = "hierdp-checkpoint"
#: 2: salted fingerprint, pending and discarded draws (version 1 checkpoints are refused)
VERSION = 2
#: parameters that do not change a release's values (not compared on resume): the randomness mode
#: is compared on its own; a time limit only decides whether a solve finishes
_NOT_IDENTITY = frozenset({"secure", "randomness", "time_limit"})


# ---------------------------------------------------------------------------- JSON encoding
def _encode(value: Any) -> Any:
    """JSON-able form of accounting values (exact fractions and budgets survive the round trip)."""
    from hierdp.privacy.budget import Budget

    if isinstance(value, Budget):
        calc, eps, rho, delta = value._key()
        exact = [None if v is None else f"{v.numerator}/{v.denominator}" for v in (eps, rho, delta)]
        return {"__budget__": [calc, *exact]}
    if isinstance(value, Fraction):
        return {"__fraction__": f"{value.numerator}/{value.denominator}"}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else {"__float__": repr(v)}
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_encode(v) for v in value.tolist()]
    return repr(value)


def _decode(value: Any) -> Any:
    from hierdp.privacy.budget import Budget

    if isinstance(value, dict):
        if "__budget__" in value:
            calc, eps, rho, delta = value["__budget__"]
            f = (lambda s: None if s is None else Fraction(s))
            return Budget(calc, epsilon=f(eps), rho=f(rho), delta=f(delta))
        if "__fraction__" in value:
            return Fraction(value["__fraction__"])
        if "__float__" in value:
            return float(value["__float__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def recorded_randomness(directory: Any) -> str | None:
    """``"secure"`` or ``"seeded"``: the randomness the checkpoint in ``directory`` was made with (a
    resume that says nothing about randomness follows it); ``None`` when there is no readable
    manifest (opening the checkpoint then says why)."""
    try:
        recorded = json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8")).get("randomness")
    except (OSError, ValueError, AttributeError):
        return None
    return recorded if recorded in ("secure", "seeded") else None


def identity_params(mech: Any) -> dict[str, Any]:
    """The mechanism parameters a resumed run must share (JSON form), with its class name; not the
    randomness mode (compared on its own) nor the solver's time limit (a run stopped at its time
    limit resumes with a longer one)."""
    params = {k: v for k, v in mech.params().items() if k not in _NOT_IDENTITY}
    options = params.get("solver_options")
    if isinstance(options, dict) and "time_limit" in options:
        params["solver_options"] = {k: v for k, v in options.items() if k != "time_limit"}
    return _encode({"mechanism": type(mech).__module__ + "." + type(mech).__qualname__, "name": mech.name, **params})


def keyed_fingerprint(fingerprint: str, salt: str) -> str:
    """HMAC-SHA256 of an input fingerprint under a checkpoint's random ``salt`` (hex): what the
    manifest stores instead of the plain fingerprint, so that two checkpoints of one input differ
    and no precomputed table of fingerprints matches them."""
    return hmac.new(bytes.fromhex(salt), fingerprint.encode("utf-8"), hashlib.sha256).hexdigest()


# ---------------------------------------------------------------------------- the lock
class CheckpointLock:
    """An exclusive lock on a checkpoint directory, held for the life of one run.

    ``flock`` (POSIX; ``msvcrt.locking`` on Windows) on the file :data:`LOCK` in the directory:
    the operating system releases it when the holder closes it or dies, however it dies, so a lock
    is never stale. The file keeps the holder's process id for the message of a refused run.
    """

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path) -> CheckpointLock:
        """Take the lock of ``directory`` (which must exist).

        Raises:
            CheckpointError: another run holds it (its process id named).
        """
        path = Path(directory) / LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            _lock_fd(fd)
        except OSError:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() if hasattr(os, "pread") else ""
            except OSError:
                holder = ""
            os.close(fd)
            who = f" (process {holder})" if holder.isdigit() else ""
            raise CheckpointError(f"checkpoint {directory} is in use by another run{who}: two runs of one checkpoint "
                                  "would publish two draws of the same levels; wait for it to end (a killed run "
                                  "releases the lock at once)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        return cls(Path(directory), fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self, *, remove: bool = False) -> None:
        """Give the lock up (idempotent); ``remove`` deletes the lock file first (a discarded
        checkpoint's directory is removed after it)."""
        if self._fd is None:
            return
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(self.directory / LOCK)
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing drops the lock
        self._fd = None


def _lock_fd(fd: int) -> None:
    """Lock ``fd`` exclusively without waiting (OSError: held elsewhere)."""
    if sys.platform == "win32":
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Human-readable differences between two JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            if k not in new:
                out.append(f"{prefix}{k} (checkpoint: {old[k]!r}, now: not set)")
            elif k not in old:
                out.append(f"{prefix}{k} (checkpoint: not set, now: {new[k]!r})")
            else:
                out.extend(_diff(old[k], new[k], f"{prefix}{k}."))
        return out
    return [] if old == new else [f"{prefix.rstrip('.')} (checkpoint: {old!r}, now: {new!r})"]


# ---------------------------------------------------------------------------- level files
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_level_part(path: Any, keys: np.ndarray, parent: np.ndarray, values: np.ndarray,
                     paths: np.ndarray | None) -> dict[str, Any]:
    """Write one part of a level (Parquet, fsynced) and return ``{"file", "rows", "sha256"}``.

    ``values``: ``(n,)`` counts (column ``value``) or ``(n, K)`` histograms (column ``cells``, a
    fixed-size list of K int64 per node)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {"key": pa.array(np.asarray(keys, np.int64)), "parent": pa.array(np.asarray(parent, np.int64))}
    vals = np.asarray(values, np.int64)
    if vals.ndim == 2:
        cols["cells"] = pa.FixedSizeListArray.from_arrays(pa.array(vals.ravel()), vals.shape[1])
    else:
        cols["value"] = pa.array(vals)
    if paths is not None:
        cols["path_sum"] = pa.array(np.asarray(paths, np.float64))
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(pa.table(cols), tmp)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return {"file": path.name, "rows": int(np.asarray(keys).size), "sha256": _sha256(path)}


def read_level(directory: Any, entry: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The arrays of one committed level (its parts in order), checked against the manifest."""
    import pyarrow.parquet as pq

    base = Path(directory) / f"level={int(entry['level'])}"
    keys, parent, values, paths = [], [], [], []
    for part in entry["files"]:
        f = base / part["file"]
        if not f.is_file():
            raise CheckpointError(f"checkpoint {directory}: level {entry['level']} file {f.name} is missing "
                                  f"(expected in {base}); the checkpoint is incomplete")
        if _sha256(f) != part["sha256"]:
            raise CheckpointError(f"checkpoint {directory}: level {entry['level']} file {f.name} was altered "
                                  "(its SHA-256 differs from the manifest's)")
        t = pq.read_table(f)
        if t.num_rows != part["rows"]:
            raise CheckpointError(f"checkpoint {directory}: level {entry['level']} file {f.name} has {t.num_rows} "
                                  f"rows, the manifest says {part['rows']}")
        keys.append(t.column("key").to_numpy())
        parent.append(t.column("parent").to_numpy())
        if "cells" in t.column_names:
            col = t.column("cells").combine_chunks()
            values.append(col.flatten().to_numpy().reshape(t.num_rows, col.type.list_size))
        else:
            values.append(t.column("value").to_numpy())
        if "path_sum" in t.column_names:
            paths.append(t.column("path_sum").to_numpy())
    cat = (lambda a: np.concatenate(a).astype(np.int64) if a else np.zeros(0, np.int64))
    cells = entry.get("cells")
    vals = (cat(values) if values or cells is None
            else np.zeros((0, int(cells)), np.int64))
    return cat(keys), cat(parent), vals, (np.concatenate(paths) if paths else None)


# ---------------------------------------------------------------------------- the run
class CheckpointRun:
    """The checkpoint of one release: created fresh, or opened to resume (see the module docstring).

    Use :meth:`open`; the TopDown engine then calls :meth:`restore`, :meth:`staging`,
    :meth:`commit_level` and :meth:`finish`.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any], resumed: bool, created: bool = False,
                 lock: CheckpointLock | None = None) -> None:
        self.directory = directory
        self.manifest = manifest
        self.resumed = resumed
        self.created = created  # the directory did not exist before this run
        self.lock = lock

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, mech: Any, tree: Any, *, checkpoint: Any = None, resume: Any = None, secure: bool,
             accountant: Any = None) -> CheckpointRun:
        """A new checkpoint in ``checkpoint``, or the one in ``resume`` checked against this run.

        Raises:
            CheckpointError: no or a damaged checkpoint to resume, a checkpoint of another input,
                other parameters or another randomness, or a new checkpoint over an existing one.
        """
        from hierdp.scale.fingerprint import tree_fingerprint

        if checkpoint is not None and resume is not None and Path(checkpoint).resolve() != Path(resume).resolve():
            raise CheckpointError(f"checkpoint={str(checkpoint)!r} and resume={str(resume)!r} differ: a resumed run "
                                  "keeps writing to the checkpoint it resumes; give one directory")
        fingerprint = tree_fingerprint(tree)
        header: dict[str, Any] = {
            "mechanism": identity_params(mech),
            "randomness": "secure" if secure else "seeded",
            "n_levels": int(tree.n_levels),
            "level_names": [str(x) for x in tree.level_names],
        }
        if resume is None:
            return cls._create(Path(checkpoint), header, fingerprint)
        directory = Path(resume)
        path = directory / MANIFEST
        if not directory.is_dir():
            raise CheckpointError(f"no checkpoint to resume: {directory} is not a directory")
        if not path.is_file():
            raise CheckpointError(f"no checkpoint to resume in {directory}: {MANIFEST} is missing (was the run "
                                  "started with checkpoint=/--checkpoint?)")
        lock = CheckpointLock.acquire(directory)  # held until the run ends; refused while another run holds it
        try:
            run = cls._check_resume(directory, path, header, fingerprint, accountant, lock)
        except BaseException:
            lock.release()
            raise
        return run

    @classmethod
    def _create(cls, directory: Path, header: dict[str, Any], fingerprint: str) -> CheckpointRun:
        """A new checkpoint in ``directory`` (new or empty), locked for this run."""
        def refuse_if_taken() -> None:
            if (directory / MANIFEST).exists():
                raise CheckpointError(f"checkpoint directory {directory} already holds a checkpoint; resume it "
                                      f"(resume={str(directory)!r}, --resume) or choose an empty directory")
            if directory.is_dir() and any(p.name != LOCK for p in directory.iterdir()):
                raise CheckpointError(f"checkpoint directory {directory} is not empty; choose an empty or new "
                                      "directory (a checkpoint owns its directory)")

        if directory.exists() and not directory.is_dir():
            raise CheckpointError(f"checkpoint {directory} exists and is not a directory")
        refuse_if_taken()
        created = not directory.exists()
        if created:
            directory.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # another run made it meanwhile: the lock decides
                directory.mkdir(mode=0o700)  # as sensitive as the input: its owner only
        lock = CheckpointLock.acquire(directory)
        try:
            refuse_if_taken()  # a run that took the lock first may have started a checkpoint here
            salt = os.urandom(32).hex()
            now = _dt.datetime.now(_dt.timezone.utc).isoformat()
            manifest = {"format": FORMAT, "version": VERSION, **header, "salt": salt,
                        "fingerprint": keyed_fingerprint(fingerprint, salt), "noise_key": None, "seed": None,
                        "levels": [], "spends": [], "spent": None, "pending": None, "discarded": [],
                        "complete": False, "created": now, "updated": now}
            run = cls(directory, manifest, resumed=False, created=created, lock=lock)
            run._write_manifest()
        except BaseException:
            lock.release(remove=created)
            raise
        return run

    @classmethod
    def _check_resume(cls, directory: Path, path: Path, header: dict[str, Any], fingerprint: str, accountant: Any,
                      lock: CheckpointLock) -> CheckpointRun:
        """The checkpoint in ``directory`` (locked), checked against this run before any noise."""
        from hierdp.privacy.errors import PrivacyParameterError

        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {directory}: cannot read {MANIFEST}: {exc}") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CheckpointError(f"checkpoint {directory}: {MANIFEST} is not a hierdp checkpoint manifest")
        if manifest.get("version") != VERSION:
            raise CheckpointError(f"checkpoint {directory}: format version {manifest.get('version')!r}, this hierdp "
                                  f"reads version {VERSION}")
        salt = manifest.get("salt")
        if not isinstance(salt, str) or len(salt) != 64:
            raise CheckpointError(f"checkpoint {directory}: {MANIFEST} has no valid salt; it is damaged")
        if not hmac.compare_digest(str(manifest.get("fingerprint")), keyed_fingerprint(fingerprint, salt)):
            raise CheckpointError(f"checkpoint {directory} was made from another input: the input's fingerprint "
                                  "differs from the checkpoint's; resume with the same data")
        if manifest.get("randomness") != header["randomness"]:
            raise CheckpointError(f"checkpoint {directory} was made with {manifest.get('randomness')} randomness; this "
                                  f"run uses {header['randomness']} randomness: resume it in the same mode")
        diffs = _diff(manifest.get("mechanism"), header["mechanism"])
        if diffs:
            raise CheckpointError(f"checkpoint {directory} was made with other parameters: " + "; ".join(diffs[:6])
                                  + (f" and {len(diffs) - 6} more" if len(diffs) > 6 else "")
                                  + "; resume with the parameters of the interrupted run")
        for key in ("n_levels", "level_names"):
            if manifest.get(key) != header[key]:
                raise CheckpointError(f"checkpoint {directory}: {key} {manifest.get(key)!r} differs from the "
                                      f"input's {header[key]!r}")
        if accountant is not None and accountant.total.calculus == "approx":
            raise PrivacyParameterError(
                "accountant: an (epsilon, delta) accountant is charged a release's whole guarantee once, by the run "
                "that started it; resume without accountant= (the levels already measured were charged then)")
        if not manifest.get("levels"):
            raise CheckpointError(f"checkpoint {directory} has no finished level (the run stopped at its root); start "
                                  "a new run in an empty directory")
        run = cls(directory, manifest, resumed=True, lock=lock)
        for entry in manifest["levels"]:  # every committed file is there and unaltered (before any noise)
            read_level(directory, entry)
        run._clean_uncommitted()
        run._settle_pending()
        return run

    # -- state ------------------------------------------------------------------------------
    @property
    def levels_done(self) -> int:
        """Number of committed levels (level 0 is the root)."""
        return len(self.manifest["levels"])

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete"))

    @property
    def noise_key(self) -> int | None:
        """The seeded run's counter-noise key (``None`` in secure mode or before it is set)."""
        k = self.manifest.get("noise_key")
        return None if k is None else int(k)

    def set_noise_key(self, key: int | None, seed: Any) -> None:
        """Record the seeded run's counter-noise key (and the seed, for the record)."""
        self.manifest["noise_key"] = None if key is None else str(int(key))
        known = isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
        self.manifest["seed"] = int(seed) if known else None
        self._write_manifest()

    def spent_budget(self, total: Any) -> Any:
        """The composition of the recorded spends (a zero budget of ``total``'s calculus if none)."""
        from hierdp.privacy.budget import Budget

        spent = Budget._zero(total.calculus)
        for s in self.manifest["spends"]:
            spent = spent + _decode(s["budget"])
        return spent

    @property
    def discarded(self) -> list[dict[str, Any]]:
        """The draws earlier runs of this checkpoint made and never committed (secure runs only;
        see the module docstring): ``{"level", "spends"}`` each, spends as recorded."""
        return list(self.manifest.get("discarded") or [])

    def discarded_budget(self, total: Any) -> Any:
        """The composition of the :attr:`discarded` draws (zero in ``total``'s calculus if none)."""
        from hierdp.privacy.budget import Budget

        spent = Budget._zero(total.calculus)
        for entry in self.discarded:
            for s in entry["spends"]:
                spent = spent + _decode(s["budget"])
        return spent

    def restore(self, ctx: Any, state: Any) -> int:
        """Put the committed levels into ``state`` and their spends into the run's ledger (not the
        caller's accountant: those parts were charged by the run that drew them), then the draws
        earlier runs discarded (:attr:`discarded`: the run's total grows by them, so the release's
        guarantee states every draw made). Returns the first level still to run."""
        from hierdp.release import ReleaseLevel
        from hierdp.release.accounting import Spend

        for s in self.manifest["spends"]:
            budget = _decode(s["budget"])
            converted = ctx.ledger.spend(budget, s["label"])
            ctx.spends.append(Spend(s["label"], converted, _decode(s["details"])))
        for entry in self.discarded:
            for s in entry["spends"]:
                ctx.add_discarded_draw(_decode(s["budget"]), f"{s['label']} (discarded draw)",
                                       **_decode(s["details"]))
        for entry in self.manifest["levels"]:
            keys, parent, values, paths = read_level(self.directory, entry)
            state.levels.append(ReleaseLevel(keys, parent, values))
            state.paths.append(paths)
            state.timings.append(float(entry["timing"]))
            state.stats.append(_decode(entry["stats"]))
        return self.levels_done

    # -- writing ----------------------------------------------------------------------------
    def staging(self, level: int) -> Path:
        """An empty directory where workers write the parts of ``level`` before it is committed."""
        d = self.directory / STAGING / f"level={int(level)}"
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def commit_level(self, level: int, state: Any, ctx: Any, files: list[dict[str, Any]] | None = None) -> None:
        """Make ``level`` (the last of ``state``) durable: its parts (written by workers into
        :meth:`staging`, or here from ``state``), then the manifest with the spends so far."""
        final = self.directory / f"level={int(level)}"
        if final.exists():
            shutil.rmtree(final)
        lv = state.levels[level]
        if files is None:
            stage = self.staging(level)
            files = [write_level_part(stage / "part-00000.parquet", lv.keys, lv.parent, lv.values, state.paths[level])]
        stage = self.directory / STAGING / f"level={int(level)}"
        os.replace(stage, final)
        _fsync_dir(self.directory)
        entry = {"level": int(level), "files": files, "rows": len(lv), "timing": float(state.timings[level]),
                 "stats": _encode(state.stats[level])}
        if np.ndim(lv.values) == 2:  # a histogram level: its number of cells (an empty level has no row)
            entry["cells"] = int(np.shape(lv.values)[1])
        self.manifest["levels"].append(entry)
        self.manifest["spends"] = _spend_records(s for s in ctx.spends if not s.details.get("discarded"))
        self.manifest["spent"] = _encode(ctx.spent)
        self.manifest["pending"] = None
        self._write_manifest()

    def begin_level(self, level: int, ctx: Any) -> None:
        """Record ``level``'s spend (the run's spends not yet committed) before its noise is drawn:
        if the run stops before :meth:`commit_level`, a resume finds the draw and accounts it."""
        committed = len(self.manifest["spends"])
        fresh = [s for s in ctx.spends if not s.details.get("discarded")][committed:]
        self.manifest["pending"] = {"level": int(level), "spends": _spend_records(fresh)}
        self._write_manifest()

    def _settle_pending(self) -> None:
        """On resume: a draw the previous run recorded and never committed becomes a discarded
        draw (secure randomness: it may have been observed, and this run draws the level again);
        a seeded run redraws the same noise, so its pending draw is simply dropped."""
        pending = self.manifest.get("pending")
        if pending:
            if self.manifest.get("randomness") == "secure" and pending.get("spends"):
                self.manifest.setdefault("discarded", []).append(pending)
            self.manifest["pending"] = None
            self._write_manifest()

    def finish(self) -> None:
        """Mark the checkpoint complete (every level committed) and end the run's hold on it."""
        self.manifest["complete"] = True
        self._write_manifest()
        shutil.rmtree(self.directory / STAGING, ignore_errors=True)
        self.close()

    def close(self) -> None:
        """End the run's hold on the checkpoint: release its lock (idempotent; also done by
        :meth:`finish` and :meth:`discard_if_empty`)."""
        if self.lock is not None:
            self.lock.release()

    def discard_if_empty(self) -> None:
        """Undo a new checkpoint that committed nothing (the run was refused or failed before its
        first level: an unreachable cluster, an accountant that cannot pay), so that the directory
        can be used afresh; a checkpoint with committed levels is kept for a resume. Ends the
        run's hold on the checkpoint either way."""
        if self.resumed or self.manifest["levels"]:
            self.close()
            return
        (self.directory / MANIFEST).unlink(missing_ok=True)
        shutil.rmtree(self.directory / STAGING, ignore_errors=True)
        if self.lock is not None:
            self.lock.release(remove=True)
        if self.created:
            with contextlib.suppress(OSError):  # something else was put there meanwhile: leave it
                self.directory.rmdir()

    def _clean_uncommitted(self) -> None:
        """Delete what an interrupted run left uncommitted: staged parts and level directories the
        manifest does not list (never read: their values were not released)."""
        shutil.rmtree(self.directory / STAGING, ignore_errors=True)
        committed = {f"level={int(e['level'])}" for e in self.manifest["levels"]}
        for d in self.directory.glob("level=*"):
            if d.is_dir() and d.name not in committed:
                shutil.rmtree(d)

    def _write_manifest(self) -> None:
        self.manifest["updated"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
        path = self.directory / MANIFEST
        tmp = path.with_name(path.name + ".partial")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            json.dump(self.manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.directory)


def _spend_records(spends: Any) -> list[dict[str, Any]]:
    """The manifest's form of :class:`~hierdp.release.Spend` entries."""
    return [{"label": s.label, "budget": _encode(s.budget), "details": _encode(dict(s.details))} for s in spends]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
