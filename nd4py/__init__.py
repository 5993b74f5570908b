"""nd4py: ND4J-style arrays for Python — eager ops, SameDiff graphs, tracing and compilation.

``import nd4py as nd`` gives the eager API: creation functions, every op of the table at top
level (``nd.exp``, ``nd.matmul``...) and in ND4J-like namespaces (``nd.math``, ``nd.nn``,
``nd.linalg``, ``nd.random``), the ``NDArray`` type, data types under ND4J names (``nd.FLOAT``)
and numpy names (``nd.float32``), ``SameDiff`` for define-and-run graphs, ``nd.grad`` /
``nd.value_and_grad`` for gradients of Python functions, ``nd.compile`` / ``nd.graph_scope``
to trace and compile, and ``nd.profile`` / ``nd.profile_summary`` to see where the time goes.

>>> import nd4py as nd
>>> x = nd.create([[1.0, -2.0], [3.0, 4.0]])
>>> nd.nn.relu(x).sum().item()
8.0
>>> x.mmul(nd.eye(2)).shape
(2, 2)
"""
from __future__ import annotations

from typing import Any

from samediff import (CorruptFileError, FormatVersionError, GradientError,  # noqa: F401
                      GraphError, NDArray, NdDTypeError, NdError, OpError, PlaceholderError,
                      SameDiff, SaveError, SDVariable, SerializationError, UnknownOpError,
                      UnknownVariableError, UnsafeFileError, VariableType, WeightInit, bind,
                      create)
from samediff.dtypes import (BOOL, BYTE, COMPLEX64, COMPLEX128, DOUBLE, FLOAT, HALF,  # noqa: F401
                             INT, LONG, SHORT, UBYTE, UINT16, UINT32, UINT64, bool_, complex64,
                             complex128, float16, float32, float64, int8, int16, int32, int64,
                             nd4j_name, to_dtype, uint8)
from samediff.dtypes import refused as _refused, storage_types as _storage_types, \
    unsupported as _unsupported
from samediff import dtypes as _dtypes
from samediff import udf  # noqa: F401
from samediff import evaluation  # noqa: F401
from samediff.ir import did_you_mean as _did_you_mean
from samediff.errors import ConfigError, NdIndexError, OpIndexError, TracingError  # noqa: F401
from samediff.dlpack import from_dlpack  # noqa: F401
from samediff.functional import grad, value_and_grad  # noqa: F401
from samediff.control import BranchMismatchError, CaptureError, PredicateError  # noqa: F401
from samediff.control import cond as _cond, switch as _switch
from samediff.control import CarryError, fori_loop, scan, while_loop  # noqa: F401
from samediff.jacobians import hessian, jacfwd, jacrev  # noqa: F401
from samediff.profiler import Profile, profile, profile_summary  # noqa: F401
from samediff.losses import LossError, LossNamespace, LossReduce  # noqa: F401
from samediff.frontends import ND4J
from samediff.frontends.cnn_config import Conv1DConfig, Conv2DConfig, Pooling2DConfig  # noqa: F401
from samediff.frontends.cnn_config import (  # noqa: F401
    Conv3DConfig, DeConv2DConfig, DeConv3DConfig)
from samediff.frontends.cnn_config import (  # noqa: F401
    LocalResponseNormalizationConfig, Pooling1DConfig, Pooling3DConfig)
from samediff.namespaces import OpNamespace, op_namespaces
from tracing import (CompiledFunction, CompiledGraphFunction, GraphScope,  # noqa: F401
                     LazyArray, RetraceWarning, cache_stats, clear_cache, compile, compile_mode,
                     get_compile_mode, graph_scope, set_cache_size, set_compile_mode)

def cond(pred: Any, *args: Any, **bodies: Any) -> Any:
    """``true_fn(*operands) if pred else false_fn(*operands)`` — ``nd.cond(pred, true_fn,
    false_fn, *operands)``, JAX's ``lax.cond``: eagerly plain Python; traced
    (``graph_scope``/``@nd.compile``) or on SameDiff variables, one ``cond`` node whose two
    branches are sub-graphs, and only the taken one runs (forward and backward). ``pred`` is
    a scalar bool or integer; both branches return the same structure, shapes and dtypes.
    See ``samediff.control.cond`` for captures and the op form.

    >>> import nd4py as nd
    >>> x = nd.create([1.0, 2.0])
    >>> nd.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x).numpy().tolist()
    [2.0, 4.0]
    >>> @nd.compile
    ... def f(v):
    ...     return nd.cond(v.sum() > 0, lambda a: a * 2, lambda a: -a, v)
    >>> f(nd.create([-1.0, -2.0])).numpy().tolist()
    [1.0, 2.0]
    """
    return _cond(pred, *args, **bodies)


def switch(index: Any, branches: Any, *operands: Any) -> Any:
    """``branches[index](*operands)`` — ``nd.switch(index, branches, *operands)``, JAX's
    ``lax.switch``: ``index`` a scalar integer, clamped into range; eagerly plain Python;
    traced or on SameDiff variables a chain of ``cond`` nodes, only the taken branch running
    (forward and backward). See ``samediff.control.switch``.

    >>> import nd4py as nd
    >>> fs = [lambda v: v + 1.0, lambda v: v * 10.0]
    >>> @nd.compile
    ... def f(i, v):
    ...     return nd.switch(i, fs, v)
    >>> [f(nd.create(i), nd.create([1.0])).numpy().tolist() for i in (0, 1, 5)]
    [[2.0], [10.0], [10.0]]
    """
    return _switch(index, branches, *operands)


#: ND4J's name of the traced proxy (seed 001)
LazyINDArray = LazyArray

