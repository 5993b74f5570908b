"""The op table. Importing this package registers every built-in op and validates the table."""
from . import elementwise, fft, linalg, nn, reductions  # noqa: F401  (each module registers its ops)
from . import creation, grad_ops, random_ops, shape_ops  # noqa: F401
from . import cnn  # noqa: F401
from . import cnn_volumetric, cnn_depthwise  # noqa: F401  (conv3d, deconv, depthwise)
from . import cnn_layout, cnn_pooling  # noqa: F401  (1-D/3-D/global pooling, layout ops, LRN)
from . import grads_elementwise, grads_reductions  # noqa: F401  (gradient rules, after the ops)
from . import grads_structural  # noqa: F401
from . import train_mode  # noqa: F401  (dropout, training batch norm; uses the rules above)
from .registry import REGISTRY, REQUIRED, Attr, OpDef, TensorType, define, get_op
from .validate import OpTableError, validate_table

validate_table(REGISTRY.values())

__all__ = ["REGISTRY", "REQUIRED", "Attr", "OpDef", "TensorType", "define", "get_op",
           "OpTableError", "validate_table"]
