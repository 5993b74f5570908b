"""3-D and transposed convolutions of the ``cnn`` group: ``conv3d``, ``deconv2d``, ``deconv3d``.

Layouts (``data_format`` / ``weights_format``; ``cnn.py`` has the 2-D conventions):

* ``conv3d(x, w, b?)``: ``"NCDHW"`` (the default) | ``"NDHWC"``; weights ``"DHWIO"`` (ND4J's
  ``[kD, kH, kW, iC, oC]``, the default) | ``"OIDHW"`` (PyTorch/ONNX).
* ``deconv2d(x, w, b?)`` (transposed convolution): ``"NCHW"`` | ``"NHWC"``; weights ``"HWOI"``
  -- ND4J's/libnd4j's ``[kH, kW, oC, iC]`` (the default; TensorFlow's ``conv2d_transpose``
  filter too) -- | ``"IOHW"`` (PyTorch's ``ConvTranspose2d``, ONNX ``ConvTranspose``:
  ``[iC, oC, kH, kW]``). Here iC/oC are the deconvolution's own input/output channels.
  ``deconv3d``: ``"NCDHW"`` | ``"NDHWC"``, weights ``"DHWOI"`` (ND4J) | ``"IODHW"``.
* ``stride``/``dilation``: an int or one per spatial axis; ``padding``: the same, ``"valid"``
  (= 0) or ``"same"``. Output of a deconvolution per axis: ``(in - 1) * s + (k - 1) * d + 1 -
  2 p``, or ``in * s`` with ``"same"`` (ND4J's ``isSameMode``); ``output_size`` (one per
  spatial axis) picks another of the sizes a strided convolution maps back onto ``in``
  (PyTorch's ``output_padding``, TensorFlow's ``output_shape``).

A deconvolution *is* the input adjoint of the convolution whose weights it holds: ND4J's
``[kH, kW, oC, iC]`` is exactly the HWIO weights of the convolution from the deconvolution's
output back to its input (PyTorch's IOHW is that convolution's OIHW), with the same stride,
padding ("same" included) and dilation. So the weights are never transposed and the
gradients are ops that exist: ``deconv2d``'s are ``conv2d`` (in ``x``) and
``conv2d_weight_grad`` (in ``w``). In 3-D, ``deconv3d`` is also ``conv3d``'s input adjoint
(``output_size`` = ``x``'s spatial sizes) and the one helper op is ``conv3d_weight_grad(x, g)``
(``kernel`` attribute: no ``like`` input). All are linear in each argument, so every gradient
is again one of these ops: differentiable to any order. When ``x``'s spatial sizes are unknown
(-1) at trace time, a stride-1 conv3d still differentiates (its adjoint's size is then
determined); a strided one asks for the sizes.

Kernels: 3-D runs the tuned 2-D GEMM kernels of ``kernels/cnn.py`` once per depth tap, on the
``(batch x output depth)`` planes that tap reads (one strided gather per tap), and adds the
results into the output depth slices: ``kD`` calls, no loop over positions.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OpError
from ..kernels import geometry as G, lazy
from .call import op
from .cnn import (add_bias, channel_dims, check_rank, float_dtype, guard, layout_hint,
                  spatial_axes)
from .cnn_attrs import choice, padding, sizes, window
from .registry import REQUIRED, TensorType, define

K = lazy("cnn")  # the kernels (and Numba) load on the first convolution or pooling run


# --- attribute kinds --------------------------------------------------------------------------

def _window_attrs(n: int, data: tuple[str, str], weights: tuple[str, str]) -> dict:
    return {"stride": (window(n), (1,) * n), "padding": (padding(n), (0,) * n),
            "dilation": (window(n), (1,) * n),
            "data_format": (choice(*data), data[0]), "weights_format": (choice(*weights),
                                                                        weights[0])}


CONV3D = _window_attrs(3, ("NCDHW", "NDHWC"), ("DHWIO", "OIDHW"))
CONV3D_WGRAD = {**CONV3D, "kernel": (window(3), REQUIRED)}
DECONV2D = {**_window_attrs(2, ("NCHW", "NHWC"), ("HWOI", "IOHW")),
            "output_size": (sizes(2), None)}
DECONV3D = {**_window_attrs(3, ("NCDHW", "NDHWC"), ("DHWOI", "IODHW")),
            "output_size": (sizes(3), None)}

#: deconvolution weights layout -> the same array read as the adjoint convolution's weights
AS_CONV = {"HWOI": "HWIO", "IOHW": "OIHW", "DHWOI": "DHWIO", "IODHW": "OIDHW"}
AS_DECONV = {v: k for k, v in AS_CONV.items()}


# --- shared geometry and checks -----------------------------------------------------------------

def kernel_dims(shape: tuple[int, ...], wfmt: str) -> tuple[tuple[int, ...], int, int]:
    """(kernel sizes, conv input channels, conv output channels) of convolution weights in
    ``wfmt`` ("HWIO"/"DHWIO": kernel first; "OIHW"/"OIDHW": channels first)."""
    n = len(wfmt) - 2
    if wfmt[0] == "O":
        return tuple(shape[2:]), shape[1], shape[0]
    return tuple(shape[:n]), shape[n], shape[n + 1]


def to_kio(w, wfmt: str) -> np.ndarray:
    """Convolution weights as ``[k..., I, O]`` (the kernels' layout)."""
    w = np.asarray(w)
    if wfmt[0] != "O":
        return w
    n = w.ndim - 2
    return np.ascontiguousarray(w.transpose(*range(2, 2 + n), 1, 0))


def from_kio(dw: np.ndarray, wfmt: str) -> np.ndarray:
    if wfmt[0] != "O":
        return dw
    n = dw.ndim - 2
    return np.ascontiguousarray(dw.transpose(n + 1, n, *range(n)))


def conv_out(name: str, size: int, k: int, s: int, d: int, p: Any) -> int:
    try:
        return -1 if k < 0 else G.axis_pads(size, k, s, d, p)[2]
    except ValueError as exc:
        raise OpError(f"{name}: {exc}; use a smaller kernel/dilation or more padding") from None


def _pad_of(padding: Any, i: int) -> Any:
    return "same" if padding == "same" else padding[i]


def deconv_size(name: str, size: int, k: int, s: int, d: int, p: Any) -> int:
    """Default output size of one axis of a transposed convolution (-1 when unknown)."""
    if size < 0 or k < 0:
        return -1
    out = size * s if p == "same" else (size - 1) * s + (k - 1) * d + 1 - 2 * p
    if out <= 0:
        raise OpError(f"{name}: padding {p} leaves no output for input size {size} (kernel {k}, "
                      f"stride {s}, dilation {d}); use less padding")
    return out


def deconv_sizes(name: str, sizes, ks, a: Any) -> tuple[int, ...]:
    """Output spatial sizes of a transposed convolution: ``output_size`` checked against the
    input (a convolution of that size must give back ``sizes``), or the default."""
    n = len(sizes)
    if a.output_size is None:
        return tuple(deconv_size(name, sizes[i], ks[i], a.stride[i], a.dilation[i],
                                 _pad_of(a.padding, i)) for i in range(n))
    for i in range(n):
        if sizes[i] < 0 or ks[i] < 0:
            continue
        back = conv_out(name, a.output_size[i], ks[i], a.stride[i], a.dilation[i],
                        _pad_of(a.padding, i))
        if back != sizes[i]:
            lo = deconv_size(name, sizes[i], ks[i], a.stride[i], a.dilation[i],
                             _pad_of(a.padding, i))
            raise OpError(f"{name}: output_size {a.output_size} does not fit input size "
                          f"{sizes[i]} on spatial axis {i}: a convolution of size "
                          f"{a.output_size[i]} gives {back}; sizes from {lo} to about "
                          f"{lo + a.stride[i] - 1} do (or leave output_size out)")
    return tuple(a.output_size)


def static_sizes(name: str, v: Any, fmt: str, stride: tuple[int, ...]) -> tuple[int, ...] | None:
    """``v``'s spatial sizes for an input adjoint's ``output_size``: None (the adjoint's
    default size, exact at stride 1) when they are unknown at trace time."""
    axes, _ = spatial_axes(fmt)
    sizes = tuple(int(v.shape[a]) for a in axes)
    if all(s >= 0 for s in sizes):
        return sizes
    if all(s == 1 for s in stride):
        return None
    raise OpError(f"{name}: the gradient in x needs x's spatial sizes, unknown in {v.shape} "
                  f"at stride {stride} (several sizes give the same output); give the "
                  f"placeholder its spatial sizes")





def _check_bias(name: str, types: list[TensorType], channels: int) -> None:
    if len(types) == 3:
        b = types[2]
        if not (b.rank == 1 and (b.shape[0] in (-1, channels) or channels < 0)):
            raise OpError(f"{name}: b must be 1-D of {channels} output channels, got {b.shape}")


# --- 3-D kernels: the 2-D kernels per depth tap -------------------------------------------------

def _depth_major(a: np.ndarray, cf: bool) -> np.ndarray:
    """NCDHW -> (N, D, C, H, W) (a copy); NDHWC is already depth major."""
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3, 4)) if cf else a


