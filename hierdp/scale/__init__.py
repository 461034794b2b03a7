"""Scale-out and operations for TopDown releases.

* :mod:`~hierdp.scale.levels` - what an engine runs: a level-wise mechanism's task, chunk by chunk
  (no mechanism is imported here);
* :mod:`~hierdp.scale.executors` - where a level runs: this process (default), a process pool, or
  a Dask cluster (``engine=`` / ``executor=`` on the TopDown mechanisms, ``--engine`` /
  ``--scheduler`` on the command line); a seeded release is identical on every engine because its
  noise is counter-based (:mod:`hierdp.privacy.counter_noise`);
* :mod:`~hierdp.scale.partition` - how a level's surviving parents are cut into partitions;
* :mod:`~hierdp.scale.checkpoint` - a level-by-level checkpoint (a Parquet dataset and a
  manifest) and its restart (``checkpoint=`` / ``resume=``, ``--checkpoint`` / ``--resume``);
* :mod:`~hierdp.scale.fingerprint` - the input fingerprint a checkpoint compares;
* :mod:`~hierdp.scale.dataset` - a Parquet dataset larger than memory, schema-checked and
  aggregated with Dask;
* :mod:`~hierdp.scale.tree` - :class:`LevelTree`, a lean integer tree for millions of nodes.

Nothing here imports Dask until a Dask engine or dataset is used. See ``docs/scale.md``.
"""

from hierdp.scale.checkpoint import CheckpointRun, read_level
from hierdp.scale.dataset import aggregate_parquet, check_schema, parquet_files
from hierdp.scale.errors import CheckpointError, DatasetSchemaError, EngineError, ScaleError, SchedulerUnreachable
from hierdp.scale.executors import DaskEngine, Engine, ProcessEngine, SerialEngine, resolve_engine
from hierdp.scale.fingerprint import tree_fingerprint
from hierdp.scale.partition import partition_rows
from hierdp.scale.tree import LevelTree

__all__ = [
           "CheckpointError",
           "CheckpointRun",
           "DaskEngine",
           "DatasetSchemaError",
           "Engine",
           "EngineError",
           "LevelTree",
           "ProcessEngine",
           "ScaleError",
           "SchedulerUnreachable",
           "SerialEngine",
           "aggregate_parquet",
           "check_schema",
           "parquet_files",
           "partition_rows",
           "read_level",
           "resolve_engine",
           "tree_fingerprint",
]
