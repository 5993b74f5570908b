"""The exporters: one function per table op (or family of ops sharing one), writing the ONNX
nodes that compute it (``export.py``). An op listed here is ``exportable``."""
from __future__ import annotations

import math

import numpy as np

from .dtypes import elem_type
from .exporting import ExportContext, exports
from .same_ops import SAME_BACK

#: ONNX ops whose inputs must share one type, which is not the result's (comparisons), must
#: be bool (logic), float (IsNaN), or pass as they are; the rest compute in their result's type
_COMPARE = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}
_LOGIC = {"And", "Or", "Xor", "Not"}


def _same(onnx_op: str):
    def export(ctx: ExportContext, node) -> None:
        ins = list(node.inputs)
        out = ctx.dtype(node.outputs[0])
        if onnx_op in _LOGIC:
            ins = [ctx.as_dtype(x, np.bool_) for x in ins]
        elif onnx_op in _COMPARE:
            strong = [ctx.dtype(x) for x in ins if not ctx.weak(x)]
            common = np.result_type(*strong)
            ins = [ctx.as_dtype(x, common) for x in ins]
        elif onnx_op == "IsNaN":
            if ctx.dtype(ins[0]).kind != "f":
                ins = [ctx.as_dtype(ins[0], np.float64)]
        elif onnx_op == "Identity":
            pass
        elif onnx_op == "Where":
            ins = [ctx.as_dtype(ins[0], np.bool_)] + [ctx.as_dtype(x, out) for x in ins[1:]]
        elif onnx_op == "Pow":  # (the exponent may keep its own type)
            ins = [ctx.as_dtype(ins[0], out), ins[1]]
        elif onnx_op == "Round" and out.kind != "f":  # (integers are already round)
            onnx_op_here = "Identity"
            ctx.emit(onnx_op_here, ins, node.outputs)
            return
        else:
            ins = [ctx.as_dtype(x, out) for x in ins]
        ctx.emit(onnx_op, ins, node.outputs)
    return export


for _op, _onnx in SAME_BACK.items():
    exports(_op)(_same(_onnx))


def _scalar(ctx: ExportContext, node, value: float, like: str | None = None) -> str:
    """A scalar initializer of the dtype of ``like`` (default: the node's first input)."""
    return ctx.const(value, ctx.dtype(like or node.inputs[0]), hint="scalar")


@exports("rsub", "rdiv")
def _reversed(ctx, node) -> None:
    x, y = node.inputs
    ctx.emit("Sub" if node.op.name == "rsub" else "Div", [y, x], node.outputs)


@exports("neq")
def _neq(ctx, node) -> None:
    (eq,) = ctx.emit("Equal", node.inputs)
    ctx.emit("Not", [eq], node.outputs)


@exports("square", "cube")
def _power(ctx, node) -> None:
    x = node.inputs[0]
    if node.op.name == "square":
        ctx.emit("Mul", [x, x], node.outputs)
    else:
        (sq,) = ctx.emit("Mul", [x, x])
        ctx.emit("Mul", [sq, x], node.outputs)


@exports("squared_difference")
def _squared_difference(ctx, node) -> None:
    (d,) = ctx.emit("Sub", node.inputs)
    ctx.emit("Mul", [d, d], node.outputs)


@exports("rsqrt")
def _rsqrt(ctx, node) -> None:
    (s,) = ctx.emit("Sqrt", node.inputs)
    ctx.emit("Reciprocal", [s], node.outputs)


@exports("expm1")
def _expm1(ctx, node) -> None:
    (e,) = ctx.emit("Exp", node.inputs)
    ctx.emit("Sub", [e, _scalar(ctx, node, 1.0)], node.outputs)


@exports("log1p")
def _log1p(ctx, node) -> None:
    (p,) = ctx.emit("Add", [node.inputs[0], _scalar(ctx, node, 1.0)])
    ctx.emit("Log", [p], node.outputs)


@exports("log2")
def _log2(ctx, node) -> None:
    (ln,) = ctx.emit("Log", node.inputs)
    ctx.emit("Div", [ln, _scalar(ctx, node, math.log(2.0))], node.outputs)