def _planes(a: np.ndarray, depth: slice) -> np.ndarray:
    """The depth slices ``depth`` of a depth-major array as a batch of 2-D planes."""
    s = a[:, depth]
    return s.reshape((s.shape[0] * s.shape[1],) + s.shape[2:])


def _depth_taps(size: int, out: int, k: int, s: int, d: int, padding: Any):
    before = G.axis_pads(size, k, s, d, _pad_of(padding, 0))[0]
    for t in range(k):
        oo, ii = G.tap_range(out, size, before, s, d, t)
        if oo.stop > oo.start:
            yield t, oo, ii


def _hw(padding: Any) -> Any:
    return "same" if padding == "same" else padding[1:]


def _sizes(shape, cf: bool) -> tuple[int, ...]:
    return tuple(shape[2:]) if cf else tuple(shape[1:-1])


def conv3d_kernel(x, w, stride, padding, dilation, cf):
    """``x`` (*) ``w`` [kD, kH, kW, C, O]."""
    dtype = np.result_type(x, w)
    x, w = np.asarray(x, dtype), np.asarray(w, dtype)
    sizes = _sizes(x.shape, cf)
    geo = [G.axis_pads(sizes[i], w.shape[i], stride[i], dilation[i], _pad_of(padding, i))
           for i in range(3)]
    n, od, o = x.shape[0], geo[0][2], w.shape[4]
    plane = (o, geo[1][2], geo[2][2]) if cf else (geo[1][2], geo[2][2], o)
    yt = np.zeros((n, od) + plane, dtype)
    xt = _depth_major(x, cf)
    for t, oo, ii in _depth_taps(sizes[0], od, w.shape[0], stride[0], dilation[0], padding):
        y2 = K.conv(_planes(xt, ii), w[t], stride[1:], _hw(padding), dilation[1:], cf)
        yt[:, oo] += y2.reshape((n, oo.stop - oo.start) + plane)
    return np.ascontiguousarray(yt.transpose(0, 2, 1, 3, 4)) if cf else yt


