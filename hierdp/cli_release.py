"""Moved to :mod:`hierdp.cli.release` (kept so that old imports keep working)."""

from hierdp.cli.io import read_table, write_table_atomic  # noqa: F401
from hierdp.cli.release import (  # noqa: F401
    add_release_parser,
    build_mechanism,
    build_tree,
    run_release,
)

__all__ = ["add_release_parser", "run_release", "read_table", "write_table_atomic", "build_tree", "build_mechanism"]
