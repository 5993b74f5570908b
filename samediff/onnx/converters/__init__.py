"""The ONNX converters, one module per op family; importing this package fills the table
(``samediff/onnx/table.py``)."""
from . import control, elementwise, indexing, indexing_2, math, nn, nn_2, recurrent, shape  # noqa: F401,E501
from . import signal  # noqa: F401
from . import detection, extra, ml, training  # noqa: F401
from . import sequence  # noqa: F401
from . import text  # noqa: F401
from . import strings  # noqa: F401
from . import fused  # noqa: F401
