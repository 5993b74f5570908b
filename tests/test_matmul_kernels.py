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


def _spy(monkeypatch, name: str, record) -> None:
    """Replace the per-dtype kernel ``M.<name>`` by one whose calls ``record(args)`` sees."""
    real = getattr(M, name)

    class Spy:
        def __getitem__(self, dtype):
            run = real[dtype]
            return lambda *args: (record(args), run(*args))[1]
    monkeypatch.setattr(M, name, Spy())


def test_the_matmul_op_goes_through_it(monkeypatch):
    calls = []
    _spy(monkeypatch, "_slices", lambda args: calls.append(args[6].shape))
    a = RNG.standard_normal((256, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 64)).astype(np.float32)
    got = nd.matmul(nd.create(a), nd.create(b)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert len(calls) == 2  # split by size alone, helper or not (same results either way)
    # a [256, 300] is bigger than b [300, 64]: the rows split, one product of 128 rows a half
    assert calls == [(1, 128, 64), (1, 128, 64)]


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


# --- batched products (stacks of matrices: ``M.batched``) ------------------------------------

def _batched_cases(dtype):
    """(name, a, b): broadcast batch dims, transposed and strided views, a broadcast operand,
    a matrix against a stack, an empty batch."""
    r = lambda *shape: RNG.standard_normal(shape).astype(dtype)  # noqa: E731
    yield "broadcast batch dims", r(3, 1, 9, 7), r(4, 7, 6)
    yield "matrix @ stack", r(9, 7), r(2, 7, 6)
    yield "stack @ matrix (rows merge)", r(2, 3, 9, 7), r(7, 6)
    yield "transposed stack @ matrix", np.swapaxes(r(2, 7, 9), -1, -2), r(7, 6)
    yield "every other row @ matrix (rows merge)", r(2, 18, 7)[:, ::2], r(7, 6)
    yield "row slices @ matrix (no merge)", r(2, 10, 7)[:, :9], r(7, 6)
    yield "stack @ transposed stack", r(4, 9, 7), np.swapaxes(r(4, 6, 7), -1, -2)
    yield "every other slice", r(8, 9, 7)[::2], r(4, 7, 6)
    yield "every other column", r(3, 9, 14)[..., ::2], r(3, 7, 6)
    yield "reversed batch", r(3, 9, 7)[::-1], r(3, 7, 6)
    yield "broadcast operand", np.broadcast_to(r(9, 7), (5, 9, 7)), r(5, 7, 6)
    yield ("heads of [B, S, H, D] @ their transposes", r(2, 9, 3, 7).transpose(0, 2, 1, 3),
           r(2, 6, 3, 7).transpose(0, 2, 3, 1))
    yield ("column-major strided heads @ heads", r(2, 7, 3, 9).transpose(0, 2, 3, 1),
           r(2, 6, 3, 7).transpose(0, 2, 3, 1))
    yield "empty batch", r(0, 9, 7), r(7, 6)
    yield "empty broadcast batch", r(0, 1, 9, 7), r(3, 7, 6)


DOUBLE_CASES = ("broadcast batch dims", "stack @ transposed stack", "empty batch")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products_equal_numpy_on_every_layout(monkeypatch, dtype):
    monkeypatch.setattr(M, "MIN_MNK", 1)
    monkeypatch.setattr(M, "SPLIT_MIN_MNK", 1)
    calls = []
    _spy(monkeypatch, "_slices", lambda args: calls.append(args[8] - args[7]))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    cases = list(_batched_cases(dtype))
    if dtype == np.float64:  # the layouts are float32's: float64 checks the dtype (compiles
        cases = [c for c in cases if c[0] in DOUBLE_CASES]  # cost ~0.5 s per layout pair)
    for name, a, b in cases:
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        got = M.batched(a, b)
        assert got is not None and got.dtype == dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(np.abs(want).max(
            initial=0), 1), err_msg=name)
    assert len(calls) >= len(cases) - 3 and sum(calls) > 0  # they ran on the private BLAS


