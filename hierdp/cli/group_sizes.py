"""``hierdp release`` for group sizes (paper 001): unit-level input → a released histogram per region.

Layout (chosen by ``--unit``)::

    hierdp release households.csv -o sizes.csv --unit household --levels state,county --size size \\
        --max-size 20 --geo counties.csv --epsilon 1 --mechanism pgsr_mdp --seed 0

* one row per group (``--size COL``: its number of members), or one row per person (no
  ``--size``; ``--person COL`` optionally names a person id, refused if a person is in two units);
* ``--levels``: the region columns, coarse to fine; every unit's rows must agree on them;
* ``--max-size K``: the public number of sizes (sizes 1..K), no more than the release fits in
  :data:`hierdp.cli.memory.MEMORY_BOUND` over the regions (checked before reading, and once the
  public regions are known, before any noise). Without it K is the observed maximum,
  which is data-derived: ``--observed-max-size-public`` states that it is public (the release
  says so). ``--top-code`` counts sizes above K in size K instead of refusing them;
* the region domain: ``--geo FILE`` (the ``--levels`` columns, every possible region) or
  ``--observed-domain-public``, as for every layout;
* ``--mechanism``: a group-size mechanism (``pgsr_mdp``, the default with ``--unit``;
  ``pgsr_mh``, ``pgsr_mh_relaxed``, ``pgsr_mhc``, ``pgsr_mhc_relaxed``, ``pgsr_cumulative_dp``,
  ``pgsr_chain_dp``, ``pgsr_topdown``); ``--epsilon`` only (pure ε-DP; ``--rho``, ``--unbounded``,
  ``--contributions`` other than 1 and ``--distinct-pairs`` are refused: the neighbour relation is
  one person added to or removed from an existing group); ``--region-totals-public`` adds the
  public per-region group totals (general solvers only);
* ``--constraints FILE``: public constraints over regions and sizes (docs/constraints.md), read
  before the input, bound and checked for feasibility before any noise; ``--constraints-failsafe``
  applies to ``pgsr_topdown`` only (the other mechanisms' feasible sets are decided in full before
  any noise).

The output has one row per (region, size): ``level, level_name``, one column per region level,
``node, parent, size, value``; ``OUT.accounting.json`` beside it holds the accounting.
Everything that can be refused is refused before the input is read and before any noise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from hierdp.cli.intervals import check_intervals_before_noise, release_table, report_intervals
from hierdp.cli.common import (
    check_accounting_target,
    check_randomness_flags,
    input_text,
    positive_int,
    randomness_text,
    save_output,
    seed_for_run,
    split_columns,
)
from hierdp.cli.console import finish_release, show_progress
from hierdp.cli.io import CliError, check_input_file, check_output_path, read_table, read_table_header
from hierdp.cli.layouts import Layout, check_mechanism_fits, check_solver_flags, default_mechanism
from hierdp.cli.memory import check_group_memory

__all__ = ["add_group_size_arguments", "check_group_size_arguments", "domain_text", "read_count_of_counts",
           "run_group_sizes"]


def add_group_size_arguments(p: argparse.ArgumentParser) -> None:
    """The group-size layout's options (``--unit`` selects the layout)."""
    g = p.add_argument_group("group sizes (paper 001): --unit selects this layout")
    g.add_argument("--unit", help="column of group (unit) ids: one row per group with --size, else one per person")
    g.add_argument("--size", help="column of group sizes (positive integers); without it, rows per unit")
    g.add_argument("--person", help="one row per person: column of person ids (a person in two units is refused)")
    g.add_argument("--max-size", type=positive_int, default=None, metavar="K",
                   help="the public largest size K (cells 1..K)")
    g.add_argument("--observed-max-size-public", action="store_true",
                   help="no --max-size: state that the observed largest size is public (the release says so)")
    g.add_argument("--top-code", action="store_true", help="count sizes above --max-size in size K (else refused)")
    g.add_argument("--region-totals-public", action="store_true",
                   help="impose the public per-region group totals (general solvers only)")


