"""samediff: the op table, ``NDArray``, and the define-and-run ``SameDiff`` graph.

This is the bottom layer of nd4py; ``tracing`` builds on it and ``nd4py`` is the façade.

>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> a = sd.constant("a", [1.0, 2.0])
>>> (a * 3).eval().numpy().tolist()
[3.0, 6.0]
"""
from . import ops
from .surface import install_surface

install_surface()  # the op table is complete: generate the shared method surface

from . import dtypes, random_state  # noqa: E402
from .array import NDArray, bind, create  # noqa: E402
from .errors import (GraphError, NdDTypeError, NdError, OpError, PlaceholderError,  # noqa: E402
                     UnknownVariableError)
from .graph import Node, SameDiff, SDVariable, VariableType  # noqa: E402
from .init import WeightInit  # noqa: E402

__all__ = ["ops", "dtypes", "random_state", "NDArray", "bind", "create", "SameDiff", "SDVariable",
           "VariableType", "Node", "WeightInit", "NdError", "OpError", "NdDTypeError",
           "GraphError", "UnknownVariableError", "PlaceholderError"]
