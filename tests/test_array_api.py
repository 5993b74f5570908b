"""The array API namespace (``nd4py.array_api``, issue 11): it is what ``__array_namespace__``
returns, its functions agree with numpy eagerly, they record inside ``graph_scope`` and
``@nd.compile`` (they end in ``bind``), promotion follows the standard (Python scalars weak),
the array object has the standard's attributes, and data-dependent functions refuse to trace.

The conformance suite (array-api-tests) is run by hand, not here; see nd4py/array_api."""
from __future__ import annotations

import math

import numpy as np
import pytest

import nd4py as nd
import nd4py.array_api as xp
from samediff import SameDiff
from samediff.errors import TracingError
from tracing import LazyArray

A = np.array([[1.5, -2.0, 0.5], [3.0, 4.0, -0.25]])
I = np.array([[3, -1, 7], [2, 2, -5]], dtype=np.int32)


def test_namespace_is_the_module_for_every_array_kind():
    x = xp.asarray(A)
    assert x.__array_namespace__() is xp and nd.create(A).__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="2099.01"):
        x.__array_namespace__(api_version="2099.01")
    with nd.graph_scope():
        assert (x + 1).__array_namespace__() is xp
    assert xp.__array_api_version__ == "2024.12"
    assert (xp.e, xp.pi, xp.inf, xp.newaxis) == (math.e, math.pi, math.inf, None)
    assert math.isnan(xp.nan)
    assert xp.complex64 == np.complex64 and xp.complex128 == np.complex128
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == xp.float64
    assert set(info.dtypes(kind="integral").values()) == {xp.int8, xp.int16, xp.int32,
                                                          xp.int64, xp.uint8, xp.uint16,
                                                          xp.uint32, xp.uint64}


ELEMENTWISE = [
    ("exp", np.exp), ("log1p", lambda a: np.log1p(np.abs(a))), ("tanh", np.tanh),
    ("negative", np.negative), ("trunc", np.trunc), ("round", np.round),
    ("log10", lambda a: np.log10(np.abs(a))), ("asinh", np.arcsinh), ("sign", np.sign),
    ("signbit", np.signbit),
]


@pytest.mark.parametrize("name,ref", ELEMENTWISE, ids=[n for n, _ in ELEMENTWISE])
def test_unary_elementwise_agrees_with_numpy(name, ref):
    data = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.7])
    x = xp.asarray(np.abs(data) if name in ("log1p", "log10") else data)
    np.testing.assert_allclose(np.asarray(getattr(xp, name)(x)), ref(np.asarray(x)), rtol=1e-12)


