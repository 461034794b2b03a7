"""What error messages may quote: rows, not the private values in them.

A refusal raised while reading the input (a path outside the declared domain, a point outside the
box, a group larger than K, a unit in two regions) is shown to whoever runs the release - and from
there reaches logs, tickets and chat. Quoting the offending cell (a place name, a point's
coordinates, a unit's size or id) would put one person's data there. So messages name the *row*
(its position in the input) and the column, and quote the value only when the operator asks for it
with the debug option ``HIERDP_SHOW_DATA=1`` (an environment variable, read at the moment the
message is built).

Values that are not private - column names, flags, public parameters, public domain files - are
quoted as always.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["SHOW_DATA_ENV", "WITHHELD_HINT", "quote_private", "show_private_values"]

#: the debug option that lets messages quote values from the private input
SHOW_DATA_ENV = "HIERDP_SHOW_DATA"
#: what a message adds when it withheld a value
WITHHELD_HINT = f"values from the input are not quoted; set {SHOW_DATA_ENV}=1 to see them"


def show_private_values() -> bool:
    """True when the operator asked messages to quote values from the private input."""
    return os.environ.get(SHOW_DATA_ENV, "").strip() not in ("", "0", "false", "no")


def quote_private(value: Any, what: str = "", *, verbatim: bool = False) -> str:
    """``" (<what> <value!r>)"`` when :func:`show_private_values`, else ``""``: a message reads
    ``f"row 3{quote_private(path, 'path')} is not in the declared domain"`` either way.
    ``verbatim``: ``value`` is already text to show as it is (no ``repr``)."""
    if not show_private_values():
        return ""
    if isinstance(value, np.generic):
        value = value.item()
    shown = str(value) if verbatim else repr(value)
    return f" ({what} {shown})" if what else f" ({shown})"
