"""ONNX signal converters (``samediff/onnx/converters/signal.py``): DFT (opsets 17 and 20,
forward/inverse, full/one-sided, real/complex, cropped/padded), STFT, the window generators
and MelWeightMatrix, each checked against ``onnx.reference.ReferenceEvaluator``; gradients
through DFT and STFT against finite differences; interpreted vs compiled runs; named errors."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff import compiler  # noqa: E402
from samediff.gradcheck import check_gradients  # noqa: E402
from samediff.onnx import OnnxImportError, OnnxStaticInputError, import_onnx  # noqa: E402
from samediff.onnx.converters import signal  # noqa: E402

F32, F64, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64


def _model(node, inputs, initializers=(), opset=17, out_type=F64):
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", out_type, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _both(model, feeds):
    """(ours, onnx.reference's) output 'y' for ``feeds``."""
    ours = import_onnx(model).output(feeds, "y")["y"].numpy()
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    return ours, want


def _signal(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --- DFT ----------------------------------------------------------------------------------------

def _dft_model(shape, *, opset, axis, length=None, inverse=0, onesided=0, dtype=F64):
    """DFT of graph input x; axis (opset 20) and dft_length are initializers."""
    inits, names = [], ["x", "", ""]
    if length is not None:
        inits.append(("n", np.array(length, np.int64)))
        names[1] = "n"
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset >= 20:
        inits.append(("axis", np.array(axis, np.int64)))
        names[2] = "axis"
    else:
        attrs["axis"] = axis
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("DFT", names, ["y"], **attrs)
    return _model(node, [("x", dtype, list(shape))], inits, opset, dtype)


DFT_CASES = [  # (input shape, axis, dft_length, inverse, onesided)
    ((2, 8, 1), 1, None, 0, 0),      # real -> full spectrum
    ((2, 8, 2), 1, None, 0, 0),      # complex -> full spectrum
    ((2, 8, 1), 1, None, 0, 1),      # RFFT, even length
    ((2, 7, 1), -2, None, 0, 1),     # RFFT, odd length
    ((2, 8, 2), 1, None, 1, 0),      # inverse
    ((2, 5, 2), 1, None, 1, 1),      # IRFFT, default length 2 * (5 - 1)
    ((2, 5, 2), 1, 9, 1, 1),         # IRFFT, odd length (input cropped to 5 bins)
    ((2, 6, 2), 1, 7, 1, 1),         # IRFFT, input longer than the 4 bins read
    ((2, 3, 2), 1, 12, 1, 1),        # IRFFT, bins zero-padded
    ((3, 6, 4, 1), 1, 10, 0, 0),     # zero-padded, a later dim untouched
    ((3, 6, 4, 2), 2, 3, 0, 0),      # cropped, inner axis
    ((3, 6, 4, 2), 0, None, 1, 0),   # the first axis
    ((2, 6, 5, 1), -3, 4, 0, 1),     # negative axis, cropped RFFT
]


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("shape,axis,length,inverse,onesided", DFT_CASES)
def test_dft_matches_the_reference(opset, shape, axis, length, inverse, onesided):
    model = _dft_model(shape, opset=opset, axis=axis, length=length, inverse=inverse,
                       onesided=onesided)
    ours, want = _both(model, {"x": _signal(shape)})
    assert ours.shape == want.shape and ours.dtype == want.dtype
    np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-10)


def test_dft_default_axes_differ_between_opsets_17_and_20():
    x = _signal((2, 3, 4, 1))
    for opset, axis in ((17, 1), (20, 2)):  # DFT-17: axis 1; DFT-20: axis -2
        model = _model(helper.make_node("DFT", ["x"], ["y"]), [("x", F64, [2, 3, 4, 1])],
                       opset=opset)
        ours = import_onnx(model).output({"x": x}, "y")["y"].numpy()
        full = np.fft.fft(x[..., 0], axis=axis)
        np.testing.assert_allclose(ours, np.stack([full.real, full.imag], -1), atol=1e-12)


def test_dft_float32_and_float16_and_a_run_time_batch():
    model = _dft_model(["N", 16, 1], opset=20, axis=1, onesided=1, dtype=F32)
    sd = import_onnx(model)
    for n in (1, 3):
        x = _signal((n, 16, 1), seed=n, dtype=np.float32)
        got = sd.output({"x": x}, "y")["y"].numpy()
        want = np.fft.rfft(x[..., 0].astype(np.float64), axis=1)
        assert got.dtype == np.float32 and got.shape == (n, 9, 2)
        np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), atol=1e-4)
    half = _dft_model((2, 8, 2), opset=20, axis=1, dtype=TensorProto.FLOAT16)
    x = _signal((2, 8, 2), dtype=np.float16)
    got = import_onnx(half).output({"x": x}, "y")["y"].numpy()
    full = np.fft.fft(x[..., 0].astype(np.float64) + 1j * x[..., 1], axis=1)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.stack([full.real, full.imag], -1), atol=2e-2)