def check_group_size_arguments(args: argparse.Namespace) -> None:
    """Everything about the group-size input and budget refusable from the arguments alone."""
    if not args.levels:
        raise CliError("the group-size layout needs --levels (the region columns, coarse to fine)")
    if args.size and args.person:
        raise CliError("give --size (one row per group) or --person (one row per person), not both")
    cols = [args.unit, *split_columns(args.levels)] + [c for c in (args.size, args.person) if c]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise CliError(f"column {dup[0]!r} is given for two roles (--unit, --levels, --size, --person must differ)")
    if args.max_size is None and not args.observed_max_size_public:
        raise CliError("refusing to release: the largest size K would be read from the private rows; give the "
                       "public K with --max-size, or pass --observed-max-size-public to state that it is public")
    if args.max_size is not None and args.observed_max_size_public:
        raise CliError("give either --max-size or --observed-max-size-public, not both")
    if args.top_code and args.max_size is None:
        raise CliError("--top-code needs --max-size (the public top size)")
    if args.rho is not None:
        raise CliError("group-size mechanisms are pure epsilon-DP (geometric noise): give --epsilon, not --rho")
    if args.epsilon is None:
        raise CliError("give --epsilon (the pure-DP budget)")
    if args.unbounded or args.contributions != 1 or args.distinct_pairs:
        raise CliError("--unbounded, --contributions and --distinct-pairs do not apply to group sizes: the "
                       "neighbour relation is one person added to or removed from an existing group")
    if args.geo and args.observed_domain_public:
        raise CliError("give either --geo (a declared public domain) or --observed-domain-public, not both")
    if not args.geo and not args.observed_domain_public:
        raise CliError("refusing to release: the set of regions would be read from the private rows; give the public "
                       "regions with --geo FILE, or pass --observed-domain-public to state that they are public")


def domain_text(args: argparse.Namespace) -> str:
    """The line every group-size run prints about its regions."""
    return (f"domain: regions declared by --geo {args.geo}" if args.geo else
            "domain: regions read from the input rows and assumed public (--observed-domain-public)")


def read_count_of_counts(args: argparse.Namespace) -> Any:
    """Read the input (and ``--geo``) and build the :class:`CountOfCounts` the arguments describe."""
    from hierdp.hierarchy.count_of_counts import CountOfCounts

    levels = split_columns(args.levels)
    # only the columns the release uses are read (an unused column, blank in most rows, is ignored)
    used = [args.unit, *levels] + [c for c in (args.size, args.person) if c]
    df = read_table(args.input, counts=[args.size] if args.size else [], columns=used)
    domain = None
    if args.geo:
        have = read_table_header(args.geo)
        lack = [c for c in levels if c not in have]
        if lack:
            raise CliError(f"--geo {Path(args.geo).name}: no level column {lack[0]!r}; it needs the "
                           f"--levels columns {levels} (it has {have})")
        domain = read_table(args.geo, what="--geo", columns=levels)
    common = dict(unit=args.unit, levels=levels, K=args.max_size, domain=domain,
                  observed_domain_public=bool(args.observed_domain_public and domain is None),
                  observed_k_public=bool(args.observed_max_size_public), top_code=bool(args.top_code))
    if args.size:
        return CountOfCounts.from_units(df, size=args.size, **common)
    return CountOfCounts.from_persons(df, person=args.person, **common)


def _mechanism(args: argparse.Namespace, name: str) -> Any:
    from hierdp.mechanisms import MechanismParameterError, registry
    from hierdp.privacy.errors import PrivacyError

    params: dict[str, Any] = {"epsilon": args.epsilon, "secure": bool(args.secure)}
    if args.delta is not None:
        params["delta"] = args.delta
    if args.solver is not None:
        params["solver"] = args.solver
    if args.time_limit is not None:
        params["time_limit"] = args.time_limit
    if args.region_totals_public:
        params["region_totals_public"] = True
    params.update(_constraint_params(args, name))
    try:
        return registry.create(name, **params)
    except (PrivacyError, MechanismParameterError) as exc:
        raise CliError(f"--mechanism {name}: {exc}") from None


