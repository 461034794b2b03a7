"""The Census TopDown's real-valued-step covariances against a dense computation of the same estimator."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierdp.intervals import IntervalsUnsupported
from hierdp.intervals.census import census_topdown_covariances
from hierdp.mechanisms import create
from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
from hierdp.mechanisms.census.mechanism import _variance
from hierdp.privacy.calibration import exact
from hierdp.spines import Spine


def _spine() -> Spine:
    frame = pd.DataFrame({"state": ["S"] * 7, "county": ["C1"] * 3 + ["C2"] * 3 + ["C3"],
                          "block": [f"b{i}" for i in range(7)]})
    return Spine.from_frame(frame, ["state", "county", "block"],
                            [Fraction(1, 4), Fraction(1, 4), Fraction(1, 8), Fraction(3, 8)], root="US")


def _dense_covariances(mech, spine: Spine, strategy: QueryStrategy) -> np.ndarray:
    """The same estimator as an explicit linear map of every noise value (generic KKT solves per
    parent), applied to unit noise vectors scaled by their standard deviations."""
    K = strategy.n_cells
    groups = list(strategy.groups)
    total = exact(mech.spec.budget, "budget")
    sens = mech.noise.sensitivity(mech.unit, finest=False)
    entries = []  # (geounit, group, row, variance)
    for u in range(spine.n):
        if not spine.measured[u]:
            continue
        for g in groups:
            share = strategy.shares_at(str(spine.level_names[int(spine.level[u])]))[g]
            param = mech.noise.calibrate(total * Fraction(int(spine.gamma_num[u]), spine.gamma_den) * share,
                                         sens, culprit="test")
            for row in range(strategy.group_matrix(g).shape[0]):
                entries.append((u, g, row, _variance(mech.noise, param)))

    def estimate(noise: np.ndarray) -> np.ndarray:
        def normal(u):
            H, b = np.zeros((K, K)), np.zeros(K)
            for (v, g, row, var), e in zip(entries, noise, strict=True):
                if v == u:
                    q = strategy.group_matrix(g)[row].astype(float)
                    H += np.outer(q, q) / var
                    b += q * e / var
            return H, b

        est = np.zeros((spine.n, K))
        H, b = normal(0)
        kkt = np.block([[H, np.ones((K, 1))], [np.ones((1, K)), np.zeros((1, 1))]])
        est[0] = np.linalg.solve(kkt, np.concatenate([b, [0.0]]))[:K]
        ptr, child = spine.children_csr()
        for p in range(spine.n):
            kids = child[ptr[p]:ptr[p + 1]]
            if kids.size == 1:
                est[kids[0]] = est[p]
            elif kids.size > 1:
                C = kids.size
                big = np.zeros((C * K + K, C * K + K))
                rhs = np.zeros(C * K + K)
                for i, c in enumerate(kids):
                    H, b = normal(c)
                    big[i * K:(i + 1) * K, i * K:(i + 1) * K] = H
                    big[i * K:(i + 1) * K, C * K:] = np.eye(K)
                    big[C * K:, i * K:(i + 1) * K] = np.eye(K)
                    rhs[i * K:(i + 1) * K] = b
                rhs[C * K:] = est[p]
                est[kids] = np.linalg.solve(big, rhs)[:C * K].reshape(C, K)
        return est.ravel()

    sd = np.sqrt([e[3] for e in entries])
    L = np.stack([estimate(np.eye(len(entries))[j] * sd[j]) for j in range(len(entries))], axis=1)
    cov = L @ L.T
    return np.stack([cov[u * K:(u + 1) * K, u * K:(u + 1) * K] for u in range(spine.n)])


@pytest.mark.parametrize("per_level", [False, True], ids=["shares", "level shares"])
@pytest.mark.parametrize("noise", ["discrete_gaussian", "geometric"])
def test_top_down_pass_equals_dense_covariance(noise, per_level):
    spine = _spine()
    strategy = QueryStrategy.marginals((2, 2))
    if per_level:  # the DAS's production strategies give each geolevel its own shares
        groups = list(strategy.groups)
        strategy = QueryStrategy(strategy.shape, dict(strategy.groups), dict(strategy.shares), level_shares={
            "county": {g: Fraction(1, 6) if g != "detailed" else Fraction(1, 2) for g in groups},
            "block": {g: Fraction(1, 12) if g != "detailed" else Fraction(3, 4) for g in groups}})
        assert len(groups) == 4
    kw = {"rho": 0.7} if noise == "discrete_gaussian" else {"epsilon": 1.3}
    mech = create("census_topdown", strategy=strategy, noise=noise, **kw)
    got = census_topdown_covariances(mech, spine, strategy.n_cells)
    assert np.allclose(got, _dense_covariances(mech, spine, strategy), rtol=1e-8, atol=1e-10)


def test_wls_intervals_in_the_frame_and_refusals():
    spine = _spine()
    strategy = QueryStrategy.marginals((2, 2))
    counts = np.random.default_rng(0).integers(50, 90, (spine.n_blocks, strategy.n_cells))
    mech = create("census_topdown", rho=0.7, strategy=strategy)
    rel = mech.release(SpineHistograms(spine, counts), seed=0)
    f = rel.intervals(0.9, method="wls", mechanism=mech, domain=spine)
    assert f.attrs["intervals"]["method"] == "wls" and f.attrs["intervals"]["kind"] == "estimate"
    assert (f["lower"] <= f["value"]).all() and (f["value"] <= f["upper"]).all()
    with pytest.raises(IntervalsUnsupported, match="mechanism="):
        rel.intervals(0.9, method="wls")


def test_wls_refuses_histograms_too_large_for_dense_covariances():
    from hierdp.intervals.census import MAX_WLS_CELLS

    strategy = QueryStrategy((2, MAX_WLS_CELLS // 2 + 1), {"total": (), "detailed": (0, 1)},
                             {"total": Fraction(1, 2), "detailed": Fraction(1, 2)})
    mech = create("census_topdown", rho=0.7, strategy=strategy)
    with pytest.raises(IntervalsUnsupported, match="use the bootstrap"):
        census_topdown_covariances(mech, _spine(), strategy.n_cells)
