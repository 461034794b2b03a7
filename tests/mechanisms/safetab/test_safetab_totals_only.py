"""SafeTab with TotalOnly groups only, on a frame without an age column (``age=None``).

Oracles: brute-force group totals; the exact pmf of the noise (discrete Laplace
``P(k) = (1-q)/(1+q) q^|k|``, ``q = e^{-eps}``, variance ``2q/(1-q)^2``; discrete Gaussian
``P(k) ∝ exp(-k^2 / (2 sigma^2))`` normalised over a wide integer range) for the stated MOE (the
smallest integer whose two-sided mass reaches 95 %), the noise variance and the coverage;
and the generator state, unchanged when bad input is refused (no noise drawn).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTab, SafeTabError, StabilityError

EPS = 0.3        # per-group budget b of the geometric run (pure DP)
RHO = 0.02       # per-group budget b of the discrete-Gaussian run (zCDP)
REPS = 20000


def _frame() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Persons with sex and region/district (no age); maps (region) and (district x "all"/"F")."""
    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], n),
                       "region": rng.choice(["N", "S"], n),
                       "district": rng.choice(["a", "b", "c"], n)},
                      index=pd.Index(1000 + np.arange(n), name="person"))
    regions = pd.DataFrame({"record": df.index, "group": df["region"].to_numpy()})
    district = df["region"] + "/" + df["district"]
    female = df.index[df["sex"].to_numpy() == "F"]
    districts = pd.concat([pd.DataFrame({"record": df.index, "group": district + "|all"}),
                           pd.DataFrame({"record": female, "group": district[female] + "|F"})])
    return df, regions, districts


def _pmf(noise: str, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and exact pmf of the per-count noise (tails beyond |k| = 2000 are < 1e-100)."""
    k = np.arange(-2000, 2001)
    if noise == "geometric":
        q = np.exp(-b)
        return k, (1 - q) / (1 + q) * q ** np.abs(k)
    w = np.exp(-k.astype(float) ** 2 * b)  # sigma^2 = 1 / (2 rho)
    return k, w / w.sum()


def _levels(budget_per_group: float) -> list[PopulationGroupLevel]:
    _, regions, districts = _frame()
    district_universe = [f"{r}/{d}|{i}" for r in "NS" for d in "abc" for i in ("all", "F")]
    return [PopulationGroupLevel("region", budget_per_group, 1, regions, universe=["N", "S", "W"],
                                 total_only=True),
            PopulationGroupLevel("district", 2 * budget_per_group, 2, districts,
                                 universe=district_universe, total_only=True)]


@pytest.mark.parametrize("noise,b", [("geometric", EPS), ("discrete_gaussian", RHO)])
def test_totals_only_without_age_matches_the_exact_noise_law(noise, b):
    df, _, _ = _frame()
    mech = SafeTab(_levels(b), noise=noise, age=None, repetitions=REPS, include_true=True)
    rel = mech.release(df, seed=11)
    f = rel.frame
    assert set(f["tabulation"]) == {"total_only"} and set(f["cell"]) == {"total"}
    assert mech.observed_stability(df) == {"region": 1, "district": 2}
    # brute-force totals, including the empty public group "W" (a noisy zero)
    one = f[f["run"] == 0].set_index("group")["true_count"]
    assert one["W"] == 0 and one["N"] == (df["region"] == "N").sum()
    assert one["S/b|F"] == ((df["region"] == "S") & (df["district"] == "b")
                            & (df["sex"] == "F")).sum()
    assert len(f) == REPS * (3 + 12)
    # each count uses the whole per-group budget b (level budget / stability)
    assert np.allclose(f["noise_parameter"], b)
    k, p = _pmf(noise, b)
    mass = np.array([p[np.abs(k) <= m].sum() for m in range(200)])
    moe = int(np.argmax(mass >= 0.95))
    assert set(f["moe"]) == {moe}
    z = (f["noisy_count"] - f["true_count"]).to_numpy()
    assert np.issubdtype(z.dtype, np.integer)
    n = z.size  # 300,000 independent draws
    var = float((k.astype(float) ** 2 * p).sum())
    if noise == "geometric":
        q = np.exp(-b)
        assert var == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-9)
    assert abs(z.mean()) < 5 * np.sqrt(var / n)
    assert z.var() == pytest.approx(var, rel=0.03)  # SE of the sample variance is < 0.6 %
    cover = float(np.mean(np.abs(z) <= f["moe"].to_numpy()))
    se = np.sqrt(mass[moe] * (1 - mass[moe]) / n)
    assert abs(cover - mass[moe]) < 5 * se
    # accounting: 2 levels, each b * stability in its own calculus, composed sequentially
    total = 3 * b
    if noise == "geometric":
        assert rel.accounting.pure_epsilon == pytest.approx(total)
    else:
        assert rel.accounting.zcdp_rho == pytest.approx(total)


def _bad_cases() -> dict[str, tuple[list[PopulationGroupLevel], dict]]:
    _df, regions, districts = _frame()
    ok = PopulationGroupLevel("region", 0.5, 1, regions, total_only=True)
    adaptive = PopulationGroupLevel("region", 0.5, 1, regions, total_only=["N"])
    understated = PopulationGroupLevel("district", 0.5, 1, districts, total_only=True)
    return {
        "adaptive group without age": ([adaptive], {"age": None}),
        "understated stability": ([ok, understated], {"age": None}),
        "unknown sex column": ([ok], {"age": None, "sex": "gender"}),
        "age column missing": ([ok], {}),
        "thresholds out of order": ([ok], {"age": None, "thresholds": (10, 5, 100)}),
    }


@pytest.mark.parametrize("case", list(_bad_cases()))
def test_bad_input_raises_before_any_noise(case):
    df, _, _ = _frame()
    levels, kwargs = _bad_cases()[case]
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    expected = StabilityError if case == "understated stability" else SafeTabError
    with pytest.raises(expected) as info:
        SafeTab(levels, **kwargs).release(df, rng=rng)
    assert rng.bit_generator.state == before
    if case == "adaptive group without age":
        assert "'S'" in str(info.value) and "age" in str(info.value)
    if case in ("unknown sex column", "age column missing"):
        assert ("gender" if case == "unknown sex column" else "age") in str(info.value)
