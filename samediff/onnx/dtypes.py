"""ONNX element types as numpy dtypes (the converters' and the importer's one mapping)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .table import OnnxImportError

__all__ = ["np_dtype", "elem_type", "tensor"]


def np_dtype(elem_type: int) -> np.dtype:
    from onnx import TensorProto, helper
    if elem_type == TensorProto.STRING:  # (onnx says object; nd4py holds text as UTF8)
        from ..dtypes import UTF8  # (numpy < 2: the named NdDTypeError)
        return UTF8
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:  # noqa: BLE001
        raise OnnxImportError(f"ONNX element type {elem_type} has no numpy dtype") from exc


def elem_type(dtype: Any) -> int:
    """The ONNX element type of a numpy dtype, ``np_dtype``'s inverse (UTF8 text: STRING)."""
    from onnx import TensorProto, helper
    dt = np.dtype(dtype)
    if dt.kind == "T":  # numpy's StringDType (nd4py's UTF8)
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(dt)


def tensor(value: Any, name: str) -> Any:
    """``value`` as an ONNX ``TensorProto`` named ``name`` (UTF8 text as STRING: onnx's
    ``numpy_helper`` reads text from object arrays only)."""
    from onnx import numpy_helper
    arr = np.asarray(value)
    return numpy_helper.from_array(arr.astype(object) if arr.dtype.kind == "T" else arr, name)
