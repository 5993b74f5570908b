"""ONNX import (``import_onnx``): ONNX models as SameDiff graphs. Needs the ``onnx`` package
(``pip install 'nd4py[onnx]'``).

>>> from samediff.onnx import import_onnx, OnnxImportError
"""
from __future__ import annotations

from .importer import import_onnx, import_with_outputs
from .table import OnnxImportError, OnnxStaticInputError, supported

__all__ = ["import_onnx", "import_with_outputs", "OnnxImportError", "OnnxStaticInputError",
           "supported"]
