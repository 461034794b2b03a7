"""What every experiment shares: where results go, timing, memory, plain-text tables, notes, and
where the papers' reference files live.

Experiments build mechanisms through the registry (``hierdp.mechanisms.create``), never through
private factories.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["REPOSITORY", "RESULTS", "format_table", "inftda_reference_dir", "peak_rss_mb", "print_notes", "timed"]

#: the repository root (experiments/ is not installed: it only runs from a checkout)
REPOSITORY = Path(__file__).resolve().parents[2]
#: the one folder every script writes to (git-ignored; scripts regenerate it)
RESULTS = REPOSITORY / "results"


def inftda_reference_dir() -> Path:
    """Where paper 000's reference data lives (the project's ``shared/reference/inftda``).

    ``$HIERDP_REFERENCE`` if set, else ``shared/reference/inftda`` beside the repository (where the
    project's machines and CI put it). The directory may not exist elsewhere: callers check and skip.
    """
    env = os.environ.get("HIERDP_REFERENCE")
    if env:
        return Path(env)
    return REPOSITORY.parent / "shared" / "reference" / "inftda"


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """Call ``fn(*args, **kwargs)`` and return ``(result, seconds)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def format_table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    """A plain-text table (no extra dependency) for printing results."""
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    return shown.to_string(index=False)


def print_notes(notes: Sequence[str]) -> None:
    """List the cells that stopped early or were refused (so no figure hides a shortened run)."""
    if notes:
        print("\nSkipped / shortened cells:")
        for n in notes:
            print("  " + n)
