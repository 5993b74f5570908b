"""The ONNX converters, one module per op family; importing this package fills the table
(``samediff/onnx/table.py``)."""
from . import control, elementwise, indexing, math, nn, recurrent, shape  # noqa: F401
