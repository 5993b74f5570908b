"""Pooling ops of the ``cnn`` group, every spatial rank: 2-D, 1-D, 3-D and global, with ND4J's
conventions as in ``cnn.py``.

* ``max_pooling2d(x)``, ``avg_pooling2d(x)``: ``kernel`` (required), ``stride`` (default 1, as
  ND4J's ``Pooling2DConfig``), ``padding``/``dilation`` as ``conv2d``'s, ``data_format`` NCHW
  (default) or NHWC; compiled kernels (``kernels/cnn.py``). Geometry whose windows would hold
  only padding (padding over half the kernel, or a dilated window straddling the input) is
  refused (``check_windows``), in every spatial rank.

* ``max_pooling1d(x)``, ``avg_pooling1d(x)``: ``data_format`` ``"NCW"`` (ND4J's default) or
  ``"NWC"``; ``kernel`` (required), ``stride`` (default 1), ``padding`` an int, ``"valid"``
  or ``"same"``, ``dilation`` -- each one int.
* ``max_pooling3d(x)``, ``avg_pooling3d(x)``: ``"NCDHW"`` (default) or ``"NDHWC"``; the
  window attributes are an int (every axis) or a triple (depth, height, width).
* Padding never takes part, as in 2-D: max ignores it, avg divides by the taps inside the
  input (ND4J's ``EXCLUDE_PADDING``) unless ``count_include_pad=True`` (the whole window).
  ``"same"`` is ND4J's ``isSameMode``: ``out = ceil(in / stride)``, the odd padding after.
* ``global_max_pooling(x)``, ``global_avg_pooling(x)``: max/mean over every spatial axis of
  an input of rank >= 3; ``data_format`` ``"NCHW"`` (channels first: axes 2...) or ``"NHWC"``
  (channels last: axes 1..rank-2) whatever the spatial rank (``NCW``/``NCDHW`` and
  ``NWC``/``NDHWC`` are accepted as the same two choices); ``keep_dims`` keeps the pooled
  axes as size 1 (DL4J's ``GlobalPoolingLayer(collapseDimensions=false)``), else ``[N, C]``.

Kernels are N-D numpy loops over the kernel *taps* only (each tap is one strided slice of all
output positions, ``kernels.cnn.tap_range`` per axis), in the data's own layout. Gradients are
helper ops, as in 2-D: ``max_pooling{1,3}d_grad(x, g)`` (NONDIFF: routes each window's ``g``
to the first maximum in row-major tap order) and ``avg_pooling{1,3}d_grad(g, like)`` (linear;
its gradient is the pooling again). Global pooling differentiates like ``max``/``mean``
reductions (ties share the gradient of a max).
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import OpError
from ..kernels import geometry as G
from .call import op
from ..kernels import lazy
from .cnn import (PADDING, PAIR, _attrs, _cf, _like_infer, _out_size, as_tuple, check_rank,
                  check_windows, float_dtype, guard, spatial_axes)
from .cnn_attrs import choice, padding, window
from .registry import NONDIFF, REGISTRY, REQUIRED, Attr, AttrKind, TensorType, define

# --- attribute kinds --------------------------------------------------------------------------


def _window(n: int, fmt: tuple[str, ...]) -> dict:
    return {"kernel": (window(n), REQUIRED),
            "stride": (window(n), 1 if n == 1 else (1,) * n),
            "padding": (padding(n), 0 if n == 1 else (0,) * n),
            "dilation": (window(n), 1 if n == 1 else (1,) * n),
            "data_format": (choice(*fmt), fmt[0])}


POOL2D = {"kernel": (PAIR, REQUIRED), "stride": (PAIR, (1, 1)), "padding": (PADDING, (0, 0)),
          "dilation": (PAIR, (1, 1)), "data_format": (choice("NCHW", "NHWC"), "NCHW")}
AVG2D = {**POOL2D, "count_include_pad": (Attr.BOOL, False)}
POOL1D = _window(1, ("NCW", "NWC"))
POOL3D = _window(3, ("NCDHW", "NDHWC"))
AVG1D = {**POOL1D, "count_include_pad": (Attr.BOOL, False)}
AVG3D = {**POOL3D, "count_include_pad": (Attr.BOOL, False)}

_GROUP = {"namespace": "cnn", "method": False}
K = lazy("cnn")  # the 2-D kernels (and Numba) load on the first pooling run


def pool_infer(name: str):
    """Inference of a 1-, 2- or 3-D pooling op (the spatial rank is the layout's)."""
    def infer(types: list[TensorType], a: Any) -> TensorType:
        x = types[0]
        dtype = float_dtype(name, types[:1], ("x",))
        n = len(a.data_format) - 2
        check_rank(name, x, n + 2, "x", a.data_format)
        axes, _ = spatial_axes(a.data_format)
        kernel, stride, dilation = (as_tuple(v, n) for v in (a.kernel, a.stride, a.dilation))
        padding = as_tuple(a.padding, n)
        out = list(x.shape)
        for i, ax in enumerate(axes):
            out[ax] = _out_size(x.shape[ax], kernel[i], stride[i], dilation[i],
                                "same" if padding == "same" else padding[i])
        check_windows(name, tuple(x.shape[ax] for ax in axes), kernel, stride, padding,
                      dilation)
        return TensorType(tuple(out), dtype)
    return infer


def pool_guard(x: Any, kernel: Any, stride: Any, padding: Any, dilation: Any,
               data_format: str) -> None:
    """``guard`` for a pooling impl: also its rank and windows (``check_windows``)."""
    guard(x)
    n = len(data_format) - 2
    if np.ndim(x) != n + 2:
        raise TypeError("unsupported input (see the op's inference)")
    axes, _ = spatial_axes(data_format)
    try:
        check_windows("", tuple(np.shape(x)[ax] for ax in axes), as_tuple(kernel, n),
                      as_tuple(stride, n), as_tuple(padding, n), as_tuple(dilation, n))
    except OpError:
        raise TypeError("unsupported input (see the op's inference)") from None


# --- 2-D pooling: compiled kernels (kernels/cnn.py), split over the helper thread ------------------------------------------------------------------------------------

def _max_pool2d(x, *, kernel, stride, padding, dilation, data_format):
    pool_guard(x, kernel, stride, padding, dilation, data_format)
    return K.max_pool(np.asarray(x), kernel, stride, padding, dilation, _cf(data_format))


def _max_pool2d_grad(x, g, *, kernel, stride, padding, dilation, data_format):
    return K.max_pool_grad(np.asarray(x), np.asarray(g), kernel, stride, padding, dilation,
                           _cf(data_format))


def _avg_pool2d(x, *, kernel, stride, padding, dilation, data_format, count_include_pad):
    pool_guard(x, kernel, stride, padding, dilation, data_format)
    return K.avg_pool(np.asarray(x), kernel, stride, padding, dilation, count_include_pad,
                      _cf(data_format))


def _avg_pool2d_grad(g, like, *, kernel, stride, padding, dilation, data_format,
                   count_include_pad):
    return K.avg_pool_grad(np.asarray(g), np.shape(like), kernel, stride, padding, dilation,
                           count_include_pad, _cf(data_format))


def _max_pool_warm(grad: bool):
    """``OpDef.warm`` of ``max_pooling2d`` (and, ``grad``, its adjoint): the compiled
    route's warm-up at these static types (``kernels.cnn.pool_warmups``)."""
    def warm(types: Any, a: Any) -> tuple:
        return K.pool_warmups(tuple(types[0].shape), a.kernel, a.stride, a.padding,
                              a.dilation, _cf(a.data_format), types[0].dtype, grad)
    return warm


define("max_pooling2d", ["x"], pool_infer("max_pooling2d"), _max_pool2d, attrs=POOL2D,
       grad=lambda ins, outs, gs, a: [op.max_pooling2d_grad(ins[0], gs[0], **_attrs(a))],
       warm=_max_pool_warm(False),
       **_GROUP, doc="Max over each ``kernel`` window (padding never wins).")
define("max_pooling2d_grad", ["x", "g"], _like_infer("max_pooling2d_grad", 0, ("x", "g")),
       _max_pool2d_grad, attrs=POOL2D, grad=NONDIFF, warm=_max_pool_warm(True), **_GROUP,
       doc="The adjoint of ``max_pooling2d``: each window's ``g`` sent to the input that won "
           "it (the first in row-major order among equal maxima). Not differentiable again.")
define("avg_pooling2d", ["x"], pool_infer("avg_pooling2d"), _avg_pool2d, attrs=AVG2D,
       grad=lambda ins, outs, gs, a: [op.avg_pooling2d_grad(gs[0], ins[0], **_attrs(a))],
       **_GROUP, doc="Mean over each ``kernel`` window; the divisor counts the taps inside the "
                     "image (ND4J's default) or, with ``count_include_pad``, the whole window.")
define("avg_pooling2d_grad", ["g", "like"], _like_infer("avg_pooling2d_grad", 1, ("g",)),
       _avg_pool2d_grad, attrs=AVG2D, **_GROUP,
       grad=lambda ins, outs, gs, a: [op.avg_pooling2d(gs[0], **_attrs(a)), None],
       doc="The adjoint of ``avg_pooling2d``: ``g`` spread evenly back over each window, to an "
           "array of ``like``'s shape.")




def _geometry(a: Any) -> tuple[int, tuple, tuple, Any, tuple, bool]:
    """(spatial rank, kernel, stride, padding, dilation, channels first) as tuples."""
    n = len(a.data_format) - 2
    return (n, as_tuple(a.kernel, n), as_tuple(a.stride, n), as_tuple(a.padding, n), as_tuple(a.dilation, n),
            a.data_format[1] == "C")


# --- N-D kernels (loops over kernel taps; each tap is a strided slice of every output) -----------

def _setup(shape, a: Any):
    """(per-axis geometry, output shape, taps) for input ``shape``; a tap is
    ``(tap index, out index, in index)`` of every tap that touches the input."""
    n, kernel, stride, padding, dilation, cf = _geometry(a)
    sp = shape[2:] if cf else shape[1:-1]
    geo = [G.axis_pads(sp[i], kernel[i], stride[i], dilation[i],
                       "same" if padding == "same" else padding[i]) for i in range(n)]
    out = list(shape)
    for i in range(n):
        out[i + 2 if cf else i + 1] = geo[i][2]
    per_axis = [[(t, *G.tap_range(geo[i][2], sp[i], geo[i][0], stride[i], dilation[i], t))
                 for t in range(kernel[i])] for i in range(n)]
    lead, trail = ((slice(None),) * 2, ()) if cf else ((slice(None),), (slice(None),))
    taps = []
    for combo in itertools.product(*per_axis):  # row-major tap order
        if all(o.stop > o.start for _, o, _ in combo):
            taps.append((tuple(t for t, _, _ in combo), lead + tuple(o for _, o, _ in combo)
                         + trail, lead + tuple(i for _, _, i in combo) + trail))
    return geo, tuple(out), taps, (n, kernel, stride, dilation, cf, sp)


def _divisor(geo, info, include_pad, dtype):
    n, kernel, stride, dilation, cf, sp = info
    if include_pad:
        return np.asarray(int(np.prod(kernel)), dtype)
    div = np.ones((), np.int64)
    for i in range(n):
        cnt = np.zeros(geo[i][2], np.int64)
        for t in range(kernel[i]):
            o, _ = G.tap_range(geo[i][2], sp[i], geo[i][0], stride[i], dilation[i], t)
            cnt[o] += 1
        div = np.multiply.outer(div, cnt)
    div = np.maximum(div, 1).astype(dtype)
    return div if cf else div[..., None]


def _attrs_of(attrs: dict) -> Any:
    return SimpleNamespace(**attrs)


def _max_pool(x, **attrs):
    x = np.asarray(x)
    pool_guard(x, attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"],
               attrs["data_format"])
    _, shape, taps, _ = _setup(x.shape, _attrs_of(attrs))
    out = np.full(shape, -np.inf, x.dtype)
    for _, oi, ii in taps:
        region = out[oi]
        np.maximum(region, x[ii], out=region)
    return out


def _max_pool_grad(x, g, **attrs):
    x, g = np.asarray(x), np.asarray(g)
    out = _max_pool(x, **attrs)
    _, _, taps, _ = _setup(x.shape, _attrs_of(attrs))
    dx = np.zeros(x.shape, np.result_type(x, g))
    taken = np.zeros(out.shape, bool)
    for _, oi, ii in taps:  # the first maximum in row-major tap order takes the gradient
        hit = ((x[ii] == out[oi]) | (np.isnan(x[ii]) & np.isnan(out[oi]))) & ~taken[oi]
        taken[oi] |= hit
        region = dx[ii]
        region += np.where(hit, g[oi], 0)
    return dx


def _avg_pool(x, *, count_include_pad, **attrs):
    x = np.asarray(x)
    pool_guard(x, attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"],
               attrs["data_format"])
    geo, shape, taps, info = _setup(x.shape, _attrs_of(attrs))
    out = np.zeros(shape, x.dtype)
    for _, oi, ii in taps:
        region = out[oi]
        region += x[ii]
    out /= _divisor(geo, info, count_include_pad, x.dtype)
    return out


def _avg_pool_grad(g, like, *, count_include_pad, **attrs):
    g = np.asarray(g)
    geo, _, taps, info = _setup(np.shape(like), _attrs_of(attrs))
    gd = g / _divisor(geo, info, count_include_pad, g.dtype)
    dx = np.zeros(np.shape(like), g.dtype)
    for _, oi, ii in taps:
        region = dx[ii]
        region += gd[oi]
    return dx




def _via(helper: str, order: str):
    """A gradient rule that sends ``g`` through the helper op ``helper``: ``"xg"`` calls it as
    ``helper(x, g)`` (max), ``"gx"`` as ``helper(g, x)`` (avg), ``"g"`` as ``helper(g)``; the
    ``like`` input lends only its shape and gets no gradient (None), as conv2d's helpers."""
    def rule(ins, outs, gs, a):
        f = getattr(op, helper)
        if order == "xg":
            return [f(ins[0], gs[0], **_attrs(a))]
        if order == "gx":
            return [f(gs[0], ins[0], **_attrs(a))]
        return [f(gs[0], **_attrs(a)), None]
    return rule

for _n, _max_attrs, _avg_attrs, _layout in ((1, POOL1D, AVG1D, "NCW|NWC"),
                                            (3, POOL3D, AVG3D, "NCDHW|NDHWC")):
    _mx, _av = f"max_pooling{_n}d", f"avg_pooling{_n}d"
    define(_mx, ["x"], pool_infer(_mx), _max_pool, attrs=_max_attrs, **_GROUP,
           grad=_via(f"{_mx}_grad", "xg"),
           doc=f"{_n}-D max pooling of ``x`` ({_layout}) over each ``kernel`` window; padding "
               f"never wins.")
    define(f"{_mx}_grad", ["x", "g"], _like_infer(f"{_mx}_grad", 0, ("x", "g")), _max_pool_grad,
           attrs=_max_attrs, grad=NONDIFF, **_GROUP,
           doc=f"The adjoint of ``{_mx}``: each window's ``g`` sent to the input that won it "
               f"(the first in row-major tap order among equal maxima). Not differentiable.")
    define(_av, ["x"], pool_infer(_av), _avg_pool, attrs=_avg_attrs, **_GROUP,
           grad=_via(f"{_av}_grad", "gx"),
           doc=f"{_n}-D average pooling of ``x`` ({_layout}); the divisor counts the taps "
               f"inside the input (ND4J's default) or, with ``count_include_pad``, the window.")
    define(f"{_av}_grad", ["g", "like"], _like_infer(f"{_av}_grad", 1, ("g",)), _avg_pool_grad,
           attrs=_avg_attrs, **_GROUP,
           grad=_via(_av, "g"),
           doc=f"The adjoint of ``{_av}``: ``g`` spread evenly back over each window, to an "
               f"array of ``like``'s shape.")


# --- global pooling -----------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    s = Attr.STR.coerce(v).upper()
    first, last = ("NCW", "NCHW", "NCDHW", "CHANNELS_FIRST"), ("NWC", "NHWC", "NDHWC",
                                                              "CHANNELS_LAST")
    if s in first:
        return "NCHW"
    if s in last:
        return "NHWC"
    raise ValueError(f"expected channels first (NCW, NCHW, NCDHW) or last (NWC, NHWC, NDHWC), "
                     f"got {v!r}")


GLOBAL = {"data_format": (AttrKind("NCHW|NHWC", _fmt), "NCHW"), "keep_dims": (Attr.BOOL, False)}


def _global_axes(rank: int, fmt: str) -> tuple[int, ...]:
    return tuple(range(2, rank)) if fmt == "NCHW" else tuple(range(1, rank - 1))


def _global_infer(name: str):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        x = types[0]
        dtype = float_dtype(name, types[:1], ("x",))
        if x.rank < 3:
            raise OpError(f"{name}: x must have rank >= 3 (batch, channels and at least one "
                          f"spatial axis; data_format {a.data_format}), got shape {x.shape}")
        axes = _global_axes(x.rank, a.data_format)
        if a.keep_dims:
            return TensorType(tuple(1 if i in axes else d for i, d in enumerate(x.shape)), dtype)
        return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), dtype)
    return infer


