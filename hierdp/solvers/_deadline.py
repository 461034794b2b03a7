"""Run a solve in a reusable worker process that can be killed at a hard deadline.

Some back ends do not check their own time limit in every phase: HiGHS 1.14's MIP solver spends
the root LP of a 10^4-variable model without looking at the clock or calling its interrupt
callbacks (measured: returned 14 s after a 5 s limit), and at counts near 2^40 it never returned.
A thread cannot be stopped, a process can: :class:`DeadlineWorker` keeps one worker process per
calling thread, sends it a picklable call, waits until the deadline, and kills and replaces the
worker if no answer came.

The worker is a fresh interpreter (``python -c _BOOT``) talking pickles over
its standard streams, so it never re-imports the caller's ``__main__`` (no ``if __name__ ==
"__main__"`` guard is needed in user scripts, unlike ``multiprocessing``) and never inherits a
parent's solver threads. Starting one costs an interpreter start and the solver imports, once per
thread, and again only after a kill. The worker imports the solver modules without running
``hierdp/__init__.py`` (which pulls in pandas, networkx and scipy.stats: measured 2.5 s of CPU
against 0.3 s for the solver modules alone); the package is completed on first use of one of its
attributes (e.g. by the module of a pickled Pyomo hook that does ``from hierdp import ...``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO, cast
from collections.abc import Callable

_LOCAL = threading.local()
_HEADER = struct.Struct("<Q")


#: the worker's entry point (``python -c``): registers ``hierdp`` as a package whose ``__init__``
#: has not run (submodules import normally; the first access of a missing attribute of ``hierdp``
#: runs ``hierdp/__init__.py`` in place, PEP 562), then serves. ``python -m`` would run the
#: package's ``__init__`` first.
_BOOT = """
import importlib.util, sys
spec = importlib.util.find_spec("hierdp")
package = importlib.util.module_from_spec(spec)
def complete(name):
    package.__dict__.pop("__getattr__", None)
    spec.loader.exec_module(package)
    return getattr(package, name)
package.__getattr__ = complete
sys.modules["hierdp"] = package
from hierdp.solvers._deadline import _serve
_serve()
"""


class DeadlineExceeded(Exception):
    """The call did not return by its hard deadline; the worker was killed."""


def _write(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    """``size`` bytes (a pipe may return fewer per read)."""
    chunks, got = [], 0
    while got < size:
        part = stream.read(size - got)
        if not part:
            raise EOFError
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)


def _read(stream: BinaryIO) -> Any:
    size = _HEADER.unpack(_read_exact(stream, _HEADER.size))[0]
    return pickle.loads(_read_exact(stream, size))


class DeadlineWorker:
    """One worker process (started on first use, replaced after a kill)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.replies: queue.Queue = queue.Queue()

    @property
    def alive(self) -> bool:
        """Whether the worker process is running."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the worker if it is not running (blocks until it has imported the solvers)."""
        if self.alive:
            return
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None, bufsize=0)
        self.replies = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc, self.replies), daemon=True).start()
        kind, _ = self.replies.get()  # the worker says "ready" once its imports are done
        if kind != "ready":
            raise RuntimeError("the solver worker process failed to start")

    @staticmethod
    def _pump(proc: subprocess.Popen, replies: queue.Queue) -> None:
        try:
            assert proc.stdout is not None  # Popen(stdout=PIPE)
            while True:
                replies.put(_read(cast(BinaryIO, proc.stdout)))
        except Exception:
            replies.put(("dead", None))

    def kill(self) -> None:
        """Stop the worker now (the next call starts a new one)."""
        if self.proc is not None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.proc = None

    def call(self, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, *,
             timeout: float) -> Any:
        """``fn(*args, **kwargs)`` in the worker; :class:`DeadlineExceeded` after ``timeout`` seconds
        (the worker is then killed). Exceptions raised by ``fn`` are re-raised here."""
        self.start()
        if self.proc is None or self.proc.stdin is None:  # start() raised otherwise
            raise RuntimeError("the solver worker process is not running")
        _write(cast(BinaryIO, self.proc.stdin), (fn, args, kwargs or {}))
        try:
            kind, payload = self.replies.get(timeout=max(0.0, timeout))
        except queue.Empty:
            self.kill()
            raise DeadlineExceeded(f"no answer after {timeout:.3g} s") from None
        if kind == "dead":
            self.kill()
            raise RuntimeError("the solver worker process died")
        if kind == "err":
            raise payload
        return payload


def worker() -> DeadlineWorker:
    """This thread's worker."""
    w = getattr(_LOCAL, "worker", None)
    if w is None:
        w = _LOCAL.worker = DeadlineWorker()
    return w


def call_with_deadline(fn: Callable[..., Any], args: tuple, kwargs: dict, *, deadline: float) -> Any:
    """``fn(*args, **kwargs)`` in this thread's worker, killed at ``deadline`` (a ``perf_counter`` time)."""
    return worker().call(fn, args, kwargs, timeout=deadline - time.perf_counter())


def _serve() -> None:  # pragma: no cover - runs in the worker process
    """The worker loop: receive ``(fn, args, kwargs)``, reply ``("ok", result)`` or ``("err", exc)``."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    importlib.import_module("hierdp.solvers.highs")  # the solver imports, before saying "ready"

    _write(proto, ("ready", None))
    while True:
        try:
            fn, args, kwargs = _read(inp)
        except EOFError:
            return
        try:
            reply = ("ok", fn(*args, **kwargs))
        except BaseException as exc:
            reply = ("err", exc)
        try:
            _write(proto, reply)
        except Exception as exc:  # an unpicklable result or exception
            _write(proto, ("err", RuntimeError(f"{type(exc).__name__}: {exc}")))


if __name__ == "__main__":  # pragma: no cover
    _serve()
