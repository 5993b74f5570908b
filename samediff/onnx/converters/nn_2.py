"""ONNX converters, nn family (part 2): the normalizations (Batch/Instance/Layer/Group/RMS,
LRN, LpNormalization, MeanVarianceNormalization), the losses (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss), Attention and RotaryEmbedding -- each composed of table ops, so
every output ONNX defines (stashed statistics, log-probabilities, the QK product) is there.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...ops.indexing import index_to_spec
from ..table import converter


def _c(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype)


def _axes_from(rank: int, axis: int) -> tuple[int, ...]:
    axis = axis + rank if axis < 0 else axis
    return tuple(range(axis, rank))


def _channel_shape(node, x, v):
    """A per-channel [C] parameter as [C, 1, ...] against x's [N, C, ...]."""
    return node.op("reshape", v, shape=(-1,) + (1,) * (node.rank(x) - 2))


def _normalize(node, x, axes, eps: float, dtype):
    """(x - mean) / sqrt(var + eps) over ``axes``, with the mean and 1/sqrt(var + eps)."""
    mean = node.op("mean", x, dims=axes, keep_dims=True)
    centered = node.op("sub", x, mean)
    var = node.op("mean", node.op("square", centered), dims=axes, keep_dims=True)
    inv = node.op("rsqrt", node.op("add", var, _c(eps, dtype)))
    return node.op("mul", centered, inv), mean, inv


# --- normalizations -------------------------------------------------------------------------------

@converter("BatchNormalization", since=(1, 9, 14))
def _batch_norm(node):
    x, scale, bias, mean, var = (node.input(i) for i in range(5))
    eps = float(node.attr("epsilon", 1e-5))
    training = node.opset >= 14 and bool(node.attr("training_mode", 0))
    if not training:
        if node.opset < 14 and any(node.node.output[1:]):
            raise node.fail("training-mode BatchNormalization before opset 14 (the "
                            "statistics outputs) is not supported")
        if node.opset < 9 and not node.attr("spatial", 1):
            # spatial=0: statistics per (channel, position), shaped like one sample
            y = node.op("mul", node.op("sub", x, mean),
                        node.op("rsqrt", node.op("add", var, _c(eps, node.dtype(var)))))
            return node.op("add", node.op("mul", y, scale), bias)
        return node.op("batch_norm", x, mean, var, scale, bias, epsilon=eps, axis=1)
    # training mode: batch statistics, the running ones updated by momentum
    momentum = float(node.attr("momentum", 0.9))
    axes = (0,) + tuple(range(2, node.rank(x)))
    bmean = node.op("mean", x, dims=axes)
    bvar = node.op("variance", x, dims=axes)
    y = node.op("batch_norm", x, bmean, bvar, scale, bias, epsilon=eps, axis=1)
    pdtype = node.dtype(mean)
    run_mean = node.op("add", node.op("mul", mean, _c(momentum, pdtype)),
                       node.op("mul", node.op("cast", bmean, dtype=pdtype),
                               _c(1.0 - momentum, pdtype)))
    run_var = node.op("add", node.op("mul", var, _c(momentum, pdtype)),
                      node.op("mul", node.op("cast", bvar, dtype=pdtype),
                              _c(1.0 - momentum, pdtype)))
    return y, run_mean, run_var


@converter("InstanceNormalization", since=1)
def _instance_norm(node):
    x, scale, bias = node.input(0), node.input(1), node.input(2)
    dtype = node.dtype(x)
    y, _, _ = _normalize(node, x, tuple(range(2, node.rank(x))),
                         float(node.attr("epsilon", 1e-5)), dtype)
    y = node.op("mul", y, _channel_shape(node, x, scale))
    return node.op("add", y, _channel_shape(node, x, bias))


@converter("LayerNormalization", since=17)
def _layer_norm(node):
    x, scale, bias = node.input(0), node.input(1), node.input(2)
    dtype = node.dtype(x)
    axes = _axes_from(node.rank(x), int(node.attr("axis", -1)))
    # stash_type 1: statistics in float32 (float16/bfloat16 inputs are promoted)
    stash = np.float32 if node.attr("stash_type", 1) == 1 and dtype.itemsize < 4 else dtype
    eps = float(node.attr("epsilon", 1e-5))
    if stash == dtype and not any(node.node.output[1:]):
        # only Y (as exporters write it): the table's layer_norm, one fused row kernel in a
        # plan instead of two reductions and five elementwise passes
        gain_bias = (scale,) if bias is None else (scale, bias)
        return node.op("layer_norm", x, *gain_bias, dims=axes, epsilon=eps)
    xs = x if stash == dtype else node.op("cast", x, dtype=stash)
    y, mean, inv = _normalize(node, xs, axes, eps, stash)
    if stash != dtype:
        y = node.op("cast", y, dtype=dtype)
    y = node.op("mul", y, scale)
    if bias is not None:
        y = node.op("add", y, bias)
    return y, mean, inv


