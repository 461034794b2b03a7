"""What every layout of the command line shares: number parsers for flags, the privacy flags, the
randomness (secure by default) and its line, the ``input:`` line (public structure only), the
accounting file written beside every output, and how a library privacy error names the flags it is
about."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hierdp.cli.console import int_at_least
from hierdp.cli.io import CliError

__all__ = [
    "add_privacy_arguments",
    "check_accounting_target",
    "check_randomness_flags",
    "input_text",
    "positive_float",
    "positive_int",
    "privacy_context",
    "randomness_text",
    "release_randomness",
    "save_output",
    "seed_for_run",
    "seed_int",
    "split_columns",
    "write_compare_accounting",
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


def randomness_text(secure: bool, seed: int | None, drawn: bool = False, *, how: str | None = None) -> str:
    """The line every run prints about its randomness: secure (the default), or seeded with its seed
    and where the seed came from (``how``; default "given with --seed")."""
    if secure:
        return "randomness: secure (OS entropy, exact samplers; the default): suitable for publication"
    where = how or ("drawn from OS entropy (128 bits), printed so the run can be repeated" if drawn
                    else "given with --seed")
    return f"randomness: seeded (reproducible, not for publication), seed {seed} ({where})"


def check_randomness_flags(args: argparse.Namespace) -> None:
    """``--seed`` and ``--secure`` exclude each other (before anything is read)."""
    if getattr(args, "secure", False) and getattr(args, "seed", None) is not None:
        raise CliError("--seed and --secure exclude each other: a seeded release is reproducible, hence not "
                       "for publication; drop --seed for a real release (secure is the default)")


def seed_for_run(args: argparse.Namespace) -> tuple[int | None, bool]:
    """``(seed, drawn)``: the ``--seed`` of a seeded experiment, else ``None`` - a secure run (the
    default; ``--secure`` says so explicitly). No seed is ever drawn for the user: without
    ``--seed`` the run is secure (``drawn`` is always False; kept for the line's wording)."""
    if getattr(args, "secure", False) or getattr(args, "seed", None) is None:
        return None, False
    return int(args.seed), False


def release_randomness(args: argparse.Namespace) -> str:
    """The randomness line of ``hierdp release`` before anything is read: secure unless ``--seed``;
    a ``--resume`` without either follows its checkpoint (read from its manifest)."""
    if getattr(args, "seed", None) is not None:
        return randomness_text(False, args.seed)
    if getattr(args, "resume", None) is not None and not getattr(args, "secure", False):
        from hierdp.scale.checkpoint import recorded_randomness

        if recorded_randomness(args.resume) == "seeded":
            return ("randomness: seeded (reproducible, not for publication), the checkpoint's seed (--resume keeps "
                    "the checkpoint's randomness)")
    return randomness_text(True, None)


# ------------------------------------------------------------------ what is printed and written
def input_text(path: Any, data: Any) -> str:
    """The ``input:`` line: the file and the *public* structure built from it - the domain's level
    sizes, the grid, K and G - never a count of the private rows (records, persons, points, non-zero
    cells, totals), which one person changes."""
    return f"input: {path} -> {describe_public(data)}"


def describe_public(data: Any) -> str:
    """What of ``data`` is public: its domain's shape (declared, or observed and assumed public)."""
    source = getattr(data, "domain_source", "declared")
    domain = "declared domain" if source == "declared" else "observed domain, assumed public"
    if all(hasattr(data, a) for a in ("by_size", "regions", "K")):  # group sizes
        sizes = _level_sizes(data.regions)
        return (f"group sizes over {data.n_regions:,} regions ({sizes}), sizes 1..K={data.K:,}, G={data.G:,} groups "
                f"(public: a person joins or leaves an existing group); {domain}")
    if all(hasattr(data, a) for a in ("counts", "domain", "prefix")):  # points on a grid
        return f"points binned on {data.domain.describe()}; {domain}"
    if hasattr(data, "origin_geo") and hasattr(data, "destination_geo"):  # O/D trees
        return (f"{data.kind} O/D tree, {data.n_levels} levels over {data.origin_geo.sizes[-1]:,} x "
                f"{data.destination_geo.sizes[-1]:,} areas ({_level_sizes(data)}); {domain}")
    return f"tree of {_level_sizes(data)}; {domain}"


def _level_sizes(tree: Any) -> str:
    """``"total 1, region 2, city 6"``: nodes per level of the (public) domain."""
    from hierdp.hierarchy.topdown_tree import as_topdown_tree

    t = as_topdown_tree(tree)
    return ", ".join(f"{name} {t.level_size(L):,}" for L, name in enumerate(t.level_names))


def check_accounting_target(out: Path, overwrite: bool) -> Path:
    """The accounting file beside ``out`` (``OUT.accounting.json``), checked before any work like the
    output itself: not a directory, not an existing file without ``--overwrite``."""
    from hierdp.release.saved import accounting_path

    side = accounting_path(out)
    if side.is_dir():
        raise CliError(f"the accounting file {side} (written beside the output) is a directory")
    if side.exists() and not overwrite:
        raise CliError(f"{side} already exists (the accounting written beside {out.name}); pass --overwrite to "
                       "replace it")
    return side


def save_output(release: Any, out: Path, frame: Any, *, overwrite: bool) -> Path:
    """Write the release's table to ``out`` and its accounting beside it, atomically
    (:func:`hierdp.release.saved.save_release`); returns the accounting's path."""
    from hierdp.release.saved import save_release

    return save_release(release, out, overwrite=overwrite, frame=frame)


def write_compare_accounting(frame: Any, out: Path) -> Path:
    """``hierdp compare``'s accounting beside its CSV: one document per configuration
    (``frame.attrs["accounting"]``), written atomically; returns its path."""
    import json

    from hierdp.release.saved import accounting_path, write_atomic

    side = accounting_path(out)
    document = {"format": "hierdp-compare", "version": 1, "results": out.name,
                "configurations": frame.attrs.get("accounting", {})}
    write_atomic(side, json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8"))
    return side
