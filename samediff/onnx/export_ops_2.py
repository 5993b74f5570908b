"""More exporters (``export_ops.py`` has the first ones): 1-D/3-D, depthwise, separable and
transposed convolutions and pooling, upsampling, LRN, space/depth moves, attention
(``scaled_dot_product_attention`` and ND4J's single and multi-head forms, composed of
MatMul/Where/Softmax, which every opset has and every runtime runs, rather than opset 23's
Attention), reductions and statistics (all/any, variance/std, max norm, RMS norm, cumsum),
bitwise ops and ``non_max_suppression``. Control flow is in ``export_control.py``, the
recurrent layers in ``export_recurrent.py``, shapes, indexing, scatter, creation and the
rounding ops in ``export_indexing.py`` (all imported here, so importing this module fills
``EXPORTERS``).

What has no faithful form at the opset asked is refused by name (``ctx.fail``): ``bitcast``
(ONNX's BitCast is opset 26, past what the exporter writes), the bitwise ops on integers
before 18, a dilated average pooling before 19, and attributes that need shapes known when
the graph is built where they are not.
"""
from __future__ import annotations

import numpy as np

from ..kernels.geometry import axis_pads
from .dtypes import elem_type
from .export_ops import _from_nchw, _to_nchw
from .exporting import MAX_OPSET, ExportContext, _axes, _scalar, exports

def _ntuple(v, n: int) -> list[int]:
    """An int attribute (or one per spatial axis) as ``n`` ints."""
    if isinstance(v, (int, np.integer)):
        return [int(v)] * n
    return [int(a) for a in v]


def _reduce_to(ctx: ExportContext, onnx_op: str, x: str, axes, keep: bool,
               out: str | list | int = 1) -> str:
    """``onnx_op`` over ``axes``, the axes an input from opset 18 (ReduceSum: 13), as ONNX
    moved them."""
    if ctx.opset >= (13 if onnx_op == "ReduceSum" else 18):
        return ctx.emit(onnx_op, [x, ctx.ints(axes)], out, keepdims=int(keep))[0]
    return ctx.emit(onnx_op, [x], out, axes=[int(a) for a in axes], keepdims=int(keep))[0]


def _static_shape(ctx: ExportContext, node, name: str, why: str) -> tuple[int, ...]:
    shape = ctx.shape(name)
    if any(d < 0 for d in shape):
        raise ctx.fail(node, f"{why} needs the shape of {name!r} known when the graph is built "
                             f"(got {list(shape)})")
    return shape


# -- convolutions and pooling in 1, 2 and 3 dimensions ----------------------------------------

def _spatial(ctx, x: str, data_format: str) -> tuple[int, ...]:
    """The spatial sizes of ``x`` (-1: known at run time only)."""
    shape = ctx.shape(x)
    return tuple(shape[2:] if data_format.upper().startswith("NC") else shape[1:-1])


def _pads(padding, n: int, sizes=None, kernel=None, stride=None, dilation=None) -> dict:
    """ONNX's ``pads``: ints are symmetric; "same" is ND4J's SAME (the odd padding after),
    written as explicit pads when the spatial sizes are static (runtimes disagree on
    ``auto_pad`` with dilations), else as ``auto_pad=SAME_UPPER``."""
    if isinstance(padding, str):
        if padding != "same":
            padding = 0  # "valid"
        elif sizes is None or any(d < 0 for d in sizes):
            return {"auto_pad": "SAME_UPPER"}
        else:
            both = [axis_pads(sizes[i], kernel[i], stride[i], dilation[i], "same")[:2]
                    for i in range(n)]
            return {"pads": [b for b, _ in both] + [e for _, e in both]}
    p = _ntuple(padding, n)
    return {"pads": p + p}


