"""Old import path of TDA_l2's rounding rule; it lives in :mod:`hierdp.solvers.paper_round` (the
``paper_round`` solver plug-in)."""

from hierdp.solvers.paper_round import paper_round_batch

__all__ = ["paper_round_batch"]
