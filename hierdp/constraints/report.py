"""What a release states about the constraint set it honoured: one code path for every family.

Every mechanism family that takes ``constraints=`` (TopDown, group sizes, the spatial consistency
step) states the set the same way, through :func:`accounting_parts`:

* ``details["constraints"]``: the set's SHA-256, its entries by kind and (up to
  :data:`MAX_LISTED` entries) the entries themselves as file records, the family's figures of how
  they were applied, the failsafe setting and every relaxation;
* one note, ``post-processed under public constraints (...): <how they were applied>; the noise
  and the ledger are the mechanism's own``, and one note per relaxed row.

A bound constraint set (:class:`~hierdp.constraints.ResolvedConstraints` for trees,
:class:`~hierdp.constraints.CellConstraints` for histograms, the spatial binding) derives from
:class:`StatedConstraints` and says, in :meth:`StatedConstraints.applied`, how it was applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["MAX_LISTED", "StatedConstraints", "accounting_parts", "constraints_note", "relaxation_note"]

#: largest set whose entries the accounting lists one by one (a larger one is stated by its hash)
MAX_LISTED = 1000


def constraints_note(summary: str, applied: str) -> str:
    """The release's line about its public constraints (``summary``: :meth:`Constraints.summary`)."""
    return (f"post-processed under public constraints ({summary}): {applied}; the noise and the ledger are the "
            "mechanism's own")


def relaxation_note(r: dict[str, Any], names: Sequence[str] | None = None) -> str:
    """The release's line for one relaxed row (failsafe, never silent)."""
    side = (f"lower bound lowered by {r['lower_by']:,.0f}" if r["lower_by"] > 0
            else f"upper bound raised by {r['upper_by']:,.0f}")
    level = r.get("level")
    where = "" if level is None else f" at level {level}" + (f" ({names[level]})" if names is not None else "")
    return f"failsafe: constraint {r['row']!r} relaxed{where}: {side}"


class StatedConstraints:
    """A constraint set bound to a release's structure, as the release states it.

    Attributes:
        constraints: the :class:`~hierdp.constraints.Constraints` it was bound from.
        stats: public figures of the binding (counts, seconds), stated in the accounting.
    """

    constraints: Any
    stats: dict[str, Any]

    @property
    def digest(self) -> str:
        """SHA-256 of the constraint set."""
        return str(self.stats["sha256"])

    def describe(self) -> dict[str, Any]:
        """What the release's accounting states about the constraints (public input): the binding's
        figures, the SHA-256, and the entries as file records when there are at most
        :data:`MAX_LISTED` of them."""
        from hierdp.constraints.records import record_of

        out = dict(self.stats)
        if len(self.constraints) <= MAX_LISTED:
            out["records"] = [record_of(e) for e in self.constraints]
        return out

    def applied(self) -> str:
        """How the set was applied (the middle of the release's note)."""
        raise NotImplementedError

    def text(self) -> str:
        """One line for the release: what was applied, and that the guarantee is unchanged."""
        return constraints_note(self.constraints.summary(), self.applied())


def accounting_parts(bound: StatedConstraints, *, on_infeasible: str | None = None,
                     relaxations: Iterable[dict[str, Any]] = (),
                     level_names: Sequence[str] | None = None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``(details, notes)`` for a release's accounting: ``details`` goes under
    ``Accounting.details["constraints"]``, ``notes`` into ``Accounting.notes``.

    Args:
        bound: the bound constraint set.
        on_infeasible: the failsafe setting (``"abort"`` / ``"relax"``), or None where the feasible
            set does not depend on the noise (decided in full before any noise).
        relaxations: the relaxed rows (``{"row", "level", "lower_by", "upper_by"}``).
        level_names: names of the levels the relaxations refer to.
    """
    relaxed = list(relaxations)
    details = {**bound.describe(), "on_infeasible": on_infeasible, "relaxations": relaxed}
    notes = (bound.text(), *(relaxation_note(r, level_names) for r in relaxed))
    return details, notes
