"""The ``hierdp`` command line: ``solvers``, ``mechanisms``, ``demo``, ``release``, ``compare``.

Every failure is one line on stderr naming the cause, with a non-zero exit code (see
:mod:`hierdp.cli.console` for the codes); set ``HIERDP_DEBUG=1`` to see the traceback of an
internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import NoReturn
from collections.abc import Sequence

from hierdp.cli.console import (
    EXIT_BROKEN_PIPE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_SOLVER,
    Console,
    Terminated,
    end_worker_pools,
    exit_now_if_abandoned,
    one_line,
    terminate_on_sigterm,
)
from hierdp.cli.io import CliError

__all__ = ["build_parser", "main", "solver_stop"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``hierdp release: error: ...``) instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INPUT)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hierdp`` command."""
    from hierdp.cli.compare import add_compare_parser
    from hierdp.cli.info import cmd_demo, cmd_mechanisms, cmd_solvers
    from hierdp.cli.postprocess import add_postprocess_parser
    from hierdp.cli.release import add_release_parser

    from hierdp._version import __version__

    parser = _Parser(prog="hierdp", description="Differentially private hierarchical counts.")
    parser.add_argument("--version", action="version", version=f"hierdp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("solvers", help="list installed solver plug-ins and what each supports")
    p.add_argument("--limits", action="store_true", help="each plug-in's limits (magnitudes, sizes, time limits, "
                   "tolerance), from hierdp.solvers.describe_limits()")
    p.set_defaults(func=cmd_solvers)
    p = sub.add_parser("mechanisms", help="list the registered mechanisms (names for --mechanism)")
    p.set_defaults(func=cmd_mechanisms)
    p = sub.add_parser("demo", help="release the bundled world-cities hierarchy and print a summary")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-8)
    p.add_argument("--seed", type=int, default=0, help="seed of the demo's seeded (reproducible, not for publication) "
                   "randomness (default 0, as README.md shows)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)
    add_release_parser(sub)
    add_compare_parser(sub)
    add_postprocess_parser(sub)
    return parser


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:  # KeyError's str() adds quotes
        return one_line(exc.args[0])
    return one_line(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hierdp`` console script; returns the exit code.

    Run as the console script (``argv=None``), an interrupted command whose worker is still
    inside a long C call ends the process at once instead of waiting for that call.
    """
    code = _main(argv)
    if argv is None:
        exit_now_if_abandoned(code)
    return code


def solver_stop(exc: BaseException) -> BaseException | None:
    """The :class:`~hierdp.solvers.base.SolverFailed` behind ``exc`` (itself, or the direct cause
    of a ``ReleaseAborted``: a solver that stopped after the noise, e.g. at its time limit), else
    None (a failure with another cause - e.g. constraints that cannot hold - is bad input)."""
    from hierdp.solvers.base import SolverFailed

    if isinstance(exc, SolverFailed):
        return exc
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, SolverFailed) else None


def _solver_stop_text(exc: BaseException, stop: BaseException) -> str:
    """One line for a solver's stop: its status and message, where it stopped and what was spent
    (a ``ReleaseAborted``), and that nothing was written."""
    text = _message(stop)
    if len(text) > 300:
        text = text[:290].rstrip() + " ..."
    where = ""
    if exc is not stop and getattr(exc, "spent", None) is not None:
        level = getattr(exc, "level", -1)
        at = f"at level {level} ({getattr(exc, 'level_name', '')}) " if isinstance(level, int) and level >= 0 else ""
        where = f"; the release stopped {at}after its noise was drawn ({exc.spent} spent)"  # type: ignore[attr-defined]
    return f"status {getattr(stop, 'termination', 'failed')}: {text}{where}; nothing was written"


def _resume_hint(args: argparse.Namespace) -> str:
    ck = getattr(args, "checkpoint", None) or getattr(args, "resume", None)
    if ck is None:
        return ""
    return (f"; the finished levels are kept in checkpoint {ck}: continue with --resume {ck} (a longer --time-limit "
            "is allowed)")


def _main(argv: Sequence[str] | None) -> int:
    from hierdp.errors import HierdpError

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already printed on one line)
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_INPUT
    console = Console(f"hierdp {args.command}")
    restore = terminate_on_sigterm()
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        console.error(exc)
        return exc.code
    except (HierdpError, KeyError, ValueError) as exc:  # bad input named by the library, or a solver's stop
        stop = solver_stop(exc)
        if stop is not None:  # exit 3: the solver stopped without an optimal answer (a time limit, ...)
            console.error(_solver_stop_text(exc, stop) + _resume_hint(args))
            return EXIT_SOLVER
        console.error(_message(exc))
        return EXIT_INPUT
    except KeyboardInterrupt:
        end_worker_pools()
        console.error("interrupted; nothing was written")
        return EXIT_INTERRUPTED
    except Terminated as exc:
        end_worker_pools()
        console.error(f"terminated ({exc.name}); nothing was written")
        return exc.code
    except BrokenPipeError as exc:
        console.error(_message(exc) if exc.args else "stdout was closed early (broken pipe)")
        return EXIT_BROKEN_PIPE
    except MemoryError:
        console.error("out of memory; nothing was written")
        return EXIT_INTERNAL
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        console.error(f"{exc.strerror or _message(exc)}{where}")
        return EXIT_INPUT
    except Exception as exc:  # a bug: one line, the traceback on request
        if os.environ.get("HIERDP_DEBUG"):
            traceback.print_exc()
        console.error(f"internal error ({type(exc).__name__}: {_message(exc)}); please report it, with the "
                      "traceback from HIERDP_DEBUG=1")
        return EXIT_INTERNAL
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