@exports("exp2")
def _exp2(ctx, node) -> None:
    ctx.emit("Pow", [_scalar(ctx, node, 2.0), node.inputs[0]], node.outputs)


@exports("relu")
def _relu(ctx, node) -> None:
    cutoff = float(node.attrs.cutoff)
    if cutoff == 0.0:
        ctx.emit("Relu", node.inputs, node.outputs)
        return
    x = node.inputs[0]
    (above,) = ctx.emit("Greater", [x, _scalar(ctx, node, cutoff)])
    ctx.emit("Where", [above, x, _scalar(ctx, node, 0.0)], node.outputs)


@exports("relu6", "hard_tanh")
def _clip_family(ctx, node) -> None:
    lo, hi = (0.0, 6.0) if node.op.name == "relu6" else (-1.0, 1.0)
    ctx.emit("Clip", [node.inputs[0], _scalar(ctx, node, lo), _scalar(ctx, node, hi)],
             node.outputs)


@exports("clip_by_value")
def _clip(ctx, node) -> None:
    ctx.emit("Clip", [node.inputs[0], _scalar(ctx, node, node.attrs.clip_min),
                      _scalar(ctx, node, node.attrs.clip_max)], node.outputs)


@exports("leaky_relu")
def _leaky(ctx, node) -> None:
    ctx.emit("LeakyRelu", node.inputs, node.outputs, alpha=float(node.attrs.alpha))


@exports("elu")
def _elu(ctx, node) -> None:
    ctx.emit("Elu", node.inputs, node.outputs, alpha=float(node.attrs.alpha))


@exports("selu")
def _selu(ctx, node) -> None:
    ctx.emit("Selu", node.inputs, node.outputs)


@exports("hard_sigmoid")
def _hard_sigmoid(ctx, node) -> None:  # ND4J's constants: clip(0.2 x + 0.5, 0, 1)
    ctx.emit("HardSigmoid", node.inputs, node.outputs, alpha=0.2, beta=0.5)


@exports("swish")
def _swish(ctx, node) -> None:
    (s,) = ctx.emit("Sigmoid", node.inputs)
    ctx.emit("Mul", [node.inputs[0], s], node.outputs)


@exports("mish")
def _mish(ctx, node) -> None:
    if ctx.opset >= 18:
        ctx.emit("Mish", node.inputs, node.outputs)
        return
    (sp,) = ctx.emit("Softplus", node.inputs)
    (t,) = ctx.emit("Tanh", [sp])
    ctx.emit("Mul", [node.inputs[0], t], node.outputs)


@exports("log_sigmoid")
def _log_sigmoid(ctx, node) -> None:
    (n,) = ctx.emit("Neg", node.inputs)
    (sp,) = ctx.emit("Softplus", [n])
    ctx.emit("Neg", [sp], node.outputs)


@exports("gelu")
def _gelu(ctx, node) -> None:
    x = node.inputs[0]
    if ctx.opset >= 20:
        ctx.emit("Gelu", [x], node.outputs,
                 approximate="tanh" if node.attrs.approximate else "none")
        return
    half = _scalar(ctx, node, 0.5)
    if node.attrs.approximate:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        (x3,) = ctx.emit("Mul", [x, x])
        (x3,) = ctx.emit("Mul", [x3, x])
        (inner,) = ctx.emit("Mul", [x3, _scalar(ctx, node, 0.044715)])
        (inner,) = ctx.emit("Add", [x, inner])
        (inner,) = ctx.emit("Mul", [inner, _scalar(ctx, node, math.sqrt(2.0 / math.pi))])
        (t,) = ctx.emit("Tanh", [inner])
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        (inner,) = ctx.emit("Div", [x, _scalar(ctx, node, math.sqrt(2.0))])
        (t,) = ctx.emit("Erf", [inner])
    (one_plus,) = ctx.emit("Add", [t, _scalar(ctx, node, 1.0)])
    (hx,) = ctx.emit("Mul", [x, half])
    ctx.emit("Mul", [hx, one_plus], node.outputs)


