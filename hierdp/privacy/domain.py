"""Is the domain of a release public? One check every mechanism runs before drawing noise.

Differential privacy protects the *counts*; the set of nodes a mechanism measures (the cities of a
geography, the areas of an O/D tree, the population groups of a table) is treated as public. If
that set is read off the private rows, a node whose only record is one person appears in the
release exactly when that person is in the data, and no amount of noise hides it.

An input tree says where its domain came from through two attributes (duck-typed, so any tree
type can take part):

* ``domain_source``: ``"declared"`` (the structure was given explicitly: edges, a graph, arrays,
  or a public universe / geography passed beside the data) or ``"observed"`` (derived from the
  rows of the data);
* ``domain_assumption``: for an observed domain, the user's explicit statement that it is public
  (``None`` when they made none). A release states it in its guarantee.

A tree without ``domain_source`` is taken as declared (it was built by code that owns its
structure, e.g. a synthetic generator).
"""

from __future__ import annotations

from typing import Any

from hierdp.privacy.errors import PrivacyError

__all__ = ["OBSERVED_DOMAIN_ASSUMPTION", "ObservedDomainError", "check_public_domain"]

#: the words a release uses when the user declared an observed domain public
OBSERVED_DOMAIN_ASSUMPTION = "the set of nodes observed in the input is assumed public (declared by the user)"


class ObservedDomainError(PrivacyError):
    """The tree's nodes were derived from the private rows and nobody declared them public."""


def check_public_domain(tree: Any, *, what: str = "release") -> str | None:
    """Refuse a tree whose domain comes from the data unless the user declared it public.

    Returns:
        ``None`` for a declared domain, else the assumption text the release must state.

    Raises:
        ObservedDomainError: an observed domain without a declared assumption.
    """
    source = getattr(tree, "domain_source", "declared")
    if source == "declared":
        return None
    if source != "observed":
        raise ObservedDomainError(f"unknown domain_source {source!r} (expected 'declared' or 'observed')")
    assumption = getattr(tree, "domain_assumption", None)
    if not assumption:
        raise ObservedDomainError(
            f"refusing to {what}: the tree's nodes were read from the private rows, so a node whose only record is "
            "one person would reveal that person. Declare the public domain (a universe / geography of every "
            "possible node, e.g. --geo on the command line), or state that the observed domain is public "
            "(observed_domain_public=True, --observed-domain-public) and the release will say so.")
    return str(assumption)
