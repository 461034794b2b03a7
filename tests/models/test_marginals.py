"""Marginal query groups (hierdp.models.marginals) against dense matrices built here, independently:
Kronecker products of identities, rows of ones and recode matrices, their normal matrices, numpy's
dense solve and eigenvalues."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.models.marginals import MarginalQueries


def _recode(labels):
    m = max(labels) + 1
    r = np.zeros((m, len(labels)))
    r[labels, np.arange(len(labels))] = 1.0
    return r


def _dense(shape, labels):
    mat = np.ones((1, 1))
    for _n, lab in zip(shape, labels, strict=True):
        mat = np.kron(mat, _recode(list(lab)))
    return mat


@st.composite
def _strategy(draw):
    d = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(d))
    groups = []
    for _ in range(draw(st.integers(1, 4))):
        per = []
        for n in shape:
            kind = draw(st.sampled_from(["keep", "sum", "recode"]))
            if kind == "keep":
                per.append(list(range(n)))
            elif kind == "sum":
                per.append([0] * n)
            else:
                raw = [draw(st.integers(0, n - 1)) for _ in range(n)]
                _, lab = np.unique(raw, return_inverse=True)  # relabel 0..m-1, each used
                per.append(lab.tolist())
        groups.append(per)
    return shape, groups


@settings(max_examples=60, deadline=None)
@given(_strategy(), st.integers(0, 2**31 - 1))
def test_answers_spread_and_normal_matrices_equal_the_dense_kronecker_products(spec, seed):
    shape, groups = spec
    mq = MarginalQueries(shape, groups).with_detailed()
    rng = np.random.default_rng(seed)
    K = int(np.prod(shape))
    x = rng.normal(size=(3, K))
    dense = [np.eye(K)] + [_dense(shape, g) for g in groups]
    for q, mat in enumerate(dense):
        np.testing.assert_allclose(mq.matrix(q), mat)
        np.testing.assert_allclose(mq.answer(q, x), x @ mat.T, atol=1e-12)
        y = rng.normal(size=(3, mat.shape[0]))
        np.testing.assert_allclose(mq.spread(q, y), y @ mat, atol=1e-12)
        assert np.array_equal(mq.cell_answer(q), mat.argmax(0))
    w = rng.uniform(0.1, 3.0, (3, mq.n_groups))
    H = [sum(w[c, q] * m.T @ m for q, m in enumerate(dense)) for c in range(3)]
    np.testing.assert_allclose(mq.gram_apply(w, x), np.stack([H[c] @ x[c] for c in range(3)]), atol=1e-10)
    # the structured inverse against a dense solve (H is positive definite: the detailed group is in)
    want = np.stack([np.linalg.solve(H[c], x[c]) for c in range(3)])
    np.testing.assert_allclose(mq.solve_gram(w, x), want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    lo, hi = mq.eigenvalue_range(w)
    ev = [np.linalg.eigvalsh(h) for h in H]
    np.testing.assert_allclose(lo, [e[0] for e in ev], rtol=1e-9)
    np.testing.assert_allclose(hi, [e[-1] for e in ev], rtol=1e-9)


def test_pl94_shape_structure_at_2016_cells():
    """The PL94 groups (with the hhinstlevels recode): the structured inverse of one child's
    2,016 x 2,016 normal matrix equals a dense solve."""
    rng = np.random.default_rng(3)
    ident, zeros = (lambda n: np.arange(n)), (lambda n: np.zeros(n, int))
    inst = [0, 1, 1, 1, 1, 2, 2, 2]
    groups = [[zeros(8), zeros(2), zeros(2), zeros(63)], [inst, zeros(2), zeros(2), zeros(63)],
              [zeros(8), ident(2), ident(2), ident(63)], [ident(8), zeros(2), zeros(2), zeros(63)]]
    mq = MarginalQueries((8, 2, 2, 63), groups).with_detailed()
    w = rng.uniform(0.01, 5.0, mq.n_groups)
    H = sum(w[q] * mq.matrix(q).T @ mq.matrix(q) for q in range(mq.n_groups))
    x = rng.normal(size=(1, 2016))
    np.testing.assert_allclose(mq.solve_gram(w, x)[0], np.linalg.solve(H, x[0]), rtol=1e-9, atol=1e-12)


def test_integer_answers_stay_integers_and_full_rank_is_detected():
    mq = MarginalQueries.from_kept((2, 3), [(), (0,), (1,)])
    h = np.arange(12, dtype=np.int64).reshape(2, 6)
    for q in range(3):
        a = mq.answer(q, h)
        assert a.dtype == np.int64
        assert np.array_equal(a, h @ mq.matrix(q).T.astype(np.int64))
    assert not mq.determines_cells()  # total and both one-way margins: 1 + 2 + 3 rows, rank 4 < 6
    assert mq.with_detailed().determines_cells()
    with pytest.raises(ValueError, match="labels"):
        MarginalQueries((3,), [[[0, 2, 2]]])