def _nc_emit(ctx, node, data_format: str, op_type: str, ins: list, **attrs) -> None:
    """``op_type`` on channels-first ``ins`` written to the node's output, transposed back
    when the node is channels-last."""
    if data_format.upper().startswith("NC"):
        ctx.emit(op_type, ins, [node.outputs[0]], **attrs)
        return
    (y,) = ctx.emit(op_type, ins, **attrs)
    _from_nchw(ctx, node, y, node.outputs[0], data_format)


def _weights_oi(ctx: ExportContext, w: str, weights_format: str, n: int) -> str:
    """Weights as ONNX's ``[O, I, spatial...]`` (Conv) / ``[I, O, spatial...]``
    (ConvTranspose): ND4J's spatial-first layouts (``WIO``, ``HWIO``, ``DHWIO``, ``HWOI``...)
    have their two channel axes last, in the other order."""
    if weights_format.upper()[0] in "OI":  # already channel-first (OIW, OIDHW, IOHW...)
        return w
    return ctx.emit("Transpose", [w], perm=[n + 1, n, *range(n)])[0]


@exports("conv1d", "conv3d")
def _conv(ctx, node) -> None:
    a = node.attrs
    n = ctx.rank(node.inputs[0]) - 2
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    w = _weights_oi(ctx, node.inputs[1], a.weights_format, n)
    ws = ctx.shape(node.inputs[1])
    kernel = ws[2:] if a.weights_format.upper()[0] == "O" else ws[:n]
    stride, dilation = _ntuple(a.stride, n), _ntuple(a.dilation, n)
    _nc_emit(ctx, node, a.data_format, "Conv", [x, w, *node.inputs[2:]], strides=stride,
             dilations=dilation, group=int(getattr(a, "groups", 1)),
             **_pads(a.padding, n, _spatial(ctx, node.inputs[0], a.data_format), kernel,
                     stride, dilation))


def _depthwise_weights(ctx, node, what: str) -> tuple[str, dict]:
    """ND4J's depthwise weights ``[kH, kW, C, M]`` as ONNX's grouped-Conv weights ``[C * M, 1,
    kH, kW]`` (channel c with multiplier m gives output channel ``c * M + m``: flattened over
    (C, M), moved to the front), and that Conv's attributes (one group per input channel)."""
    a = node.attrs
    kh, kw, c, m = _static_shape(ctx, node, node.inputs[1], what)
    (w,) = ctx.emit("Reshape", [node.inputs[1], ctx.ints([kh, kw, c * m, 1])])
    (w,) = ctx.emit("Transpose", [w], perm=[2, 3, 0, 1])
    stride, dilation = _ntuple(a.stride, 2), _ntuple(a.dilation, 2)
    return w, dict(strides=stride, dilations=dilation, group=c,
                   **_pads(a.padding, 2, _spatial(ctx, node.inputs[0], a.data_format),
                           (kh, kw), stride, dilation))


@exports("depthwise_conv2d")
def _depthwise(ctx, node) -> None:
    """ONNX's grouped Conv with one group per input channel."""
    x = _to_nchw(ctx, node, node.inputs[0], node.attrs.data_format)
    w, conv = _depthwise_weights(ctx, node, "a depthwise convolution")
    _nc_emit(ctx, node, node.attrs.data_format, "Conv", [x, w, *node.inputs[2:]], **conv)


@exports("separable_conv2d")
def _separable(ctx, node) -> None:
    """A depthwise convolution then a 1x1 pointwise one (``pw [1, 1, C * M, O]``)."""
    x = _to_nchw(ctx, node, node.inputs[0], node.attrs.data_format)
    w, conv = _depthwise_weights(ctx, node, "a separable convolution")
    (y,) = ctx.emit("Conv", [x, w], **conv)
    (pw,) = ctx.emit("Transpose", [node.inputs[2]], perm=[3, 2, 0, 1])
    _nc_emit(ctx, node, node.attrs.data_format, "Conv", [y, pw, *node.inputs[3:]])


