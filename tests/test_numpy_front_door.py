"""The numpy front door (nd4py issue 21): numpy calls that used to diverge from numpy, the small
array expectations of numpy helpers and matplotlib, and the errors a numpy user meets first.

* ``np.flip(x)`` flips every axis; ``np.reciprocal`` of integers stays integer (C's ``1 / x``);
  ``dtype=`` of ``np.mean``/``np.sum``... and of the methods (``x.sum(dtype=np.float64)``, as
  scikit-learn's ``matthews_corrcoef`` calls it) is numpy's accumulator, integer means
  truncate; ``all``/``any`` over ``axis=()`` of the array API give bools;
* a 0-d value is not iterable (``np.iterable`` is False, as matplotlib checks); ``ravel``,
  ``strides``, ``item(i)`` as in numpy;
* ``x[5]`` out of range is an ``IndexError`` (and still an ``OpError``); ``x.summ()`` suggests
  ``sum``; ``nd.from_dlpack([1.0])`` names what it takes.

Each eager case is compared with numpy itself; the property test draws integer arrays.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nd4py as nd
import nd4py.array_api as xp
from samediff.errors import NdError, OpError
from tracing import LazyArray

pytestmark = pytest.mark.filterwarnings("ignore::tracing.RetraceWarning")

I = np.array([[7, -2, 1], [-1, 3, -6]], dtype=np.int32)
F = np.array([[1.5, -2.0, 4.0], [0.5, 3.0, -6.0]], dtype=np.float32)


def _same(got, want) -> None:
    """Same dtype and values as numpy's result (exactly for integers)."""
    want = np.asarray(want)
    assert isinstance(got, nd.NDArray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got.numpy(), want)
    else:
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=1e-6)


def _traced(call, *arrays):
    """``call`` on NDArrays inside a ``graph_scope``: it records (a LazyArray comes back)."""
    xs = [nd.create(a) for a in arrays]
    with nd.graph_scope():
        out = call(*xs)
        assert isinstance(out, LazyArray) and not out.is_materialized
    return out


# -- numpy calls that diverged ------------------------------------------------------------------

@pytest.mark.parametrize("a", [F, I, np.float32(2.5), np.arange(24.0).reshape(2, 3, 4)])
def test_flip_without_axis_flips_every_axis(a):
    _same(np.flip(nd.create(a)), np.flip(a))
    if np.ndim(a):
        _same(_traced(np.flip, a), np.flip(a))
    _same(np.flip(nd.create(F), axis=(0, 1)), np.flip(F, axis=(0, 1)))  # axis= still works


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16])
def test_integer_reciprocal_stays_integer(dtype):
    a = np.array([1, 2, 3, 5, 100], dtype)
    if np.dtype(dtype).kind == "i":
        a = np.concatenate([a, np.array([-1, -2, -7], dtype)])
    _same(np.reciprocal(nd.create(a)), np.reciprocal(a))
    _same(_traced(np.reciprocal, a), np.reciprocal(a))


def test_integer_reciprocal_of_zero_is_zero_and_floats_still_divide():
    # numpy's own loop gives an undefined value for 1 / 0 (INT_MIN for int32); here it is 0,
    # as integer floor_divide by zero is (numpy and nd4py)
    _same(np.reciprocal(nd.create(np.array([0, 1, -1], np.int32))), np.array([0, 1, -1], np.int32))
    _same(np.reciprocal(nd.create(F)), np.reciprocal(F))
    _same(nd.reciprocal(nd.create(I)), 1 / I)  # the op itself is ND4J's true division


@pytest.mark.parametrize("call", [
    lambda x: np.mean(x, dtype=np.int64),
    lambda x: np.mean(x, axis=0, dtype=np.int32),
    lambda x: np.mean(x, axis=1, keepdims=True, dtype=np.int8),
    lambda x: np.mean(x, dtype=np.uint8),
    lambda x: np.mean(x, axis=1, dtype=np.float32),
    lambda x: np.sum(x, axis=0, dtype=np.int8),
    lambda x: np.sum(x, dtype=np.float64),
    lambda x: np.prod(x, axis=1, dtype=np.int16),
    lambda x: np.cumsum(x, axis=1, dtype=np.int8),
])
@pytest.mark.parametrize("a", [I, F, I * 60])  # I * 60: the int8 accumulator wraps
def test_reduction_dtype_is_numpys_accumulator(call, a):
    with np.errstate(all="ignore"):
        want = call(a)
        _same(call(nd.create(a)), want)
        _same(_traced(call, a), want)


