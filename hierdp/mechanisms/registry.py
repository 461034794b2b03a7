"""The mechanism registry: name -> constructor, used by the CLI, ``hierdp compare`` and experiments.

``create("inftda", epsilon=1, delta=1e-8, solver="intopt")`` builds a mechanism; ``names()`` lists
the registered ones; third parties call :func:`register`. Constructors are imported lazily.
Names are lower-case and stable: they appear in command lines, CSV files and plots.
"""

from __future__ import annotations

import importlib
from typing import Any
from collections.abc import Callable

__all__ = ["create", "describe", "get", "names", "register"]

# name -> ("module:attribute", fixed keyword arguments, one-line description)
_BUILTIN: dict[str, tuple[str, dict[str, Any], str]] = {
    "inftda": ("hierdp.mechanisms.topdown.inftda:InfTDA", {},
               "InfTDA (paper 000): TopDown, integer L-inf post-processing"),
    "tda_l2": ("hierdp.mechanisms.topdown.tda:TDA", {"objective": "l2", "rounding": "paper"},
               "TDA_l2 (paper 000 baseline): L2 projection + the paper's rounding"),
    "tda_l2_exact": ("hierdp.mechanisms.topdown.tda:TDA", {"objective": "l2", "rounding": "exact"},
                     "TopDown with exact integer L2 post-processing"),
    "tda_linf": ("hierdp.mechanisms.topdown.tda:TDA", {"objective": "linf"},
                 "TDA_linf (paper 000 baseline): a general solver's integer L-inf optimum"),
    "vanilla": ("hierdp.mechanisms.topdown.baselines:VanillaGauss", {},
                "VanillaGauss (paper 000 baseline): noisy leaves aggregated up"),
    "sh": ("hierdp.mechanisms.topdown.baselines:StabilityHistogram", {},
           "stability histogram (paper 000 Thm 8): thresholded Laplace leaves"),
    "topdown": ("hierdp.mechanisms.topdown.mechanism:TopDownMechanism", {},
                "TopDown engine: any noise (discrete Gaussian / geometric), budget plan and level solver"),
    "census_topdown": ("hierdp.mechanisms.census.mechanism:CensusTopDown", {},
                       "Census-style TopDown over a spine (paper 003): histograms, query groups, WLS + rounder"),
    "safetab": ("hierdp.mechanisms.safetab.mechanism:SafeTab", {},
                "SafeTab (paper 004): adaptive tabulation of population groups"),
    "htf": ("hierdp.mechanisms.spatial.htf:HTF", {}, "HTF (paper 002): private homogeneity partition tree of a point grid"),
    "identity": ("hierdp.mechanisms.spatial.baselines:Identity", {}, "Singular (paper 002 baseline): noise on every grid cell"),
    "uniform": ("hierdp.mechanisms.spatial.baselines:Uniform", {}, "Uniform (paper 002 baseline): the noisy total spread evenly"),
    "ug": ("hierdp.mechanisms.spatial.baselines:UG", {}, "UG (Qardaji et al. 2013): uniform grid sized by N and epsilon"),
    "ag": ("hierdp.mechanisms.spatial.baselines:AG", {}, "AG (Qardaji et al. 2013): adaptive two-level grid with inference"),
    "quadtree": ("hierdp.mechanisms.spatial.baselines:QuadTree", {}, "QuadTree (Cormode et al. 2012) with Hay's consistency"),
    "kdtree": ("hierdp.mechanisms.spatial.baselines:KdTree", {}, "kd-tree with private medians (Cormode et al. 2012), hybrid option"),
    "privelet": ("hierdp.mechanisms.spatial.baselines:Privelet", {}, "Privelet (Xiao et al. 2010): noisy 2-D Haar coefficients"),
    "pgsr_mh": ("hierdp.mechanisms.pgsr:MH", {"relaxed": False}, "M_H (paper 001): group sizes, exact MIP (general solver)"),
    "pgsr_mh_relaxed": ("hierdp.mechanisms.pgsr:MH", {"relaxed": True}, "M_H relaxed + rounded (paper 001 OP baseline)"),
    "pgsr_mdp": ("hierdp.mechanisms.pgsr:MDynProg", {}, "M_DP (paper 001): group sizes, exact cost-table dynamic program"),
    "pgsr_mhc": ("hierdp.mechanisms.pgsr:MHC", {"relaxed": False}, "M_HC (paper 001): cumulative, exact (general solver)"),
    "pgsr_mhc_relaxed": ("hierdp.mechanisms.pgsr:MHC", {"relaxed": True}, "M_HC relaxed + rounded (paper 001 OP baseline)"),
    "pgsr_cumulative_dp": ("hierdp.mechanisms.pgsr:CumulativeDynProg", {}, "approx DP cumulative (paper 001 §9.1)"),
    "pgsr_chain_dp": ("hierdp.mechanisms.pgsr:ChainDynProg", {}, "chain-based cumulative DP (paper 001 §9.2), exact"),
    "pgsr_topdown": ("hierdp.mechanisms.pgsr:GroupSizeTopDown", {}, "TopDown on the group-size dynamic-programming hierarchy (geometric)"),
}
_EXTRA: dict[str, tuple[Callable[..., Any], str]] = {}


def register(name: str, factory: Callable[..., Any], description: str = "", *, replace: bool = False) -> None:
    """Register ``factory(**params) -> mechanism`` under ``name``."""
    if not name or name != name.lower():
        raise ValueError(f"mechanism names are non-empty lower-case strings, got {name!r}")
    if not replace and (name in _BUILTIN or name in _EXTRA):
        raise ValueError(f"a mechanism named {name!r} is already registered (pass replace=True)")
    _EXTRA[name] = (factory, description)


def names() -> list[str]:
    """Registered mechanism names."""
    return list(_BUILTIN) + [n for n in _EXTRA if n not in _BUILTIN]


def get(name: str) -> Callable[..., Any]:
    """The constructor registered under ``name`` (a callable taking keyword parameters)."""
    if name in _EXTRA:
        return _EXTRA[name][0]
    if name not in _BUILTIN:
        raise KeyError(f"unknown mechanism {name!r}; registered: {', '.join(names())}")
    target, fixed, _ = _BUILTIN[name]
    module, attr = target.split(":")
    cls = getattr(importlib.import_module(module), attr)
    if not fixed:
        return cls

    def factory(**params: Any) -> Any:
        clash = sorted(set(params) & set(fixed))
        if clash:
            raise TypeError(f"mechanism {name!r} fixes {', '.join(clash)}; do not pass it")
        return cls(**fixed, **params)

    factory.__doc__ = cls.__doc__
    return factory


def create(name: str, **params: Any) -> Any:
    """Build the mechanism ``name`` with keyword ``params`` (privacy spec and options)."""
    return get(name)(**params)


def describe() -> dict[str, str]:
    """Name -> one-line description of every registered mechanism."""
    out = {n: d for n, (_, _, d) in _BUILTIN.items()}
    out.update({n: d for n, (_, d) in _EXTRA.items()})
    return out
