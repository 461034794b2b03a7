"""How the command line talks and stops: output that survives a closed pipe, exit codes,
one-line errors, and long work that Ctrl-C can interrupt at once.

Exit codes: 0 success; 1 internal error (a bug: the message says how to get the traceback);
2 bad input or usage; 3 the solver stopped without an optimal answer (e.g. its time limit);
129 hung up (SIGHUP); 130 interrupted (Ctrl-C); 141 stdout closed early (broken pipe);
143 terminated (SIGTERM). An interrupted, hung-up or terminated command removes its temporary
files and ends the worker processes it started before it exits.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, TypeVar
from collections.abc import Callable
import contextlib

__all__ = [
    "ABANDONED",
    "EXIT_BROKEN_PIPE",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SOLVER",
    "EXIT_TERMINATED",
    "Console",
    "Terminated",
    "end_worker_pools",
    "exit_now_if_abandoned",
    "one_line",
    "run_interruptible",
    "terminate_on_sigterm",
]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_SOLVER = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143
EXIT_HANGUP = 129

T = TypeVar("T")


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C (temporary files are removed on the way out).

    Attributes:
        signum: the signal (exit code ``128 + signum``).
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        """``"SIGTERM"`` or ``"SIGHUP"``."""
        return signal.Signals(self.signum).name

    @property
    def code(self) -> int:
        """The exit code: 143 (SIGTERM) or 129 (SIGHUP)."""
        return 128 + self.signum


#: longest message printed; an error quoting a whole array is cut (the start names the culprit)
MAX_MESSAGE = 600


def one_line(text: object) -> str:
    """Collapse whitespace and newlines: every CLI message is a single, readable line."""
    s = " ".join(str(text).split())
    return s if len(s) <= MAX_MESSAGE else s[:MAX_MESSAGE - 20].rstrip() + " ... [truncated]"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that later writes and the interpreter's final flush do not
    raise again (the pattern the Python documentation gives for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (e.g. captured in tests)
        pass


def int_at_least(lowest: int, what: str) -> Callable[[str], int]:
    """An argparse ``type=``: an integer >= ``lowest`` (``what`` names it in the error)."""
    import argparse

    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            x = None
        if x is None or x < lowest:
            raise argparse.ArgumentTypeError(f"must be a {what} integer, got {text!r}")
        return x

    return parse


def finish_release(console: Console, secure: bool, out: Any) -> int:
    """The end of a written release, the same on every layout: the seeded-randomness warning and
    a closed stdout reported (exit 141) after the file is safely written."""
    if not secure:
        console.warn(f"{out} was made with seeded randomness (reproducible, not for publication); "
                     "drop --seed for a release you publish (secure is the default)")
    if console.pipe_closed:
        raise BrokenPipeError(f"stdout was closed early; the release was written to {out}")
    return 0


def show_progress(args: Any) -> bool:
    """Progress bars only on an interactive terminal and without ``--quiet``: in a log or a pipe,
    tqdm's carriage returns would pile up into one long line."""
    return not getattr(args, "quiet", False) and bool(getattr(sys.stderr, "isatty", lambda: False)())


class Console:
    """Prints a command's output; a reader that goes away (``| head``) does not stop the work.

    Attributes:
        prog: the command's name for messages (``"hierdp release"``).
        pipe_closed: stdout was closed by its reader; later output is dropped.
    """

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.pipe_closed = False

    def say(self, text: str = "") -> None:
        """One or more lines on stdout (flushed, so a closed pipe shows up here, not at exit)."""
        if self.pipe_closed:
            return
        try:
            print(text, flush=True)
        except BrokenPipeError:
            self.pipe_closed = True
            _silence_stdout()

    def warn(self, text: str) -> None:
        """A one-line warning on stderr."""
        print(f"{self.prog}: warning: {one_line(text)}", file=sys.stderr, flush=True)

    def error(self, text: object) -> None:
        """A one-line error on stderr."""
        print(f"{self.prog}: error: {one_line(text)}", file=sys.stderr, flush=True)


def run_interruptible(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a worker thread and wait for it so that Ctrl-C acts at once.

    Signals are handled by the main thread only between Python bytecodes; a long call into C
    (OpenDP's bulk samplers, a solver) would otherwise delay Ctrl-C until it returns. Waiting
    in short ``join`` steps keeps the main thread responsive: KeyboardInterrupt is raised here
    immediately, and the (daemon) worker is abandoned; nothing it computes is written. The
    worker's exceptions are re-raised here.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="hierdp-work", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.05)
    except BaseException:  # Ctrl-C / SIGTERM: the worker is abandoned (see exit_now)
        ABANDONED.append(worker)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


#: workers left running by an interruption (a long C call cannot be stopped from outside)
ABANDONED: list[threading.Thread] = []


def exit_now_if_abandoned(code: int) -> None:
    """After an interruption, end the process at once.

    The interpreter's orderly shutdown takes seconds after a large secure-mode run was cut
    short (it waits for a worker still inside a C call, and tears down everything it built).
    Everything the command promised is already done (messages printed, temporary files
    removed), so flush and leave. Only for the console script, never inside a caller's process.
    """
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP) or any(t.is_alive() for t in ABANDONED):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def end_worker_pools() -> None:
    """End the process pools this process started for ``--engine processes`` (without waiting
    for their running tasks). Their workers would end with this process anyway; this ends them
    before the command's last message."""
    executors = sys.modules.get("hierdp.scale.executors")
    if executors is not None:
        executors.terminate_pools()


#: signals that end a command like Ctrl-C (through :class:`Terminated`)
TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


def terminate_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` in the main thread (so ``finally`` blocks
    remove temporary files); returns a function that restores the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous: dict[int, Any] = {}
    for sig in TERMINATING:
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