def test_methods_take_dtype():
    x = nd.create(I)
    _same(x.sum(dtype=np.float64), I.sum(dtype=np.float64))
    _same(x.sum(axis=1, dtype=np.float64), I.sum(axis=1, dtype=np.float64))  # scikit-learn's call
    _same(x.mean(dtype=np.int64), I.mean(dtype=np.int64))
    _same(x.mean(axis=0, keepdims=True, dtype=np.int32), I.mean(axis=0, keepdims=True,
                                                              dtype=np.int32))
    _same(x.prod(axis=0, dtype=np.int8), I.prod(axis=0, dtype=np.int8))
    _same(nd.create(F).mean(axis=1, dtype=np.float64), F.mean(axis=1, dtype=np.float64))
    _same(x.sum(0, dtype=np.float32), I.sum(axis=0, dtype=np.float32))  # ND4J's dims too
    with nd.graph_scope():
        y = x.mean(axis=1, dtype=np.int64)
    _same(y, I.mean(axis=1, dtype=np.int64))


def test_graph_variables_take_dtype_and_keep_the_output_name():
    sd = nd.SameDiff.create()
    v = sd.var("v", I.astype(np.float64))
    m = v.mean("m", axis=0, dtype=np.int64)
    assert m.name == "m"
    _same(m.eval(), I.astype(np.float64).mean(axis=0, dtype=np.int64))
    _same(v.sum(dtype=np.float32).eval(), I.sum(dtype=np.float32))


def test_integer_dtype_variance_runs_numpy_or_is_refused_by_name():
    # numpy truncates the intermediate mean of var/std with an integer dtype: no op form, so
    # the numpy function runs numpy eagerly and the method refuses, naming the way out
    x = nd.create(np.array([1, 2, 4, 9]))
    _same(np.var(x, dtype=np.int64), np.var(np.array([1, 2, 4, 9]), dtype=np.int64))
    with pytest.raises(OpError, match=r"std with dtype=int64.*astype\(int64\)"):
        x.std(dtype=np.int64)
    with pytest.raises(nd.TracingError, match="np.var"):
        with nd.graph_scope():
            np.var(x + 1, dtype=np.int64)
    _same(x.std(dtype=np.float32), np.std(np.array([1, 2, 4, 9]), dtype=np.float32))


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("a", [np.array([0.0, 1.0, np.nan, -2.0]), np.array([0, 3, -1]),
                               np.array(0.0), np.array([1 + 0j, 0j])])
def test_array_api_all_any_over_no_axes_give_bools(name, a):
    got = getattr(xp, name)(xp.asarray(a), axis=())
    _same(got, getattr(np, name)(a, axis=()))
    _same(getattr(xp, name)(xp.asarray(a), axis=(), keepdims=True), getattr(np, name)(a, axis=()))


# -- property test: integer numpy calls against numpy itself --------------------------------------

_INT_DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16])
_CALLS = [
    ("reciprocal", lambda x: np.reciprocal(x)),
    ("flip", lambda x: np.flip(x)),
    ("mean int64", lambda x: np.mean(x, dtype=np.int64)),
    ("mean axis0 int8", lambda x: np.mean(x, axis=0, dtype=np.int8)),
    ("mean axis-1 uint16", lambda x: np.mean(x, axis=-1, dtype=np.uint16)),
    ("sum int8", lambda x: np.sum(x, axis=0, dtype=np.int8)),
    ("method sum float64", lambda x: x.sum(axis=-1, dtype=np.float64)),
    ("method mean int32", lambda x: x.mean(axis=0, dtype=np.int32)),
    ("all ()", lambda x: np.all(x, axis=())),
    ("any ()", lambda x: np.any(x, axis=())),
]


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data(), dtype=_INT_DTYPES,
       shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
