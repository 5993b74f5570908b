"""Layout ops of the ``cnn`` group: upsampling, im2col/col2im, space/depth/batch moves.

* ``upsampling2d(x)`` / ``upsampling3d(x)``: nearest-neighbour, each spatial axis repeated
  ``scale`` times (an int for every axis, or one per axis); ``data_format`` NCHW|NHWC /
  NCDHW|NDHWC. The adjoint, ``upsampling{2,3}d_grad(g)``, sums each ``scale`` block.
* ``im2col(x)``: NCHW ``x`` -> columns ``[N, C, kH, kW, oH, oW]`` (ND4J's ``im2Col``), zeros
  where a tap reads padding; ``kernel``, ``stride``, ``padding`` (int, pair, "valid",
  "same"), ``dilation`` as ``conv2d``. ``col2im(cols)`` is its adjoint: every column value
  is added back at the input position it was read from (overlaps sum, padding is dropped);
  the image size is the ``size`` attribute (H, W) -- ND4J reads it from the config's kH/kW,
  here it is said explicitly.
* ``space_to_depth(x)`` / ``depth_to_space(x)``: ``block_size`` b, ``data_format``
  NCHW|NHWC, TensorFlow's/ND4J's DCR order: output channel ``(bh * b + bw) * C + c`` holds
  input ``(c, h * b + bh, w * b + bw)`` (PyTorch's ``pixel_shuffle`` is CRD: ``c * b * b +
  bh * b + bw``). Each is the other's inverse, so each one's gradient is the other.
* ``space_to_batch(x)`` / ``batch_to_space(x)``: TensorFlow's N-D ops on ``[batch, *spatial,
  *rest]`` (channels last, as ND4J): ``blocks`` one int per spatial axis; ``paddings`` /
  ``crops`` a ``(begin, end)`` pair per spatial axis (default zeros). The output batch index
  is ``(i_1 * b_2 + i_2) * batch + n`` for block offsets ``i`` (TF's order). Mutual adjoints.
Layout ops accept any dtype (they move values, except the sums of the adjoints and of
``col2im``). Everything is numpy reshapes/transposes/strided slices; loops
run over kernel taps at most.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OpError
from ..kernels import geometry as G
from .call import op
from .cnn import PADDING, PAIR, _attrs, check_rank, _out_size
from .cnn_attrs import choice, window
from .registry import REQUIRED, Attr, AttrKind, TensorType, define

_GROUP = {"namespace": "cnn", "method": False}


def _cf(fmt: str) -> bool:
    return fmt[1] == "C"


def _fresh(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``y``, copied if it is a view of ``x`` (these ops do not declare ``view``)."""
    return y.copy() if np.shares_memory(y, x) else y


def _spatial_axes(rank: int, fmt: str) -> list[int]:
    return list(range(2, rank)) if _cf(fmt) else list(range(1, rank - 1))


def _scale_kind(n: int) -> AttrKind:
    def coerce(v: Any) -> tuple[int, ...]:
        t = Attr.INTS.coerce(v)
        t = t * n if len(t) == 1 else t
        if len(t) != n or min(t) < 1:
            raise ValueError(f"expected an int >= 1 or {n} of them, got {v!r}")
        return t
    return AttrKind(f"scale{n}", coerce)


# --- upsampling -----------------------------------------------------------------------------------

def _up_infer(name: str, n: int, down: bool):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        x = types[0]
        check_rank(name, x, n + 2, "x" if not down else "g", a.data_format)
        out = list(x.shape)
        for s, ax in zip(a.scale, _spatial_axes(n + 2, a.data_format)):
            if x.shape[ax] < 0:
                continue
            if down and x.shape[ax] % s:
                raise OpError(f"{name}: g's axis {ax} ({x.shape[ax]}, shape {x.shape}) is not "
                              f"a multiple of its scale {s}")
            out[ax] = x.shape[ax] // s if down else x.shape[ax] * s
        return TensorType(tuple(out), x.dtype)
    return infer


def _upsample(x, *, scale, data_format):
    x = np.asarray(x)
    for s, ax in zip(scale, _spatial_axes(x.ndim, data_format)):
        x = np.repeat(x, s, axis=ax)
    return x