@exports("cast")
def _cast(ctx, node) -> None:
    ctx.emit("Cast", node.inputs, node.outputs, to=elem_type(node.attrs.dtype))


# -- shapes -----------------------------------------------------------------------------------

@exports("reshape")
def _reshape(ctx, node) -> None:
    allow = {"allowzero": 1} if ctx.opset >= 14 else {}  # a 0 is a size, not "copy"
    x, shape = node.inputs[0], list(node.attrs.shape)
    if node.attrs.order in ("c", "C"):
        ctx.emit("Reshape", [x, ctx.ints(shape, "shape")], node.outputs, **allow)
        return
    # Fortran order: reversing the dims turns it into a C-order reshape
    (xt,) = ctx.emit("Transpose", [x])
    (r,) = ctx.emit("Reshape", [xt, ctx.ints(shape[::-1], "shape")], **allow)
    ctx.emit("Transpose", [r], node.outputs)


@exports("permute")
def _permute(ctx, node) -> None:
    ctx.emit("Transpose", node.inputs, node.outputs, perm=[int(d) for d in node.attrs.dims])


@exports("transpose")
def _transpose(ctx, node) -> None:
    ctx.emit("Transpose", node.inputs, node.outputs)  # (reversed dims: ONNX's default)


@exports("expand_dims")
def _expand_dims(ctx, node) -> None:
    rank = ctx.rank(node.outputs[0])
    axis = int(node.attrs.axis)
    ctx.emit("Unsqueeze", [node.inputs[0], ctx.ints([axis + rank if axis < 0 else axis])],
             node.outputs)


@exports("squeeze")
def _squeeze(ctx, node) -> None:
    axis = node.attrs.axis
    if axis is None:
        ctx.emit("Squeeze", node.inputs, node.outputs)
        return
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    ctx.emit("Squeeze", [node.inputs[0], ctx.ints(axes)], node.outputs)


@exports("concat")
def _concat(ctx, node) -> None:
    ctx.emit("Concat", node.inputs, node.outputs, axis=int(node.attrs.axis))


@exports("stack")
def _stack(ctx, node) -> None:
    rank = ctx.rank(node.outputs[0])
    axis = int(node.attrs.axis)
    axis = axis + rank if axis < 0 else axis
    parts = [ctx.emit("Unsqueeze", [x, ctx.ints([axis])])[0] for x in node.inputs]
    ctx.emit("Concat", parts, node.outputs, axis=axis)


@exports("broadcast_to")
def _broadcast_to(ctx, node) -> None:
    ctx.emit("Expand", [node.inputs[0], ctx.ints(node.attrs.shape)], node.outputs)


@exports("tile")
def _tile(ctx, node) -> None:
    x, reps = node.inputs[0], list(node.attrs.reps)
    rank = ctx.rank(x)
    if len(reps) > rank:  # numpy's rule: the array gains leading dims
        shape = [1] * (len(reps) - rank) + list(ctx.shape(x))
        if any(d < 0 for d in shape):
            raise ctx.fail(node, "reps longer than the rank of an array with run-time dims")
        (x,) = ctx.emit("Reshape", [x, ctx.ints(shape)])
    reps = [1] * (max(rank, len(reps)) - len(reps)) + reps
    ctx.emit("Tile", [x, ctx.ints(reps)], node.outputs)


@exports("gather")
def _gather(ctx, node) -> None:
    ctx.emit("Gather", node.inputs, node.outputs, axis=int(node.attrs.axis))


@exports("slice")
def _slice(ctx, node) -> None:
    begin, size = list(node.attrs.begin), list(node.attrs.size)
    ends = [np.iinfo(np.int64).max if s < 0 else b + s for b, s in zip(begin, size)]
    ctx.emit("Slice", [node.inputs[0], ctx.ints(begin), ctx.ints(ends)], node.outputs)


# -- reductions -----------------------------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "prod": "ReduceProd", "log_sum_exp": "ReduceLogSumExp", "norm1": "ReduceL1",
           "norm2": "ReduceL2"}


