"""Regressions found importing the model-zoo CNNs as PyTorch's TorchScript exporter writes them
(``benchmarks/zoo_models.py``): each case is the pattern that failed, rebuilt with
``onnx.helper`` (no torch here) and checked against ``onnx.reference``."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff.onnx import import_onnx  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _squeeze_if_model():
    """``t.squeeze(1)`` on a value with a run-time batch, as the exporter writes it (opset
    >= 13, local_response_norm's ``div.squeeze(1)``): ``If(Equal(Gather(Shape(t), 1), 1),
    Squeeze(t, [1]), Identity(t))`` -- branches of different ranks; then a Relu."""
    then_g = helper.make_graph(
        [helper.make_node("Squeeze", ["t", "axes"], ["sq"])], "then", [],
        [helper.make_tensor_value_info("sq", F32, None)])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["t"], ["id"])], "else", [],
        [helper.make_tensor_value_info("id", F32, None)])
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["t"]),
             helper.make_node("Shape", ["t"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["d"], axis=0),
             helper.make_node("Equal", ["d", "one"], ["c"]),
             helper.make_node("If", ["c"], ["u"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Relu", ["u"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F32, ["N", 4, 3])],
                  [helper.make_tensor_value_info("y", F32, ["N", 4, 3])],
                  [_i64("axes", [1]), _i64("one", 1)])


def test_if_on_a_static_dim_of_a_shape_with_a_run_time_batch_imports_the_taken_branch():
    """Gather picking static dims of a run-time Shape folds to a constant, so the If's
    condition is known at import (it was a BranchMismatchError: rank 3 vs rank 4)."""
    model = _squeeze_if_model()
    sd = import_onnx(model)
    ref = ReferenceEvaluator(model)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4, 3)).astype(np.float32)
        got = sd.output({"x": x}, "y")["y"].numpy()
        np.testing.assert_array_equal(got, ref.run(None, {"x": x})[0])


@pytest.mark.parametrize("indices", [[1, 2], [-1], [0], [0, 2]])
def test_gather_of_a_run_time_shape(indices):
    """Static dims fold (negative indices count from the end); a pick including the run-time
    batch stays a run-time value and is right at every batch size."""
    idx = np.asarray(indices, np.int64)
    model = _model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Gather", ["s", "i"], ["y"], axis=0)],
                   [helper.make_tensor_value_info("x", F32, ["N", 5, 7])],
                   [helper.make_tensor_value_info("y", I64, [len(indices)])],
                   [numpy_helper.from_array(idx, "i")])
    sd = import_onnx(model)
    # static picks are constants at import; the batch dim is read when the graph runs
    assert (sd.graph.vars["y"].producer is None) == (0 not in indices)
    for n in (1, 4):
        x = np.zeros((n, 5, 7), np.float32)
        np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(),
                                      np.asarray((n, 5, 7))[idx])


def _batch_target(name, data, tail):
    """Nodes computing ``[x.size(0), *tail]`` as the exporter does (Shape, Gather, Unsqueeze,
    Concat with a constant), into ``name``."""
    return [helper.make_node("Shape", [data], [name + "_s"]),
            helper.make_node("Gather", [name + "_s", "zero"], [name + "_n"], axis=0),
            helper.make_node("Unsqueeze", [name + "_n", "axes0"], [name + "_n1"]),
            helper.make_node("Concat", [name + "_n1", name + "_tail"], [name], axis=0)], \
        _i64(name + "_tail", tail)


def _channel_shuffle_chunk_model():
    """ShuffleNet-v2's ``channel_shuffle`` (``x.view(n, 2, C/2, H)``, transpose, ``view(n, C,
    H)``, the batch read from ``x.size(0)``) then ``chunk(2, dim=1)``'s first half, whose
    bounds the exporter computes from ``Shape(t)[1]`` -- a Slice with run-time bounds on
    the channel dim, which must be static at import."""
    t1, init1 = _batch_target("t1", "x", [2, 2, 3])
    t2, init2 = _batch_target("t2", "x", [4, 3])
    nodes = t1 + [helper.make_node("Reshape", ["x", "t1"], ["r1"]),
                  helper.make_node("Transpose", ["r1"], ["tr"], perm=[0, 2, 1, 3])] + t2 + [
        helper.make_node("Reshape", ["tr", "t2"], ["r2"]),
        helper.make_node("Shape", ["r2"], ["s2"]),
        helper.make_node("Gather", ["s2", "one"], ["c"], axis=0),
        helper.make_node("Add", ["c", "one"], ["c1"]),
        helper.make_node("Div", ["c1", "two"], ["half"]),
        helper.make_node("Unsqueeze", ["half", "axes0"], ["end"]),
        helper.make_node("Slice", ["r2", "zeros1", "end", "axes1"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F32, ["N", 4, 3])],
                  [helper.make_tensor_value_info("y", F32, ["N", 2, 3])],
                  [_i64("zero", 0), _i64("one", 1), _i64("two", 2), _i64("axes0", [0]),
                   _i64("axes1", [1]), _i64("zeros1", [0]), init1, init2])


def test_reshape_to_a_target_with_one_run_time_element_keeps_the_static_dims():
    """The Reshape targets are run-time (the batch) with every other element known: the
    results keep their static dims, so the chunk's Slice bounds fold (it was "Slice with
    run-time bounds of run-time dim 1 is not supported")."""
    model = _channel_shuffle_chunk_model()
    sd = import_onnx(model)
    assert tuple(sd.get_variable("r2").shape) == (-1, 4, 3)
    ref = ReferenceEvaluator(model)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4, 3)).astype(np.float32)
        got = sd.output({"x": x}, "y")["y"].numpy()
        np.testing.assert_array_equal(got, ref.run(None, {"x": x})[0])


def test_reshape_to_a_target_with_two_run_time_elements_is_read_at_run_time():
    """``[x.size(0), -1]``-style targets with two unknowns (the batch and a -1) stay a
    run-time reshape, right at every batch size."""
    t, init = _batch_target("t", "x", [2, -1])
    model = _model(t + [helper.make_node("Reshape", ["x", "t"], ["y"])],
                   [helper.make_tensor_value_info("x", F32, ["N", 4, 3])],
                   [helper.make_tensor_value_info("y", F32, ["N", 2, 6])],
                   [_i64("zero", 0), _i64("axes0", [0]), init])
    sd = import_onnx(model)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4, 3)).astype(np.float32)
        np.testing.assert_array_equal(sd.output({"x": x}, "y")["y"].numpy(),
                                      x.reshape(n, 2, 6))