def conv3d_input_grad_kernel(g, w, xshape, stride, padding, dilation, cf):
    """Adjoint of ``conv3d_kernel`` in ``x``: ``g`` -> dx of ``xshape``."""
    dtype = np.result_type(g, w)
    g, w = np.asarray(g, dtype), np.asarray(w, dtype)
    sizes, n = _sizes(xshape, cf), xshape[0]
    plane = (xshape[1],) + tuple(xshape[3:]) if cf else tuple(xshape[2:])
    dxt = np.zeros((n, sizes[0]) + plane, dtype)
    gt = _depth_major(g, cf)
    for t, oo, ii in _depth_taps(sizes[0], gt.shape[1], w.shape[0], stride[0], dilation[0],
                                 padding):
        m = oo.stop - oo.start
        dx2 = K.conv_input_grad(_planes(gt, oo), w[t], (n * m,) + plane, stride[1:],
                                _hw(padding), dilation[1:], cf)
        dxt[:, ii] += dx2.reshape((n, m) + plane)
    return np.ascontiguousarray(dxt.transpose(0, 2, 1, 3, 4)) if cf else dxt


def conv3d_weight_grad_kernel(x, g, kernel, stride, padding, dilation, cf):
    """Adjoint of ``conv3d_kernel`` in ``w``: -> dw [kD, kH, kW, C, O]."""
    dtype = np.result_type(x, g)
    x, g = np.asarray(x, dtype), np.asarray(g, dtype)
    c, o = (x.shape[1], g.shape[1]) if cf else (x.shape[-1], g.shape[-1])
    dw = np.zeros(tuple(kernel) + (c, o), dtype)
    xt, gt = _depth_major(x, cf), _depth_major(g, cf)
    for t, oo, ii in _depth_taps(_sizes(x.shape, cf)[0], gt.shape[1], kernel[0], stride[0],
                                 dilation[0], padding):
        dw[t] = K.conv_weight_grad(_planes(xt, ii), _planes(gt, oo), kernel[1:], stride[1:],
                                   _hw(padding), dilation[1:], cf)
    return dw


# --- inference ----------------------------------------------------------------------------------

