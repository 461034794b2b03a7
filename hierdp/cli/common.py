"""What every layout of the command line shares: number parsers for flags, the privacy flags, the
randomness line, and how a library privacy error names the flags it is about."""

from __future__ import annotations

import argparse

from hierdp.cli.console import int_at_least
from hierdp.cli.io import CliError

__all__ = [
    "add_privacy_arguments",
    "check_randomness_flags",
    "positive_float",
    "positive_int",
    "privacy_context",
    "randomness_text",
    "seed_for_run",
    "seed_int",
    "split_columns",
]


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (x > 0 and x < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return x


positive_int = int_at_least(1, "positive")
seed_int = int_at_least(0, "non-negative")


def split_columns(s: str | None) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]`` (``None`` -> ``[]``)."""
    return [] if s is None else [c.strip() for c in s.split(",") if c.strip()]


def add_privacy_arguments(p: argparse.ArgumentParser) -> None:
    """The budget and neighbouring-relation options shared by ``release`` and ``compare``."""
    budget = p.add_argument_group("privacy")
    budget.add_argument("--epsilon", type=positive_float, help="target epsilon (with --delta)")
    budget.add_argument("--delta", type=positive_float, default=None,
                        help="target delta (default 1e-8 with --epsilon)")
    budget.add_argument("--rho", type=positive_float, help="total rho-zCDP instead of --epsilon")
    budget.add_argument("--unbounded", action="store_true", help="unbounded neighbours (the total is noised)")
    budget.add_argument("--contributions", type=positive_int, default=1, help="trips (rows) per user, m (default 1)")
    budget.add_argument("--distinct-pairs", action="store_true",
                        help="a user's m trips are distinct finest O/D pairs (smaller leaf-level sensitivity)")
    budget.add_argument("--conversion", choices=("analytic", "numeric"), default="analytic",
                        help="(eps, delta) -> rho conversion (paper 000 uses analytic, Lemma 3)")


def privacy_context(args: argparse.Namespace, exc: Exception) -> CliError:
    """A library privacy error with the flags it is about (``privacy parameters --epsilon 1e-300
    --delta 1e-08: ...``)."""
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    given = " ".join(f"--{k} {v:g}" for k, v in (("epsilon", args.epsilon), ("delta", delta), ("rho", args.rho))
                     if v is not None)
    return CliError(f"privacy parameters {given}: {exc}")


def randomness_text(secure: bool, seed: int | None, drawn: bool) -> str:
    """The line every run prints about its randomness."""
    if secure:
        return "randomness: secure (OS entropy, exact samplers): suitable for publication"
    how = "drawn from OS entropy, printed so the run can be repeated" if drawn else "given with --seed"
    return f"randomness: seeded (reproducible, not for publication), seed {seed} ({how})"


def check_randomness_flags(args: argparse.Namespace) -> None:
    """``--seed`` and ``--secure`` exclude each other (before anything is read)."""
    if getattr(args, "secure", False) and getattr(args, "seed", None) is not None:
        raise CliError("--seed and --secure exclude each other: a seeded release is reproducible, hence not "
                       "for publication; drop --seed for a real release")


def seed_for_run(args: argparse.Namespace) -> tuple[int | None, bool]:
    """``(seed, drawn)``: ``None`` with ``--secure``, the ``--seed``, or one drawn from OS entropy
    (``drawn=True``; printed, so the run can be repeated)."""
    import secrets

    if args.secure:
        return None, False
    if args.seed is not None:
        return args.seed, False
    return secrets.randbelow(2**32), True
