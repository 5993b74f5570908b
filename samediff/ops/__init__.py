"""The op table. Importing this package registers every built-in op and validates the table.

Each module defines its ops whole (gradient rule and training form included), so the modules
may be imported in any order; a module imports what it uses (the adjoint ops of ``adjoints``
are imported by the modules whose gradient rules use them).
"""
from . import adjoints, attention, creation, elementwise, fft, linalg, nn, random_ops  # noqa: F401
from . import recurrent, reductions, sequence, shape_ops, slicing, train_mode  # noqa: F401
from . import cnn, cnn_depthwise, cnn_layout, cnn_lrn, cnn_pooling, cnn_volumetric  # noqa: F401
from . import onnx_math, onnx_shape  # noqa: F401
from . import onnx_extra  # noqa: F401
from . import image, strings  # noqa: F401
from .registry import REGISTRY, REQUIRED, Attr, OpDef, TensorType, define, get_op
from .validate import OpTableError, validate_table

validate_table(REGISTRY.values())

__all__ = ["REGISTRY", "REQUIRED", "Attr", "OpDef", "TensorType", "define", "get_op",
           "OpTableError", "validate_table"]