def _conv3d_infer(types: list[TensorType], a: Any) -> TensorType:
    name = "conv3d"
    dtype = float_dtype(name, types, ("x", "w", "b"))
    x, w = types[0], types[1]
    check_rank(name, x, 5, "x", a.data_format)
    check_rank(name, w, 5, "w", a.weights_format)
    ks, ic, oc = kernel_dims(w.shape, a.weights_format)
    axes, cax = spatial_axes(a.data_format)
    if x.shape[cax] >= 0 and ic >= 0 and x.shape[cax] != ic:
        raise OpError(f"{name}: x has {x.shape[cax]} input channels ({a.data_format} "
                      f"{x.shape}) but w expects {ic} ({a.weights_format} {w.shape})"
                      f"{layout_hint(x.shape, w.shape, a.data_format, a.weights_format)}")
    _check_bias(name, types, oc)
    out = list(x.shape)
    for i, ax in enumerate(axes):
        out[ax] = conv_out(name, x.shape[ax], ks[i], a.stride[i], a.dilation[i],
                           _pad_of(a.padding, i))
    out[cax] = oc
    return TensorType(tuple(out), dtype)


def _conv3d_wgrad_infer(types: list[TensorType], a: Any) -> TensorType:
    name = "conv3d_weight_grad"
    dtype = float_dtype(name, types, ("x", "g"))
    check_rank(name, types[0], 5, "x", a.data_format)
    check_rank(name, types[1], 5, "g", a.data_format)
    _, cax = spatial_axes(a.data_format)
    c, o = types[0].shape[cax], types[1].shape[cax]
    shape = (o, c, *a.kernel) if a.weights_format[0] == "O" else (*a.kernel, c, o)
    return TensorType(shape, dtype)


def _deconv_infer(name: str):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        dtype = float_dtype(name, types, ("x", "w", "b"))
        x, w = types[0], types[1]
        n = len(a.data_format) - 2
        check_rank(name, x, n + 2, "x", a.data_format)
        check_rank(name, w, n + 2, "w", a.weights_format)
        ks, oc, ic = kernel_dims(w.shape, AS_CONV[a.weights_format])  # the adjoint conv's
        axes, cax = spatial_axes(a.data_format)
        if x.shape[cax] >= 0 and ic >= 0 and x.shape[cax] != ic:
            raise OpError(f"{name}: x has {x.shape[cax]} input channels ({a.data_format} "
                          f"{x.shape}) but w expects {ic} ({a.weights_format} {w.shape}: "
                          f"[{'kH, kW, oC, iC' if n == 2 else 'kD, kH, kW, oC, iC'}] for ND4J)"
                          f"{layout_hint(x.shape, w.shape, a.data_format, a.weights_format)}")
        _check_bias(name, types, oc)
        sizes = deconv_sizes(name, [x.shape[ax] for ax in axes], ks, a)
        out = list(x.shape)
        for i, ax in enumerate(axes):
            out[ax] = sizes[i]
        out[cax] = oc
        return TensorType(tuple(out), dtype)
    return infer


# --- implementations ----------------------------------------------------------------------------

def _conv3d(x, w, b=None, *, stride, padding, dilation, data_format, weights_format):
    guard(x, w, b)
    cf = data_format[1] == "C"
    y = conv3d_kernel(np.asarray(x), to_kio(w, weights_format), stride, padding, dilation, cf)
    return add_bias(y, b, cf)


def _conv3d_wgrad(x, g, *, stride, padding, dilation, data_format, weights_format, kernel):
    dw = conv3d_weight_grad_kernel(np.asarray(x), np.asarray(g), kernel, stride, padding,
                                   dilation, data_format[1] == "C")
    return from_kio(dw, weights_format)


def _deconv(name: str, input_grad):
    def impl(x, w, b=None, *, stride, padding, dilation, data_format, weights_format,
             output_size):
        guard(x, w, b)
        x = np.asarray(x)
        cf = data_format[1] == "C"
        wk = to_kio(w, AS_CONV[weights_format])
        n = x.ndim - 2
        attrs = DECONV_OPS[name].attrs_type(
            stride=stride, padding=padding, dilation=dilation, data_format=data_format,
            weights_format=weights_format, output_size=output_size)
        sizes = deconv_sizes(name, _sizes(x.shape, cf), wk.shape[:n], attrs)
        oc = wk.shape[n]
        shape = (x.shape[0], oc, *sizes) if cf else (x.shape[0], *sizes, oc)
        y = input_grad(x, wk, shape, stride, padding, dilation, cf)
        return add_bias(y.astype(np.result_type(x, wk), copy=False), b, cf)
    return impl


def _conv_input_grad_2d(g, w, xshape, stride, padding, dilation, cf):
    return K.conv_input_grad(g, w, xshape, stride, padding, dilation, cf)


# --- gradient rules (every one an op of this file or of cnn.py) --------------------------------

def _window(a: Any) -> dict:
    return {"stride": a.stride, "padding": a.padding, "dilation": a.dilation,
            "data_format": a.data_format}


