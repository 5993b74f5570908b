"""CNN argument errors (issue 21): pooling windows made only of padding, ND4J configs whose
kernel size disagrees with the weights, and layout mix-ups whose error names the keyword
that fixes them. Interpreter only, tiny arrays, no new Numba kernels."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError
from samediff.frontends.cnn_config import (Conv1DConfig, Conv2DConfig, Conv3DConfig,
                                           DeConv2DConfig, Pooling1DConfig, Pooling2DConfig,
                                           Pooling3DConfig)
from samediff.ops import REGISTRY
from samediff.ops.registry import TensorType

PADDING_ONLY = "would hold only padding"


# --- pooling windows made only of padding ---------------------------------------------------

def _axis(size: int, k: int, s: int, d: int, pad) -> tuple[int, int]:
    """(padding before, output size) of one axis, from the definitions: explicit padding p on
    both sides; "same" (ND4J's isSameMode) gives ceil(size / s) outputs and pads the total
    needed for that, the odd one after."""
    span = (k - 1) * d + 1
    if pad == "same":
        out = -(-size // s)
        return max((out - 1) * s + span - size, 0) // 2, out
    return pad, (size + 2 * pad - span) // s + 1


def _empty_windows(sizes, kernel, stride, pad, dilation) -> int | None:
    """How many output windows of an N-D pooling read no input element (None if the kernel
    does not fit): every output position x every tap, enumerated."""
    axes = [_axis(sizes[i], kernel[i], stride[i], dilation[i],
                  pad if pad == "same" else pad[i]) for i in range(len(sizes))]
    if any(out <= 0 for _, out in axes):
        return None
    empty = 0
    for pos in itertools.product(*(range(out) for _, out in axes)):
        if not any(all(0 <= pos[i] * stride[i] - axes[i][0] + tap[i] * dilation[i] < sizes[i]
                       for i in range(len(sizes)))
                   for tap in itertools.product(*(range(k) for k in kernel))):
            empty += 1
    return empty


_FORMATS = {1: "NCW", 2: "NHWC", 3: "NDHWC"}  # 2-D NHWC: the numpy per-tap kernels only


def _attrs(n, kernel, stride, pad, dilation, fmt):
    one = (lambda v: v[0]) if n == 1 else tuple
    return {"kernel": one(kernel), "stride": one(stride), "dilation": one(dilation),
            "padding": pad if pad == "same" else one(pad), "data_format": fmt}


def _check_config(n, sizes, kernel, stride, pad, dilation, fmt=None) -> str:
    """Run max and avg pooling (inference, and eagerly on ones) on one configuration and check
    the property: either both refuse with the named error, or every window held an input
    element (max of ones is 1 nowhere -inf; avg of ones is exactly 1: no empty window's 0).
    Returns "refused", "ran" or "unfit"."""
    empty = _empty_windows(sizes, kernel, stride, pad, dilation)
    if empty is None:
        return "unfit"
    fmt = fmt or _FORMATS[n]
    cf = fmt[1] == "C"
    shape = (1, 2, *sizes) if cf else (1, *sizes, 2)
    x = np.ones(shape, np.float32)
    attrs = _attrs(n, kernel, stride, pad, dilation, fmt)
    outcomes = set()
    for kind in ("max", "avg"):
        name = f"{kind}_pooling{n}d"
        op = REGISTRY[name]
        try:
            op.infer_types([TensorType(shape, np.dtype(np.float32))], op.make_attrs(attrs))
        except OpError as exc:
            assert PADDING_ONLY in str(exc) and name in str(exc), exc
            with pytest.raises(OpError, match=PADDING_ONLY):
                getattr(nd.cnn, name)(x, **attrs)
            outcomes.add("refused")
            continue
        assert empty == 0, f"{name} {attrs} on {shape}: {empty} padding-only windows accepted"
        y = getattr(nd.cnn, name)(x, **attrs).numpy()
        np.testing.assert_array_equal(y, np.ones_like(y), err_msg=f"{name} {attrs} {shape}")
        outcomes.add("ran")
    assert len(outcomes) == 1, f"max and avg pooling disagree on {attrs} {shape}"
    return outcomes.pop()


def test_dilated_windows_of_padding_only_are_refused():
    # the cases: -inf from max, 0.0 from avg, for a dilated window straddling the input
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    for f in (nd.cnn.maxPooling2d, nd.cnn.avgPooling2d):
        with pytest.raises(OpError, match=f"pooling2d: some windows {PADDING_ONLY}.*dilation 3"):
            f(x, kernel=2, dilation=3, padding=1)
    with pytest.raises(OpError, match=PADDING_ONLY):  # "same" padding too
        nd.cnn.maxPooling1d(np.ones((1, 1, 2), np.float32), kernel=2, dilation=3,
                            padding="same")
    with pytest.raises(OpError, match=PADDING_ONLY):
        nd.cnn.avgPooling3d(np.ones((1, 1, 4, 2, 4), np.float32), kernel=2, dilation=(1, 3, 1),
                            padding=(0, 1, 0))
    with pytest.raises(OpError, match=PADDING_ONLY):  # through an ND4J config
        nd.cnn.maxPooling2d(x, Pooling2DConfig(kH=2, kW=2, dH=3, dW=3, pH=1, pW=1))


def test_pooling_windows_grid_1d():
    """Every small 1-D configuration: refused with the named error, or no window is empty."""
    seen = {"refused": 0, "ran": 0, "unfit": 0}
    for size, k, s, d in itertools.product(range(1, 6), range(1, 4), (1, 2), (1, 2, 3, 4)):
        for pad in (0, 1, 2, "same"):
            seen[_check_config(1, (size,), (k,), (s,), pad if pad == "same" else (pad,),
                               (d,))] += 1
    assert seen["refused"] and seen["ran"] > seen["refused"], seen


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([2, 3]), data=st.data())
def test_pooling_windows_property_nd(n, data):
    sizes = tuple(data.draw(st.integers(1, 4)) for _ in range(n))
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(n))
    stride = tuple(data.draw(st.integers(1, 2)) for _ in range(n))
    dilation = tuple(data.draw(st.integers(1, 4)) for _ in range(n))
    pad = data.draw(st.one_of(st.just("same"),
                              st.tuples(*(st.integers(0, 2) for _ in range(n)))))
    fmt = data.draw(st.sampled_from([_FORMATS[n], "NCHW" if n == 2 else "NCDHW"]))
    if n == 2 and fmt == "NCHW" and kernel == (2, 2) and stride == (2, 2) and dilation == (1, 1):
        fmt = "NHWC"  # keep the compiled 2x2 kernel out of this cheap test
    _check_config(n, sizes, kernel, stride, pad, dilation, fmt)


def test_padding_only_error_in_samediff_leaves_no_node():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float32", 1, 1, 2, 2)
    before = (len(sd.ops()), [v.name for v in sd.variables()])
    with pytest.raises(OpError, match=PADDING_ONLY):
        sd.cnn.maxPooling2d("p", x, kernel=2, dilation=3, padding=1)
    assert (len(sd.ops()), [v.name for v in sd.variables()]) == before
    # sizes unknown when the graph is built: refused when they are known, at run time
    y = sd.placeholder("y", "float32", 1, 1, -1, -1)
    q = sd.cnn.avgPooling2d("q", y, kernel=2, dilation=3, padding=1)
    with pytest.raises(OpError, match=PADDING_ONLY):
        sd.output({"y": np.ones((1, 1, 2, 2), np.float32)}, q.name)
    out = sd.output({"y": np.ones((1, 1, 4, 4), np.float32)}, q.name)[q.name].numpy()
    np.testing.assert_array_equal(out, np.ones_like(out))


# --- ND4J configs against the call's weights ----------------------------------------------------

X4 = np.ones((1, 3, 8, 8), np.float32)


def test_conv2d_config_kernel_must_match_the_weights():
    w = np.ones((3, 3, 3, 4), np.float32)  # HWIO: 3x3
    with pytest.raises(OpError, match=r"conv2d: Conv2DConfig says kH=5, kW=5 but the weights w "
                                      r"\(HWIO, shape \(3, 3, 3, 4\)\) have kernel 3x3"):
        nd.cnn.conv2d(X4, w, Conv2DConfig(kH=5, kW=5))
    with pytest.raises(OpError, match="kW=2"):  # one of the two is enough
        nd.cnn.conv2d(X4, w, Conv2DConfig(kH=3, kW=2))
    assert nd.cnn.conv2d(X4, w, Conv2DConfig(kH=3, kW=3)).shape == (1, 4, 6, 6)
    assert nd.cnn.conv2d(X4, w, Conv2DConfig()).shape == (1, 4, 6, 6)  # kH/kW unset: fine
    # PyTorch [oC, iC, kH, kW] weights whose channels happen to fit the default HWIO reading:
    # only the config's kernel size tells them apart; the error says how to read them
    torch_w = np.ones((8, 3, 3, 3), np.float32)
    with pytest.raises(OpError, match="read as OIHW .* set weightsFormat='OIHW' in the "
                                      "Conv2DConfig"):
        nd.cnn.conv2d(X4, torch_w, Conv2DConfig(kH=3, kW=3))
    assert nd.cnn.conv2d(X4, torch_w, Conv2DConfig(kH=3, kW=3, weightsFormat="OIYX")).shape == (
        1, 8, 6, 6)


def test_other_configs_kernel_must_match_the_weights():
    with pytest.raises(OpError, match="conv1d: Conv1DConfig says k=5 .* have kernel 3"):
        nd.cnn.conv1d(np.ones((1, 2, 8), np.float32), np.ones((3, 2, 4), np.float32),
                      Conv1DConfig(k=5))
    with pytest.raises(OpError, match="conv3d: Conv3DConfig says kD=2, kH=2, kW=2 .* kernel "
                                      "1x2x2"):
        nd.cnn.conv3d(np.ones((1, 4, 4, 4, 2), np.float32), np.ones((1, 2, 2, 2, 3), np.float32),
                      Conv3DConfig(kD=2, kH=2, kW=2))
    x = np.ones((1, 2, 4, 4), np.float32)
    with pytest.raises(OpError, match="deconv2d: DeConv2DConfig says kH=3, kW=3 .*HWOI.* "
                                      "kernel 2x2"):
        nd.cnn.deconv2d(x, np.ones((2, 2, 5, 2), np.float32), DeConv2DConfig(kH=3, kW=3))
    with pytest.raises(OpError, match="read as IOHW .* pass weights_format='IOHW'"):
        nd.cnn.deconv2d(x, np.ones((2, 5, 3, 3), np.float32), DeConv2DConfig(kH=3, kW=3))
    with pytest.raises(OpError, match="depthwise_conv2d: Conv2DConfig says kH=3, kW=3"):
        nd.cnn.depthWiseConv2d(x, np.ones((2, 2, 2, 1), np.float32), Conv2DConfig(kH=3, kW=3))
    with pytest.raises(OpError, match="separable_conv2d: Conv2DConfig says kH=3.* dw "):
        nd.cnn.separableConv2d(x, np.ones((2, 2, 2, 1), np.float32),
                               np.ones((1, 1, 2, 3), np.float32), Conv2DConfig(kH=3, kW=3))


def test_config_kernel_error_in_samediff_leaves_no_node():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float32", -1, 3, 8, 8)
    w = sd.var("w", np.ones((3, 3, 3, 4), np.float32))
    before = (len(sd.ops()), [v.name for v in sd.variables()])
    with pytest.raises(OpError, match="Conv2DConfig says kH=5"):
        sd.cnn.conv2d("c", x, w, Conv2DConfig(kH=5, kW=5))
    assert (len(sd.ops()), [v.name for v in sd.variables()]) == before
    assert sd.cnn.conv2d("c", x, w, Conv2DConfig(kH=3, kW=3)).shape == (-1, 4, 6, 6)


def test_config_fields_given_twice_in_conflicting_ways():
    w = np.ones((3, 3, 3, 4), np.float32)
    with pytest.raises(OpError, match=r"two configs give stride differently: \(2, 2\).*\(1, 1\)"):
        nd.cnn.conv2d(X4, w, Conv2DConfig(sH=2, sW=2), Conv2DConfig())
    with pytest.raises(OpError, match="isNCDHW=True contradicts dataFormat='NDHWC'"):
        Pooling3DConfig(kD=2, kH=2, kW=2, dataFormat="NDHWC", isNCDHW=True)
    with pytest.raises(OpError, match=r"avg_pooling2d: Pooling2DConfig\(type='MAX'\) .* call "
                                      "maxPooling2d"):
        nd.cnn.avgPooling2d(X4, Pooling2DConfig(kH=2, kW=2, type="MAX"))
    with pytest.raises(OpError, match="max_pooling1d: Pooling1DConfig.*no p-norm pooling"):
        nd.cnn.maxPooling1d(np.ones((1, 1, 4), np.float32), Pooling1DConfig(k=2, type="PNORM"))
    # the op's own type, or none, is fine
    assert nd.cnn.maxPooling2d(X4, Pooling2DConfig(kH=2, kW=2, sH=2, sW=2,
                                                    type="max")).shape == (1, 3, 4, 4)


# --- layout mix-ups name the keyword that fixes them ----------------------------------------------

@pytest.mark.parametrize("call, fix", [
    (lambda: nd.cnn.conv2d(X4, np.ones((4, 3, 5, 5), np.float32)), "weights_format='OIHW'"),
    (lambda: nd.cnn.conv2d(np.ones((1, 8, 8, 3), np.float32), np.ones((3, 3, 3, 4), np.float32)),
     "data_format='NHWC'"),
    (lambda: nd.cnn.conv2d(np.ones((1, 8, 8, 3), np.float32), np.ones((4, 3, 5, 5), np.float32)),
     "data_format='NHWC' and weights_format='OIHW'"),
    (lambda: nd.cnn.conv1d(np.ones((1, 6, 2), np.float32), np.ones((3, 2, 4), np.float32)),
     "data_format='NWC'"),
    (lambda: nd.cnn.conv3d(np.ones((1, 2, 4, 4, 4), np.float32),
                           np.ones((5, 2, 3, 3, 3), np.float32)), "weights_format='OIDHW'"),
    (lambda: nd.cnn.deconv2d(np.ones((1, 2, 4, 4), np.float32), np.ones((2, 5, 3, 3), np.float32)),
     "weights_format='IOHW'"),
    (lambda: nd.cnn.depthWiseConv2d(np.ones((1, 5, 5, 3), np.float32),
                                    np.ones((2, 2, 3, 1), np.float32)), "data_format='NHWC'"),
])
def test_layout_mixups_name_the_keyword(call, fix):
    with pytest.raises(OpError, match="input channels.*pass " + fix.replace("(", r"\(")):
        call()


def test_batch_norm_on_nchw_data_names_axis_1():
    x = np.ones((2, 3, 4, 5), np.float32)
    m, v = np.zeros(3, np.float32), np.ones(3, np.float32)
    with pytest.raises(OpError, match="batch_norm: mean has 3 values but x .* axis 3 "
                                      r"\(axis=-1\).*NCHW.*pass axis=1"):
        nd.nn.batchNorm(x, m, v, v, m)
    assert nd.nn.batchNorm(x, m, v, v, m, axis=1).shape == x.shape
    for f in (nd.nn.batchNorm, nd.nn.batch_norm_train):  # numpy would broadcast 3 over 1
        with pytest.raises(OpError, match="pass axis=1"):
            f(np.ones((2, 3, 4, 1), np.float32), m, v, v, m)
    with pytest.raises(OpError, match="NHWC.*pass axis=-1"):  # and the other way round
        nd.nn.batchNorm(np.ones((2, 4, 5, 3), np.float32), m, v, v, m, axis=1)
    sd = SameDiff.create()  # in a graph too, and in training mode's batch_norm_train
    xv = sd.placeholder("x", "float32", -1, 3, 4, 5)
    before = len(sd.ops())
    with pytest.raises(OpError, match="pass axis=1"):
        sd.nn.batchNorm(xv, sd.constant("m", m), sd.constant("v", v), 1.0, 0.0)
    assert len(sd.ops()) == before
    with pytest.raises(OpError, match="pass axis=1"):
        nd.nn.batch_norm_train(x, m, v, v, m)
