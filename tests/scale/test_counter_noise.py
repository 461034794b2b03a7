"""Counter-based noise: Philox against its published answers and a scalar reference, the samplers
against the exact pmfs, and the property the scale-out needs - a node's value depends only on
(seed, level, node key), not on which other nodes are drawn with it or in what order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hierdp.privacy import PrivacyParameterError, discrete_gaussian, discrete_laplace, geometric, laplace
from hierdp.privacy.counter_noise import CounterRandom, NodeStreams, philox4x32, uniform_words

# the chi-square helper and the exact pmfs of the sampler tests (normalised by brute-force sums)
from privacy.test_samplers import ALPHA, chi_square_pvalue, dg_pmf, dl_pmf

# Random123's tests/kat_vectors, "philox4x32 10" lines: counter (4 words), key (2 words) -> output
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox_reference(ctr: tuple[int, int, int, int], key: tuple[int, int], rounds: int = 10) -> tuple[int, ...]:
    """Philox4x32 from Salmon et al. (2011) with Python integers, one block at a time: the key is
    bumped *before* every round but the first (the published order; the code under test bumps
    after each round)."""
    m0, m1, w0, w1, mask = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF
    x0, x1, x2, x3 = ctr
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + w0) & mask, (k1 + w1) & mask
        p0, p1 = m0 * x0, m1 * x2
        x0, x1, x2, x3 = (p1 >> 32) ^ x1 ^ k0, p1 & mask, (p0 >> 32) ^ x3 ^ k1, p0 & mask
    return x0, x1, x2, x3


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_matches_the_published_known_answers(ctr, key, expected):
    out = philox4x32(tuple(np.array([c], np.uint64) for c in ctr), key)
    assert tuple(int(o[0]) for o in out) == expected
    assert philox_reference(ctr, key) == expected  # the reference implementation is right too


def test_vectorized_philox_equals_the_scalar_reference_on_random_blocks():
    rng = np.random.default_rng(7)
    ctr = rng.integers(0, 2 ** 32, size=(4, 300), dtype=np.uint64)
    for key in [(0, 0), (0xFFFFFFFF, 1), tuple(int(x) for x in rng.integers(0, 2 ** 32, 2))]:
        out = np.stack(philox4x32(tuple(ctr), key))
        for j in range(ctr.shape[1]):
            assert tuple(int(v) for v in out[:, j]) == philox_reference(tuple(int(c) for c in ctr[:, j]), key)


def test_uniform_words_are_the_philox_block_of_key_level_attempt():
    src = CounterRandom(0x0123456789ABCDEF)
    keys = np.array([0, 5, 2 ** 40 + 3, 2 ** 62], np.int64)
    hi, lo = uniform_words(src.nodes(9, keys), 4)
    for k, a, b in zip(keys.tolist(), hi.tolist(), lo.tolist()):
        x = philox_reference((k & 0xFFFFFFFF, k >> 32, 9, 4), (src.key & 0xFFFFFFFF, src.key >> 32))
        assert a == (x[0] << 32) | x[1] and b == (x[2] << 32) | x[3]


@pytest.mark.parametrize("sigma2", [0.3, 2.0, 25.0, 400.0, 1e4])
def test_counter_discrete_gaussian_matches_the_exact_pmf(sigma2):
    n = 200_000
    streams = CounterRandom.from_seed(11).nodes(3, np.arange(n) * 7 + 1)  # one draw per node stream
    samples = discrete_gaussian(sigma2, n, streams)
    assert samples.dtype == np.int64 and samples.shape == (n,)
    assert chi_square_pvalue(samples, *dg_pmf(sigma2)) > ALPHA


@pytest.mark.parametrize("scale", [0.5, 3.0, 40.0, 2000.0])
def test_counter_discrete_laplace_matches_the_exact_pmf(scale):
    n = 200_000
    samples = discrete_laplace(scale, n, CounterRandom.from_seed(12).nodes(1, np.arange(n)))
    assert chi_square_pvalue(samples, *dl_pmf(scale)) > ALPHA


def test_per_node_parameters_follow_their_own_laws():
    n = 100_000
    sigma2 = np.tile([0.5, 30.0], n)
    streams = CounterRandom.from_seed(21).nodes(2, np.arange(2 * n))
    samples = discrete_gaussian(sigma2, None, streams)
    assert chi_square_pvalue(samples[0::2], *dg_pmf(0.5)) > ALPHA
    assert chi_square_pvalue(samples[1::2], *dg_pmf(30.0)) > ALPHA
    # geometric(epsilon, sensitivity) is the discrete Laplace of scale sensitivity / epsilon
    lap = geometric(0.5, 2.0, 2 * n, streams)
    np.testing.assert_array_equal(lap, discrete_laplace(4.0, 2 * n, streams))
    assert chi_square_pvalue(lap, *dl_pmf(4.0)) > ALPHA


def test_levels_and_neighbouring_keys_are_independent():
    # the same keys one level apart, and key k against key k + 1, as 2-d contingency tables of
    # the (clipped) values: a chi-square test of independence must not reject
    n = 100_000
    src = CounterRandom.from_seed(5)
    keys = np.arange(n)
    a = np.clip(discrete_gaussian(2.0, n, src.nodes(4, keys)), -3, 3)
    b = np.clip(discrete_gaussian(2.0, n, src.nodes(5, keys)), -3, 3)
    c = np.clip(discrete_gaussian(2.0, n, src.nodes(4, keys + 1)), -3, 3)
    for x, y in ((a, b), (a, c)):
        table = np.zeros((7, 7))
        np.add.at(table, (x + 3, y + 3), 1)
        assert stats.chi2_contingency(table).pvalue > ALPHA
    np.testing.assert_array_equal(a[1:], c[:-1])  # key k + 1 at level 4 is key k + 1 at level 4


def test_a_node_draws_the_same_value_whatever_is_drawn_with_it():
    src = CounterRandom.from_seed(3)
    keys = np.random.default_rng(0).choice(10 ** 9, size=5_000, replace=False)
    whole = discrete_gaussian(3.7, keys.size, src.nodes(6, keys))
    perm = np.random.default_rng(1).permutation(keys.size)
    np.testing.assert_array_equal(discrete_gaussian(3.7, keys.size, src.nodes(6, keys[perm])), whole[perm])
    pieces = [discrete_gaussian(3.7, len(part), src.nodes(6, part)) for part in np.array_split(keys, 37)]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    one = discrete_gaussian(3.7, 1, src.nodes(6, keys[[17]]))
    assert one[0] == whole[17]
    # another seed, another level: other values (equal by chance for a few entries only)
    other_seed = discrete_gaussian(3.7, keys.size, CounterRandom.from_seed(4).nodes(6, keys))
    other_level = discrete_gaussian(3.7, keys.size, src.nodes(7, keys))
    assert np.mean(other_seed == whole) < 0.5 and np.mean(other_level == whole) < 0.5


def test_the_key_comes_from_the_seed_or_the_generator():
    assert CounterRandom.from_seed(9) == CounterRandom.from_generator(np.random.default_rng(9))
    assert CounterRandom.from_seed(9) != CounterRandom.from_seed(10)
    g = np.random.default_rng(9)
    assert CounterRandom.from_generator(g) != CounterRandom.from_generator(g)  # the generator moved on


def test_bad_requests_are_refused():
    streams = CounterRandom(1).nodes(0, np.arange(4))
    with pytest.raises(PrivacyParameterError, match="one value per node"):
        discrete_gaussian(2.0, 5, streams)
    with pytest.raises(TypeError, match="discrete noise only"):
        laplace(1.0, 4, streams)
    with pytest.raises(PrivacyParameterError, match="key must be"):
        CounterRandom(-1)
    with pytest.raises(PrivacyParameterError, match="1-d integer"):
        NodeStreams(CounterRandom(1), 0, np.array([0.5]))
    with pytest.raises(PrivacyParameterError, match="finite and > 0"):
        discrete_laplace(0.0, 4, streams)
