"""Counter-based noise: Philox against its published answers and numpy's Philox, the samplers
against the exact pmfs, and the property the scale-out needs - a node's value depends only on
(seed, level, node key), not on which other nodes are drawn with it or in what order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hierdp.privacy import PrivacyParameterError, discrete_gaussian, discrete_laplace, geometric, laplace
from hierdp.privacy import counter_noise
from hierdp.privacy.counter_noise import CounterRandom, NodeStreams, node_blocks, philox4x64

# the chi-square helper and the exact pmfs of the sampler tests (normalised by brute-force sums)
from privacy.test_samplers import ALPHA, chi_square_pvalue, dg_pmf, dl_pmf

# Random123's tests/kat_vectors, "philox4x64 10" lines: counter (4 words), key (2 words) -> output
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B)),
    ((2 ** 64 - 1,) * 4, (2 ** 64 - 1,) * 2,
     (0x87B092C3013FE90B, 0x438C3C67BE8D0224, 0x9CC7D7C69CD777B6, 0xA09CAEBF594F0BA0)),
    ((0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89),
     (0x452821E638D01377, 0xBE5466CF34E90C6C),
     (0xA528F45403E61D95, 0x38C72DBD566E9788, 0xA5A1610E72FD18B5, 0x57BD43B5E52B7FE6)),
]


def numpy_block(ctr: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, ...]:
    """numpy's own Philox4x64-10: it increments its counter before each block, so start one below."""
    c = sum(int(w) << (64 * i) for i, w in enumerate(ctr))
    words = [(c - 1) % 2 ** 256 >> (64 * i) & (2 ** 64 - 1) for i in range(4)]
    gen = np.random.Philox(counter=np.array(words, dtype=np.uint64), key=np.array(key, dtype=np.uint64))
    return tuple(int(x) for x in gen.random_raw(4))


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_matches_the_published_known_answers_and_numpy(ctr, key, expected):
    out = philox4x64(tuple(np.array([c], np.uint64) for c in ctr), key)
    assert tuple(int(o[0]) for o in out) == expected
    assert numpy_block(ctr, key) == expected  # the oracle agrees with Random123 too


def test_vectorized_philox_equals_numpy_philox_on_random_blocks():
    rng = np.random.default_rng(7)
    ctr = rng.integers(0, 2 ** 64, size=(4, 200), dtype=np.uint64)
    for key in [(0, 0), (2 ** 64 - 1, 1), tuple(int(x) for x in rng.integers(0, 2 ** 64, 2, dtype=np.uint64))]:
        out = np.stack(philox4x64(tuple(ctr), key))
        for j in range(ctr.shape[1]):
            assert tuple(int(v) for v in out[:, j]) == numpy_block(tuple(int(c) for c in ctr[:, j]), key)


def test_node_blocks_are_the_same_for_dense_runs_scattered_keys_and_any_mixture():
    src = CounterRandom(0x0123456789ABCDEF_FEDCBA9876543210)
    rng = np.random.default_rng(1)
    dense = np.arange(10_000, 13_000)
    scattered = rng.choice(2 ** 40, size=2_000, replace=False)
    mixed = rng.permutation(np.concatenate([dense, scattered, np.arange(2 ** 50, 2 ** 50 + 600, 2)]))
    for keys in (dense, scattered, mixed, np.array([0]), np.array([2 ** 62, 5])):
        got = node_blocks(src.nodes(9, keys), 3)
        want = np.stack(philox4x64((keys.astype(np.uint64) + np.uint64(1), 9, 3, 0), src.key_words), axis=1)
        np.testing.assert_array_equal(got, want)
    k = int(scattered[0])
    got = node_blocks(src.nodes(9, scattered[:1]), 3)[0]
    assert tuple(int(x) for x in got) == numpy_block((k + 1, 9, 3, 0), src.key_words)


@pytest.mark.parametrize("sigma2", [0.3, 2.0, 25.0, 400.0, 1e4, 3e5])
@pytest.mark.parametrize("method", ["table", "rejection"])
def test_counter_discrete_gaussian_matches_the_exact_pmf(sigma2, method, monkeypatch):
    if method == "rejection":  # no table fits: CKS20's rejection sampler for every sigma
        monkeypatch.setattr(counter_noise, "TABLE_LIMIT", 0)
        counter_noise.gaussian_tail_table.cache_clear()
    n = 200_000
    streams = CounterRandom.from_seed(11).nodes(3, np.arange(n) * 7 + 1)  # one draw per node stream
    samples = discrete_gaussian(sigma2, n, streams)
    assert samples.dtype == np.int64 and samples.shape == (n,)
    assert chi_square_pvalue(samples, *dg_pmf(sigma2)) > ALPHA
    counter_noise.gaussian_tail_table.cache_clear()


def test_the_tail_table_is_the_exact_survival_function():
    # P(|X| >= m) from the table against 40-digit sums (mpmath). Only tails a 53-bit uniform can
    # reach matter (>= 2**-60). The float table's error: exp(-x), x = m^2 / (2 sigma2), moves by
    # about x * 2**-53 relative when x is rounded, the normalisation and the reversed sum add a few
    # ulps (relative bound (x + 64) * 2**-52), and the terms beyond 9.5 sigma it omits sum to
    # less than 2**-64 of the total (absolute slack).
    from mpmath import exp, mp, mpf

    mp.dps = 40
    for sigma2 in (0.3, 7.0, 300.0):
        table = counter_noise.gaussian_tail_table(sigma2)
        half = int(60 * sigma2 ** 0.5) + 60
        w = [exp(-mpf(m) ** 2 / (2 * mpf(sigma2))) * (1 if m == 0 else 2) for m in range(half)]
        total = sum(w)
        checked = 0
        for m in range(1, len(table) + 1):
            exact = sum(w[m:]) / total
            if exact < mpf(2) ** -60:
                break
            bound = exact * (m * m / (2 * sigma2) + 64) * 2.0 ** -52 + mpf(2) ** -64
            assert abs(mpf(-float(table[m - 1])) - exact) <= bound, (sigma2, m)
            checked += 1
        assert checked >= 5  # every reachable tail was compared


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
    with pytest.raises(PrivacyParameterError, match="non-negative"):
        CounterRandom(1).nodes(0, np.array([3, -1]))
    with pytest.raises(PrivacyParameterError, match="finite and > 0"):
        discrete_laplace(0.0, 4, streams)
