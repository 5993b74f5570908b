"""The importer's rewrites for inference speed (samediff/onnx/optimize.py) -- Conv followed by an
inference BatchNormalization folds into one convolution when the weights are constants and
nothing else reads the convolution; a MatMul and the Add of its bias run as one linear; attention
written out (MatMul, Div or Mul, Softmax, MatMul) runs as one op when its scale is a constant --
the same outputs as onnx.reference either way; and graph outputs keep their names when those are
names nd4py gives automatically."""
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


def _attention_model(variant: str, opset: int = 17):
    """``softmax(q @ k^T / c) @ v`` over 4-D heads, as exporters write it. Variants:
    ``"div"``, ``"mul"`` (the scale first: ``Mul(c, scores)``), ``"read twice"`` (the scores
    are also an output: nothing fuses), ``"scale input"`` (``c`` is a graph input: the
    converter writes the four ops back), ``"axis 2"`` (softmax over another axis: nothing
    fuses), ``"float64"``."""
    dt = np.float64 if variant == "float64" else np.float32
    tp = TensorProto.DOUBLE if variant == "float64" else TensorProto.FLOAT
    c = "c" if variant == "scale input" else "c_const"
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"])]
    if variant != "scale input":
        nodes.append(helper.make_node("Constant", [], [c], value=numpy_helper.from_array(
            np.asarray(8.0 if variant != "mul" else 0.125, dt))))
    nodes.append(helper.make_node("Mul", [c, "scores"], ["scaled"]) if variant == "mul"
                 else helper.make_node("Div", ["scores", c], ["scaled"]))
    nodes += [helper.make_node("Softmax", ["scaled"], ["p"],
                               axis=2 if variant == "axis 2" else -1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    heads = ["N", 2, 40, 16]
    inputs = [helper.make_tensor_value_info(n, tp, heads) for n in "qkv"]
    if variant == "scale input":
        inputs.append(helper.make_tensor_value_info("c", tp, []))
    outputs = [helper.make_tensor_value_info("y", tp, None)]
    if variant == "read twice":
        outputs.append(helper.make_tensor_value_info("scores", tp, None))
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), dt


@pytest.mark.parametrize("variant, fused", [
    ("div", True), ("mul", True), ("float64", True), ("read twice", False),
    ("scale input", False), ("axis 2", False)])
def test_written_out_attention_runs_as_one_op_when_it_can(variant, fused):
    model, dt = _attention_model(variant)
    feeds = {n: RNG.standard_normal((3, 2, 40, 16)).astype(dt) for n in "qkv"}
    if variant == "scale input":
        feeds["c"] = np.asarray(8.0, dt)
    names = [o.name for o in model.graph.output]
    want = ReferenceEvaluator(model).run(None, feeds)
    sd = import_onnx(model)
    assert ("scaled_dot_product_attention" in _ops(sd)) == fused
    assert ("softmax" in _ops(sd)) != fused
    got = sd.output(feeds, *names)
    for name, w in zip(names, want):
        np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-5, atol=1e-6)


def test_attention_before_opset_13_fuses_only_with_an_explicit_last_axis():
    model, _ = _attention_model("div", opset=12)  # (axis=-1 given: the last axis alone)
    assert "scaled_dot_product_attention" in _ops(import_onnx(model))
    model.graph.node[4].ClearField("attribute")   # the default axis 1 then coerces to 2-D
    assert "scaled_dot_product_attention" not in _ops(import_onnx(model))


@pytest.mark.parametrize("variant, linear", [
    ("bias second", True), ("bias first", True), ("residual", False), ("read twice", False),
    ("int64", False)])
def test_a_matmul_and_the_add_of_its_bias_run_as_one_linear(variant, linear):
    dt = np.int64 if variant == "int64" else np.float32
    tp = TensorProto.INT64 if variant == "int64" else TensorProto.FLOAT
    w = numpy_helper.from_array((RNG.standard_normal((24, 40)) * 4).astype(dt), "w")
    b = numpy_helper.from_array((RNG.standard_normal(40) * 4).astype(dt), "b")
    other = "r" if variant == "residual" else "b"  # (a residual is no row of biases)
    add = ["mm", other] if variant != "bias first" else [other, "mm"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", add, ["y"])]
    inputs = [helper.make_tensor_value_info("x", tp, ["N", 5, 24])]
    if variant == "residual":
        inputs.append(helper.make_tensor_value_info("r", tp, ["N", 5, 40]))
    outputs = [helper.make_tensor_value_info("y", tp, None)]
    if variant == "read twice":
        outputs.append(helper.make_tensor_value_info("mm", tp, None))
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, [w, b]),
                              opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": (RNG.standard_normal((3, 5, 24)) * 4).astype(dt)}
    if variant == "residual":
        feeds["r"] = (RNG.standard_normal((3, 5, 40)) * 4).astype(dt)
    names = [o.name for o in outputs]
    want = ReferenceEvaluator(model).run(None, feeds)
    sd = import_onnx(model)
    assert ("linear" in _ops(sd)) == linear
    got = sd.output(feeds, *names)
    for name, expected in zip(names, want):
        np.testing.assert_allclose(got[name].numpy(), expected, rtol=1e-5, atol=1e-5)


