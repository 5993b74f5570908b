"""samediff: the op table, ``NDArray``, and the define-and-run ``SameDiff`` graph.

This is the bottom layer of nd4py; ``tracing`` builds on it and ``nd4py`` is the façade.

>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> a = sd.constant("a", [1.0, 2.0])
>>> (a * 3).eval().numpy().tolist()
[3.0, 6.0]
"""
import os as _os

# Compiled kernels run on Numba's OpenMP layer, numpy's matmuls on OpenBLAS's own threads. With
# OpenMP's default (active) waiting, the kernel threads keep spinning after a parallel loop and
# take the cores from the BLAS call that follows: a training step ran 6x slower than with
# passive waiting, and any parallel kernel stalled ~8 ms whenever another process held a core.
# libgomp reads this once, when it is first loaded; a user's own setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from . import malloc_tuning  # noqa: E402

malloc_tuning.tune()  # large arrays stay on the heap: no page faults per op (see the module)

from . import ops  # noqa: E402
from .surface import install_surface  # noqa: E402

install_surface()  # the op table is complete: generate the shared method surface

from . import dtypes, random_state, udf  # noqa: E402
from .array import NDArray, bind, create  # noqa: E402
from .errors import (CorruptFileError, FormatVersionError, GraphError,  # noqa: E402
                     NdDTypeError, NdError, OpError, PlaceholderError, SaveError, SerializationError,
                     TracingError, UnknownOpError, UnknownVariableError, UnsafeFileError)
from .autodiff import GradientError  # noqa: E402
from .graph import Node, SameDiff, SDVariable, VariableType  # noqa: E402
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
