"""Samples of the 1-D/3-D/global pooling ops (``cnn_pooling.py``), the layout ops
(``cnn_layout.py``) and LRN (``cnn_lrn.py``), added to ``op_samples.SAMPLES`` like ``op_samples_cnn.py``'s rows.

References are written from the definitions with explicit Python loops over output
positions (small shapes), never with the ops: output ``o`` of an axis reads input ``o *
stride - before + tap * dilation`` when that lies inside the input (``_axis`` of
``op_samples_cnn``); DCR order for space/depth; TensorFlow's batch index ``offset * batch +
n`` for space/batch. Channels-last data are transposed to channels first and back.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
    from op_samples_cnn import _axis
except ImportError:  # ... or tests/ became one
    from .op_references import u
    from .op_samples_cnn import _axis


def _first(x, fmt):
    """Channels-first view of ``x`` in layout ``fmt`` (NCW, NWC, NCDHW, NDHWC...)."""
    return x if fmt[1] == "C" else np.moveaxis(x, -1, 1)


def _back(y, fmt):
    return y if fmt[1] == "C" else np.moveaxis(y, 1, -1)


def _t(v, n):
    return v if v == "same" or isinstance(v, tuple) else (v,) * n


def _windows_nd(sp, a):
    """{output position: [input positions in row-major tap order]}, output shape."""
    n = len(sp)
    kernel, stride, dilation, padding = (_t(a[k], n) for k in
                                         ("kernel", "stride", "dilation", "padding"))
    axes, outs = [], []
    for i in range(n):
        trip, o = _axis(sp[i], kernel[i], stride[i], dilation[i],
                        "same" if padding == "same" else padding[i])
        axes.append(trip)
        outs.append(o)
    win: dict = {}
    for combo in itertools.product(*axes):  # each axis's triples are (out, tap, in), taps ascending
        pos = tuple(c[0] for c in combo)
        win.setdefault(pos, []).append((tuple(c[1] for c in combo), tuple(c[2] for c in combo)))
    return {p: [i for _, i in sorted(v)] for p, v in win.items()}, tuple(outs), kernel


def max_pool_ref(x, **a):
    x = _first(x, a["data_format"])
    win, outs, _ = _windows_nd(x.shape[2:], a)
    y = np.zeros(x.shape[:2] + outs)
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for p, taps in win.items():
            y[(b, c) + p] = max(x[(b, c) + t] for t in taps)
    return _back(y, a["data_format"])


def max_pool_grad_ref(x, g, **a):
    x, g = _first(x, a["data_format"]), _first(g, a["data_format"])
    win, _, _ = _windows_nd(x.shape[2:], a)
    dx = np.zeros(x.shape)
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for p, taps in win.items():
            vals = [x[(b, c) + t] for t in taps]
            dx[(b, c) + taps[vals.index(max(vals))]] += g[(b, c) + p]
    return _back(dx, a["data_format"])


def avg_pool_ref(x, *, count_include_pad, **a):
    x = _first(x, a["data_format"])
    win, outs, kernel = _windows_nd(x.shape[2:], a)
    y = np.zeros(x.shape[:2] + outs)
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for p, taps in win.items():
            div = math.prod(kernel) if count_include_pad else len(taps)
            y[(b, c) + p] = math.fsum(x[(b, c) + t] for t in taps) / div
    return _back(y, a["data_format"])


def avg_pool_grad_ref(g, like, *, count_include_pad, **a):
    g, like = _first(g, a["data_format"]), _first(like, a["data_format"])
    win, _, kernel = _windows_nd(like.shape[2:], a)
    dx = np.zeros(like.shape)
    for b, c in itertools.product(range(like.shape[0]), range(like.shape[1])):
        for p, taps in win.items():
            div = math.prod(kernel) if count_include_pad else len(taps)
            for t in taps:
                dx[(b, c) + t] += g[(b, c) + p] / div
    return _back(dx, a["data_format"])


def _global_ref(reduce):
    def ref(x, *, data_format, keep_dims):
        xf = _first(x, data_format)
        y = np.zeros(xf.shape[:2])
        for b, c in itertools.product(range(xf.shape[0]), range(xf.shape[1])):
            y[b, c] = reduce([xf[(b, c) + p] for p in np.ndindex(*xf.shape[2:])])
        if keep_dims:
            y = _back(y.reshape(y.shape + (1,) * (x.ndim - 2)), data_format)
        return y
    return ref


def upsampling_ref(x, *, scale, data_format):
    x = _first(x, data_format)
    y = np.zeros(x.shape[:2] + tuple(d * s for d, s in zip(x.shape[2:], scale)))
    for idx in np.ndindex(*y.shape):
        y[idx] = x[idx[:2] + tuple(i // s for i, s in zip(idx[2:], scale))]
    return _back(y, data_format)


def upsampling_grad_ref(g, *, scale, data_format):
    g = _first(g, data_format)
    y = np.zeros(g.shape[:2] + tuple(d // s for d, s in zip(g.shape[2:], scale)))
    for idx in np.ndindex(*g.shape):
        y[idx[:2] + tuple(i // s for i, s in zip(idx[2:], scale))] += g[idx]
    return _back(y, data_format)


def _col_plan(hw, kernel, a):
    """[(i, j, oh, ow, ih, iw)] of the in-image reads, and (oH, oW)."""
    rows, oh = _axis(hw[0], kernel[0], a["stride"][0], a["dilation"][0],
                     "same" if a["padding"] == "same" else a["padding"][0])
    cols, ow = _axis(hw[1], kernel[1], a["stride"][1], a["dilation"][1],
                     "same" if a["padding"] == "same" else a["padding"][1])
    return [(r[1], c[1], r[0], c[0], r[2], c[2]) for r in rows for c in cols], (oh, ow)


def im2col_ref(x, *, kernel, **a):
    plan, (oh, ow) = _col_plan(x.shape[2:], kernel, a)
    y = np.zeros(x.shape[:2] + tuple(kernel) + (oh, ow))
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for i, j, r, s, ih, iw in plan:
            y[n, c, i, j, r, s] = x[n, c, ih, iw]
    return y


def col2im_ref(cols, *, size, **a):
    plan, _ = _col_plan(size, cols.shape[2:4], a)
    y = np.zeros(cols.shape[:2] + tuple(size))
    for n, c in itertools.product(range(cols.shape[0]), range(cols.shape[1])):
        for i, j, r, s, ih, iw in plan:
            y[n, c, ih, iw] += cols[n, c, i, j, r, s]
    return y


def space_to_depth_ref(x, *, block_size, data_format):
    x, b = _first(x, data_format), block_size
    n, c, h, w = x.shape
    y = np.zeros((n, c * b * b, h // b, w // b))
    for nn, cc, hh, ww, bh, bw in itertools.product(range(n), range(c), range(h // b),
                                                    range(w // b), range(b), range(b)):
        y[nn, (bh * b + bw) * c + cc, hh, ww] = x[nn, cc, hh * b + bh, ww * b + bw]
    return _back(y, data_format)


def depth_to_space_ref(x, *, block_size, data_format):
    x, b = _first(x, data_format), block_size
    n, cb, h, w = x.shape
    c = cb // (b * b)
    y = np.zeros((n, c, h * b, w * b))
    for nn, cc, hh, ww, bh, bw in itertools.product(range(n), range(c), range(h), range(w),
                                                    range(b), range(b)):
        y[nn, cc, hh * b + bh, ww * b + bw] = x[nn, (bh * b + bw) * c + cc, hh, ww]
    return _back(y, data_format)


def space_to_batch_ref(x, *, blocks, paddings):
    m = len(blocks)
    pads = paddings or ((0, 0),) * m
    sp = [(x.shape[1 + i] + sum(pads[i])) // blocks[i] for i in range(m)]
    n, rest = x.shape[0], x.shape[1 + m:]
    y = np.zeros((n * math.prod(blocks), *sp, *rest))
    for off in itertools.product(*(range(b) for b in blocks)):
        k = 0
        for i, o in enumerate(off):  # row-major offset index
            k = k * blocks[i] + o
        for nn in range(n):
            for pos in itertools.product(*(range(s) for s in sp)):
                src = tuple(p * b + o - pd[0] for p, b, o, pd in zip(pos, blocks, off, pads))
                if all(0 <= s_ < x.shape[1 + i] for i, s_ in enumerate(src)):
                    y[(k * n + nn,) + pos] = x[(nn,) + src]
    return y


def batch_to_space_ref(x, *, blocks, crops):
    m = len(blocks)
    crops = crops or ((0, 0),) * m
    n = x.shape[0] // math.prod(blocks)
    full = [x.shape[1 + i] * blocks[i] for i in range(m)]
    out = [full[i] - sum(crops[i]) for i in range(m)]
    y = np.zeros((n, *out, *x.shape[1 + m:]))
    for nn in range(n):
        for pos in itertools.product(*(range(s) for s in out)):
            q = [p + c[0] for p, c in zip(pos, crops)]  # position before cropping
            k = 0
            for i in range(m):
                k = k * blocks[i] + q[i] % blocks[i]
            y[(nn,) + pos] = x[(k * n + nn,) + tuple(qq // b for qq, b in zip(q, blocks))]
    return y


def _channel_window(x, fmt, depth):
    """{index: [indices of the channel window]} for channels on axis 1 or last."""
    ax = 1 if fmt == "NCHW" else x.ndim - 1
    win = {}
    for idx in np.ndindex(*x.shape):
        c = idx[ax]
        win[idx] = [idx[:ax] + (k,) + idx[ax + 1:] for k in range(max(0, c - depth),
                                                                   min(x.shape[ax], c + depth + 1))]
    return win


def lrn_window_sum_ref(x, *, depth, data_format):
    y = np.zeros(x.shape)
    for idx, taps in _channel_window(x, data_format, depth).items():
        y[idx] = math.fsum(x[t] for t in taps)
    return y


def lrn_ref(x, *, alpha, beta, bias, depth, data_format):
    y = np.zeros(x.shape)
    for idx, taps in _channel_window(x, data_format, depth).items():
        y[idx] = x[idx] / (bias + alpha * math.fsum(x[t] ** 2 for t in taps)) ** beta
    return y


# --- the rows -------------------------------------------------------------------------------------

def cnn_layout_samples(S) -> dict:
    """The rows of the ops of ``cnn_pooling.py``, ``cnn_layout.py`` and ``cnn_lrn.py`` (``S`` is
    ``op_samples.Sample``)."""
    SAMPLES: dict = {}
    _P1 = [  # (x, attrs, output shape)
        (u(2, 3, 7), {"kernel": 2, "stride": 2}, (2, 3, 3)),
        (u(2, 8, 3), {"kernel": 3, "stride": 2, "padding": 1, "data_format": "NWC"}, (2, 4, 3)),
        (u(1, 2, 5), {"kernel": 3, "padding": "same", "dilation": 2}, (1, 2, 5)),
    ]
    _P3 = [
        (u(1, 2, 4, 4, 5), {"kernel": 2, "stride": 2}, (1, 2, 2, 2, 2)),
        (u(1, 3, 5, 4, 2), {"kernel": (3, 2, 2), "stride": (2, 2, 1), "padding": (1, 1, 0),
                            "data_format": "NDHWC"}, (1, 2, 3, 3, 2)),
        (u(1, 1, 3, 4, 3), {"kernel": (2, 3, 2), "padding": "same"}, (1, 1, 3, 4, 3)),
    ]
    for n, cases in ((1, _P1), (3, _P3)):
        SAMPLES[f"max_pooling{n}d"] = [S([x], a, max_pool_ref) for x, a, _ in cases]
        SAMPLES[f"max_pooling{n}d_grad"] = [S([x, u(*out)], a, max_pool_grad_ref)
                                            for x, a, out in cases]
        SAMPLES[f"avg_pooling{n}d"] = [S([x], {**a, "count_include_pad": k == 1}, avg_pool_ref)
                                       for k, (x, a, _) in enumerate(cases)]
        SAMPLES[f"avg_pooling{n}d_grad"] = [
            S([u(*out), x], {**a, "count_include_pad": k == 2}, avg_pool_grad_ref)
            for k, (x, a, out) in enumerate(cases)]
    SAMPLES["global_max_pooling"] = [
        S([u(2, 3, 4, 5)], {}, _global_ref(max)),
        S([u(2, 4, 3)], {"data_format": "NWC", "keep_dims": True}, _global_ref(max)),
        S([u(1, 2, 3, 2, 2)], {"keep_dims": True}, _global_ref(max)),
    ]
    SAMPLES["global_avg_pooling"] = [
        S([u(2, 3, 4, 5)], {}, _global_ref(lambda v: math.fsum(v) / len(v))),
        S([u(2, 3, 2, 4, 3)], {"data_format": "NDHWC"}, _global_ref(lambda v: math.fsum(v) / len(v))),
        S([u(1, 2, 5)], {"keep_dims": True}, _global_ref(lambda v: math.fsum(v) / len(v))),
    ]
    SAMPLES["upsampling2d"] = [S([u(2, 3, 2, 3)], {"scale": 2}, upsampling_ref),
                               S([u(1, 2, 3, 2)], {"scale": (1, 3), "data_format": "NHWC"},
                                 upsampling_ref)]
    SAMPLES["upsampling2d_grad"] = [S([u(2, 3, 4, 6)], {"scale": 2}, upsampling_grad_ref),
                                    S([u(1, 2, 9, 2)], {"scale": (1, 3), "data_format": "NHWC"},
                                      upsampling_grad_ref)]
    SAMPLES["upsampling3d"] = [S([u(1, 2, 2, 2, 3)], {"scale": (2, 1, 2)}, upsampling_ref),
                               S([u(1, 2, 1, 2, 2)], {"scale": 2, "data_format": "NDHWC"},
                                 upsampling_ref)]
    SAMPLES["upsampling3d_grad"] = [S([u(1, 2, 4, 2, 6)], {"scale": (2, 1, 2)},
                                      upsampling_grad_ref),
                                    S([u(1, 4, 2, 4, 2)], {"scale": 2, "data_format": "NDHWC"},
                                      upsampling_grad_ref)]
    _COLS = [  # (x, attrs, cols shape)
        (u(2, 2, 4, 5), {"kernel": 2}, (2, 2, 2, 2, 3, 4)),
        (u(1, 3, 5, 5), {"kernel": 3, "stride": 2, "padding": 1}, (1, 3, 3, 3, 3, 3)),
        (u(1, 2, 5, 4), {"kernel": (2, 3), "padding": "same", "dilation": (2, 1)},
         (1, 2, 2, 3, 5, 4)),
    ]
    SAMPLES["im2col"] = [S([x], a, im2col_ref) for x, a, _ in _COLS]
    SAMPLES["col2im"] = [S([u(*c)], {**{k: v for k, v in a.items() if k != "kernel"},
                                     "size": x.shape[2:]}, col2im_ref) for x, a, c in _COLS]
    SAMPLES["space_to_depth"] = [S([u(2, 3, 4, 6)], {"block_size": 2}, space_to_depth_ref),
                                 S([u(1, 6, 3, 2)], {"block_size": 3, "data_format": "NHWC"},
                                   space_to_depth_ref)]
    SAMPLES["depth_to_space"] = [S([u(2, 12, 2, 3)], {"block_size": 2}, depth_to_space_ref),
                                 S([u(1, 2, 1, 18)], {"block_size": 3, "data_format": "NHWC"},
                                   depth_to_space_ref)]
    SAMPLES["space_to_batch"] = [
        S([u(2, 4, 4, 1)], {"blocks": (2, 2)}, space_to_batch_ref),
        S([u(1, 3, 5, 2)], {"blocks": (2, 3), "paddings": ((1, 0), (0, 1))}, space_to_batch_ref),
        S([u(2, 5, 3)], {"blocks": (2,), "paddings": ((2, 1),)}, space_to_batch_ref),
    ]
    SAMPLES["batch_to_space"] = [
        S([u(8, 2, 2, 1)], {"blocks": (2, 2)}, batch_to_space_ref),
        S([u(6, 2, 2, 2)], {"blocks": (2, 3), "crops": ((1, 0), (0, 1))}, batch_to_space_ref),
        S([u(4, 3, 3)], {"blocks": (2,), "crops": ((2, 1),)}, batch_to_space_ref),
    ]
    SAMPLES["lrn_window_sum"] = [S([u(2, 5, 2, 3)], {"depth": 1}, lrn_window_sum_ref),
                                 S([u(1, 2, 3, 4)], {"depth": 2, "data_format": "NHWC"},
                                   lrn_window_sum_ref)]
    SAMPLES["local_response_normalization"] = [
        S([u(2, 5, 2, 3)], {"depth": 1, "alpha": 0.5, "beta": 0.75, "bias": 2.0}, lrn_ref),
        S([u(1, 2, 3, 4)], {"data_format": "NHWC", "depth": 2}, lrn_ref),
        S([u(1, 3, 2, 2)], {}, lrn_ref),
    ]
    return SAMPLES
