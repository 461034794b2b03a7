"""Secure by default (issue 20, item 1): the randomness a call gets when it says nothing, and the
seeds hierdp draws (never fewer than 128 bits), for the library and every registered mechanism.

Oracles: the types returned, the recorded parameters, and the draws themselves (a drawn seed
reproduces its release exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from hierdp.mechanisms import create
from hierdp.privacy import SecureRandom, make_rng
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.rng import SEED_BITS, draw_seed, secure_by_default


def test_make_rng_is_secure_unless_seeded() -> None:
    assert isinstance(make_rng(), SecureRandom)
    assert isinstance(make_rng(secure=True), SecureRandom)
    assert isinstance(make_rng(0), np.random.Generator)
    assert isinstance(make_rng(secure=False), np.random.Generator)  # explicit opt-in, fresh entropy
    g = np.random.default_rng(1)
    assert make_rng(g) is g
    with pytest.raises(PrivacyParameterError, match="refuses a seed"):
        make_rng(3, secure=True)


@pytest.mark.parametrize(("secure", "seed", "rng", "expected"), [
    (None, None, None, True), (None, 0, None, False), (None, None, np.random.default_rng(0), False),
    (None, None, SecureRandom(), True), (True, None, None, True), (False, None, None, False),
])
def test_secure_by_default(secure, seed, rng, expected) -> None:
    assert secure_by_default(secure, seed, rng) is expected


def test_drawn_seeds_have_128_bits() -> None:
    seeds = [draw_seed() for _ in range(200)]
    assert SEED_BITS == 128 and all(0 <= s < 2**128 for s in seeds)
    assert max(seeds) >= 2**120 and len(set(seeds)) == 200  # the high bits are used (P(max < 2^120) = 2^-1600)


def test_a_release_without_a_seed_is_secure_for_every_mechanism() -> None:
    from mechanisms.test_contract import CASES

    for name, (params, data, _) in CASES.items():
        rel = create(name, **params()).release(data())
        assert rel.params["randomness"] == "secure" and rel.params["seed"] is None, name


def test_secure_false_without_a_seed_draws_and_records_a_128_bit_seed() -> None:
    from mechanisms.test_contract import CASES

    params, data, _ = CASES["inftda"]
    rel = create("inftda", **params()).release(data(), secure=False)
    seed = rel.params["seed"]
    assert rel.params["randomness"] == "seeded" and isinstance(seed, int) and seed.bit_length() > 64
    again = create("inftda", **params()).release(data(), seed=seed)
    assert again == rel  # the recorded seed reproduces the release
