"""``NDArray`` and ``bind``: the one place where an op call is executed or recorded.

``bind(op, inputs, attrs)`` looks up the current trace (a ``contextvars`` variable, so it is per
thread and per async task). With no trace the op runs eagerly on numpy buffers; with one, the
trace records a node and returns its proxy. Ops know nothing about either mode.

>>> import numpy as np
>>> from samediff.array import create
>>> x = create([[1.0, 2.0], [3.0, 4.0]])
>>> (x + 1).sum().item()
14.0
"""
from __future__ import annotations

import contextvars
from typing import Any

import numpy as np

from . import profiler
from .arg_kinds import WEAK_SCALARS
from .dtypes import (DEFAULT_FLOAT, SUPPORTED, as_utf8, dtype_name, is_storage, is_string,
                     nd4j_name, to_dtype, unsupported)
from .errors import NdDTypeError, NdIndexError, OpError, OpIndexError, TracingError
from .ops import REGISTRY, OpDef, TensorType
from .ops.registry import describe
from .surface import NdInt, OpSurface

#: The active trace of this thread/context, or None (eager). Tracing sets it; nothing else does.
CURRENT_TRACE: contextvars.ContextVar[Any] = contextvars.ContextVar("nd4py_trace", default=None)
#: The recorder of a control-flow body being traced (``samediff.control.bodies``): an op on
#: values of enclosing graphs only (a captured SameDiff variable, a traced array) records into
#: the body, which lifts them into inputs, rather than into their own graph.
ACTIVE_BODY: contextvars.ContextVar[Any] = contextvars.ContextVar("nd4py_body", default=None)

_PY_SCALARS = WEAK_SCALARS


def bind(op: OpDef, inputs: list, attrs: Any = None, name: str | None = None,
         rec: Any = None) -> Any:
    """Run ``op`` eagerly, or record it. Every op call ends here.

    Where it records: into the graph of an input that is a graph variable (an ``SDVariable``:
    ``nd.exp(v)`` records into ``v``'s SameDiff), else into the current trace (the context
    variable set by ``graph_scope`` / ``nd.compile``); with neither it runs eagerly on the
    numpy buffers. ``rec`` is ``attrs``' attribute record (``op.make_attrs(attrs)``) when the
    caller already has it (the front ends' memoized argument rule, whose ``inputs`` always
    fit the op): eager calls then skip making it and checking the number of inputs.
    """
    trace = CURRENT_TRACE.get()
    if trace is not None:
        for x in inputs:
            if type(x) is not NDArray and isinstance(x, OpSurface) and x._recorder is not None:
                return _top_recorder(inputs).record(op, inputs, attrs or {}, name)
        return trace.record(op, inputs, attrs or {}, name)
    # Eager: the hot path (benchmarks/bench_eager_overhead.py), one frame from the method to
    # the op's impl. Graph variables are found only among inputs that are not plain NDArrays,
    # so the common all-array call pays nothing for them.
    arity_known = rec is not None  # a memoized call form has the op's inputs, checked
    if rec is None:
        rec = op.make_attrs(attrs) if attrs else op.default_attrs
        if rec is None:
            rec = op.make_attrs({})  # raises: a required attribute is missing
    # A plain loop: on Python 3.11 a comprehension builds and calls a function object (~60 ns
    # per op); and no ``**{}`` for ops without attributes (~40 ns).
    vals = []
    for x in inputs:
        if type(x) is NDArray:
            vals.append(x._data)
        elif type(x) in _PY_SCALARS:
            vals.append(x)
        elif isinstance(x, OpSurface) and x._recorder is not None:
            return _top_recorder(inputs).record(op, inputs, attrs or {}, name)
        elif ACTIVE_BODY.get() is not None and getattr(x, "is_materialized", True) is False:
            return ACTIVE_BODY.get().record(op, inputs, attrs or {}, name)  # a traced array
        else:
            vals.append(to_value(x))
    if not arity_known and len(vals) != len(op.inputs) and not op.variadic:
        op.check_arity(len(vals))
    kw = rec.__dict__
    if profiler.active:  # the profiler's only cost when it is off
        out = _impl_profiled(op, vals, kw, rec)
    else:
        try:
            out = op.impl(*vals, **kw) if kw else op.impl(*vals)
        except Exception as exc:  # turn numpy's message into one that names the op
            raise explain_failure(op, vals, rec, exc) from exc
    if type(out) is np.ndarray:
        result = _new(NDArray)  # NDArray(out) without its __init__ frame (~50 ns)
        result._data = out
        return result
    if isinstance(out, tuple):
        return tuple(NDArray(np.asarray(o)) for o in out)
    return NDArray(np.asarray(out))


