"""Imported first by the fork server of the process pools made in :mod:`hierdp.scale.executors`
(its preload list): the fork server then leaves at once, and leaves nothing behind, when the
process that started it ends.

The standard library's fork server exits when its owner's end of a pipe closes (the owner ended,
however it ended), but through the interpreter's whole shutdown: about a second with hierdp's
imports, longer on a loaded machine - and it holds the owner's stdout all that while, so
``hierdp ... | cat`` would wait for it. An ``atexit`` handler of the fork server's own process
skips that shutdown (the fork server has nothing to flush or save) and, when the owner is gone
(SIGKILL: its own clean-up never ran), removes the fork server's socket and the owner's emptied
``pymp-*`` temporary folder. Nothing happens when this module is imported anywhere else.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import time
from types import FrameType

__all__ = ["fork_server_frame"]


def fork_server_frame() -> FrameType | None:
    """The frame of ``multiprocessing.forkserver.main`` when this runs inside it (the fork
    server's preload), else ``None``."""
    frame: FrameType | None = sys._getframe()
    tail = os.path.join("multiprocessing", "forkserver.py")
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_code.co_filename.endswith(tail):
            return frame
        frame = frame.f_back
    return None


def _socket_path(listener_fd: int) -> str | None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=os.dup(listener_fd)) as s:
            name = s.getsockname()
    except (OSError, ValueError, TypeError):
        return None
    return name if isinstance(name, str) and name else None


def _leave_now(pid: int, owner: int, path: str | None) -> None:
    if os.getpid() != pid:  # a process forked from the fork server: never
        return
    # the owner's end of the pipe closes as it exits, a moment before this process is given to
    # another parent: wait for that moment (the owner is alive only if this exit has another cause)
    deadline = time.monotonic() + 1.0
    while os.getppid() == owner and time.monotonic() < deadline:
        time.sleep(0.01)
    if path is not None and os.getppid() != owner:  # the owner ended without its clean-up
        with contextlib.suppress(OSError):
            os.unlink(path)
        folder = os.path.dirname(path)
        if os.path.basename(folder).startswith("pymp-"):
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only when empty
    os._exit(0)


def _install() -> None:
    frame = fork_server_frame()
    if frame is None:
        return
    fd = frame.f_locals.get("listener_fd")
    path = _socket_path(fd) if isinstance(fd, int) else None
    atexit.register(_leave_now, os.getpid(), os.getppid(), path)


_install()
