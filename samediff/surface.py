"""One operator and method surface shared by ``NDArray``, ``LazyArray`` and ``SDVariable``.

Every method is generated from the op table; a class only says how to *apply* an op
(``_apply``) and how to do an in-place update (``_inplace``). Adding an op to the table adds the
method everywhere.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Iterator

import numpy as np

from .frontends import ND4J, names_to_ops
from .frontends.nd4j import bind_arguments, split_call
from .frontends.numpy import (DTYPE_OPS, numpy_function, numpy_index, numpy_ufunc,
                              with_dtype)
from .dtypes import is_string
from .errors import ArgumentConflictError, ConcretizationError, NdAttributeError, OpError
from .ir import did_you_mean
from .ops import REGISTRY, OpDef
from .ops.indexing import index_to_spec


class OpSurface:
    """Mixin: Python operators and one method per op and per ND4J name, all via ``_apply``.

    Concrete classes define ``_apply(op, inputs, attrs, name=None, rec=None)`` (run or record
    one op; ``rec``: the attribute record of ``attrs`` when the caller has it) and
    ``_inplace(op, inputs, attrs, operator)`` (``addi``-style update; ``operator`` is True for
    ``+=`` and friends, which may rebind instead of mutating).
    """

    __slots__ = ()
    #: Whether methods take ND4J's leading output name (``v.sub("pred", b)``): SDVariables.
    _leading_name = False
    #: Where ``bind`` records ops on this value: a graph's recorder for graph variables
    #: (``samediff/recorder.py``), None for arrays (eager, or the current trace).
    _recorder: Any = None

    # -- operators ------------------------------------------------------------------------
    __hash__ = object.__hash__  # comparisons are elementwise, identity stays the hash

    def __getitem__(self, key: Any) -> Any:
        try:
            spec = index_to_spec(key)
        except TypeError:  # integer arrays and masks: samediff/frontends/numpy.py
            return numpy_index(self._apply, self._numpy_fallback, self, key)
        return self._apply(_STRIDED_SLICE, [self], {"index": spec})

    # -- the numpy protocols: ufuncs and functions map onto ops (samediff/frontends/numpy.py) --
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return numpy_ufunc(self._apply, self._numpy_fallback, ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        return numpy_function(self._apply, self._numpy_fallback, func, args, kwargs)

    @staticmethod
    def _numpy_fallback(what: str, run: Callable, hint: str) -> Any:
        """A numpy call with no op. Graph variables have no data: refuse (arrays run numpy)."""
        raise OpError(f"{what} has no nd4py op: it cannot be recorded into a graph; {hint}")

    # -- numpy's methods --------------------------------------------------------------------
    def astype(self, dtype: Any, copy: bool = True) -> Any:
        """This array as ``dtype`` (the ``cast`` op); ``copy=False`` returns it unchanged when
        the dtype already matches."""
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return self._apply(REGISTRY["cast"], [self], {"dtype": np.dtype(dtype)})

    def copy(self) -> Any:
        """A copy (numpy's name for ``dup``)."""
        return self.dup()

    def ravel(self, order: str = "C") -> Any:
        """All elements as a 1-D array (numpy's ``ravel``: the ``flatten`` op, a view when the
        buffer allows), read in 'C' (row-major) or 'F' (column-major) order.

        >>> from samediff import create
        >>> create([[1, 2], [3, 4]]).ravel("F").tolist()
        [1, 3, 2, 4]
        """
        return self._apply(REGISTRY["flatten"], [self], {"order": order.lower()})

    def __iter__(self) -> Iterator[Any]:
        """Rows along the first dim. A 0-d value is not iterable (``iter`` raises TypeError
        at once, as numpy's does), so ``np.iterable(x.mean())`` is False and matplotlib
        treats it as a scalar."""
        shape = self.shape
        if not shape:
            raise TypeError("iteration over a 0-d array")
        if shape[0] < 0:
            raise TypeError(f"iteration over this {type(self).__name__}: its first dim is unknown "
                            f"until run time (shape {tuple(shape)}); index it (v[i]) instead")
        return (self[i] for i in range(shape[0]))

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: suggest the nearest method names (lazily).
        message = f"{type(self).__name__!r} object has no attribute {name!r}"
        if name.startswith("_"):
            raise AttributeError(message)
        cls = type(self)
        raise NdAttributeError(message, lambda: did_you_mean(
            name, [n for n in dir(cls) if not n.startswith("_")]))

    def clip(self, min: Any = None, max: Any = None) -> Any:
        """Clip to ``[min, max]`` (either may be None); array bounds use maximum/minimum."""
        out = self
        if min is not None:
            out = out._apply(REGISTRY["maximum"], [out, min], {})
        if max is not None:
            out = out._apply(REGISTRY["minimum"], [out, max], {})
        return out

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __divmod__(self, other: Any) -> tuple:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> tuple:
        return other // self, other % self

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if isinstance(other, str) and is_string(self.dtype):  # utf8 == "text": compared
            return self._apply(REGISTRY["eq"], [self, np.array(other, self.dtype)], {})
        if _incomparable(other):  # numpy 2: x == None is elementwise False
            return self._apply(REGISTRY["zeros_like"], [self], {"dtype": np.dtype(bool)})
        return self._apply(REGISTRY["eq"], [self, other], {})

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if isinstance(other, str) and is_string(self.dtype):
            return self._apply(REGISTRY["neq"], [self, np.array(other, self.dtype)], {})
        if _incomparable(other):
            return self._apply(REGISTRY["ones_like"], [self], {"dtype": np.dtype(bool)})
        return self._apply(REGISTRY["neq"], [self, other], {})

    # -- Python conversions. ``NDArray`` reads its buffer; a symbolic value has none while the
    # function runs, and says so the same way everywhere (``read_error``): ``nd.grad``'s
    # values, SameDiff variables and, through ``NDArray._data``, traced arrays.
    def __bool__(self) -> bool:
        raise self._read_error("bool(), e.g. `if`")

    def __float__(self) -> float:
        raise self._read_error("float()")

    def __int__(self) -> int:
        raise self._read_error("int()")

    def __complex__(self) -> complex:
        raise self._read_error("complex()")

    def __index__(self) -> int:
        raise self._read_error("use as an index")

    def item(self) -> Any:
        """The single value as a Python scalar; a symbolic value has none yet (raises)."""
        raise self._read_error("item()")

    def _read_error(self, what: str) -> ConcretizationError:
        """The error for reading this symbolic value's data by ``what`` (classes with data
        never get here; graph values override it to name their variable and context)."""
        return read_error(f"a {type(self).__name__}, in {what}", "while it is symbolic; "
                          f"{KEEP_IN_OPS}")

    @property
    def T(self) -> Any:
        """Transpose (reverse all dims), like numpy's ``.T``."""
        return self.transpose()

    @property
    def real(self) -> Any:
        """Real part, numpy's attribute (the ``real`` op: a new array, not a view)."""
        return self._apply(REGISTRY["real"], [self], {})

    @property
    def imag(self) -> Any:
        """Imaginary part, numpy's attribute (the ``imag`` op; zeros for real arrays)."""
        return self._apply(REGISTRY["imag"], [self], {})

    # -- ND4J's metadata methods (numpy's are properties: ``dtype``, ``ndim``, ``size``) --------
    def data_type(self) -> np.dtype:
        """ND4J's ``dataType()``: the data type (``nd.DataType.FLOAT`` is ``nd.FLOAT``)."""
        return self.dtype

    dataType = data_type

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """The array API standard namespace (``nd4py.array_api``, which registers itself)."""
        if _ARRAY_NAMESPACE is None:
            raise RuntimeError("the array API namespace is not loaded: import nd4py.array_api")
        return _ARRAY_NAMESPACE(api_version)


#: The remedy every "cannot read a symbolic value" error gives (traced arrays, ``nd.grad``'s
#: values, SameDiff variables): one wording, from one place.
KEEP_IN_OPS = ("keep the computation in ops (nd.where(cond, a, b) or nd.cond(pred, true_fn, "
               "false_fn, *operands) instead of `if`; nd.fori_loop, nd.while_loop or nd.scan "
               "instead of a Python loop whose count or condition is a traced value)")


def read_error(description: str, hint: str) -> ConcretizationError:
    """The error for reading the data of a symbolic value: ``description`` names the value
    (and the conversion), ``hint`` says where it is symbolic and what to do instead.

    >>> str(read_error("produced by gt (node 1)", "inside f: " + KEEP_IN_OPS))[:46]
    'cannot read the data of a traced array (produc'
    """
    return ConcretizationError(f"cannot read the data of a traced array ({description}) {hint}")


#: ``api_version -> namespace``, set by ``nd4py.array_api`` when imported (imports flow down).
_ARRAY_NAMESPACE: Callable[[Any], Any] | None = None


def set_array_namespace(factory: Callable[[Any], Any]) -> None:
    global _ARRAY_NAMESPACE
    _ARRAY_NAMESPACE = factory


def _incomparable(other: Any) -> bool:
    """Values ``==`` compares as unequal to every element, as numpy 2 does: None, strings,
    arbitrary objects (not numbers, arrays, sequences or graph values)."""
    if other is None or isinstance(other, (str, bytes)):
        return True
    if isinstance(other, (numbers.Number, np.generic, np.ndarray, list, tuple, OpSurface)):
        return False
    return not (hasattr(other, "__array__") or hasattr(other, "__array_interface__"))


def _binary(op_name: str, reflected: bool = False) -> Callable:
    def method(self: OpSurface, other: Any) -> Any:
        op = REGISTRY[op_name]
        return self._apply(op, [other, self] if reflected else [self, other], {})
    method.__name__ = op_name
    return method


def _unary(op_name: str) -> Callable:
    def method(self: OpSurface) -> Any:
        return self._apply(REGISTRY[op_name], [self], {})
    return method


def _inplace_method(op_name: str, operator: bool) -> Callable:
    def method(self: OpSurface, other: Any) -> Any:
        return self._inplace(REGISTRY[op_name], [self, other], {}, operator)
    method.__name__ = op_name + "i"
    method.__doc__ = f"In-place ``{op_name}``: writes the result into this array and returns it."
    return method


def _op_method(op: OpDef) -> Callable:
    def method(self: OpSurface, *args: Any, **kwargs: Any) -> Any:
        if not self._leading_name and (not kwargs or "dtype" not in kwargs):
            # the hot path (x.sum(1)): the argument rule, memoized per call form
            inputs, attrs, name, rec = bind_arguments(op, (self, *args), kwargs)
            return self._apply(op, inputs, attrs, name, rec)
        if self._leading_name and args and isinstance(args[0], str) and _name_first(op, args):
            if "name" in kwargs:
                raise ArgumentConflictError(f"{op.name}() got multiple values for the output "
                                            f"name: {args[0]!r} (first argument) and "
                                            f"name={kwargs['name']!r}; give it once")
            kwargs, args = {**kwargs, "name": args[0]}, args[1:]
        if self._leading_name and any(isinstance(a, str) for a in args) and not any(
                kind.name in ("str", "dtype") for kind, _ in op.attr_kinds.values()):
            bad = next(a for a in args if isinstance(a, str))
            raise OpError(f"{op.name}: unexpected string {bad!r} (only a leading output name may "
                          f"be a string); expected v.{method.__name__}([name: str], "
                          f"{_signature(op)})")
        # numpy's dtype= (x.sum(dtype=np.float64)): the numpy front end's rule
        dtype = kwargs.pop("dtype", None) if op.name in DTYPE_OPS else None
        try:
            inputs, attrs, name = split_call(op, (self, *args), kwargs)
        except OpError as exc:
            if not self._leading_name:
                raise
            raise OpError(f"{exc}; expected v.{method.__name__}([name: str], "
                          f"{_signature(op)})") from None
        if dtype is not None:
            return with_dtype(self._apply, op.name, inputs, attrs, dtype, name)
        return self._apply(op, inputs, attrs, name)
    method.__name__ = op.name
    method.__doc__ = f"{op.doc}\n\nOp ``{op.name}`` (inputs {op.inputs}, attrs {dict(op.attr_kinds) or '{}'})."
    return method


def _name_first(op: OpDef, args: tuple) -> bool:
    """Whether a leading string is ND4J's output name (``v.sub("pred", b)``,
    ``v.mean("loss")``) rather than the op's own string argument (``v.castTo("float")``): it
    is, unless the slot it would fill takes a string (a second input, or the first attribute
    when the op has one input) and no other value follows."""
    slots = [k for k, (kind, _) in op.attr_kinds.items()]
    if len(op.inputs) > 1 or op.variadic:
        return True  # inputs are arrays or numbers, never strings
    if not slots:
        return True
    first_kind = op.attr_kinds[slots[0]][0].name
    return first_kind not in ("str", "dtype") or len(args) > 1


def _signature(op: OpDef) -> str:
    return ", ".join([*op.inputs[1:], *(f"{k}={d!r}" for k, (_, d) in op.attr_kinds.items())])


class NdInt(int):
    """An int that can also be called: ``x.rank`` and ND4J's ``x.rank()`` (``length``) both
    give the number; everything else behaves as a plain ``int``."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


_OPERATORS = {
    "__add__": _binary("add"), "__radd__": _binary("add", True),
    "__sub__": _binary("sub"), "__rsub__": _binary("sub", True),
    "__mul__": _binary("mul"), "__rmul__": _binary("mul", True),
    "__truediv__": _binary("div"), "__rtruediv__": _binary("div", True),
    "__floordiv__": _binary("floor_div"), "__rfloordiv__": _binary("floor_div", True),
    "__mod__": _binary("floor_mod"), "__rmod__": _binary("floor_mod", True),
    "__pow__": _binary("pow"), "__rpow__": _binary("pow", True),
    "__matmul__": _binary("matmul"), "__rmatmul__": _binary("matmul", True),
    "__lt__": _binary("lt"), "__le__": _binary("lte"), "__gt__": _binary("gt"),
    "__ge__": _binary("gte"),
    "__and__": _binary("logical_and"), "__rand__": _binary("logical_and", True),
    "__or__": _binary("logical_or"), "__ror__": _binary("logical_or", True),
    "__xor__": _binary("logical_xor"), "__rxor__": _binary("logical_xor", True),
    "__neg__": _unary("neg"), "__abs__": _unary("abs"), "__invert__": _unary("logical_not"),
}
_INPLACE_DUNDERS = {"__iadd__": "add", "__isub__": "sub", "__imul__": "mul",
                    "__itruediv__": "div", "__ipow__": "pow", "__ifloordiv__": "floor_div",
                    "__imod__": "floor_mod"}

_STRIDED_SLICE: OpDef


def install_surface() -> None:
    """Attach operators and one method per op and per ND4J name (``x.leakyRelu()``, the
    ND4J front end's table) to ``OpSurface``, and ND4J's in-place ``addi``-style methods.

    Called once the op table is complete; explicit methods on ``OpSurface`` win over
    generated ones, and generated ones never shadow attributes of the concrete classes.
    """
    global _STRIDED_SLICE
    _STRIDED_SLICE = REGISTRY["strided_slice"]
    for dunder, fn in _OPERATORS.items():
        setattr(OpSurface, dunder, fn)
    for name, op in names_to_ops(ND4J.names, REGISTRY.values()).items():
        if op.method and name not in OpSurface.__dict__:
            setattr(OpSurface, name, _op_method(op))
    for op_name in ND4J.inplace:
        setattr(OpSurface, op_name + "i", _inplace_method(op_name, operator=False))
    for dunder, op_name in _INPLACE_DUNDERS.items():
        setattr(OpSurface, dunder, _inplace_method(op_name, operator=True))


def add_op_methods(op: OpDef) -> None:
    """Give ``OpSurface`` a method for an op registered after start-up (a user-defined op)."""
    if op.method and op.name not in OpSurface.__dict__:
        setattr(OpSurface, op.name, _op_method(op))


def remove_op_methods(name: str) -> None:
    method = OpSurface.__dict__.get(name)
    if method is not None and getattr(method, "__name__", None) == name:
        delattr(OpSurface, name)
