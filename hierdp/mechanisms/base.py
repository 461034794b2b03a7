"""The mechanism contract: one way to build, run and account every mechanism of every paper.

A mechanism is built with a privacy spec and options, then run on data::

    mech = hierdp.mechanisms.create("inftda", epsilon=1.0, delta=1e-8)   # or InfTDA(epsilon=..., ...)
    rel = mech.release(tree)                           # real releases (the default): OS randomness, exact samplers
    rel = mech.release(tree, seed=0)                   # experiments (opt-in): reproducible numpy randomness
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
  randomness: **secure by default** (OS randomness, exact samplers) unless a ``seed`` or a numpy
  ``rng`` is given; ``secure=True`` refuses a seed or a numpy generator; ``secure=False`` without a
  seed draws a 128-bit one (:func:`~hierdp.privacy.rng.draw_seed`) and records it
  (:func:`~hierdp.privacy.rng.resolve_rng`), and (3) checks that a caller's ``accountant`` can pay
  for the whole release. The release's ``params`` say which randomness it used
  (``"randomness": "secure"`` or ``"seeded"`` with its ``"seed"``).
* **Spends** are recorded in the run's ledger - and in the caller's accountant - *before* each
  part's noise is drawn, so an aborted run (:class:`ReleaseAborted`) never loses a spend.

:class:`Mechanism` holds the shared machinery (:meth:`Mechanism.start` returns a
:class:`RunContext`); see ``docs/mechanisms.md`` for how to write one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from fractions import Fraction
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from hierdp.errors import HierdpError
from hierdp.privacy.conversions import zcdp_to_approx_dp
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact
from hierdp.privacy.domain import check_public_domain
from hierdp.privacy.errors import BudgetExceeded, PrivacyParameterError
from hierdp.privacy.noise import NoiseModel
from hierdp.privacy.rng import draw_seed, resolve_rng, secure_by_default
from hierdp.privacy.spec import PrivacySpec
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release.accounting import Accounting, Spend

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
    """One run of a mechanism: its randomness, its domain assumption, its ledger, and the one way to
    spend, measure, account and abort.

    Created by :meth:`Mechanism.start` after every check that can refuse the run has passed. A
    family measures with :meth:`measure` (or :meth:`spend_noise` then ``noise.draw`` when the draws
    happen elsewhere, e.g. in chunks on workers), builds its release's accounting with
    :meth:`accounting` and its parameters with :meth:`params`, and raises :meth:`aborted` when a
    step after the noise fails. The spends (:attr:`spends`) are the only ledger of what was
    measured: every line of :meth:`~hierdp.release.Accounting.lines` is rendered from them.

    Attributes:
        mechanism: the :class:`Mechanism` being run.
        rng: the randomness to pass to every sampler.
        seed: the seed given to :meth:`Mechanism.start` (``None``: secure, or a generator given).
        assumption: the domain assumption the release must state (``None``: declared domain).
        ledger: the run's own :class:`Accountant` (total = the mechanism's budget).
        external: the caller's accountant, or ``None``.
        spends: the :class:`~hierdp.release.Spend` entries, in the order their noise was drawn.
    """

    def __init__(self, mechanism: Mechanism, *, rng: Any, seed: Any = None, assumption: str | None,
                 accountant: Accountant | None, external_total: Budget | None = None,
                 approx_cost: Callable[[], Budget] | None = None) -> None:
        self.mechanism = mechanism
        self.name = mechanism.name
        self.total = mechanism.spec.budget
        self.delta = mechanism.spec.delta
        self.rng = rng
        self.seed = seed
        self.assumption = assumption
        self.ledger = Accountant(self.total)
        self.external = accountant
        self.spends: list[Spend] = []
        self._mode: str | None = None
        if accountant is None:
            return
        if not isinstance(accountant, Accountant):
            raise PrivacyParameterError(f"accountant must be a hierdp.privacy.budget.Accountant, got "
                                        f"{type(accountant).__name__}")
        ext_calc = accountant.total.calculus
        if ext_calc == "approx" and self.total.calculus != "approx":
            # (eps, delta) totals do not add up per part like rho or pure eps: charge the release's
            # whole (eps, delta) guarantee once, now, before any noise
            cost = approx_cost() if approx_cost is not None else self._approx_cost()
            accountant.spend(cost, f"{self.name} (whole release)")  # raises BudgetExceeded first
            self._mode = "whole"
            return
        if ext_calc == "pure" and self.total.calculus != "pure":
            raise PrivacyParameterError(
                f"accountant: {self.name} spends {self.total.calculus} budget, which a pure-DP accountant cannot "
                "hold (zCDP and (eps, delta) do not imply pure DP); use a zCDP or (eps, delta) accountant")
        need = external_total if external_total is not None else self.total
        if not accountant.can_spend(need):
            raise BudgetExceeded(
                f"accountant: {self.name} needs {need} but only {accountant.remaining} remains of "
                f"{accountant.total}; nothing was spent and no noise was drawn")
        self._mode = "parts"

    def _approx_cost(self) -> Budget:
        if self.total.calculus == "pure":
            return Budget("approx", epsilon=self.total.exact_parameters["epsilon"], delta=Fraction(0))
        if self.delta is None:
            raise PrivacyParameterError(
                f"delta: an (epsilon, delta) accountant needs {self.name}'s delta to charge its zCDP spend "
                "as (epsilon, delta); build the mechanism with delta=")
        eps = zcdp_to_approx_dp(float(self.total.rho), self.delta, "numeric")
        return Budget.approx(eps, self.delta)

    # -- spending and measuring ------------------------------------------------------------------
    def spend(self, amount: Budget, label: str, *, external: Budget | None = None, **details: Any) -> Budget:
        """Record ``amount`` for ``label`` (before drawing its noise) in the run's ledger and in the
        caller's accountant (``external``: a different amount to charge there, e.g. a tighter zCDP
        figure of a pure spend). ``details`` describe the noise (``noise``, ``sigma2`` or ``scale``,
        the sensitivity, ``note``). Returns the amount in the run's calculus.

        Raises:
            BudgetExceeded: either ledger cannot pay; nothing is recorded in either.
        """
        if not self.ledger.can_spend(amount):
            raise BudgetExceeded(f"{self.name}: spending {amount} for {label!r} would exceed its own "
                                 f"total {self.total} (already spent {self.ledger.spent})")
        if self._mode == "parts":
            charge = external if external is not None else amount
            ext: Accountant = self.external  # type: ignore[assignment]
            if not ext.can_spend(charge):
                raise BudgetExceeded(f"accountant: spending {charge} for {self.name}: {label!r} would exceed "
                                     f"{ext.total} (remaining {ext.remaining})")
            ext.spend(charge, f"{self.name}: {label}")
        converted = self.ledger.spend(amount, label)
        self.spends.append(Spend(label, converted, dict(details)))
        return converted

    def path_charge(self, amount: Budget) -> Budget | None:
        """What a caller's zCDP accountant must be charged for a pure spend ``amount`` whose parts
        do not compose as independent mechanisms - per-node budgets, where a level's part is the
        increase of the largest root-to-node path sum, not the budget of any one measurement.

        Independent ε_l-DP parts may be charged Σ ε_l²/2 (each is ε_l²/2-zCDP), but a per-node
        level is not ε_l-DP: one person's path can spend more at that level than its part (paths
        (0.1, 0.5, 0.4) and (0.1, 0.1, 0.8) with parts 0.1, 0.5, 0.4). What holds after every prefix
        of parts is the pure composition: ε_≤l-DP with ε_≤l the sum of the parts so far, hence
        ε_≤l²/2-zCDP. So each part is charged the increase of that figure, (ε_≤l² - ε_<l²)/2: the
        charges telescope to exactly the zCDP the release states, after an abort too.

        Returns ``None`` (charge as usual) when there is no external zCDP accountant or the spend is
        not pure.
        """
        if (self.external is None or self.external.total.calculus != "zcdp" or amount.calculus != "pure"
                or self.total.calculus != "pure"):
            return None
        before = self.ledger.spent.exact_parameters["epsilon"]
        after = before + amount.exact_parameters["epsilon"]
        return Budget("zcdp", rho=(after * after - before * before) / 2)

    def spend_noise(self, amount: Budget, label: str, noise: NoiseModel, parameter: Any, sensitivity: int, *,
                    external: Budget | None = None, **details: Any) -> Budget:
        """:meth:`spend` with the noise's standard details: its name, its parameter (``sigma2`` or
        ``scale``; ``None`` when it varies per node), the sensitivity it was calibrated to and the
        exact budget the parameter delivers (never above ``amount``)."""
        std: dict[str, Any] = {"noise": noise.name, noise.sensitivity_name: noise.sensitivity_value(sensitivity)}
        if parameter is not None and np.ndim(parameter) == 0:
            std[noise.parameter_name] = float(parameter)
            std["delivered"] = noise.delivered(float(parameter), sensitivity)
        return self.spend(amount, label, external=external, **std, **details)

    def measure(self, values: Any, amount: Budget, label: str, noise: NoiseModel, *, sensitivity: int,
                parameter: Any = None, randomness: Any = None, external: Budget | None = None,
                **details: Any) -> np.ndarray:
        """The one way to measure: record the spend, then add ``noise`` to ``values`` (int64).

        ``parameter`` is the noise parameter when the caller calibrated it already (a scalar, or
        one per value), else ``noise.calibrate(amount, sensitivity)`` (rounded in the safe
        direction); ``randomness`` overrides :attr:`rng` (per-node counter streams).
        """
        if parameter is None:
            parameter = noise.calibrate(exact(amount, "budget"), sensitivity, culprit=f"{self.name} budget part")
        self.spend_noise(amount, label, noise, parameter, sensitivity, external=external, **details)
        vals = np.asarray(values, dtype=np.int64)
        return vals + noise.draw(parameter, vals.shape, self.rng if randomness is None else randomness)

    def add_discarded_draw(self, amount: Budget, label: str, **details: Any) -> Budget:
        """Account a draw an earlier attempt of this run made and never released (a resumed
        checkpoint's level that stopped after its noise, e.g. at a solver's time limit: the failure
        was an output of that draw). The run's total grows by ``amount`` - the release's guarantee
        is the composition of every draw made - and the draw is listed among the spends (marked
        ``discarded``). The caller's accountant is not charged: the attempt that drew it was."""
        self.total = self.total + amount
        ledger = Accountant(self.total)
        for s in self.spends:
            ledger.spend(s.budget, s.label)
        self.ledger = ledger
        converted = self.ledger.spend(amount, label)
        self.spends.append(Spend(label, converted, {**details, "discarded": True}))
        return converted

    @property
    def spent(self) -> Budget:
        """What the run has spent so far."""
        return self.ledger.spent

    # -- what the release carries ----------------------------------------------------------------
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

    def params(self, **extra: Any) -> dict[str, Any]:
        """The release's parameters: the mechanism's, the randomness (``"secure"`` or ``"seeded"``
        with its ``seed``), the versions of hierdp and its back ends, then ``extra``."""
        from hierdp._version import backend_versions

        out = {**self.mechanism.params(), "randomness": self.randomness,
               "seed": self.seed if self.randomness == "seeded" else None, "versions": dict(backend_versions())}
        out.update(extra)
        return out

    def accounting(self, *, assumptions: Iterable[str] = (), notes: Iterable[str] = (),
                   details: Mapping[str, Any] | None = None, partial: bool = False,
                   kind: type[Accounting] = Accounting, **fields: Any) -> Accounting:
        """The release's :class:`~hierdp.release.Accounting`: the mechanism's total, unit and
        conversion, the spends so far, the domain assumption plus ``assumptions`` (each once),
        ``notes`` (and a note that the release is partial), ``details`` with the ledger's summary.
        ``kind`` is an :class:`Accounting` subclass with a tighter analysis (``fields``: its own)."""
        spec = self.mechanism.spec
        stated: list[str] = list(self.assumptions)
        stated.extend(a for a in assumptions if a not in stated)
        all_notes = tuple(notes) + (("partial release: the run stopped before its last step",) if partial else ())
        base: dict[str, Any] = {
            "mechanism": self.name, "total": self.total, "unit": self.mechanism.unit, "delta": self.delta,
            "spends": tuple(self.spends), "assumptions": tuple(stated), "notes": all_notes,
            "conversion": spec.conversion if spec.epsilon_target is not None else None,
            "epsilon_target": spec.epsilon_target,
            "details": {**dict(details or {}), "ledger": self.ledger.summary(self.delta)},
        }
        base.update(fields)
        return kind(**base)

    def aborted(self, cause: BaseException, *, where: str, partial: Any = None, level: int = -1,
                level_name: str = "", parents: Any = None) -> ReleaseAborted:
        """The :class:`ReleaseAborted` for a failure after noise was drawn (raise it ``from cause``):
        its message says where, why, and what was spent; ``partial`` (a release of the completed
        part, if any) travels with it."""
        kept = ("the release of the completed levels is attached as .partial (do not publish it as complete)"
                if partial is not None else "nothing was released")
        msg = (f"{self.name} aborted {where} after its budget was spent: {type(cause).__name__}: {cause}. Spent so "
               f"far: {self.spent} of {self.total} ({len(self.spends)} parts, recorded in the ledger); {kept}")
        return ReleaseAborted(msg, partial=partial, spends=tuple(self.spends), spent=self.spent, accountant=self.ledger,
                              external_accountant=self.external, level=level, level_name=level_name, parents=parents,
                              cause=cause)


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

    def params(self) -> dict[str, Any]:
        """The mechanism's parameters (stored in every release)."""
        p: dict[str, Any] = {"calculus": self.spec.calculus, **self.spec.budget.parameters,
                             "delta": self.spec.delta, "epsilon_target": self.spec.epsilon_target,
                             "conversion": self.spec.conversion, "secure": self.secure}
        if self.spec.calculus == "zcdp":
            p["epsilon"] = self.spec.epsilon_target
        p.update(self.unit.as_dict())
        return p

    def _secure_for(self, secure: Any, *, seed: Any = None, rng: Any = None) -> bool:
        """Whether a run is secure: always when the mechanism was built with ``secure=True``; else
        as the release says, and by default (``secure=None``) unless a seed or a numpy generator is
        given (:func:`~hierdp.privacy.rng.secure_by_default`)."""
        if secure is None and self.secure:
            return True
        run_secure = secure_by_default(secure, seed, rng)
        if self.secure and not run_secure:
            raise PrivacyParameterError(
                f"secure: {self.name} was built with secure=True; a release cannot downgrade to seeded randomness")
        return run_secure

    def start(self, data: Any, *, seed: Any = None, rng: Any = None, secure: Any = None,
              accountant: Accountant | None = None, external_total: Budget | None = None,
              approx_cost: Callable[[], Budget] | None = None) -> RunContext:
        """Every check that can refuse a run, in order, before any noise: the data's domain is
        public (or declared public), the randomness fits the mode (secure by default; a seeded run
        asked for with ``secure=False`` and no seed gets a drawn 128-bit seed, recorded), the
        accountant can pay."""
        assumption = check_public_domain(_domain_owner(data), what=f"release with {self.name}")
        run_secure = self._secure_for(secure, seed=seed, rng=rng)
        if not run_secure and seed is None and rng is None:
            seed = draw_seed()
        generator = resolve_rng(rng, seed, secure=run_secure)
        return RunContext(self, rng=generator, seed=seed if rng is None else None, assumption=assumption,
                          accountant=accountant, external_total=external_total, approx_cost=approx_cost)

    @abstractmethod
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> Any:
        """Run the mechanism on ``data`` and return its release (a :class:`~hierdp.release.BaseRelease`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.budget}, {self.unit.describe()})"
