"""The eager ``NDArray`` API: operators, ND4J methods, views, zero copy, creation, dtypes, namespaces."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import nd4py as nd
from nd4py import NDArray, NdDTypeError, OpError
from samediff.ops import REGISTRY
from samediff.frontends import ND4J, names_to_ops

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)


@pytest.fixture
def x() -> NDArray:
    return nd.create(X.copy())


def check(result, expected, dtype=None) -> None:
    assert isinstance(result, NDArray)
    expected = np.asarray(expected)
    assert result.shape == expected.shape
    assert result.dtype == (expected.dtype if dtype is None else np.dtype(dtype))
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


# -- operators -------------------------------------------------------------------------------

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary_operators_match_numpy(x, op):
    other = np.array([[2.0, 3.0, 4.0], [1.0, 2.0, 5.0]], np.float32)
    check(op(x, nd.create(other)), op(X, other))
    check(op(x, 2), op(X, np.float32(2)), np.float32)          # Python scalar on the right
    check(op(3.0, x), op(np.float32(3), X), np.float32)        # ... and on the left (reflected)
    check(op(other, x), op(other, X))                          # numpy array on the left


def test_numpy_array_on_the_left_returns_ndarray(x):
    a = np.ones((2, 3), np.float32)
    for result in (a + x, a - x, a * x, a / x, a // x, a % x, a ** x, a > x, a == x, a @ x.T):
        assert isinstance(result, NDArray)
    check(a - x, 1 - X)
    r = np.ones((3, 2), np.float32) @ x
    assert isinstance(r, NDArray)
    check(r, np.ones((3, 2), np.float32) @ X)


def test_matmul_operator_and_mmul(x):
    check(x @ x.T, X @ X.T)
    check(x.mmul(x.T), X @ X.T)
    check(x.mmul(x, transpose_y=True), X @ X.T)


def test_unary_operators(x):
    check(-x, -X)
    check(abs(-x), X)
    assert (-x).dtype == np.float32


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge,
                                operator.eq, operator.ne], ids=lambda f: f.__name__)
def test_comparisons_give_bool(x, op):
    check(op(x, 3), op(X, 3), np.bool_)
    check(op(x, nd.create(X[::-1].copy())), op(X, X[::-1]), np.bool_)


def test_logical_operators_on_bools():
    a, b = [True, False, True, False], [True, True, False, False]
    na, nb = np.array(a), np.array(b)
    x, y = nd.create(a), nd.create(b)
    check(x & y, na & nb, np.bool_)
    check(x | y, na | nb, np.bool_)
    check(x ^ y, na ^ nb, np.bool_)
    check(~x, ~na, np.bool_)
    check(na & y, na & nb, np.bool_)          # reflected with a numpy array
    check(True ^ x, True ^ na, np.bool_)      # reflected with a Python bool


def test_weak_scalar_promotion():
    f32 = nd.create([1.0, 2.0], dtype=nd.FLOAT)
    assert (f32 * 2.0).dtype == np.float32
    assert (2.0 * f32).dtype == np.float32
    assert (f32 + 1).dtype == np.float32
    i32 = nd.create([1, 2], dtype=nd.INT)
    assert (i32 + 1).dtype == np.int32
    assert (1 - i32).dtype == np.int32
    h = nd.create([1.0], dtype=nd.HALF)
    assert (h * 3.0).dtype == np.float16
    # arrays are never weak: float32 + float64 array promotes
    assert (f32 + np.ones(2)).dtype == np.float64


# -- in-place ----------------------------------------------------------------------------------

def test_augmented_assignment_mutates_buffer(x):
    buf = x.numpy()
    alias = x
    x += 1
    assert x is alias and x.numpy() is buf
    x *= 2
    x -= 1
    x /= 3
    np.testing.assert_allclose(buf, ((X + 1) * 2 - 1) / 3, rtol=1e-6)
    x **= 2
    np.testing.assert_allclose(buf, (((X + 1) * 2 - 1) / 3) ** 2, rtol=1e-6)


@pytest.mark.parametrize("name,expected", [
    ("add", X + 2), ("sub", X - 2), ("mul", X * 2), ("div", X / 2),
    ("rsub", 2 - X), ("rdiv", 2 / X)])
def test_nd4j_arith_methods(x, name, expected):
    result = getattr(x, name)(2)
    check(result, expected.astype(np.float32))
    np.testing.assert_array_equal(x.numpy(), X)  # non-in-place leaves x alone


@pytest.mark.parametrize("name,expected", [
    ("addi", X + 2), ("subi", X - 2), ("muli", X * 2), ("divi", X / 2),
    ("rsubi", 2 - X), ("rdivi", 2 / X)])
def test_nd4j_inplace_methods_mutate_and_return_self(x, name, expected):
    buf = x.numpy()
    out = getattr(x, name)(2)
    assert out is x
    assert x.numpy() is buf
    np.testing.assert_allclose(buf, expected, rtol=1e-6)


def test_inplace_with_array_argument(x):
    other = nd.create([10.0, 20.0, 30.0])
    x.addi(other)  # broadcasts into x's shape
    np.testing.assert_allclose(x.numpy(), X + [10, 20, 30])


def test_inplace_that_would_change_shape_raises(x):
    row = nd.create([[1.0, 2.0, 3.0]])
    with pytest.raises(OpError, match=r"addi.*\(2, 3\).*\(1, 3\)"):
        row.addi(x)
    np.testing.assert_array_equal(row.numpy(), [[1.0, 2.0, 3.0]])
    with pytest.raises(OpError):
        row += x


def test_inplace_float_into_int_raises():
    i = nd.create([1, 2, 3])
    with pytest.raises(NdDTypeError, match="divi"):
        i.divi(2)
    with pytest.raises(NdDTypeError, match="addi"):
        i.addi(0.5)
    with pytest.raises(NdDTypeError):
        i /= 2
    np.testing.assert_array_equal(i.numpy(), [1, 2, 3])
    i.addi(1)  # int into int is fine
    np.testing.assert_array_equal(i.numpy(), [2, 3, 4])


# -- copies, shapes, casts -----------------------------------------------------------------------

def test_dup_is_independent(x):
    y = x.dup()
    assert not np.shares_memory(x.numpy(), y.numpy())
    y.addi(100)
    np.testing.assert_array_equal(x.numpy(), X)
    check(y, X + 100)
    assert x.dup("f").numpy().flags.f_contiguous


def test_reshape_forms(x):
    for r in (x.reshape(3, 2), x.reshape((3, 2)), x.reshape([3, 2]), x.reshape(-1, 2)):
        check(r, X.reshape(3, 2))
    check(x.reshape(6), X.reshape(6))


def test_permute_and_transpose():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = nd.create(a)
    check(t.permute(2, 0, 1), a.transpose(2, 0, 1))
    check(t.permute((1, 2, 0)), a.transpose(1, 2, 0))
    check(t.transpose(), a.T)
    check(t.T, a.T)


def test_cast_forms(x):
    assert x.cast(nd.INT).dtype == np.int32
    assert x.cast_to(nd.DOUBLE).dtype == np.float64
    assert x.castTo("half").dtype == np.float16
    assert x.cast("int64").dtype == np.int64
    check(nd.create([1.7, -1.7]).cast(nd.INT), np.array([1, -1], np.int32))
    check(x.cast(nd.BOOL), X.astype(bool))


def test_reductions_with_dims_and_keep_dims(x):
    check(x.sum(), X.sum())
    check(x.sum(0), X.sum(0))
    check(x.sum(0, 1), X.sum())
    check(x.sum(dims=1), X.sum(1))
    check(x.sum(1, keep_dims=True), X.sum(1, keepdims=True))
    check(x.mean(1), X.mean(1))
    check(x.mean(0, keep_dims=True), X.mean(0, keepdims=True))
    check(x.max(0), X.max(0))
    check(x.min(), X.min())
    check(x.argmax(1), X.argmax(1), np.int64)
    assert x.argmax().item() == 5
    check(x.norm2(1), np.sqrt((X ** 2).sum(1)))
    check(x.norm2(), np.linalg.norm(X))


def test_scalar_access(x):
    assert x.get_double(1, 2) == 6.0
    assert x.getDouble(0, 1) == 2.0
    assert x.sum().item() == 21.0 and isinstance(x.sum().item(), float)
    assert x.get_int(1, 0) == 4 and isinstance(x.get_int(1, 0), int)
    assert nd.create([7.5]).get_double() == 7.5
    with pytest.raises(OpError, match="6 elements"):
        x.item()


def test_put_scalar(x):
    assert x.put_scalar(0, 1, 9.0) is x
    x.putScalar(1, 2, -1)
    expected = X.copy()
    expected[0, 1], expected[1, 2] = 9, -1
    np.testing.assert_array_equal(x.numpy(), expected)


def test_metadata(x):
    assert x.shape == (2, 3)
    assert x.rank == 2 and x.ndim == 2
    assert x.dtype == nd.FLOAT
    assert x.length == 6
    assert nd.create(3.0).rank == 0 and nd.create(3.0).length == 1


# -- views and item assignment ---------------------------------------------------------------------

def test_row_view_writes_through(x):
    row = x[0]
    assert row.shape == (3,)
    row.addi(1)
    np.testing.assert_array_equal(x.numpy()[0], X[0] + 1)
    np.testing.assert_array_equal(x.numpy()[1], X[1])


def test_strided_view_writes_through(x):
    v = x[1:, ::2]
    check(v, X[1:, ::2])
    v.muli(10)
    expected = X.copy()
    expected[1:, ::2] *= 10
    np.testing.assert_array_equal(x.numpy(), expected)
    v.assign(0)
    assert x.get_double(1, 0) == 0 and x.get_double(1, 2) == 0 and x.get_double(1, 1) == 5


def test_setitem(x):
    x[0, 1] = 100
    x[1] = nd.create([7.0, 8.0, 9.0])
    x[:, 0] = -1
    np.testing.assert_array_equal(x.numpy(), [[-1, 100, 3], [-1, 8, 9]])
    x[x > 50] = 0
    assert x.get_double(0, 1) == 0


# -- zero copy ------------------------------------------------------------------------------------

def test_np_asarray_shares_memory(x):
    a = np.asarray(x)
    assert np.shares_memory(a, x.numpy())
    a[0, 0] = 42
    assert x.get_double(0, 0) == 42


def test_create_from_numpy_shares_memory():
    a = np.zeros((2, 2), np.float32)
    x = nd.create(a)
    a[1, 1] = 5
    assert x.get_double(1, 1) == 5
    x.addi(1)
    assert a[0, 0] == 1
    # a numpy float64 array keeps its dtype (no silent downcast of user data)
    assert nd.create(np.zeros(2)).dtype == np.float64


# -- create from Python data -------------------------------------------------------------------------

def test_create_from_lists():
    assert nd.create([1.0, 2.0]).dtype == nd.FLOAT
    assert nd.create([[1, 2], [3, 4]]).dtype == nd.LONG
    assert nd.create([True, False]).dtype == nd.BOOL
    assert nd.create([1, 2], dtype=nd.DOUBLE).dtype == np.float64
    assert nd.create([1, 2], dtype="float").dtype == np.float32
    assert nd.create(2.5).shape == ()
    f = nd.create([[1, 2], [3, 4]], order="f")
    assert f.numpy().flags.f_contiguous
    assert f.numpy().tolist() == [[1, 2], [3, 4]]
    assert nd.array is nd.create


def test_repr_shows_values_and_dtype():
    r = repr(nd.create([[1.5, 2.0], [3.0, 4.0]]))
    assert r.startswith("NDArray(") and "1.5" in r and "4." in r and "float32" in r
    assert "int64" in repr(nd.create([1, 2, 3])) and "3" in repr(nd.create([1, 2, 3]))


def test_python_conversions():
    assert float(nd.create([2.5])) == 2.5
    assert int(nd.create([[3]])) == 3
    assert bool(nd.create([0.0])) is False
    assert bool(nd.create(1)) is True
    assert [1, 2, 3][nd.create(1)] == 2  # integer size-1 arrays are indices
    with pytest.raises(OpError):
        float(nd.create([1.0, 2.0]))


def test_len_and_iter(x):
    assert len(x) == 2
    rows = list(x)
    assert len(rows) == 2 and all(isinstance(r, NDArray) for r in rows)
    check(rows[1], X[1])
    rows[0].addi(1)  # rows are views
    assert x.get_double(0, 0) == 2
    with pytest.raises(TypeError):
        len(nd.create(1.0))


def test_complex_arrays_are_created_and_promote_like_numpy():
    assert nd.create(np.array([1 + 2j], np.complex64)).dtype == np.complex64
    assert nd.create([1j]).dtype == np.complex128
    assert (nd.create([1.0]) + np.array([1j])).dtype == np.complex128
    assert (nd.create([1.0]) * 1j).dtype == np.complex64  # a Python complex is weak
    with pytest.raises(NdDTypeError, match="quad"):
        nd.create([1.0], dtype="quad")



# -- dtypes ----------------------------------------------------------------------------------------

def test_datatype_names():
    assert nd.FLOAT is np.dtype(np.float32)
    assert nd.FLOAT == np.float32 and isinstance(nd.FLOAT, np.dtype)
    assert nd.DOUBLE == np.float64 and nd.HALF == np.float16
    assert nd.INT == np.int32 and nd.LONG == np.int64 and nd.SHORT == np.int16
    assert nd.BYTE == np.int8 and nd.UBYTE == np.uint8 and nd.BOOL == np.bool_
    assert nd.float32 is nd.FLOAT and nd.float64 is nd.DOUBLE and nd.int64 is nd.LONG
    assert nd.int32 is nd.INT and nd.bool_ is nd.BOOL and nd.float16 is nd.HALF
    for name, dt in [("float", nd.FLOAT), ("FLOAT", nd.FLOAT), ("float32", nd.FLOAT),
                     ("double", nd.DOUBLE), ("half", nd.HALF), ("int", nd.INT),
                     ("long", nd.LONG), ("bool", nd.BOOL), ("int64", nd.LONG),
                     (np.float64, nd.DOUBLE), (bool, nd.BOOL)]:
        assert nd.to_dtype(name) == dt
    assert nd.nd4j_name(nd.FLOAT) == "FLOAT" and nd.nd4j_name(nd.LONG) == "LONG"


# -- namespaces and top-level ops ----------------------------------------------------------------------

def test_namespaces_agree_with_numpy():
    a = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
    x = nd.create(a)
    check(nd.math.exp(x), np.exp(a))
    check(nd.nn.relu(x), np.maximum(a, 0))
    check(nd.nn.relu(x, 1.0), np.where(a > 1, a, 0))
    check(nd.linalg.tensor_mmul(x, x, dims_x=[1], dims_y=[0]), np.tensordot(a, a, ([1], [0])))
    check(nd.linalg.tensor_mmul(x, x, [0], [0]), np.tensordot(a, a, ([0], [0])))
    check(nd.base.sum(x, 0), a.sum(0))
    with pytest.raises(AttributeError):
        nd.nn.exp  # exp lives in math, not nn


def test_random_namespace_statistics():
    nd.random.set_seed(11)
    z = nd.random.normal(200, 100, mean=3.0, std=2.0)
    assert z.shape == (200, 100) and z.dtype == nd.FLOAT
    assert abs(z.numpy().mean() - 3.0) < 0.05 and abs(z.numpy().std() - 2.0) < 0.05
    u = nd.random.uniform(1000, low=-2.0, high=-1.0)
    assert u.numpy().min() >= -2.0 and u.numpy().max() < -1.0
    t = nd.random.truncated_normal(5000)
    assert np.abs(t.numpy()).max() <= 2.0
    b = nd.random.bernoulli(1000, p=0.25, dtype=nd.BOOL)
    assert b.dtype == nd.BOOL and 0.18 < b.numpy().mean() < 0.32
    assert nd.random.rand is nd.random.uniform and nd.random.randn is nd.random.normal
    assert nd.random.normal(nd.DOUBLE, 2, 2).dtype == np.float64


def test_random_seed_reproducible_and_successive_draws_differ():
    nd.random.set_seed(123)
    a, b = nd.random.normal(3, 3), nd.random.uniform(4)
    nd.random.set_seed(123)
    c, d = nd.random.normal(3, 3), nd.random.uniform(4)
    np.testing.assert_array_equal(a.numpy(), c.numpy())
    np.testing.assert_array_equal(b.numpy(), d.numpy())
    e = nd.random.normal(3, 3)
    assert not np.array_equal(a.numpy(), e.numpy())
    assert nd.random.get_seed() == 123
    nd.random.set_seed(124)
    assert not np.array_equal(nd.random.normal(3, 3).numpy(), a.numpy())


def test_every_op_is_a_top_level_function():
    table = names_to_ops(ND4J.names, REGISTRY.values())
    assert len(REGISTRY) > 100
    for name, op in table.items():
        fn = getattr(nd, name)
        if not callable(fn):  # a namespace of the op's name holds it: nd.fft.fft, as numpy's
            fn = getattr(fn, name)
        assert callable(fn), name
        assert fn.__name__ in (name, op.name), name
    assert "exp" in dir(nd) and "tensor_mmul" in dir(nd)
    with pytest.raises(AttributeError):
        nd.no_such_op


def test_top_level_ops_compute():
    a = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    x = nd.create(a)
    check(nd.exp(x), np.exp(a))
    check(nd.concat([x, x], 1), np.concatenate([a, a], 1))
    check(nd.concat([x, x], axis=0), np.concatenate([a, a], 0))
    check(nd.stack([x, x]), np.stack([a, a]))
    check(nd.mmul(x, x), a @ a)          # ND4J name of matmul
    check(nd.maximum(x, 0), np.maximum(a, 0))
    check(nd.max(x, 1), a.max(1))        # max is the reduction, as in numpy
    check(nd.where(x > 0, x, nd.zeros_like(x)), np.where(a > 0, a, 0))
    parts = nd.split(x, 2, axis=1)
    assert isinstance(parts, tuple) and len(parts) == 2
    check(parts[1], a[:, 1:])


# -- creation -----------------------------------------------------------------------------------------

def test_zeros_ones_forms():
    for z in (nd.zeros(2, 3), nd.zeros((2, 3)), nd.zeros([2, 3])):
        check(z, np.zeros((2, 3), np.float32))
    check(nd.zeros(nd.INT, 2, 3), np.zeros((2, 3), np.int32))
    check(nd.zeros(nd.DOUBLE, (2,)), np.zeros(2))
    check(nd.zeros(2, dtype="long"), np.zeros(2, np.int64))
    check(nd.ones(2, 2), np.ones((2, 2), np.float32))
    check(nd.ones(nd.BOOL, 3), np.ones(3, bool))
    assert nd.zeros().shape == ()
    with pytest.raises(OpError):
        nd.zeros(2, 3.5)


def test_full_and_value_array_of():
    check(nd.full((2, 2), 7.0), np.full((2, 2), 7.0, np.float32))
    check(nd.full(3, 1.5), np.full(3, 1.5, np.float32))
    check(nd.full((2,), 3, dtype=nd.INT), np.array([3, 3], np.int32))
    check(nd.value_array_of((1, 2), -2.0), np.full((1, 2), -2.0, np.float32))


def test_linspace_arange_eye():
    check(nd.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    check(nd.linspace(0, 10, 3, dtype=nd.DOUBLE), np.linspace(0, 10, 3))
    check(nd.arange(5), np.arange(5), np.int64)
    check(nd.arange(1, 7, 2), np.arange(1, 7, 2), np.int64)
    check(nd.arange(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32), np.float32)
    check(nd.arange(3, dtype=nd.DOUBLE), np.arange(3.0))
    check(nd.eye(3), np.eye(3, dtype=np.float32))
    check(nd.eye(2, 3), np.eye(2, 3, dtype=np.float32))
    check(nd.eye(2, dtype=nd.INT), np.eye(2, dtype=np.int32))


def test_like_functions():
    x = nd.create([[1, 2], [3, 4]], dtype=nd.INT)
    check(nd.zeros_like(x), np.zeros((2, 2), np.int32))
    check(nd.ones_like(x, dtype=nd.FLOAT), np.ones((2, 2), np.float32))
    check(nd.full_like(x, 9), np.full((2, 2), 9, np.int32))
    check(nd.scalar(3.0), np.float32(3.0))
    with pytest.raises(OpError):
        nd.scalar([1.0, 2.0])
