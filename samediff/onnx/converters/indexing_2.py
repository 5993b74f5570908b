"""ONNX converters, the indexing family (continued): Resize and Upsample.

Resize is separable: every mode resamples one axis at a time with weights that depend only
on the static sizes, scales and attributes. So each resized axis becomes, at import,

* nearest: a ``gather`` of constant source indices (exact for every dtype);
* linear / cubic (with antialias and exclude_outside): a ``matmul`` with a constant
  (out x in) weight matrix, computed in float64 like the ONNX reference, then cast back
  (integer outputs are rounded and saturated);
* tf_crop_and_resize: also a ``where`` that writes ``extrapolation_value`` at the output
  positions whose source coordinate falls outside the input.

Coordinate modes: half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
asymmetric, tf_crop_and_resize, tf_half_pixel_for_nn (opset 11-12). Scales and sizes must
be known at import (the runner makes them static); the resized dims must be static.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..table import converter

_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coords(node: Any, ctm: str, d: int, o: int, scale: float,
                   roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinate of every output index along one axis, and (tf_crop_and_resize)
    which of them fall outside the input."""
    y = np.arange(o, dtype=np.float64)
    width = scale * d  # the unrounded output size
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if ctm == "half_pixel_symmetric":
        offset = (d / 2) * (1 - o / width)
        return offset + (y + 0.5) / scale - 0.5, None
    if ctm == "pytorch_half_pixel":
        return (np.full(o, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if ctm == "align_corners":
        return (np.zeros(o) if width == 1 else y * (d - 1) / (width - 1)), None
    if ctm == "asymmetric":
        return y / scale, None
    if ctm == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale, None
    if ctm == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if width == 1:
            x = np.full(o, (hi - lo) * (d - 1) / 2)
        else:
            x = y * (hi - lo) * (d - 1) / (width - 1)
        x = x + lo * (d - 1)
        return x, (x < 0) | (x > d - 1)
    raise node.fail(f"coordinate_transformation_mode {ctm!r} is not supported")


def _nearest_index(node: Any, x: np.ndarray, d: int, mode: str) -> np.ndarray:
    base = np.floor(x)
    frac = x - base
    if mode == "round_prefer_floor":
        pick = np.where(frac > 0.5, base + 1, base)
    elif mode == "round_prefer_ceil":
        pick = np.where(frac >= 0.5, base + 1, base)
    elif mode == "floor":
        pick = base
    elif mode == "ceil":
        pick = np.ceil(x)
    else:
        raise node.fail(f"nearest_mode {mode!r} is not one of {_NEAREST_MODES}")
    return np.clip(pick, 0, d - 1).astype(np.int64)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter ``a``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _weights(x: np.ndarray, d: int, scale: float, mode: str, a: float, exclude: bool,
             antialias: bool) -> np.ndarray:
    """The (out x in) interpolation matrix for source coordinates ``x`` on a dim of size d.

    The taps are the n input indices nearest to each coordinate (n = 2 for linear, 4 for
    cubic; antialiased downsampling widens the kernel by 1/scale and normalizes it); taps
    off the edge read the edge element, or are dropped and the rest renormalized
    (exclude_outside)."""
    s = min(scale, 1.0) if antialias else 1.0
    support = 1.0 if mode == "linear" else 2.0
    n = 2 - 2 * int(math.floor(-support / s) + 1)  # (2 for linear, 4 for cubic at s = 1)
    base = np.floor(x)
    # window of n taps: at an exact integer coordinate the window leans left (its taps
    # are x - n/2 ... x + n/2 - 1), elsewhere it is centred on the coordinate
    start = np.where(x == base, base - n // 2, base - n // 2 + 1).astype(np.int64)
    taps = start[:, None] + np.arange(n)[None, :]
    dist = (taps - x[:, None]) * s
    if mode == "linear":
        coeff = np.clip(1 - np.abs(dist), 0, None)
    else:
        coeff = _cubic(dist, a)
    if antialias:
        coeff = coeff / coeff.sum(axis=1, keepdims=True)
    if exclude:
        coeff = np.where((taps < 0) | (taps >= d), 0.0, coeff)
        total = coeff.sum(axis=1, keepdims=True)
        coeff = coeff / np.where(total == 0, 1.0, total)
    w = np.zeros((x.size, d))
    rows = np.repeat(np.arange(x.size), n)
    np.add.at(w, (rows, np.clip(taps, 0, d - 1).reshape(-1)), coeff.reshape(-1))
    return w


def _resample(node: Any, x: Any, plan: Sequence[tuple], mode: str, attrs: dict) -> Any:
    """Apply the per-axis plan ``(axis, in size, out size, scale, roi)`` to ``x``."""
    dtype = np.dtype(node.dtype(x))
    rank = node.rank(x)
    work = x
    widened = False
    for axis, d, o, scale, roi in plan:
        coords, outside = _source_coords(node, attrs["ctm"], d, o, scale, roi)
        if mode == "nearest":
            work = node.op("gather", work, _nearest_index(node, coords, d, attrs["nearest"]),
                           axis=axis)
        else:
            if not widened:
                work = node.op("cast", work, dtype=np.dtype(np.float64))
                widened = True
            w = _weights(coords, d, scale, mode, attrs["a"], attrs["exclude"],
                         attrs["antialias"])
            perm = tuple(i for i in range(rank) if i != axis) + (axis,)
            inv = tuple(int(i) for i in np.argsort(perm))
            moved = node.op("matmul", node.op("permute", work, dims=perm),
                            np.ascontiguousarray(w.T))
            work = node.op("permute", moved, dims=inv)
        if outside is not None and outside.any():
            shape = [1] * rank
            shape[axis] = o
            fill = np.asarray(attrs["extrapolation"], np.float64 if widened else dtype)
            work = node.op("where", outside.reshape(shape), fill, work)
    if not widened:
        return work if work is not x else node.op("identity", x)
    if dtype.kind in "iu":  # the reference rounds and saturates integer results
        info = np.iinfo(dtype)
        work = node.op("maximum", node.op("minimum", node.op("round", work),
                                          np.asarray(float(info.max))),
                       np.asarray(float(info.min)))
    return node.op("cast", work, dtype=dtype)


def _plan(node: Any, shape: Sequence[int], axes: Sequence[int], scales: np.ndarray | None,
          sizes: Sequence[int] | None, roi: np.ndarray | None, policy: str) -> list[tuple]:
    """Per resized axis: (axis, in size, out size, scale, roi pair); identity axes dropped."""
    for i, a in enumerate(axes):
        # a run-time dim (a dynamic batch) is fine where the op leaves it alone: scale 1
        keeps = (sizes is None and scales is not None and i < len(scales)
                 and float(scales[i]) == 1.0 and (roi is None or np.asarray(roi).size == 0))
        if shape[a] < 0 and not keeps:
            raise node.fail(f"Resize of run-time dim {a} is not supported (its weights are "
                            f"built at import)")
    kept = [i for i, a in enumerate(axes) if shape[a] < 0]
    if kept:  # (drop them: the rest of the plan never reads them)
        axes = [a for i, a in enumerate(axes) if i not in kept]
        scales = np.asarray([v for i, v in enumerate(scales) if i not in kept], np.float32)
    if sizes is not None:
        if len(sizes) != len(axes):
            raise node.fail(f"sizes {tuple(sizes)} must give one size per axis {tuple(axes)}")
        factor = [sizes[i] / shape[a] for i, a in enumerate(axes)]
        if policy in ("not_larger", "not_smaller"):
            s = min(factor) if policy == "not_larger" else max(factor)
            factor = [s] * len(axes)
            out = [int(s * shape[a] + 0.5) for a in axes]
        elif policy == "stretch":
            out = [int(v) for v in sizes]
        else:
            raise node.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    elif scales is not None:
        if len(scales) != len(axes):
            raise node.fail(f"scales {tuple(scales)} must give one scale per axis {tuple(axes)}")
        factor = [float(v) for v in scales]
        out = [int(v) for v in (np.asarray(scales) * np.asarray([shape[a] for a in axes]))]
    else:
        raise node.fail("Resize needs scales or sizes")
    rois: list[tuple[float, float] | None] = [None] * len(axes)
    if roi is not None and np.asarray(roi).size:
        r = np.asarray(roi, np.float64).reshape(-1)
        if r.size != 2 * len(axes):  # (starts then ends, one per resized axis)
            raise node.fail(f"roi {tuple(r)} must hold a start and an end per axis {tuple(axes)}")
        rois = [(float(r[i]), float(r[i + len(axes)])) for i in range(len(axes))]
    plan = []
    for i, a in enumerate(axes):
        trivial_roi = rois[i] is None or (math.isclose(rois[i][0], 0.0)
                                          and math.isclose(rois[i][1], 1.0))
        if math.isclose(factor[i], 1.0) and out[i] == shape[a] and trivial_roi:
            continue  # (the reference leaves such an axis untouched)
        plan.append((a, shape[a], out[i], factor[i], rois[i]))
    return plan


def _attrs(node: Any, ctm: str, nearest: str) -> dict:
    return {"ctm": ctm, "nearest": nearest, "a": float(node.attr("cubic_coeff_a", -0.75)),
            "exclude": bool(node.attr("exclude_outside", 0)),
            "antialias": bool(node.attr("antialias", 0)),
            "extrapolation": float(node.attr("extrapolation_value", 0.0))}


def _mode(node: Any, allowed: tuple[str, ...]) -> str:
    mode = node.attr("mode", "nearest")
    if mode == "bilinear":  # (Upsample-7 spelling)
        mode = "linear"
    if mode not in allowed:
        raise node.fail(f"mode {mode!r} is not supported (one of {allowed})")
    return mode


def _upsample(node: Any, scales: Any) -> Any:
    x = node.input(0)
    shape = node.shape(x)
    scales = np.asarray(scales, np.float32).reshape(-1)
    plan = _plan(node, shape, range(len(shape)), scales, None, None, "stretch")
    mode = _mode(node, ("nearest", "linear"))
    return _resample(node, x, plan, mode, _attrs(node, "asymmetric", "floor"))


@converter("Resize", since=10)
def _resize_v10(node):  # Upsample semantics: asymmetric coordinates, nearest rounds down
    return _upsample(node, node.static(1, "scales"))


@converter("Resize", since=11)
def _resize(node):  # roi/scales/sizes inputs and coordinate modes (11), axes, antialias (18)
    x = node.input(0)
    shape = node.shape(x)
    rank = len(shape)
    axes = node.attr("axes")
    axes = list(range(rank)) if axes is None else [int(a) + rank if a < 0 else int(a)
                                                    for a in axes]
    ctm = node.attr("coordinate_transformation_mode", "half_pixel")
    # (roi matters only to tf_crop_and_resize: other modes ignore it, even at run time)
    roi = node.static(1, "roi") if ctm == "tf_crop_and_resize" else None
    scales = node.static(2, "scales") if node.num_inputs > 2 else None
    sizes = node.static_ints(3, "sizes") if node.num_inputs > 3 else None
    if scales is not None and np.asarray(scales).size == 0:
        scales = None
    if sizes is not None and len(sizes) == 0:
        sizes = None
    if scales is not None and sizes is not None:
        raise node.fail("give scales or sizes, not both")
    scales = None if scales is None else np.asarray(scales, np.float32).reshape(-1)
    mode = _mode(node, ("nearest", "linear", "cubic"))
    if mode == "nearest" and node.attr("antialias", 0):
        raise node.fail("antialias applies to linear and cubic modes only")
    plan = _plan(node, shape, axes, scales, sizes, roi,
                 node.attr("keep_aspect_ratio_policy", "stretch"))
    return _resample(node, x, plan, mode,
                     _attrs(node, ctm, node.attr("nearest_mode", "round_prefer_floor")))


@converter("Upsample", since=7)
def _upsample_v7(node):  # scales: an attribute
    return _upsample(node, node.attr("scales"))


@converter("Upsample", since=9)
def _upsample_v9(node):  # scales: an input (deprecated from 10 in favour of Resize)
    return _upsample(node, node.static(1, "scales"))
