"""ONNX export (``sd.to_onnx``), driven by the op table: for every op with an ONNX form
(``samediff.onnx.export.exportable``) and each of its sample rows, a graph holding that one op
is exported (at opsets 17 and 20 where its ONNX form differs by opset), passes
``onnx.checker``'s full check (inside ``to_onnx``), gives nd4py's values under
``onnx.reference``, and imports back to the same values (``REFUSED``, ``REFERENCE_WRONG``,
``IMPORT_REFUSED`` and ``EDGES_DIFFER`` record the exceptions, each with its reason). Plus: a
small model end to end, the composed rounding ops bit for bit at edge values, and the named
errors for ops with no ONNX form (in a graph or in a control-flow body). Whole models:
``test_onnx_export_models.py``."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator

from samediff import SameDiff
from samediff.onnx import import_onnx
from samediff.onnx.export import EXPORTERS, OnnxExportError, exportable
from samediff.ops import REGISTRY

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES, cast_inputs, run_attrs
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES, cast_inputs, run_attrs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
exportable("relu")  # fills EXPORTERS


#: ops whose ONNX form depends on the opset (Gelu and Mish ops from 18/20, reduction axes
#: as an input from 13/18, dilated AveragePool from 19, the bitwise ops and ScatterND's
#: max/min from 18): exported at opsets 17 and 20; the rest at 17
BY_OPSET = {"gelu", "mish", "avg_pooling2d", "sum", "mean", "max", "min", "prod",
            "log_sum_exp", "norm1", "norm2", "avg_pooling1d", "avg_pooling3d", "all", "any",
            "norm_max", "variance", "std", "bitwise_and", "bitwise_or", "bitwise_xor",
            "bitwise_not", "scatter_reduce", "string_concat", "string_split",
            "regex_full_match", "decode_image"}


def _cases() -> list:
    out = []
    for name in sorted(EXPORTERS):
        for i, sample in enumerate(SAMPLES.get(name, [])):
            dtype = "float32" if "float32" in sample.dtypes else sample.dtypes[0]
            for opset in (17, 20) if name in BY_OPSET else (17,):
                out.append(pytest.param(name, i, dtype, opset,
                                        id=f"{name}-{i}-{dtype}-opset{opset}"))
    return out


def _one_op_graph(name: str, i: int, dtype: str) -> tuple[SameDiff, dict, list[str]]:
    sample = SAMPLES[name][i]
    inputs = cast_inputs(sample, dtype)
    sd = SameDiff.create()
    feeds, args = {}, []
    for k, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            feeds[f"in{k}"] = x
            args.append(sd.placeholder(f"in{k}", x.dtype, *x.shape))
        else:
            args.append(x)  # a Python scalar: a weak literal
    # (named "result": the importer may give its intermediate table ops the op's own name)
    out = sd._record(REGISTRY[name], args, run_attrs(sample, dtype), "result")
    outs = out if isinstance(out, tuple) else (out,)
    return sd, feeds, [o.name for o in outs]


#: sample rows whose attributes have no ONNX form (at that opset): the exporter must refuse
#: them by name
REFUSED = {("layer_norm", 2, 17): "trailing dims only", ("avg_pooling2d", 3, 17): "opset 19",
           ("avg_pooling1d", 2, 17): "opset 19", ("lstm_layer", 2, 17): "cell_clip",
           ("bitwise_and", 0, 17): "opset 18", ("bitwise_or", 0, 17): "opset 18",
           ("bitwise_xor", 0, 17): "opset 18", ("bitwise_not", 0, 17): "opset 18",
           ("scatter_reduce", 1, 17): "opset 18", ("scatter_reduce", 2, 17): "opset 18",
           **{("bitcast", i, 17): "opset 26" for i in range(len(SAMPLES["bitcast"]))},
           **{(op, i, 17): "opset 20" for op in ("string_concat", "string_split",
                                                  "regex_full_match", "decode_image")
              for i in range(len(SAMPLES[op]))}}
#: rows onnx.reference gets wrong: checked by the checker and the round trip through import
#: only. Its GlobalMaxPool reduces the wrong axes unless the input is 4-D; its LRN sums over
#: the batch index in place of the channel; its MaxPool indexes out of range on a padded 3-D
#: window; its LSTM/GRU/RNN ignore sequence_lens and know no ScaledTanh; its Loop cannot
#: stack the scan outputs of a loop that runs no step; its RegexFullMatch runs Python's re,
#: whose \d matches any Unicode digit (RE2's, the spec's, only 0-9); its StringNormalizer
#: keeps "A" for the stop word "a" when matching is case-insensitive and no case changes.
REFERENCE_WRONG = {("global_max_pooling", 1), ("global_max_pooling", 2),
                   ("local_response_normalization", 0), ("local_response_normalization", 1),
                   ("local_response_normalization", 2), ("max_pooling3d", 2),
                   ("lstm_layer", 0), ("lstm_layer", 3), ("gru_layer", 1), ("gru_layer", 2),
                   ("rnn_layer", 1), ("while_loop", 3), ("regex_full_match", 0),
                   ("string_normalize", 2)}
#: rows whose model the importer cannot read back (checked under onnx.reference only): a
#: Loop with scan outputs and no trip count (a while_loop with per-step outputs)
IMPORT_REFUSED = {("while_loop", 2), ("while_loop", 3)}
#: ops whose ONNX form differs from nd4py at non-finite inputs (compared at finite ones)
EDGES_DIFFER = {"mish": "x * tanh(softplus(x)) is NaN at -inf in ONNX, -0 in nd4py",
                "hard_swish": "x * hard_sigmoid(x) is NaN at -inf in ONNX, -0 in nd4py"}


@pytest.fixture
def interpreted():
    """Graphs of one op run through the interpreter here: the op table's suites compare its
    compiled kernels with the interpreter already, and compiling every sample again would
    double the suite's compile time."""
    from samediff import compiler
    previous = compiler.set_executor("interpreter")
    yield
    compiler.set_executor(previous)


