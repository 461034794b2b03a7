"""hierdp's version (the one place it is written; ``pyproject.toml`` reads it) and the versions of
the libraries a release depends on, recorded in every release's parameters."""

from __future__ import annotations

import functools

__all__ = ["__version__", "backend_versions"]

__version__ = "0.1.0"

#: distributions whose versions can change a release's numbers (noise, solves) or its files
_BACKENDS = ("numpy", "scipy", "pandas", "highspy", "ortools", "pyomo", "opendp", "pyarrow")


@functools.cache
def backend_versions() -> dict[str, str | None]:
    """``{"hierdp": ..., "numpy": ..., "highspy": ..., ...}``: the installed versions (``None``: not
    installed), read from the distributions' metadata without importing them."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"hierdp": __version__}
    for name in _BACKENDS:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
