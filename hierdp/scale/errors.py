"""Errors of the scale-out layer: checkpoints, clusters, input datasets (one family)."""

from __future__ import annotations

from hierdp.errors import HierdpError

__all__ = ["CheckpointError", "DatasetSchemaError", "EngineError", "ScaleError", "SchedulerUnreachable"]


class ScaleError(HierdpError, RuntimeError):
    """Base class of the errors of :mod:`hierdp.scale`."""


class CheckpointError(ScaleError, ValueError):
    """A checkpoint is missing, damaged, or does not belong to this run (other input, other
    parameters, other seed or randomness); the message names what differs. Raised before any
    noise is drawn."""


class SchedulerUnreachable(ScaleError, ConnectionError):
    """The Dask scheduler at the given address could not be reached (raised before any noise)."""


class DatasetSchemaError(ScaleError, ValueError):
    """The files of a Parquet dataset disagree on the columns a release reads (names or types),
    or lack one; the message names the files and the column."""


class EngineError(ScaleError, ValueError):
    """An engine option is invalid, or a run cannot be sent to workers (e.g. an object that
    cannot be pickled); raised before any noise."""
