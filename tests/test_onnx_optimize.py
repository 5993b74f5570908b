"""The importer's rewrites for inference speed (samediff/onnx/optimize.py) -- Conv followed by an
inference BatchNormalization folds into one convolution when the weights are constants and
nothing else reads the convolution -- the same outputs as onnx.reference either way; and graph
outputs keep their names when those are names nd4py gives automatically."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff.onnx import import_onnx  # noqa: E402

RNG = np.random.default_rng(0)


def _model(extra_reader: bool, bias: bool = True):
    c = 4
    inits = [numpy_helper.from_array(RNG.standard_normal((c, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(RNG.random(c).astype(np.float32) + 0.5, "scale"),
             numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "shift"),
             numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "mean"),
             numpy_helper.from_array(RNG.random(c).astype(np.float32) + 0.1, "var")]
    conv_in = ["x", "W"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "B"))
        conv_in.append("B")
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"],
                              ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:  # the convolution's output is read twice: it must stay as it is
        nodes.append(helper.make_node("Neg", ["c"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 3, 6, 6])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ops(sd) -> list[str]:
    return [n.op.name for n in sd.graph.nodes]


@pytest.mark.parametrize("extra_reader", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_batch_norm_folds_only_when_nothing_else_reads_the_conv(extra_reader, bias):
    model = _model(extra_reader, bias)
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    names = [o.name for o in model.graph.output]
    want = ReferenceEvaluator(model).run(None, {"x": x})
    sd = import_onnx(model)
    assert ("batch_norm" in _ops(sd)) == extra_reader
    got = sd.output({"x": x}, *names)
    for name, w in zip(names, want):
        np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-5, atol=1e-5)


def test_trainable_imports_keep_the_normalization():
    sd = import_onnx(_model(False), trainable=True)
    assert "batch_norm" in _ops(sd)


@pytest.mark.parametrize("out", ["matmul", "mul", "add"])
def test_a_graph_output_named_like_an_automatic_variable_keeps_its_name(out):
    # Gemm with alpha records matmul, mul and add: their automatic names must give way
    w = numpy_helper.from_array(np.ones((3, 2), np.float32), "w")
    b = numpy_helper.from_array(np.ones(2, np.float32), "b")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], [out], alpha=2.0)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", 2])],
                              [w, b])
    sd = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    got = sd.output({"x": np.ones((2, 3), np.float32)}, out)[out].numpy()
    assert got.tolist() == [[7.0, 7.0], [7.0, 7.0]]