def test_gradient_through_dft_matches_finite_differences():
    """loss = sum(DFT(x) * c): d loss / dx is the transposed basis applied to c."""
    model = _dft_model((2, 6, 2), opset=20, axis=1, length=5, inverse=1, onesided=0)
    sd = import_onnx(model)
    weights = _signal((2, 5, 2), seed=7)
    sd.constant("c", weights)
    (sd.get_variable("y") * sd.get_variable("c")).sum().mark_as_loss()
    x = _signal((2, 6, 2), seed=3)
    result = check_gradients(sd, {"x": x}, wrt=["x"])
    assert result.passed, str(result)
    # and the analytic gradient itself: the adjoint of the linear map
    grad = sd.calculate_gradients({"x": x}, "x")["x"].numpy()
    spec = np.fft.fft(weights[..., 0] + 1j * weights[..., 1], axis=1) / 5  # (the conjugate
    expect = np.zeros((2, 6, 2))                                           # transform, / n)
    expect[:, :5, 0], expect[:, :5, 1] = spec.real, spec.imag
    np.testing.assert_allclose(grad, expect, atol=1e-10)


# --- STFT ----------------------------------------------------------------------------------------

def _stft_model(length, channels, step, *, window=None, window_input=False, frame_length=None,
                onesided=1):
    inputs = [("signal", F64, [1, length, channels])]
    inits = [("step", np.array(step, np.int64))]
    names = ["signal", "step", "", ""]
    if window is not None:
        names[2] = "window"
        if window_input:
            inputs.append(("window", F64, [len(window)]))
        else:
            inits.append(("window", window))
    if frame_length is not None:
        names[3] = "frame_length"
        inits.append(("frame_length", np.array(frame_length, np.int64)))
    while not names[-1]:
        names.pop()
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    return _model(node, inputs, inits)


STFT_CASES = [  # (length, channels, step, window, window as a graph input, frame_length,
    #              onesided)
    (64, 1, 8, None, False, 16, 1),
    (64, 1, 8, np.hanning(16), False, None, 1),
    (50, 1, 7, np.hamming(12), True, None, 1),
    (40, 2, 5, np.hanning(10), False, None, 0),
    (33, 1, 4, None, False, 9, 0),
    (20, 1, 3, None, False, None, 1),  # no window, no length: one frame of the signal
]


@pytest.mark.parametrize("length,channels,step,window,window_input,frame_length,onesided",
                         STFT_CASES)
def test_stft_matches_the_reference(length, channels, step, window, window_input,
                                    frame_length, onesided):
    model = _stft_model(length, channels, step, window=window, window_input=window_input,
                        frame_length=frame_length, onesided=onesided)
    feeds = {"signal": _signal((1, length, channels), seed=length)}
    if window_input:
        feeds["window"] = window
    ours, want = _both(model, feeds)
    assert ours.shape == want.shape
    np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-10)


def test_stft_gradient_and_compiled_run():
    """Gradients w.r.t. the signal and a run-time window; compiled == interpreted."""
    model = _stft_model(24, 1, 5, window=np.hanning(8), window_input=True)
    sd = import_onnx(model)
    feeds = {"signal": _signal((1, 24, 1), seed=1), "window": np.hanning(8)}
    interp = compiler.set_executor("interpreter")
    try:
        want = sd.output(feeds, "y")["y"].numpy()
    finally:
        compiler.set_executor(interp)
    previous = compiler.set_executor("compiled")
    try:
        got = sd.output(feeds, "y")["y"].numpy()
    finally:
        compiler.set_executor(previous)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    sd.get_variable("y").square().sum().mark_as_loss()  # (the power spectrum's total)
    result = check_gradients(sd, feeds, wrt=["signal", "window"])
    assert result.passed, str(result)


# --- windows and MelWeightMatrix -------------------------------------------------------------

@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size,out_type", [(10, F32), (7, F64), (1, F64), (12, I64)])
def test_windows_match_the_reference(op, periodic, size, out_type):
    if size == 1 and not periodic:
        pytest.skip("a 1-sample symmetric window is 0/0 in the reference (we give 1.0)")
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic, output_datatype=out_type)
    model = _model(node, [], [("size", np.array(size, np.int64))], out_type=out_type)
    sd = import_onnx(model)
    ours = sd.output({}, "y")["y"].numpy()
    want = ReferenceEvaluator(model).run(None, {})[0]
    assert ours.dtype == want.dtype and ours.shape == want.shape
    np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-7)


