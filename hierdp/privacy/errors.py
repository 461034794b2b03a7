"""The privacy layer's exceptions (one family, all ``ValueError`` so callers can catch broadly)."""

from __future__ import annotations

from hierdp.errors import HierdpError


class PrivacyError(HierdpError, ValueError):
    """Base class of every error raised by :mod:`hierdp.privacy`."""


class PrivacyParameterError(PrivacyError):
    """A privacy parameter (epsilon, rho, delta, a noise scale, ...) is out of its domain.

    The message names the offending parameter and its value.
    """


class BudgetExceeded(PrivacyError):
    """An :class:`~hierdp.privacy.budget.Accountant` was asked to spend more than its total.

    Raised *before* anything is recorded, so the ledger is unchanged.
    """
