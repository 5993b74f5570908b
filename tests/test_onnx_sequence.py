"""ONNX sequences and optionals in the importer (``samediff/onnx/converters/sequence.py``):
import-time sequences of run-time tensors, checked against ``onnx.reference``; sequence graph
inputs and outputs (``name.i`` variables, ``sequence_inputs``); If and Loop on sequences;
gradients through the elements; and the named errors."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff import compiler  # noqa: E402
from samediff.onnx import OnnxImportError, OnnxStaticInputError, import_onnx  # noqa: E402
from samediff.onnx.backend import _pair_outputs, run  # noqa: E402
from samediff.onnx.importer import import_with_outputs  # noqa: E402

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(7)


def _model(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _t(name, dtype=F32, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _seq(name, dtype=F32, shape=None):
    return helper.make_tensor_sequence_value_info(name, dtype, shape)


def _opt(name, dtype=F32, shape=None, sequence=False):
    elem = (helper.make_sequence_type_proto(helper.make_tensor_type_proto(dtype, shape))
            if sequence else helper.make_tensor_type_proto(dtype, shape))
    return helper.make_value_info(name, helper.make_optional_type_proto(elem))


def _same(got, want):
    """Outputs equal, element by element (a sequence a list, an empty optional None)."""
    pairs, why = _pair_outputs(got, want)
    assert not why, why
    for _, g, w in pairs:
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _check(model, *inputs):
    """run() through nd4py (interpreted and compiled) equals the ONNX reference."""
    names = [vi.name for vi in model.graph.input]
    want = ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))
    for executor in ("interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            _same(run(model, list(inputs)), want)
        finally:
            compiler.set_executor(previous)


def test_list_ops_on_run_time_tensors_match_the_reference():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "a", "one"], ["s2"]),   # a,a,b,c
             helper.make_node("SequenceErase", ["s2", "minus1"], ["s3"]),     # a,a,b
             helper.make_node("SequenceAt", ["s3", "minus1"], ["last"]),      # b
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("Relu", ["last"], ["r"])]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(-1, np.int64), "minus1")]
    model = _model(nodes, [_t(k, F32, ["N"]) for k in "abc"],
                   [_seq("s3"), _t("n", I64, []), _t("r", F32, ["N"])], inits)
    a, b, c = (RNG.standard_normal(4).astype(np.float32) for _ in range(3))
    _check(model, a, b, c)
    sd, where = import_with_outputs(model)
    assert where == {"s3": ["s3.0", "s3.1", "s3.2"], "n": "n", "r": "r"}
    assert sd.get_variable("n").get_arr().numpy() == 3  # (the length is a constant)
    # one tensor twice in an output sequence: each element its own variable
    got = sd.output({"a": a, "b": b, "c": c}, "s3.0", "s3.1", "s3.2")
    for name, want in zip(("s3.0", "s3.1", "s3.2"), (a, a, b)):
        np.testing.assert_array_equal(got[name].numpy(), want)


@pytest.mark.parametrize("split,axis,keepdims", [
    (None, 1, 1), (None, -1, 0), (np.array(2, np.int64), 1, 1),
    (np.array(4, np.int64), 1, 0), (np.array([1, 2], np.int64), 0, 1)])
def test_split_to_sequence_then_concat_or_stack(split, axis, keepdims):
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    attrs = {"axis": axis, "keepdims": keepdims}
    inits = [] if split is None else [numpy_helper.from_array(split, "split")]
    nodes = [helper.make_node("SplitToSequence", ["x"] + (["split"] if inits else []),
                              ["s"], **attrs),
             helper.make_node("ConcatFromSequence", ["s"], ["cat"], axis=axis),
             helper.make_node("SequenceAt", ["s", "zero"], ["first"])]
    inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))
    outputs = [_seq("s"), _t("cat"), _t("first")]
    if split is None:  # equal parts: stackable along a new axis
        nodes.append(helper.make_node("ConcatFromSequence", ["s"], ["stk"], axis=-1,
                                      new_axis=1))
        outputs.append(_t("stk"))
    _check(_model(nodes, [_t("x", F32, [3, 5])], outputs, inits), x)


def test_sequence_input_by_length_serves_every_element_shape():
    model = _model([helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0),
                    helper.make_node("Identity", ["xs"], ["same"])],
                   [_seq("xs", F32, ["N", 2])], [_t("y"), _seq("same")])
    sd, where = import_with_outputs(model, sequence_inputs={"xs": 2})
    assert {p.name for p in sd.placeholders()} == {"xs.0", "xs.1"}
    assert tuple(sd.get_variable("xs.0").shape) == (-1, 2)
    assert where["same"] == ["same.0", "same.1"]
    for n, m in ((1, 3), (4, 2)):
        u, v = (RNG.standard_normal((k, 2)).astype(np.float32) for k in (n, m))
        got = sd.output({"xs.0": u, "xs.1": v}, "y", "same.1")
        np.testing.assert_array_equal(got["y"].numpy(), np.concatenate([u, v]))
        np.testing.assert_array_equal(got["same.1"].numpy(), v)
    with pytest.raises(OnnxImportError, match=r"sequence_inputs=\{'xs': n\}"):
        import_onnx(model)
    # no declared element shape: the shapes are given instead of the length
    bare = _model([helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0)],
                  [_seq("xs")], [_t("y")])
    with pytest.raises(OnnxImportError, match="declares no shape"):
        import_onnx(bare, sequence_inputs={"xs": 2})
    sd = import_onnx(bare, sequence_inputs={"xs": [(-1, 3), (2, 3)]})
    u, v = np.ones((1, 3), np.float32), np.zeros((2, 3), np.float32)
    assert sd.output({"xs.0": u, "xs.1": v}, "y")["y"].numpy().shape == (3, 3)
    _check(bare, [u, v])


def test_sequence_map_with_two_sequences_and_a_tensor():
    body = helper.make_graph(
        [helper.make_node("Mul", ["p", "q"], ["pq"]), helper.make_node("Add", ["pq", "t"], ["o"]),
         helper.make_node("Shape", ["p"], ["shp"])], "body",
        [_t("p", F32, ["K"]), _t("q", F32, ["K"]), _t("t", F32, ["K"])],
        [_t("o", F32, ["K"]), _t("shp", I64, [1])])
    model = _model([helper.make_node("SequenceMap", ["xs", "ys", "t"], ["os", "shapes"],
                                     body=body)],
                   [_seq("xs", F32, ["K"]), _seq("ys", F32, ["K"]), _t("t", F32, ["K"])],
                   [_seq("os"), _seq("shapes", I64)])
    xs = [RNG.standard_normal(3).astype(np.float32) for _ in range(4)]
    ys = [RNG.standard_normal(3).astype(np.float32) for _ in range(4)]
    t = np.full(3, 0.5, np.float32)
    # (onnx.reference's SequenceMap takes two sequences, or one and tensors: not both)
    _same(run(model, [xs, ys, t]),
          [[x * y + t for x, y in zip(xs, ys)], [np.array([3], np.int64)] * 4])
    with pytest.raises(OnnxImportError, match="must have one length"):
        import_onnx(model, sequence_inputs={"xs": 4, "ys": 3})


def test_gradient_reaches_a_weight_through_sequence_elements():
    body = helper.make_graph([helper.make_node("Mul", ["e", "w"], ["o"])], "body",
                             [_t("e", F32, [2])], [_t("o", F32, [2])])
    model = _model([helper.make_node("SplitToSequence", ["x", "two"], ["s"], axis=0),
                    helper.make_node("SequenceMap", ["s"], ["m"], body=body),
                    helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=0)],
                   [_t("x", F32, [6])], [_t("y", F32, [6])],
                   [numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "w"),
                    numpy_helper.from_array(np.array(2, np.int64), "two")])
    sd = import_onnx(model, trainable=True)
    y = sd.get_variable("y")
    (y * y).sum().mark_as_loss()
    x = RNG.standard_normal(6).astype(np.float32)
    grad = sd.calculate_gradients({"x": x}, "w")["w"].numpy()
    w = np.array([0.5, -2.0])
    chunks = x.reshape(3, 2).astype(np.float64)
    np.testing.assert_allclose(grad, (2 * chunks ** 2 * w).sum(axis=0), rtol=1e-5)


def _if_model(then_nodes, else_nodes, out_type):
    def branch(nodes, name):
        return helper.make_graph(nodes, name, [], [out_type("res_" + name)])
    then_g = branch([*then_nodes, helper.make_node("Identity", ["s"], ["res_then"])], "then")
    else_g = branch([*else_nodes, helper.make_node("Identity", ["s"], ["res_else"])], "else")
    return _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
                   helper.make_node("If", ["c"], ["out"], then_branch=then_g,
                                    else_branch=else_g)],
                  [_t("c", BOOL, []), _t("x", F32, [2])], [out_type("out")])


def test_if_on_sequences_stays_run_time_when_the_branches_agree():
    model = _if_model([helper.make_node("SequenceConstruct", ["r", "x"], ["s"])],
                      [helper.make_node("SequenceConstruct", ["n", "n"], ["s"])], _seq)
    sd = import_onnx(model)  # (no static condition needed)
    assert "c" in {p.name for p in sd.placeholders()}
    x = np.array([-1.0, 2.0], np.float32)
    for c in (True, False):
        _check(model, np.array(c), x)
        got = sd.output({"c": np.array(c), "x": x}, "out.0", "out.1")
        want = (np.maximum(x, 0), x) if c else (-x, -x)
        for k, w in enumerate(want):
            np.testing.assert_array_equal(got[f"out.{k}"].numpy(), w)


def test_if_on_sequences_of_different_lengths_needs_a_static_condition():
    model = _if_model([helper.make_node("SequenceConstruct", ["r"], ["s"])],
                      [helper.make_node("SequenceConstruct", ["n", "x"], ["s"])], _seq)
    with pytest.raises(OnnxStaticInputError, match="different lengths") as info:
        import_onnx(model)
    assert info.value.input_name == "c"
    sd = import_onnx(model, static_inputs={"c": False})
    assert sorted(v for v in sd.variable_names() if v.startswith("out.")) == ["out.0", "out.1"]
    x = np.array([-1.0, 2.0], np.float32)
    for c in (True, False):
        _check(model, np.array(c), x)  # (run() passes the condition as a static input)


def test_loop_growing_a_sequence_is_unrolled():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F32),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"]),
         helper.make_node("Identity", ["xi"], ["scan"])], "body",
        [_t("i", I64, []), _t("cond_in", BOOL, []), _seq("seq_in")],
        [_t("cond_out", BOOL, []), _seq("seq_out"), _t("scan", F32, [2])])
    model = _model([helper.make_node("SequenceEmpty", [], ["empty"]),
                    helper.make_node("Loop", ["m", "yes", "empty"], ["seq", "ys"], body=body),
                    helper.make_node("ConcatFromSequence", ["seq"], ["cat"], axis=0)],
                   [_t("m", I64, []), _t("x", F32, [2])],
                   [_seq("seq"), _t("ys", F32, [None, 2]), _t("cat", F32, [None])],
                   [numpy_helper.from_array(np.array(True), "yes")])
    with pytest.raises(OnnxStaticInputError, match="trip count") as info:
        import_onnx(model)
    assert info.value.input_name == "m"
    x = np.array([1.0, -3.0], np.float32)
    sd, where = import_with_outputs(model, static_inputs={"m": 3})
    assert where["seq"] == ["seq.0", "seq.1", "seq.2"]
    np.testing.assert_array_equal(sd.output({"x": x}, "ys")["ys"].numpy(),
                                  np.stack([x * 0, x * 1, x * 2]))
    _check(model, np.array(4, np.int64), x)


def test_optionals_present_and_empty():
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"]),
             helper.make_node("Optional", ["v"], ["wrapped"]),
             helper.make_node("Identity", ["wrapped"], ["out"])]
    model = _model(nodes, [_opt("o", F32, [3])],
                   [_t("has", BOOL, []), _t("v", F32, [3]), _opt("out", F32, [3])])
    x = np.array([1.0, 2.0, 3.0], np.float32)
    # (onnx.reference gives an optional tensor made by Optional as a list of one: not used)
    _same(run(model, [x]), [np.array(True), x, x])
    sd, where = import_with_outputs(model)
    assert where == {"has": "has", "v": "v", "out": "out"}
    assert bool(sd.output({"o": x}, "has")["has"].numpy())
    with pytest.raises(OnnxImportError, match="the optional is empty"):
        import_onnx(model, static_inputs={"o": None})
    # an empty optional output binds nothing; a sequence inside one binds its elements
    empty = _model([helper.make_node("Optional", [], ["e"], type=helper.make_sequence_type_proto(
                        helper.make_tensor_type_proto(F32, [2]))),
                    helper.make_node("OptionalHasElement", ["e"], ["has"]),
                    helper.make_node("Identity", ["os"], ["os2"])],
                   [_opt("os", F32, [2], sequence=True)],
                   [_opt("e", F32, [2], sequence=True), _t("has", BOOL, []),
                    _opt("os2", F32, [2], sequence=True)])
    sd, where = import_with_outputs(empty, sequence_inputs={"os": 1})
    assert where == {"e": None, "has": "has", "os2": ["os2.0"]}
    assert run(empty, [[x[:2]]])[0] is None
    assert run(empty, [None])[2] is None


def test_a_sequence_where_a_tensor_is_needed_is_a_named_error():
    model = _model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
                    helper.make_node("Relu", ["s"], ["y"], name="the_relu")],
                   [_t("x", F32, [2])], [_t("y")])
    with pytest.raises(OnnxImportError, match=r"'the_relu' \(Relu.*input 0 \('s'\) is a "
                                              r"sequence of 2 tensor\(s\), where this op "
                                              r"needs a tensor"):
        import_onnx(model)
    at = _model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
                 helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                [_t("x", F32, [2]), _t("i", I64, [])], [_t("y")])
    with pytest.raises(OnnxStaticInputError, match="position"):
        import_onnx(at)
    with pytest.raises(OnnxImportError, match="out of range for a sequence of length 2"):
        import_onnx(at, static_inputs={"i": 2})
    mixed = _model([helper.make_node("SequenceConstruct", ["x", "k"], ["s"])],
                   [_t("x", F32, [2]), _t("k", I64, [2])], [_seq("s")])
    with pytest.raises(OnnxImportError, match="cannot join a sequence of float32"):
        import_onnx(mixed)


def test_structure_comparison_of_the_backend_check():
    a = np.zeros(2, np.float32)
    assert "a sequence of 1, expected a sequence of 2" in _pair_outputs([[a]], [[a, a]])[1]
    assert "an empty optional, expected a tensor" in _pair_outputs([None], [a])[1]
    pairs, why = _pair_outputs([[a, a], None, a], [[a, a], None, a])
    assert not why and [p[0] for p in pairs] == ["0[0]", "0[1]", 2]