@converter("RMSNormalization", since=23)
def _rms_norm(node):
    x, scale = node.input(0), node.input(1)
    dtype = node.dtype(x)
    axes = _axes_from(node.rank(x), int(node.attr("axis", -1)))
    eps = float(node.attr("epsilon", 1e-5))
    ms = node.op("mean", node.op("square", x), dims=axes, keep_dims=True)
    y = node.op("mul", x, node.op("rsqrt", node.op("add", ms, _c(eps, dtype))))
    return node.op("mul", y, scale)


@converter("GroupNormalization", since=(18, 21))
def _group_norm(node):
    x, scale, bias = node.input(0), node.input(1), node.input(2)
    dtype = node.dtype(x)
    groups = int(node.attr("num_groups"))
    shape = node.shape(x)
    if any(d < 0 for d in shape[1:]):
        raise node.fail("GroupNormalization needs every dim but the batch known at import")
    grouped = node.op("reshape", x, shape=(shape[0], groups, math.prod(shape[1:]) // groups))
    y, _, _ = _normalize(node, grouped, (2,), float(node.attr("epsilon", 1e-5)), dtype)
    y = node.op("reshape", y, shape=tuple(shape))
    if node.opset < 21:  # scale and bias per group: each repeated over its channels
        per = shape[1] // groups
        scale = node.op("repeat", scale, repeats=per, axis=0)
        bias = node.op("repeat", bias, repeats=per, axis=0)
    y = node.op("mul", y, _channel_shape(node, x, scale))
    return node.op("add", y, _channel_shape(node, x, bias))


@converter("LRN", since=1)
def _lrn(node):
    x = node.input(0)
    size = int(node.attr("size"))
    if size % 2 == 0:
        raise node.fail("LRN with an even size (an asymmetric window) is not supported")
    alpha = float(node.attr("alpha", 1e-4))
    return node.op("local_response_normalization", x, alpha=alpha / size,
                   beta=float(node.attr("beta", 0.75)), bias=float(node.attr("bias", 1.0)),
                   depth=(size - 1) // 2)


@converter("LpNormalization", since=1)
def _lp_norm(node):
    x = node.input(0)
    axis = int(node.attr("axis", -1))
    axis = axis + node.rank(x) if axis < 0 else axis
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise node.fail(f"LpNormalization p must be 1 or 2, got {p}")
    norm = node.op("norm1" if p == 1 else "norm2", x, dims=(axis,), keep_dims=True)
    zero = _c(0, node.dtype(x))
    # a zero vector stays zero (not 0/0 = NaN), as ONNX's reference
    return node.op("where", node.op("eq", norm, zero), zero, node.op("div", x, norm))


@converter("MeanVarianceNormalization", since=9)
def _mvn(node):
    x = node.input(0)
    dtype = node.dtype(x)
    axes = tuple(int(a) % node.rank(x) for a in (node.attr("axes") or [0, 2, 3]))
    mean = node.op("mean", x, dims=axes, keep_dims=True)
    centered = node.op("sub", x, mean)
    var = node.op("sub", node.op("mean", node.op("square", x), dims=axes, keep_dims=True),
                  node.op("square", mean))
    # (ONNX's function body divides by sqrt(var) + 1e-9)
    return node.op("div", centered, node.op("add", node.op("sqrt", var), _c(1e-9, dtype)))


# --- losses ----------------------------------------------------------------------------------

def _nll(node, logp, target, weight, reduction: str, ignore):
    """ONNX NegativeLogLikelihoodLoss of log-probabilities ``logp`` [N, C, d...]."""
    dtype = node.dtype(logp)
    classes = node.shape(logp)[1]
    if classes < 0:
        raise node.fail("the number of classes must be known at import")
    tdtype = node.dtype(target)
    if ignore is not None:
        keep = node.op("neq", target, _c(ignore, tdtype))
        safe = node.op("where", keep, target, _c(0, tdtype))
    else:
        keep, safe = None, target
    hot = node.op("one_hot", safe, depth=classes, axis=1, dtype=dtype)
    picked = node.op("neg", node.op("sum", node.op("mul", hot, logp), dims=(1,)))
    if weight is not None:
        w = node.op("gather", weight, safe, axis=0)
    else:
        w = None
    if keep is not None:
        kf = node.op("cast", keep, dtype=dtype)
        w = kf if w is None else node.op("mul", w, kf)
    loss = picked if w is None else node.op("mul", picked, w)
    if reduction == "none":
        return loss
    total = node.op("sum", loss)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise node.fail(f"unknown reduction {reduction!r}")
    if w is None:
        shape = node.shape(target)
        if any(d < 0 for d in shape):
            return node.op("mean", loss)
        return node.op("div", total, _c(math.prod(shape), dtype))
    return node.op("div", total, node.op("sum", w))


@converter("NegativeLogLikelihoodLoss", since=12)
def _nll_loss(node):
    return _nll(node, node.input(0), node.input(1), node.input(2),
                node.attr("reduction", "mean"), node.attr("ignore_index"))


@converter("SoftmaxCrossEntropyLoss", since=12)
def _sce_loss(node):
    scores = node.input(0)
    logp = node.op("log_softmax", scores, dim=1)
    loss = _nll(node, logp, node.input(1), node.input(2), node.attr("reduction", "mean"),
                node.attr("ignore_index"))
    return (loss, logp) if node.num_outputs > 1 else loss


# --- Attention ---------------------------------------------------------------------------------

def _heads(node, v, heads: int):
    """[B, S, heads * h] -> [B, heads, S, h]."""
    b, s, hidden = node.shape(v)
    if sum(d < 0 for d in (b, s, hidden)) > 1:
        raise node.fail("3-D Attention inputs need all but one of batch, sequence length "
                        "and hidden size known at import")
    head = hidden // heads if hidden >= 0 else -1
    return node.op("permute", node.op("reshape", v, shape=(b, s, heads, head)),
                   dims=(0, 2, 1, 3))


def _neg_inf_where(node, allowed, dtype):
    """0 where ``allowed``, -inf elsewhere, as ``dtype``."""
    return node.op("where", allowed, _c(0, dtype), _c(-np.inf, dtype))


def _add(node, a, b):
    return b if a is None else node.op("add", a, b)


@converter("Attention", since=(23, 25))
def _attention(node):
    q, k, v = node.input(0), node.input(1), node.input(2)
    mask, past_k, past_v = node.input(3), node.input(4), node.input(5)
    nonpad = node.input(6)
    dtype = node.dtype(q)
    three_d = node.rank(q) == 3
    if three_d:
        qh, kvh = int(node.attr("q_num_heads", 0)), int(node.attr("kv_num_heads", 0))
        if not qh or not kvh:
            raise node.fail("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(node, q, qh), _heads(node, k, kvh), _heads(node, v, kvh)
    if (past_k is None) != (past_v is None):
        raise node.fail("past_key and past_value must be given together")
    if past_k is not None:
        k = node.op("concat", past_k, k, axis=2)
        v = node.op("concat", past_v, v, axis=2)
    present_k, present_v = k, v
    sq, sk = node.shape(q)[2], node.shape(k)[2]
    if sq < 0 or sk < 0:
        raise node.fail("Attention needs static query and key sequence lengths")
    qh, kvh = node.shape(q)[1], node.shape(k)[1]
    if qh != kvh:  # GQA/MQA: each key/value head serves q_heads / kv_heads query heads
        if qh < 0 or kvh < 0 or qh % kvh:
            raise node.fail(f"{qh} query heads do not group over {kvh} key/value heads")
        k = node.op("repeat", k, repeats=qh // kvh, axis=1)
        v = node.op("repeat", v, repeats=qh // kvh, axis=1)

    scale = node.attr("scale")
    scale = 1.0 / math.sqrt(node.shape(q)[3]) if scale is None else float(scale)
    softcap = float(node.attr("softcap", 0.0))
    left, right = int(node.attr("left_window_size", -1)), int(node.attr("right_window_size", -1))
    want_qk = node.num_outputs > 3 and bool(node.node.output[3])
    if (mask is None and nonpad is None and softcap <= 0 and left < 0 and right < 0
            and not want_qk and node.attr("softmax_precision") is None
            and dtype.itemsize >= 4  # (float16: the composed path rounds as ONNX does)
            and (past_k is None or not node.attr("is_causal", 0))):
        # the table's blocked kernel (never an L x S score matrix per head); its causal
        # mask is top-left aligned, ONNX's too when there is no cache offset
        y = node.op("scaled_dot_product_attention", q, k, v,
                    is_causal=bool(node.attr("is_causal", 0)), scale=scale)
        return _attention_out(node, y, three_d, sq), present_k, present_v, None

    # the additive bias: the mask, the causal frontier, the window, the padding
    bias = None
    if mask is not None:
        if node.dtype(mask) == np.bool_:
            mask = _neg_inf_where(node, mask, dtype)
        short = sk - node.shape(mask)[-1]
        if short > 0:  # a mask shorter than the cache: the rest is masked out
            mask = node.op("pad", mask, paddings=((0, 0),) * (node.rank(mask) - 1) + ((0, short),),
                           constant=-np.inf)
        bias = mask
    if nonpad is not None and past_k is None:
        offset = node.op("reshape", node.op("sub", node.op("cast", nonpad, dtype=np.int64),
                                            _c(sq, np.int64)), shape=(-1, 1, 1, 1))
    else:
        offset = _c(node.shape(past_k)[2] if past_k is not None else 0, np.int64)
    qi = np.arange(sq, dtype=np.int64).reshape(sq, 1)
    kj = np.arange(sk, dtype=np.int64).reshape(1, sk)
    pos = node.op("add", qi, offset)  # absolute query positions
    if node.attr("is_causal", 0):
        bias = _add(node, bias, _neg_inf_where(node, node.op("lte", kj, pos), dtype))
    if left >= 0 or right >= 0:
        diff = node.op("sub", pos, kj)
        allowed = None
        if left >= 0:
            allowed = node.op("lte", diff, _c(left, np.int64))
        if right >= 0:
            r = node.op("lte", node.op("neg", diff), _c(right, np.int64))
            allowed = r if allowed is None else node.op("logical_and", allowed, r)
        bias = _add(node, bias, _neg_inf_where(node, allowed, dtype))
    if nonpad is not None:
        valid = node.op("lt", kj.reshape(1, 1, 1, sk),
                        node.op("reshape", node.op("cast", nonpad, dtype=np.int64),
                                shape=(-1, 1, 1, 1)))
        bias = _add(node, bias, _neg_inf_where(node, valid, dtype))

    root = _c(math.sqrt(scale), dtype)  # Q and K each scaled by sqrt(scale), as ONNX
    qk = node.op("matmul", node.op("mul", q, root), node.op("mul", k, root), transpose_y=True)
    if softcap > 0:
        qk = node.op("mul", node.op("tanh", node.op("div", qk, _c(softcap, dtype))),
                     _c(softcap, dtype))
    mode = int(node.attr("qk_matmul_output_mode", 0))
    scores = qk if bias is None else node.op("add", qk, bias)
    qk_out = scores if mode == 2 else qk
    precision = node.attr("softmax_precision")
    if precision is not None:
        from ..dtypes import np_dtype
        scores = node.op("cast", scores, dtype=np_dtype(int(precision)))
    probs = node.op("softmax", scores, dim=-1)
    if bias is not None:  # a row with every key masked out gives zeros, not NaN
        dead = node.op("eq", node.op("max", bias, dims=(-1,), keep_dims=True),
                       _c(-np.inf, node.dtype(bias)))
        probs = node.op("where", dead, _c(0, node.dtype(probs)), probs)
    if node.dtype(probs) != dtype:
        probs = node.op("cast", probs, dtype=dtype)
    if mode == 3:
        qk_out = probs
    y = _attention_out(node, node.op("matmul", probs, v), three_d, sq)
    return y, present_k, present_v, qk_out


def _attention_out(node, y, three_d: bool, sq: int):
    """[B, H, S, h] -> [B, S, H * h] for 3-D inputs."""
    if not three_d:
        return y
    b, h, _, vh = node.shape(y)
    return node.op("reshape", node.op("permute", y, dims=(0, 2, 1, 3)),
                   shape=(b, sq, h * vh if h >= 0 and vh >= 0 else -1))


# --- RotaryEmbedding -----------------------------------------------------------------------------

@converter("RotaryEmbedding", since=23)
def _rotary(node):
    x, cos, sin, pos = node.input(0), node.input(1), node.input(2), node.input(3)
    shape = node.shape(x)
    four_d = len(shape) == 4
    if four_d:  # [B, H, S, h] -> [B, S, H, h]
        x = node.op("permute", x, dims=(0, 2, 1, 3))
    else:
        heads = int(node.attr("num_heads", 0))
        if not heads:
            raise node.fail("3-D input needs num_heads")
        if sum(d < 0 for d in shape) > 1:
            raise node.fail("3-D input with more than one run-time dim")
        x = node.op("reshape", x, shape=(shape[0], shape[1], heads,
                                         shape[2] // heads if shape[2] >= 0 else -1))
    head = node.shape(x)[3]
    rot = int(node.attr("rotary_embedding_dim", 0)) or head
    if pos is not None:  # caches indexed by position: [B, S, rot/2]
        cos = node.op("gather", cos, pos, axis=0)
        sin = node.op("gather", sin, pos, axis=0)
    cos = node.op("expand_dims", cos, axis=-2)
    sin = node.op("expand_dims", sin, axis=-2)

    def part(lo, hi, step=None):
        index = (Ellipsis, slice(lo, hi, step))
        return node.op("strided_slice", x, index=index_to_spec(index))

    if node.attr("interleaved", 0):
        x1, x2 = part(0, rot, 2), part(1, rot, 2)
    else:
        x1, x2 = part(0, rot // 2), part(rot // 2, rot)
    real = node.op("sub", node.op("mul", cos, x1), node.op("mul", sin, x2))
    imag = node.op("add", node.op("mul", sin, x1), node.op("mul", cos, x2))
    if node.attr("interleaved", 0):  # pairs (real, imag) back in place
        s = node.shape(real)
        rotated = node.op("reshape", node.op("stack", real, imag, axis=-1),
                          shape=tuple(s[:-1]) + (rot,))
    else:
        rotated = node.op("concat", real, imag, axis=-1)
    if rot < head:
        rotated = node.op("concat", rotated, part(rot, None), axis=-1)
    if four_d:
        return node.op("permute", rotated, dims=(0, 2, 1, 3))
    return node.op("reshape", rotated, shape=tuple(shape))


# --- the opset-27 recurrent-state ops ----------------------------------------------------------

@converter("CausalConvWithState", since=27)
def _causal_conv(node):
    x, w, b, past = node.input(0), node.input(1), node.input(2), node.input(3)
    dtype = node.dtype(x)
    k = node.shape(w)[2]
    channels = node.shape(x)[1]
    if k < 0 or channels < 0:
        raise node.fail("the kernel size and channels must be known at import")
    act = node.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise node.fail(f"unknown activation {act!r}")
    if past is None:  # zeros before the sequence
        padded = node.op("pad", x, paddings=((0, 0), (0, 0), (k - 1, 0)), constant=0.0)
    else:
        padded = node.op("concat", past, x, axis=2)
    f = np.float32 if dtype.itemsize < 4 else dtype  # float16 products summed in float32
    cast = (lambda v: v) if f == dtype else (lambda v: node.op("cast", v, dtype=f))
    y = node.op("conv1d", *[cast(v) for v in (padded, w, b) if v is not None],
                groups=channels, weights_format="OIW")
    if f != dtype:
        y = node.op("cast", y, dtype=dtype)
    if act != "none":  # SiLU, computed in float32 as ONNX's reference
        yf = node.op("cast", y, dtype=np.float32)
        y = node.op("cast", node.op("mul", yf, node.op("sigmoid", yf)), dtype=dtype)
    # the carry: the last k - 1 positions of the padded sequence
    index = (slice(None), slice(None), slice(-(k - 1) if k > 1 else None, None if k > 1 else 0))
    return y, node.op("strided_slice", padded, index=index_to_spec(index))


def _unpack(node, v, heads: int):
    """[B, T, heads * d] -> [B, heads, T, d] (float32)."""
    b, t, hd = node.shape(v)
    v = node.op("reshape", v, shape=(b, t, heads, hd // heads if hd >= 0 else -1))
    return node.op("cast", node.op("permute", v, dims=(0, 2, 1, 3)), dtype=np.float32)


@converter("LinearAttention", since=27)
def _linear_attention(node):
    q, k, v, past, decay, beta = (node.input(i) for i in range(6))
    rule = node.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise node.fail(f"unknown update_rule {rule!r}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise node.fail(f"update_rule {rule!r} needs decay {'given' if gating else 'absent'} "
                        f"and beta {'given' if delta else 'absent'}")
    qh, kvh = int(node.attr("q_num_heads", 0)), int(node.attr("kv_num_heads", 0))
    if qh <= 0 or kvh <= 0 or qh % kvh:
        raise node.fail(f"q_num_heads ({qh}) must be a positive multiple of kv_num_heads "
                        f"({kvh})")
    dtype = node.dtype(q)
    b, t, qhd = node.shape(q)
    vhd = node.shape(v)[2]
    if t < 0 or qhd < 0 or vhd < 0:
        raise node.fail("the sequence length and hidden sizes must be known at import")
    dk, dv = qhd // qh, vhd // kvh
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(dk)
    q4, k4, v4 = _unpack(node, q, qh), _unpack(node, k, kvh), _unpack(node, v, kvh)
    if gating:  # per key dim or per head: [B, H, T, dk | 1]
        last = node.shape(decay)[2]
        g4 = _unpack(node, decay, kvh) if last != kvh else node.op(
            "cast", node.op("permute", node.op("reshape", decay, shape=(b, t, kvh, 1)),
                            dims=(0, 2, 1, 3)), dtype=np.float32)
    if delta:
        last = node.shape(beta)[2]
        be4 = node.op("cast", node.op("permute", node.op("reshape", beta,
                                                         shape=(b, t, last, 1)),
                                      dims=(0, 2, 1, 3)), dtype=np.float32)
    state = (node.op("cast", past, dtype=np.float32) if past is not None else None)
    state_dtype = node.dtype(past) if past is not None else dtype

    def step(v4d, i):
        return node.op("strided_slice", v4d,
                       index=index_to_spec((slice(None), slice(None), slice(i, i + 1))))

    outs = []
    for i in range(t):  # the recurrence, one token at a time (T is static)
        kt, vt = step(k4, i), step(v4, i)          # [B, Hkv, 1, dk], [B, Hkv, 1, dv]
        if state is not None and gating:
            decay_t = node.op("exp", node.op("permute", step(g4, i), dims=(0, 1, 3, 2)))
            state = node.op("mul", state, decay_t)
        if delta:  # (from a zero state nothing is retrieved)
            if state is not None:
                vt = node.op("sub", vt, node.op("matmul", kt, state))  # [B, Hkv, 1, dv]
            vt = node.op("mul", step(be4, i), vt)
        outer = node.op("mul", node.op("permute", kt, dims=(0, 1, 3, 2)), vt)
        state = outer if state is None else node.op("add", state, outer)
        read = state if qh == kvh else node.op("repeat", state, repeats=qh // kvh, axis=1)
        outs.append(node.op("matmul", step(q4, i), read))
    y = node.op("concat", *outs, axis=2) if len(outs) > 1 else outs[0]
    y = node.op("mul", y, _c(scale, np.float32))
    y = node.op("reshape", node.op("permute", y, dims=(0, 2, 1, 3)), shape=(b, t, qh * dv))
    return node.op("cast", y, dtype=dtype), node.op("cast", state, dtype=state_dtype)


# --- GridSample, AffineGrid --------------------------------------------------------------------

def batch_base(node, like, n: int, per: int, rank: int):
    """``b * per`` for each batch entry b, shaped [N, 1, ...] (``rank`` dims), to index rows
    of a [N * per, C] table; a run-time batch (``n`` = -1) counts along ``like``'s axis 0."""
    if n >= 0:
        return (np.arange(n, dtype=np.int64) * per).reshape((n,) + (1,) * (rank - 1))
    ones = node.op("ones_like", like, dtype=np.int64)
    index = node.op("sub", node.op("cumsum", ones, axis=0), _c(1, np.int64))
    return node.op("mul", index, _c(per, np.int64))

def _reflect(node, v, lo: float, hi: float):
    """``v`` folded back into [lo, hi] by mirror reflections (any number of them)."""
    dtype = node.dtype(v)
    span = _c(hi - lo, dtype)
    below = node.op("lt", v, _c(lo, dtype))
    dx = node.op("where", below, node.op("sub", _c(lo, dtype), v),
                 node.op("sub", v, _c(hi, dtype)))
    folds = node.op("floor", node.op("div", dx, span))
    r = node.op("sub", dx, node.op("mul", folds, span))
    even = node.op("eq", node.op("floor_mod", folds, _c(2, dtype)), _c(0, dtype))
    from_lo, from_hi = node.op("add", _c(lo, dtype), r), node.op("sub", _c(hi, dtype), r)
    folded = node.op("where", below, node.op("where", even, from_lo, from_hi),
                     node.op("where", even, from_hi, from_lo))
    outside = node.op("logical_or", below, node.op("gt", v, _c(hi, dtype)))
    return node.op("where", outside, folded, v)


def _cubic_weights(node, t):
    """Keys' cubic convolution weights (a = -0.75) of the 4 taps around fraction ``t``."""
    dtype = node.dtype(t)
    a = -0.75

    def near(d):  # |d| <= 1
        return node.op("add", node.op("mul", node.op("mul", node.op("sub", node.op(
            "mul", _c(a + 2, dtype), d), _c(a + 3, dtype)), d), d), _c(1.0, dtype))

    def far(d):  # 1 < |d| < 2
        inner = node.op("add", node.op("mul", node.op("sub", node.op("mul", _c(a, dtype), d),
                                                      _c(5 * a, dtype)), d), _c(8 * a, dtype))
        return node.op("sub", node.op("mul", inner, d), _c(4 * a, dtype))

    one, two = _c(1.0, dtype), _c(2.0, dtype)
    return [far(node.op("add", t, one)), near(t), near(node.op("sub", one, t)),
            far(node.op("sub", two, t))]


@converter("GridSample", since=(16, 20))
def _grid_sample(node):
    x, grid = node.input(0), node.input(1)
    shape = node.shape(x)
    d = len(shape) - 2
    if any(s < 0 for s in shape[1:]):
        raise node.fail("GridSample needs the input's channels and spatial sizes known at "
                        "import")
    mode = node.attr("mode", "bilinear" if node.opset < 20 else "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    pad_mode = node.attr("padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or pad_mode not in ("zeros", "border",
                                                                      "reflection"):
        raise node.fail(f"mode {mode!r} / padding_mode {pad_mode!r} is not supported")
    dtype = node.dtype(x)
    n_, c, sizes = shape[0], shape[1], shape[2:]
    # per spatial axis: the continuous position, padded as padding_mode says
    taps_per_axis = []
    for i, size in enumerate(sizes):
        g = node.op("strided_slice", grid, index=index_to_spec((Ellipsis, d - 1 - i)))
        g = node.op("cast", g, dtype=dtype)
        pos = (node.op("mul", node.op("add", g, _c(1, dtype)), _c((size - 1) / 2.0, dtype))
               if align else node.op("div", node.op("sub", node.op("mul", node.op(
                   "add", g, _c(1, dtype)), _c(size, dtype)), _c(1, dtype)), _c(2, dtype)))
        if mode == "nearest":
            pos = node.op("round_half_even", pos)  # half to even, as numpy's rint
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if pad_mode == "border":
            pos = node.op("minimum", node.op("maximum", pos, _c(0, dtype)), _c(size - 1, dtype))
        elif pad_mode == "reflection":
            pos = _reflect(node, pos, lo, hi)
        if mode == "nearest":
            taps = [(pos, None)]
        else:
            base = node.op("floor", pos)
            t = node.op("sub", pos, base)
            if mode == "linear":
                offs, weights = (0, 1), [node.op("sub", _c(1, dtype), t), t]
            else:
                offs, weights = (-1, 0, 1, 2), _cubic_weights(node, t)
            taps = [(node.op("add", base, _c(o, dtype)), w) for o, w in zip(offs, weights)]
        resolved = []
        for idx, w in taps:  # each tap's pixel index, as padding_mode reads off the image
            if pad_mode == "border":
                idx = node.op("minimum", node.op("maximum", idx, _c(0, dtype)),
                              _c(size - 1, dtype))
            elif pad_mode == "reflection":
                idx = _reflect(node, idx, lo, hi)
            idx = node.op("cast", idx, dtype=np.int64)  # (truncates, as ONNX's reference)
            valid = None
            if pad_mode == "zeros":
                valid = node.op("logical_and", node.op("gte", idx, _c(0, np.int64)),
                                node.op("lt", idx, _c(size, np.int64)))
                idx = node.op("where", valid, idx, _c(0, np.int64))
            resolved.append((idx, w, valid))
        taps_per_axis.append(resolved)
    # every combination of the axes' taps: a gather from the image's rows, weighted
    table = node.op("reshape", node.op("permute", x, dims=(0, *range(2, d + 2), 1)),
                    shape=(-1, c))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(d)]
    out_rank = node.rank(grid) - 1
    like = node.op("strided_slice", grid, index=index_to_spec((Ellipsis, 0)))
    nbase = batch_base(node, like, n_, int(np.prod(sizes)), out_rank)
    total = None
    for combo in itertools.product(*taps_per_axis):
        flat, weight, valid = nbase, None, None
        for (idx, w, ok), stride in zip(combo, strides):
            flat = node.op("add", flat, node.op("mul", idx, _c(stride, np.int64)))
            if w is not None:
                weight = w if weight is None else node.op("mul", weight, w)
            if ok is not None:
                valid = ok if valid is None else node.op("logical_and", valid, ok)
        if valid is not None:
            zero = _c(0, dtype)
            weight = node.op("where", valid, _c(1, dtype) if weight is None else weight, zero)
        v = node.op("gather", table, flat, axis=0)  # [N, out..., C]
        if weight is not None:
            v = node.op("mul", v, node.op("expand_dims", weight, axis=-1))
        total = v if total is None else node.op("add", total, v)
    return node.op("permute", total, dims=(0, out_rank, *range(1, out_rank)))


@converter("AffineGrid", since=20)
def _affine_grid(node):
    theta = node.input(0)
    size = node.static_ints(1, "size")
    align = bool(node.attr("align_corners", 0))
    dtype = node.dtype(theta)
    spatial = size[2:]
    d = len(spatial)

    def axis_coords(n):
        if align:
            return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return (2.0 * np.arange(n) + 1.0) / n - 1.0

    # the base grid: (x, y[, z], 1) per position, x along the last spatial axis
    mesh = np.meshgrid(*[axis_coords(n) for n in spatial], indexing="ij")
    base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=0)
    out = node.op("matmul", theta, base.astype(dtype))  # [N, d, positions]
    return node.op("reshape", node.op("permute", out, dims=(0, 2, 1)),
                   shape=(size[0], *spatial, d))


@converter("RoiAlign", since=(10, 16))
def _roi_align(node):
    x, rois, batch = node.input(0), node.input(1), node.input(2)
    shape = node.shape(x)
    if len(shape) != 4 or any(s < 0 for s in shape[1:]):
        raise node.fail("RoiAlign needs 4-D data with channels and spatial sizes known at "
                        "import")
    _, c, H, W = shape
    oh, ow = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    g = int(node.attr("sampling_ratio", 0))
    if g <= 0:
        raise node.fail("sampling_ratio 0 (a sampling grid per RoI from its run-time size) "
                        "is not supported; give a positive sampling_ratio")
    mode = node.attr("mode", "avg")
    # opset 16 added half_pixel (the default since); opset 10 is output_half_pixel
    ctm = node.attr("coordinate_transformation_mode",
                    "half_pixel" if node.opset >= 16 else "output_half_pixel")
    half = ctm == "half_pixel"
    scale = float(node.attr("spatial_scale", 1.0))
    dtype = node.dtype(x)

    def corner(i):  # one RoI coordinate, scaled and shifted: [R, 1, 1]
        v = node.op("strided_slice", rois, index=index_to_spec((slice(None), slice(i, i + 1))))
        v = node.op("mul", node.op("reshape", v, shape=(-1, 1, 1)), _c(scale, dtype))
        return node.op("sub", v, _c(0.5, dtype)) if half else v

    x0, y0, x1, y1 = corner(0), corner(1), corner(2), corner(3)
    rw, rh = node.op("sub", x1, x0), node.op("sub", y1, y0)
    if not half:  # (a RoI is at least one pixel)
        rw, rh = node.op("maximum", rw, _c(1, dtype)), node.op("maximum", rh, _c(1, dtype))
    # the sample points: g x g per output bin, at the centres of its sub-cells
    fy = (np.repeat(np.arange(oh), g) + np.tile((np.arange(g) + 0.5) / g, oh)) / oh
    fx = (np.repeat(np.arange(ow), g) + np.tile((np.arange(g) + 0.5) / g, ow)) / ow
    ys = node.op("add", y0, node.op("mul", rh, fy.reshape(1, -1, 1).astype(dtype)))
    xs = node.op("add", x0, node.op("mul", rw, fx.reshape(1, 1, -1).astype(dtype)))
    ys = node.op("add", ys, node.op("zeros_like", xs))  # both [R, oh*g, ow*g]
    xs = node.op("add", xs, node.op("zeros_like", ys))
    off = node.op("logical_or",
                  node.op("logical_or", node.op("lt", ys, _c(-1, dtype)),
                          node.op("gt", ys, _c(H, dtype))),
                  node.op("logical_or", node.op("lt", xs, _c(-1, dtype)),
                          node.op("gt", xs, _c(W, dtype))))

    def axis(v, size):  # low/high pixel and the fraction past low, clamped as ONNX's
        v = node.op("maximum", v, _c(0, dtype))
        low = node.op("floor", v)
        edge = node.op("gte", low, _c(size - 1, dtype))
        low = node.op("where", edge, _c(size - 1, dtype), low)
        v = node.op("where", edge, low, v)
        high = node.op("where", edge, low, node.op("add", low, _c(1, dtype)))
        return (node.op("cast", low, dtype=np.int64), node.op("cast", high, dtype=np.int64),
                node.op("sub", v, low))

    ylo, yhi, ly = axis(ys, H)
    xlo, xhi, lx = axis(xs, W)
    hy, hx = node.op("sub", _c(1, dtype), ly), node.op("sub", _c(1, dtype), lx)
    table = node.op("reshape", node.op("permute", x, dims=(0, 2, 3, 1)), shape=(-1, c))
    base = node.op("reshape", node.op("mul", node.op("cast", batch, dtype=np.int64),
                                      _c(H * W, np.int64)), shape=(-1, 1, 1))
    terms = []
    for yi, xi, wy, wx in ((ylo, xlo, hy, hx), (ylo, xhi, hy, lx), (yhi, xlo, ly, hx),
                           (yhi, xhi, ly, lx)):
        flat = node.op("add", base, node.op("add", node.op("mul", yi, _c(W, np.int64)), xi))
        w = node.op("where", off, _c(0, dtype), node.op("mul", wy, wx))
        terms.append(node.op("mul", node.op("gather", table, flat, axis=0),
                             node.op("expand_dims", w, axis=-1)))
    if mode == "avg":
        samples = node.op("add", node.op("add", terms[0], terms[1]),
                          node.op("add", terms[2], terms[3]))
    elif mode == "max":  # (ONNX's max: of the weighted corner values, then of the samples)
        samples = node.op("maximum", node.op("maximum", terms[0], terms[1]),
                          node.op("maximum", terms[2], terms[3]))
    else:
        raise node.fail(f"unknown mode {mode!r}")
    bins = node.op("reshape", samples, shape=(-1, oh, g, ow, g, c))
    pooled = node.op("mean" if mode == "avg" else "max", bins, dims=(2, 4))
    return node.op("permute", pooled, dims=(0, 3, 1, 2))