def test_binary_elementwise_and_special_functions():
    a, b = xp.asarray(A), xp.asarray(A[::-1].copy())
    np.testing.assert_allclose(np.asarray(xp.hypot(a, b)), np.hypot(A, A[::-1]))
    np.testing.assert_allclose(np.asarray(xp.logaddexp(a, b)), np.logaddexp(A, A[::-1]))
    np.testing.assert_allclose(np.asarray(xp.copysign(a, b)), np.copysign(A, A[::-1]))
    np.testing.assert_array_equal(np.asarray(xp.remainder(xp.asarray(I), 3)), I % 3)
    np.testing.assert_array_equal(np.asarray(xp.clip(a, -1.0, 1.0)), np.clip(A, -1, 1))
    np.testing.assert_array_equal(np.asarray(xp.bitwise_and(xp.asarray(I), 6)), I & 6)
    np.testing.assert_array_equal(np.asarray(xp.floor_divide(xp.asarray(I), 2)), I // 2)
    q = xp.floor_divide(xp.asarray([math.inf, 1.0, -1.0]), xp.asarray([2.0, -math.inf, math.inf]))
    assert q.tolist() == [math.inf, -0.0, -0.0] and math.copysign(1, q[1].item()) == -1


def test_statistics_searching_and_manipulation_agree_with_numpy():
    x, i = xp.asarray(A), xp.asarray(I)
    np.testing.assert_allclose(np.asarray(xp.mean(x, axis=1, keepdims=True)),
                               A.mean(axis=1, keepdims=True))
    np.testing.assert_allclose(np.asarray(xp.std(x, correction=1)), A.std(ddof=1))
    np.testing.assert_allclose(np.asarray(xp.var(x, axis=1, correction=2)), A.var(axis=1, ddof=2))
    assert xp.sum(i).dtype == xp.int64 and xp.sum(i, dtype=xp.int32).dtype == xp.int32
    np.testing.assert_array_equal(np.asarray(xp.cumulative_sum(i, axis=1, include_initial=True)),
                                  np.concatenate([np.zeros((2, 1), int), I.cumsum(1)], 1))
    assert int(xp.argmax(x)) == int(np.argmax(A))
    np.testing.assert_array_equal(np.asarray(xp.argmin(x, axis=0)), A.argmin(axis=0))
    np.testing.assert_array_equal(np.asarray(xp.permute_dims(x, (1, 0))), A.T)
    np.testing.assert_array_equal(np.asarray(xp.roll(x, 1, axis=1)), np.roll(A, 1, axis=1))
    np.testing.assert_array_equal(np.asarray(xp.roll(x, -2)), np.roll(A, -2))
    np.testing.assert_array_equal(np.asarray(xp.moveaxis(xp.ones((2, 3, 4)), 0, -1)).shape,
                                  (3, 4, 2))
    np.testing.assert_array_equal(np.asarray(xp.concat([x, x], axis=None)),
                                  np.concatenate([A, A], axis=None))
    np.testing.assert_array_equal(np.asarray(xp.tile(x, (2,))), np.tile(A, (2,)))
    np.testing.assert_array_equal(np.asarray(xp.repeat(x, 2, axis=1)), np.repeat(A, 2, axis=1))
    np.testing.assert_array_equal(np.asarray(xp.flip(x)), np.flip(A))
    np.testing.assert_array_equal(np.asarray(xp.tril(x, k=1)), np.tril(A, 1))
    np.testing.assert_array_equal(np.asarray(xp.triu(x)), np.triu(A))
    gx, gy = xp.meshgrid(xp.arange(3), xp.arange(2))
    rx, ry = np.meshgrid(np.arange(3), np.arange(2))
    np.testing.assert_array_equal(np.asarray(gx), rx)
    np.testing.assert_array_equal(np.asarray(gy), ry)
    np.testing.assert_allclose(np.asarray(xp.vecdot(x, x)), (A * A).sum(-1))
    np.testing.assert_allclose(np.asarray(xp.tensordot(x, x.mT, axes=1)), A @ A.T)
    np.testing.assert_allclose(np.asarray(xp.linalg.vector_norm(x, ord=3)),
                               np.linalg.vector_norm(A, ord=3))
    np.testing.assert_array_equal(np.asarray(xp.linspace(0, 1, 4, endpoint=False)),
                                  np.linspace(0, 1, 4, endpoint=False))
    np.testing.assert_array_equal(np.asarray(xp.eye(3, 4, k=1)), np.eye(3, 4, 1))


def test_functions_record_inside_graph_scope():
    x = xp.asarray(A)
    with nd.graph_scope():
        y = xp.sum(xp.round(xp.tril(x)) * 2, axis=0) + xp.std(x)
        z = xp.matrix_transpose(xp.roll(x, 1, axis=1))
        assert isinstance(y, LazyArray) and not y.is_materialized
        assert y.__array_namespace__() is xp and y.device == "cpu"
    np.testing.assert_allclose(y.numpy(), (np.round(np.tril(A)) * 2).sum(0) + A.std())
    np.testing.assert_array_equal(z.numpy(), np.roll(A, 1, axis=1).T)


def test_functions_compile_once():
    @nd.compile
    def f(a):
        return xp.where(a > 0, xp.exp(a), xp.zeros_like(a)) + xp.mean(a, axis=1, keepdims=True)

    for k in range(3):
        out = f(xp.asarray(A - k))
        ref = np.where(A - k > 0, np.exp(A - k), 0) + (A - k).mean(1, keepdims=True)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    assert f.traces == 1


def test_functions_record_into_a_samediff_graph():
    sd = SameDiff.create()
    v = sd.var("v", nd.create(A))
    out = xp.sum(xp.square(v), axis=1)
    np.testing.assert_allclose(out.eval().numpy(), (A ** 2).sum(1))


def test_data_dependent_functions_run_eagerly_and_refuse_to_trace():
    x = xp.asarray(np.array([0, 3, 0, 5]))
    (idx,) = xp.nonzero(x)
    assert idx.tolist() == [1, 3]
    assert xp.unique_counts(x).counts.tolist() == [2, 1, 1]
    assert xp.sort(x, descending=True).tolist() == [5, 3, 0, 0]
    with nd.graph_scope():
        with pytest.raises(TracingError, match="nonzero"):
            xp.nonzero(x + 1)
        with pytest.raises(TracingError, match="&"):
            (x + 1) & 2


@pytest.mark.parametrize("args,want", [
    ((xp.int8, xp.uint8), xp.int16), ((xp.uint8, xp.uint16), xp.uint16),
    ((xp.float32, xp.float64), xp.float64), ((xp.int32, 1), xp.int32),
    ((xp.float32, 1.5), xp.float32), ((xp.bool, True), xp.bool),
    ((xp.int16, xp.int8, xp.int32), xp.int32),
])
def test_result_type(args, want):
    assert xp.result_type(*args) == want


def test_promotion_of_operators_and_functions():
    i8, u8 = xp.asarray([1, 2], dtype=xp.int8), xp.asarray([1, 2], dtype=xp.uint8)
    f32 = xp.asarray([1.0, 2.0], dtype=xp.float32)
    assert (i8 + u8).dtype == xp.int16 and xp.add(i8, 1).dtype == xp.int8
    assert (f32 * 2.5).dtype == xp.float32 and (2 ** f32).dtype == xp.float32
    assert xp.concat([i8, u8]).dtype == xp.int16
    for bad in ((xp.int8, xp.float32), (xp.int64, xp.uint64), (xp.bool, xp.int8), (xp.int8, 1.5)):
        with pytest.raises(TypeError):
            xp.result_type(*bad)
    assert xp.can_cast(xp.int8, xp.int64) and not xp.can_cast(xp.int64, xp.int8)
    assert xp.isdtype(xp.int8, ("real floating", "signed integer"))
    assert not xp.isdtype(xp.uint8, "signed integer") and xp.isdtype(xp.float32, xp.float32)
    assert xp.finfo(xp.float32).eps == float(np.finfo(np.float32).eps)
    assert xp.iinfo(xp.int8).min == -128 and xp.iinfo(u8).max == 255
    assert xp.astype(i8, xp.float64).dtype == xp.float64 and xp.astype(i8, xp.int8, copy=False) is i8


def test_creation_defaults_and_complex():
    assert xp.asarray([1.0, 2.0]).dtype == xp.float64 and xp.asarray([1, 2]).dtype == xp.int64
    assert xp.asarray(True).dtype == xp.bool and xp.full((2,), 3).dtype == xp.int64
    assert xp.full((2,), False).dtype == xp.bool and xp.arange(5).dtype == xp.int64
    assert xp.arange(0.0, 1.0, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert xp.zeros((2, 3), dtype=xp.int32).dtype == xp.int32 and xp.empty(3).tolist() == [0.0] * 3
    assert xp.asarray([1j]).dtype == xp.complex128 and xp.full((2,), 1j).dtype == xp.complex128
    assert xp.linspace(0, 1j, 3).tolist() == [0j, 0.5j, 1j]
    assert xp.result_type(xp.float32, xp.complex64, 1j) == xp.complex64
    assert xp.result_type(xp.float64, xp.complex64) == xp.complex128
    with pytest.raises(TypeError, match="does not promote"):
        xp.result_type(xp.int32, xp.complex64)
    assert xp.finfo(xp.complex64).dtype == xp.float32
    assert xp.__array_namespace_info__().default_dtypes()["complex floating"] == xp.complex128
    with pytest.raises(ValueError):
        xp.asarray([1.0], copy=False)


def test_array_object_attributes_and_zero_d_conversions():
    x = xp.asarray(np.arange(24.0).reshape(2, 3, 4))
    assert x.ndim == 3 and x.shape == (2, 3, 4) and x.size == 24 and x.device == "cpu"
    assert x.mT.shape == (2, 4, 3) and x.T.shape == (4, 3, 2) and x.to_device("cpu") is x
    with pytest.raises(ValueError):
        x.to_device("gpu")
    s = xp.sum(xp.asarray([1, 2]))
    assert bool(s) is True and int(s) == 3 and float(s) == 3.0 and [0, 1, 2, 3][s] == 3
    assert float(xp.asarray(2.5)) == 2.5 and not bool(xp.asarray(0.0))
    with pytest.raises(TypeError):
        [0, 1][xp.asarray(1.0)]
    assert (+x).tolist() == x.tolist() and (-x)[0, 0, 1].item() == -1.0
    i = xp.asarray([1, 2, 3])
    assert (i << 1).tolist() == [2, 4, 6] and (i >> 1).tolist() == [0, 1, 1]
    assert (i & 2).tolist() == [0, 2, 2] and (~i).tolist() == [-2, -3, -4]
    y = xp.asarray([1.0, 2.0])
    y += 1
    y *= 2
    assert y.tolist() == [4.0, 6.0] and (3 - y).tolist() == [-1.0, -3.0]
    assert x[xp.newaxis, ..., 0].shape == (1, 2, 3)
