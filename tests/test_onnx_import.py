"""ONNX import (``samediff.onnx``): the API around the converters -- placeholders with run-time
dims, initializers as constants or trainable variables, output names, folding, static inputs,
external data, errors for unsupported nodes and malformed models -- and the imported graph as
a SameDiff like any other (interpreted and compiled, trained, saved and loaded)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nd4py as nd  # noqa: E402
from samediff import SameDiff, compiler  # noqa: E402
from samediff.onnx import OnnxImportError, OnnxStaticInputError, import_onnx  # noqa: E402

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _affine_model(w, b):
    """y = relu(x * w + b) over [N, 3]: the batch dim symbolic."""
    return _model([helper.make_node("Mul", ["x", "w"], ["xw"]),
                   helper.make_node("Add", ["xw", "b"], ["pre"]),
                   helper.make_node("Relu", ["pre"], ["y"])],
                  [helper.make_tensor_value_info("x", F32, ["N", 3])],
                  [helper.make_tensor_value_info("y", F32, ["N", 3])],
                  [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])


W = np.array([0.5, -1.0, 2.0], np.float32)
B = np.array([0.1, 0.2, -0.3], np.float32)


def test_one_import_serves_every_batch_size_and_keeps_onnx_names():
    sd = import_onnx(_affine_model(W, B))
    x_var = sd.get_variable("x")
    assert tuple(x_var.shape) == (-1, 3)
    for n in (2, 5):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        got = sd.output({"x": x}, "y")["y"].numpy()
        np.testing.assert_array_equal(got, np.maximum(x * W + B, 0))
    assert {"xw", "pre", "y"} <= set(sd.variable_names())  # intermediates keep ONNX names
    assert "relu" in sd.summary() and "y" in sd.summary()


def test_interpreted_and_compiled_runs_agree():
    sd = import_onnx(_affine_model(W, B))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    previous = compiler.set_executor("interpreter")
    try:
        interp = sd.output({"x": x}, "y")["y"].numpy()
    finally:
        compiler.set_executor(previous)
    np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(), interp)


def test_trainable_initializers_fine_tune_with_fit_and_survive_save_load(tmp_path):
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Sgd
    sd = import_onnx(_affine_model(W, B), trainable=True)
    assert set(sd.trainable_names()) == {"w", "b"}
    target_w = np.array([1.0, 1.0, 1.0], np.float32)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.0, 1.0, (64, 3)).astype(np.float32)
    t = x * target_w + B
    label = sd.placeholder("t", "float", -1, 3)
    diff = sd.get_variable("pre") - label
    (diff * diff).mean().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.2), feature_mapping=["x"],
                                          label_mapping=["t"]))
    before = np.abs(sd.get_variable("w").get_arr().numpy() - target_w).max()
    sd.fit((x, t), epochs=30, batch_size=16, verbose=0)
    after = np.abs(sd.get_variable("w").get_arr().numpy() - target_w).max()
    assert after < 0.05 * before
    sd.save(tmp_path / "m.sdz")
    loaded = SameDiff.load(tmp_path / "m.sdz")
    np.testing.assert_array_equal(loaded.output({"x": x}, "y")["y"].numpy(),
                                  sd.output({"x": x}, "y")["y"].numpy())


def test_constants_stay_constants_without_trainable():
    sd = import_onnx(_affine_model(W, B))
    assert sd.trainable_names() == []


def test_shape_arithmetic_on_static_shapes_folds_at_import():
    """Shape -> Gather -> Concat -> Reshape, as exporters write a flatten: one reshape op."""
    i64 = TensorProto.INT64
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 3, 4])],
                   [helper.make_tensor_value_info("y", F32, [2, 12])], inits)
    sd = import_onnx(model)
    assert [n.op.name for n in sd.ops()] == ["reshape"]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(), x.reshape(2, 12))
    assert i64  # (the int64 initializers above)


def _reshape_by_input():
    return _model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                  [helper.make_tensor_value_info("x", F32, [2, 6]),
                   helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("y", F32, [3, 4])])


def test_a_reshape_target_fed_as_a_graph_input_is_read_at_run_time():
    sd = import_onnx(_reshape_by_input())
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target in ([3, 4], [4, -1], [0, 6]):  # (0 copies the input's dim)
        got = sd.output({"x": x, "shape": np.array(target, np.int64)}, "y")["y"].numpy()
        np.testing.assert_array_equal(got, x.reshape([2 if t == 0 else t for t in target]))


def _squeeze_by_input():
    return _model([helper.make_node("Squeeze", ["x", "axes"], ["y"])],
                  [helper.make_tensor_value_info("x", F32, [2, 1, 3]),
                   helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                  [helper.make_tensor_value_info("y", F32, [2, 3])])


def test_a_value_needed_at_import_is_named_and_can_be_made_static():
    with pytest.raises(OnnxStaticInputError, match="'axes'.*static_inputs") as info:
        import_onnx(_squeeze_by_input())
    assert info.value.input_name == "axes"
    sd = import_onnx(_squeeze_by_input(), static_inputs={"axes": [1]})
    x = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(), x.reshape(2, 3))
    assert [p.name for p in sd.placeholders()] == ["x"]


def test_every_unsupported_node_is_listed_at_once_before_anything_is_built():
    model = _model([helper.make_node("FrobnicateA", ["x"], ["a"], name="first"),
                    helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("FrobnicateB", ["b"], ["y"], name="second",
                                     domain="com.example")],
                   [helper.make_tensor_value_info("x", F32, [2])],
                   [helper.make_tensor_value_info("y", F32, [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(OnnxImportError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "2 ONNX node(s)" in message
    assert "'first' (FrobnicateA, domain '', opset 17)" in message
    assert "'second' (FrobnicateB, domain 'com.example', opset 1)" in message


def test_an_unsupported_attribute_value_names_the_node():
    model = _model([helper.make_node("Constant", [], ["y"], name="c",
                                     value_string="text")],
                   [], [helper.make_tensor_value_info("y", TensorProto.STRING, [])])
    with pytest.raises(OnnxImportError, match="'c' \\(Constant"):
        import_onnx(model)


def test_external_data_is_read_from_the_models_directory(tmp_path):
    w = np.random.default_rng(2).standard_normal(3).astype(np.float32)
    model = _affine_model(w, B)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    sd = SameDiff.import_onnx(path)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(),
                                  np.maximum(x * w + B, 0))
    with pytest.raises(OnnxImportError, match="external data"):
        import_onnx(onnx.load(str(path), load_external_data=False).SerializeToString())


def test_nd4j_style_alias_and_bytes_input():
    data = _affine_model(W, B).SerializeToString()
    sd = nd.SameDiff.importOnnx(data)
    assert sd.output({"x": np.zeros((1, 3), np.float32)}, "y")["y"].shape == (1, 3)


def test_malformed_and_truncated_models_give_named_errors():
    """A few hundred mutations of a valid model (truncations, byte flips, spliced garbage):
    each imports, or raises OnnxImportError -- never another exception."""
    data = bytearray(_affine_model(W, B).SerializeToString())
    rng = np.random.default_rng(3)
    x = np.ones((2, 3), np.float32)
    outcomes = {"imported": 0, "refused": 0}
    mutants = [bytes(data[:k]) for k in rng.integers(0, len(data), 80)]
    for _ in range(160):
        m = bytearray(data)
        for pos in rng.integers(0, len(m), rng.integers(1, 4)):
            m[pos] = int(rng.integers(0, 256))
        mutants.append(bytes(m))
    mutants += [bytes(rng.integers(0, 256, 64, dtype=np.uint8)), b"", b"not a model"]
    for m in mutants:
        try:
            sd = import_onnx(m)
        except OnnxImportError:
            outcomes["refused"] += 1
            continue
        outcomes["imported"] += 1
        try:  # a mutant that imports runs, or fails with one of nd4py's named errors
            sd.output({p.name: x for p in sd.placeholders()},
                      *[v for v in sd.variable_names()[-1:]])
        except nd.errors.NdError:
            pass
    assert outcomes["refused"] >= 100, outcomes


def test_an_if_inside_a_loop_body_reads_the_carry_and_a_main_graph_value():
    from onnx.reference import ReferenceEvaluator

    from samediff.onnx.backend import run
    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Mul", ["acc", "x2"], ["r"])], "then", [],
                               [helper.make_tensor_value_info("r", f, [3])])
    else_g = helper.make_graph([helper.make_node("Add", ["acc", "x2"], ["r2"])], "else", [],
                               [helper.make_tensor_value_info("r2", f, [3])])
    body = helper.make_graph(
        [helper.make_node("Greater", ["i", "two"], ["c"]),
         helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["go"], ["go_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", f, [3])],
        [helper.make_tensor_value_info("go_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("out", f, [3])],
        [helper.make_tensor("two", TensorProto.INT64, [], [2])])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["x2"]),  # read from inside the If, two bodies down
         helper.make_node("Loop", ["n", "t", "x"], ["y"], body=body)], "g",
        [helper.make_tensor_value_info("x", f, [3]),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", f, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = [np.array([1.0, 2.0, 0.5], np.float32), np.array(4, np.int64), np.array(True)]
    want = ReferenceEvaluator(model).run(None, dict(zip(["x", "n", "t"], feeds)))[0]
    np.testing.assert_allclose(run(model, feeds)[0], want, rtol=1e-6)
