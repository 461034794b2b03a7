"""Constraint sets as data: ``hierdp.Constraints`` and how mechanisms apply them.

* :class:`Constraints` (:mod:`.spec`): a declarative set over node names - linear rows with lower
  and upper bounds, node bounds, structural zeros, invariants, and rows over histogram cells -
  built in Python or read from a JSON Lines file (:mod:`.fileio`), written back, fingerprinted.
* :meth:`Constraints.resolve` (:mod:`.resolve`): binds a set to a tree on its public structure,
  carries implied constraints up to coarser levels (:mod:`.carry`), and decides feasibility before
  any noise (:mod:`.public_model`, :mod:`.feasibility`), giving a :class:`ResolvedConstraints`.
* :class:`LevelConstraints` / :class:`LevelRows` (:mod:`.levels`): the seam to level-wise engines:
  per level, the coupling of parents and, per chunk, a CSR block over its children.
* :func:`bind_cells` / :class:`CellConstraints` (:mod:`.cells`): a set over the (node, cell)
  variables of histograms (group sizes, the Census TopDown).
* :func:`accounting_parts` (:mod:`.report`): how every release states its constraints.

See docs/constraints.md.
"""

from hierdp.constraints.cells import CellConstraints, CellRows, CellSpace, bind_cells
from hierdp.constraints.entries import ByLevels, CellRule, Invariant, LinearRow, NodeBounds, StructuralZero
from hierdp.constraints.errors import ConstraintError, ConstraintsInfeasible
from hierdp.constraints.levels import LevelConstraints, LevelRows
from hierdp.constraints.report import accounting_parts
from hierdp.constraints.resolved import ResolvedConstraints
from hierdp.constraints.spec import Constraints, as_constraints, read_constraints, write_constraints

__all__ = [
    "ByLevels",
    "CellConstraints",
    "CellRows",
    "CellRule",
    "CellSpace",
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
    "accounting_parts",
    "as_constraints",
    "bind_cells",
    "read_constraints",
    "write_constraints",
]
