"""Depthwise and separable 2-D convolutions of the ``cnn`` group (ND4J's ``depthWiseConv2d``
and ``separableConv2d``).

* ``depthwise_conv2d(x, w, b?)``: each input channel ``c`` is convolved with its own
  ``depthMultiplier`` filters ``w[:, :, c, m]``; weights ``[kH, kW, iC, depthMultiplier]``
  (ND4J's and TensorFlow's layout, ``weights_format="HWIO"``, the only one); the output has
  ``iC * depthMultiplier`` channels, channel ``c * depthMultiplier + m`` (ND4J's, TensorFlow's
  and PyTorch's ``groups=iC`` order: PyTorch's weight ``[iC*M, 1, kH, kW]`` is this array
  reshaped to ``[kH, kW, iC*M]`` and transposed). ``data_format`` NCHW|NHWC; ``stride``,
  ``padding`` (int, pair, "same", "valid"), ``dilation`` as ``conv2d``. The optional bias has
  ``iC * depthMultiplier`` values.
* ``separable_conv2d(x, dw, pw, b?)``: ``depthwise_conv2d(x, dw)`` then a 1x1 ``conv2d`` with
  the pointwise weights ``pw`` ``[1, 1, iC*depthMultiplier, oC]`` (stride 1, no padding),
  plus the optional bias ``b`` of ``oC`` values.

Gradients, as for ``conv2d``: helper ops that are the adjoints, linear in each input and so
differentiable again through each other: ``depthwise_conv2d_input_grad(g, w)`` (result's
spatial sizes ``output_size``, default the smallest input that gives ``g``'s size: exact at
stride 1) and ``depthwise_conv2d_weight_grad(x, g)`` (``kernel`` attribute). Neither takes a
``like`` input: the sizes they need are attributes, filled from the static shapes when the
gradient is built. ``separable_conv2d``'s rule recomputes the depthwise result and goes
through these and ``conv2d``'s helpers.

Kernels: depthwise convolution is no GEMM (each output channel reads one input channel): one
broadcast multiply-add per kernel tap over the whole batch (an ``einsum`` for the adjoints),
no loop over positions.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import forksafe
from ..errors import OpError
from ..kernels import geometry as G, lazy
from .call import op
from .cnn import (PADDING, PAIR, add_bias, channel_dims, check_rank, float_dtype, guard,
                  layout_hint, spatial_axes)
from .cnn_attrs import choice
from .cnn_volumetric import deconv_sizes, static_sizes
from .registry import REQUIRED, AttrKind, TensorType, define

K = lazy("cnn")  # the kernels (and Numba) load on the first convolution or pooling run

DEPTHWISE = {"stride": (PAIR, (1, 1)), "padding": (PADDING, (0, 0)), "dilation": (PAIR, (1, 1)),
             "data_format": (choice("NCHW", "NHWC"), "NCHW"),
             "weights_format": (choice("HWIO"), "HWIO")}
_SIZES2 = AttrKind("sizes2?", lambda v: None if v is None else PAIR.coerce(v))
INPUT_GRAD = {**DEPTHWISE, "output_size": (_SIZES2, None)}
WEIGHT_GRAD = {**DEPTHWISE, "kernel": (PAIR, REQUIRED)}


# --- kernels ------------------------------------------------------------------------------------

def _taps(sizes, out, kernel, stride, padding, dilation, cf):
    """``(i, j, out index, in index)`` of every tap that touches the image; out indices are
    for the 5-D view (channels split into (C, M)), in indices for the 4-D activations."""
    before = [G.axis_pads(sizes[a], kernel[a], stride[a], dilation[a],
                          "same" if padding == "same" else padding[a])[0] for a in range(2)]
    for i in range(kernel[0]):
        oh, ih = G.tap_range(out[0], sizes[0], before[0], stride[0], dilation[0], i)
        if oh.stop <= oh.start:
            continue
        for j in range(kernel[1]):
            ow, iw = G.tap_range(out[1], sizes[1], before[1], stride[1], dilation[1], j)
            if ow.stop > ow.start:
                if cf:
                    yield i, j, (slice(None),) * 3 + (oh, ow), (slice(None),) * 2 + (ih, iw)
                else:
                    yield i, j, (slice(None), oh, ow), (slice(None), ih, iw)


def _sp(shape, cf):
    return (shape[2], shape[3]) if cf else (shape[1], shape[2])


def _out_hw(sizes, kernel, stride, padding, dilation):
    return tuple(G.axis_pads(sizes[a], kernel[a], stride[a], dilation[a],
                             "same" if padding == "same" else padding[a])[2] for a in range(2))


def depthwise(x, w, stride, padding, dilation, cf):
    """``x`` [N, C, H, W] (or NHWC) (*) ``w`` [kH, kW, C, M] -> C*M channels (c*M + m)."""
    dtype = np.result_type(x, w)
    x, w = np.asarray(x, dtype), np.asarray(w, dtype)
    sizes, (c, m) = _sp(x.shape, cf), w.shape[2:]
    oh, ow = _out_hw(sizes, w.shape[:2], stride, padding, dilation)
    y = np.zeros((x.shape[0], c, m, oh, ow) if cf else (x.shape[0], oh, ow, c, m), dtype)
    for i, j, oi, ii in _taps(sizes, (oh, ow), w.shape[:2], stride, padding, dilation, cf):
        region = y[oi]
        if cf:
            region += x[ii][:, :, None] * w[i, j][None, :, :, None, None]
        else:
            region += x[ii][..., None] * w[i, j]
    return y.reshape((x.shape[0], c * m, oh, ow) if cf else (x.shape[0], oh, ow, c * m))


@forksafe.guarded  # einsum may call numpy's BLAS: a fork waits for it
def depthwise_input_grad(g, w, xshape, stride, padding, dilation, cf):
    dtype = np.result_type(g, w)
    g, w = np.asarray(g, dtype), np.asarray(w, dtype)
    c, m = w.shape[2:]
    sizes, out = _sp(xshape, cf), _sp(g.shape, cf)
    g5 = g.reshape((g.shape[0], c, m) + out if cf else (g.shape[0],) + out + (c, m))
    dx = np.zeros(xshape, dtype)
    spec = "ncmhw,cm->nchw" if cf else "nhwcm,cm->nhwc"
    for i, j, oi, ii in _taps(sizes, out, w.shape[:2], stride, padding, dilation, cf):
        region = dx[ii]
        region += np.einsum(spec, g5[oi], w[i, j])
    return dx


@forksafe.guarded
def depthwise_weight_grad(x, g, kernel, stride, padding, dilation, cf):
    dtype = np.result_type(x, g)
    x, g = np.asarray(x, dtype), np.asarray(g, dtype)
    c = x.shape[1] if cf else x.shape[3]
    m = (g.shape[1] if cf else g.shape[3]) // c
    sizes, out = _sp(x.shape, cf), _sp(g.shape, cf)
    g5 = g.reshape((g.shape[0], c, m) + out if cf else (g.shape[0],) + out + (c, m))
    dw = np.zeros(tuple(kernel) + (c, m), dtype)
    spec = "nchw,ncmhw->cm" if cf else "nhwc,nhwcm->cm"
    for i, j, oi, ii in _taps(sizes, out, kernel, stride, padding, dilation, cf):
        dw[i, j] = np.einsum(spec, x[ii], g5[oi], optimize=True)
    return dw


# --- inference ----------------------------------------------------------------------------------

def _mul(a: int, b: int) -> int:
    return a * b if a >= 0 and b >= 0 else -1


def _depthwise_type(name: str, x: TensorType, w: TensorType, a: Any, dtype) -> TensorType:
    check_rank(name, x, 4, "x", a.data_format)
    check_rank(name, w, 4, "w", "[kH, kW, iC, depthMultiplier]")
    axes, cax = spatial_axes(a.data_format)
    if x.shape[cax] >= 0 and w.shape[2] >= 0 and x.shape[cax] != w.shape[2]:
        raise OpError(f"{name}: x has {x.shape[cax]} input channels ({a.data_format} {x.shape}) "
                      f"but w expects {w.shape[2]} (w is [kH, kW, iC, depthMultiplier], "
                      f"got {w.shape})"
                      f"{layout_hint(x.shape, w.shape, a.data_format, 'HWIO', weights=False)}")
    out = list(x.shape)
    for i, ax in enumerate(axes):
        if x.shape[ax] >= 0 and w.shape[i] >= 0:
            try:
                out[ax] = G.axis_pads(x.shape[ax], w.shape[i], a.stride[i], a.dilation[i],
                                      "same" if a.padding == "same" else a.padding[i])[2]
            except ValueError as exc:
                raise OpError(f"{name}: {exc}; use a smaller kernel/dilation or more "
                              f"padding") from None
        else:
            out[ax] = -1
    out[cax] = _mul(w.shape[2], w.shape[3])
    return TensorType(tuple(out), dtype)


def _check_b(name: str, b: TensorType, channels: int) -> None:
    if not (b.rank == 1 and (b.shape[0] in (-1, channels) or channels < 0)):
        raise OpError(f"{name}: b must be 1-D of {channels} output channels, got {b.shape}")


def _depthwise_infer(types: list[TensorType], a: Any) -> TensorType:
    dtype = float_dtype("depthwise_conv2d", types, ("x", "w", "b"))
    t = _depthwise_type("depthwise_conv2d", types[0], types[1], a, dtype)
    if len(types) == 3:
        _check_b("depthwise_conv2d", types[2], t.shape[spatial_axes(a.data_format)[1]])
    return t


def _separable_infer(types: list[TensorType], a: Any) -> TensorType:
    name = "separable_conv2d"
    dtype = float_dtype(name, types, ("x", "dw", "pw", "b"))
    h = _depthwise_type(name, types[0], types[1], a, dtype)
    pw = types[2]
    _, cax = spatial_axes(a.data_format)
    if pw.rank != 4 or any(k not in (-1, 1) for k in pw.shape[:2]) or (
            pw.shape[2] >= 0 and h.shape[cax] >= 0 and pw.shape[2] != h.shape[cax]):
        raise OpError(f"{name}: pw must be [1, 1, iC*depthMultiplier, oC] = [1, 1, "
                      f"{h.shape[cax]}, oC], got {pw.shape}")
    if len(types) == 4:
        _check_b(name, types[3], pw.shape[3])
    out = list(h.shape)
    out[cax] = pw.shape[3]
    return TensorType(tuple(out), dtype)


def _input_grad_infer(types: list[TensorType], a: Any) -> TensorType:
    name = "depthwise_conv2d_input_grad"
    dtype = float_dtype(name, types, ("g", "w"))
    g, w = types
    check_rank(name, g, 4, "g", a.data_format)
    check_rank(name, w, 4, "w", "[kH, kW, iC, depthMultiplier]")
    axes, cax = spatial_axes(a.data_format)
    cm = _mul(w.shape[2], w.shape[3])
    if g.shape[cax] >= 0 and cm >= 0 and g.shape[cax] != cm:
        raise OpError(f"{name}: g has {g.shape[cax]} channels, w {w.shape} makes {cm}")
    sizes = deconv_sizes(name, [g.shape[ax] for ax in axes], w.shape[:2], a)
    out = list(g.shape)
    for i, ax in enumerate(axes):
        out[ax] = sizes[i]
    out[cax] = w.shape[2]
    return TensorType(tuple(out), dtype)


def _weight_grad_infer(types: list[TensorType], a: Any) -> TensorType:
    name = "depthwise_conv2d_weight_grad"
    dtype = float_dtype(name, types, ("x", "g"))
    x, g = types
    check_rank(name, x, 4, "x", a.data_format)
    check_rank(name, g, 4, "g", a.data_format)
    _, cax = spatial_axes(a.data_format)
    c, cm = x.shape[cax], g.shape[cax]
    if c > 0 and cm >= 0 and cm % c:
        raise OpError(f"{name}: g's {cm} channels are no multiple of x's {c}")
    return TensorType((*a.kernel, c, cm // c if c > 0 and cm >= 0 else -1), dtype)


# --- implementations ----------------------------------------------------------------------------

def _cf(fmt: str) -> bool:
    return fmt[1] == "C"


def _depthwise(x, w, b=None, *, stride, padding, dilation, data_format, weights_format):
    guard(x, w, b)
    cf = _cf(data_format)
    return add_bias(depthwise(np.asarray(x), np.asarray(w), stride, padding, dilation, cf), b, cf)


def _input_grad(g, w, *, stride, padding, dilation, data_format, weights_format, output_size):
    g, w, cf = np.asarray(g), np.asarray(w), _cf(data_format)
    a = INPUT_GRAD_OP.attrs_type(stride=stride, padding=padding, dilation=dilation,
                                 data_format=data_format, weights_format=weights_format,
                                 output_size=output_size)
    sizes = deconv_sizes("depthwise_conv2d_input_grad", _sp(g.shape, cf), w.shape[:2], a)
    c = w.shape[2]
    shape = (g.shape[0], c, *sizes) if cf else (g.shape[0], *sizes, c)
    return depthwise_input_grad(g, w, shape, stride, padding, dilation, cf)


def _weight_grad(x, g, *, stride, padding, dilation, data_format, weights_format, kernel):
    return depthwise_weight_grad(np.asarray(x), np.asarray(g), kernel, stride, padding, dilation,
                                 _cf(data_format))


def _separable(x, dw, pw, b=None, *, stride, padding, dilation, data_format, weights_format):
    guard(x, dw, pw, b)
    cf = _cf(data_format)
    h = depthwise(np.asarray(x), np.asarray(dw), stride, padding, dilation, cf)
    pw = np.asarray(pw, np.result_type(h, pw))
    y = K.conv(h, pw, (1, 1), (0, 0), (1, 1), cf)
    return add_bias(y, b, cf)


# --- gradient rules -----------------------------------------------------------------------------

def _attrs(a: Any) -> dict:
    return {k: getattr(a, k) for k in DEPTHWISE}


def _depthwise_grads(x, w, g, a) -> list:
    kernel = tuple(int(k) for k in w.shape[:2])
    size = static_sizes("depthwise_conv2d", x, a.data_format, a.stride)
    return [op.depthwise_conv2d_input_grad(g, w, **_attrs(a), output_size=size),
            op.depthwise_conv2d_weight_grad(x, g, **_attrs(a), kernel=kernel)]


def _depthwise_grad(ins, outs, gs, a):
    grads = _depthwise_grads(ins[0], ins[1], gs[0], a)
    if len(ins) == 3:
        grads.append(op.sum(gs[0], dims=channel_dims(a.data_format)))
    return grads


def _input_grad_grad(ins, outs, gs, a):
    g, w, gx = ins[0], ins[1], gs[0]
    kw = _attrs(a)
    return [op.depthwise_conv2d(gx, w, **kw),
            op.depthwise_conv2d_weight_grad(gx, g, **kw, kernel=tuple(w.shape[:2]))]


def _weight_grad_grad(ins, outs, gs, a):
    x, g, gw = ins[0], ins[1], gs[0]
    kw = _attrs(a)
    size = static_sizes("depthwise_conv2d_weight_grad", x, a.data_format, a.stride)
    return [op.depthwise_conv2d_input_grad(g, gw, **kw, output_size=size),
            op.depthwise_conv2d(x, gw, **kw)]


def _separable_grad(ins, outs, gs, a):
    x, dw, pw, g = ins[0], ins[1], ins[2], gs[0]
    h = op.depthwise_conv2d(x, dw, **_attrs(a))
    pk = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1,
          "data_format": a.data_format, "weights_format": "HWIO"}
    gh = op.conv2d_input_grad(g, pw, h, **pk)
    grads = [*_depthwise_grads(x, dw, gh, a), op.conv2d_weight_grad(h, g, pw, **pk)]
    if len(ins) == 4:
        grads.append(op.sum(g, dims=channel_dims(a.data_format)))
    return grads


_GROUP = {"namespace": "cnn", "method": False}
define("depthwise_conv2d", ["x", "w", "b?"], _depthwise_infer, _depthwise, attrs=DEPTHWISE,
       grad=_depthwise_grad, **_GROUP,
       doc="Depthwise 2-D convolution (ND4J's depthWiseConv2d): channel c of ``x`` convolved "
           "with ``w[:, :, c, m]`` for each m gives output channel c * depthMultiplier + m. "
           "``w`` is [kH, kW, iC, depthMultiplier]; ``b`` (optional) has iC * depthMultiplier "
           "values; ``data_format`` NCHW|NHWC; stride/padding/dilation as conv2d.")
INPUT_GRAD_OP = define(
    "depthwise_conv2d_input_grad", ["g", "w"], _input_grad_infer, _input_grad, attrs=INPUT_GRAD,
    grad=_input_grad_grad, **_GROUP,
    doc="The adjoint of ``depthwise_conv2d`` in ``x``: ``g`` sent back through ``w`` to an "
        "array of spatial sizes ``output_size`` (default: the smallest input giving g's size).")
define("depthwise_conv2d_weight_grad", ["x", "g"], _weight_grad_infer, _weight_grad,
       attrs=WEIGHT_GRAD, grad=_weight_grad_grad, **_GROUP,
       doc="The adjoint of ``depthwise_conv2d`` in ``w``: the [kH, kW, iC, depthMultiplier] "
           "weight gradient (``kernel`` = (kH, kW)) for input ``x`` and output gradient ``g``.")
define("separable_conv2d", ["x", "dw", "pw", "b?"], _separable_infer, _separable,
       attrs=DEPTHWISE, grad=_separable_grad, **_GROUP,
       doc="Separable 2-D convolution (ND4J's separableConv2d): ``depthwise_conv2d(x, dw)`` "
           "([kH, kW, iC, depthMultiplier]) then a 1x1 convolution with ``pw`` [1, 1, "
           "iC * depthMultiplier, oC], plus the optional bias ``b`` of oC values.")
