"""The release protocol: what every mechanism's output offers, whatever its shape.

A release is a tree of nodes (:class:`~hierdp.release.tree.TreeRelease`, TopDown and the flat
paper-000 baselines), a table of counts (:class:`~hierdp.release.table.TableRelease`, SafeTab; a
histogram per node for group sizes fits it too), or a spatial partition; each one implements

* ``to_frame()`` - the published numbers, one row per released count, tidy;
* ``check_consistency()`` - the invariants the release *promises* (children sum to parents,
  non-negative integers, one tabulation per group, ...) checked on its own values; an empty list
  means all hold;
* ``accounting`` - a typed :class:`~hierdp.release.accounting.Accounting`;
* ``accounting_text()`` / ``guarantee`` - the same wording for every mechanism;
* ``mechanism``, ``params``, ``timings``;
* ``intervals(level=0.9, ...)`` - the frame with per-node ``lower`` / ``upper`` columns
  (:mod:`hierdp.intervals`: post-processing, no budget).

New release types subclass :class:`BaseRelease` and implement the two abstract methods.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

import pandas as pd

from hierdp.release.accounting import Accounting

__all__ = ["INTERVALS_BACKEND", "BaseRelease"]

#: the module whose ``intervals(release, level, ...)`` serves :meth:`BaseRelease.intervals`
INTERVALS_BACKEND = "hierdp.intervals"


class BaseRelease(ABC):
    """Shared behaviour of every release (see the module docstring).

    Subclasses provide the attributes ``mechanism: str``, ``accounting`` (an
    :class:`~hierdp.release.accounting.Accounting`), ``params: dict`` and ``timings``; ``solver``
    is optional.
    """

    mechanism: str
    accounting: Accounting
    params: dict

    @abstractmethod
    def to_frame(self) -> pd.DataFrame:
        """The released numbers, one row per count."""

    @abstractmethod
    def check_consistency(self) -> list[str]:
        """Violations of the invariants the release promises (empty: all hold)."""

    @property
    def guarantee(self) -> str:
        """The privacy guarantee in words, e.g. ``"0.0123-zCDP (bounded neighbours ...), implies ..."``."""
        return self.accounting.text()

    def intervals(self, level: float = 0.9, *, method: str = "auto", draws: int | None = None, seed: Any = None,
                  progress: bool = False, **options: Any) -> pd.DataFrame:
        """:meth:`to_frame` with per-node ``lower`` / ``upper`` columns at ``level`` (e.g. 0.9).

        Post-processing of the release and its public noise law: no privacy budget is spent.
        ``options``: ``domain=`` (the public tree / spine), ``mechanism=`` (histogram releases),
        ``construction=``; see :func:`hierdp.intervals.intervals` for the methods and what each
        interval is (a proven bound, exact, or an estimate: ``frame.attrs["intervals"]``).
        """
        # hierdp.intervals sits above the mechanisms (it re-runs their post-processing), which sit
        # above the releases: it is resolved by name at call time, as the mechanism and solver
        # registries resolve their plug-ins, so the release layer keeps no static edge upwards
        backend = importlib.import_module(INTERVALS_BACKEND)
        return backend.intervals(self, level, method=method, draws=draws, seed=seed, progress=progress, **options)

    # -- saving and loading (hierdp.release.saved) ------------------------------------------------
    def save(self, path: Any, *, overwrite: bool = False, frame: pd.DataFrame | None = None) -> Any:
        """Write the release's table to ``path`` (``.csv``, ``.csv.gz``, ``.parquet``, ``.pq``) and
        its accounting beside it (``path.accounting.json``; inside a Parquet file too), atomically;
        ``hierdp.load_release(path)`` reads back an equal release. Returns the accounting's path.
        ``frame``: the table to write, default :meth:`to_frame`; pass ``release.intervals(0.9)`` to
        publish the intervals too (the document then states how they were computed).
        See :mod:`hierdp.release.saved`."""
        from hierdp.release.saved import save_release

        return save_release(self, path, overwrite=overwrite, frame=frame)

    def _saved_structure(self) -> dict[str, Any]:
        """What, beside the table, the accounting and the parameters, rebuilds this release (plain
        JSON, :mod:`hierdp.release.encoding`). Release types override it with :meth:`_from_saved`."""
        from hierdp.release.encoding import encode

        return {"mechanism": encode(self.mechanism), "solver": encode(getattr(self, "solver", None))}

    def _saved_tables(self) -> dict[str, pd.DataFrame]:
        """Tables beside the published one that the release holds (e.g. a spatial tree's nodes)."""
        return {}

    @classmethod
    def _from_saved(cls, frame: pd.DataFrame, structure: dict[str, Any], *, accounting: Accounting,
                    params: dict[str, Any], tables: dict[str, pd.DataFrame]) -> BaseRelease:
        """The release :meth:`save` wrote (the inverse of :meth:`to_frame` and
        :meth:`_saved_structure`)."""
        raise NotImplementedError(f"{cls.__name__} cannot be read back from a saved table")

    def __eq__(self, other: object) -> bool:
        """Equal releases: the same type, published table, accounting, parameters and structure (run
        diagnostics such as ``timings`` are not compared: they are not part of a saved release)."""
        if type(other) is not type(self):
            return NotImplemented
        from hierdp.release.saved import identity

        if identity(self) != identity(other):
            return False
        return _frames_equal(self.to_frame(), other.to_frame())

    __hash__ = None  # type: ignore[assignment]

    def accounting_text(self) -> str:
        """Multi-line accounting: mechanism (and solver), guarantee, then one line per part."""
        solver = getattr(self, "solver", None)
        lines = [f"mechanism: {self.mechanism}" + (f" (solver {solver})" if solver else ""),
                 f"guarantee: {self.guarantee}"]
        lines.extend(self.accounting.lines())
        return "\n".join(lines)


def _frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Same columns, dtypes and values (NaN equal to NaN)."""
    return list(a.columns) == list(b.columns) and a.reset_index(drop=True).equals(b.reset_index(drop=True))