def test_batched_operands_are_read_where_they_lie():
    """Permuted attention heads (``[B, S, H, D]`` viewed as ``[B, H, S, D]``, whose batch dims
    do not merge) are not copied into a stack: the products read them by offsets."""
    a = RNG.standard_normal((2, 9, 3, 7)).astype(np.float32).transpose(0, 2, 1, 3)
    flat, offsets, geometry = M._stack(a, (2, 3))
    assert np.shares_memory(flat, a) and geometry == (9, 7, 21, 1)
    assert offsets.tolist() == [b * 189 + h * 7 for b in range(2) for h in range(3)]


def test_batched_results_are_bit_identical_with_or_without_the_helper(monkeypatch):
    monkeypatch.setattr(M, "MIN_MNK", 1)
    monkeypatch.setattr(M, "SPLIT_MIN_MNK", 1)
    from samediff.kernels import workers
    a = RNG.standard_normal((5, 2, 33, 47)).astype(np.float32)
    b = np.swapaxes(RNG.standard_normal((2, 29, 47)).astype(np.float32), -1, -2)
    split = M.batched(a, b)
    monkeypatch.setattr(workers, "_ENABLED", False)
    alone = M.batched(a, b)
    assert split.tobytes() == alone.tobytes()


@pytest.mark.parametrize("a, b", [
    (np.ones((2, 4, 4)), np.ones((2, 4, 4))),                                # small: numpy
    (np.ones((2, 100, 100), np.float32), np.ones((2, 100, 100))),            # mixed dtypes
    (np.ones((2, 100, 100), np.int64), np.ones((2, 100, 100), np.int64)),    # integers
    (np.ones((2, 100, 100), np.complex64), np.ones((2, 100, 100), np.complex64)),
    (np.ones((2, 100, 100)), np.ones(100)),                                  # 1-D
    (np.ones((2, 100, 100)), np.ones((3, 100, 100))),                        # no broadcast
])
def test_other_stacks_are_left_to_numpy(a, b):
    assert M.batched(a, b) is None


def test_the_matmul_op_and_its_gradients_run_batched(monkeypatch):
    """Attention's shapes, scaled down: the forward product and both gradient products (the
    transposes folded into views) run as stacks, and match numpy's."""
    monkeypatch.setattr(M, "MIN_MNK", 1)
    calls = []
    _spy(monkeypatch, "_slices", lambda args: calls.append(args[0].shape))
    q = RNG.standard_normal((2, 3, 16, 8))
    k = RNG.standard_normal((2, 3, 16, 8))
    got = nd.matmul(nd.create(q), nd.create(k), transpose_y=True).numpy()
    np.testing.assert_allclose(got, q @ np.swapaxes(k, -1, -2), rtol=1e-12)
    assert calls
    calls.clear()
    gq = nd.grad(lambda q, k: nd.matmul(q, k, transpose_y=True).sum())(nd.create(q),
                                                                        nd.create(k))
    np.testing.assert_allclose(np.asarray(gq), np.broadcast_to(k.sum(-2, keepdims=True),
                                                               q.shape), rtol=1e-12)
    assert calls  # the gradient products went through the stacks too


def test_big_products_take_the_private_split_unmeasured(monkeypatch):
    """From ``PRIVATE_MIN_MNK`` a 2-D product is split on the private BLAS without a
    measurement (numpy's threads would spin into the plan's next split kernels), and
    ``explain()`` says why."""
    monkeypatch.delenv("ND4PY_BLAS", raising=False)  # (the suite forces the private route)
    monkeypatch.setattr(M, "PRIVATE_MIN_MNK", 1 << 20)
    monkeypatch.setattr(M, "_ROUTE", {})
    measured = []
    monkeypatch.setattr(M.CHOOSER, "measure", lambda *a, **k: measured.append(a))
    a = RNG.standard_normal((256, 128)).astype(np.float32)
    b = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(M.matmul2d(a, b), a.astype(np.float64) @ b, rtol=1e-4,
                               atol=1e-4 * 128)
    assert not measured
    assert M.describe_route(a.shape, b.shape, np.float32).startswith(
        "private: from PRIVATE_MIN_MNK")


