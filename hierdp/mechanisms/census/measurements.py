"""Noisy measurements over a spine as data: the layout of a measurements file, reading and writing it.

The Census Bureau publishes the noisy measurements of the 2020 Disclosure Avoidance System (the
"noisy measurement files", NMF: per geounit, per query of the strategy, the noisy answers - integers
from the discrete Gaussian mechanism - and their variances; the published files also hold the
invariants and constraints the DAS post-processed under). Researchers post-process them again.
hierdp reads and writes measurements in a long ("tidy") Parquet layout modelled on them, one row
per answer:

============================  =========  ===========================================================
column                        type       meaning
============================  =========  ===========================================================
``geolevel``                  string     the geounit's geolevel, as the spine names it
``geocode``                   string     the geounit, as the spine names it at that geolevel
``query_name``                string     the query group (a group of the :class:`QueryStrategy`)
``query_index``               int64      the answer within the group: its flattened index, C order
                                         over the group's kept attributes (0 .. R_q - 1)
``noisy_measurement``         float64    the noisy answer (integer-valued for discrete noise)
``variance``                  float64    its noise variance (> 0; the same for every answer of one
                                         geounit and query group)
============================  =========  ===========================================================

A geounit answers each query group completely or not at all (a strategy may give a group no share
at some geolevels); a geounit with no answer is unmeasured (bypassed, as the spine's single
children). Part of a group's answers is refused. Files hierdp writes
carry the strategy in the Parquet metadata (``hierdp.strategy``: shape, groups, shares, attribute
names); any other file is read with the strategy given. This is hierdp's own layout: the Bureau's
files store a geounit's answers of one query as an array in one row and name geounits by their
GEOIDs - explode the arrays (``query_index`` = position) and map the GEOIDs to the spine's names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from hierdp.errors import HierdpError

__all__ = ["COLUMNS", "MeasurementsError", "NoisyMeasurements"]

#: the columns of a measurements file, in order, with their Parquet types
COLUMNS = {"geolevel": "string", "geocode": "string", "query_name": "string", "query_index": "int64",
           "noisy_measurement": "float64", "variance": "float64"}
#: the Parquet metadata key of the strategy of a file hierdp wrote
STRATEGY_KEY = b"hierdp.strategy"


class MeasurementsError(HierdpError, ValueError):
    """A measurements file does not fit its spine or strategy (the message names the row or geounit)."""


def strategy_record(strategy: Any) -> dict[str, Any]:
    """A :class:`~hierdp.mechanisms.census.QueryStrategy` as JSON (shares exact, recodes and
    per-geolevel shares included)."""
    return {**strategy.describe(),
            "attribute_names": None if strategy.attribute_names is None else list(strategy.attribute_names)}


def strategy_from_record(rec: dict[str, Any]) -> Any:
    from hierdp.mechanisms.census.strategy import QueryStrategy

    names = rec.get("attribute_names")
    recodes = {g: {int(a): tuple(v) for a, v in r.items()} for g, r in (rec.get("recodes") or {}).items()}
    levels = {lev: {g: Fraction(v) for g, v in sh.items()} for lev, sh in (rec.get("level_shares") or {}).items()}
    return QueryStrategy(tuple(rec["shape"]), {g: tuple(k) for g, k in rec["groups"].items()},
                         {g: Fraction(v) for g, v in rec["shares"].items()},
                         None if names is None else tuple(names), recodes or None, levels or None)


@dataclass
class NoisyMeasurements:
    """Every geounit's noisy answers to a query strategy, dense by geounit (see the module docstring).

    Attributes:
        spine: the :class:`~hierdp.spines.Spine` the geounits belong to.
        strategy: the :class:`~hierdp.mechanisms.census.QueryStrategy`.
        answers: ``(n_geounits, A)`` noisy answers, the groups' answers side by side in the
            strategy's order (NaN rows: unmeasured geounits).
        variances: ``(n_geounits, n_groups)`` noise variances (NaN where unmeasured).
        accounting: the accounting of the measurement when hierdp made it (``None`` for a file).
    """

    spine: Any
    strategy: Any
    answers: np.ndarray
    variances: np.ndarray
    accounting: Any = None
    params: dict[str, Any] = field(default_factory=dict)

    # -- layout ------------------------------------------------------------------------------
    @property
    def groups(self) -> list[str]:
        return list(self.strategy.groups)

    def group_sizes(self) -> list[int]:
        """Answers per query group R_q."""
        q = self.strategy.queries
        return [int(q.n_answers(j)) for j in range(len(self.groups))]

    @property
    def measured(self) -> np.ndarray:
        """Whether each geounit has its answers."""
        return ~np.isnan(self.answers).all(axis=1)

    # -- frames and files --------------------------------------------------------------------
    def to_frame(self) -> Any:
        """The measurements in the file layout (one row per answer of every measured geounit)."""
        import pandas as pd

        spine = self.spine
        u = np.flatnonzero(self.measured)
        sizes = self.group_sizes()
        group = np.repeat(np.arange(len(sizes)), sizes)
        index = np.concatenate([np.arange(r) for r in sizes]).astype(np.int64)
        A = group.size
        level_names = np.asarray(spine.level_names, dtype=object)
        have = ~np.isnan(self.answers[u].ravel())  # a group without a share at a geolevel has no answers
        return pd.DataFrame({
            "geolevel": pd.array(np.repeat(level_names[spine.level[u]], A)[have], dtype="string"),
            "geocode": pd.array(np.repeat(np.asarray(spine.names, dtype=object)[u], A).astype(str)[have],
                                dtype="string"),
            "query_name": pd.array(np.tile(np.asarray(self.groups, dtype=object)[group], u.size)[have],
                                   dtype="string"),
            "query_index": np.tile(index, u.size)[have],
            "noisy_measurement": self.answers[u].ravel()[have],
            "variance": self.variances[u][:, group].ravel()[have],
        })

    def write_parquet(self, path: str | Path) -> Path:
        """Write the file layout to ``path`` (one Parquet file; the strategy in its metadata)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        table = pa.Table.from_pandas(self.to_frame(), preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[STRATEGY_KEY] = json.dumps(strategy_record(self.strategy)).encode("utf-8")
        pq.write_table(table.replace_schema_metadata(meta), path)
        return path

    @classmethod
    def read_parquet(cls, path: str | Path, spine: Any, strategy: Any = None) -> NoisyMeasurements:
        """Read a measurements file (a Parquet file or dataset directory) for ``spine``.

        Args:
            path: the file.
            spine: the spine its geounits belong to.
            strategy: the query strategy (default: the one a file hierdp wrote records).

        Raises:
            MeasurementsError: a missing column, an unknown geounit or query group, an answer
                index out of range, a duplicate answer, a variance that is not positive and finite
                or differs within one geounit's query group, a geounit with only some answers.
        """
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if strategy is None:
            meta = table.schema.metadata or {}
            if STRATEGY_KEY not in meta:
                raise MeasurementsError(f"{path}: the file does not record its query strategy; pass strategy=")
            strategy = strategy_from_record(json.loads(meta[STRATEGY_KEY]))
        return cls.from_frame(table.to_pandas(), spine, strategy, where=str(path))

    @classmethod
    def from_frame(cls, frame: Any, spine: Any, strategy: Any, *, where: str = "measurements") -> NoisyMeasurements:
        """The measurements of a frame in the file layout (see :meth:`read_parquet`)."""
        import pandas as pd

        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            raise MeasurementsError(f"{where}: missing column {missing[0]!r}; a measurements file has "
                                    f"{', '.join(COLUMNS)}")
        n = len(frame)
        for c in ("geolevel", "geocode", "query_name"):
            if frame[c].isna().any():
                raise MeasurementsError(f"{where}: row {int(np.flatnonzero(frame[c].isna().to_numpy())[0])}: "
                                        f"{c} is empty")
        groups = list(strategy.groups)
        sizes = [int(strategy.queries.n_answers(j)) for j in range(len(groups))]
        first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # geounits: (geolevel, geocode) -> spine index
        lev_index = pd.Index([str(x) for x in spine.level_names])
        lev = lev_index.get_indexer(frame["geolevel"].astype(str))
        if (lev < 0).any():
            r = int(np.flatnonzero(lev < 0)[0])
            raise MeasurementsError(f"{where}: row {r}: unknown geolevel {frame['geolevel'].iloc[r]!r}; the spine's "
                                    f"geolevels are {list(spine.level_names)}")
        keys = pd.MultiIndex.from_arrays([np.asarray(spine.level, dtype=np.int64),
                                          np.asarray(spine.names, dtype=object).astype(str)])
        u = keys.get_indexer(pd.MultiIndex.from_arrays([lev, frame["geocode"].astype(str).to_numpy()]))
        if (u < 0).any():
            r = int(np.flatnonzero(u < 0)[0])
            raise MeasurementsError(f"{where}: row {r}: geounit {frame['geocode'].iloc[r]!r} is not in geolevel "
                                    f"{frame['geolevel'].iloc[r]!r} of the spine")
        g = pd.Index(groups).get_indexer(frame["query_name"].astype(str))
        if (g < 0).any():
            r = int(np.flatnonzero(g < 0)[0])
            raise MeasurementsError(f"{where}: row {r}: unknown query group {frame['query_name'].iloc[r]!r}; the "
                                    f"strategy's groups are {groups}")
        idx = pd.to_numeric(frame["query_index"], errors="coerce").to_numpy(dtype=float)
        size_of = np.asarray(sizes)[g]
        bad = ~np.isfinite(idx) | (idx != np.round(idx)) | (idx < 0) | (idx >= size_of)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise MeasurementsError(f"{where}: row {r}: query_index {frame['query_index'].iloc[r]} is not an answer "
                                    f"of query group {groups[g[r]]!r} (0 .. {size_of[r] - 1})")
        value = pd.to_numeric(frame["noisy_measurement"], errors="coerce").to_numpy(dtype=float)
        var = pd.to_numeric(frame["variance"], errors="coerce").to_numpy(dtype=float)
        for what, arr, ok in (("noisy_measurement", value, np.isfinite(value)),
                              ("variance", var, np.isfinite(var) & (var > 0))):
            if not ok.all():
                r = int(np.flatnonzero(~ok)[0])
                need = "a finite number" if what == "noisy_measurement" else "a finite number > 0"
                raise MeasurementsError(f"{where}: row {r}: {what} is {float(arr[r])!r}; it must be {need}")
        col = first[g] + idx.astype(np.int64)
        A = int(first[-1])
        flat = u.astype(np.int64) * A + col
        order = np.argsort(flat, kind="stable")
        dup = np.flatnonzero(np.diff(flat[order]) == 0)
        if dup.size:
            r = int(order[dup[0] + 1])
            raise MeasurementsError(f"{where}: row {r}: a second answer {int(idx[r])} of query group {groups[g[r]]!r} "
                                    f"for geounit {frame['geocode'].iloc[r]!r}")
        answers = np.full((spine.n, A), np.nan)
        answers[u, col] = value
        # variances: one per (geounit, group)
        variances = np.full((spine.n, len(groups)), np.nan)
        gv = u.astype(np.int64) * len(groups) + g
        vmin = np.full(spine.n * len(groups), np.inf)
        vmax = np.full(spine.n * len(groups), -np.inf)
        np.minimum.at(vmin, gv, var)
        np.maximum.at(vmax, gv, var)
        differ = np.flatnonzero(np.isfinite(vmin) & (vmin != vmax))
        if differ.size:
            uu, gg = divmod(int(differ[0]), len(groups))
            raise MeasurementsError(f"{where}: geounit {spine.names[uu]!r}, query group {groups[gg]!r}: the answers "
                                    f"have different variances ({vmin[differ[0]]:g} .. {vmax[differ[0]]:g}); the "
                                    "weighted least squares weighs a geounit's query group by one variance")
        has = np.isfinite(vmin)
        variances.ravel()[has] = vmin[has]
        have = ~np.isnan(answers)
        for j, g in enumerate(groups):  # a group is answered completely or not at all
            n_have = have[:, first[j]:first[j + 1]].sum(axis=1)
            partial = np.flatnonzero((n_have > 0) & (n_have < sizes[j]))
            if partial.size:
                p = int(partial[0])
                raise MeasurementsError(f"{where}: geounit {spine.names[p]!r} ({spine.level_names[spine.level[p]]}) "
                                        f"has some answers but not every answer of query group {g!r}; a geounit "
                                        "answers a group completely, or not at all")
        del n
        return cls(spine, strategy, answers, variances)