def test_integer_numpy_calls_match_numpy(data, dtype, shape):
    info = np.iinfo(dtype)
    values = data.draw(st.lists(st.integers(int(info.min), int(info.max)).filter(bool),
                                min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    a = np.array(values, dtype).reshape(shape)  # no zeros: numpy's 1 / 0 is undefined
    name, call = data.draw(st.sampled_from(_CALLS))
    with np.errstate(all="ignore"):
        want = call(a)
        got = call(nd.create(a))
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    np.testing.assert_array_equal(got.numpy(), want, err_msg=name)


# -- 0-d values are scalars to numpy helpers and matplotlib -------------------------------------

def _looks_like_a_scalar(y) -> bool:
    """What matplotlib's ``axhline``/``text``/``set_xlim`` check of a value."""
    return not np.iterable(y) and np.ndim(y) == 0 and isinstance(float(y), float)


def test_zero_d_arrays_are_not_iterable():
    y = nd.create(F).mean()
    assert _looks_like_a_scalar(y) and y.item() == pytest.approx(float(F.mean()))
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(y)
    x = nd.create(F)
    assert np.iterable(x) and [r.tolist() for r in x] == F.tolist()
    with nd.graph_scope():
        t = nd.create(F) + 1
        assert not np.iterable(t.sum()) and np.iterable(t)
        rows = list(t)
    assert [r.tolist() for r in rows] == (F + 1).tolist()


def test_zero_d_graph_variables_are_not_iterable():
    sd = nd.SameDiff.create()
    v = sd.var("v", F)
    assert not np.iterable(v.sum()) and len(list(v)) == 2
    with pytest.raises(TypeError, match="0-d"):
        iter(v.mean())
    p = sd.placeholder("p", np.float32, -1, 3)
    with pytest.raises(TypeError, match="first dim is unknown"):
        iter(p)


def test_ravel_strides_and_item_as_in_numpy():
    x = nd.create(F)
    _same(x.ravel(), F.ravel())
    _same(x.ravel("F"), F.ravel("F"))
    assert x.strides == F.strides and x.T.strides == F.T.strides
    assert x.item(4) == F.item(4) and x.item(1, 2) == F.item(1, 2)
    assert x.item((0, 1)) == F.item((0, 1)) and nd.create(np.int64(3)).item(0) == 3
    with pytest.raises(IndexError, match=r"item: index 6 is out of range.*\(2, 3\)"):
        x.item(6)
    with pytest.raises(OpError, match="one flat index or one index per dim"):
        x.item(0, 1, 2)
    with nd.graph_scope():
        r = (x + 1).ravel()
        assert isinstance(r, LazyArray) and r.shape == (6,)
        with pytest.raises(nd.TracingError):
            (x + 1).strides  # no buffer yet
    _same(r, (F + 1).ravel())
    sd = nd.SameDiff.create()
    _same(sd.var("v", F).ravel().eval(), F.ravel())


# -- errors a numpy user meets first -------------------------------------------------------------

@pytest.mark.parametrize("key", [5, -3, (0, 3), (0, 0, 0)])
def test_out_of_range_index_is_an_index_error_and_an_op_error(key):
    x = nd.create(F)
    with pytest.raises(IndexError) as info:
        x[key]
    assert isinstance(info.value, OpError) and "strided_slice" in str(info.value)
    with pytest.raises(IndexError):
        with nd.graph_scope():
            (x + 1)[key]
    with pytest.raises(IndexError):
        nd.SameDiff.create().var("v", F)[key]


def test_out_of_range_gather_is_an_index_error():
    with pytest.raises(IndexError, match="gather") as info:
        nd.create(F)[[0, 5]]
    assert isinstance(info.value, OpError)


@pytest.mark.parametrize("make", [
    lambda: nd.create(F),
    lambda: nd.SameDiff.create().var("v", F),
])
def test_misspelt_method_suggests_the_closest(make):
    x = make()
    with pytest.raises(AttributeError, match=r"has no attribute 'summ'; did you mean 'sum'") as e:
        x.summ()
    assert isinstance(e.value, NdError)
    with pytest.raises(AttributeError, match=r"'meen'; did you mean 'mean'"):
        x.meen
    with pytest.raises(AttributeError, match=r"no attribute 'xyzzy'$"):
        x.xyzzy
    assert not hasattr(x, "iloc") and hasattr(x, "sum")


def test_misspelt_method_on_a_traced_array():
    with nd.graph_scope():
        y = nd.create(F) + 1
        with pytest.raises(AttributeError, match=r"'LazyArray' object has no attribute 'summ'; "
                                                 r"did you mean 'sum'"):
            y.summ()


def test_from_dlpack_names_what_it_accepts():
    with pytest.raises(TypeError, match=r"from_dlpack: a list does not implement the DLPack "
                                        r"protocol.*nd\.create"):
        nd.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError, match="a float does not"):
        nd.from_dlpack(1.0)