def test_one_sample_symmetric_window_is_its_peak():
    node = helper.make_node("HannWindow", ["size"], ["y"], periodic=0)
    model = _model(node, [], [("size", np.array(1, np.int32))], out_type=F32)
    assert import_onnx(model).output({}, "y")["y"].numpy().tolist() == [1.0]


@pytest.mark.parametrize("bins,n,rate,low,high", [
    (8, 16, 8192, 0.0, 4096.0),
    (10, 64, 16000, 20.0, 8000.0),
    (20, 32, 16000, 300.0, 4000.0),   # narrow bands: some filters one bin wide
    (4, 512, 22050, 0.0, 11025.0),
])
def test_mel_weight_matrix_matches_the_reference(bins, n, rate, low, high):
    node = helper.make_node("MelWeightMatrix", ["b", "n", "r", "lo", "hi"], ["y"],
                            output_datatype=F64)
    model = _model(node, [], [("b", np.array(bins, np.int64)), ("n", np.array(n, np.int64)),
                              ("r", np.array(rate, np.int64)),
                              ("lo", np.array(low, np.float32)),
                              ("hi", np.array(high, np.float32))])
    ours = import_onnx(model).output({}, "y")["y"].numpy()
    want = ReferenceEvaluator(model).run(None, {})[0]
    assert ours.shape == (n // 2 + 1, bins)
    np.testing.assert_allclose(ours, want, atol=1e-12)


# --- named errors ------------------------------------------------------------------------------

def test_a_run_time_window_size_is_named():
    node = helper.make_node("HannWindow", ["size"], ["y"])
    model = _model(node, [("size", I64, [])], out_type=F32)
    with pytest.raises(OnnxStaticInputError, match="size") as info:
        import_onnx(model)
    assert info.value.input_name == "size"
    got = import_onnx(model, static_inputs={"size": np.array(4)}).output({}, "y")["y"]
    assert got.numpy().shape == (4,)


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", DFT_CASES)
def test_dft_without_a_basis_runs_through_the_fft_ops(monkeypatch, shape, axis, length,
                                                      inverse, onesided):
    """A basis too large to build: the (non-differentiable) fft ops give the same result."""
    monkeypatch.setattr(signal, "MAX_BASIS_ENTRIES", 0)
    model = _dft_model(shape, opset=20, axis=axis, length=length, inverse=inverse,
                       onesided=onesided)
    sd = import_onnx(model)
    assert "fft" in sd.summary() and "tensor_mmul" not in sd.summary()
    x = _signal(shape)
    ours = sd.output({"x": x}, "y")["y"].numpy()
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert ours.shape == want.shape and ours.dtype == want.dtype
    np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-10)


def test_a_run_time_transform_length_uses_the_fft_ops_and_stft_windows_still_apply(
        monkeypatch):
    model = _dft_model([2, "T", 1], opset=20, axis=1, onesided=1)
    sd = import_onnx(model)
    for t in (6, 9):
        x = _signal((2, t, 1), seed=t)
        spec = np.fft.rfft(x[..., 0], axis=1)
        np.testing.assert_allclose(sd.output({"x": x}, "y")["y"].numpy(),
                                   np.stack([spec.real, spec.imag], -1), atol=1e-12)
    monkeypatch.setattr(signal, "MAX_BASIS_ENTRIES", 0)  # a static window, no basis
    stft = _stft_model(40, 1, 6, window=np.hanning(10))
    feeds = {"signal": _signal((1, 40, 1))}
    ours, want = _both(stft, feeds)
    np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-10)


def test_run_time_lengths_and_bad_attributes_are_named():
    complex_onesided = _dft_model([2, "T", 2], opset=20, axis=1, onesided=1)
    with pytest.raises(OnnxImportError, match="complex signal whose length is known only"):
        import_onnx(complex_onesided)
    stft = _model(helper.make_node("STFT", ["signal", "step"], ["y"]),
                  [("signal", F32, [1, "T", 1])], [("step", np.array(4, np.int64))],
                  out_type=F32)
    with pytest.raises(OnnxImportError, match="signal length must be known"):
        import_onnx(stft)
    with pytest.raises(OnnxImportError, match="IRFFT"):
        import_onnx(_dft_model((1, 8, 1), opset=20, axis=1, inverse=1, onesided=1))
    with pytest.raises(OnnxImportError, match="axis 2 is out of range"):
        import_onnx(_dft_model((1, 8, 1), opset=17, axis=2))
    with pytest.raises(OnnxImportError, match="frame_length 30 must be in"):
        import_onnx(_stft_model(20, 1, 3, frame_length=30))