def _constraint_params(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """``constraints=`` from ``--constraints FILE``, read now (a bad line is refused before any input)."""
    from hierdp.constraints import ConstraintError, Constraints

    failsafe = bool(getattr(args, "constraints_failsafe", False))
    path = getattr(args, "constraints", None)
    if path is None:
        if failsafe:
            raise CliError("--constraints-failsafe needs --constraints FILE")
        return {}
    if failsafe and name != "pgsr_topdown":
        raise CliError(f"--constraints-failsafe applies to pgsr_topdown (level by level); --mechanism {name} decides "
                       "its constraints in full before any noise, so there is nothing to relax")
    try:
        constraints = Constraints.read(path)
    except ConstraintError as exc:
        raise CliError(f"--constraints {path}: {exc}") from None
    out: dict[str, Any] = {"constraints": constraints}
    if failsafe:
        out["on_infeasible"] = "relax"
    return out


def run_group_sizes(args: argparse.Namespace, layout: Layout) -> int:
    """``hierdp release --unit ...``: checks, read, build, release, write (exit code 0); ``layout``
    is the group-size layout :func:`hierdp.cli.layouts.decide_layout` found (its flags checked)."""
    from hierdp.cli.console import EXIT_INTERRUPTED, Console, run_interruptible

    console = Console("hierdp release")
    files = [Path(args.input)] + ([Path(args.geo)] if args.geo else [])
    for f in files:
        check_input_file(f, "input" if f == Path(args.input) else "--geo")
    out = check_output_path(args.output, files, overwrite=args.overwrite)
    check_accounting_target(out, args.overwrite)
    name = args.mechanism or default_mechanism("groups")
    check_mechanism_fits(name, "groups")
    check_solver_flags(args, name)
    check_group_size_arguments(args)
    if args.max_size is not None:  # public: refused before the input is read (one region per level at least)
        check_group_memory(name, args.max_size, len(split_columns(args.levels)) + 1, known=False)
    check_randomness_flags(args)
    mech = _mechanism(args, name)
    check_intervals_before_noise(args, mech, "groups")  # public configuration: decided before any noise
    seed, drawn = seed_for_run(args)
    console.say(randomness_text(args.secure, seed, drawn))
    console.say(domain_text(args))
    written = False
    try:
        def work() -> tuple[Any, float, Any]:
            t0 = time.perf_counter()
            data = read_count_of_counts(args)
            check_group_memory(name, data.K, data.n_regions, known=True)  # the public regions: before any noise
            t_build = time.perf_counter() - t0
            return data, t_build, mech.release(data, seed=seed, progress=show_progress(args))

        data, _build_s, rel = run_interruptible(work)
        frame, interval_error = release_table(args, rel, seed=seed, progress=show_progress(args), mechanism=mech)
        side = save_output(rel, out, frame, overwrite=args.overwrite)
        written = True
        console.say(input_text(args.input, data))
        console.say(rel.accounting_text())
        console.say(f"consistency violations (#CV): {rel.count_violations()}; level totals: "
                    + ", ".join(f"{rel.level_names[lev]} {int(rel.values[rel.level == lev].sum()):,}"
                                for lev in range(rel.n_levels)) + f" (G = {data.G:,})")
        console.say(f"wrote {len(frame):,} rows (region x size) to {out} and its accounting to {side}")
        code = report_intervals(console, args, frame, interval_error)
        if code is not None:
            return code
    except KeyboardInterrupt:
        console.error(f"interrupted; {out} was written before the interruption" if written
                      else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    return finish_release(console, rel.params.get("randomness") == "secure", out)