def _upsample_adjoint(g, *, scale, data_format):
    g = np.asarray(g)
    axes = _spatial_axes(g.ndim, data_format)
    shape, sum_axes = [], []
    for ax, d in enumerate(g.shape):
        if ax in axes:
            s = scale[axes.index(ax)]
            shape += [d // s, s]
            sum_axes.append(len(shape) - 1)
        else:
            shape.append(d)
    return g.reshape(shape).sum(axis=tuple(sum_axes))


def _via(helper: str):
    return lambda ins, outs, gs, a: [getattr(op, helper)(gs[0], **_attrs(a))]


for _n, _fmts in ((2, ("NCHW", "NHWC")), (3, ("NCDHW", "NDHWC"))):
    _name = f"upsampling{_n}d"
    _UP = {"scale": (_scale_kind(_n), REQUIRED), "data_format": (choice(*_fmts), _fmts[0])}
    define(_name, ["x"], _up_infer(_name, _n, False), _upsample, attrs=_UP, **_GROUP,
           grad=_via(f"{_name}_grad"),
           doc=f"Nearest-neighbour {_n}-D upsampling: each spatial axis of ``x`` "
               f"({'|'.join(_fmts)}) repeated ``scale`` times (an int, or one per axis).")
    define(f"{_name}_grad", ["g"], _up_infer(f"{_name}_grad", _n, True), _upsample_adjoint,
           attrs=_UP, **_GROUP,
           grad=_via(_name),
           doc=f"The adjoint of ``{_name}``: the sum of each ``scale`` block of ``g``.")


# --- im2col / col2im ------------------------------------------------------------------------------

_WINDOW = {"stride": (PAIR, (1, 1)), "padding": (PADDING, (0, 0)), "dilation": (PAIR, (1, 1)),
           "data_format": (choice("NCHW"), "NCHW")}
IM2COL = {"kernel": (PAIR, REQUIRED), **_WINDOW}
COL2IM = {"size": (PAIR, REQUIRED), **_WINDOW}


def _pads(a: Any, axis: int, size: int, k: int) -> tuple[int, int, int]:
    pad = "same" if a.padding == "same" else a.padding[axis]
    return G.axis_pads(size, k, a.stride[axis], a.dilation[axis], pad)


def _im2col_infer(types: list[TensorType], a: Any) -> TensorType:
    x = types[0]
    check_rank("im2col", x, 4, "x", "NCHW")
    oh = _out_size(x.shape[2], a.kernel[0], a.stride[0], a.dilation[0],
                   "same" if a.padding == "same" else a.padding[0])
    ow = _out_size(x.shape[3], a.kernel[1], a.stride[1], a.dilation[1],
                   "same" if a.padding == "same" else a.padding[1])
    return TensorType((x.shape[0], x.shape[1], *a.kernel, oh, ow), x.dtype)


def _col2im_infer(types: list[TensorType], a: Any) -> TensorType:
    c = types[0]
    if c.rank != 6:
        raise OpError(f"col2im: cols must have rank 6 ([N, C, kH, kW, oH, oW], as im2col "
                      f"gives), got shape {c.shape}")
    for i in range(2):
        k, got = c.shape[2 + i], c.shape[4 + i]
        if k < 0:
            raise OpError(f"col2im: the kernel size (cols axis {2 + i}) must be known, got "
                          f"shape {c.shape}")
        want = _out_size(a.size[i], k, a.stride[i], a.dilation[i],
                         "same" if a.padding == "same" else a.padding[i])
        if got >= 0 and got != want:
            raise OpError(f"col2im: cols {c.shape} has {got} output positions on axis {4 + i}, "
                          f"but an image of size {a.size} with kernel {c.shape[2:4]}, stride "
                          f"{a.stride}, padding {a.padding}, dilation {a.dilation} gives {want}")
    return TensorType((c.shape[0], c.shape[1], *a.size), c.dtype)


def _tap_slices(a: Any, hw, kernel):
    """Padded geometry and, per tap ``(i, j)``, its slice of the padded image."""
    gh, gw = (_pads(a, i, hw[i], kernel[i]) for i in range(2))
    for i in range(kernel[0]):
        rows = slice(i * a.dilation[0], i * a.dilation[0] + (gh[2] - 1) * a.stride[0] + 1,
                     a.stride[0])
        for j in range(kernel[1]):
            cols = slice(j * a.dilation[1], j * a.dilation[1] + (gw[2] - 1) * a.stride[1] + 1,
                         a.stride[1])
            yield gh, gw, i, j, rows, cols


def _padded_shape(shape, gh, gw, a, kernel):
    """The padded image: big enough for every tap (explicit padding may leave some unread)."""
    need = [(g[2] - 1) * s + (k - 1) * d + 1 for g, s, k, d in
            zip((gh, gw), a.stride, kernel, a.dilation)]
    return (shape[0], shape[1], max(need[0], gh[0] + shape[2]), max(need[1], gw[0] + shape[3]))


def _im2col(x, **attrs):
    x = np.asarray(x)
    a = _Rec(attrs)
    gh, gw = (_pads(a, i, x.shape[2 + i], a.kernel[i]) for i in range(2))
    xp = np.zeros(_padded_shape(x.shape, gh, gw, a, a.kernel), x.dtype)
    xp[:, :, gh[0]:gh[0] + x.shape[2], gw[0]:gw[0] + x.shape[3]] = x
    out = np.empty((x.shape[0], x.shape[1], *a.kernel, gh[2], gw[2]), x.dtype)
    for _, _, i, j, rows, cols in _tap_slices(a, x.shape[2:], a.kernel):
        out[:, :, i, j] = xp[:, :, rows, cols]
    return out


def _col2im(c, **attrs):
    c = np.asarray(c)
    a = _Rec(attrs)
    kernel, h, w = c.shape[2:4], a.size[0], a.size[1]
    gh, gw = (_pads(a, i, a.size[i], kernel[i]) for i in range(2))
    if (gh[2], gw[2]) != c.shape[4:]:
        raise TypeError("unsupported input (see the op's inference)")
    xp = np.zeros(_padded_shape((*c.shape[:2], h, w), gh, gw, a, kernel), c.dtype)
    for _, _, i, j, rows, cols in _tap_slices(a, (h, w), kernel):
        region = xp[:, :, rows, cols]
        region += c[:, :, i, j]
    return np.ascontiguousarray(xp[:, :, gh[0]:gh[0] + h, gw[0]:gw[0] + w])


class _Rec:
    """Attribute access on an impl's keyword attributes."""

    def __init__(self, attrs: dict) -> None:
        self.__dict__.update(attrs)


def _window_attrs(a: Any) -> dict:
    return {k: getattr(a, k) for k in ("stride", "padding", "dilation", "data_format")}


def _im2col_grad(ins, outs, gs, a):
    hw = ins[0].shape[2:]
    if min(hw) < 0:
        raise OpError(f"im2col: its gradient needs the image's height and width, unknown in "
                      f"shape {tuple(ins[0].shape)}; give the placeholder a static H and W")
    return [op.col2im(gs[0], size=tuple(hw), **_window_attrs(a))]


define("im2col", ["x"], _im2col_infer, _im2col, attrs=IM2COL, grad=_im2col_grad, **_GROUP,
       doc="ND4J's ``im2Col``: NCHW ``x`` -> ``[N, C, kH, kW, oH, oW]``, the input each output "
           "position reads at each kernel tap (zeros in the padding).")
define("col2im", ["cols"], _col2im_infer, _col2im, attrs=COL2IM, **_GROUP,
       grad=lambda ins, outs, gs, a: [op.im2col(gs[0], kernel=tuple(ins[0].shape[2:4]),
                                                **_window_attrs(a))],
       doc="ND4J's ``col2Im``, the adjoint of ``im2col``: columns ``[N, C, kH, kW, oH, oW]`` "
           "added back into an NCHW image of ``size`` (H, W); overlaps sum, padding drops.")


# --- space_to_depth / depth_to_space --------------------------------------------------------------

DEPTH = {"block_size": (window(1, 2), REQUIRED),
         "data_format": (choice("NCHW", "NHWC"), "NCHW")}



def _depth_infer(name: str, to_depth: bool):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        x, b = types[0], a.block_size
        check_rank(name, x, 4, "x", a.data_format)
        cax = 1 if _cf(a.data_format) else 3
        out = list(x.shape)
        for ax in _spatial_axes(4, a.data_format):
            if to_depth and x.shape[ax] >= 0:
                if x.shape[ax] % b:
                    raise OpError(f"{name}: spatial axis {ax} of x {x.shape} is not a multiple "
                                  f"of block_size {b}; pad or crop it first")
                out[ax] = x.shape[ax] // b
            elif x.shape[ax] >= 0:
                out[ax] = x.shape[ax] * b
        c = x.shape[cax]
        if c >= 0:
            if not to_depth and c % (b * b):
                raise OpError(f"{name}: the channels of x {x.shape} ({c}) are not a multiple of "
                              f"block_size**2 = {b * b}")
            out[cax] = c * b * b if to_depth else c // (b * b)
        return TensorType(tuple(out), x.dtype)
    return infer


def _space_to_depth(x, *, block_size, data_format):
    x, b = np.asarray(x), block_size
    if _cf(data_format):
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        return _fresh(y.reshape(n, b * b * c, h // b, w // b), x)
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return _fresh(y.reshape(n, h // b, w // b, b * b * c), x)


def _depth_to_space(x, *, block_size, data_format):
    x, b = np.asarray(x), block_size
    if _cf(data_format):
        n, cc, h, w = x.shape
        c = cc // (b * b)
        y = x.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2)
        return _fresh(y.reshape(n, c, h * b, w * b), x)
    n, h, w, cc = x.shape
    c = cc // (b * b)
    y = x.reshape(n, h, w, b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return _fresh(y.reshape(n, h * b, w * b, c), x)


define("space_to_depth", ["x"], _depth_infer("space_to_depth", True), _space_to_depth,
       attrs=DEPTH, **_GROUP,
       grad=lambda ins, outs, gs, a: [op.depth_to_space(gs[0], **_attrs(a))],
       doc="Each ``block_size`` x ``block_size`` spatial block of ``x`` (NCHW|NHWC) moved into "
           "channels, TF/ND4J DCR order: channel ``(bh * b + bw) * C + c``.")
define("depth_to_space", ["x"], _depth_infer("depth_to_space", False), _depth_to_space,
       attrs=DEPTH, **_GROUP,
       grad=lambda ins, outs, gs, a: [op.space_to_depth(gs[0], **_attrs(a))],
       doc="The inverse of ``space_to_depth`` (DCR order): channel blocks of ``x`` moved into "
           "``block_size`` x ``block_size`` spatial blocks.")


# --- space_to_batch / batch_to_space -------------------------------------------------------------

def _blocks(v: Any) -> tuple[int, ...]:
    t = Attr.INTS.coerce(v)
    if not t or min(t) < 1:
        raise ValueError(f"expected one int >= 1 per spatial axis, got {v!r}")
    return t


def _pairs(v: Any) -> tuple[tuple[int, int], ...] | None:
    if v is None:
        return None
    v = Attr.NESTED.coerce(v)
    if not isinstance(v, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 and all(
                isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in p)
            for p in v):
        raise ValueError(f"expected one (begin, end) pair of ints >= 0 per spatial axis, "
                         f"got {v!r}")
    return v


BATCH_BLOCKS = AttrKind("blocks", _blocks)
PAIRS = AttrKind("pairs?", _pairs)


def _block_geometry(name: str, x: TensorType, a: Any, what: str) -> tuple:
    m = len(a.blocks)
    pairs = getattr(a, what) or ((0, 0),) * m
    if len(pairs) != m:
        raise OpError(f"{name}: {what} has {len(pairs)} (begin, end) pairs but blocks "
                      f"{a.blocks} has {m} spatial axes; give one pair per block")
    if x.rank < m + 1:
        raise OpError(f"{name}: x {x.shape} needs a batch axis and {m} spatial axes (one per "
                      f"block {a.blocks})")
    return m, pairs, int(np.prod(a.blocks))


def _s2b_infer(types: list[TensorType], a: Any) -> TensorType:
    x = types[0]
    _, pads, prod = _block_geometry("space_to_batch", x, a, "paddings")
    out = list(x.shape)
    out[0] = -1 if x.shape[0] < 0 else x.shape[0] * prod
    for i, (b, (p0, p1)) in enumerate(zip(a.blocks, pads)):
        d = x.shape[1 + i]
        if d >= 0:
            if (d + p0 + p1) % b:
                raise OpError(f"space_to_batch: spatial axis {1 + i} of x {x.shape} plus "
                              f"paddings {(p0, p1)} is {d + p0 + p1}, not a multiple of block "
                              f"{b}; change the paddings")
            out[1 + i] = (d + p0 + p1) // b
    return TensorType(tuple(out), x.dtype)


def _b2s_infer(types: list[TensorType], a: Any) -> TensorType:
    x = types[0]
    _, crops, prod = _block_geometry("batch_to_space", x, a, "crops")
    out = list(x.shape)
    if x.shape[0] >= 0:
        if x.shape[0] % prod:
            raise OpError(f"batch_to_space: the batch of x {x.shape} ({x.shape[0]}) is not a "
                          f"multiple of the product of blocks {a.blocks} ({prod})")
        out[0] = x.shape[0] // prod
    for i, (b, (c0, c1)) in enumerate(zip(a.blocks, crops)):
        d = x.shape[1 + i]
        if d >= 0:
            if d * b - c0 - c1 < 0:
                raise OpError(f"batch_to_space: crops {(c0, c1)} exceed spatial axis {1 + i} "
                              f"({d} x block {b} = {d * b}) of x {x.shape}")
            out[1 + i] = d * b - c0 - c1
    return TensorType(tuple(out), x.dtype)


def _check_pairs(blocks, pairs, x, crop: bool) -> None:
    """Eager calls skip inference: refuse what it refuses (then it names the problem)."""
    if len(pairs) != len(blocks) or x.ndim < len(blocks) + 1 or crop and any(
            c0 + c1 > d * b for (c0, c1), d, b in zip(pairs, x.shape[1:], blocks)):
        raise TypeError("unsupported input (see the op's inference)")


def _space_to_batch(x, *, blocks, paddings):
    x = np.asarray(x)
    m = len(blocks)
    pads = paddings or ((0, 0),) * m
    _check_pairs(blocks, pads, x, False)
    xp = np.pad(x, ((0, 0), *pads, *((0, 0),) * (x.ndim - 1 - m)))
    n, rest = xp.shape[0], xp.shape[1 + m:]
    split = [n]
    for i, b in enumerate(blocks):
        split += [xp.shape[1 + i] // b, b]
    y = xp.reshape(*split, *rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    return y.reshape(n * int(np.prod(blocks)), *(split[1 + 2 * i] for i in range(m)), *rest)


def _batch_to_space(x, *, blocks, crops):
    x = np.asarray(x)
    m = len(blocks)
    crops = crops or ((0, 0),) * m
    _check_pairs(blocks, crops, x, True)
    n = x.shape[0] // int(np.prod(blocks))
    sp, rest = x.shape[1:1 + m], x.shape[1 + m:]
    y = x.reshape(*blocks, n, *sp, *rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape(n, *(d * b for d, b in zip(sp, blocks)), *rest)
    index = (slice(None), *(slice(c0, d * b - c1) for (c0, c1), d, b in zip(crops, sp, blocks)))
    return _fresh(np.ascontiguousarray(y[index]), x)


define("space_to_batch", ["x"], _s2b_infer, _space_to_batch, **_GROUP,
       attrs={"blocks": (BATCH_BLOCKS, REQUIRED), "paddings": (PAIRS, None)},
       grad=lambda ins, outs, gs, a: [op.batch_to_space(gs[0], blocks=a.blocks,
                                                        crops=a.paddings)],
       doc="TF/ND4J ``spaceToBatch`` on ``[batch, *spatial, *rest]``: the spatial axes, padded "
           "by ``paddings`` ((begin, end) each), cut into ``blocks`` whose offsets move into "
           "the batch.")
define("batch_to_space", ["x"], _b2s_infer, _batch_to_space, **_GROUP,
       attrs={"blocks": (BATCH_BLOCKS, REQUIRED), "crops": (PAIRS, None)},
       grad=lambda ins, outs, gs, a: [op.space_to_batch(gs[0], blocks=a.blocks,
                                                        paddings=a.crops)],
       doc="TF/ND4J ``batchToSpace``, the inverse of ``space_to_batch``: batch blocks back into "
           "the spatial axes, then ``crops`` ((begin, end) per spatial axis) cut off.")