def _global(reduce):
    def impl(x, *, data_format, keep_dims):
        x = np.asarray(x)
        if x.dtype.kind != "f" or x.ndim < 3:
            raise TypeError("unsupported input (see the op's inference)")
        return reduce(x, axis=_global_axes(x.ndim, data_format), keepdims=keep_dims)
    return impl


def _global_grad(reduction: str):
    def rule(ins, outs, gs, a):
        red = REGISTRY[reduction]
        ra = red.make_attrs({"dims": _global_axes(len(ins[0].shape), a.data_format),
                             "keep_dims": a.keep_dims})
        return red.grad(ins, outs, gs, ra)
    return rule


define("global_max_pooling", ["x"], _global_infer("global_max_pooling"), _global(np.max),
       attrs=GLOBAL, grad=_global_grad("max"), **_GROUP,
       doc="Max over every spatial axis of ``x`` (channels first NCHW-style or channels last "
           "NHWC-style, any spatial rank): ``[N, C]``, or with ``keep_dims`` size-1 spatial "
           "axes. Ties share the gradient, like the ``max`` reduction.")
define("global_avg_pooling", ["x"], _global_infer("global_avg_pooling"), _global(np.mean),
       attrs=GLOBAL, grad=_global_grad("mean"), **_GROUP,
       doc="Mean over every spatial axis of ``x`` (channels first or last, any spatial rank): "
           "``[N, C]``, or with ``keep_dims`` size-1 spatial axes.")
