"""Convolution ops (the ``cnn`` group: ``sd.cnn`` / ``nd.cnn``), ND4J's conventions.

* ``conv2d(x, w, b?)``: ``data_format`` ``"NCHW"`` (ND4J's default) or ``"NHWC"``; weights
  ``"HWIO"`` (ND4J's ``[kH, kW, iC, oC]``, the default) or ``"OIHW"`` (PyTorch/ONNX).
  ``conv1d(x, w, b?)``: ``"NCW"``/``"NWC"``, weights ``"WIO"`` (``[k, iC, oC]``) or ``"OIW"``.
* Attributes: ``stride``/``dilation`` an int or a pair, ``padding`` an int, a pair,
  ``"valid"`` (= 0) or ``"same"`` (ND4J's ``isSameMode``: ``out = ceil(in / stride)``, the odd
  padding after). The attribute names are the keyword form's (``nd.cnn.conv2d(x, w,
  stride=2, padding="same")``), so that form needs no rule of its own; ND4J's config objects
  expand into them in the front end. ``groups=G`` splits the channels into G independent
  convolutions (weights ``[kH, kW, iC/G, oC]``; PyTorch's ``groups``; depthwise is G = iC).
* Float inputs only. Kernels (``kernels/cnn.py``) run in the data's own layout: chunked
  im2col GEMMs on NCHW, one GEMM per kernel tap on NHWC (``kernels.cnn.choose``).

Gradients use helper ops, each the adjoint of its op and linear in ``g``:
``conv2d_input_grad(g, w, x)``, ``conv2d_weight_grad(x, g, w)`` (the last input lends only its
run-time shape, so -1 dims are fine); they are differentiable again (their rules are conv2d
and the other helper: bilinear forms). Pooling, in every spatial rank, is in ``cnn_pooling.py``. ``conv1d``
differentiates through the 2-D helpers on a size-1 height. Grouped convolutions run the
kernels once per group (``_grouped``); the helpers take the same ``groups``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OpError
from ..kernels import geometry as G, lazy
from .call import op
from .cnn_attrs import choice, padding, window
from .registry import Attr, TensorType, define

K = lazy("cnn")  # the kernels (and Numba) load on the first convolution or pooling run

# --- attribute kinds --------------------------------------------------------------------------


PAIR = window(2)
PADDING = padding(2)

CONV2D = {"stride": (PAIR, (1, 1)), "padding": (PADDING, (0, 0)), "dilation": (PAIR, (1, 1)),
          "groups": (Attr.INT, 1), "data_format": (choice("NCHW", "NHWC"), "NCHW"),
          "weights_format": (choice("HWIO", "OIHW"), "HWIO")}
#: conv2d's own: a ``"relu"`` epilogue, applied in the kernels while the output is in cache
#: (ONNX's FusedConv, oneDNN's post-ops); plans fold ``relu(conv2d(...))`` into it
CONV2D_OP = {**CONV2D, "activation": (choice("none", "relu"), "none")}
CONV1D = {"stride": (window(1), 1), "padding": (padding(1), 0),
          "dilation": (window(1), 1), "groups": (Attr.INT, 1),
          "data_format": (choice("NCW", "NWC"), "NCW"),
          "weights_format": (choice("WIO", "OIW"), "WIO")}



# --- shape and dtype inference ------------------------------------------------------------------

def float_dtype(name: str, types: list[TensorType], what: tuple[str, ...]) -> np.dtype:
    for t, w in zip(types, what):
        if t.dtype.kind != "f":
            raise OpError(f"{name} requires float inputs, got {t.dtype} {w} ({t}); cast it "
                          f"first, e.g. x.castTo('float32')")
    return np.result_type(*(t.dtype for t in types))


def as_tuple(v: Any, n: int) -> Any:
    """An int attribute (1-D ops) as an ``n``-tuple; tuples and ``"same"`` stay as they are."""
    return v if v == "same" or isinstance(v, tuple) else (v,) * n


def spatial_axes(fmt: str) -> tuple[list[int], int]:
    """Spatial axes and channel axis of an activation layout ("NCHW", "NWC"...)."""
    n = len(fmt) - 2
    return (list(range(2, 2 + n)), 1) if fmt[1] == "C" else (list(range(1, 1 + n)), n + 1)


def _out_size(size: int, k: int, s: int, d: int, p: Any) -> int:
    """Output size of one axis (-1 when unknown); a kernel that does not fit raises."""
    return -1 if k < 0 else G.axis_pads(size, k, s, d, p)[2]


def check_rank(name: str, t: TensorType, rank: int, what: str, layout: str) -> None:
    if t.rank != rank:
        raise OpError(f"{name}: {what} must have rank {rank} ({layout}), got shape {t.shape}")


def swap_data(fmt: str) -> str:
    """The other activation layout: "NCHW" <-> "NHWC" (any spatial rank)."""
    return fmt[0] + fmt[2:] + "C" if fmt[1] == "C" else fmt[0] + "C" + fmt[1:-1]


def swap_weights(wfmt: str) -> str:
    """The other weights layout: kernel first ("HWIO", ND4J's; "HWOI" for a deconvolution)
    <-> channels first ("OIHW", PyTorch's/ONNX's; "IOHW")."""
    if wfmt[0] in "IO":
        return wfmt[2:] + wfmt[1] + wfmt[0]
    return wfmt[-1] + wfmt[-2] + wfmt[:-2]


def layout_hint(x: tuple, w: tuple, fmt: str, wfmt: str, groups: int = 1,
                weights: bool = True) -> str:
    """When ``x``'s channels disagree with ``w``'s input channels (``w.shape[wfmt.index("I")]
    * groups``) in the given layouts: the keyword(s) under which they agree (PyTorch-layout
    weights, NHWC data), as an error message's tail; "" when no other layout fits.
    ``weights=False``: the op has one weights layout only.

    >>> layout_hint((1, 3, 8, 8), (8, 3, 5, 5), "NCHW", "HWIO").split(": ")[-1]
    "pass weights_format='OIHW'"
    >>> layout_hint((1, 8, 8, 3), (3, 3, 3, 4), "NCHW", "HWIO").split(": ")[-1]
    "pass data_format='NHWC'"
    """
    for d, wf in ((fmt, swap_weights(wfmt)), (swap_data(fmt), wfmt),
                  (swap_data(fmt), swap_weights(wfmt))):
        if wf != wfmt and not weights:
            continue
        ch, ic = x[d.index("C")], w[wf.index("I")]
        if ch >= 0 and ic >= 0 and ch == ic * groups:
            keys = [f"{k}={v!r}" for k, v, old in (("data_format", d, fmt),
                                                   ("weights_format", wf, wfmt)) if v != old]
            torch = " (PyTorch's/ONNX's layout)" if wf[0] in "IO" and wf != wfmt else ""
            return f"; they agree as {d} data with {wf} weights{torch}: pass {' and '.join(keys)}"
    return ""


def _conv_infer(name: str):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        if a.groups < 1:
            raise OpError(f"{name}: groups must be >= 1, got {a.groups}")
        dtype = float_dtype(name, types, ("x", "w", "b"))
        fmt, wfmt = a.data_format, a.weights_format
        n = len(fmt) - 2
        x, w = types[0], types[1]
        check_rank(name, x, n + 2, "x", fmt)
        check_rank(name, w, n + 2, "w", wfmt)
        if wfmt[0] == "O":
            oc, ic, ks = w.shape[0], w.shape[1], w.shape[2:]
        else:
            ks, ic, oc = w.shape[:n], w.shape[n], w.shape[n + 1]
        axes, cax = spatial_axes(fmt)
        if x.shape[cax] >= 0 and ic >= 0 and x.shape[cax] != ic * a.groups:
            per = f" ({ic} per group x groups={a.groups})" if a.groups > 1 else ""
            raise OpError(f"{name}: x has {x.shape[cax]} input channels ({fmt} {x.shape}) but "
                          f"w expects {ic * a.groups}{per} ({wfmt} {w.shape})"
                          f"{layout_hint(x.shape, w.shape, fmt, wfmt, a.groups)}")
        if oc >= 0 and oc % a.groups:
            raise OpError(f"{name}: {oc} output channels do not split into groups={a.groups}; "
                          f"w's output channels must be a multiple of groups")
        if len(types) == 3 and not (types[2].rank == 1 and types[2].shape[0] in (-1, oc)
                                    or oc < 0):
            raise OpError(f"{name}: b must be 1-D of {oc} output channels, got {types[2].shape}")
        st, dl, pd = as_tuple(a.stride, n), as_tuple(a.dilation, n), as_tuple(a.padding, n)
        out = list(x.shape)
        for i, ax in enumerate(axes):
            out[ax] = _out_size(x.shape[ax], ks[i], st[i], dl[i],
                                "same" if pd == "same" else pd[i])
        out[cax] = oc
        return TensorType(tuple(out), dtype)
    return infer


def padding_only_window(size: int, k: int, s: int, d: int, padding: Any) -> int | None:
    """The first output index of one spatial axis whose pooling window holds only padding
    (its taps all fall before the input, after it, or -- dilated -- in the gaps around it);
    None when every window reads the input, or when ``size`` is unknown (-1).

    >>> padding_only_window(2, 2, 1, 3, 1)  # taps -1 and 2 around an input of 2
    0
    >>> padding_only_window(2, 2, 1, 1, 1) is None
    True
    """
    if size < 0 or k < 0:
        return None
    before, _, out = G.axis_pads(size, k, s, d, padding)
    # tap t of output o reads o * s - before + t * d: inside [0, size) iff t * d is in
    # [lo, lo + size - 1] with lo = before - o * s; the first candidate is t = ceil(lo / d)
    lo = before - np.arange(out) * s
    t = np.maximum(-(-lo // d), 0)
    empty = np.flatnonzero((t > k - 1) | (t * d > lo + size - 1))
    return int(empty[0]) if empty.size else None


def check_windows(name: str, sizes: tuple[int, ...], kernel: tuple, stride: tuple,
                  padding: Any, dilation: tuple) -> None:
    """Refuse pooling geometry whose windows would hold only padding (max would give -inf,
    avg 0 and both zero gradients): padding over half the kernel, or an input that a dilated
    window can straddle. Sizes of -1 (unknown) are checked when they are known (at run time)."""
    for i, size in enumerate(sizes):
        pad = "same" if padding == "same" else padding[i]
        if pad != "same" and 2 * pad > kernel[i]:
            raise OpError(f"{name}: padding {pad} is more than half the kernel {kernel[i]} on "
                          f"spatial axis {i}: some windows would hold only padding; use a "
                          f"smaller padding or \"same\"")
        if dilation[i] == 1:  # contiguous windows within that padding always reach the input
            continue
        o = padding_only_window(size, kernel[i], stride[i], dilation[i], pad)
        if o is not None:
            raise OpError(f"{name}: some windows would hold only padding: on spatial axis {i} "
                          f"(input size {size}, kernel {kernel[i]}, dilation {dilation[i]}, "
                          f"stride {stride[i]}, padding {pad}) every tap of the window of "
                          f"output {o} falls in the padding or between the input's elements; "
                          f"use a smaller dilation or padding, or a larger input")


def _like_infer(name: str, like: int, labels: tuple[str, ...]):
    """Inference of a gradient helper: the shape of input ``like``, the float dtype of the
    inputs named by ``labels`` (the leading ones)."""
    def infer(types: list[TensorType], a: Any) -> TensorType:
        dtype = float_dtype(name, types[:len(labels)], labels)
        return TensorType(types[like].shape, dtype)
    return infer


# --- implementations (the kernels are in kernels.cnn.py) ----------------------------------------

def guard(*arrays) -> None:
    """Eager calls run the impl without inference: refuse what inference refuses (the caller,
    ``bind``, then reports inference's message: ``conv2d requires float inputs...``)."""
    if any(np.asarray(a).dtype.kind != "f" for a in arrays if a is not None):
        raise TypeError("unsupported input (see the op's inference)")


def _cf(fmt: str) -> bool:
    return fmt[1] == "C"


def _hwio(w, wfmt: str):
    w = np.asarray(w)
    # a view: the kernels copy the weights once into the layout their GEMMs read (for a 1x1
    # OIHW kernel that is the weights as they are), so a copy here would be a second one
    return w.transpose(2, 3, 1, 0) if wfmt == "OIHW" else w


def _from_hwio(dw, wfmt: str):
    return np.ascontiguousarray(dw.transpose(3, 2, 0, 1)) if wfmt == "OIHW" else dw


def add_bias(y: np.ndarray, b: Any, cf: bool) -> np.ndarray:
    """``y += b`` in place along the channel axis (1 when ``cf``, else the last)."""
    if b is not None:
        b = np.asarray(b, y.dtype)
        y += b.reshape((-1,) + (1,) * (y.ndim - 2)) if cf else b
    return y


def _grouped(fn, groups: int, join: int, *splits: tuple[np.ndarray, int]) -> np.ndarray:
    """``fn`` on each of ``groups`` channel groups -- ``splits`` are (array, axis to split
    along) -- joined along axis ``join``: a grouped convolution is ``groups`` independent ones
    (group ``k`` reads input channels ``k*C/G ...`` and writes output channels ``k*O/G ...``)."""
    if groups == 1:
        return fn(*(a for a, _ in splits))
    for a, axis in splits:
        if a.shape[axis] % groups:
            raise ValueError(f"{a.shape[axis]} channels do not split into {groups} groups")
    parts = zip(*(np.split(a, groups, axis) for a, axis in splits))
    return np.concatenate([fn(*p) for p in parts], axis=join)


def _conv2d(x, w, b=None, *, stride, padding, dilation, groups, data_format, weights_format,
            activation="none"):
    guard(x, w, b)
    cf = _cf(data_format)
    cax = 1 if cf else 3
    relu = activation == "relu"
    if groups == 1:  # the kernels write the bias and the relu with the product
        return K.conv(np.asarray(x), _hwio(w, weights_format), stride, padding, dilation, cf,
                      None if b is None else np.asarray(b), relu)
    y = _grouped(lambda xg, wg: K.conv(xg, wg, stride, padding, dilation, cf), groups, cax,
                 (np.asarray(x), cax), (_hwio(w, weights_format), 3))
    y = add_bias(y, b, cf)
    return np.maximum(y, 0, out=y) if relu else y


def _conv2d_input_grad(g, w, like, *, stride, padding, dilation, groups, data_format,
                       weights_format):
    cf = _cf(data_format)
    cax = 1 if cf else 3
    shape = list(np.shape(like))
    shape[cax] //= groups
    return _grouped(lambda gg, wg: K.conv_input_grad(gg, wg, tuple(shape), stride, padding,
                                                     dilation, cf),
                    groups, cax, (np.asarray(g), cax), (_hwio(w, weights_format), 3))


def _conv2d_weight_grad(x, g, like, *, stride, padding, dilation, groups, data_format,
                        weights_format):
    ws = np.shape(like)
    kernel = ws[2:] if weights_format == "OIHW" else ws[:2]
    cf = _cf(data_format)
    cax = 1 if cf else 3
    dw = _grouped(lambda xg, gg: K.conv_weight_grad(xg, gg, kernel, stride, padding, dilation,
                                                    cf),
                  groups, 3, (np.asarray(x), cax), (np.asarray(g), cax))
    return _from_hwio(dw, weights_format)


def _attrs(a: Any) -> dict:
    return dict(vars(a))


def _conv_warm(kind: str):
    """``OpDef.warm`` of ``conv2d`` (kind ``"conv"``) and its adjoints: the kernels-layer
    warm-up of the route the convolution takes at these static types (ungrouped ones)."""
    def warm(types: Any, a: Any) -> tuple:
        if a.groups != 1 or types[0].dtype != types[1].dtype:
            return ()
        first, second = (tuple(t.shape) for t in types[:2])
        wshape = tuple(types[1 if kind != "weight_grad" else 2].shape)
        hwio = (*wshape[2:], wshape[1], wshape[0]) if a.weights_format == "OIHW" else wshape
        if kind == "input_grad":  # (g, w, like): x is dx, of like's shape
            xshape = tuple(types[2].shape)
        else:
            xshape = first
        if kind == "weight_grad":  # (x, g, like): the weights' channels from x and g
            cax = 1 if _cf(a.data_format) else 3
            hwio = (*hwio[:2], first[cax], second[cax])
        return K.conv_warmups(kind, xshape, hwio, a.stride, a.padding, a.dilation,
                              _cf(a.data_format), types[0].dtype)
    return warm


def channel_dims(fmt: str) -> tuple[int, ...]:
    axes, _ = spatial_axes(fmt)
    return (0, *axes)


def _conv2d_grad(ins, outs, gs, a):
    x, w, g, kw = ins[0], ins[1], gs[0], _attrs(a)
    if kw.pop("activation") == "relu":  # through the epilogue first (y > 0 iff pre-relu > 0)
        g = op.where(outs[0] > 0.0, g, 0.0)
    grads = [op.conv2d_input_grad(g, w, x, **kw), op.conv2d_weight_grad(x, g, w, **kw)]
    if len(ins) == 3:
        grads.append(op.sum(g, dims=channel_dims(a.data_format)))
    return grads


_GROUP = {"namespace": "cnn", "method": False}
define("conv2d", ["x", "w", "b?"], _conv_infer("conv2d"), _conv2d, attrs=CONV2D_OP,
       grad=_conv2d_grad, epilogue="activation", warm=_conv_warm("conv"), **_GROUP,
       doc="2-D convolution (cross-correlation, as ND4J/PyTorch) of ``x`` with ``w`` plus the "
           "optional 1-D bias ``b``. Layouts: ``data_format`` NCHW|NHWC, ``weights_format`` "
           "HWIO ([kH, kW, iC, oC], ND4J) | OIHW (PyTorch/ONNX). ``activation=\"relu\"`` "
           "applies ``max(., 0)`` in the same pass (compiled plans fold a following ``relu`` "
           "into it).")
define("conv2d_input_grad", ["g", "w", "like"], _like_infer("conv2d_input_grad", 2, ("g", "w")),
       _conv2d_input_grad, attrs=CONV2D, warm=_conv_warm("input_grad"), **_GROUP,
       grad=lambda ins, outs, gs, a: [op.conv2d(gs[0], ins[1], **_attrs(a)),
                                      op.conv2d_weight_grad(gs[0], ins[0], ins[1], **_attrs(a)),
                                      None],
       doc="The adjoint of ``conv2d`` in ``x``: ``g`` (conv2d's output gradient) sent back "
           "through ``w`` to an array of ``like``'s shape.")
define("conv2d_weight_grad", ["x", "g", "like"], _like_infer("conv2d_weight_grad", 2, ("x", "g")),
       _conv2d_weight_grad, attrs=CONV2D, warm=_conv_warm("weight_grad"), **_GROUP,
       grad=lambda ins, outs, gs, a: [op.conv2d_input_grad(ins[1], gs[0], ins[0], **_attrs(a)),
                                      op.conv2d(ins[0], gs[0], **_attrs(a)), None],
       doc="The adjoint of ``conv2d`` in ``w``: the weight gradient for input ``x`` and output "
           "gradient ``g``, of ``like``'s shape (the weights).")


# --- conv1d: conv2d on a height of 1 ------------------------------------------------------------

def _as2d(a: Any) -> tuple[dict, int, int]:
    """conv2d attributes for a conv1d, and where the height axis goes in x and in w."""
    kw = {"stride": (1, a.stride), "dilation": (1, a.dilation), "groups": a.groups,
          "padding": "same" if a.padding == "same" else (0, a.padding),
          "data_format": "NCHW" if a.data_format == "NCW" else "NHWC",
          "weights_format": "OIHW" if a.weights_format == "OIW" else "HWIO"}
    return kw, (2 if a.data_format == "NCW" else 1), (2 if a.weights_format == "OIW" else 0)


def _conv1d(x, w, b=None, **attrs):
    guard(x, w, b)
    kw, xa, wa = _as2d(CONV1D_OP.attrs_type(**attrs))
    y = _conv2d(np.expand_dims(x, xa), np.expand_dims(w, wa), b, **kw)
    return np.squeeze(y, xa)


def _conv1d_grad(ins, outs, gs, a):
    kw, xa, wa = _as2d(a)
    x4, w4, g4 = (op.expand_dims(v, axis=ax) for v, ax in ((ins[0], xa), (ins[1], wa),
                                                          (gs[0], xa)))
    grads = [op.squeeze(op.conv2d_input_grad(g4, w4, x4, **kw), axis=(xa,)),
             op.squeeze(op.conv2d_weight_grad(x4, g4, w4, **kw), axis=(wa,))]
    if len(ins) == 3:
        grads.append(op.sum(gs[0], dims=channel_dims(a.data_format)))
    return grads


CONV1D_OP = define("conv1d", ["x", "w", "b?"], _conv_infer("conv1d"), _conv1d, attrs=CONV1D,
                   grad=_conv1d_grad, **_GROUP,
                   doc="1-D convolution of ``x`` (NCW|NWC) with ``w`` (WIO: [k, iC, oC], "
                       "ND4J | OIW) plus the optional bias ``b``.")
