"""Data types: ND4J's ``DataType`` names next to numpy-style names, all plain ``np.dtype``.

There is no wrapper class: a dtype is a ``numpy.dtype`` everywhere, so shapes/dtypes
inferred for graphs compare directly with what numpy produces eagerly.

>>> from samediff.dtypes import FLOAT, to_dtype
>>> to_dtype("float") == FLOAT == to_dtype("float32")
True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import NdDTypeError

# ND4J names (DataType.FLOAT, ...)
DOUBLE = np.dtype(np.float64)
FLOAT = np.dtype(np.float32)
HALF = np.dtype(np.float16)
LONG = np.dtype(np.int64)
INT = np.dtype(np.int32)
SHORT = np.dtype(np.int16)
BYTE = np.dtype(np.int8)
UBYTE = np.dtype(np.uint8)
UINT16 = np.dtype(np.uint16)
UINT32 = np.dtype(np.uint32)
UINT64 = np.dtype(np.uint64)
BOOL = np.dtype(np.bool_)
COMPLEX64 = np.dtype(np.complex64)
COMPLEX128 = np.dtype(np.complex128)

# numpy-style names
float64, float32, float16 = DOUBLE, FLOAT, HALF
complex64, complex128 = COMPLEX64, COMPLEX128
int64, int32, int16, int8, uint8 = LONG, INT, SHORT, BYTE, UBYTE
bool_ = BOOL

#: The string type (ND4J's ``DataType.UTF8``): numpy >= 2's variable-width ``StringDType``, so a
#: string array is a plain numpy array like every other here. Like the storage types it is
#: held, moved and compared but not computed on: only the ops flagged ``strings=True`` in the
#: op table take it (identity, cast, reshape, concat, gather, equal, where..., and the string
#: ops of ``samediff/ops/strings.py``); every other op refuses it by name. On numpy < 2 there is
#: no such dtype: ``UTF8`` (and every name of it) raises ``NdDTypeError``.
_StringDType = getattr(getattr(np, "dtypes", None), "StringDType", None)
_UTF8 = np.dtype(_StringDType()) if _StringDType is not None else None
_UTF8_NAMES = ("utf8", "string", "str")
_NO_UTF8 = "UTF8 tensors need numpy >= 2 (its StringDType); this numpy is " + np.__version__


def has_utf8() -> bool:
    """Whether this numpy has the UTF8 dtype (numpy >= 2)."""
    return _UTF8 is not None


def _utf8() -> np.dtype:
    """The UTF8 dtype, or the named error on a numpy without it."""
    if _UTF8 is None:
        raise NdDTypeError(_NO_UTF8)
    return _UTF8


def __getattr__(name: str) -> Any:
    # ``UTF8``/``utf8`` resolve lazily so that numpy < 2 raises the named error on use
    # (``from samediff.dtypes import UTF8`` included) rather than exporting a None
    if name in ("UTF8", "utf8"):
        return _utf8()
    raise AttributeError(f"module 'samediff.dtypes' has no attribute {name!r}")


def is_string(dt: Any) -> bool:
    """Whether ``dt`` is the UTF8 (string) dtype.

    >>> import numpy as np
    >>> is_string(np.dtypes.StringDType()), is_string(np.float32)
    (True, False)
    """
    return _UTF8 is not None and isinstance(dt, _StringDType)


def as_utf8(arr: np.ndarray, where: str = "") -> np.ndarray:
    """``arr`` as a UTF8 array when it holds text: numpy's fixed-width unicode (``<U``), or an
    object array whose elements are all ``str``; a UTF8 array as it is. Anything else is
    returned unchanged (the caller's checks refuse what they refuse). Object arrays of other
    things are never converted: they are refused as before, by their dtype. (An empty object
    array holds no non-str element: it becomes an empty UTF8 array.)"""
    kind = arr.dtype.kind
    if kind == "U" or (kind == "O" and all(type(v) is str for v in arr.flat)):
        return arr.astype(_utf8())
    if kind == "T" and _UTF8 is None:  # (cannot happen: "T" only exists on numpy 2)
        raise NdDTypeError(f"{where}{_NO_UTF8}")
    return arr

#: Default floating type for Python float lists and random ops (ND4J's default is FLOAT).
DEFAULT_FLOAT = FLOAT
#: Default integer type for Python int lists (ND4J's ``Nd4j.createFromArray(int...)`` gives INT;
#: we follow numpy/torch and use LONG so values never silently overflow).
DEFAULT_INT = LONG

_BY_NAME = {
    "double": DOUBLE, "float": FLOAT, "half": HALF, "long": LONG, "int": INT, "short": SHORT,
    "byte": BYTE, "ubyte": UBYTE, "uint16": UINT16, "uint32": UINT32, "uint64": UINT64,
    "bool": BOOL, "complex64": COMPLEX64, "complex128": COMPLEX128,
}
_ND4J_NAME = {v: k.upper() for k, v in _BY_NAME.items()}
#: The compute types: every op takes them.
SUPPORTED = frozenset(_BY_NAME.values())

#: Storage types (ml_dtypes' numpy extension types, when it is installed -- the ``onnx`` extra
#: brings it): arrays, placeholders, constants and saved graphs hold them, ``cast`` converts to
#: and from them, and ``identity`` passes them on. Other ops refuse them by name (cast to FLOAT
#: to compute): numpy has no arithmetic of its own for them and the kernels none at all. The
#: ONNX importer computes on them this way (widen, compute, round back), as ONNX runtimes do.
STORAGE_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                 "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2",
                 "uint2")
_storage: dict[str, np.dtype] | None = None


def storage_types() -> dict[str, np.dtype]:
    """name -> dtype of the storage types this machine has (empty without ml_dtypes). The
    import (~0.15 s) happens on first use, not with nd4py's."""
    global _storage
    if _storage is None:
        try:
            import ml_dtypes
        except ImportError:
            _storage = {}
        else:
            _storage = {n: np.dtype(getattr(ml_dtypes, n)) for n in STORAGE_NAMES
                        if hasattr(ml_dtypes, n)}
    return _storage


def is_storage(dt: Any) -> bool:
    """Whether ``dt`` is a storage type (an ml_dtypes type; never imports it)."""
    return getattr(getattr(dt, "type", None), "__module__", "") == "ml_dtypes"


def is_supported(dt: np.dtype) -> bool:
    """A compute, storage or the string type."""
    return dt in SUPPORTED or is_storage(dt) or is_string(dt)


def storage_compute_type(dt: np.dtype) -> np.dtype:
    """The compute type a storage type widens to exactly: FLOAT for the floats, BYTE/UBYTE
    for the 4- and 2-bit integers."""
    name = dt.name
    if name.startswith("uint"):
        return UBYTE
    return BYTE if name.startswith("int") else FLOAT


#: Types users ask for that nd4py refuses on purpose, and why.
_REFUSED = {
    "bfloat16": "a storage type that needs the ml_dtypes package (pip install ml_dtypes)",
}


def supported_names() -> str:
    """The supported types, ND4J name and numpy name: ``'BOOL (bool), HALF (float16), ...'``
    (and ``UTF8 (string)`` where numpy has it)."""
    names = ", ".join(f"{_ND4J_NAME[dt]} ({dt})"
                      for dt in sorted(SUPPORTED, key=lambda d: (d.kind, d.itemsize)))
    return names + (", UTF8 (string)" if _UTF8 is not None else "")


def refused(name: str) -> bool:
    """Whether ``name`` names a type nd4py refuses on purpose (complex, bfloat16)."""
    return any(k in name.lower() for k in _REFUSED)


def unsupported(dt: Any, where: str = "", hint: str = "") -> NdDTypeError:
    """The error for an unsupported type ``dt``: which it is, why (if known), what is supported."""
    name = str(dt)
    if name.lower() in STORAGE_NAMES and storage_types():
        reason = "a storage type, which this cannot take (cast it to FLOAT first)"
    else:
        reason = next((w for k, w in _REFUSED.items() if k in name.lower()), "not supported")
    return NdDTypeError(f"{where}data type {name} is {reason}; supported: {supported_names()}{hint}")


def to_dtype(value: Any) -> np.dtype:
    """Turn a DataType name, numpy dtype/type or Python type into a supported ``np.dtype``."""
    if isinstance(value, np.dtype):
        dt = value
    elif (isinstance(value, str) and (value.lower() in _UTF8_NAMES
                                      or value.lower().startswith("stringdtype"))) \
            or value is str:
        # ("StringDType128" is numpy's own name: what an attribute's JSON form holds)
        dt = _utf8()
    elif isinstance(value, str) and value.lower() in _BY_NAME:
        dt = _BY_NAME[value.lower()]
    elif isinstance(value, str) and value.lower() in storage_types():
        dt = storage_types()[value.lower()]
    elif isinstance(value, str) and refused(value):
        raise unsupported(value)
    else:
        try:
            dt = np.dtype(value)
        except TypeError as exc:
            raise NdDTypeError(f"unknown data type {value!r}; use e.g. nd.FLOAT, 'float32', "
                               f"np.int64; supported: {supported_names()}") from exc
    if dt.kind == "U":  # np.str_ / "<U5": text is held as UTF8 (variable width)
        dt = _utf8()
    if dt not in SUPPORTED and not is_storage(dt) and not is_string(dt):
        raise unsupported(dt)
    return dt


def nd4j_name(dt: np.dtype) -> str:
    """ND4J's name for a dtype, e.g. ``FLOAT`` for float32, ``UTF8`` for strings."""
    if is_string(dt):
        return "UTF8"
    return _ND4J_NAME.get(np.dtype(dt), str(dt))


def dtype_name(dt: np.dtype) -> str:
    """The name ``to_dtype`` reads back: numpy's (``float32``), ``utf8`` for strings."""
    return "utf8" if is_string(dt) else np.dtype(dt).name


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" and not is_storage(dt)


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"