@exports(*_REDUCE)
def _reduce(ctx, node) -> None:
    onnx_op = _REDUCE[node.op.name]
    dims = node.attrs.dims
    keep = int(bool(node.attrs.keep_dims))
    x = node.inputs[0]
    axes = list(range(ctx.rank(x))) if dims is None else (
        [dims] if isinstance(dims, (int, np.integer)) else list(dims))
    x = ctx.as_dtype(x, ctx.dtype(node.outputs[0]))  # (an int sum widens, a norm is float)
    as_input = ctx.opset >= (13 if onnx_op == "ReduceSum" else 18)
    if as_input:
        ctx.emit(onnx_op, [x, ctx.ints(axes)], node.outputs, keepdims=keep)
    else:
        ctx.emit(onnx_op, [x], node.outputs, axes=[int(a) for a in axes], keepdims=keep)


@exports("argmax", "argmin")
def _arg(ctx, node) -> None:
    dims = node.attrs.dims
    x = node.inputs[0]
    onnx_op = "ArgMax" if node.op.name == "argmax" else "ArgMin"
    if dims is None:  # over the flattened array, then shaped as the result
        (flat,) = ctx.emit("Reshape", [x, ctx.ints([-1])])
        (index,) = ctx.emit(onnx_op, [flat], axis=0, keepdims=0)
        ctx.emit("Reshape", [index, ctx.ints(ctx.shape(node.outputs[0]))], node.outputs)
        return
    else:
        axes = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
        if len(axes) != 1:
            raise ctx.fail(node, "ONNX's ArgMax/ArgMin take one axis")
        axis = int(axes[0])
    ctx.emit(onnx_op, [x], node.outputs, axis=axis, keepdims=int(bool(node.attrs.keep_dims)))


@exports("softmax", "log_softmax")
def _softmax(ctx, node) -> None:
    ctx.emit("Softmax" if node.op.name == "softmax" else "LogSoftmax", node.inputs,
             node.outputs, axis=int(node.attrs.dim))


# -- linear algebra and layers -------------------------------------------------------------

@exports("matmul")
def _matmul(ctx, node) -> None:
    a, b = node.inputs
    attrs = node.attrs

    def swap(name: str) -> str:
        rank = ctx.rank(name)
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        return ctx.emit("Transpose", [name], perm=perm)[0]
    if attrs.transpose_x:
        a = swap(a)
    if attrs.transpose_y:
        b = swap(b)
    if attrs.transpose_result:
        (out,) = ctx.emit("MatMul", [a, b])
        rank = ctx.rank(node.outputs[0])
        ctx.emit("Transpose", [out], node.outputs,
                 perm=list(range(rank - 2)) + [rank - 1, rank - 2])
    else:
        ctx.emit("MatMul", [a, b], node.outputs)


@exports("linear")
def _linear(ctx, node) -> None:
    if len(node.inputs) == 2:
        ctx.emit("MatMul", node.inputs, node.outputs)
        return
    (xw,) = ctx.emit("MatMul", node.inputs[:2])
    ctx.emit("Add", [xw, node.inputs[2]], node.outputs)


@exports("layer_norm")
def _layer_norm(ctx, node) -> None:
    x = node.inputs[0]
    rank = ctx.rank(x)
    dims = sorted(d + rank if d < 0 else d for d in node.attrs.dims)
    if dims != list(range(dims[0], rank)):
        raise ctx.fail(node, "ONNX's LayerNormalization normalizes trailing dims only")
    ctx.emit("LayerNormalization", node.inputs, node.outputs, axis=dims[0],
             epsilon=float(node.attrs.epsilon))


@exports("batch_norm")
def _batch_norm(ctx, node) -> None:
    x, mean, var, gamma, beta = node.inputs
    axis = int(node.attrs.axis)
    rank = ctx.rank(x)
    axis = axis + rank if axis < 0 else axis
    if axis != 1:
        raise ctx.fail(node, "ONNX's BatchNormalization normalizes axis 1 (NCHW) only")
    channels = ctx.shape(x)[1]
    params = []
    for p in (gamma, beta, mean, var):  # ONNX wants 1-D [C] parameters
        if ctx.rank(p) != 1:
            if channels < 0:
                raise ctx.fail(node, "scalar parameters over a run-time channel count")
            (p,) = ctx.emit("Expand", [p, ctx.ints([channels])])
        params.append(p)
    ctx.emit("BatchNormalization", [x, *params], node.outputs,
             epsilon=float(node.attrs.epsilon))


