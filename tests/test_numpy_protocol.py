"""The numpy front end (samediff/frontends/numpy.py): numpy ufuncs and functions on NDArrays map
onto ops — eagerly, inside ``graph_scope`` and under ``@nd.compile`` — and fall back to numpy
eagerly (refused, named, inside a trace); numpy's methods, keywords and indexing on arrays.

The case tables below have one row per entry of the front end's tables (checked first).
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import OpError
from samediff.frontends.numpy import FUNCTIONS, NUMPY, UFUNCS
from tracing import LazyArray

from tracing_support import isolated_plan_cache, stats  # noqa: F401

P = np.array([[0.1, 0.5, 0.9], [0.2, 0.3, 0.7]], dtype=np.float32)   # in every unary domain
Q = np.array([[0.4, 0.2, 0.6], [0.8, 0.3, 0.1]], dtype=np.float32)
BIG = np.array([[7.0, -5.5, 9.0], [-3.0, 4.0, 11.0]], dtype=np.float32)
SPECIAL = np.array([[np.nan, 1.0, np.inf], [-np.inf, 0.0, 2.0]], dtype=np.float32)
M1 = np.array([[True, False, True], [False, False, True]])
M2 = np.array([[True, True, False], [False, True, True]])
V = np.array([3.0, -1.0, 2.0, 5.0], dtype=np.float32)
I = np.array([[4, 1, 3], [0, 2, 5]], dtype=np.int32)

_UNARY = {"negative", "absolute", "sign", "square", "reciprocal", "exp", "expm1", "exp2", "log",
          "log1p", "log2", "sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
          "cosh", "tanh", "floor", "ceil", "arcsinh", "arctanh", "conjugate"}
_BINARY = {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "arctan2",
           "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "copysign"}

#: ufunc name -> its arguments (numpy arrays; NDArrays are made of them).
UFUNC_CASES = {name: (P,) for name in _UNARY}
UFUNC_CASES.update({name: (P, Q) for name in _BINARY})
UFUNC_CASES.update({
    "arccosh": (P + np.float32(1.0),),
    "floor_divide": (BIG, np.float32(2.5)), "remainder": (BIG, np.float32(2.5)),
    "divmod": (BIG, np.float32(4.0)), "matmul": (P, Q.T),
    "logical_and": (M1, M2), "logical_or": (M1, M2), "logical_xor": (M1, M2),
    "logical_not": (M1,), "isnan": (SPECIAL,), "isinf": (SPECIAL,), "isfinite": (SPECIAL,),
    "signbit": (SPECIAL,),
})

#: numpy function name -> (args, kwargs), the first argument made an NDArray.
FUNCTION_CASES = {
    "sum": ((BIG,), {"axis": 0}), "prod": ((P,), {"axis": 1, "keepdims": True}),
    "mean": ((BIG,), {}), "average": ((BIG,), {"axis": 1}),
    "max": ((BIG,), {"axis": -1}), "amax": ((BIG,), {}), "min": ((BIG,), {"axis": 0}),
    "amin": ((BIG,), {"keepdims": True}), "all": ((M1,), {"axis": 0}), "any": ((M1,), {}),
    "argmax": ((BIG,), {"axis": 1}), "argmin": ((BIG,), {}),
    "std": ((BIG,), {"axis": 0, "ddof": 1}), "var": ((BIG,), {}),
    "cumsum": ((BIG,), {"axis": 1}), "cumprod": ((V,), {}),
    "linalg.norm": ((BIG,), {}), "clip": ((BIG, -1.0, 5.0), {}), "where": ((M1, P, Q), {}),
    "dot": ((P, Q.T), {}), "reshape": ((BIG, (3, 2)), {}), "transpose": ((BIG,), {}),
    "squeeze": ((P[None],), {"axis": 0}), "expand_dims": ((P,), {"axis": 1}),
    "concatenate": (([P, Q],), {"axis": 1}), "stack": (([P, Q],), {}),
    "tile": ((P, (2, 1)), {}), "repeat": ((P, 2), {"axis": 1}),
    "broadcast_to": ((V, (2, 4)), {}), "flip": ((BIG,), {"axis": 1}),
    "take": ((BIG, [2, 0]), {"axis": 1}), "zeros_like": ((P,), {}), "ones_like": ((I,), {}),
    "full_like": ((P, 3.5), {}),
    "real": ((P,), {}), "imag": ((P,), {}), "angle": ((BIG,), {}),
    "fft.fft": ((BIG,), {"axis": 0}), "fft.ifft": ((BIG,), {"n": 4}),
    "fft.rfft": ((BIG,), {}), "fft.irfft": ((BIG,), {"n": 5}), "fft.hfft": ((BIG,), {}),
    "fft.ihfft": ((BIG,), {"norm": "ortho"}), "fft.fftn": ((BIG,), {}),
    "fft.ifftn": ((BIG,), {"axes": (0,)}), "fft.rfftn": ((BIG,), {"s": (2, 4), "axes": (0, 1)}),
    "fft.irfftn": ((BIG,), {"norm": "forward"}),
}


def _resolve(name: str):
    obj = np
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _nd(value):
    if isinstance(value, list):
        return [nd.create(v) for v in value]
    return nd.create(value)


def _check(got, want) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _check(g, w)
        return
    assert isinstance(got, nd.NDArray), type(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=1e-6)


# -- the tables ----------------------------------------------------------------------------------

def test_every_table_entry_has_a_case():
    assert set(UFUNC_CASES) == set(UFUNCS)
    assert set(FUNCTION_CASES) == set(FUNCTIONS)


def test_table_names_real_numpy_callables_and_ops():
    for name in UFUNCS:
        assert isinstance(getattr(np, name), np.ufunc), name
    for name in FUNCTIONS:
        assert callable(_resolve(name)), name
    assert NUMPY.names["sub"] == ("subtract",) and "var" in NUMPY.names["variance"]


# -- eager, traced, compiled: one row per entry ---------------------------------------------------

@pytest.mark.parametrize("name", sorted(UFUNC_CASES))
def test_ufunc_eager_matches_numpy(name):
    ufunc, args = getattr(np, name), UFUNC_CASES[name]
    _check(ufunc(_nd(args[0]), *args[1:]), ufunc(*args))
    if len(args) == 2:  # NDArray second, and both NDArrays
        _check(ufunc(args[0], _nd(args[1])), ufunc(*args))
        _check(ufunc(_nd(args[0]), _nd(args[1])), ufunc(*args))


@pytest.mark.parametrize("name", sorted(FUNCTION_CASES))
def test_function_eager_matches_numpy(name):
    func, (args, kwargs) = _resolve(name), FUNCTION_CASES[name]
    _check(func(_nd(args[0]), *args[1:], **kwargs), func(*args, **kwargs))


@pytest.mark.parametrize("name", sorted(UFUNC_CASES))
def test_ufunc_records_in_graph_scope(name):
    ufunc, args = getattr(np, name), UFUNC_CASES[name]
    x = _nd(args[0])
    with nd.graph_scope():
        got = ufunc(x, *args[1:])
        first = got[0] if isinstance(got, tuple) else got
        assert isinstance(first, LazyArray) and not first.is_materialized
    _check(got, ufunc(*args))
    assert stats()["misses"] == 1


@pytest.mark.parametrize("name", sorted(FUNCTION_CASES))
def test_function_records_in_compile(name):
    func, (args, kwargs) = _resolve(name), FUNCTION_CASES[name]
    compiled = nd.compile(lambda x: func(x, *args[1:], **kwargs))
    want = func(*args, **kwargs)
    _check(compiled(_nd(args[0])), want)
    _check(compiled(_nd(args[0])), want)
    assert stats()["misses"] == 1 and stats()["signatures"] == 1  # traced once, one plan


#: Calls where numpy's answer is not the plain op's (issue 21): more rows of the tables above,
#: each compared with numpy eagerly and under ``nd.compile`` (tests/test_numpy_front_door.py
#: draws integer arrays for the same calls).
EXTRA_CALLS = {
    "flip, no axis": (lambda x: np.flip(x), BIG),
    "reciprocal of ints": (lambda x: np.reciprocal(x), (I - 2) * 2 + 1),  # no 1 / 0
    "mean, int dtype": (lambda x: np.mean(x, axis=1, dtype=np.int64), I * -3),
    "mean, int8 dtype wraps": (lambda x: np.mean(x, dtype=np.int8), I * 50),
    "method sum, dtype": (lambda x: x.sum(axis=1, dtype=np.float64), I),
    "method mean, dtype": (lambda x: x.mean(dtype=np.int32), BIG),
}


@pytest.mark.parametrize("name", sorted(EXTRA_CALLS))
def test_extra_calls_match_numpy_eager_and_compiled(name):
    call, a = EXTRA_CALLS[name]
    with np.errstate(all="ignore"):
        want = call(a)
        _check(call(nd.create(a)), want)
        _check(nd.compile(call)(nd.create(a)), want)


@pytest.mark.compiled
def test_fused_plan_of_numpy_calls():
    f = nd.compile(lambda x, y: np.tanh(np.maximum(x, 0.0) * y + np.exp(-x)).sum(axis=1))
    want = np.tanh(np.maximum(P, 0.0) * Q + np.exp(-P)).sum(axis=1)
    _check(f(nd.create(P), nd.create(Q)), want)


# -- numpy semantics: scalars, dtype=, out=, fallbacks --------------------------------------------

def test_python_scalars_stay_weak_numpy_scalars_do_not():
    x, i = nd.create(P), nd.create(I)
    assert np.add(x, 2.0).dtype == np.float32
    assert np.multiply(i, 2).dtype == np.int32
    assert np.add(x, np.float64(2.0)).dtype == np.add(P, np.float64(2.0)).dtype
    assert (np.float64(2.0) * x).dtype == (np.float64(2.0) * P).dtype
    assert np.add(x, [1.0, 2.0, 3.0]).dtype == np.float64  # lists read as numpy reads them


def test_dtype_keyword_casts_the_inputs():
    _check(np.sum(nd.create(I), dtype=np.float32), np.sum(I, dtype=np.float32))
    _check(np.exp(nd.create(P), dtype=np.float64), np.exp(P, dtype=np.float64))


def test_out_writes_into_ndarray_and_numpy_array():
    x = nd.create(P.copy())
    target = nd.zeros(2, 3)
    assert np.exp(x, out=target) is target
    np.testing.assert_allclose(target.numpy(), np.exp(P), rtol=1e-6)
    buf = np.zeros((2, 3), np.float32)
    assert np.add(x, 1.0, out=buf) is buf
    np.testing.assert_allclose(buf, P + 1.0)
    np.sum(x, axis=0, out=(col := np.zeros(3, np.float32)))
    np.testing.assert_allclose(col, P.sum(axis=0), rtol=1e-6)
    a = np.zeros((2, 3), np.float32)
    a += x  # numpy's in-place operator keeps the numpy array
    assert type(a) is np.ndarray and np.allclose(a, P)


def test_out_inside_a_trace_is_refused():
    x, target = nd.create(P), nd.zeros(2, 3)
    with pytest.raises(nd.TracingError):
        with nd.graph_scope():
            np.exp(x, out=target)


@pytest.mark.parametrize("call, name", [
    (lambda x: np.ptp(x, axis=0), "np.ptp"),
    (lambda x: np.sort(x, axis=1), "np.sort"),
    (lambda x: np.add.reduce(x, axis=0), "np.add.reduce"),
    (lambda x: np.cumsum(x), "np.cumsum"),              # axis=None on 2-D: flattened
    (lambda x: np.std(x, ddof=2), "np.std"),            # a ddof the op does not have
    (lambda x: np.exp(x, where=np.asarray(M1), out=np.zeros((2, 3), np.float32)),
     "np.exp with where="),
    (lambda x: np.rint(x), "np.rint"),                  # the round op halves away from zero
])
def test_fallback_eager_works_and_traced_raises_naming_it(call, name):
    want = call(BIG.copy())
    got = call(nd.create(BIG.copy()))
    if "where" not in name:
        _check(got, want)
    with pytest.raises(nd.TracingError, match=name.replace(".", r"\.")):
        with nd.graph_scope():
            call(nd.create(BIG))


def test_fallback_out_writes_into_ndarray():
    x = nd.create(BIG)
    target = nd.zeros(3)
    assert np.add.reduce(x, axis=0, out=target) is target
    np.testing.assert_allclose(target.numpy(), BIG.sum(axis=0))


def test_metadata_functions_work_on_traced_arrays():
    with nd.graph_scope():
        y = nd.create(P) + 1
        assert np.shape(y) == (2, 3) and np.ndim(y) == 2 and np.size(y) == 6


def test_graph_variables_record_numpy_calls():
    sd = nd.SameDiff.create()
    v = sd.constant("c", P)
    out = np.mean(np.exp(v), axis=0)
    np.testing.assert_allclose(out.eval().numpy(), np.exp(P).mean(axis=0), rtol=1e-6)
    with pytest.raises(OpError, match="np.sort has no nd4py op"):
        np.sort(v)


# -- __array__ ------------------------------------------------------------------------------------

def test_array_protocol_copy_semantics():
    x = nd.create(P.copy())
    for view in (np.asarray(x), np.array(x, copy=False)):   # zero-copy: the buffer itself
        assert np.shares_memory(view, x.numpy()) and view.shape == P.shape
    copied = np.array(x, copy=True)
    assert copied is not x.numpy() and np.array_equal(copied, P)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="copy"):
        np.array(x, dtype=np.float64, copy=False)
    np.asarray(x)[0, 0] = 42.0
    assert x.numpy()[0, 0] == 42.0
    with pytest.raises(nd.TracingError):
        with nd.graph_scope():
            np.asarray(x + 1)


# -- numpy keyword spellings on methods and nd.* ---------------------------------------------------

def test_numpy_keywords_on_methods_and_functions():
    x = nd.create(BIG)
    _check(x.sum(axis=0, keepdims=True), BIG.sum(axis=0, keepdims=True))
    _check(x.mean(axis=(0, 1)), BIG.mean(axis=(0, 1)))
    _check(x.max(axis=-1), BIG.max(axis=-1))
    _check(x.reshape((3, 2)), BIG.reshape((3, 2)))
    _check(nd.sum(x, axis=1), BIG.sum(axis=1))
    _check(nd.base.mean(x, axis=0, keepdims=True), BIG.mean(axis=0, keepdims=True))
    _check(x.sum(0, 1), BIG.sum(axis=(0, 1)))  # ND4J's packing still works
    _check(x.argmax(axis=1), BIG.argmax(axis=1))
    _check(nd.concat([x, x], axis=0), np.concatenate([BIG, BIG], axis=0))
    with nd.graph_scope():
        y = x.sum(axis=0, keepdims=True)
    _check(y, BIG.sum(axis=0, keepdims=True))


# -- numpy methods --------------------------------------------------------------------------------

def test_numpy_methods():
    x = nd.create(BIG.copy())
    assert x.astype(np.float64).dtype == np.float64
    assert x.astype(np.float32, copy=False) is x
    assert x.astype(np.float32) is not x
    assert x.tolist() == BIG.tolist()
    c = x.copy()
    c.fill(1.0)
    assert np.all(c.numpy() == 1.0) and x.tolist() == BIG.tolist()
    _check(x.clip(-1.0, 5.0), BIG.clip(-1.0, 5.0))
    _check(x.clip(max=0.0), BIG.clip(max=0.0))
    _check(x.clip(nd.create(Q), None), BIG.clip(Q, None))
    assert x.nbytes == BIG.nbytes and x.itemsize == 4
    assert len(x) == 2 and [r.tolist() for r in x] == BIG.tolist()
    assert x.sum().item() == pytest.approx(float(BIG.sum()))
    _check(np.var(x), BIG.var())  # no x.var(): ``var`` is SameDiff's sd.var (a variable)
    _check(x.astype(np.int32).clip(0, 5), BIG.astype(np.int32).clip(0, 5))


def test_integer_clip_keeps_numpy_dtype():
    i = nd.create(I)
    _check(np.clip(i, 1, 3), np.clip(I, 1, 3))  # falls back: clip_by_value has float bounds
    with nd.graph_scope():
        y = i.clip(1, 3)  # maximum/minimum: traced for every dtype
    _check(y, np.clip(I, 1, 3))


def test_fill_inside_a_trace_is_refused():
    x = nd.create(P.copy())
    with pytest.raises(nd.TracingError, match="fill"):
        with nd.graph_scope():
            x.fill(0.0)


def test_format():
    assert f"{nd.create(np.float32(2.5)):.3f}" == "2.500"
    assert f"{nd.create(P)}" == str(P)
    with pytest.raises(TypeError):
        f"{nd.create(P):.3f}"  # numpy refuses a format spec for arrays of rank >= 1


def test_divmod():
    q, r = divmod(nd.create(BIG), 4.0)
    wq, wr = divmod(BIG, np.float32(4.0))
    _check(q, wq)
    _check(r, wr)
    q, r = divmod(20.0, nd.create(BIG))
    _check(q, 20.0 // BIG)
    _check(r, 20.0 % BIG)


def test_comparison_with_non_arrays_is_elementwise_false():
    x = nd.create(P)
    _check(x == None, P == None)  # noqa: E711
    _check(x != None, P != None)  # noqa: E711
    _check(x == "a", np.zeros((2, 3), bool))
    _check(x == nd.create(P), P == P)
    _check(x == P, P == P)  # objects with __array__ compare elementwise
    with nd.graph_scope():
        y = x == None  # noqa: E711
    _check(y, np.zeros((2, 3), bool))


# -- indexing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    [0, 1], [1, 1, 0], np.array([2, 0]) % 2, (slice(None), [0, 2]), (slice(None), np.array([-1])),
    (np.array([[0], [1]]),),
])
def test_integer_array_indexing_is_a_gather(key):
    x = nd.create(BIG)
    _check(x[key], BIG[key])
    _check(x[nd.create(np.asarray(key))] if isinstance(key, list) else x[key], BIG[key])
    with nd.graph_scope():
        y = x[key]
        assert isinstance(y, LazyArray)
    _check(y, BIG[key])


@pytest.mark.parametrize("key", [
    BIG > 0, [True, False], (slice(None), [True, False, True]), ([0, 1], [2, 0]),
    (0, [0, 2]), ([1, 0], slice(1, None)),
])
def test_masks_and_mixed_indexing_read_eagerly(key):
    x = nd.create(BIG)
    _check(x[key], BIG[key])


def test_boolean_mask_in_a_trace_points_at_where():
    x = nd.create(BIG)
    _check(x[x > 0], BIG[BIG > 0])
    with pytest.raises(nd.TracingError, match="boolean mask.*nd.where"):
        with nd.graph_scope():
            x[x > 0]
    x[x < 0] = 0  # assignment worked before and still does
    assert x.min().item() == 0.0
