"""Samples of ``conv3d``, ``deconv2d``, ``deconv3d``, ``depthwise_conv2d``,
``separable_conv2d`` and their helper ops (``samediff/ops/cnn_volumetric.py``,
``cnn_depthwise.py``), added to ``op_samples.SAMPLES`` by ``cnn_more_conv_samples(Sample)``.

References are written from the definitions with explicit Python loops over positions and
kernel taps, in any number of spatial dims: a convolution *gathers* -- output ``o`` of an
axis reads input ``o * stride - before + tap * dilation`` when that lies inside the input --
and a transposed convolution *scatters*: input ``i`` at tap ``t`` adds into output ``i * stride
- before + t * dilation`` when that lies inside the output (``before`` is the padding, or for
"same" ``max((in - 1) * stride + (k - 1) * dilation + 1 - out, 0) // 2`` with ``in`` the
convolution's output size). Channels are summed with small dot products per position.
Activations are handled channels first, weights kernel first; other layouts are transposed
in and out. Nothing here calls the ops under test.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
except ImportError:  # ... or tests/ became one
    from .op_references import u


# --- geometry, from the definition ------------------------------------------------------------

def _before(size, out, k, s, d, pad):
    """Padding before of one axis of a convolution from ``size`` to ``out``."""
    if pad == "same":
        return max((out - 1) * s + (k - 1) * d + 1 - size, 0) // 2
    return pad


def _conv_axis(size, k, s, d, pad):
    """[(out, tap, in)] of one axis of a convolution, and the output size."""
    span = (k - 1) * d + 1
    out = math.ceil(size / s) if pad == "same" else (size + 2 * pad - span) // s + 1
    before = _before(size, out, k, s, d, pad)
    triples = [(o, t, o * s - before + t * d) for o in range(out) for t in range(k)]
    return [x for x in triples if 0 <= x[2] < size], out


def _pads(padding, n):
    return ["same"] * n if padding == "same" else list(padding)


def _plan(sizes, kernel, stride, padding, dilation):
    """[(out position, tap, in position)] over all spatial axes, and the output sizes."""
    axes = [_conv_axis(sizes[a], kernel[a], stride[a], dilation[a], _pads(padding, len(sizes))[a])
            for a in range(len(sizes))]
    plan = [tuple(zip(*combo)) for combo in itertools.product(*(p for p, _ in axes))]
    return plan, tuple(o for _, o in axes)


def _cfirst(x, fmt):
    """Channels-first view of an activation in ``fmt``."""
    return x if fmt[1] == "C" else np.moveaxis(x, -1, 1)


def _cback(y, fmt):
    return y if fmt[1] == "C" else np.moveaxis(y, 1, -1)


def _kfirst(w, wfmt):
    """Weights [k..., A, B] from a channels-first layout ([B, A, k...])."""
    if wfmt[0] in "OI":
        n = w.ndim - 2
        return w.transpose(*range(2, 2 + n), 1, 0)
    return w


def _kback(w, wfmt):
    if wfmt[0] in "OI":
        n = w.ndim - 2
        return w.transpose(n + 1, n, *range(n))
    return w


def _at(pos):
    return (slice(None), slice(None)) + tuple(pos)


# --- conv3d and its weight adjoint ----------------------------------------------------------------

def conv3d_ref(x, w, b=None, *, stride, padding, dilation, data_format, weights_format):
    x, w = _cfirst(x, data_format), _kfirst(w, weights_format)  # w [kD, kH, kW, I, O]
    plan, outs = _plan(x.shape[2:], w.shape[:3], stride, padding, dilation)
    y = np.zeros((x.shape[0], w.shape[4]) + outs)
    for o, t, i in plan:
        y[_at(o)] += x[_at(i)] @ w[t]
    if b is not None:
        y += np.asarray(b).reshape(-1, 1, 1, 1)
    return _cback(y, data_format)


def conv3d_weight_grad_ref(x, g, *, stride, padding, dilation, data_format, weights_format,
                           kernel):
    x, g = _cfirst(x, data_format), _cfirst(g, data_format)
    plan, _ = _plan(x.shape[2:], kernel, stride, padding, dilation)
    dw = np.zeros(tuple(kernel) + (x.shape[1], g.shape[1]))
    for o, t, i in plan:
        dw[t] += x[_at(i)].T @ g[_at(o)]
    return _kback(dw, weights_format)


# --- transposed convolutions: scatters --------------------------------------------------------------

def _deconv_ref(x, w, b, stride, padding, dilation, data_format, weights_format, output_size):
    """w: [k..., oC, iC] (kernel first) or [iC, oC, k...] (channels first)."""
    x = _cfirst(x, data_format)
    w = _kfirst(w, weights_format)  # [k..., oC, iC] either way
    n = x.ndim - 2
    ks, sizes, pads = w.shape[:n], x.shape[2:], _pads(padding, n)
    if output_size is None:
        output_size = [sizes[a] * stride[a] if pads[a] == "same" else
                       (sizes[a] - 1) * stride[a] + (ks[a] - 1) * dilation[a] + 1 - 2 * pads[a]
                       for a in range(n)]
    before = [_before(output_size[a], sizes[a], ks[a], stride[a], dilation[a], pads[a])
              for a in range(n)]
    y = np.zeros((x.shape[0], w.shape[n]) + tuple(output_size))
    for i in itertools.product(*(range(s) for s in sizes)):
        for t in itertools.product(*(range(k) for k in ks)):
            o = [i[a] * stride[a] - before[a] + t[a] * dilation[a] for a in range(n)]
            if all(0 <= o[a] < output_size[a] for a in range(n)):
                y[_at(o)] += x[_at(i)] @ w[t].T
    if b is not None:
        y += np.asarray(b).reshape((-1,) + (1,) * n)
    return _cback(y, data_format)


def deconv_ref(x, w, b=None, *, stride, padding, dilation, data_format, weights_format,
               output_size):
    return _deconv_ref(x, w, b, stride, padding, dilation, data_format, weights_format,
                       output_size)


# --- depthwise and separable --------------------------------------------------------------------

def _depthwise(x, w, stride, padding, dilation):
    """x channels first, w [kH, kW, C, M] -> channels c * M + m."""
    c, m = w.shape[2:]
    plan, outs = _plan(x.shape[2:], w.shape[:2], stride, padding, dilation)
    y = np.zeros((x.shape[0], c * m) + outs)
    for o, t, i in plan:
        for ch, k in itertools.product(range(c), range(m)):
            y[(slice(None), ch * m + k) + o] += x[(slice(None), ch) + i] * w[t][ch, k]
    return y


def depthwise_conv2d_ref(x, w, b=None, *, stride, padding, dilation, data_format,
                         weights_format):
    y = _depthwise(_cfirst(x, data_format), w, stride, padding, dilation)
    if b is not None:
        y += np.asarray(b).reshape(-1, 1, 1)
    return _cback(y, data_format)


def depthwise_conv2d_input_grad_ref(g, w, *, stride, padding, dilation, data_format,
                                    weights_format, output_size):
    g = _cfirst(g, data_format)
    c, m = w.shape[2:]
    pads = _pads(padding, 2)
    if output_size is None:
        output_size = [g.shape[2 + a] * stride[a] if pads[a] == "same" else
                       (g.shape[2 + a] - 1) * stride[a] + (w.shape[a] - 1) * dilation[a] + 1
                       - 2 * pads[a] for a in range(2)]
    plan, _ = _plan(output_size, w.shape[:2], stride, padding, dilation)
    dx = np.zeros((g.shape[0], c) + tuple(output_size))
    for o, t, i in plan:
        for ch, k in itertools.product(range(c), range(m)):
            dx[(slice(None), ch) + i] += g[(slice(None), ch * m + k) + o] * w[t][ch, k]
    return _cback(dx, data_format)


def depthwise_conv2d_weight_grad_ref(x, g, *, stride, padding, dilation, data_format,
                                     weights_format, kernel):
    x, g = _cfirst(x, data_format), _cfirst(g, data_format)
    c = x.shape[1]
    m = g.shape[1] // c
    plan, _ = _plan(x.shape[2:], kernel, stride, padding, dilation)
    dw = np.zeros(tuple(kernel) + (c, m))
    for o, t, i in plan:
        for ch, k in itertools.product(range(c), range(m)):
            dw[t + (ch, k)] += math.fsum(
                (x[(slice(None), ch) + i] * g[(slice(None), ch * m + k) + o]).ravel())
    return dw


def separable_conv2d_ref(x, dw, pw, b=None, *, stride, padding, dilation, data_format,
                         weights_format):
    h = _depthwise(_cfirst(x, data_format), dw, stride, padding, dilation)
    y = np.zeros((h.shape[0], pw.shape[3]) + h.shape[2:])
    for r, s in itertools.product(range(h.shape[2]), range(h.shape[3])):
        y[:, :, r, s] = h[:, :, r, s] @ pw[0, 0]
    if b is not None:
        y += np.asarray(b).reshape(-1, 1, 1)
    return _cback(y, data_format)


# --- the rows -------------------------------------------------------------------------------------

def cnn_more_conv_samples(S) -> dict:
    """The rows of these ops: op name -> samples (``S`` is ``op_samples.Sample``)."""
    SAMPLES: dict = {}
    cl3 = {"data_format": "NDHWC"}
    _CONV3D = [  # (x, w, attrs, output shape)
        (u(2, 2, 4, 4, 3), u(2, 3, 2, 2, 3), {}, (2, 3, 3, 2, 2)),
        (u(1, 5, 4, 3, 2), u(3, 2, 2, 2, 2), {"stride": 2, "padding": 1, **cl3,
                                              "weights_format": "OIDHW"}, (1, 3, 3, 2, 3)),
        (u(1, 2, 3, 5, 4), u(2, 3, 2, 2, 2), {"padding": "same", "stride": (1, 2, 2),
                                              "dilation": (1, 1, 2)}, (1, 2, 3, 3, 2)),
    ]
    SAMPLES["conv3d"] = [
        S([*_CONV3D[0][:2], u(3)], _CONV3D[0][2], conv3d_ref),
        S([*_CONV3D[1][:2], u(3)], _CONV3D[1][2], conv3d_ref),
        S(list(_CONV3D[2][:2]), _CONV3D[2][2], conv3d_ref),
    ]

    def kernel_of(w, a):
        return w.shape[2:] if a.get("weights_format") == "OIDHW" else w.shape[:3]
    SAMPLES["conv3d_weight_grad"] = [
        S([x, u(*out)], {**a, "kernel": kernel_of(w, a)}, conv3d_weight_grad_ref)
        for x, w, a, out in _CONV3D]
    SAMPLES["deconv2d"] = [
        S([u(2, 3, 3, 4), u(3, 2, 2, 3), u(2)], {}, deconv_ref),  # HWOI: [kH, kW, oC, iC]
        S([u(1, 3, 3, 2), u(2, 3, 3, 3)], {"stride": 2, "padding": 1, "data_format": "NHWC",
                                           "weights_format": "IOHW"}, deconv_ref),
        S([u(1, 2, 3, 2), u(3, 3, 2, 2)], {"stride": 2, "padding": "same"}, deconv_ref),
        S([u(1, 2, 3, 3), u(2, 3, 1, 2)], {"stride": (2, 1), "dilation": (1, 2),
                                           "output_size": (7, 7)}, deconv_ref),
    ]
    SAMPLES["deconv3d"] = [
        S([u(1, 3, 2, 3, 2), u(2, 2, 2, 2, 3), u(2)], {}, deconv_ref),  # [kD, kH, kW, oC, iC]
        S([u(1, 2, 3, 2, 2), u(2, 3, 2, 2, 2)], {"stride": 2, "padding": 1,
                                                 "data_format": "NDHWC",
                                                 "weights_format": "IODHW"}, deconv_ref),
        S([u(1, 2, 2, 2, 3), u(2, 3, 2, 2, 2)], {"stride": (2, 1, 2), "padding": "same",
                                                 "output_size": (3, 2, 6)}, deconv_ref),
    ]
    _DW = [  # (x, w [kH, kW, C, M], attrs, output shape)
        (u(2, 3, 5, 5), u(3, 3, 3, 2), {}, (2, 6, 3, 3)),
        (u(1, 5, 6, 2), u(2, 3, 2, 3), {"stride": 2, "padding": 1, "data_format": "NHWC"},
         (1, 3, 3, 6)),
        (u(1, 2, 6, 5), u(3, 2, 2, 1), {"padding": "same", "stride": (2, 1),
                                        "dilation": (1, 2)}, (1, 2, 3, 5)),
    ]
    SAMPLES["depthwise_conv2d"] = [
        S([*_DW[0][:2], u(6)], _DW[0][2], depthwise_conv2d_ref),
        S([*_DW[1][:2], u(6)], _DW[1][2], depthwise_conv2d_ref),
        S(list(_DW[2][:2]), _DW[2][2], depthwise_conv2d_ref),
    ]
    SAMPLES["depthwise_conv2d_input_grad"] = [
        S([u(*out), w], {**a, "output_size": x.shape[2:] if a.get("data_format") != "NHWC"
                         else x.shape[1:3]}, depthwise_conv2d_input_grad_ref)
        for x, w, a, out in _DW] + [
        S([u(1, 4, 3, 3), u(2, 2, 2, 2)], {}, depthwise_conv2d_input_grad_ref)]  # default size
    SAMPLES["depthwise_conv2d_weight_grad"] = [
        S([x, u(*out)], {**a, "kernel": w.shape[:2]}, depthwise_conv2d_weight_grad_ref)
        for x, w, a, out in _DW]
    SAMPLES["separable_conv2d"] = [
        S([u(2, 3, 5, 5), u(3, 3, 3, 2), u(1, 1, 6, 4), u(4)], {}, separable_conv2d_ref),
        S([u(1, 5, 6, 2), u(2, 3, 2, 2), u(1, 1, 4, 3)], {"stride": 2, "padding": "same",
                                                          "data_format": "NHWC"},
          separable_conv2d_ref),
    ]
    return SAMPLES