@exports("deconv2d", "deconv3d")
def _deconv(ctx, node) -> None:
    """ConvTranspose with explicit pads: a deconvolution is the adjoint of the convolution
    from its output back to its input, so the padding before is that convolution's (SAME's
    included) and what is left of ONNX's output size goes to the padding after, or to
    ``output_padding`` when the output is longer (``output_size``)."""
    a = node.attrs
    n = ctx.rank(node.inputs[0]) - 2
    channels_first = a.data_format.upper().startswith("NC")
    xs = ctx.shape(node.inputs[0])
    ys = ctx.shape(node.outputs[0])
    sizes_in = xs[2:] if channels_first else xs[1:-1]
    sizes_out = ys[2:] if channels_first else ys[1:-1]
    ws = _static_shape(ctx, node, node.inputs[1], "a transposed convolution")
    kernel = ws[2:] if a.weights_format.upper()[0] == "I" else ws[:n]
    stride, dilation = _ntuple(a.stride, n), _ntuple(a.dilation, n)
    padding = a.padding if a.padding == "same" else _ntuple(a.padding, n)
    begin, end, extra = [], [], []
    for i in range(n):
        if a.padding != "same" and a.output_size is None:
            begin.append(padding[i])
            end.append(padding[i])
            extra.append(0)
            continue
        if sizes_in[i] < 0 or sizes_out[i] < 0:
            raise ctx.fail(node, "a transposed convolution with padding='same' or output_size "
                                 "needs its spatial sizes known when the graph is built")
        before = axis_pads(sizes_out[i], kernel[i], stride[i], dilation[i],
                           "same" if padding == "same" else padding[i])[0]
        rest = (sizes_in[i] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 \
            - sizes_out[i] - before
        begin.append(before)
        end.append(max(rest, 0))
        extra.append(max(-rest, 0))
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    w = _weights_oi(ctx, node.inputs[1], a.weights_format, n)
    attrs = {"output_padding": extra} if any(extra) else {}
    _nc_emit(ctx, node, a.data_format, "ConvTranspose", [x, w, *node.inputs[2:]],
             strides=stride, dilations=dilation, pads=begin + end, **attrs)


@exports("max_pooling1d", "avg_pooling1d", "max_pooling3d", "avg_pooling3d")
def _pool(ctx, node) -> None:
    a = node.attrs
    n = ctx.rank(node.inputs[0]) - 2
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    dilation = _ntuple(a.dilation, n)
    extra = {}
    average = node.op.name.startswith("avg")
    if average:
        if any(d != 1 for d in dilation) and ctx.opset < 19:
            raise ctx.fail(node, "a dilated average pooling needs opset 19 or later")
        extra["count_include_pad"] = int(bool(a.count_include_pad))
    if any(d != 1 for d in dilation):
        extra["dilations"] = dilation
    kernel, stride = _ntuple(a.kernel, n), _ntuple(a.stride, n)
    _nc_emit(ctx, node, a.data_format, "AveragePool" if average else "MaxPool", [x],
             kernel_shape=kernel, strides=stride,
             **_pads(a.padding, n, _spatial(ctx, node.inputs[0], a.data_format), kernel,
                     stride, dilation), **extra)


@exports("upsampling2d", "upsampling3d")
def _upsampling(ctx, node) -> None:
    """Nearest-neighbour repetition by integer scales: Resize's nearest mode with asymmetric
    coordinates and floor rounding picks input ``floor(o / s)``, which is exactly that."""
    a = node.attrs
    x = node.inputs[0]
    rank = ctx.rank(x)
    n = rank - 2
    scale = [float(s) for s in _ntuple(a.scale, n)]
    scales = [1.0, 1.0, *scale] if a.data_format.upper().startswith("NC") \
        else [1.0, *scale, 1.0]
    ctx.emit("Resize", [x, "", ctx.const(np.asarray(scales, np.float32), hint="scales")],
             node.outputs, mode="nearest", coordinate_transformation_mode="asymmetric",
             nearest_mode="floor")


@exports("bias_add")
def _bias_add(ctx, node) -> None:
    x, b = node.inputs
    if node.attrs.nchw:  # the bias along dim 1: [C] -> [C, 1, ...]
        trailing = ctx.rank(x) - 2
        if trailing > 0:
            (b,) = ctx.emit("Unsqueeze", [b, ctx.ints(range(1, trailing + 1))])
    ctx.emit("Add", [x, b], node.outputs)


@exports("local_response_normalization")
def _lrn(ctx, node) -> None:
    """ND4J's window ``c - depth .. c + depth`` and plain ``alpha`` are ONNX's LRN with
    ``size = 2 depth + 1`` and ``alpha * size`` (ONNX divides alpha by the size)."""
    a = node.attrs
    size = 2 * int(a.depth) + 1
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    _nc_emit(ctx, node, a.data_format, "LRN", [x], alpha=float(a.alpha) * size,
             beta=float(a.beta), bias=float(a.bias), size=size)


@exports("space_to_depth", "depth_to_space")
def _space_depth(ctx, node) -> None:
    """ND4J's channel order ``(bh * b + bw) * C + c`` is ONNX's (DCR for DepthToSpace)."""
    a = node.attrs
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    if node.op.name == "space_to_depth":
        _nc_emit(ctx, node, a.data_format, "SpaceToDepth", [x], blocksize=int(a.block_size))
    else:
        _nc_emit(ctx, node, a.data_format, "DepthToSpace", [x], blocksize=int(a.block_size),
                 mode="DCR")


# -- attention ----------------------------------------------------------------------------------

def _outs(out: str | int) -> list[str] | int:
    """``emit``'s outputs argument for one name or a count."""
    return [out] if isinstance(out, str) else out


def _attend(ctx, node, q: str, kt: str, v: str, scale: float, out: str | int = 1, *,
            bool_mask: str | None = None, add_mask: str | None = None,
            causal: tuple[int, int] | None = None) -> str:
    """``softmax(q @ kt * scale (+ mask)) @ v`` with ``q [..., L, E]``, ``kt [..., E, S]``:
    a hidden key's score is -inf (a query that sees no key gives NaN, as nd4py)."""
    dtype = ctx.dtype(node.outputs[0])
    (s,) = ctx.emit("MatMul", [q, kt])
    (s,) = ctx.emit("Mul", [s, _scalar(ctx, scale, dtype)])
    if causal is not None:  # query i sees keys 0..i (PyTorch's top-left tril)
        length, keys = causal
        bool_mask = ctx.const(np.tril(np.ones((length, keys), bool)), hint="causal")
    if bool_mask is not None:
        (s,) = ctx.emit("Where", [bool_mask, s, _scalar(ctx, -np.inf, dtype)])
    elif add_mask is not None:
        (s,) = ctx.emit("Add", [s, ctx.as_dtype(add_mask, dtype)])
    (p,) = ctx.emit("Softmax", [s], axis=-1)
    return ctx.emit("MatMul", [p, v], _outs(out))[0]


def _swap_last(ctx, x: str, rank: int | None = None) -> str:
    rank = ctx.rank(x) if rank is None else rank
    if rank < 2:
        return x
    return ctx.emit("Transpose", [x], perm=[*range(rank - 2), rank - 1, rank - 2])[0]


@exports("scaled_dot_product_attention")
def _sdpa(ctx, node) -> None:
    q, k, v = node.inputs[:3]
    a = node.attrs
    e = ctx.shape(q)[-1]
    if a.scale is None and e < 0:
        raise ctx.fail(node, "the default scale 1/sqrt(E) needs E (q's last dim) known when "
                             "the graph is built; pass scale=")
    scale = float(a.scale) if a.scale is not None else 1.0 / float(np.sqrt(e))
    masks = {}
    if len(node.inputs) > 3:
        mask = node.inputs[3]
        masks = {"bool_mask": mask} if ctx.dtype(mask) == np.bool_ else {"add_mask": mask}
    elif a.is_causal:
        length, keys = ctx.shape(q)[-2], ctx.shape(k)[-2]
        if length < 0 or keys < 0:
            raise ctx.fail(node, "is_causal needs the query and key lengths known when the "
                                 "graph is built")
        masks = {"causal": (length, keys)}
    _attend(ctx, node, q, _swap_last(ctx, k), v, scale, node.outputs[0], **masks)


def _nd4j_attention(ctx, node, q: str, k: str, v: str, mask: str | None, scaled: bool,
                    rank: int, features: int, out: str | int = 1) -> str:
    """ND4J's feature-major ``[batch, (heads,) features, time]`` attention (``rank`` 3 or
    4): the scores are ``q^T k``, the result ``(p v^T)^T``; a ``[batch, time]`` key mask
    (non-zero: attend) is placed as ``[batch, 1, (1,) time]``."""
    if scaled and features < 0:
        raise ctx.fail(node, "scaled attention needs the feature count known when the graph "
                             "is built")
    scale = 1.0 / float(np.sqrt(features)) if scaled else 1.0
    masks = {}
    if mask is not None:
        (m,) = ctx.emit("Cast", [mask], to=9)  # (bool: non-zero attends)
        (m,) = ctx.emit("Unsqueeze", [m, ctx.ints(range(1, rank - 1))])
        masks = {"bool_mask": m}
    att = _attend(ctx, node, _swap_last(ctx, q, rank), k, _swap_last(ctx, v, rank), scale,
                  **masks)
    return _swap_last_to(ctx, att, rank, out)


def _swap_last_to(ctx, x: str, rank: int, out: str | int) -> str:
    return ctx.emit("Transpose", [x], _outs(out), perm=[*range(rank - 2), rank - 1,
                                                        rank - 2])[0]


@exports("dot_product_attention")
def _dpa(ctx, node) -> None:
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 else None
    _nd4j_attention(ctx, node, q, k, v, mask, bool(node.attrs.scaled), ctx.rank(q),
                    ctx.shape(q)[-2], node.outputs[0])


@exports("multi_head_dot_product_attention")
def _mha(ctx, node) -> None:
    """Per-head projections ``W [heads, p, nIn] @ x [batch, 1, nIn, T]``, ND4J's attention
    per head, then the heads flattened to ``[batch, heads * pv, Tq]`` and projected by
    ``Wo^T`` (row ``h * pv + j`` of Wo is head h's value feature j)."""
    q, k, v, wq, wk, wv, wo = node.inputs[:7]
    mask = node.inputs[7] if len(node.inputs) > 7 else None
    width = ctx.shape(wo)[0]
    if width < 0:
        raise ctx.fail(node, "Wo's shape must be known when the graph is built")
    proj = [ctx.emit("MatMul", [w, ctx.emit("Unsqueeze", [x, ctx.ints([1])])[0]])[0]
            for w, x in ((wq, q), (wk, k), (wv, v))]
    att = _nd4j_attention(ctx, node, *proj, mask, bool(node.attrs.scaled), 4,
                          ctx.shape(wq)[1])
    (flat,) = ctx.emit("Reshape", [att, ctx.ints([0, width, -1])])
    ctx.emit("MatMul", [ctx.emit("Transpose", [wo], perm=[1, 0])[0], flat], node.outputs)


# -- reductions and statistics ------------------------------------------------------------------

@exports("all", "any")
def _all_any(ctx, node) -> None:
    """Truthiness as 0/1 integers, then their min (all) or max (any)."""
    x = node.inputs[0]
    axes = _axes(node.attrs.dims, ctx.rank(x))
    (b,) = ctx.emit("Cast", [x], to=9)
    (i,) = ctx.emit("Cast", [b], to=6)  # (int32: the reductions take no bool before 20)
    r = _reduce_to(ctx, "ReduceMin" if node.op.name == "all" else "ReduceMax", i, axes,
                   node.attrs.keep_dims)
    ctx.emit("Cast", [r], node.outputs, to=9)


@exports("norm_max")
def _norm_max(ctx, node) -> None:
    x = ctx.as_dtype(node.inputs[0], ctx.dtype(node.outputs[0]))
    (ab,) = ctx.emit("Abs", [x])
    _reduce_to(ctx, "ReduceMax", ab, _axes(node.attrs.dims, ctx.rank(node.inputs[0])),
               node.attrs.keep_dims,
               node.outputs)


@exports("variance", "std")
def _variance(ctx, node) -> None:
    """``sum((x - mean)^2) / (n or n - 1)``; ``n`` (the reduced count) must be static for the
    bias-corrected form."""
    a = node.attrs
    out = ctx.dtype(node.outputs[0])
    x = ctx.as_dtype(node.inputs[0], out)
    axes = _axes(a.dims, ctx.rank(node.inputs[0]))
    mean = _reduce_to(ctx, "ReduceMean", x, axes, True)
    (d,) = ctx.emit("Sub", [x, mean])
    (sq,) = ctx.emit("Mul", [d, d])
    target = node.outputs if node.op.name == "variance" else 1
    if a.bias_corrected:
        shape = ctx.shape(node.inputs[0])
        if any(shape[ax] < 0 for ax in axes):
            raise ctx.fail(node, "bias_corrected needs the reduced dims known when the graph "
                                 "is built")
        count = int(np.prod([shape[ax] for ax in axes]))
        total = _reduce_to(ctx, "ReduceSum", sq, axes, a.keep_dims)
        (var,) = ctx.emit("Div", [total, _scalar(ctx, count - 1, out)], target)
    else:
        var = _reduce_to(ctx, "ReduceMean", sq, axes, a.keep_dims, target)
    if node.op.name == "std":
        ctx.emit("Sqrt", [var], node.outputs)


@exports("rms_norm")
def _rms_norm(ctx, node) -> None:
    """``x * (1 / sqrt(mean(x^2) + eps))`` with the statistics in float64 for float32 (as
    nd4py), back in x's dtype, times the gain placed on the normalized dims."""
    from ..ops.sequence import _norm_axes, _placed_shape
    x, gain = node.inputs
    dtype = ctx.dtype(x)
    rank = ctx.rank(x)
    axes = sorted(_norm_axes(rank, node.attrs.dims))
    wide = np.float64 if dtype == np.float32 else dtype
    xw = ctx.as_dtype(x, wide)
    (sq,) = ctx.emit("Mul", [xw, xw])
    ms = _reduce_to(ctx, "ReduceMean", sq, axes, True)
    (ms,) = ctx.emit("Add", [ms, _scalar(ctx, float(node.attrs.epsilon), wide)])
    (r,) = ctx.emit("Sqrt", [ms])
    (r,) = ctx.emit("Reciprocal", [r])
    (y,) = ctx.emit("Mul", [xw, r])
    if np.dtype(wide) != dtype:
        (y,) = ctx.emit("Cast", [y], to=_onnx_type(dtype))
    g = ctx.as_dtype(gain, dtype)
    gshape = ctx.shape(gain)
    if gshape:
        if any(d < 0 for d in gshape):
            raise ctx.fail(node, "the gain's shape must be known when the graph is built")
        (g,) = ctx.emit("Reshape", [g, ctx.ints(_placed_shape(gshape, rank, tuple(axes),
                                                              "gain"))])
    ctx.emit("Mul", [y, g], node.outputs)


def _onnx_type(dtype) -> int:
    return elem_type(dtype)


@exports("cumsum")
def _cumsum(ctx, node) -> None:
    a = node.attrs
    ctx.emit("CumSum", [node.inputs[0], ctx.const(np.int64(a.axis), hint="axis")],
             node.outputs, exclusive=int(bool(a.exclusive)), reverse=int(bool(a.reverse)))


@exports("dot")
def _dot(ctx, node) -> None:
    out = ctx.dtype(node.outputs[0])
    x, y = (ctx.as_dtype(v, out) for v in node.inputs)
    (p,) = ctx.emit("Mul", [x, y])
    rank = max(ctx.rank(v) for v in node.inputs)
    _reduce_to(ctx, "ReduceSum", p, _axes(node.attrs.dims, rank), False, node.outputs)


@exports("det")
def _det(ctx, node) -> None:
    ctx.emit("Det", node.inputs, node.outputs)


# -- elementwise --------------------------------------------------------------------------------

@exports("isinf", "isfinite")
def _isinf(ctx, node) -> None:
    x = node.inputs[0]
    if ctx.dtype(x).kind != "f":  # integers are finite
        (shape,) = ctx.emit("Shape", [x])
        from onnx import numpy_helper
        ctx.emit("ConstantOfShape", [shape], node.outputs, value=numpy_helper.from_array(
            np.asarray([node.op.name == "isfinite"])))
        return
    if node.op.name == "isinf":
        ctx.emit("IsInf", [x], node.outputs)
        return
    (inf,) = ctx.emit("IsInf", [x])
    (nan,) = ctx.emit("IsNaN", [x])
    (bad,) = ctx.emit("Or", [inf, nan])
    ctx.emit("Not", [bad], node.outputs)


@exports("hard_swish")
def _hard_swish(ctx, node) -> None:
    if ctx.opset >= 14:
        ctx.emit("HardSwish", node.inputs, node.outputs)
        return
    (s,) = ctx.emit("HardSigmoid", node.inputs, alpha=1.0 / 6.0, beta=0.5)
    ctx.emit("Mul", [node.inputs[0], s], node.outputs)


_BITWISE = {"bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr",
            "bitwise_xor": "BitwiseXor", "bitwise_not": "BitwiseNot"}


@exports(*_BITWISE)
def _bitwise(ctx, node) -> None:
    out = ctx.dtype(node.outputs[0])
    if out == np.bool_:  # (on bools the bitwise ops are the logical ones, in every opset)
        logic = {"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor",
                 "bitwise_not": "Not"}[node.op.name]
        ctx.emit(logic, [ctx.as_dtype(x, np.bool_) for x in node.inputs], node.outputs)
        return
    if ctx.opset < 18:
        raise ctx.fail(node, f"ONNX's {_BITWISE[node.op.name]} needs opset 18 or later")
    ctx.emit(_BITWISE[node.op.name], [ctx.as_dtype(x, out) for x in node.inputs], node.outputs)


@exports("bitcast")
def _bitcast(ctx, node) -> None:
    raise ctx.fail(node, f"bitcast needs ONNX's BitCast, which is opset 26; the exporter "
                         f"writes opsets up to {MAX_OPSET} (ONNX has no other way to "
                         f"reinterpret bits)")


# -- detection ----------------------------------------------------------------------------------

@exports("non_max_suppression")
def _nms(ctx, node) -> None:
    """ONNX's NonMaxSuppression takes float32 boxes, scores and thresholds: float64 ones are
    cast (an IoU within float32 rounding of the threshold may then decide differently)."""
    boxes, scores, max_out, iou, score = node.inputs
    ins = [ctx.as_dtype(boxes, np.float32), ctx.as_dtype(scores, np.float32),
           ctx.as_dtype(max_out, np.int64), ctx.as_dtype(iou, np.float32)]
    if node.attrs.score_filter:
        ins.append(ctx.as_dtype(score, np.float32))
    ctx.emit("NonMaxSuppression", ins, node.outputs,
             center_point_box=int(node.attrs.center_point_box))