_new = object.__new__


def _impl_profiled(op: OpDef, vals: list, kw: dict, rec: Any) -> Any:
    """``op.impl`` timed into the open profiles as an "eager" event (``samediff.profiler``)."""
    start = profiler.now_us()
    try:
        out = op.impl(*vals, **kw) if kw else op.impl(*vals)
    except Exception as exc:
        raise explain_failure(op, vals, rec, exc) from exc
    end = profiler.now_us()
    into = profiler.targets()
    if into:
        outs = out if isinstance(out, tuple) else (out,)
        profiler.complete(into, op.name, "eager", start, {
            "ops": [op.name], "inputs": [profiler.describe(v) for v in vals],
            "outputs": [profiler.describe(o) for o in outs]}, end)
    return out


def _top_recorder(inputs: list) -> Any:
    """The innermost graph among the inputs' (the one created last): in ``nd.grad`` of a
    function that itself calls ``nd.grad``, the inner graph reads the outer one's values as
    inputs, never the reverse (autograd's "top boxed argument")."""
    top = ACTIVE_BODY.get()  # a body being traced is newer than every graph it reads
    for x in inputs:
        recorder = getattr(x, "_recorder", None) if isinstance(x, OpSurface) else None
        if recorder is not None and (top is None or recorder.level > top.level):
            top = recorder
    return top


def explain_failure(op: OpDef, vals: list, rec: Any, exc: Exception) -> Exception:
    types = [type_of(v) for v in vals]
    try:
        op.infer_types(types, rec)
    except (OpError, NdDTypeError) as inferred:
        return inferred
    except Exception:  # inference itself cannot say more than numpy did
        pass
    error = OpIndexError if isinstance(exc, IndexError) else OpError  # a gather index...
    return error(f"{op.name}: {type(exc).__name__}: {exc} (inputs: {describe(types)}, "
                 f"attrs: {rec})")


def type_of(value: Any) -> TensorType:
    """Static type of a runtime value; Python scalars are weak (numpy scalars, even
    ``np.float64`` which subclasses ``float``, are not: numpy treats them as strong)."""
    if type(value) in _PY_SCALARS:
        return TensorType((), np.asarray(value).dtype, True)
    value = np.asarray(value)
    return TensorType(value.shape, value.dtype)


def to_value(x: Any) -> Any:
    """Runtime value of an op input: a numpy array, or a Python scalar (weak)."""
    if isinstance(x, NDArray):
        return x._data
    if isinstance(x, np.ndarray):
        if x.dtype not in SUPPORTED and not is_storage(x.dtype):  # (a set lookup first)
            if is_string(x.dtype):
                return x
            text = as_utf8(x)  # numpy text ("<U5", object arrays of str) is held as UTF8
            if text is x:
                raise unsupported(x.dtype)
            return text
        return x
    if isinstance(x, _PY_SCALARS):
        return x
    if isinstance(x, OpSurface):
        raise OpError(f"cannot use {type(x).__name__} {x!r} in an eager op; "
                      f"evaluate it first (e.g. .eval()) or build the whole computation in its graph")
    if x is None:
        raise OpError("an op input is None; pass an array or a number")
    return as_numpy(x)


