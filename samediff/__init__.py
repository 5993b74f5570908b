"""samediff: the op table, ``NDArray``, and the define-and-run ``SameDiff`` graph.

This is the bottom layer of nd4py; ``tracing`` builds on it and ``nd4py`` is the façade.

>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> a = sd.constant("a", [1.0, 2.0])
>>> (a * 3).eval().numpy().tolist()
[3.0, 6.0]
"""
from .kernels import process as _process

# before the first array is allocated: the malloc thresholds (see the module)
_process.apply()

from . import ops  # noqa: E402
from .surface import install_surface  # noqa: E402

install_surface()  # the op table is complete: generate the shared method surface

from . import dtypes, random_state, udf  # noqa: E402
from .array import NDArray, bind, create  # noqa: E402
from .errors import (CorruptFileError, FormatVersionError, GraphError,  # noqa: E402
                     NdDTypeError, NdError, OpError, PlaceholderError, SaveError, SerializationError,
                     TracingError, UnknownOpError, UnknownVariableError, UnsafeFileError)
from .errors import GradientError  # noqa: E402
from .samediff import Node, SameDiff, SDVariable, VariableType  # noqa: E402
from .init import WeightInit  # noqa: E402
from . import control  # noqa: E402  (its ops, e.g. cond, join the table: saved graphs load)
from .evaluation import (ROC, Evaluation, EvaluationBinary, EvaluationError,  # noqa: E402
                         RegressionEvaluation, ROCBinary, ROCMultiClass)

__all__ = ["ops", "dtypes", "random_state", "udf", "control", "NDArray", "bind", "create", "SameDiff", "SDVariable",
           "VariableType", "Node", "WeightInit", "NdError", "OpError", "NdDTypeError",
           "GraphError", "UnknownVariableError", "PlaceholderError", "TracingError",
           "GradientError", "SaveError", "SerializationError", "CorruptFileError", "UnsafeFileError",
           "FormatVersionError", "UnknownOpError", "evaluation", "Evaluation",
           "EvaluationBinary", "ROC", "ROCBinary", "ROCMultiClass", "RegressionEvaluation",
           "EvaluationError"]