from samediff.evaluation import (ROC, Evaluation, EvaluationBinary,  # noqa: F401
                                 RegressionEvaluation, ROCBinary, ROCMultiClass)
from samediff.training import (AdaDelta, AdaGrad, AdaMax, Adam, AdamW, AMSGrad,  # noqa: F401
                               Momentum, Nadam, Nesterovs, NoOp, ProfilingListener, RmsProp, Sgd,
                               TrainingConfig)

from . import random  # noqa: F401
from . import array_api  # noqa: F401  (x.__array_namespace__(), issue 11)
from .creation import (arange, array, empty, eye, full, full_like, linspace, ones,  # noqa: F401
                       ones_like, scalar, value_array_of, zeros, zeros_like)

# nd.math, nd.nn, nd.linalg, nd.base: the ND4J front end's layout (samediff/frontends/nd4j.py)
globals().update(op_namespaces(ND4J, "nd", bind, eager_only=True))
_ALL_OPS = OpNamespace("nd4py", ND4J, None, bind)
loss = LossNamespace()

# ND4J's spellings of functions nd4py defines under Python names (the op spellings are in the
# ND4J front end's table): Nd4j.graphScope(), Nd4j.rand(DataType.FLOAT, 128, 256) (a leading
# data type, which the ops' own argument rule would take for a shape), seed 003's Nd4j.nrand.
graphScope = graph_scope
rand = random.rand
randn = random.randn
nrand = random.randn


class _DataType:
    """ND4J's ``DataType`` enum: ``nd.DataType.FLOAT`` is ``nd.FLOAT`` (a numpy dtype);
    ``BFLOAT16`` and the float8/4-bit types are storage types when ml_dtypes is installed
    (``samediff.dtypes``); ``UTF8`` is numpy's ``StringDType`` (numpy >= 2). Types nd4py does
    not support (``COMPRESSED``...) raise ``NdDTypeError``."""

    BOOL, BYTE, UBYTE, SHORT, INT, LONG = BOOL, BYTE, UBYTE, SHORT, INT, LONG
    UINT16, UINT32, UINT64, HALF, FLOAT, DOUBLE = UINT16, UINT32, UINT64, HALF, FLOAT, DOUBLE
    INT8, INT16, INT32, INT64, UINT8 = BYTE, SHORT, INT, LONG, UBYTE
    FLOAT16 = HALF
    COMPLEX64, COMPLEX128 = COMPLEX64, COMPLEX128  # not in ND4J: numpy's and the array API's

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name.lower() in _storage_types():  # BFLOAT16, FLOAT8_E4M3FN...: with ml_dtypes
            return _storage_types()[name.lower()]
        if name == "UTF8":  # (numpy < 2: the named error)
            return _dtypes.UTF8
        if _refused(name):
            raise _unsupported(name, f"DataType.{name}: ")
        raise NdDTypeError(f"DataType.{name}: data type {name} is not supported (no "
                           f"compressed or unknown types); supported: UTF8, "
                           f"{', '.join(sorted(k for k in dir(type(self)) if k.isupper()))}")

    def values(self) -> list:
        """The supported types (ND4J's ``DataType.values()``)."""
        utf8 = [_dtypes.UTF8] if _dtypes.has_utf8() else []  # (numpy >= 2)
        return [FLOAT, DOUBLE, HALF, LONG, INT, SHORT, BYTE, UBYTE, UINT16, UINT32, UINT64, BOOL,
                COMPLEX64, COMPLEX128, *utf8]

    def __repr__(self) -> str:
        return "nd4py.DataType"


DataType = _DataType()

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Every op of the table is a top-level function: ``nd.exp(x)``, ``nd.concat([a, b])``."""
    if name.startswith("_"):
        raise AttributeError(name)
    if name.lower() in _storage_types():  # nd.BFLOAT16, nd.bfloat16 (storage types: dtypes.py)
        return _storage_types()[name.lower()]
    if name in ("UTF8", "utf8"):  # resolved on use: numpy < 2 raises the named error
        return _dtypes.UTF8
    try:
        fn = getattr(_ALL_OPS, name)
    except AttributeError:
        raise AttributeError(f"module 'nd4py' has no attribute {name!r}{_why_missing(name)}") \
            from None
    globals()[name] = fn  # later lookups are plain module attribute reads
    return fn


def _why_missing(name: str) -> str:
    """nd.BFLOAT16: why it is refused; ND4J's op classes (``AddOp``, ``AddBpOp``) and
    executioner: the function that replaces them; a misspelling: the closest names."""
    if _refused(name):
        return f": {_unsupported(name)}"
    if name in ("getExecutioner", "get_executioner"):
        return ("; ops run when called (nd.add(a, b)), or record inside nd.graph_scope(): "
                "there is no executioner")
    base = name[:-4] if name.endswith("BpOp") else name[:-2] if name.endswith("Op") else None
    op = _op_for_class(base) if base else None
    if op is not None:
        grad = " (its gradient: nd.grad, or sd.calculate_gradients)" if name.endswith("BpOp") else ""
        return (f"; ND4J's op classes are functions here: nd.{op}(...) runs it{grad}, "
                f"and a UDF's exec() can call it")
    return _did_you_mean(name, [n for n in __dir__() if not n.startswith("_")])


def _op_for_class(base: str) -> str | None:
    """``"Add"`` -> ``"add"``, ``"LeakyRelu"`` -> ``"leaky_relu"``, if such an op exists."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in base).lstrip("_")
    return next((n for n in (snake, base[:1].lower() + base[1:]) if hasattr(_ALL_OPS, n)), None)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_ALL_OPS)))