@pytest.mark.parametrize("name,i,dtype,opset", _cases())
def test_exported_op_matches_under_onnx_reference_and_imports_back(name, i, dtype, opset,
                                                                   interpreted):
    sd, feeds, outs = _one_op_graph(name, i, dtype)
    ours = sd.output(feeds, *outs)
    if (name, i, opset) in REFUSED:
        with pytest.raises(OnnxExportError, match=REFUSED[name, i, opset]):
            sd.to_onnx(opset=opset, outputs=outs)
        return
    model = sd.to_onnx(opset=opset, outputs=outs)
    finite = np.ones((), bool)
    if name in EDGES_DIFFER:
        finite = np.all([np.isfinite(x) for x in feeds.values()], axis=0)
    # (onnx.reference reads text from object arrays)
    theirs = (None if (name, i) in REFERENCE_WRONG else ReferenceEvaluator(model).run(
        None, {k: v.astype(object) if v.dtype.kind == "T" else v for k, v in feeds.items()}))
    back = (None if (name, i) in IMPORT_REFUSED
            else import_onnx(model).output(feeds, *outs))
    for k, name_out in enumerate(outs):
        want = np.asarray(ours[name_out].numpy())
        if want.dtype.kind == "T":  # text: equal, element for element
            if theirs is not None:
                assert np.asarray(theirs[k]).astype(want.dtype).tolist() == want.tolist()
            if back is not None:
                assert back[name_out].numpy().tolist() == want.tolist()
            continue
        rtol, atol = (2e-5, 2e-6) if want.dtype == np.float32 else (1e-9, 1e-12)
        keep = np.broadcast_to(finite, want.shape)
        if theirs is not None:
            got = np.asarray(theirs[k])
            assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
            np.testing.assert_allclose(got[keep], want[keep], rtol=rtol, atol=atol,
                                       equal_nan=True)
        if back is not None:
            np.testing.assert_allclose(np.asarray(back[name_out].numpy())[keep], want[keep],
                                       rtol=rtol, atol=atol, equal_nan=True)


def test_every_exporter_names_a_table_op_and_is_tested():
    assert set(EXPORTERS) <= set(REGISTRY)
    untested = sorted(n for n in EXPORTERS if not SAMPLES.get(n))
    assert not untested, untested


