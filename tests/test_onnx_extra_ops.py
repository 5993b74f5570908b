"""The ONNX converters of the misc family (samediff/onnx/converters/detection.py, extra.py,
training.py, ml.py): small models built with onnx.helper, checked against ONNX's reference
evaluator (the spec's oracle), plus named errors for what is not supported."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nd4py as nd
from samediff.onnx import import_onnx
from samediff.onnx.backend import run
from samediff.onnx.table import OnnxImportError

_rng = np.random.default_rng(7)
_F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opsets, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in opsets.items()])
    model.ir_version = 10
    return model


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    """nd4py's outputs equal the reference evaluator's."""
    want = ReferenceEvaluator(model).run(None, feeds)
    got = run(model, list(feeds.values()))
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w), (g, w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


# --- detection, BitCast, SwiGLU, TensorScatter, FlexAttention --------------------------------

def test_nms_center_boxes_dynamic_count_and_omitted_limit():
    boxes = np.array([[[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0],
                       [0.5, 10.5, 1.0, 1.0], [0.5, 10.6, 1.0, 1.0], [0.5, 100.5, 1.0, 1.0]]],
                     np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.3, 0.2, 0.1, 0.4, 0.9, 0.8]]],
                      np.float32)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "i"], ["y"],
                            center_point_box=1)
    model = _model([node], [_vi("b", _F, ["B", 6, 4]), _vi("s", _F, ["B", 2, 6]),
                            _vi("m", TensorProto.INT64, [1]), _vi("i", _F, [1])],
                   [_vi("y", TensorProto.INT64, None)], {"": 11})
    got = _check(model, {"b": boxes, "s": scores, "m": np.array([5]), "i": np.array([0.3],
                                                                                   np.float32)})
    assert got[0].shape[1] == 3 and got[0].shape[0] > 2
    # no limit given: ONNX keeps no boxes
    node = helper.make_node("NonMaxSuppression", ["b", "s"], ["y"])
    model = _model([node], [_vi("b", _F, [1, 6, 4]), _vi("s", _F, [1, 2, 6])],
                   [_vi("y", TensorProto.INT64, None)], {"": 11})
    assert run(model, [boxes, scores])[0].shape == (0, 3)


def test_bitcast_and_width_mismatch():
    x = np.array([[1.0, -2.5], [np.inf, 0.0]], np.float32)
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.UINT32)],
                   [_vi("x", _F, [2, 2])], [_vi("y", TensorProto.UINT32, [2, 2])], {"": 26})
    np.testing.assert_array_equal(run(model, [x])[0], x.view(np.uint32))
    bad = _model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)],
                 [_vi("x", _F, [2, 2])], [_vi("y", TensorProto.INT64, [2, 2])], {"": 26})
    with pytest.raises(OnnxImportError, match="one bit width"):
        import_onnx(bad)


def test_swiglu_alpha_and_its_gradient():
    a, b = _rng.normal(size=(2, 5)).astype(np.float32), _rng.normal(size=(2, 5)).astype(
        np.float32)
    model = _model([helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.7)],
                   [_vi("a", _F, [2, 5]), _vi("b", _F, [2, 5])], [_vi("y", _F, [2, 5])],
                   {"": 28})
    _check(model, {"a": a, "b": b})
    sd = import_onnx(model)
    sd.set_loss_variables("y")
    grads = sd.calculate_gradients({"a": a, "b": b}, "b")
    want = a / (1 + np.exp(-1.7 * a.astype(np.float64)))  # d(sum y)/db = swish_1.7(a)
    np.testing.assert_allclose(np.asarray(grads["b"].numpy()), want, rtol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_modes_on_a_middle_axis(mode):
    past = _rng.normal(size=(2, 3, 5, 2)).astype(np.float32)
    upd = _rng.normal(size=(2, 3, 3, 2)).astype(np.float32)
    where = np.array([2, 0] if mode == "linear" else [4, 3], np.int64)
    node = helper.make_node("TensorScatter", ["p", "u", "w"], ["y"], mode=mode, axis=2)
    model = _model([node], [_vi("p", _F, [2, 3, 5, 2]), _vi("u", _F, [2, 3, 3, 2]),
                            _vi("w", TensorProto.INT64, [2])], [_vi("y", _F, [2, 3, 5, 2])],
                   {"": 24})
    _check(model, {"p": past, "u": upd, "w": where})


def test_flex_attention_gqa_score_mod_and_double_softmax():
    q = _rng.normal(size=(1, 4, 3, 8)).astype(np.float32)
    k = _rng.normal(size=(1, 2, 5, 8)).astype(np.float32)
    v = _rng.normal(size=(1, 2, 5, 6)).astype(np.float32)
    cap = numpy_helper.from_array(np.array(2.0, np.float64), "cap")
    body = helper.make_graph(  # a soft cap: cap * tanh(scores / cap)
        [helper.make_node("Div", ["s", "cap"], ["d"]), helper.make_node("Tanh", ["d"], ["t"]),
         helper.make_node("Mul", ["t", "cap"], ["o"])], "soft_cap",
        [_vi("s", TensorProto.DOUBLE, None)], [_vi("o", TensorProto.DOUBLE, None)],
        initializer=[cap])
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview",
                            score_mod=body, scale=0.3, softmax_precision=TensorProto.DOUBLE)
    model = _model([node], [_vi("q", _F, [1, 4, 3, 8]), _vi("k", _F, [1, 2, 5, 8]),
                            _vi("v", _F, [1, 2, 5, 6])], [_vi("y", _F, [1, 4, 3, 6])],
                   {"": 26, "ai.onnx.preview": 1})
    _check(model, {"q": q, "k": k, "v": v})


# --- ai.onnx.preview.training -----------------------------------------------------------------

def _optimizer(op, n_states, t, **attrs):
    names = ["R", "T"] + [f"{kind}{i}" for kind in ["X", "G"] + [f"S{j}" for j in range(
        n_states)] for i in (1, 2)]
    outs = [f"{kind}{i}_new" for kind in ["X"] + [f"S{j}" for j in range(n_states)]
            for i in (1, 2)]
    shapes = {1: [3], 2: [2, 2]}
    ins = [_vi("R", _F, []), _vi("T", TensorProto.INT64, [])] + [
        _vi(n, _F, shapes[int(n[-1])]) for n in names[2:]]
    node = helper.make_node(op, names, outs, domain="ai.onnx.preview.training", **attrs)
    model = _model([node], ins, [_vi(o, _F, None) for o in outs],
                   {"ai.onnx.preview.training": 1})
    feeds = {"R": np.array(0.1, np.float32), "T": np.array(t, np.int64)}
    for n in names[2:]:
        x = _rng.normal(size=shapes[int(n[-1])]).astype(np.float32)
        feeds[n] = np.abs(x) if n.startswith("S1") or (op == "Adagrad" and n.startswith(
            "S0")) else x  # (squared-gradient accumulators are >= 0)
    _check(model, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("t", [0, 3])
def test_training_ops_first_and_later_steps(t):
    _optimizer("Adagrad", 1, t, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01)
    _optimizer("Adam", 2, t, alpha=0.8, beta=0.95, epsilon=1e-6, norm_coefficient=0.02,
               norm_coefficient_post=0.01)
    for mode in ("standard", "nesterov"):
        _optimizer("Momentum", 1, t, alpha=0.9, beta=0.5, norm_coefficient=0.01, mode=mode)


# --- ai.onnx.ml -----------------------------------------------------------------------------------

def test_binarizer_and_array_feature_extractor():
    x = np.array([[-1.0, 0.5, np.nan], [2.0, 0.25, 0.3]], np.float32)
    model = _model([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml",
                                     threshold=0.3)],
                   [_vi("x", _F, [2, 3])], [_vi("y", _F, [2, 3])], {"ai.onnx.ml": 1})
    _check(model, {"x": x})
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    for shape in ([5], [2, 3, 5]):
        model = _model([node], [_vi("x", _F, shape), _vi("i", TensorProto.INT64, [1, 3])],
                       [_vi("y", _F, None)], {"ai.onnx.ml": 1})
        _check(model, {"x": _rng.normal(size=shape).astype(np.float32),
                       "i": np.array([[4, 0, 4]], np.int64)})


def test_label_encoder_numeric_keys_and_string_values():
    keys = numpy_helper.from_array(np.array([1, 5, 7, 5], np.int64), "keys")
    values = numpy_helper.from_array(np.array([10, 20, 30, 40], np.int16), "values")
    default = numpy_helper.from_array(np.array([-3], np.int16), "default")
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_tensor=keys, values_tensor=values, default_tensor=default)
    model = _model([node], [_vi("x", TensorProto.INT64, [2, 3])],
                   [_vi("y", TensorProto.INT16, [2, 3])], {"ai.onnx.ml": 4, "": 21})
    _check(model, {"x": np.array([[5, 1, 2], [7, 7, 0]], np.int64)})  # repeated 5: last wins
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_floats=[0.5, float("nan"), -1.0], values_floats=[1.0, 2.0, 3.0],
                            default_float=9.0)
    model = _model([node], [_vi("x", _F, ["n"])], [_vi("y", _F, ["n"])], {"ai.onnx.ml": 2})
    x = np.array([np.nan, -1.0, 0.5, 4.0], np.float32)
    # (the spec: a NaN key matches every NaN input; the reference's dict lookup misses it)
    np.testing.assert_array_equal(run(model, [x])[0], [2.0, 3.0, 1.0, 9.0])
    _check(model, {"x": x[1:]})
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_int64s=[1, 2], values_strings=["a", "b"])
    model = _model([node], [_vi("x", TensorProto.INT64, [4])],
                   [_vi("y", TensorProto.STRING, [4])], {"ai.onnx.ml": 2})
    got = run(model, [np.array([2, 1, 3, 2], np.int64)])[0]  # 3: the default, "_Unused"
    assert got.dtype == nd.UTF8 and got.tolist() == ["b", "a", "_Unused", "b"]


def _forest(aggregate: int, post: int = 0):
    """Two trees over 3 features using every comparison mode, NaN routing and a set."""
    # tree 0: n0 (x0 <= 0.5) -> n1 (x1 in {1, 2}) | n2 (x2 > 1); tree 1: n3 (x1 != 0) ...
    modes = numpy_helper.from_array(np.array([0, 6, 3, 5, 1, 2, 4], np.uint8), "m")
    splits = numpy_helper.from_array(np.array([0.5, 0, 1.0, 0.0, -1.0, 2.0, 3.0]), "s")
    weights = numpy_helper.from_array(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0,
                                                10.0]), "w")
    members = numpy_helper.from_array(np.array([1.0, 2.0, np.nan]), "mv")
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=3,
        nodes_modes=modes, nodes_splits=splits, membership_values=members,
        nodes_featureids=[0, 1, 2, 1, 0, 2, 1],
        nodes_truenodeids=[1, 0, 2, 4, 0, 6, 8], nodes_trueleafs=[0, 1, 1, 0, 1, 0, 1],
        nodes_falsenodeids=[2, 1, 3, 5, 7, 4, 9], nodes_falseleafs=[0, 1, 1, 0, 1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 1, 0, 0],
        leaf_targetids=[0, 1, 2, 0, 1, 2, 0, 1, 2, 0], leaf_weights=weights,
        tree_roots=[0, 3], aggregate_function=aggregate, post_transform=post)
    return _model([node], [_vi("x", _F, ["N", 3])], [_vi("y", _F, None)], {"ai.onnx.ml": 5})


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_modes_nan_sets_and_aggregates(aggregate):
    x = np.array([[0.2, 1.0, 5.0], [np.nan, 2.0, 0.0], [0.9, 0.0, 2.5], [0.9, 3.0, 0.5],
                  [-2.0, 0.0, 3.0], [0.5, np.nan, 1.0]], np.float32)
    _check(_forest(aggregate), {"x": x})


def test_tree_ensemble_logistic_post_transform_and_compiled_run():
    from samediff import compiler
    x = _rng.normal(size=(7, 3)).astype(np.float32)
    raw = ReferenceEvaluator(_forest(1)).run(None, {"x": x})[0]
    previous = compiler.set_executor("compiled")
    try:
        got = run(_forest(1, post=2), [x])[0]
    finally:
        compiler.set_executor(previous)
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-raw.astype(np.float64))), rtol=1e-6)
