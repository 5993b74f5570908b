"""ONNX element types as numpy dtypes (the converters' and the importer's one mapping)."""
from __future__ import annotations

import numpy as np

from .table import OnnxImportError

__all__ = ["np_dtype"]


def np_dtype(elem_type: int) -> np.dtype:
    from onnx import TensorProto, helper
    if elem_type == TensorProto.STRING:  # (onnx says object; nd4py holds text as UTF8)
        from ..dtypes import UTF8  # (numpy < 2: the named NdDTypeError)
        return UTF8
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:  # noqa: BLE001
        raise OnnxImportError(f"ONNX element type {elem_type} has no numpy dtype") from exc