def test_a_model_round_trips_through_a_file(tmp_path):
    rng = np.random.default_rng(0)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 4)
    w1 = sd.var("w1", rng.standard_normal((4, 8)).astype(np.float32))
    b1 = sd.var("b1", np.zeros(8, np.float32))
    w2 = sd.var("w2", rng.standard_normal((8, 3)).astype(np.float32))
    h = sd.nn.gelu(sd.nn.linear(x, w1, b1))
    sd.nn.log_softmax(h.mmul(w2), dim=-1).rename("logp")
    path = tmp_path / "mlp.onnx"
    sd.to_onnx(path, outputs=["logp"])
    for batch in (1, 5):
        xv = rng.standard_normal((batch, 4)).astype(np.float32)
        want = sd.output({"x": xv}, "logp")["logp"].numpy()
        got = ReferenceEvaluator(str(path)).run(None, {"x": xv})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        back = SameDiff.import_onnx(path).output({"x": xv}, "logp")["logp"].numpy()
        np.testing.assert_allclose(back, want, rtol=1e-6, atol=1e-6)


def test_without_outputs_the_graph_ends_and_losses_are_exported():
    """``to_onnx()`` with no ``outputs=``: every value nothing reads, in graph order, then the
    loss variables (read or not)."""
    rng = np.random.default_rng(1)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 3)
    y = sd.placeholder("y", "float", -1, 2)
    w = sd.var("w", rng.standard_normal((3, 2)).astype(np.float32))
    pred = x.mmul(w).rename("pred")
    loss = sd.loss.mean_squared_error("loss", y, pred)
    sd.math.exp(loss).rename("e")
    sd.set_loss_variables("loss")
    model = sd.to_onnx()  # (a ModelProto when no path is given)
    assert [o.name for o in model.graph.output] == ["e", "loss"]  # (pred is read by the loss)


def test_ops_without_an_onnx_form_are_all_listed():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", 8)
    y = sd._record(REGISTRY["rfft"], [x], {}, "spectrum")
    sd._record(REGISTRY["irfft"], [y], {}, "back")
    with pytest.raises(OnnxExportError, match="2 node\\(s\\).*'spectrum' \\(rfft\\).*irfft"):
        sd.to_onnx()


def test_an_opset_outside_the_supported_range_is_refused():
    sd = SameDiff.create()
    sd.nn.relu(sd.placeholder("x", "float", 2))
    with pytest.raises(OnnxExportError, match="opset 9"):
        sd.to_onnx(opset=9)


@pytest.mark.parametrize("name", ["floor_div", "floor_mod", "round"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_composed_rounding_ops_match_bit_for_bit_at_edge_values(name, dtype):
    """floor_div, floor_mod and round are composed of several ONNX ops: every pair of edge
    values (signed zeros, halves, the largest value below a half, infinities, NaN, huge and
    tiny) gives nd4py's exact result, the sign of a zero included."""
    edges = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -5.5, -0.3, 1e-30, 3e30, np.inf,
                      -np.inf, np.nan, np.nextafter(0.5, 0.0)], dtype)
    x, y = (v.astype(dtype) for v in np.meshgrid(edges, edges))
    sd = SameDiff.create()
    ins = [sd.placeholder("a", dtype, *x.shape)]
    feeds = {"a": x}
    if name != "round":
        ins.append(sd.placeholder("b", dtype, *y.shape))
        feeds["b"] = y
    sd._record(REGISTRY[name], ins, {}, "r")
    want = sd.output(feeds, "r")["r"].numpy()
    got = ReferenceEvaluator(sd.to_onnx(outputs=["r"])).run(None, feeds)[0]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


def test_a_body_op_without_an_onnx_form_is_named():
    from samediff.control import cond
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", 4)
    cond(x.sum() > 0.0, lambda a: sd._record(REGISTRY["cumprod"], [a], {}, None),
         lambda a: a * 2.0, x).rename("y")
    with pytest.raises(OnnxExportError, match="then_body body holds.*cumprod"):
        sd.to_onnx(outputs=["y"])