def test_while_numpys_threads_spin_one_thread_is_no_candidate_and_nothing_is_saved(
        monkeypatch):
    """A split timed while numpy's pool still spins (within ``NUMPY_SPIN_S`` of a product
    left to it) shares the helper's core with it: ``in_turn`` would win for that reason
    alone, and the decision would stick on disk."""
    monkeypatch.delenv("ND4PY_BLAS", raising=False)
    monkeypatch.setattr(M, "_ROUTE", {})
    monkeypatch.setattr(M.CHOOSER, "_memory", {})
    monkeypatch.setattr(M.CHOOSER, "persist", False)
    monkeypatch.setattr(M.compiling, "pending", lambda: False)
    seen = []
    real = M.CHOOSER.measure

    def spy(cls, runs, shape="", unsettled=""):
        seen.append((sorted(runs), unsettled))
        return real(cls, runs, shape, unsettled)
    monkeypatch.setattr(M.CHOOSER, "measure", spy)
    a = RNG.standard_normal((512, 256)).astype(np.float32)
    b = RNG.standard_normal((256, 256)).astype(np.float32)
    monkeypatch.setattr(M, "_numpy_woke", float("-inf"))
    M.matmul2d(a, b)  # quiet: all three routes
    assert seen[-1] == (["in_turn", "numpy", "private"], "")
    assert M._numpy_spinning()  # numpy was timed last
    M.CHOOSER._memory.clear()
    M._ROUTE.clear()
    M.matmul2d(a, b)
    assert seen[-1] == (["numpy", "private"], "numpy's threads spinning")
    decision = next(iter(M.CHOOSER._memory.values()))
    assert "not saved" in decision.why


def test_the_linear_op_goes_through_it(monkeypatch):
    """``linear`` (``x @ w + b``) takes the matmul op's routes, not numpy's GEMM directly."""
    calls = []
    _spy(monkeypatch, "_slices", lambda args: calls.append(1))
    monkeypatch.setattr(M, "PRIVATE_MIN_MNK", 1 << 18)
    x = RNG.standard_normal((4, 64, 256)).astype(np.float32)
    w = RNG.standard_normal((256, 64)).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    got = nd.nn.linear(nd.create(x), nd.create(w), nd.create(b)).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64) @ w + b, rtol=1e-4, atol=1e-3)
    assert calls


@pytest.mark.parametrize("m, k, n", [(600, 64, 48), (48, 64, 600)])  # rows / columns split
@pytest.mark.parametrize("route", ["private", "in_turn", "numpy"])
def test_a_bias_added_by_the_halves_gives_the_bits_of_adding_it_after(monkeypatch, m, k, n,
                                                                        route):
    """``matmul(..., bias=)``: each half adds the bias to the rows (columns) it wrote, on its
    own thread; the bits are those of the product plus the bias, on every route."""
    monkeypatch.setenv("ND4PY_BLAS", route)
    monkeypatch.setattr(M, "_numpy_woke", M._numpy_woke)  # (numpy's route sets it: restored)
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    for bias in (RNG.standard_normal(n).astype(np.float32),
                 RNG.standard_normal((1, n)).astype(np.float32)):
        whole = M.matmul(a, b)
        whole += bias
        got = M.matmul(a, b, bias=bias)
        assert got.shape == (m, n) and got.tobytes() == whole.tobytes(), route


def test_a_caller_whose_split_kernels_follow_keeps_numpys_pool_asleep(monkeypatch):
    """``keep_numpy_asleep`` (the LSTM layer's products): the private split, unmeasured, for a
    product whose class would be measured (and might choose numpy's threads)."""
    monkeypatch.delenv("ND4PY_BLAS", raising=False)
    monkeypatch.setattr(M, "_ROUTE", {})
    monkeypatch.setattr(M.CHOOSER, "_memory", {})
    monkeypatch.setattr(M.CHOOSER, "persist", False)
    monkeypatch.setattr(M.CHOOSER, "measure", lambda *a, **k: pytest.fail("measured"))
    calls = []
    _spy(monkeypatch, "_slices", lambda args: calls.append(1))
    a = RNG.standard_normal((512, 256)).astype(np.float32)
    b = RNG.standard_normal((256, 256)).astype(np.float32)
    assert 512 * 256 * 256 < M.PRIVATE_MIN_MNK
    got = M.matmul(a, b, keep_numpy_asleep=True)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert len(calls) == 2 and not M._ROUTE  # two halves; no route decided for the class
