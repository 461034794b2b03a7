"""The mechanism contract: one way to build, run and account every mechanism of every paper.

A mechanism is built with a privacy spec and options, then run on data::

    mech = hierdp.mechanisms.create("inftda", epsilon=1.0, delta=1e-8)   # or InfTDA(epsilon=..., ...)
    rel = mech.release(tree, seed=0)                   # experiments: reproducible numpy randomness
    rel = mech.release(tree, secure=True)              # real releases: OS randomness, exact samplers
    rel = mech.release(tree, accountant=acct)          # several releases under one budget

* **Privacy spec**: exactly one of ``epsilon`` (with ``delta`` where the calculus needs it),
  ``rho`` or ``budget`` (:class:`~hierdp.privacy.spec.PrivacySpec`), plus the privacy unit
  (``unit=`` a :class:`~hierdp.privacy.unit.PrivacyUnit`, or ``bounded`` / ``contributions`` /
  ``distinct``). Everything is checked when the mechanism is built.
* ``release(data, *, seed=None, rng=None, secure=None, accountant=None, progress=False)``
  returns a :class:`~hierdp.release.BaseRelease` with a typed
  :class:`~hierdp.release.Accounting`. Before any noise it (1) checks that the data's domain is
  public (:func:`~hierdp.privacy.domain.check_public_domain`: a domain read off the rows is refused
  unless declared public, and the release then states that assumption), (2) resolves the
  randomness (:func:`~hierdp.privacy.rng.resolve_rng`: ``secure=True`` refuses a seed or a numpy
  generator), and (3) checks that a caller's ``accountant`` can pay for the whole release.
* **Spends** are recorded in the run's ledger - and in the caller's accountant - *before* each
  part's noise is drawn, so an aborted run (:class:`ReleaseAborted`) never loses a spend.

:class:`Mechanism` holds the shared machinery (:meth:`Mechanism.start` returns a
:class:`RunContext`); see ``docs/mechanisms.md`` for how to write one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any
from collections.abc import Callable

from hierdp.errors import HierdpError
from hierdp.privacy.conversions import zcdp_to_approx_dp
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.domain import check_public_domain
from hierdp.privacy.errors import BudgetExceeded, PrivacyParameterError
from hierdp.privacy.rng import resolve_rng
from hierdp.privacy.spec import PrivacySpec
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release.accounting import Spend

__all__ = [
    "Mechanism",
    "MechanismError",
    "MechanismParameterError",
    "ReleaseAborted",
    "RunContext",
    "refuse_solver",
]


class MechanismError(HierdpError):
    """Base class of errors raised by mechanisms themselves (not by their input layers)."""


class MechanismParameterError(MechanismError, ValueError):
    """A mechanism option is invalid or does not apply; the message names it."""


class ReleaseAborted(MechanismError, RuntimeError):
    """A run stopped after noise was drawn (a level's solver failed or hit its time limit).

    Nothing is lost: the error carries what was released and what was spent.

    Attributes:
        partial: the release of the levels completed before the failure (``partial=True``);
            its accounting lists the spends made so far.
        spends: the :class:`~hierdp.release.Spend` entries recorded before the failure (the
            failing level's spend included: its noise was drawn).
        spent: their composition (a :class:`~hierdp.privacy.budget.Budget`).
        accountant: the run's ledger (an :class:`~hierdp.privacy.budget.Accountant`), and
            ``external_accountant`` the caller's, if one was given (already charged).
        level, level_name: where it happened.
        parents: keys (at ``level - 1``) of the parents whose groups the failing solve held, or of
            the one failing group when the solver says which (``SolverFailed.groups``).
        cause: the original exception.
    """

    def __init__(self, message: str, *, partial: Any, spends: tuple[Spend, ...], spent: Budget,
                 accountant: Accountant, external_accountant: Accountant | None, level: int,
                 level_name: str, parents: Any, cause: BaseException) -> None:
        super().__init__(message)
        self.partial = partial
        self.spends = spends
        self.spent = spent
        self.accountant = accountant
        self.external_accountant = external_accountant
        self.level = level
        self.level_name = level_name
        self.parents = parents
        self.cause = cause


def refuse_solver(mechanism: str, solver: Any, solver_options: Any, why: str) -> None:
    """Raise if a solver (or its options) is given to a mechanism that does not use one: an option
    that is silently ignored makes a user believe the release was post-processed."""
    if solver is not None or solver_options:
        what = f"solver={solver!r}" if solver is not None else f"solver_options={solver_options!r}"
        raise MechanismParameterError(f"{mechanism} does not use a solver ({why}); {what} would be ignored: "
                                      "remove it")


class RunContext:
    """One run of a mechanism: its randomness, its domain assumption and its budget ledger.

    Created by :meth:`Mechanism.start` after every check that can refuse the run has passed.

    Attributes:
        rng: the randomness to pass to every sampler.
        assumption: the domain assumption the release must state (``None``: declared domain).
        ledger: the run's own :class:`Accountant` (total = the mechanism's budget).
        external: the caller's accountant, or ``None``.
    """

    def __init__(self, mechanism: str, total: Budget, *, rng: Any, assumption: str | None,
                 accountant: Accountant | None, delta: float | None,
                 external_total: Budget | None = None,
                 approx_cost: Callable[[], Budget] | None = None) -> None:
        self.mechanism = mechanism
        self.total = total
        self.rng = rng
        self.assumption = assumption
        self.ledger = Accountant(total)
        self.external = accountant
        self.spends: list[Spend] = []
        self._mode = None
        if accountant is None:
            return
        if not isinstance(accountant, Accountant):
            raise PrivacyParameterError(f"accountant must be a hierdp.privacy.budget.Accountant, got "
                                        f"{type(accountant).__name__}")
        ext_calc = accountant.total.calculus
        if ext_calc == "approx" and total.calculus != "approx":
            # (eps, delta) totals do not add up per part like rho or pure eps: charge the release's
            # whole (eps, delta) guarantee once, now, before any noise
            cost = approx_cost() if approx_cost is not None else self._approx_cost(delta, accountant)
            accountant.spend(cost, f"{mechanism} (whole release)")  # raises BudgetExceeded first
            self._mode = "whole"
            return
        if ext_calc == "pure" and total.calculus != "pure":
            raise PrivacyParameterError(
                f"accountant: {mechanism} spends {total.calculus} budget, which a pure-DP accountant cannot "
                "hold (zCDP and (eps, delta) do not imply pure DP); use a zCDP or (eps, delta) accountant")
        need = external_total if external_total is not None else total
        if not accountant.can_spend(need):
            raise BudgetExceeded(
                f"accountant: {mechanism} needs {need} but only {accountant.remaining} remains of "
                f"{accountant.total}; nothing was spent and no noise was drawn")
        self._mode = "parts"

    def _approx_cost(self, delta: float | None, accountant: Accountant) -> Budget:
        if self.total.calculus == "pure":
            return Budget("approx", epsilon=self.total.exact_parameters["epsilon"], delta=Fraction(0))
        if delta is None:
            raise PrivacyParameterError(
                f"delta: an (epsilon, delta) accountant needs {self.mechanism}'s delta to charge its zCDP spend "
                "as (epsilon, delta); build the mechanism with delta=")
        eps = zcdp_to_approx_dp(float(self.total.rho), delta, "numeric")
        return Budget.approx(eps, delta)

    def spend(self, amount: Budget, label: str, *, external: Budget | None = None, **details: Any) -> Budget:
        """Record ``amount`` for ``label`` (before drawing its noise) in the run's ledger and in the
        caller's accountant (``external``: a different amount to charge there, e.g. a tighter zCDP
        figure of a pure spend). Returns the amount in the run's calculus.

        Raises:
            BudgetExceeded: either ledger cannot pay; nothing is recorded in either.
        """
        if not self.ledger.can_spend(amount):
            raise BudgetExceeded(f"{self.mechanism}: spending {amount} for {label!r} would exceed its own "
                                 f"total {self.total} (already spent {self.ledger.spent})")
        if self._mode == "parts":
            charge = external if external is not None else amount
            ext: Accountant = self.external  # type: ignore[assignment]
            if not ext.can_spend(charge):
                raise BudgetExceeded(f"accountant: spending {charge} for {self.mechanism}: {label!r} would exceed "
                                     f"{ext.total} (remaining {ext.remaining})")
            ext.spend(charge, f"{self.mechanism}: {label}")
        converted = self.ledger.spend(amount, label)
        self.spends.append(Spend(label, converted, dict(details)))
        return converted

    @property
    def spent(self) -> Budget:
        """What the run has spent so far."""
        return self.ledger.spent

    @property
    def randomness(self) -> str:
        """``"secure"`` (OS randomness, exact samplers: for publication) or ``"seeded"`` (a numpy
        generator: reproducible, for experiments only) - recorded in every release's params."""
        from hierdp.privacy.rng import SecureRandom

        return "secure" if isinstance(self.rng, SecureRandom) else "seeded"

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The assumptions the release must state (the domain's, if any)."""
        return () if self.assumption is None else (self.assumption,)


def _domain_owner(data: Any) -> Any:
    """The object that says where the data's domain came from: the data itself, or the hierarchy an
    adapter wraps (``HierarchyTree.hierarchy``) when the adapter does not say."""
    if not hasattr(data, "domain_source") and hasattr(data, "hierarchy"):
        return data.hierarchy
    return data


class Mechanism(ABC):
    """Base class of every mechanism (see the module docstring).

    Subclasses set :attr:`name`, build :attr:`spec` and :attr:`unit` in ``__init__`` (through
    :meth:`resolve_privacy`) and implement :meth:`release`, calling :meth:`start` before drawing
    any noise and :meth:`RunContext.spend` before each part's noise.
    """

    #: display name (tables, plots); the registry name is lower-case (``hierdp.mechanisms.names()``)
    name: str = ""
    #: whether the mechanism post-processes with a solver (``solver=`` is refused otherwise)
    uses_solver: bool = False
    spec: PrivacySpec
    unit: PrivacyUnit
    secure: bool = False

    def resolve_privacy(self, epsilon: Any, delta: Any, rho: Any, budget: Any, *, unit: PrivacyUnit | None,
                        bounded: Any, contributions: Any, distinct: Any, conversion: str = "analytic",
                        calculus: str = "zcdp", secure: Any = False) -> None:
        """Set :attr:`spec`, :attr:`unit` and :attr:`secure` from the constructor's arguments
        (every check raises here, before any data is seen)."""
        self.spec = PrivacySpec.resolve(epsilon, delta, rho, budget, conversion, calculus=calculus)
        self.unit = PrivacyUnit.resolve(unit, bounded=bounded, contributions=contributions, distinct=distinct)
        if type(secure).__name__ not in ("bool", "bool_"):
            raise PrivacyParameterError(f"secure must be True or False, got {secure!r}")
        self.secure = bool(secure)

    # legacy attribute names (the old constructors stored these)
    @property
    def bounded(self) -> bool:
        """The unit's neighbouring relation (True: bounded)."""
        return self.unit.bounded

    @property
    def contributions(self) -> int:
        """The unit's records per person."""
        return self.unit.contributions

    @property
    def distinct(self) -> bool:
        """Whether the unit's records are distinct finest cells."""
        return self.unit.distinct

    def params(self) -> dict[str, Any]:
        """The mechanism's parameters (stored in every release)."""
        p: dict[str, Any] = {"calculus": self.spec.calculus, **self.spec.budget.parameters,
                             "delta": self.spec.delta, "epsilon_target": self.spec.epsilon_target,
                             "conversion": self.spec.conversion, "secure": self.secure}
        if self.spec.calculus == "zcdp":
            p["epsilon"] = self.spec.epsilon_target
        p.update(self.unit.as_dict())
        return p

    def _secure_for(self, secure: Any) -> bool:
        if secure is None:
            return self.secure
        if type(secure).__name__ not in ("bool", "bool_"):
            raise PrivacyParameterError(f"secure must be True, False or None, got {secure!r}")
        if self.secure and not secure:
            raise PrivacyParameterError(
                f"secure: {self.name} was built with secure=True; a release cannot downgrade to seeded randomness")
        return bool(secure)

    def start(self, data: Any, *, seed: Any = None, rng: Any = None, secure: Any = None,
              accountant: Accountant | None = None, external_total: Budget | None = None,
              approx_cost: Callable[[], Budget] | None = None) -> RunContext:
        """Every check that can refuse a run, in order, before any noise: the data's domain is
        public (or declared public), the randomness fits the mode, the accountant can pay."""
        assumption = check_public_domain(_domain_owner(data), what=f"release with {self.name}")
        generator = resolve_rng(rng, seed, secure=self._secure_for(secure))
        return RunContext(self.name, self.spec.budget, rng=generator, assumption=assumption, accountant=accountant,
                          delta=self.spec.delta, external_total=external_total, approx_cost=approx_cost)

    @abstractmethod
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> Any:
        """Run the mechanism on ``data`` and return its release (a :class:`~hierdp.release.BaseRelease`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.budget}, {self.unit.describe()})"
