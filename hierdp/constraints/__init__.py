"""Constraint sets as data: ``hierdp.Constraints`` and how mechanisms apply them.

* :class:`Constraints` (:mod:`.spec`): a declarative set over node names - linear rows with lower
  and upper bounds, node bounds, structural zeros, invariants, and rows over histogram cells -
  built in Python or read from a JSON Lines file (:mod:`.fileio`), written back, fingerprinted.
* :meth:`Constraints.resolve` (:mod:`.resolve`): binds a set to a tree on its public structure,
  carries implied constraints up to coarser levels (:mod:`.carry`), and decides feasibility before
  any noise (:mod:`.public_model`, :mod:`.feasibility`), giving a :class:`ResolvedConstraints`.
* :class:`LevelConstraints` / :class:`LevelRows` (:mod:`.levels`): the seam to level-wise engines:
  per level, the coupling of parents and, per chunk, a CSR block over its children.

See docs/constraints.md.
"""

from hierdp.constraints.entries import ByLevels, CellRule, Invariant, LinearRow, NodeBounds, StructuralZero
from hierdp.constraints.errors import ConstraintError, ConstraintsInfeasible
from hierdp.constraints.fileio import read_constraints, write_constraints
from hierdp.constraints.levels import LevelConstraints, LevelRows
from hierdp.constraints.resolved import ResolvedConstraints
from hierdp.constraints.spec import Constraints

__all__ = [
    "ByLevels",
    "CellRule",
    "ConstraintError",
    "Constraints",
    "ConstraintsInfeasible",
    "Invariant",
    "LevelConstraints",
    "LevelRows",
    "LinearRow",
    "NodeBounds",
    "ResolvedConstraints",
    "StructuralZero",
    "read_constraints",
    "write_constraints",
]
