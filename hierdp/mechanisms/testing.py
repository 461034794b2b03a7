"""The mechanism contract as a public check that any registered mechanism can run.

Like scikit-learn's ``check_estimator``: a third party registers a mechanism
(:func:`hierdp.mechanisms.register`) and runs ::

    from hierdp.mechanisms.testing import check_mechanism

    check_mechanism("my_mech", {"epsilon": 1.0}, data)   # raises MechanismContractError, or returns

on data of its declared input. The checks, each of which names itself when it fails:

* **metadata**: the name is registered with a known input kind; a mechanism registered with a
  solver step accepts ``time_limit=``, one without refuses ``solver=`` when it is built;
* **build**: the registry builds a :class:`~hierdp.mechanisms.base.Mechanism` with a name, a
  privacy spec and a unit;
* **release**: a :class:`~hierdp.release.BaseRelease` of the mechanism's name, a non-empty frame,
  no violation of its own promises (``check_consistency()``), a typed
  :class:`~hierdp.release.Accounting` of the mechanism's total and unit whose spends compose
  exactly to the total, every spend in the total's calculus, the unit's words in the guarantee,
  the randomness and the seed in the release's parameters;
* **seeds**: the same seed gives the same frame;
* **secure**: ``secure=True`` runs on OS randomness, and a secure mechanism refuses a seed;
* **ledger before noise**: a caller's accountant is charged exactly the total, its first charge
  before any noise is drawn through :mod:`hierdp.privacy.samplers` (every noise model draws
  there); once it is exhausted the next release is refused with
  :class:`~hierdp.privacy.errors.BudgetExceeded` before any noise (the generator is untouched)
  and nothing is recorded;
* **public domain**: data whose domain was read off the rows (``domain_source="observed"``) is
  refused with :class:`~hierdp.privacy.domain.ObservedDomainError` before any noise (for inputs
  that carry ``domain_source``).

Every check is a property any correct mechanism has on any valid input; none compares numbers
with a reference implementation (write your own oracle tests for that).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CHECKS", "MechanismContractError", "check_mechanism"]

#: the checks, in the order they run
CHECKS = ("metadata", "build", "release", "seeds", "secure", "ledger", "domain")


class MechanismContractError(AssertionError):
    """A mechanism breaks the contract; the message names the mechanism and the check."""


class _DrawCounter:
    """Counts the noise draws made through :mod:`hierdp.privacy.samplers` (which every
    :class:`~hierdp.privacy.noise.NoiseModel` draws through) while it is active."""

    NAMES = ("discrete_laplace", "discrete_gaussian", "laplace", "geometric")

    def __init__(self) -> None:
        self.draws = 0
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _DrawCounter:
        from hierdp.privacy import samplers

        for name in self.NAMES:
            original = getattr(samplers, name)
            self._saved[name] = original

            def counted(*args: Any, _f: Any = original, **kwargs: Any) -> Any:
                self.draws += 1
                return _f(*args, **kwargs)

            setattr(samplers, name, counted)
        return self

    def __exit__(self, *exc: Any) -> None:
        from hierdp.privacy import samplers

        for name, original in self._saved.items():
            setattr(samplers, name, original)


def _witness(total: Any, counter: _DrawCounter) -> Any:
    """An accountant that notes how many noise draws were made before its first charge: a
    mechanism that draws any noise before recording its first spend is caught."""
    from hierdp.privacy.budget import Accountant

    class Witness(Accountant):
        draws_before_first_charge: int | None = None

        def spend(self, amount: Any, label: str) -> Any:
            if self.draws_before_first_charge is None:
                self.draws_before_first_charge = counter.draws
            return super().spend(amount, label)

    return Witness(total)


class _Observed:
    """The data as if its domain had been read off the private rows."""

    def __init__(self, data: Any) -> None:
        self._data = data
        self.domain_source = "observed"
        self.domain_assumption = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._data, name)


def _state(rng: np.random.Generator) -> dict[str, Any]:
    return copy.deepcopy(dict(rng.bit_generator.state))


def check_mechanism(name: str, params: Mapping[str, Any], data: Any, *,
                    checks: Iterable[str] = CHECKS, data_factory: Callable[[], Any] | None = None) -> None:
    """Run the mechanism contract on the registered mechanism ``name``.

    Args:
        name: a registered name (:func:`hierdp.mechanisms.registry.names`).
        params: the keyword parameters it is built with (the privacy spec and options), e.g.
            ``{"epsilon": 1.0}``; they must not ask for ``secure=True``.
        data: valid input of the mechanism's declared input kind, with a declared (public) domain.
        checks: a subset of :data:`CHECKS` to run (default: all).
        data_factory: builds a fresh copy of the data for each release (for mechanisms that
            consume or mutate their input); default: ``data`` is reused.

    Raises:
        MechanismContractError: the first check that fails, named, with what was expected and
            what happened.
    """
    from hierdp.mechanisms import registry
    from hierdp.mechanisms.base import Mechanism, MechanismParameterError
    from hierdp.privacy.budget import Budget
    from hierdp.privacy.domain import ObservedDomainError
    from hierdp.privacy.errors import BudgetExceeded, PrivacyParameterError
    from hierdp.privacy.spec import PrivacySpec
    from hierdp.privacy.unit import PrivacyUnit
    from hierdp.release import Accounting, BaseRelease

    todo = list(checks)
    unknown = [c for c in todo if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check {unknown[0]!r}; checks: {', '.join(CHECKS)}")
    params = dict(params)
    if params.get("secure"):
        raise ValueError("params must build a seeded mechanism (the secure check builds its own)")
    fresh = data_factory if data_factory is not None else (lambda: data)

    def fail(check: str, why: str) -> MechanismContractError:
        return MechanismContractError(f"check_mechanism({name!r}): {check}: {why}")

    def build(**extra: Any) -> Any:
        try:
            return registry.create(name, **params, **extra)
        except Exception as exc:
            raise fail("build", f"create({name!r}, ...) raised {type(exc).__name__}: {exc}") from exc

    def release(mech: Any, check: str, **kw: Any) -> Any:
        try:
            return mech.release(fresh(), **kw)
        except Exception as exc:
            raise fail(check, f"release({', '.join(f'{k}=' for k in kw)}) raised {type(exc).__name__}: {exc}") \
                from exc

    # -- metadata and build -----------------------------------------------------------------
    if name not in registry.names():
        raise fail("metadata", "not registered (call hierdp.mechanisms.register first)")
    meta = registry.info(name)
    if meta.input not in registry.INPUT_KINDS:
        raise fail("metadata", f"unknown input kind {meta.input!r}")
    mech = build()
    if "build" in todo:
        if not isinstance(mech, Mechanism):
            raise fail("build", f"the registry built a {type(mech).__name__}, not a hierdp Mechanism subclass")
        if not mech.name:
            raise fail("build", "the mechanism has no display name (set the class attribute name)")
        if not isinstance(getattr(mech, "spec", None), PrivacySpec) or not isinstance(
                getattr(mech, "unit", None), PrivacyUnit):
            raise fail("build", "spec and unit are not set (call self.resolve_privacy(...) in __init__)")
    if "metadata" in todo:
        if meta.takes_solver:
            build(time_limit=30.0)  # a mechanism with a solver step takes the time limit
        else:
            try:
                registry.create(name, **params, solver="highs")
            except (MechanismParameterError, TypeError):
                pass
            else:
                raise fail("metadata", "it is registered without a solver step but accepts solver='highs' (which "
                                       "would be ignored): refuse it (hierdp.mechanisms.base.refuse_solver), or "
                                       "register its solver_shapes")

    # -- one release ----------------------------------------------------------------------------
    total = mech.spec.budget
    if "release" in todo:
        rel = release(mech, "release", seed=0)
        if not isinstance(rel, BaseRelease):
            raise fail("release", f"returned a {type(rel).__name__}, not a hierdp.release.BaseRelease")
        if rel.mechanism != mech.name:
            raise fail("release", f"the release names mechanism {rel.mechanism!r}, the mechanism is {mech.name!r}")
        frame = rel.to_frame()
        if not isinstance(frame, pd.DataFrame) or frame.empty:
            raise fail("release", "to_frame() is not a non-empty pandas DataFrame")
        broken = rel.check_consistency()
        if broken:
            raise fail("release", f"the release breaks its own promises: {broken[0]}")
        acc = rel.accounting
        if not isinstance(acc, Accounting):
            raise fail("release", f"accounting is a {type(acc).__name__}, not a hierdp.release.Accounting (build it "
                                  "with ctx.accounting(...))")
        if acc.total != total or acc.unit != mech.unit:
            raise fail("release", f"the accounting states total {acc.total} and unit {acc.unit!r}; the mechanism's "
                                  f"are {total} and {mech.unit!r}")
        if not acc.spends:
            raise fail("release", "the accounting lists no spend (record each part with ctx.spend before its noise)")
        bad = [s.label for s in acc.spends if s.budget.calculus != total.calculus]
        if bad:
            raise fail("release", f"spend {bad[0]!r} is not in the total's calculus ({total.calculus})")
        if acc.spent != total:
            raise fail("release", f"the spends compose to {acc.spent}, not the total {total}: the stated guarantee "
                                  "would not be the delivered one")
        if mech.unit.describe() not in rel.guarantee:
            raise fail("release", "the guarantee does not state the privacy unit")
        if rel.params.get("randomness") != "seeded" or rel.params.get("seed") != 0:
            raise fail("release", f"params must record the randomness and the seed (build them with ctx.params()); "
                                  f"got randomness={rel.params.get('randomness')!r}, seed={rel.params.get('seed')!r}")

    if "seeds" in todo:
        a, b = (release(build(), "seeds", seed=7) for _ in range(2))
        try:
            pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
        except AssertionError:
            raise fail("seeds", "two releases with seed=7 differ: draw every noise value from ctx.rng") from None

    if "secure" in todo:
        rel = release(mech, "secure", secure=True)
        if rel.params.get("randomness") != "secure" or rel.accounting.spent != total:
            raise fail("secure", "a secure release must record randomness 'secure' and spend its total")
        if release(mech, "secure").params.get("randomness") != "secure":
            raise fail("secure", "release(data) without a seed must be secure (the default): resolve the randomness "
                                 "with self.start(data, seed=seed, rng=rng, secure=secure)")
        try:
            build(secure=True).release(fresh(), seed=1)
        except PrivacyParameterError:
            pass
        else:
            raise fail("secure", "a mechanism built with secure=True accepted a seed (call self.start(...), which "
                                 "refuses it)")

    if "ledger" in todo:
        with _DrawCounter() as counter:
            acct = _witness(total if total.calculus != "approx" else Budget.approx(total.epsilon, total.delta),
                            counter)
            release(mech, "ledger", seed=1, accountant=acct)
        if not acct.remaining.is_zero:
            raise fail("ledger", f"the caller's accountant was charged {acct.spent}, not the total {total}")
        if acct.draws_before_first_charge:
            raise fail("ledger", "noise was drawn before the first spend was recorded: record every spend "
                                 "(ctx.spend) before drawing that part's noise")
        rng = np.random.default_rng(3)
        before, ledger = _state(rng), acct.ledger
        try:
            mech.release(fresh(), rng=rng, accountant=acct)
        except BudgetExceeded:
            pass
        except Exception as exc:
            raise fail("ledger", f"an exhausted accountant must raise BudgetExceeded, got {type(exc).__name__}: "
                                 f"{exc}") from exc
        else:
            raise fail("ledger", "an exhausted accountant did not stop the release")
        if _state(rng) != before:
            raise fail("ledger", "noise was drawn before the spend was refused: record every spend (ctx.spend) "
                                 "before drawing that part's noise")
        if acct.ledger != ledger:
            raise fail("ledger", "a refused release left entries in the caller's accountant")

    if "domain" in todo and hasattr(data, "domain_source"):
        rng = np.random.default_rng(0)
        before = _state(rng)
        try:
            mech.release(_Observed(fresh()), rng=rng)
        except ObservedDomainError:
            pass
        except Exception as exc:
            raise fail("domain", f"data with a domain read off the rows must raise ObservedDomainError, got "
                                 f"{type(exc).__name__}: {exc}") from exc
        else:
            raise fail("domain", "data whose domain was read off the private rows was released (call "
                                 "self.start(data, ...) before any noise: it refuses it)")
        if _state(rng) != before:
            raise fail("domain", "noise was drawn before the observed domain was refused")
