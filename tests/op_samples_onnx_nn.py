"""Sample rows of the ops in samediff/ops/onnx_nn.py, added to op_samples.SAMPLES like the
cnn families' rows."""
from __future__ import annotations


def onnx_nn_samples(S) -> dict:
    """The rows of every op of samediff/ops/onnx_nn.py (``S`` is ``op_samples.Sample``)."""
    return {}