def as_numpy(data: Any, dtype: Any = None, order: str = "C") -> np.ndarray:
    """Numpy buffer for ``data``: arrays are used as-is (zero copy) when dtype and order allow;
    Python floats default to FLOAT (float32) like ND4J, ints to LONG, bools to BOOL."""
    if isinstance(data, NDArray):
        data = data._data
    want = None if dtype is None else to_dtype(dtype)
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data, dtype=want, order=order if order.upper() == "F" else None)
    elif data is None:
        raise OpError("create: cannot make an array from None")
    else:
        try:
            arr = np.asarray(data, order=order)
        except (ValueError, TypeError) as exc:
            raise OpError(f"create: cannot make an array from {type(data).__name__}: {exc}") from None
        if want is not None:
            arr = arr.astype(want, copy=False)
        elif arr.dtype == np.float64:
            arr = arr.astype(DEFAULT_FLOAT)
    if arr.dtype not in SUPPORTED and not is_storage(arr.dtype) and not is_string(arr.dtype):
        # text (["a", "b"] is "<U1"; object arrays of str only) is held as UTF8
        arr = as_utf8(arr, "create: ")
        if not is_string(arr.dtype):
            raise unsupported(arr.dtype, "create: ", "; pass dtype= to convert")
    if order.upper() == "F" and arr.ndim > 1 and not arr.flags.f_contiguous:
        arr = np.asfortranarray(arr)
    return arr


def create(data: Any, dtype: Any = None, order: str = "c") -> "NDArray":
    """Make an ``NDArray`` from nested lists, scalars, numpy arrays (zero copy) or NDArrays.

    >>> create([1, 2, 3]).dtype
    dtype('int64')
    >>> create([1.0, 2.0]).dtype   # ND4J's default FLOAT
    dtype('float32')
    """
    if order.lower() not in ("c", "f"):
        raise OpError(f"create: order must be 'c' or 'f', got {order!r}")
    return NDArray(as_numpy(data, dtype, order))


_LOGICAL = {np.bitwise_and: "logical_and", np.bitwise_or: "logical_or",
            np.bitwise_xor: "logical_xor", np.invert: "logical_not"}


def _bitwise_operator(fn: Any, symbol: str) -> tuple[Any, Any]:
    """The operator ``symbol`` and its reflected form, both through ``NDArray._bitwise``."""
    def method(self: "NDArray", other: Any) -> Any:
        return self._bitwise(fn, symbol, (self, other))

    def reflected(self: "NDArray", other: Any) -> Any:
        return self._bitwise(fn, symbol, (other, self))
    return method, reflected


def _is_bool(x: Any) -> bool:
    return type(x) is bool or np.dtype(getattr(x, "dtype", np.dtype(object))) == np.bool_


