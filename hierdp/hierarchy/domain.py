"""Where a tree's set of nodes came from: the ``domain_source`` / ``domain_assumption`` pair.

Every tree type of :mod:`hierdp.hierarchy` carries two attributes that
:func:`hierdp.privacy.domain.check_public_domain` reads before a mechanism draws noise:

* ``domain_source``: ``"declared"`` when the structure was given as public input (edges, a
  graph, arrays, a geography or a ``domain=`` frame listing every possible node, a synthetic
  generator, a bundled public list), ``"observed"`` when it was read off the data's rows;
* ``domain_assumption``: ``None``, or for an observed domain the user's explicit statement that
  it is public (``observed_domain_public=True``), which the release then states.
"""

from __future__ import annotations

from hierdp.hierarchy.errors import HierarchyError

__all__ = ["DECLARED", "OBSERVED", "check_domain_attributes", "observed_assumption"]

DECLARED = "declared"
OBSERVED = "observed"


def observed_assumption(observed_domain_public: bool) -> str | None:
    """The assumption text an observed domain carries: the standard sentence of
    :data:`hierdp.privacy.domain.OBSERVED_DOMAIN_ASSUMPTION` when the user declared it public,
    else ``None`` (mechanisms then refuse the tree)."""
    if observed_domain_public not in (True, False):
        raise HierarchyError(f"observed_domain_public must be True or False, got {observed_domain_public!r}")
    if not observed_domain_public:
        return None
    from hierdp.privacy.domain import OBSERVED_DOMAIN_ASSUMPTION

    return OBSERVED_DOMAIN_ASSUMPTION


def check_domain_attributes(source: str, assumption: str | None) -> None:
    """Refuse an unknown ``domain_source`` or an assumption attached to a declared domain."""
    if source not in (DECLARED, OBSERVED):
        raise HierarchyError(f"domain_source must be {DECLARED!r} or {OBSERVED!r}, got {source!r}")
    if source == DECLARED and assumption is not None:
        raise HierarchyError("a declared domain needs no assumption; domain_assumption is for observed domains")