@exports("dropout")
def _dropout(ctx, node) -> None:  # inference form: dropout is the identity
    ctx.emit("Identity", node.inputs, node.outputs)


# -- convolutions and pooling (2-D; channels-last data and HWIO weights transposed) ----------

def _pair(v) -> list[int]:
    return [int(v), int(v)] if isinstance(v, (int, np.integer)) else [int(a) for a in v]


def _window_attrs(ctx, node, padding) -> dict:
    """ONNX's ``pads``/``auto_pad`` for nd4py's padding: ints are symmetric, "same" is
    SAME_UPPER (the odd padding after, as ND4J's and TensorFlow's SAME)."""
    if isinstance(padding, str) and padding == "same":
        return {"auto_pad": "SAME_UPPER"}
    p = _pair(padding)
    return {"pads": p + p}


def _to_nchw(ctx, node, x: str, data_format: str) -> str:
    if data_format.upper() in ("NCHW", "NCW", "NCDHW"):
        return x
    rank = ctx.rank(x)
    return ctx.emit("Transpose", [x], perm=[0, rank - 1, *range(1, rank - 1)])[0]


def _from_nchw(ctx, node, y: str, out: str, data_format: str) -> None:
    if data_format.upper() in ("NCHW", "NCW", "NCDHW"):
        ctx.emit("Identity", [y], [out])
        return
    rank = ctx.rank(out)
    ctx.emit("Transpose", [y], [out], perm=[0, *range(2, rank), 1])


@exports("conv2d")
def _conv2d(ctx, node) -> None:
    a = node.attrs
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    w = node.inputs[1]
    if a.weights_format.upper() == "HWIO":
        (w,) = ctx.emit("Transpose", [w], perm=[3, 2, 0, 1])
    (y,) = ctx.emit("Conv", [x, w, *node.inputs[2:]], strides=_pair(a.stride),
                    dilations=_pair(a.dilation), group=int(a.groups),
                    **_window_attrs(ctx, node, a.padding))
    if a.activation == "relu":
        (y,) = ctx.emit("Relu", [y])
    _from_nchw(ctx, node, y, node.outputs[0], a.data_format)


@exports("max_pooling2d", "avg_pooling2d")
def _pool2d(ctx, node) -> None:
    a = node.attrs
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    extra = {}
    dilation = _pair(a.dilation)
    if node.op.name == "avg_pooling2d":
        if dilation != [1, 1] and ctx.opset < 19:
            raise ctx.fail(node, "a dilated average pooling needs opset 19 or later")
        extra["count_include_pad"] = int(bool(a.count_include_pad))
    if dilation != [1, 1]:
        extra["dilations"] = dilation
    onnx_op = "MaxPool" if node.op.name == "max_pooling2d" else "AveragePool"
    (y,) = ctx.emit(onnx_op, [x], kernel_shape=_pair(a.kernel), strides=_pair(a.stride),
                    **_window_attrs(ctx, node, a.padding), **extra)
    _from_nchw(ctx, node, y, node.outputs[0], a.data_format)


@exports("global_avg_pooling", "global_max_pooling")
def _global_pool(ctx, node) -> None:
    a = node.attrs
    x = _to_nchw(ctx, node, node.inputs[0], a.data_format)
    onnx_op = "GlobalAveragePool" if node.op.name == "global_avg_pooling" else "GlobalMaxPool"
    (y,) = ctx.emit(onnx_op, [x])  # [N, C, 1, ...]
    if a.keep_dims:
        _from_nchw(ctx, node, y, node.outputs[0], a.data_format)
        return
    ctx.emit("Reshape", [y, ctx.ints([0, -1])], node.outputs)  # (0: keep N) -> [N, C]