def _conv3d_grad(ins, outs, gs, a):
    x, w, g = ins[0], ins[1], gs[0]
    ks, _, _ = kernel_dims(w.shape, a.weights_format)
    size = static_sizes("conv3d", x, a.data_format, a.stride)
    grads = [op.deconv3d(g, w, **_window(a), weights_format=AS_DECONV[a.weights_format],
                         output_size=size),
             op.conv3d_weight_grad(x, g, **_window(a), weights_format=a.weights_format,
                                   kernel=ks)]
    if len(ins) == 3:
        grads.append(op.sum(g, dims=channel_dims(a.data_format)))
    return grads


def _conv3d_wgrad_grad(ins, outs, gs, a):
    x, g, gw = ins[0], ins[1], gs[0]
    size = static_sizes("conv3d_weight_grad", x, a.data_format, a.stride)
    return [op.deconv3d(g, gw, **_window(a), weights_format=AS_DECONV[a.weights_format],
                        output_size=size),
            op.conv3d(x, gw, **_window(a), weights_format=a.weights_format)]


def _deconv2d_grad(ins, outs, gs, a):
    x, w, g = ins[0], ins[1], gs[0]
    kw = {**_window(a), "groups": 1, "weights_format": AS_CONV[a.weights_format]}
    grads = [op.conv2d(g, w, **kw), op.conv2d_weight_grad(g, x, w, **kw)]
    if len(ins) == 3:
        grads.append(op.sum(g, dims=channel_dims(a.data_format)))
    return grads


def _deconv3d_grad(ins, outs, gs, a):
    x, w, g = ins[0], ins[1], gs[0]
    wf = AS_CONV[a.weights_format]
    ks, _, _ = kernel_dims(w.shape, wf)
    grads = [op.conv3d(g, w, **_window(a), weights_format=wf),
             op.conv3d_weight_grad(g, x, **_window(a), weights_format=wf, kernel=ks)]
    if len(ins) == 3:
        grads.append(op.sum(g, dims=channel_dims(a.data_format)))
    return grads


_GROUP = {"namespace": "cnn", "method": False}
define("conv3d", ["x", "w", "b?"], _conv3d_infer, _conv3d, attrs=CONV3D, grad=_conv3d_grad,
       **_GROUP,
       doc="3-D convolution (cross-correlation) of ``x`` with ``w`` plus the optional 1-D bias "
           "``b``. Layouts: ``data_format`` NCDHW|NDHWC, ``weights_format`` DHWIO ([kD, kH, kW, "
           "iC, oC], ND4J) | OIDHW (PyTorch/ONNX); ``padding`` an int, a triple, \"valid\" or "
           "\"same\" (out = ceil(in / stride)).")
define("conv3d_weight_grad", ["x", "g"], _conv3d_wgrad_infer, _conv3d_wgrad, attrs=CONV3D_WGRAD,
       grad=_conv3d_wgrad_grad, **_GROUP,
       doc="The adjoint of ``conv3d`` in ``w``: the weight gradient, in ``weights_format``, of "
           "kernel size ``kernel``, for input ``x`` and output gradient ``g``. (The adjoint in "
           "``x`` is ``deconv3d``.)")
DECONV_OPS = {
    "deconv2d": define(
        "deconv2d", ["x", "w", "b?"], _deconv_infer("deconv2d"),
        _deconv("deconv2d", _conv_input_grad_2d), attrs=DECONV2D, grad=_deconv2d_grad, **_GROUP,
        doc="2-D transposed convolution (the adjoint of conv2d) of ``x`` with ``w`` plus the "
            "optional bias ``b``. Weights HWOI ([kH, kW, oC, iC], ND4J) | IOHW ([iC, oC, kH, "
            "kW], PyTorch ConvTranspose2d / ONNX). Output size (in - 1) * stride + (k - 1) * "
            "dilation + 1 - 2 * padding, in * stride for \"same\", or ``output_size``."),
    "deconv3d": define(
        "deconv3d", ["x", "w", "b?"], _deconv_infer("deconv3d"),
        _deconv("deconv3d", conv3d_input_grad_kernel), attrs=DECONV3D, grad=_deconv3d_grad,
        **_GROUP,
        doc="3-D transposed convolution (the adjoint of conv3d, and conv3d's input gradient) of "
            "``x`` (NCDHW|NDHWC) with ``w`` DHWOI ([kD, kH, kW, oC, iC], ND4J) | IODHW "
            "(PyTorch/ONNX) plus the optional bias ``b``; sizes as deconv2d."),
}
