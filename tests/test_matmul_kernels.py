"""2-D float matmuls on the private BLAS, split over the helper thread
(``samediff.kernels.matmul``): the same products as a float64 reference for every operand
layout, numpy's ``matmul`` for everything else, and the ``matmul`` op going through it."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.kernels import blas
from samediff.kernels import matmul as M

pytestmark = pytest.mark.skipif(not blas.available(), reason=blas.why_not() or "no private BLAS")
RNG = np.random.default_rng(7)


def _layouts(x: np.ndarray):
    yield "C", x
    yield "F", np.asfortranarray(x)
    yield "row slice", np.ascontiguousarray(np.concatenate([x, x]))[: x.shape[0]]
    yield "column slice", np.ascontiguousarray(np.concatenate([x, x], 1))[:, : x.shape[1]]
    yield "reversed rows", np.ascontiguousarray(x[::-1])[::-1]
    yield "every other column", np.repeat(x, 2, axis=1)[:, ::2]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(96, 80, 64), (300, 40, 30), (5, 300, 400)])
@pytest.mark.parametrize("split", [True, False])
def test_every_layout_matches_a_float64_reference(monkeypatch, dtype, m, k, n, split):
    monkeypatch.setattr(M, "MIN_MNK", 1)
    monkeypatch.setattr(M, "SPLIT_MIN_MNK", 1 if split else 1 << 60)
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for (la, va), (lb, vb) in zip(_layouts(a), list(_layouts(b))[::-1]):
        got = M.matmul2d(va, vb)
        assert got is not None and got.dtype == dtype and got.flags.c_contiguous, (la, lb)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(),
                                   err_msg=f"{la} @ {lb}")


def test_broadcast_operands_are_copied_not_misread(monkeypatch):
    monkeypatch.setattr(M, "MIN_MNK", 1)
    row = RNG.standard_normal(64)
    a = np.broadcast_to(row, (50, 64))  # stride 0 along the rows
    b = RNG.standard_normal((64, 30))
    np.testing.assert_allclose(M.matmul2d(a, b), np.asarray(a) @ b, rtol=1e-12)
    col = np.broadcast_to(RNG.standard_normal((64, 1)), (64, 30))
    np.testing.assert_allclose(M.matmul2d(b.T.copy(), col), b.T @ np.asarray(col), rtol=1e-12)


@pytest.mark.parametrize("a, b", [
    (np.ones((4, 4)), np.ones((4, 4))),                                     # small: numpy
    (np.ones((100, 100), np.float32), np.ones((100, 100))),                 # mixed dtypes
    (np.ones((100, 100), np.int64), np.ones((100, 100), np.int64)),         # integers
    (np.ones((100, 100), np.complex128), np.ones((100, 100), np.complex128)),
    (np.ones((2, 100, 100)), np.ones((2, 100, 100))),                       # batched
    (np.ones(100), np.ones((100, 3000))),                                   # 1-D
])
def test_everything_else_is_left_to_numpy(a, b):
    assert M.matmul2d(a, b) is None


def test_the_matmul_op_goes_through_it(monkeypatch):
    calls = []
    real = M._part

    def counting(*args):
        calls.append(args[3])
        return real(*args)
    monkeypatch.setattr(M, "_part", counting)
    a = RNG.standard_normal((256, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 64)).astype(np.float32)
    got = nd.matmul(nd.create(a), nd.create(b)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert len(calls) == 2  # split by size alone, helper or not (same results either way)
    assert calls[0] is True  # a [256, 300] is bigger than b [300, 64]: the rows split


def test_strides_in_bytes_that_are_no_whole_element_are_copied(monkeypatch):
    """A field of a structured array steps by the record's size: no BLAS leading dimension
    counts that, so the operand is copied (it read garbage before)."""
    monkeypatch.setattr(M, "MIN_MNK", 1)
    rec = np.zeros((40, 30), dtype=[("a", np.float64), ("b", np.int32)])
    rec["a"] = RNG.standard_normal((40, 30))
    a = rec["a"]
    assert a.strides[0] % a.itemsize or a.strides[1] % a.itemsize
    b = RNG.standard_normal((30, 20))
    np.testing.assert_allclose(M.matmul2d(a, b), np.ascontiguousarray(a) @ b, rtol=1e-12)
    np.testing.assert_allclose(nd.matmul(nd.create(a), nd.create(b)).numpy(),
                               np.ascontiguousarray(a) @ b, rtol=1e-12)
