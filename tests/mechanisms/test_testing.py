"""``hierdp.mechanisms.testing.check_mechanism`` on third-party mechanisms registered with
``register()``: a correct one passes, and each deliberately broken one fails with a message that
names the mechanism, the check and what to fix.

Oracle: each broken mechanism below differs from the correct one in exactly one line, written to
break exactly one rule of the contract; the check must name that rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import Hierarchy
from hierdp.mechanisms import Mechanism, register, registry
from hierdp.mechanisms.base import refuse_solver
from hierdp.mechanisms.testing import CHECKS, MechanismContractError, check_mechanism
from hierdp.privacy.noise import GeometricNoise
from hierdp.release import TableRelease

NOISE = GeometricNoise()


def _tree() -> Hierarchy:
    dom = pd.DataFrame({"r": ["a", "a", "b", "b"], "c": ["a1", "a2", "b1", "b2"]})
    rows = dom.assign(n=[4, 0, 7, 2])
    return Hierarchy.from_frame(rows, ["r", "c"], count="n", domain=dom)


class NoisyLeaves(Mechanism):
    """Geometric noise on every leaf (pure epsilon-DP): the correct third-party mechanism."""

    name = "NoisyLeaves"

    def __init__(self, epsilon=None, *, budget=None, secure=False, solver=None, solver_options=None):
        refuse_solver(self.name, solver, solver_options, "it releases noisy leaves as drawn")
        self.resolve_privacy(epsilon, None, None, budget, unit=None, bounded=True, contributions=1, distinct=False,
                             calculus="pure", secure=secure)

    def leaves(self, data):
        return np.flatnonzero(data.n_children == 0)

    def release(self, data, *, seed=None, rng=None, secure=None, accountant=None, progress=False):
        leaves = self.leaves(data)
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        noisy = self.measure(ctx, data, leaves)
        frame = pd.DataFrame({"node": np.asarray(data.names)[leaves], "value": noisy})
        return TableRelease(frame=frame, accounting=ctx.accounting(notes=("leaves only",)), mechanism=self.name,
                            params=ctx.params())

    def measure(self, ctx, data, leaves):
        return ctx.measure(data.counts[leaves], self.spec.budget, "leaves", NOISE,
                           sensitivity=self.unit.l1_sensitivity())


class SpendsHalf(NoisyLeaves):
    def measure(self, ctx, data, leaves):  # records only half of what the noise costs
        return ctx.measure(data.counts[leaves], self.spec.budget * 0.5, "leaves", NOISE,
                           sensitivity=self.unit.l1_sensitivity(), parameter=NOISE.calibrate(
                               self.spec.budget.exact_parameters["epsilon"], self.unit.l1_sensitivity()))


class NoiseBeforeSpend(NoisyLeaves):
    def measure(self, ctx, data, leaves):  # draws, then records the spend
        noise = NOISE.draw(NOISE.calibrate(self.spec.budget.exact_parameters["epsilon"], 2), leaves.size, ctx.rng)
        ctx.spend(self.spec.budget, "leaves")
        return data.counts[leaves] + noise


class IgnoresTheSeed(NoisyLeaves):
    def measure(self, ctx, data, leaves):  # fresh randomness instead of ctx.rng
        ctx.spend(self.spec.budget, "leaves")
        return data.counts[leaves] + NOISE.draw(2.0, leaves.size, np.random.default_rng())


class SkipsStart(NoisyLeaves):
    def release(self, data, *, seed=None, rng=None, secure=None, accountant=None, progress=False):
        from hierdp.mechanisms.base import RunContext
        from hierdp.privacy.rng import resolve_rng

        # builds its run context by hand: no public-domain check
        ctx = RunContext(self, rng=resolve_rng(rng, seed, secure=self._secure_for(secure, seed=seed, rng=rng)), seed=seed,
                         assumption=None, accountant=accountant)
        leaves = self.leaves(data)
        frame = pd.DataFrame({"node": np.asarray(data.names)[leaves], "value": self.measure(ctx, data, leaves)})
        return TableRelease(frame=frame, accounting=ctx.accounting(), mechanism=self.name, params=ctx.params())


class TakesASolverSilently(NoisyLeaves):
    def __init__(self, epsilon=None, *, budget=None, secure=False, solver=None, solver_options=None):
        self.resolve_privacy(epsilon, None, None, budget, unit=None, bounded=True, contributions=1, distinct=False,
                             calculus="pure", secure=secure)


class HandAccounting(NoisyLeaves):
    def release(self, *a, **k):  # an untyped accounting
        rel = super().release(*a, **k)
        rel.accounting = {"epsilon": 1.0}
        return rel


@pytest.fixture()
def fresh_registry(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", dict(registry._EXTRA))  # registrations undone after the test


def test_a_correct_third_party_mechanism_passes(fresh_registry):
    register("noisy_leaves", NoisyLeaves, "geometric noise on every leaf", input="tree")
    check_mechanism("noisy_leaves", {"epsilon": 0.5}, _tree())


@pytest.mark.parametrize("cls, check, words", [
    (SpendsHalf, "release", "the spends compose to pure(eps=0.25), not the total pure(eps=0.5)"),
    (NoiseBeforeSpend, "ledger", "noise was drawn before the first spend was recorded"),
    (IgnoresTheSeed, "seeds", "two releases with seed=7 differ"),
    (SkipsStart, "domain", "data whose domain was read off the private rows was released"),
    (TakesASolverSilently, "metadata", "registered without a solver step but accepts solver='highs'"),
    (HandAccounting, "release", "accounting is a dict, not a hierdp.release.Accounting"),
])
def test_a_broken_third_party_mechanism_fails_with_a_clear_message(fresh_registry, cls, check, words):
    register("broken", cls, "deliberately broken", input="tree")
    with pytest.raises(MechanismContractError) as err:
        check_mechanism("broken", {"epsilon": 0.5}, _tree())
    assert str(err.value).startswith(f"check_mechanism('broken'): {check}: ")
    assert words in str(err.value)


def test_bad_arguments_of_the_check(fresh_registry):
    with pytest.raises(MechanismContractError, match="not registered"):
        check_mechanism("nobody", {"epsilon": 1.0}, _tree())
    register("noisy_leaves", NoisyLeaves, input="tree")
    with pytest.raises(ValueError, match="unknown check 'speed'"):
        check_mechanism("noisy_leaves", {"epsilon": 1.0}, _tree(), checks=["speed"])
    with pytest.raises(ValueError, match="seeded mechanism"):
        check_mechanism("noisy_leaves", {"epsilon": 1.0, "secure": True}, _tree())
    check_mechanism("noisy_leaves", {"epsilon": 1.0}, _tree(), checks=CHECKS[:3])
