"""Samples of the ``cnn`` ops (``samediff/ops/cnn.py``), added to ``op_samples.SAMPLES``.

References are written from the definitions with explicit Python loops over output positions
and kernel taps (small shapes): output ``o`` of an axis reads input ``o * stride - before +
tap * dilation`` when that lies inside the image; padding contributes nothing (zeros for a
convolution, "absent" for pooling). ``op_samples`` adds ``cnn_samples(Sample)`` to
its ``SAMPLES`` (one table; this file only keeps the cnn rows apart). Activations are handled as NCHW / weights as
``[kH, kW, iC, oC]`` index maps; other layouts are transposed in and out first.
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

def _axis(size, k, s, d, pad):
    """[(out, tap, in)] of one axis, and the output size. ``pad`` an int or "same" (output
    ceil(size / s); total padding (out - 1) * s + (k - 1) * d + 1 - size, the odd one after)."""
    span = (k - 1) * d + 1
    if pad == "same":
        out = math.ceil(size / s)
        before = max((out - 1) * s + span - size, 0) // 2
    else:
        before, out = pad, (size + 2 * pad - span) // s + 1
    triples = [(o, t, o * s - before + t * d) for o in range(out) for t in range(k)]
    return [(o, t, i) for o, t, i in triples if 0 <= i < size], out


def _pad_of(padding, a):
    return "same" if padding == "same" else padding[a]


def _plan(hw, kernel, stride, padding, dilation):
    """[(oh, ow, i, j, ih, iw)] of the in-image contributions, and the output size."""
    rows, oh = _axis(hw[0], kernel[0], stride[0], dilation[0], _pad_of(padding, 0))
    cols, ow = _axis(hw[1], kernel[1], stride[1], dilation[1], _pad_of(padding, 1))
    return [(r[0], c[0], r[1], c[1], r[2], c[2]) for r in rows for c in cols], (oh, ow)


def _to_nchw(x, fmt):
    return x.transpose(0, 3, 1, 2) if fmt == "NHWC" else x


def _from_nchw(y, fmt):
    return y.transpose(0, 2, 3, 1) if fmt == "NHWC" else y


def _to_hwio(w, wfmt):
    return w.transpose(2, 3, 1, 0) if wfmt == "OIHW" else w


# --- conv2d and its adjoints ----------------------------------------------------------------------

def conv2d_ref(x, w, b=None, *, stride, padding, dilation, groups, data_format,
               weights_format, activation="none"):
    x, w = _to_nchw(x, data_format), _to_hwio(w, weights_format)
    n, o = x.shape[0], w.shape[3]
    plan, (oh, ow) = _plan(x.shape[2:], w.shape[:2], stride, padding, dilation)
    y = np.zeros((n, o, oh, ow))
    per_in, per_out = w.shape[2], o // groups  # group k: input channels k*per_in..., w's 3rd
    for b_, q in itertools.product(range(n), range(o)):  # dim indexes within the group
        terms = {}
        first = (q // per_out) * per_in
        for r, s, i, j, ih, iw in plan:
            for ch in range(per_in):
                terms.setdefault((r, s), []).append(x[b_, first + ch, ih, iw] * w[i, j, ch, q])
        for (r, s), t in terms.items():
            y[b_, q, r, s] = math.fsum(t)
        if b is not None:
            y[b_, q] += b[q]
    if activation == "relu":
        y = np.where(y > 0, y, 0.0)
    return _from_nchw(y, data_format)


def conv2d_input_grad_ref(g, w, like, *, stride, padding, dilation, groups, data_format,
                          weights_format):
    g, w = _to_nchw(g, data_format), _to_hwio(w, weights_format)
    shape = _to_nchw(like, data_format).shape
    plan, _ = _plan(shape[2:], w.shape[:2], stride, padding, dilation)
    dx = np.zeros(shape)
    per_in, per_out = w.shape[2], w.shape[3] // groups
    for b_, ch, q in itertools.product(range(shape[0]), range(shape[1]), range(w.shape[3])):
        if ch // per_in != q // per_out:  # another group's channels
            continue
        for r, s, i, j, ih, iw in plan:
            dx[b_, ch, ih, iw] += g[b_, q, r, s] * w[i, j, ch % per_in, q]
    return _from_nchw(dx, data_format)


def conv2d_weight_grad_ref(x, g, like, *, stride, padding, dilation, groups, data_format,
                           weights_format):
    x, g = _to_nchw(x, data_format), _to_nchw(g, data_format)
    kernel = like.shape[2:] if weights_format == "OIHW" else like.shape[:2]
    plan, _ = _plan(x.shape[2:], kernel, stride, padding, dilation)
    per_in, per_out = x.shape[1] // groups, g.shape[1] // groups
    dw = np.zeros((kernel[0], kernel[1], per_in, g.shape[1]))
    for b_, ch, q in itertools.product(range(x.shape[0]), range(x.shape[1]), range(g.shape[1])):
        if ch // per_in != q // per_out:
            continue
        for r, s, i, j, ih, iw in plan:
            dw[i, j, ch % per_in, q] += x[b_, ch, ih, iw] * g[b_, q, r, s]
    return dw.transpose(3, 2, 0, 1) if weights_format == "OIHW" else dw


def conv1d_ref(x, w, b=None, *, stride, padding, dilation, groups, data_format,
               weights_format):
    if data_format == "NWC":
        x = x.transpose(0, 2, 1)
    if weights_format == "OIW":
        w = w.transpose(2, 1, 0)  # -> [k, iC, oC]
    plan, out = _axis(x.shape[2], w.shape[0], stride, dilation, padding)
    y = np.zeros((x.shape[0], w.shape[2], out))
    per_in, per_out = w.shape[1], w.shape[2] // groups
    for b_, q, o in itertools.product(range(x.shape[0]), range(w.shape[2]), range(out)):
        first = (q // per_out) * per_in
        y[b_, q, o] = math.fsum(x[b_, first + ch, i] * w[t, ch, q] for oo, t, i in plan
                                if oo == o for ch in range(per_in)) + (0.0 if b is None else b[q])
    return y.transpose(0, 2, 1) if data_format == "NWC" else y


# --- pooling --------------------------------------------------------------------------------------

def _windows(x, kernel, stride, padding, dilation):
    """{(oh, ow): [(i, j, ih, iw)] in row-major tap order} and the output size."""
    plan, size = _plan(x.shape[2:], kernel, stride, padding, dilation)
    win: dict = {}
    for r, s, i, j, ih, iw in sorted(plan, key=lambda p: (p[0], p[1], p[2], p[3])):
        win.setdefault((r, s), []).append((ih, iw))
    return win, size


def max_pooling2d_ref(x, *, kernel, stride, padding, dilation, data_format):
    x = _to_nchw(x, data_format)
    win, (oh, ow) = _windows(x, kernel, stride, padding, dilation)
    y = np.zeros(x.shape[:2] + (oh, ow))
    for b_, ch in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for (r, s), taps in win.items():
            y[b_, ch, r, s] = max(x[b_, ch, ih, iw] for ih, iw in taps)
    return _from_nchw(y, data_format)


def max_pooling2d_grad_ref(x, g, *, kernel, stride, padding, dilation, data_format):
    x, g = _to_nchw(x, data_format), _to_nchw(g, data_format)
    win, _ = _windows(x, kernel, stride, padding, dilation)
    dx = np.zeros(x.shape)
    for b_, ch in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for (r, s), taps in win.items():
            vals = [x[b_, ch, ih, iw] for ih, iw in taps]
            ih, iw = taps[vals.index(max(vals))]  # the first maximum wins
            dx[b_, ch, ih, iw] += g[b_, ch, r, s]
    return _from_nchw(dx, data_format)


def avg_pooling2d_ref(x, *, kernel, stride, padding, dilation, data_format, count_include_pad):
    x = _to_nchw(x, data_format)
    win, (oh, ow) = _windows(x, kernel, stride, padding, dilation)
    y = np.zeros(x.shape[:2] + (oh, ow))
    for b_, ch in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for (r, s), taps in win.items():
            div = kernel[0] * kernel[1] if count_include_pad else len(taps)
            y[b_, ch, r, s] = math.fsum(x[b_, ch, ih, iw] for ih, iw in taps) / div
    return _from_nchw(y, data_format)


def avg_pooling2d_grad_ref(g, like, *, kernel, stride, padding, dilation, data_format,
                           count_include_pad):
    g, like = _to_nchw(g, data_format), _to_nchw(like, data_format)
    win, _ = _windows(like, kernel, stride, padding, dilation)
    dx = np.zeros(like.shape)
    for b_, ch in itertools.product(range(like.shape[0]), range(like.shape[1])):
        for (r, s), taps in win.items():
            div = kernel[0] * kernel[1] if count_include_pad else len(taps)
            for ih, iw in taps:
                dx[b_, ch, ih, iw] += g[b_, ch, r, s] / div
    return _from_nchw(dx, data_format)


# --- the rows -------------------------------------------------------------------------------------

def cnn_samples(S) -> dict:
    """The rows of the cnn ops: op name -> samples (``S`` is ``op_samples.Sample``)."""
    SAMPLES: dict = {}

    _NHWC = {"data_format": "NHWC"}
    _CONV_CASES = [  # (x, w, attrs, output shape)
        (u(2, 3, 5, 5), u(3, 3, 3, 2), {}, (2, 2, 3, 3)),
        (u(2, 5, 6, 3), u(2, 3, 3, 3), {"stride": 2, "padding": 1, **_NHWC,
                                        "weights_format": "OIHW"}, (2, 3, 3, 2)),
        (u(1, 2, 7, 6), u(3, 3, 2, 2), {"dilation": 2, "padding": "same", "stride": (2, 1)},
         (1, 2, 4, 6)),
        (u(2, 4, 3, 3), u(1, 1, 4, 3), {"padding": (0, 1)}, (2, 3, 3, 5)),
        (u(2, 4, 5, 5), u(3, 3, 2, 6), {"groups": 2}, (2, 6, 3, 3)),  # grouped
        (u(1, 4, 4, 3), u(3, 1, 2, 2), {"groups": 3, "padding": 1, **_NHWC,  # depthwise
                                        "weights_format": "OIHW"}, (1, 5, 5, 3)),
    ]
    SAMPLES["conv2d"] = [  # (4 rows at most: cases 3 and 4 run through the adjoints below)
        S([u(2, 3, 5, 5), u(3, 3, 3, 2), u(2)], {"activation": "relu"}, conv2d_ref),  # epilogue
        S([*_CONV_CASES[1][:2], u(2)], _CONV_CASES[1][2], conv2d_ref),  # NHWC bias
        S(list(_CONV_CASES[2][:2]), _CONV_CASES[2][2], conv2d_ref),
        S(list(_CONV_CASES[5][:2]), {**_CONV_CASES[5][2], "activation": "relu"}, conv2d_ref),
    ]
    SAMPLES["conv2d_input_grad"] = [S([u(*out), w, x], a, conv2d_input_grad_ref)
                                    for x, w, a, out in (_CONV_CASES[k] for k in (1, 2, 4, 5))]
    SAMPLES["conv2d_weight_grad"] = [S([x, u(*out), w], a, conv2d_weight_grad_ref)
                                     for x, w, a, out in (_CONV_CASES[k] for k in (0, 3, 4, 5))]
    SAMPLES["conv1d"] = [
        S([u(2, 3, 7), u(3, 3, 2), u(2)], {}, conv1d_ref),
        S([u(2, 8, 3), u(2, 3, 3)], {"data_format": "NWC", "weights_format": "OIW", "stride": 2,
                                     "padding": 1, "dilation": 2}, conv1d_ref),
        S([u(1, 2, 5), u(4, 2, 3)], {"padding": "same"}, conv1d_ref),
        S([u(2, 4, 6), u(3, 2, 4), u(4)], {"groups": 2}, conv1d_ref),
    ]
    _POOL_CASES = [  # (x, attrs, output shape)
        (u(2, 3, 4, 6), {"kernel": 2, "stride": 2}, (2, 3, 2, 3)),
        (u(2, 5, 5, 2), {"kernel": 3, "stride": 2, "padding": 1, **_NHWC}, (2, 3, 3, 2)),
        (u(1, 2, 5, 4), {"kernel": (3, 2), "padding": "same"}, (1, 2, 5, 4)),
        (u(1, 2, 7, 7), {"kernel": 2, "dilation": 2, "stride": 2, "padding": (1, 0)}, (1, 2, 4, 3)),
    ]
    SAMPLES["max_pooling2d"] = [S([x], a, max_pooling2d_ref) for x, a, _ in _POOL_CASES]
    SAMPLES["max_pooling2d_grad"] = [S([x, u(*out)], a, max_pooling2d_grad_ref)
                                     for x, a, out in _POOL_CASES[:3]]
    SAMPLES["avg_pooling2d"] = [  # padding excluded from the divisor (rows 1, 3), included (2)
        S([x], {**a, "count_include_pad": k == 2}, avg_pooling2d_ref)
        for k, (x, a, _) in enumerate(_POOL_CASES)]
    SAMPLES["avg_pooling2d_grad"] = [
        S([u(*out), x], a, avg_pooling2d_grad_ref) for x, a, out in _POOL_CASES[1:3]] + [
        S([u(2, 3, 3, 2), _POOL_CASES[1][0]], {**_POOL_CASES[1][1], "count_include_pad": True},
          avg_pooling2d_grad_ref)]
    return SAMPLES
