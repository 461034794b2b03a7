"""Scale-out flags of the tree layout (``--engine``, ``--scheduler``, ``--workers``, ``--checkpoint``,
``--resume``; docs/scale.md): their checks, and the Dask client of ``--engine dask``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hierdp.cli.common import positive_int
from hierdp.cli.io import CliError
from hierdp.errors import HierdpError

__all__ = ["CONNECT_TIMEOUT", "add_scale_arguments", "check_scale_arguments", "close_dask_client", "is_dataset",
           "open_dask_client"]

#: seconds to reach a --scheduler before giving up
CONNECT_TIMEOUT = 10.0


def add_scale_arguments(p: argparse.ArgumentParser) -> None:
    """Engines and checkpoints (TopDown mechanisms; see docs/scale.md)."""
    scale = p.add_argument_group("scale-out and checkpoints (TopDown mechanisms)")
    scale.add_argument("--engine", choices=("serial", "processes", "dask"), default=None,
                       help="where levels run: this process (default), a process pool, or a Dask cluster; seeded "
                            "releases are identical on every engine")
    scale.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="Dask scheduler address (tcp://host:8786) for --engine dask (default: a local cluster)")
    scale.add_argument("--workers", type=positive_int, default=None,
                       help="processes of the pool or of the local Dask cluster (default 2)")
    scale.add_argument("--checkpoint", metavar="DIR", default=None,
                       help="write every finished level (values, accounting so far, parameters, input fingerprint) "
                            "to DIR, a new or empty directory")
    scale.add_argument("--resume", metavar="DIR", default=None,
                       help="continue the interrupted run checkpointed in DIR from its last finished level (same "
                            "input and parameters; its seed unless --seed is given)")


def check_scale_arguments(args: argparse.Namespace) -> None:
    """Refuse inconsistent engine / checkpoint flags before any input is read."""
    engine = getattr(args, "engine", None)
    if getattr(args, "scheduler", None) is not None:
        if engine not in (None, "dask"):
            raise CliError(f"--scheduler is the address of a Dask scheduler; it needs --engine dask, not --engine "
                           f"{engine}")
        args.engine = engine = "dask"
    if getattr(args, "workers", None) is not None and engine not in ("processes", "dask"):
        raise CliError("--workers needs --engine processes or --engine dask")
    if getattr(args, "workers", None) is not None and args.scheduler is not None:
        raise CliError("--workers sizes a local Dask cluster; a --scheduler's cluster has its own workers")
    if args.checkpoint is not None and args.resume is not None:
        raise CliError("give --checkpoint DIR for a new run or --resume DIR to continue one, not both (a resumed "
                       "run keeps writing to its own checkpoint)")
    if args.resume is not None and args.seed is not None and args.secure:
        raise CliError("--seed and --secure exclude each other")
    if Path(args.input).is_dir():
        from hierdp.scale.dataset import parquet_files

        try:
            parquet_files(args.input)
        except HierdpError:
            raise CliError(f"input {args.input} is a directory with no .parquet files (a directory input is read as "
                           "a Parquet dataset)") from None
        if not args.levels or args.origin or args.origin_levels:
            raise CliError(f"input {args.input} is a directory: a Parquet dataset is read with the --levels layout "
                           "only")


def is_dataset(args: argparse.Namespace) -> bool:
    """True when the input is a directory (a Parquet dataset)."""
    return Path(args.input).is_dir()


def open_dask_client(args: argparse.Namespace) -> Any:
    """A ``distributed.Client`` for --engine dask: the --scheduler's, or a local cluster's."""
    import logging

    from hierdp.scale.errors import SchedulerUnreachable

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CliError("--engine dask needs dask.distributed: pip install 'hierdp[dask]'") from None
    if args.scheduler is not None:
        try:
            return Client(args.scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {args.scheduler!r} within "
                                       f"{CONNECT_TIMEOUT:g} s ({type(exc).__name__}: {exc}); nothing was read or "
                                       "written") from None
    cluster = LocalCluster(n_workers=args.workers or 2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    setattr(client, "_hierdp_cluster", cluster)  # noqa: B010 (closed with the client)
    return client


def close_dask_client(client: Any) -> None:
    """Close a client from :func:`open_dask_client` (and the local cluster it made)."""
    if client is None:
        return
    cluster = getattr(client, "_hierdp_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()