class NDArray(OpSurface):
    """An n-dimensional array backed by a numpy buffer (zero-copy both ways).

    Operators, ND4J-style methods (``add``/``addi``, ``mmul``, ``dup``, ``sum(dims)``...) and
    every op of the table are available as methods. Basic slicing gives views that write
    through, like numpy.

    >>> x = create([[1.0, 2.0], [3.0, 4.0]])
    >>> x.mmul(x).get_double(0, 0)
    7.0
    >>> row = x[0]; _ = row.addi(10); x.get_double(0, 1)
    12.0
    """

    __slots__ = ("_data", "__weakref__")

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    # -- how ops run --------------------------------------------------------------------------
    # (op, inputs, attrs, name=None, rec=None): runs or records, without a method frame
    _apply = staticmethod(bind)

    def _inplace(self, op: OpDef, inputs: list, attrs: dict, operator: bool) -> "NDArray":
        trace = CURRENT_TRACE.get()
        if trace is not None:  # traced functionally, written back when the scope ends
            return trace.record_inplace(self, op, inputs, attrs)
        into = op.into
        if into is not None:  # computed straight into this buffer (numpy's out=): x.addi(y) on
            vals = []         # a 200 MB array allocates nothing (a plain loop: the hot path)
            for x in inputs:
                if type(x) is NDArray:
                    vals.append(x._data)
                elif isinstance(x, OpSurface) and x._recorder is not None:
                    break  # a graph variable: bind records the op, _assign_result refuses it
                else:
                    vals.append(to_value(x))
            else:
                rec = op.default_attrs if not attrs and op.default_attrs else op.make_attrs(attrs)
                try:
                    kw = rec.__dict__
                    into(self._data, *vals, **kw) if kw else into(self._data, *vals)
                except Exception as exc:  # noqa: BLE001 -- explained, naming the op
                    raise self._refusal(op, vals, rec, exc) from exc
                return self
        result = bind(op, inputs, attrs)
        self._assign_result(op, result)
        return self

    def _refusal(self, op: OpDef, vals: list, rec: Any, failure: Exception) -> Exception:
        """Why ``op.into`` refused to write into this array. numpy checks shapes and casting
        before it writes, so a refused update leaves the array as it was."""
        dst = self._data
        (out,) = op.infer_types([type_of(v) for v in vals], rec)  # raises the op's own errors
        if out.shape != dst.shape:
            return OpError(f"{op.name}i: in-place result has shape {out.shape} but the target "
                           f"has shape {dst.shape}; use the non-in-place {op.name}()")
        if not np.can_cast(out.dtype, dst.dtype, "same_kind"):
            return NdDTypeError(f"{op.name}i: cannot write a {out.dtype} result into a "
                                f"{dst.dtype} array in place (numpy's same_kind rule for out=); "
                                f"use {op.name}() or cast first")
        if not dst.flags.writeable:
            return OpError(f"{op.name}i: the target array is read-only (a SameDiff CONSTANT's "
                           f"value -- replace it with set_array --, a broadcast view, or a "
                           f"buffer numpy marked read-only); copy it with dup() first")
        return explain_failure(op, vals, rec, failure)

    def _assign_result(self, op: OpDef, result: "NDArray") -> None:
        dst, src = self._data, result._data
        if src.shape != dst.shape:
            raise OpError(f"{op.name}i: in-place result has shape {src.shape} but the target "
                          f"has shape {dst.shape}; use the non-in-place {op.name}()")
        try:
            np.copyto(dst, src, casting="same_kind")
        except TypeError:
            raise NdDTypeError(f"{op.name}i: cannot write a {src.dtype} result into a {dst.dtype} "
                               f"array in place; use {op.name}() or cast first") from None

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def rank(self) -> NdInt:
        """Number of dims: ``x.rank`` or ND4J's ``x.rank()`` (numpy's ``ndim``)."""
        return NdInt(self._data.ndim)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def length(self) -> NdInt:
        """Number of elements: ``x.length`` or ND4J's ``x.length()`` (numpy's ``size``)."""
        return NdInt(self._data.size)

    @property
    def size(self) -> int:
        return self._data.size

    def shape_info_to_string(self) -> str:
        """ND4J's ``shapeInfoToString()``: rank, data type, order, shape and strides (in
        elements, row-major)."""
        shape = self.shape
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= max(d, 1)
        return (f"Rank: {len(shape)}, DataType: {nd4j_name(self.dtype)}, Offset: 0, Order: c, "
                f"Shape: [{','.join(map(str, shape))}], Stride: [{','.join(map(str, strides))}]")

    shapeInfoToString = shape_info_to_string

    @property
    def T(self) -> "NDArray":
        return self.transpose()

    @property
    def mT(self) -> "NDArray":
        """Transpose of the last two dims (the array API's matrix transpose)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        dims = list(range(self.ndim))
        dims[-2], dims[-1] = dims[-1], dims[-2]
        return self._apply(REGISTRY["permute"], [self], {"dims": tuple(dims)})

    @property
    def device(self) -> str:
        """Where the buffer lives: always ``"cpu"``."""
        return "cpu"

    def to_device(self, device: Any, /, *, stream: Any = None) -> "NDArray":
        """This array on ``device`` (only ``"cpu"`` exists)."""
        if device != "cpu":
            raise ValueError(f"unknown device {device!r}; nd4py arrays live on 'cpu'")
        return self

    def is_view(self) -> bool:
        return self._data.base is not None

    # -- data access ----------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The backing numpy array (no copy: writes are visible both ways)."""
        return self._data

    to_numpy = numpy

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """DLPack export of the numpy buffer, zero-copy (``torch.from_dlpack(x)``...)."""
        return self._data.__dlpack__(stream=stream, max_version=max_version,
                                     dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._data.__dlpack_device__()

    @property
    def __array_struct__(self) -> Any:
        # numpy probes __array_struct__ and __array_interface__ before __array__; answering the
        # first (the buffer's own, zero-copy) keeps those probes out of OpSurface.__getattr__
        # (the did-you-mean hook), which made np.asarray(x) ~3 us slower than this ~0.3 us.
        data = self._data
        if data.dtype.kind == "T":  # numpy cannot read a UTF8 (StringDType) buffer back
            raise AttributeError("__array_struct__")  # through this: __array__ serves it
        return data.__array_struct__

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """numpy 2's protocol: the buffer itself unless ``copy`` or a new ``dtype`` needs a
        copy; ``copy=False`` refuses to copy (ValueError, as numpy does)."""
        data = self._data
        if dtype is not None and np.dtype(dtype) != data.dtype:
            if copy is False:
                raise ValueError(f"unable to avoid a copy: converting this {data.dtype} array "
                                 f"to {np.dtype(dtype)} copies (copy=False)")
            return data.astype(dtype)
        return data.copy() if copy else data

    @staticmethod
    def _numpy_fallback(what: str, run: Any, hint: str) -> Any:
        """A numpy call with no op (``np.fft.fft(x)``, ``x[x > 0]``): numpy runs on the buffers
        eagerly; inside a trace numpy cannot see the values, so it is refused, named."""
        if CURRENT_TRACE.get() is not None:
            raise TracingError(f"{what} has no nd4py op: it cannot be traced; {hint}")
        return run(NDArray)

    def tolist(self) -> Any:
        """Nested Python lists of Python scalars (numpy ``tolist``)."""
        return self._data.tolist()

    def fill(self, value: Any) -> None:
        """Set every element to ``value`` in place (numpy ``fill``; refused inside a trace)."""
        self._guard_mutation("fill")
        self._data[...] = to_value(value)

    def __format__(self, spec: str) -> str:
        """numpy's formatting: ``f"{x:.3f}"`` for 0-d arrays; ``f"{x}"`` is ``str(x)``."""
        return str(self) if not spec else format(self._data, spec)

    def item(self, *index: Any) -> Any:
        """One element as a Python scalar, like numpy's ``item``: no index for a size-1 array,
        a flat index (``x.item(3)``) or one index per dim (``x.item(0, 1)``, ``x.item((0, 1))``).

        >>> create([[1.0, 2.0], [3.0, 4.0]]).item(3), create([[1, 2], [3, 4]]).item(0, 1)
        (4.0, 2)
        """
        data = self._data
        if not index:
            if data.size != 1:
                raise OpError(f"item: array has {data.size} elements (shape {self.shape}); "
                              f"only size-1 arrays convert to a scalar; give an index "
                              f"(x.item(i) or x.item(i, j, ...))")
            return data.item()
        try:
            return data.item(*index)
        except IndexError as exc:
            raise NdIndexError(f"item: index {index if len(index) > 1 else index[0]!r} is out of "
                               f"range for an array of shape {self.shape} ({exc})") from None
        except (ValueError, TypeError) as exc:
            raise OpError(f"item: {exc} (index {index!r}, array of shape {self.shape}); give "
                          f"one flat index or one index per dim") from None

    @property
    def strides(self) -> tuple[int, ...]:
        """Bytes to step in each dim of the buffer (numpy's ``strides``).

        >>> create([[1.0, 2.0], [3.0, 4.0]]).strides
        (8, 4)
        """
        return self._data.strides

    def get_double(self, *index: int) -> float:
        """Element at ``index`` as a float (ND4J ``getDouble``); no index for size-1 arrays."""
        return float(self._element(index, "get_double") if index else self.item())

    getDouble = get_double

    def get_int(self, *index: int) -> int:
        """Element at ``index`` as an int (ND4J ``getInt``); no index for size-1 arrays."""
        return int(self._element(index, "get_int") if index else self.item())

    getInt = get_int

    def _element(self, index: tuple, what: str, value: Any = None, store: bool = False) -> Any:
        """Read (or, with ``store``, write) one element, naming ``what`` on a bad index."""
        data = self._data
        if len(index) == 1 and data.ndim > 1:  # ND4J: one index into a matrix is a linear index
            index = (index[0] if index[0] >= 0 else index[0] + data.size,)
            if not 0 <= index[0] < data.size:
                raise NdIndexError(f"{what}: linear index {index[0]} is out of range for an array "
                                   f"of shape {list(data.shape)} ({data.size} elements)")
            index = np.unravel_index(index[0], data.shape)
        try:
            if store:
                data[index] = value
                return None
            out = data[index]
        except IndexError as exc:
            raise NdIndexError(f"{what}: index {list(index)} is out of range for an array of "
                               f"shape {list(data.shape)} ({exc})") from None
        if np.ndim(out) != 0:
            raise NdIndexError(f"{what}: index {list(index)} names a sub-array of shape "
                               f"{list(np.shape(out))}, not one element, of an array of shape "
                               f"{list(data.shape)}; give one index per dimension")
        return out

    def _guard_mutation(self, what: str) -> None:
        if CURRENT_TRACE.get() is not None:
            raise TracingError(f"{what} inside a graph_scope would change an array outside the "
                               f"trace's order of operations; use a functional op (nd.where, "
                               f"scatter_update) or an in-place op such as addi, which is traced")

    def put_scalar(self, *index_and_value: Any) -> "NDArray":
        """Set one element in place (ND4J ``putScalar(i, j, ..., value)``); returns self."""
        self._guard_mutation("put_scalar")
        if not index_and_value:
            raise NdIndexError("put_scalar: give the element's indices and then the value")
        *index, value = index_and_value
        self._element(tuple(index), "put_scalar", value, store=True)
        return self

    putScalar = put_scalar

    def dup(self, order: str = "c") -> "NDArray":
        """A copy with its own buffer (ND4J ``dup``)."""
        return NDArray(np.array(self._data, order=order.upper(), copy=True))

    def assign(self, value: Any) -> "NDArray":
        """Overwrite every element in place with ``value`` (broadcast); returns self."""
        self._guard_mutation("assign")
        self._data[...] = to_value(value)
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        self._guard_mutation("item assignment")
        self._data[key._data if isinstance(key, NDArray) else key] = to_value(value)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d NDArray")
        return len(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu":
            raise TypeError(f"only integer arrays can be used as an index, not {self.dtype}")
        return int(self.item())

    def __pos__(self) -> "NDArray":
        return self._apply(REGISTRY["cast"], [self], {"dtype": self.dtype})

    # -- bitwise operators: on bools the logical ops (traced); on integers numpy's bitwise
    # functions on the buffers (no op yet: eager only, refused inside a trace, named) ----------
    def _bitwise(self, fn: Any, symbol: str, args: tuple) -> Any:
        if fn in _LOGICAL and all(_is_bool(a) for a in args):
            return self._apply(REGISTRY[_LOGICAL[fn]], list(args), {})
        return self._numpy_fallback(
            f"the {symbol} operator on {self.dtype} arrays", lambda wrap: wrap(np.asarray(fn(*(
                a._data if isinstance(a, NDArray) else a for a in args)))),
            "use it outside the graph_scope / @nd.compile function (no bitwise op yet)")

    __and__, __rand__ = _bitwise_operator(np.bitwise_and, "&")
    __or__, __ror__ = _bitwise_operator(np.bitwise_or, "|")
    __xor__, __rxor__ = _bitwise_operator(np.bitwise_xor, "^")
    __lshift__, __rlshift__ = _bitwise_operator(np.left_shift, "<<")
    __rshift__, __rrshift__ = _bitwise_operator(np.right_shift, ">>")

    def __invert__(self) -> Any:
        return self._bitwise(np.invert, "~", (self,))

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", prefix="NDArray(", threshold=200)
        return f"NDArray({body}, dtype={dtype_name(self._data.dtype)})"

    def __str__(self) -> str:
        return str(self._data)

    def __reduce__(self) -> tuple:
        return (NDArray, (self._data,))
