"""The array API standard (2024.12) namespace: ``x.__array_namespace__()``.

>>> import nd4py as nd
>>> xp = nd.create([1.0, 2.0]).__array_namespace__()
>>> xp.__name__, xp.__array_api_version__
('nd4py.array_api', '2024.12')
>>> xp.sum(xp.asarray([[1, 2], [3, 4]]), axis=0).tolist()
[4, 6]

Every function maps onto the op table and ends in ``bind`` (``_core.op``), so it runs eagerly
on ``NDArray``, records inside ``nd.graph_scope()`` / ``@nd.compile`` and records into a
SameDiff graph for a graph variable — no op is defined here. This package is the namespace;
its name table is the array API front end, ``samediff.frontends.array_api``, beside the ND4J
and numpy front ends: names map onto ops by its tables (``UNARY``/``BINARY``,
``REDUCTIONS``, ``FFT_AXIS``...) and its call rules, or are composed from ops (``round`` half to even,
``log10``, ``tril``, ``roll``, ``std(correction=2)``...). Data-dependent functions
(``nonzero``, ``unique_*``, ``sort``, ``argsort``, ``searchsorted``) and those without an op
yet (``bitwise_*``, ``nextafter``, ``take_along_axis``) run numpy on the buffers: eager only,
and refused inside a trace with a ``TracingError``.

Dtypes are numpy dtypes, complex64/complex128 included; promotion is the standard's (numpy 2
/ NEP 50: Python scalars are weak; mixing kinds, or int64 with uint64, raises in
``result_type``). Defaults: float64, complex128 and int64, as numpy (``nd.create`` keeps
ND4J's float32 default). Extensions: ``linalg`` and ``fft``. One device: ``"cpu"``.

Libraries that dispatch on ``__array_namespace__`` take nd4py arrays and return them:
scikit-learn with ``array_api_dispatch=True`` and SciPy with ``SCIPY_ARRAY_API=1``
(``tests/test_array_api_libraries.py``). For them the namespace also accepts two numpy call
forms beyond the standard, ``where(condition)`` (``nonzero``) and ``diff(x, n)``, and
``unique_*`` return sorted values, as numpy's ``np.unique`` does.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from samediff.frontends import array_api as _table
from samediff.surface import set_array_namespace

from . import _elementwise, fft, linalg  # noqa: F401
from ._core import (  # noqa: F401
    DEFAULT_COMPLEX,
    DEFAULT_FLOAT,
    DEFAULT_INDEX,
    DEFAULT_INT,
    DTYPES,
    bool,
    complex64,
    complex128,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._creation import (  # noqa: F401
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._dtypes import astype, can_cast, finfo, iinfo, isdtype, result_type  # noqa: F401
from ._functions import (  # noqa: F401
    all,
    any,
    argmax,
    argmin,
    argsort,
    broadcast_arrays,
    broadcast_to,
    concat,
    count_nonzero,
    cumulative_prod,
    cumulative_sum,
    diff,
    expand_dims,
    flip,
    matmul,
    matrix_transpose,
    max,
    mean,
    min,
    moveaxis,
    nonzero,
    permute_dims,
    prod,
    repeat,
    reshape,
    roll,
    searchsorted,
    sort,
    squeeze,
    stack,
    std,
    sum,
    take,
    take_along_axis,
    tensordot,
    tile,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
    unstack,
    var,
    vecdot,
    where,
)

__array_api_version__ = _table.VERSION
_VERSIONS = _table.VERSIONS

e, pi, inf, nan, newaxis = math.e, math.pi, math.inf, math.nan, None

globals().update(_elementwise.FUNCTIONS)


class _Info:
    """``__array_namespace_info__()``: what this namespace supports."""

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        return "cpu"

    def devices(self) -> list:
        return ["cpu"]

    def default_dtypes(self, *, device: Any = None) -> dict:
        return {"real floating": DEFAULT_FLOAT, "complex floating": DEFAULT_COMPLEX,
                "integral": DEFAULT_INT, "indexing": DEFAULT_INDEX}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict:
        if kind is None:
            return dict(DTYPES)
        return {n: d for n, d in DTYPES.items() if isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    return _Info()


def _namespace(api_version: str | None) -> Any:
    if api_version is not None and api_version not in _VERSIONS:
        raise ValueError(f"array API version {api_version!r} is not supported; "
                         f"supported: {_VERSIONS}")
    return sys.modules[__name__]


set_array_namespace(_namespace)

__all__ = sorted(n for n in globals() if not n.startswith("_") and n not in (
    "annotations", "math", "sys", "Any", "set_array_namespace", "DTYPES", "DEFAULT_COMPLEX", "DEFAULT_FLOAT",
    "DEFAULT_INT", "DEFAULT_INDEX")) + ["__array_api_version__", "__array_namespace_info__"]
