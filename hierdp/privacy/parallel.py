"""Generalized parallel composition (paper 004, App. B.2, Lemmas 9-12) and stability checks.

A record -> groups map ``g`` sends each record to the set of groups it belongs to (a person is in
a county *and* its state, in "Asian alone" *and* "Asian alone or in combination", ...). Its
*stability* (maximum degree) is ``Delta(g) = max_r |g(r)|``. Running one mechanism per group on
that group's records, with every mechanism ``c``-private, is ``Delta(g) * c``-private in pure DP
(Lemma 9), zCDP (Lemma 10) and RDP at every order (Lemma 12): a record touches at most
``Delta(g)`` of the mechanisms and their losses add.

The guarantee needs ``Delta(g)`` over the whole record *domain*, which only the data owner can
declare. The data can refute a declaration (:func:`check_stability`) but never prove it, so
mechanisms account with the declared value and check the observed one.

Memberships are accepted as

* a pandas DataFrame with one row per (record, group) pair (columns ``record`` and ``group`` by
  default; duplicate pairs count once),
* a mapping ``record -> iterable of groups``, or
* a sequence whose i-th item is the iterable of groups of record i.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd
import scipy.sparse as sp

from hierdp.privacy.errors import PrivacyError, PrivacyParameterError

__all__ = [
    "Memberships",
    "StabilityError",
    "check_stability",
    "max_degree",
    "membership_pairs",
    "parallel_compose",
    "parallel_compose_groups",
    "record_degrees",
    "sequential_compose",
]

Calculus = Literal["pure", "zcdp", "rdp"]
Memberships: TypeAlias = pd.DataFrame | Mapping | Sequence


class StabilityError(PrivacyError):
    """A record -> groups map puts some record in more groups than its declared stability."""


def membership_pairs(memberships: Memberships, record: str = "record",
                     group: str = "group") -> pd.DataFrame:
    """Normalise memberships to a de-duplicated frame with columns ``record`` and ``group``.

    Raises:
        PrivacyParameterError: unsupported type, missing columns, or missing values.
    """
    if isinstance(memberships, pd.DataFrame):
        missing = [c for c in (record, group) if c not in memberships.columns]
        if missing:
            raise PrivacyParameterError(
                f"memberships frame lacks column(s) {missing}; has {list(memberships.columns)}")
        pairs = memberships[[record, group]].rename(columns={record: "record", group: "group"})
    elif isinstance(memberships, Mapping):
        pairs = _pairs_from_items(memberships.items())
    elif isinstance(memberships, Sequence) and not isinstance(memberships, (str, bytes)):
        pairs = _pairs_from_items(enumerate(memberships))
    else:
        raise PrivacyParameterError(
            "memberships must be a DataFrame of (record, group) rows, a mapping record -> groups "
            f"or a sequence of group lists; got {type(memberships).__name__}")
    if pairs.isna().to_numpy().any():
        raise PrivacyParameterError("memberships contain missing record or group values")
    return pairs.drop_duplicates(ignore_index=True)


def _pairs_from_items(items: Iterable) -> pd.DataFrame:
    recs: list = []
    grps: list = []
    for rec, groups in items:
        if isinstance(groups, (str, bytes)) or not isinstance(groups, Iterable):
            raise PrivacyParameterError(
                f"record {rec!r}: groups must be an iterable of group labels, got {groups!r}")
        for g in groups:
            recs.append(rec)
            grps.append(g)
    return pd.DataFrame({"record": pd.Series(recs, dtype=object),
                         "group": pd.Series(grps, dtype=object)})


def record_degrees(memberships: Memberships, record: str = "record",
                   group: str = "group") -> pd.Series:
    """Number of distinct groups of each record that appears in the memberships."""
    pairs = membership_pairs(memberships, record, group)
    codes, labels = pd.factorize(pairs["record"], sort=False)
    counts = np.bincount(codes, minlength=len(labels)) if len(labels) else np.zeros(0, np.int64)
    return pd.Series(counts, index=pd.Index(labels, name="record"), name="degree")


def max_degree(memberships: Memberships, record: str = "record", group: str = "group") -> int:
    """Observed stability: the maximum number of groups any record is in (0 if none)."""
    degrees = record_degrees(memberships, record, group)
    return int(degrees.max()) if len(degrees) else 0


def _check_declared(declared: object) -> int:
    if isinstance(declared, bool) or not isinstance(declared, (int, np.integer)) or declared < 1:
        raise PrivacyParameterError(f"declared stability must be an integer >= 1, got {declared!r}")
    return int(declared)


def check_stability(memberships: Memberships, declared: int, *, name: str = "group map",
                    record: str = "record", group: str = "group") -> int:
    """Check that no record is in more than ``declared`` groups; return the observed stability.

    Raises:
        StabilityError: the observed maximum degree exceeds ``declared`` (the message names the
            map, both values and an offending record).
        PrivacyParameterError: ``declared`` is not an integer >= 1.
    """
    dec = _check_declared(declared)
    degrees = record_degrees(memberships, record, group)
    observed = int(degrees.max()) if len(degrees) else 0
    if observed > dec:
        worst = degrees.idxmax()
        raise StabilityError(
            f"{name}: observed stability {observed} exceeds the declared stability {dec} "
            f"(record {worst!r} is in {observed} groups); declare Delta(g) >= {observed} or fix "
            "the map")
    return observed


def _cost_array(cost: object, calculus: str) -> np.ndarray:
    if calculus not in ("pure", "zcdp", "rdp"):
        raise PrivacyParameterError(f"calculus must be 'pure', 'zcdp' or 'rdp', got {calculus!r}")
    arr = np.asarray(cost, dtype=np.float64)
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise PrivacyParameterError(f"privacy costs must be >= 0 (inf allowed), got {cost!r}")
    if calculus != "rdp" and arr.ndim > 1:
        raise PrivacyParameterError(f"{calculus} costs must be scalars per group, got shape {arr.shape}")
    return arr


def parallel_compose(cost: float | np.ndarray, degree: int, calculus: Calculus = "pure") -> float | np.ndarray:
    """Lemmas 9/10/12: mechanisms on the groups of a map with maximum degree ``degree``, each
    ``cost``-private in ``calculus``, are together ``degree * cost``-private.

    ``cost``: epsilon (pure), rho (zcdp) or an RDP curve sampled on an alpha grid (rdp, array).
    """
    z = _check_declared(degree)
    arr = _cost_array(cost, calculus)
    out = z * arr
    return out if arr.ndim else float(out)


def parallel_compose_groups(costs: Mapping | pd.Series | np.ndarray, memberships: Memberships,
                            calculus: Calculus = "pure", *, record: str = "record",
                            group: str = "group") -> float | np.ndarray:
    """Heterogeneous per-group costs: ``max over records r of sum_{g in g(r)} cost_g``.

    The same proofs (the loss of neighbouring inputs differing in r is the sum over the groups
    containing r) give this bound; it is at most ``max_degree * max(cost)``. Computed over the
    records present in ``memberships``, so for a guarantee the memberships must enumerate the
    record *domain* (e.g. every combination of attributes), not just a sample of the data.

    ``costs`` maps group -> cost (a scalar, or for ``rdp`` a row of an alpha grid: pass a
    DataFrame/2-D array indexed by group). Groups without a cost are an error.
    """
    pairs = membership_pairs(memberships, record, group)
    if isinstance(costs, pd.DataFrame):
        table = costs
    elif isinstance(costs, pd.Series):
        table = costs.to_frame()
    elif isinstance(costs, Mapping):
        table = pd.DataFrame.from_dict({k: np.atleast_1d(np.asarray(v, dtype=np.float64))
                                        for k, v in costs.items()}, orient="index")
    else:
        raise PrivacyParameterError("costs must be a mapping group -> cost, a Series or a DataFrame")
    values = _cost_array(table.to_numpy(dtype=np.float64), "rdp")
    if calculus != "rdp" and values.shape[1] != 1:
        raise PrivacyParameterError(f"{calculus} costs must be one number per group")
    _cost_array(0.0, calculus)
    g_index = table.index.get_indexer(pairs["group"])
    if np.any(g_index < 0):
        unknown = pairs["group"][g_index < 0].iloc[0]
        raise PrivacyParameterError(f"group {unknown!r} has no cost")
    r_codes, r_labels = pd.factorize(pairs["record"], sort=False)
    if len(r_labels) == 0:
        zero = np.zeros(values.shape[1])
        return zero if calculus == "rdp" else 0.0
    incidence = sp.csr_matrix((np.ones(len(pairs)), (r_codes, g_index)),
                              shape=(len(r_labels), len(table)))
    per_record = incidence @ values  # records x (1 or alphas)
    worst = per_record.max(axis=0)
    return np.asarray(worst) if calculus == "rdp" else float(worst[0])


def sequential_compose(costs: Iterable[float | np.ndarray], calculus: Calculus = "pure") -> float | np.ndarray:
    """Lemmas 1-3: adaptive sequential composition adds epsilons, rhos, or RDP curves per order."""
    arrays = [_cost_array(c, calculus) for c in costs]
    if not arrays:
        return 0.0
    total = np.sum(np.stack(np.broadcast_arrays(*arrays)), axis=0)
    return total if total.ndim else float(total)
