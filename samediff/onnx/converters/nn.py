"""ONNX converters, nn family (part 1): MatMul, Gemm, Conv, ConvTranspose, the pooling ops,
Dropout. Normalizations, losses, Attention and RotaryEmbedding are in ``nn_2.py``.

ONNX's N-D convolution/pooling attributes (``pads`` as all begins then all ends, ``auto_pad``,
``ceil_mode``) are resolved here into explicit per-axis (begin, end) paddings; symmetric ones go
to the table ops' ``padding``, asymmetric ones become a ``pad`` op in front.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ...ops.indexing import index_to_spec
from ..table import converter
from .elementwise import FLOAT8, saturating_cast

# --- MatMul, Gemm ------------------------------------------------------------------------------

@converter("MatMul", since=1)
def _matmul(node):
    # numpy matmul semantics (1-D operands, broadcast batch dims) are the table op's own
    return node.op("matmul", node.input(0), node.input(1))


@converter("Gemm", since=1)
def _gemm(node):
    a, b, c = node.input(0), node.input(1), node.input(2)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    # (one entry serves every opset: before 7, C had the output's shape unless broadcast=1,
    # and before 11 it was required -- numpy broadcasting below covers every valid model)
    dtype = node.dtype(a)
    y = node.op("matmul", a, b, transpose_x=bool(node.attr("transA", 0)),
                transpose_y=bool(node.attr("transB", 0)))
    if alpha != 1.0:
        y = node.op("mul", y, np.asarray(alpha, dtype))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = node.op("mul", c, np.asarray(beta, dtype))
        y = node.op("add", y, c)
    return y


# --- shared geometry ---------------------------------------------------------------------------

def _spatial(node, x) -> tuple[int, ...]:
    shape = node.shape(x)
    return tuple(shape[2:])


def _explicit_pads(node, sizes, kernel, strides, dilations) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial axis from ``pads``/``auto_pad`` (needs the input's
    spatial sizes only for SAME_*)."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if any(s < 0 for s in sizes) and any(s != 1 for s in strides):
            raise node.fail(f"auto_pad={auto} with strides over run-time spatial sizes is "
                            f"not supported")
        out = []
        for i in range(n):
            # (stride 1: (k - 1) * d whatever the size)
            need = ((kernel[i] - 1) * dilations[i] if strides[i] == 1 else
                    (math.ceil(sizes[i] / strides[i]) - 1) * strides[i]
                    + (kernel[i] - 1) * dilations[i] + 1 - sizes[i])
            need = max(0, need)
            small = need // 2
            # SAME_UPPER puts the odd padding at the end, SAME_LOWER at the beginning
            out.append((small, need - small) if auto == "SAME_UPPER" else (need - small, small))
        return out
    if auto == "VALID":
        return [(0, 0)] * n
    if auto not in ("NOTSET", ""):
        raise node.fail(f"unknown auto_pad {auto!r}")
    pads = node.attr("pads") or [0] * (2 * n)
    return [(int(pads[i]), int(pads[i + n])) for i in range(n)]


def _pad_spatial(node, x, pads, value: float = 0.0):
    """``x`` padded on its spatial axes by (begin, end) ``pads`` (identity when all zero)."""
    if all(p == (0, 0) for p in pads):
        return x
    return node.op("pad", x, paddings=((0, 0), (0, 0), *pads), constant=value)


def _window_attrs(node, n: int) -> tuple[list[int], list[int], list[int]]:
    kernel = node.attr("kernel_shape")
    strides = [int(v) for v in (node.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (node.attr("dilations") or [1] * n)]
    return [int(k) for k in kernel], strides, dilations


# --- Conv ----------------------------------------------------------------------------------------

def _conv_call(node, x, w, b, n: int, strides, dilations, padding, groups: int):
    """One table convolution of an ONNX [O, I/g, k...] weights tensor, symmetric padding."""
    if n == 1:
        return node.op("conv1d", *([x, w] + ([b] if b is not None else [])),
                       stride=strides[0], dilation=dilations[0], padding=padding[0],
                       groups=groups, weights_format="OIW")
    if n == 2:
        return node.op("conv2d", *([x, w] + ([b] if b is not None else [])),
                       stride=tuple(strides), dilation=tuple(dilations),
                       padding=tuple(padding), groups=groups, weights_format="OIHW")
    if n == 3:
        if groups == 1:
            return node.op("conv3d", *([x, w] + ([b] if b is not None else [])),
                           stride=tuple(strides), dilation=tuple(dilations),
                           padding=tuple(padding), weights_format="OIDHW")
        # conv3d has no groups: one convolution per channel group, joined on channels
        xs = node.op("split", x, num_or_sizes=groups, axis=1)
        ws = node.op("split", w, num_or_sizes=groups, axis=0)
        bs = node.op("split", b, num_or_sizes=groups, axis=0) if b is not None else [None] * groups
        parts = [_conv_call(node, xg, wg, bg, 3, strides, dilations, padding, 1)
                 for xg, wg, bg in zip(xs, ws, bs)]
        return node.op("concat", *parts, axis=1)
    raise node.fail(f"{n}-D convolution is not supported (1-D, 2-D and 3-D are)")


@converter("Conv", since=1)
def _conv(node):
    x, w, b = node.input(0), node.input(1), node.input(2)
    n = node.rank(x) - 2
    kernel = node.attr("kernel_shape") or list(node.shape(w)[2:])
    if any(k < 0 for k in kernel):
        raise node.fail("a convolution whose kernel size is only known at run time")
    strides = [int(v) for v in (node.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (node.attr("dilations") or [1] * n)]
    pads = _explicit_pads(node, _spatial(node, x), kernel, strides, dilations)
    groups = int(node.attr("group", 1))
    dtype = node.dtype(x)
    if dtype == np.float16:  # float16 products summed in float32 (as numpy's matmul)
        x, w = node.op("cast", x, dtype=np.float32), node.op("cast", w, dtype=np.float32)
        b = None if b is None else node.op("cast", b, dtype=np.float32)
    if all(p0 == p1 for p0, p1 in pads):
        padding = [p0 for p0, _ in pads]
    else:
        x, padding = _pad_spatial(node, x, pads), [0] * n
    y = _conv_call(node, x, w, b, n, strides, dilations, padding, groups)
    return y if dtype != np.float16 else node.op("cast", y, dtype=dtype)


@converter("ConvInteger", since=10)
def _conv_integer(node):
    x, w = node.input(0), node.input(1)
    xz, wz = node.input(2), node.input(3)
    n = node.rank(x) - 2
    kernel = node.attr("kernel_shape") or list(node.shape(w)[2:])
    strides = [int(v) for v in (node.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (node.attr("dilations") or [1] * n)]
    pads = _explicit_pads(node, _spatial(node, x), kernel, strides, dilations)
    xf, wf = node.op("cast", x, dtype=np.float64), node.op("cast", w, dtype=np.float64)
    if xz is not None:
        xf = node.op("sub", xf, node.op("cast", xz, dtype=np.float64))
    if wz is not None:
        wz = node.op("cast", wz, dtype=np.float64)
        if node.rank(wz) == 1:  # one zero point per output channel
            wz = node.op("reshape", wz, shape=(-1,) + (1,) * (n + 1))
        wf = node.op("sub", wf, wz)
    # the padding holds the zero point, i.e. 0 after the shift above
    xf = _pad_spatial(node, xf, pads)
    y = _conv_call(node, xf, wf, None, n, strides, dilations, [0] * n,
                   int(node.attr("group", 1)))
    return node.op("cast", node.op("round_half_even", y), dtype=np.int32)


def _bilinear(node, table, h, w, size: tuple[int, int], base):
    """Rows of ``table`` ([N * H * W, C], the image's positions) sampled bilinearly at
    fractional positions ``h``, ``w`` ([N, oH, oW]); positions off the image read 0
    (GridSample with align_corners=1 and zero padding): [N, oH, oW, C]."""
    H, W = size
    dtype = node.dtype(h)
    h0, w0 = node.op("floor", h), node.op("floor", w)
    fh, fw = node.op("sub", h, h0), node.op("sub", w, w0)
    one = np.ones((), dtype)
    out = None
    for dh, dw in ((0, 0), (0, 1), (1, 0), (1, 1)):
        hh = node.op("add", h0, np.asarray(dh, dtype))
        ww = node.op("add", w0, np.asarray(dw, dtype))
        weight = node.op("mul", fh if dh else node.op("sub", one, fh),
                         fw if dw else node.op("sub", one, fw))
        inside = node.op("logical_and",
                         node.op("logical_and", node.op("gte", hh, np.zeros((), dtype)),
                                 node.op("lte", hh, np.asarray(H - 1, dtype))),
                         node.op("logical_and", node.op("gte", ww, np.zeros((), dtype)),
                                 node.op("lte", ww, np.asarray(W - 1, dtype))))
        weight = node.op("where", inside, weight, np.zeros((), dtype))
        hi = node.op("cast", node.op("minimum", node.op("maximum", hh, np.zeros((), dtype)),
                                     np.asarray(H - 1, dtype)), dtype=np.int64)
        wi = node.op("cast", node.op("minimum", node.op("maximum", ww, np.zeros((), dtype)),
                                     np.asarray(W - 1, dtype)), dtype=np.int64)
        flat = node.op("add", base, node.op("add", node.op("mul", hi, np.asarray(W, np.int64)),
                                            wi))
        term = node.op("mul", node.op("gather", table, flat, axis=0),
                       node.op("expand_dims", weight, axis=-1))
        out = term if out is None else node.op("add", out, term)
    return out


@converter("DeformConv", since=19)
def _deform_conv(node):
    x, w, offset, b, mask = (node.input(i) for i in range(5))
    shape = node.shape(x)
    if (len(shape) != 4 or any(d < 0 for d in shape[1:])
            or any(d < 0 for d in node.shape(offset)[1:])):
        raise node.fail("DeformConv is supported for 2-D data whose shape (but the batch) "
                        "is known at import")
    from .nn_2 import batch_base
    n_, c, H, W = shape
    kernel = [int(k) for k in (node.attr("kernel_shape") or node.shape(w)[2:])]
    strides = [int(v) for v in (node.attr("strides") or [1, 1])]
    dil = [int(v) for v in (node.attr("dilations") or [1, 1])]
    pads = [int(v) for v in (node.attr("pads") or [0, 0, 0, 0])]
    og, groups = int(node.attr("offset_group", 1)), int(node.attr("group", 1))
    oh, ow = node.shape(offset)[2:]
    taps = kernel[0] * kernel[1]
    dtype = node.dtype(x)
    off = node.op("reshape", offset, shape=(n_, og, kernel[0], kernel[1], 2, oh, ow))
    if mask is not None:
        mask = node.op("reshape", mask, shape=(n_, og, taps, oh, ow))
    # the image as rows of positions: [N * H * W, C]; each batch's rows start at n * H * W
    table = node.op("reshape", node.op("permute", x, dims=(0, 2, 3, 1)), shape=(-1, c))
    like = node.op("strided_slice", offset, index=index_to_spec((slice(None), 0)))  # [N, oH, oW]
    base = batch_base(node, like, n_, H * W, 3)
    per = c // og
    groups_cols = []
    for g in range(og):
        tg = node.op("strided_slice", table,
                     index=index_to_spec((slice(None), slice(g * per, (g + 1) * per))))
        cols = []
        for a in range(kernel[0]):
            for bb in range(kernel[1]):
                def pick(axis_val, _a=a, _b=bb, _g=g):
                    return node.op("strided_slice", off,
                                   index=index_to_spec((slice(None), _g, _a, _b, axis_val)))
                hpos = (np.arange(oh) * strides[0] - pads[0] + a * dil[0]).reshape(1, oh, 1)
                wpos = (np.arange(ow) * strides[1] - pads[1] + bb * dil[1]).reshape(1, 1, ow)
                h = node.op("add", pick(0), hpos.astype(dtype))
                wv = node.op("add", pick(1), wpos.astype(dtype))
                col = _bilinear(node, tg, h, wv, (H, W), base)  # [N, oH, oW, C/og]
                if mask is not None:
                    m = node.op("strided_slice", mask,
                                index=index_to_spec((slice(None), g, a * kernel[1] + bb)))
                    col = node.op("mul", col, node.op("expand_dims", m, axis=-1))
                cols.append(col)
        groups_cols.append(node.op("stack", *cols, axis=-1))  # [N, oH, oW, C/og, K]
    cols = groups_cols[0] if og == 1 else node.op("concat", *groups_cols, axis=3)
    # the sampled columns as channels (c, tap) of a 1x1 grouped convolution
    cols = node.op("permute", node.op("reshape", cols, shape=(n_, oh, ow, c * taps)),
                   dims=(0, 3, 1, 2))
    w1 = node.op("reshape", w, shape=(-1, c // groups * taps, 1, 1))
    return node.op("conv2d", *([cols, w1] + ([b] if b is not None else [])), groups=groups,
                   weights_format="OIHW")

# --- ConvTranspose -------------------------------------------------------------------------------

def _deconv_full(node, x, w, n: int, strides, dilations, sizes):
    """The transposed convolution without padding, of spatial ``sizes`` (each within a
    stride of the unpadded size; None: the unpadded size, run-time sizes allowed): weights
    ONNX [I, O/g, k...], one group."""
    if n == 1:  # as 2-D on a height of 1
        x2 = node.op("expand_dims", x, axis=2)
        w2 = node.op("expand_dims", w, axis=2)
        y = node.op("deconv2d", x2, w2, stride=(1, strides[0]), dilation=(1, dilations[0]),
                    padding=(0, 0), weights_format="IOHW",
                    output_size=None if sizes is None else (1, sizes[0]))
        return node.op("squeeze", y, axis=(2,))
    if n == 2:
        return node.op("deconv2d", x, w, stride=tuple(strides), dilation=tuple(dilations),
                       padding=(0, 0), weights_format="IOHW",
                       output_size=None if sizes is None else tuple(sizes))
    if n == 3:
        return node.op("deconv3d", x, w, stride=tuple(strides), dilation=tuple(dilations),
                       padding=(0, 0, 0), weights_format="IODHW",
                       output_size=None if sizes is None else tuple(sizes))
    raise node.fail(f"{n}-D transposed convolution is not supported (1-D, 2-D and 3-D are)")


@converter("ConvTranspose", since=1)
def _conv_transpose(node):
    x, w, b = node.input(0), node.input(1), node.input(2)
    n = node.rank(x) - 2
    sizes = _spatial(node, x)
    known = all(s >= 0 for s in sizes)
    kernel = [int(k) for k in (node.attr("kernel_shape") or node.shape(w)[2:])]
    strides = [int(v) for v in (node.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (node.attr("dilations") or [1] * n)]
    outpad = [int(v) for v in (node.attr("output_padding") or [0] * n)]
    groups = int(node.attr("group", 1))
    full = [(sizes[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + outpad[i]
            for i in range(n)] if known else None
    out_shape = node.attr("output_shape")
    auto = node.attr("auto_pad", "NOTSET")
    if not known and (out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER")
                      or any(outpad)):
        raise node.fail("ConvTranspose over run-time spatial sizes supports explicit pads "
                        "only (no output_shape, output_padding or SAME auto_pad)")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = ([int(v) for v in out_shape][-n:] if out_shape is not None
                  else [sizes[i] * strides[i] for i in range(n)])
        pads = []
        for i in range(n):
            total = full[i] - target[i]  # (negative: zeros added, as ONNX's reference)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER"
                        else (total - small, small))
    elif auto == "VALID":
        pads = [(0, 0)] * n
    else:
        p = node.attr("pads") or [0] * (2 * n)
        pads = [(int(p[i]), int(p[i + n])) for i in range(n)]
    # the full result (output_padding included: the sizes a strided convolution maps back),
    # then the padding cropped off each side
    if any(op_ >= s and op_ > 0 for op_, s in zip(outpad, strides)):
        raise node.fail("output_padding must be smaller than the stride")
    if groups == 1:
        y = _deconv_full(node, x, w, n, strides, dilations, full)
    else:
        xs = node.op("split", x, num_or_sizes=groups, axis=1)
        ws = node.op("split", w, num_or_sizes=groups, axis=0)
        y = node.op("concat", *[_deconv_full(node, xg, wg, n, strides, dilations, full)
                                for xg, wg in zip(xs, ws)], axis=1)
    if any(p0 > 0 or p1 > 0 for p0, p1 in pads):
        # (ends counted from the end: run-time sizes need no arithmetic)
        index = (slice(None), slice(None)) + tuple(slice(max(p0, 0), -p1 if p1 > 0 else None)
                                                   for p0, p1 in pads)
        y = node.op("strided_slice", y, index=index_to_spec(index))
    if any(p0 < 0 or p1 < 0 for p0, p1 in pads):  # a negative padding grows the output
        y = _pad_spatial(node, y, [(max(-p0, 0), max(-p1, 0)) for p0, p1 in pads])
    if b is not None:
        y = node.op("add", y, node.op("reshape", b, shape=(-1,) + (1,) * n))
    return y


# --- pooling: the table's ops, or one strided slice per kernel tap ------------------------

class _Pool:
    """The geometry of one ONNX pooling node: explicit pads, ceil mode's extra end padding
    (windows may run past the padded input; those taps never count), output sizes."""

    def __init__(self, node, x, ceil_attr: bool = True) -> None:
        self.n = n = node.rank(x) - 2
        self.sizes = sizes = _spatial(node, x)
        self.kernel, self.strides, self.dilations = _window_attrs(node, n)
        self.pads = _explicit_pads(node, sizes, self.kernel, self.strides, self.dilations)
        ceil = bool(node.attr("ceil_mode", 0)) if ceil_attr else False
        self.out, self.extra = [], []
        if any(s < 0 for s in sizes):  # run-time sizes: the table's pooling ops only
            if ceil:
                raise node.fail("ceil_mode pooling over run-time spatial sizes is not "
                                "supported")
            self.out, self.extra = None, [0] * n
            return
        for i in range(n):
            span = (self.kernel[i] - 1) * self.dilations[i] + 1
            padded = sizes[i] + self.pads[i][0] + self.pads[i][1]
            num = padded - span
            out = (-(-num // self.strides[i]) if ceil else num // self.strides[i]) + 1
            if ceil and (out - 1) * self.strides[i] >= sizes[i] + self.pads[i][0]:
                out -= 1  # the last window must start inside the input or the begin padding
            if out < 1:
                raise node.fail(f"the pooling window ({span}) does not fit the padded input "
                                f"({padded}) on spatial axis {i}")
            self.out.append(out)
            self.extra.append(max(0, (out - 1) * self.strides[i] + span - padded))

    def padded(self, node, x, value: float, extra_value: float | None = None):
        """``x`` with the explicit pads (``value``) and the ceil-mode extra (``extra_value``)."""
        extra_value = value if extra_value is None else extra_value
        y = _pad_spatial(node, x, self.pads, value)
        if any(self.extra):
            y = _pad_spatial(node, y, [(0, e) for e in self.extra], extra_value)
        return y

    def table_op(self, node, kind: str, x, padding, **attrs):
        """The table's ``{kind}_pooling{n}d`` (compiled kernels) on ``x`` with symmetric
        ``padding``."""
        one = self.n == 1
        pick = (lambda v: v[0]) if one else tuple
        return node.op(f"{kind}_pooling{self.n}d", x, kernel=pick(self.kernel),
                       stride=pick(self.strides), dilation=pick(self.dilations),
                       padding=pick(padding), **attrs)

    def taps(self, node, xp) -> list:
        """One strided slice of ``xp`` (padded) per kernel tap: each the tap's value at every
        output position."""
        out = []
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            index = (slice(None), slice(None)) + tuple(
                slice(t * d, t * d + (o - 1) * s + 1, s)
                for t, d, o, s in zip(tap, self.dilations, self.out, self.strides))
            out.append(node.op("strided_slice", xp, index=index_to_spec(index)))
        return out


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@converter("MaxPool", since=(1, 8, 10))
def _max_pool(node):
    x = node.input(0)
    geo = _Pool(node, x, ceil_attr=node.opset >= 10)
    dtype = node.dtype(x)
    want_index = node.num_outputs > 1 and bool(node.node.output[1])
    xp = geo.padded(node, x, _lowest(dtype))
    if dtype.kind == "f" and not want_index and geo.n <= 3:
        # the padding (and ceil mode's extra) is -inf in xp: no window holds only padding
        return geo.table_op(node, "max", xp, [0] * geo.n)
    if geo.out is None:
        raise node.fail("MaxPool indices or integer data over run-time spatial sizes are "
                        "not supported")
    taps = geo.taps(node, xp)
    stacked = node.op("stack", *taps, axis=-1)
    y = node.op("max", stacked, dims=(-1,))
    if not want_index:
        return y
    # Indices: the flat index into x of each window's first maximum (row-major, or
    # column-major over the spatial axes with storage_order=1)
    shape = node.shape(x)
    if sum(d < 0 for d in shape) > 1 or any(d < 0 for d in shape[1:]):
        raise node.fail("MaxPool indices need every dim but the batch known at import")
    spatial = int(np.prod(shape[2:]))
    if shape[0] >= 0:
        index = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    else:  # a run-time batch: the row-major flat index as a running count
        ones = node.op("reshape", node.op("ones_like", x, dtype=np.int64), shape=(-1,))
        index = node.op("reshape", node.op("sub", node.op("cumsum", ones, axis=0),
                                           np.ones((), np.int64)), shape=tuple(shape))
    if node.attr("storage_order", 0):  # column-major within each (n, c) plane
        rows = np.arange(spatial, dtype=np.int64).reshape(shape[2:])
        cols = np.arange(spatial, dtype=np.int64).reshape(shape[2:][::-1]).transpose()
        index = node.op("add", index, cols - rows)
    itaps = geo.taps(node, geo.padded(node, index, -1))
    which = node.op("argmax", stacked, dims=(-1,))
    hot = node.op("one_hot", which, depth=len(taps), dtype=np.int64)
    idx = node.op("sum", node.op("mul", hot, node.op("stack", *itaps, axis=-1)), dims=(-1,))
    return y, idx


@converter("AveragePool", since=(1, 7, 10, 19))
def _avg_pool(node):
    x = node.input(0)
    geo = _Pool(node, x, ceil_attr=node.opset >= 10)
    dtype = node.dtype(x)
    include = bool(node.attr("count_include_pad", 0)) if node.opset >= 7 else False
    if geo.n <= 3 and not any(geo.extra):  # the table op's kernels where they agree
        if include:
            return geo.table_op(node, "avg", geo.padded(node, x, 0.0), [0] * geo.n,
                                count_include_pad=True)
        if all(p0 == p1 for p0, p1 in geo.pads) and all(2 * p0 <= k for (p0, _), k in
                                                        zip(geo.pads, geo.kernel)):
            return geo.table_op(node, "avg", x, [p0 for p0, _ in geo.pads],
                                count_include_pad=False)
        # asymmetric padding left out of the mean: window sums over window counts
        zeros = [0] * geo.n
        total = geo.table_op(node, "avg", geo.padded(node, x, 0.0), zeros,
                             count_include_pad=True)
        inside = geo.padded(node, node.op("ones_like", x), 0.0)
        return node.op("div", total, geo.table_op(node, "avg", inside, zeros,
                                                  count_include_pad=True))
    if geo.out is None:
        raise node.fail("this AveragePool geometry over run-time spatial sizes is not "
                        "supported")
    total = _sum(node, geo.taps(node, geo.padded(node, x, 0.0)))
    # the divisor: taps on the input (and, with count_include_pad, on the explicit padding;
    # never on ceil mode's extra), known at import from the shapes alone
    ones = np.ones((1, 1) + geo.sizes, dtype)
    count = _sum(node, geo.taps(node, geo.padded(node, ones, 1.0 if include else 0.0, 0.0)))
    return node.op("div", total, count)


def _sum(node, values: list):
    out = values[0]
    for v in values[1:]:
        out = node.op("add", out, v)
    return out


@converter("LpPool", since=(1, 2, 18))
def _lp_pool(node):
    x = node.input(0)
    geo = _Pool(node, x, ceil_attr=node.opset >= 18)
    if geo.out is None:
        raise node.fail("LpPool over run-time spatial sizes is not supported")
    dtype = node.dtype(x)
    p = float(node.attr("p", 2.0))
    taps = geo.taps(node, geo.padded(node, x, 0.0))
    power = np.asarray(p, dtype)
    total = _sum(node, [node.op("pow", node.op("abs", t), power) for t in taps])
    return node.op("pow", total, np.asarray(1.0 / p, dtype))


@converter(("GlobalAveragePool", "GlobalMaxPool"), since=1)
def _global_pool(node):
    x = node.input(0)
    axes = tuple(range(2, node.rank(x)))
    op = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return node.op(op, x, dims=axes, keep_dims=True)


@converter("GlobalLpPool", since=(1, 2))
def _global_lp_pool(node):
    x = node.input(0)
    dtype = node.dtype(x)
    p = float(node.attr("p", 2.0))
    axes = tuple(range(2, node.rank(x)))
    s = node.op("sum", node.op("pow", node.op("abs", x), np.asarray(p, dtype)), dims=axes,
                keep_dims=True)
    return node.op("pow", s, np.asarray(1.0 / p, dtype))


@converter("MaxUnpool", since=(9, 11))
def _max_unpool(node):
    x, idx = node.input(0), node.input(1)
    n = node.rank(x) - 2
    shape = node.shape(x)
    if any(d < 0 for d in shape):
        raise node.fail("MaxUnpool needs the input's shape known at import")
    # the size MaxPool's geometry maps back from: the indices are flat indices into it
    kernel, strides, _ = _window_attrs(node, n)
    p = node.attr("pads") or [0] * (2 * n)
    inferred = tuple(shape[:2]) + tuple(
        (shape[2 + i] - 1) * strides[i] + kernel[i] - p[i] - p[i + n] for i in range(n))
    flat = node.op("scatter_update", np.zeros((int(np.prod(inferred)),), node.dtype(x)),
                   node.op("reshape", node.op("cast", idx, dtype=np.int64), shape=(-1,)),
                   node.op("reshape", x, shape=(-1,)))
    y = node.op("reshape", flat, shape=inferred)
    out_shape = node.static_ints(2, "output_shape")
    if out_shape is None or tuple(out_shape) == inferred:
        return y
    # a larger output_shape: the unpooled block in its leading corner, zeros elsewhere
    grow = [int(o) - i for o, i in zip(out_shape, inferred)]
    if any(g < 0 for g in grow):
        raise node.fail(f"output_shape {tuple(out_shape)} is smaller than the unpooled "
                        f"{inferred}")
    return node.op("pad", y, paddings=tuple((0, g) for g in grow), constant=0.0)

# --- Dropout -------------------------------------------------------------------------------------

@converter("Dropout", since=(1, 7, 10, 12))
def _dropout(node):
    x = node.input(0)
    if node.opset >= 12:
        ratio = node.static(1, "ratio")
        training = node.static(2, "training_mode")
        ratio = 0.5 if ratio is None else float(ratio)
        training = False if training is None else bool(training)
    else:
        ratio = float(node.attr("ratio", 0.5))
        training = node.opset < 7 and not node.attr("is_test", 0)
    want_mask = node.num_outputs > 1 and bool(node.node.output[1])
    if not training or ratio == 0.0:
        y = node.op("identity", x)
        if not want_mask:
            return y
        mask_dtype = np.bool_ if node.opset >= 10 else node.dtype(x)
        shape = node.shape(x)
        if any(d < 0 for d in shape):
            return y, node.op("ones_like", x, dtype=mask_dtype)
        return y, np.ones(shape, mask_dtype)
    # training: a random mask, kept values scaled by 1 / (1 - ratio)
    mask = node.op("lt", node.op("uniform", shape=_static_shape(node, x), dtype=node.dtype(x)),
                   np.asarray(1.0 - ratio, node.dtype(x)))
    scale = np.asarray(1.0 / (1.0 - ratio), node.dtype(x))
    y = node.op("mul", node.op("where", mask, x, np.zeros((), node.dtype(x))), scale)
    return (y, mask) if want_mask else y


def _static_shape(node, x) -> tuple[int, ...]:
    shape = node.shape(x)
    if any(d < 0 for d in shape):
        raise node.fail("training-mode Dropout over run-time dims is not supported")
    return tuple(shape)


# --- quantization ---------------------------------------------------------------------------------

_QRANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
           "int16": (-32768, 32767), "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3),
           "int2": (-2, 1)}  # (by name: the 4- and 2-bit ones are ml_dtypes' types)
_FLOAT_QUANT = (*FLOAT8, "float4_e2m1fn")
_QUANT_NAMES = ", ".join((*_QRANGE, *_FLOAT_QUANT))


def _per_axis(node, p, x, axis: int, block: int):
    """A scale/zero point laid against ``x``: a scalar as is, a 1-D one along ``axis``, a
    blocked one (``block`` > 0) repeated ``block`` times along ``axis`` and cut to x's size."""
    if p is None or node.rank(p) == 0 or (block <= 0 and int(np.prod(node.shape(p))) == 1):
        return p
    rank = node.rank(x)
    axis = axis + rank if axis < 0 else axis
    if block > 0:
        size = node.shape(x)[axis]
        p = node.op("repeat", p, repeats=block, axis=axis)
        if size >= 0 and node.shape(p)[axis] != size:
            index = (slice(None),) * axis + (slice(0, size),)
            p = node.op("strided_slice", p, index=index_to_spec(index))
        return p
    return node.op("reshape", p, shape=(-1,) + (1,) * (rank - axis - 1))


def _saturate(node, v, dtype: np.dtype):
    """``v`` (float, already rounded) clipped to ``dtype``'s range and cast to it."""
    lo, hi = _QRANGE[dtype.name]
    fdt = node.dtype(v)
    v = node.op("minimum", node.op("maximum", v, np.asarray(lo, fdt)), np.asarray(hi, fdt))
    return node.op("cast", v, dtype=dtype)


@converter("QuantizeLinear", since=(10, 13, 21, 25))
def _quantize(node):
    from ..dtypes import np_dtype
    x, scale, zp = node.input(0), node.input(1), node.input(2)
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    if zp is not None:
        out = node.dtype(zp)
    elif node.attr("output_dtype"):
        out = np_dtype(int(node.attr("output_dtype")))
    else:
        out = np.dtype(np.uint8)
    if out.name not in _QRANGE and out.name not in _FLOAT_QUANT:
        raise node.fail(f"quantization to {out} is not supported ({_QUANT_NAMES} are)")
    precision = node.attr("precision")
    fdt = np_dtype(int(precision)) if precision else node.dtype(scale)
    scale = _per_axis(node, scale, x, axis, block)
    xf = node.op("div", node.op("cast", x, dtype=fdt), node.op("cast", scale, dtype=fdt))
    if out.name in _FLOAT_QUANT:  # float targets: the cast rounds (float8: zero point 0)
        if out.name.startswith("float4") and zp is not None:
            xf = node.op("add", xf, node.op("cast", _per_axis(node, zp, x, axis, block),
                                            dtype=fdt))
        return saturating_cast(node, xf, out)
    # round half to even, then the zero point, in float64 (exact for every int16 value)
    q = node.op("cast", node.op("round_half_even", xf), dtype=np.float64)
    if zp is not None:
        q = node.op("add", q, node.op("cast", _per_axis(node, zp, x, axis, block),
                                      dtype=np.float64))
    return _saturate(node, q, out)


@converter("DequantizeLinear", since=(10, 13, 21, 23))
def _dequantize(node):
    from ..dtypes import np_dtype
    x, scale, zp = node.input(0), node.input(1), node.input(2)
    name = node.dtype(x).name
    if name not in _QRANGE and name not in _FLOAT_QUANT and name != "int32":
        raise node.fail(f"dequantization of {name} is not supported ({_QUANT_NAMES}, int32 "
                        f"are)")
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    xf = node.op("cast", x, dtype=np.float32)
    if zp is not None:
        xf = node.op("sub", xf, node.op("cast", _per_axis(node, zp, x, axis, block),
                                        dtype=np.float32))
    y = node.op("mul", xf, _per_axis(node, scale, x, axis, block))
    out = (np_dtype(int(node.attr("output_dtype"))) if node.attr("output_dtype")
           else node.dtype(scale))
    return y if node.dtype(y) == out else node.op("cast", y, dtype=out)


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(node):
    x = node.input(0)
    f = np.float32
    zero = np.zeros((), f)
    lo = node.op("minimum", node.op("min", x), zero)  # the range always holds 0
    hi = node.op("maximum", node.op("max", x), zero)
    scale = node.op("div", node.op("sub", hi, lo), np.asarray(255.0, f))
    zp = node.op("round_half_even", node.op("sub", zero, node.op("div", lo, scale)))
    zp = _saturate(node, zp, np.dtype(np.uint8))
    y = node.op("add", node.op("round_half_even", node.op("div", x, scale)),
                node.op("cast", zp, dtype=f))
    return _saturate(node, y, np.dtype(np.uint8)), scale, zp


def _shifted(node, v, zp, per_row: bool = False):
    """Integer ``v - zero point`` as int32 (a 1-D zero point is per row when ``per_row``)."""
    v = node.op("cast", v, dtype=np.int32)
    if zp is None:
        return v
    zp = node.op("cast", zp, dtype=np.int32)
    if per_row and node.rank(zp) == 1:
        zp = node.op("reshape", zp, shape=(-1, 1))
    return node.op("sub", v, zp)


@converter("MatMulInteger", since=10)
def _matmul_integer(node):
    a = _shifted(node, node.input(0), node.input(2), per_row=True)
    b = _shifted(node, node.input(1), node.input(3))
    return node.op("matmul", a, b)


@converter("QLinearMatMul", since=10)
def _qlinear_matmul(node):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (node.input(i) for i in range(8))
    acc = node.op("matmul", _shifted(node, a, a_zp, per_row=True), _shifted(node, b, b_zp))
    # the integer accumulator rescaled in the scales' precision, as ONNX's reference
    sdt = node.dtype(a_s)
    factor = node.op("div", node.op("mul", a_s, b_s), y_s)
    if node.rank(a_s) == 1 and node.shape(a_s)[0] != 1:
        factor = node.op("reshape", factor, shape=(-1, 1))
    d = node.op("mul", node.op("cast", acc, dtype=sdt), factor)
    if y_zp is not None:
        d = node.op("add", d, node.op("cast", y_zp, dtype=sdt))
    out = node.dtype(y_zp) if y_zp is not None else node.dtype(a)
    return _saturate(node, node.op("cast", node.op("round_half_even", d), dtype=np.float64), out)


@converter("QLinearConv", since=10)
def _qlinear_conv(node):
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, b = (node.input(i) for i in range(9))
    n = node.rank(x) - 2
    kernel = node.attr("kernel_shape") or list(node.shape(w)[2:])
    strides = [int(v) for v in (node.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (node.attr("dilations") or [1] * n)]
    pads = _explicit_pads(node, _spatial(node, x), kernel, strides, dilations)
    xf = node.op("cast", _shifted(node, x, x_zp), dtype=np.float64)
    wq = node.op("cast", w, dtype=np.int32)
    if w_zp is not None:
        wz = node.op("cast", w_zp, dtype=np.int32)
        if node.rank(wz) == 1 and node.shape(wz)[0] != 1:  # per output channel
            wz = node.op("reshape", wz, shape=(-1,) + (1,) * (n + 1))
        wq = node.op("sub", wq, wz)
    acc = _conv_call(node, _pad_spatial(node, xf, pads), node.op("cast", wq, dtype=np.float64),
                     None if b is None else node.op("cast", b, dtype=np.float64), n, strides,
                     dilations, [0] * n, int(node.attr("group", 1)))
    ws = w_s
    if node.rank(ws) == 1 and node.shape(ws)[0] != 1:
        ws = node.op("reshape", ws, shape=(-1,) + (1,) * n)
    factor = node.op("div", node.op("mul", x_s, ws), y_s)
    d = node.op("mul", node.op("cast", acc, dtype=node.dtype(x_s)), factor)
    out = node.dtype(x)
    if y_zp is not None:
        d = node.op("add", d, node.op("cast", y_zp, dtype=node.dtype(d)))
        out = node.dtype(y_zp)
    return _saturate(node, node.op("cast", node.op("round_half_even", d), dtype=np.float64), out)