def _run_both(model, feeds):
    want = ReferenceEvaluator(model).run(None, feeds)
    sd = import_onnx(model)
    names = [o.name for o in model.graph.output]
    got = sd.output(feeds, *names)
    for name, w in zip(names, want):
        assert got[name].numpy().shape == w.shape
        np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-5, atol=1e-6)
    return sd


def _chain(nodes, c_values, shapes, opset=17):
    """A graph of ``nodes`` with Constants ``c_values`` and float32 inputs ``shapes``."""
    consts = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v))
              for n, v in c_values.items()]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()]
    graph = helper.make_graph(consts + nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _attention_nodes(q, kt, v, c, out, tag=""):
    return [helper.make_node("MatMul", [q, kt], ["s" + tag]),
            helper.make_node("Div", ["s" + tag, c], ["d" + tag]),
            helper.make_node("Softmax", ["d" + tag], ["p" + tag], axis=-1),
            helper.make_node("MatMul", ["p" + tag, v], [out])]


def test_a_scale_with_more_dims_than_the_scores_keeps_the_shape_it_broadcasts_to():
    model = _chain(_attention_nodes("q", "kt", "v", "c", "y"),
                   {"c": np.full((1, 1, 1), 4.0, np.float32)},
                   {"q": [40, 16], "kt": [16, 40], "v": [40, 16]})
    feeds = {"q": RNG.standard_normal((40, 16)).astype(np.float32),
             "kt": RNG.standard_normal((16, 40)).astype(np.float32),
             "v": RNG.standard_normal((40, 16)).astype(np.float32)}
    assert "scaled_dot_product_attention" not in _ops(_run_both(model, feeds))


def test_a_tiny_divisor_stays_a_division():
    """1 / 1e-40 overflows float32: the scale would be inf, the division's scores are not."""
    model = _chain(_attention_nodes("q", "kt", "v", "c", "y"), {"c": np.float32(1e-40)},
                   {"q": [2, 40, 8], "kt": [2, 8, 40], "v": [2, 40, 8]})
    feeds = {"q": (RNG.standard_normal((2, 40, 8)) * 1e-39).astype(np.float32),
             "kt": RNG.standard_normal((2, 8, 40)).astype(np.float32),
             "v": RNG.standard_normal((2, 40, 8)).astype(np.float32)}
    _run_both(model, feeds)


def test_chained_attentions_fuse_the_first_and_keep_the_second_whole():
    """The first attention's last MatMul is the second's scores: fusing the first leaves the
    second without its scores node, so the second stays as written."""
    first = _attention_nodes("q", "kt", "w", "c", "s2", "1")  # s2 = softmax(q kt / c) @ w
    second = [helper.make_node("Div", ["s2", "c"], ["d2"]),
              helper.make_node("Softmax", ["d2"], ["p2"], axis=-1),
              helper.make_node("MatMul", ["p2", "v"], ["y"])]
    model = _chain(first + second, {"c": np.float32(4.0)},
                   {"q": [2, 40, 8], "kt": [2, 8, 40], "w": [2, 40, 30], "v": [2, 30, 8]})
    feeds = {"q": RNG.standard_normal((2, 40, 8)), "kt": RNG.standard_normal((2, 8, 40)),
             "w": RNG.standard_normal((2, 40, 30)), "v": RNG.standard_normal((2, 30, 8))}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    assert _ops(_run_both(model, feeds)).count("scaled_dot_product_attention") == 1


def test_trainable_imports_keep_the_models_ops_and_values():
    model, _ = _attention_model("div")
    sd = import_onnx(model, trainable=True)
    assert "softmax" in _ops(sd) and sd.has_variable("scores")
