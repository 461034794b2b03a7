"""The mechanism registry: name -> constructor and what the tools need to know about it.

``create("inftda", epsilon=1, delta=1e-8, solver="intopt")`` builds a mechanism; ``names()`` lists
the registered ones; third parties call :func:`register`. Constructors are imported lazily, so
listing and checking names imports no mechanism family. Names are lower-case and stable: they
appear in command lines, CSV files and plots.

Every entry carries :class:`MechanismInfo`, the metadata the command line, ``hierdp mechanisms``
and :func:`hierdp.compare` read (no tool keeps its own list of names):

* ``input``: what the mechanism releases from (:data:`INPUT_KINDS`): ``"tree"`` (a
  :class:`~hierdp.hierarchy.Hierarchy` or an O/D tree), ``"group_sizes"`` (a
  :class:`~hierdp.hierarchy.count_of_counts.CountOfCounts`), ``"points"`` (a
  :class:`~hierdp.hierarchy.spatial.SpatialGrid`), ``"spine_histograms"`` (histograms over a
  geographic spine) or ``"persons"`` (a person-level frame);
* ``solver_shapes``: the shapes of the post-processing problems it hands to a solver
  (:data:`PROBLEM_SHAPES`); empty when it takes no solver. A mechanism with a solver step accepts
  ``solver=`` (a registered solver name) and ``time_limit=`` (seconds per solve); one without
  refuses both;
* ``compare``: a tag - whether :func:`hierdp.compare` runs it when no mechanisms are named (it
  finishes in seconds on inputs of the bundled data's size).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INPUT_KINDS",
    "PROBLEM_SHAPES",
    "MechanismInfo",
    "create",
    "describe",
    "get",
    "info",
    "infos",
    "names",
    "register",
]

#: input kinds, with how messages and listings name each
INPUT_KINDS: dict[str, str] = {
    "tree": "a tree of counts (Hierarchy, ODTree)",
    "group_sizes": "group sizes (CountOfCounts)",
    "points": "location points on a grid (SpatialGrid)",
    "spine_histograms": "histograms over a geographic spine (SpineHistograms)",
    "persons": "a person-level frame (population groups)",
}

#: shapes of the post-processing problems a mechanism hands to a solver
PROBLEM_SHAPES: dict[str, str] = {
    "level": "a level as a batch of independent groups (children sum to their parent)",
    "tree": "a whole tree (consistency over every parent)",
    "cumulative": "a tree with monotone chains (cumulative counts)",
    "chain": "a post-order chain with monotone and equality rows",
    "histogram": "per parent: children's histograms, weighted query terms, consistency per cell",
}


@dataclass(frozen=True)
class MechanismInfo:
    """What the tools know about a registered mechanism (see the module docstring).

    Attributes:
        name: the registry name.
        description: one line for listings.
        input: the input kind (a key of :data:`INPUT_KINDS`).
        solver_shapes: problem shapes handed to a solver (keys of :data:`PROBLEM_SHAPES`); empty:
            the mechanism takes no solver.
        fixed: keyword arguments the registry entry fixes (``tda_l2`` is ``TDA`` with
            ``objective="l2"``); they cannot be passed again.
        compare: in :func:`hierdp.compare`'s default set for its input.
    """

    name: str
    description: str
    input: str
    solver_shapes: tuple[str, ...] = ()
    fixed: dict[str, Any] = field(default_factory=dict)
    compare: bool = False

    @property
    def takes_solver(self) -> bool:
        """Whether ``solver=`` and ``time_limit=`` reach a post-processing solve."""
        return bool(self.solver_shapes)

    @property
    def input_text(self) -> str:
        """How listings name the input kind."""
        return INPUT_KINDS[self.input]


def _info(name: str, description: str, input: str, shapes: tuple[str, ...] = (),
          fixed: dict[str, Any] | None = None) -> MechanismInfo:
    return MechanismInfo(name, description, input, shapes, dict(fixed or {}))


def _quick(name: str, description: str, input: str, shapes: tuple[str, ...] = (),
           fixed: dict[str, Any] | None = None) -> MechanismInfo:
    """An entry tagged for :func:`hierdp.compare`'s default set (the papers' main mechanisms and
    quick baselines; the general-solver ones can take minutes at real sizes)."""
    return MechanismInfo(name, description, input, shapes, dict(fixed or {}), compare=True)


_TD = ("level",)
# name -> ("module:attribute", metadata)
_BUILTIN: dict[str, tuple[str, MechanismInfo]] = {e[1].name: e for e in [
    ("hierdp.mechanisms.topdown.inftda:InfTDA",
     _quick("inftda", "InfTDA (paper 000): TopDown, integer L-inf post-processing", "tree", _TD)),
    ("hierdp.mechanisms.topdown.tda:TDA",
     _quick("tda_l2", "TDA_l2 (paper 000 baseline): L2 projection + the paper's rounding", "tree", _TD,
           {"objective": "l2", "rounding": "paper"})),
    ("hierdp.mechanisms.topdown.tda:TDA",
     _quick("tda_l2_exact", "TopDown with exact integer L2 post-processing", "tree", _TD,
           {"objective": "l2", "rounding": "exact"})),
    ("hierdp.mechanisms.topdown.tda:TDA",
     _info("tda_linf", "TDA_linf (paper 000 baseline): a general solver's integer L-inf optimum", "tree", _TD,
           {"objective": "linf"})),
    ("hierdp.mechanisms.topdown.baselines:VanillaGauss",
     _quick("vanilla", "VanillaGauss (paper 000 baseline): noisy leaves aggregated up", "tree")),
    ("hierdp.mechanisms.topdown.baselines:StabilityHistogram",
     _quick("sh", "stability histogram (paper 000 Thm 8): thresholded Laplace leaves", "tree")),
    ("hierdp.mechanisms.topdown.mechanism:TopDownMechanism",
     _info("topdown", "TopDown: any noise (discrete Gaussian / geometric), budget plan and level solver", "tree",
           _TD)),
    ("hierdp.mechanisms.census.mechanism:CensusTopDown",
     _info("census_topdown", "Census-style TopDown over a spine (paper 003): histograms, query groups, WLS + rounder",
           "spine_histograms", ("histogram",))),
    ("hierdp.mechanisms.safetab.mechanism:SafeTab",
     _info("safetab", "SafeTab (paper 004): adaptive tabulation of population groups", "persons")),
    ("hierdp.mechanisms.spatial.htf:HTF",
     _quick("htf", "HTF (paper 002): private homogeneity partition tree of a point grid", "points")),
    ("hierdp.mechanisms.spatial.baselines:Identity",
     _quick("identity", "Singular (paper 002 baseline): noise on every grid cell", "points")),
    ("hierdp.mechanisms.spatial.baselines:Uniform",
     _quick("uniform", "Uniform (paper 002 baseline): the noisy total spread evenly", "points")),
    ("hierdp.mechanisms.spatial.baselines:UG",
     _quick("ug", "UG (Qardaji et al. 2013): uniform grid sized by N and epsilon", "points")),
    ("hierdp.mechanisms.spatial.baselines:AG",
     _quick("ag", "AG (Qardaji et al. 2013): adaptive two-level grid with inference", "points", ("tree",))),
    ("hierdp.mechanisms.spatial.baselines:QuadTree",
     _quick("quadtree", "QuadTree (Cormode et al. 2012) with Hay's consistency", "points", ("tree",))),
    ("hierdp.mechanisms.spatial.baselines:KdTree",
     _quick("kdtree", "kd-tree with private medians (Cormode et al. 2012), hybrid option", "points", ("tree",))),
    ("hierdp.mechanisms.spatial.baselines:Privelet",
     _quick("privelet", "Privelet (Xiao et al. 2010): noisy 2-D Haar coefficients", "points")),
    ("hierdp.mechanisms.pgsr.mechanisms:MH",
     _info("pgsr_mh", "M_H (paper 001): group sizes, exact MIP (general solver)", "group_sizes", ("tree",),
           {"relaxed": False})),
    ("hierdp.mechanisms.pgsr.mechanisms:MH",
     _info("pgsr_mh_relaxed", "M_H relaxed + rounded (paper 001 OP baseline)", "group_sizes", ("tree",),
           {"relaxed": True})),
    ("hierdp.mechanisms.pgsr.mechanisms:MDynProg",
     _quick("pgsr_mdp", "M_DP (paper 001): group sizes, exact cost-table dynamic program", "group_sizes",
           ("tree",))),
    ("hierdp.mechanisms.pgsr.mechanisms:MHC",
     _info("pgsr_mhc", "M_HC (paper 001): cumulative, exact (general solver)", "group_sizes", ("cumulative",),
           {"relaxed": False})),
    ("hierdp.mechanisms.pgsr.mechanisms:MHC",
     _info("pgsr_mhc_relaxed", "M_HC relaxed + rounded (paper 001 OP baseline)", "group_sizes", ("cumulative",),
           {"relaxed": True})),
    ("hierdp.mechanisms.pgsr.mechanisms:CumulativeDynProg",
     _quick("pgsr_cumulative_dp", "approx cumulative dynamic program (paper 001 §9.1)", "group_sizes", ("tree",))),
    ("hierdp.mechanisms.pgsr.mechanisms:ChainDynProg",
     _quick("pgsr_chain_dp", "chain-based cumulative dynamic program (paper 001 §9.2), exact", "group_sizes",
           ("chain",))),
    ("hierdp.mechanisms.pgsr.mechanisms:GroupSizeTopDown",
     _quick("pgsr_topdown", "TopDown on the group-size dynamic-programming hierarchy (geometric)", "group_sizes",
           _TD)),
]}
_EXTRA: dict[str, tuple[Callable[..., Any], MechanismInfo]] = {}


def _check_metadata(name: str, input: str, solver_shapes: Iterable[str]) -> tuple[str, ...]:
    if input not in INPUT_KINDS:
        raise ValueError(f"mechanism {name!r}: input must be one of {', '.join(INPUT_KINDS)}, got {input!r}")
    shapes = (solver_shapes,) if isinstance(solver_shapes, str) else tuple(solver_shapes)
    unknown = [s for s in shapes if s not in PROBLEM_SHAPES]
    if unknown:
        raise ValueError(f"mechanism {name!r}: unknown problem shape {unknown[0]!r}; shapes: "
                         f"{', '.join(PROBLEM_SHAPES)}")
    return shapes


def register(name: str, factory: Callable[..., Any], description: str = "", *, input: str,
             solver_shapes: Iterable[str] = (), compare: bool = False, replace: bool = False) -> None:
    """Register ``factory(**params) -> mechanism`` under ``name``.

    Args:
        name: a lower-case name (command lines, CSV files).
        factory: the mechanism class, or any callable taking its keyword parameters.
        description: one line for listings.
        input: what it releases from, a key of :data:`INPUT_KINDS` (the command line offers it
            with the layout that builds that input).
        solver_shapes: the shapes of the problems it hands to a solver (:data:`PROBLEM_SHAPES`);
            give them only if it accepts ``solver=`` and ``time_limit=``.
        compare: run it in :func:`hierdp.compare`'s default set for its input.
        replace: allow replacing a registered name.

    Check a new mechanism with :func:`hierdp.mechanisms.testing.check_mechanism`.
    """
    if not name or name != name.lower():
        raise ValueError(f"mechanism names are non-empty lower-case strings, got {name!r}")
    if not replace and (name in _BUILTIN or name in _EXTRA):
        raise ValueError(f"a mechanism named {name!r} is already registered (pass replace=True)")
    shapes = _check_metadata(name, input, solver_shapes)
    _EXTRA[name] = (factory, MechanismInfo(name, description, input, shapes, compare=bool(compare)))


def names(input: str | None = None) -> list[str]:
    """Registered mechanism names (those releasing from ``input``, if given)."""
    out = list(_BUILTIN) + [n for n in _EXTRA if n not in _BUILTIN]
    if input is None:
        return out
    if input not in INPUT_KINDS:
        raise ValueError(f"input must be one of {', '.join(INPUT_KINDS)}, got {input!r}")
    return [n for n in out if info(n).input == input]


def info(name: str) -> MechanismInfo:
    """The metadata of the mechanism registered under ``name``."""
    if name in _EXTRA:
        return _EXTRA[name][1]
    if name not in _BUILTIN:
        raise KeyError(f"unknown mechanism {name!r}; registered: {', '.join(names())}")
    return _BUILTIN[name][1]


def infos() -> dict[str, MechanismInfo]:
    """Name -> metadata of every registered mechanism."""
    return {n: info(n) for n in names()}


def get(name: str) -> Callable[..., Any]:
    """The constructor registered under ``name`` (a callable taking keyword parameters)."""
    if name in _EXTRA:
        return _EXTRA[name][0]
    meta = info(name)
    module, attr = _BUILTIN[name][0].split(":")
    cls = getattr(importlib.import_module(module), attr)
    if not meta.fixed:
        return cls
    fixed = meta.fixed

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
    return {n: m.description for n, m in infos().items()}
