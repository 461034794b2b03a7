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

    def accounting_text(self) -> str:
        """Multi-line accounting: mechanism (and solver), guarantee, then one line per part."""
        solver = getattr(self, "solver", None)
        lines = [f"mechanism: {self.mechanism}" + (f" (solver {solver})" if solver else ""),
                 f"guarantee: {self.guarantee}"]
        lines.extend(self.accounting.lines())
        return "\n".join(lines)
