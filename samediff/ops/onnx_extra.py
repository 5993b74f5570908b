"""Table ops added for ONNX import (misc family): see samediff/onnx/converters/detection.py
and extra.py.

* ``bitcast``: reinterpret each element's bytes as another dtype of the same width (ONNX
  ``BitCast``). Not a value conversion, so nothing composes it; no gradient flows through a
  reinterpretation of bits.
* ``non_max_suppression``: greedy per-(batch, class) box selection by score with IoU
  suppression (ONNX ``NonMaxSuppression``). The greedy loop is sequential (each choice
  depends on every earlier one) and the number of selected boxes is only known once it runs
  (``value_shaped``), so it is one op; it selects indices, which have no gradient.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .registry import NONDIFF, Attr, TensorType, define

_I64 = np.dtype(np.int64)


# --- bitcast -----------------------------------------------------------------------------------

def _bitcast_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    if x.dtype.itemsize != a.dtype.itemsize:
        raise ValueError(f"bitcast needs dtypes of one width: {x.dtype} has "
                         f"{x.dtype.itemsize * 8} bits, {a.dtype} {a.dtype.itemsize * 8}")
    return TensorType(x.shape, a.dtype)


def _bitcast(x, *, dtype):
    x = np.asarray(x)
    # ONNX reads the bytes as little endian: a big-endian input is byte-swapped first
    little = x.astype(x.dtype.newbyteorder("<"), copy=False)
    # (ascontiguousarray makes a 0-d array 1-d: the shape is restored after the view)
    out = np.ascontiguousarray(little).view(dtype.newbyteorder("<")).reshape(x.shape)
    return out.astype(dtype, copy=True)  # (own buffer, native order)


define("bitcast", ["x"], _bitcast_infer, _bitcast,
       attrs={"dtype": (Attr.DTYPE, np.dtype(np.int32))}, namespace="math", grad=NONDIFF,
       storage=True,
       doc="Each element's little-endian bytes reinterpreted as ``dtype`` (which must have the "
           "same width): the bit pattern is kept, not the value (ONNX ``BitCast``; numpy "
           "``view``).")


# --- non_max_suppression -------------------------------------------------------------------------

def _nms_infer(types: list[TensorType], a: Any) -> TensorType:
    boxes, scores, max_out, iou, score = types
    if boxes.rank != 3 or (boxes.shape[2] >= 0 and boxes.shape[2] != 4):
        raise ValueError(f"boxes must be [batches, boxes, 4], got {list(boxes.shape)}")
    if scores.rank != 3:
        raise ValueError(f"scores must be [batches, classes, boxes], got {list(scores.shape)}")
    for t, what in ((boxes, "boxes"), (scores, "scores"), (iou, "iou_threshold"),
                    (score, "score_threshold")):
        if t.dtype.kind != "f":
            raise ValueError(f"{what} must be floating point, got {t.dtype}")
    if max_out.dtype.kind not in "iu":
        raise ValueError(f"max_output_boxes_per_class must be an integer, got {max_out.dtype}")
    if a.center_point_box not in (0, 1):
        raise ValueError(f"center_point_box must be 0 or 1, got {a.center_point_box}")
    return TensorType((-1, 3), _I64)


def _corners(boxes: np.ndarray, center: bool) -> tuple:
    """(x_min, x_max, y_min, y_max) of every box, in the boxes' dtype."""
    if center:  # [x_center, y_center, width, height]
        half_w, half_h = boxes[:, 2] / 2, boxes[:, 3] / 2
        return (boxes[:, 0] - half_w, boxes[:, 0] + half_w,
                boxes[:, 1] - half_h, boxes[:, 1] + half_h)
    # [y1, x1, y2, x2]: any diagonal pair of corners
    return (np.minimum(boxes[:, 1], boxes[:, 3]), np.maximum(boxes[:, 1], boxes[:, 3]),
            np.minimum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 0], boxes[:, 2]))


def _overlaps(c: tuple, i: int, chosen: list[int], iou_threshold) -> bool:
    """Whether box ``i`` overlaps one of ``chosen`` by an IoU strictly above the threshold
    (boxes without a positive intersection, or of zero area, never suppress)."""
    if not chosen:
        return False
    x0, x1, y0, y1 = c
    j = np.asarray(chosen)
    ix = np.minimum(x1[i], x1[j]) - np.maximum(x0[i], x0[j])
    iy = np.minimum(y1[i], y1[j]) - np.maximum(y0[i], y0[j])
    inter = ix * iy
    area_i = (x1[i] - x0[i]) * (y1[i] - y0[i])
    area_j = (x1[j] - x0[j]) * (y1[j] - y0[j])
    union = area_i + area_j - inter
    ok = (ix > 0) & (iy > 0) & (inter > 0) & (area_i > 0) & (area_j > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / np.where(ok, union, 1)
    return bool(np.any(ok & (iou > iou_threshold)))


def _one(v: Any, what: str):
    v = np.asarray(v).reshape(-1)
    if v.size > 1:
        raise ValueError(f"{what} must hold one value, got {v.size}")
    return v[0] if v.size else None


def _nms(boxes, scores, max_output, iou_threshold, score_threshold, *, center_point_box,
         score_filter):
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    if boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
        raise ValueError(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} disagree "
                         f"on the batch or box count")
    limit = _one(max_output, "max_output_boxes_per_class")
    limit = 0 if limit is None else max(int(limit), 0)
    iou_t = _one(iou_threshold, "iou_threshold")
    iou_t = boxes.dtype.type(0 if iou_t is None else iou_t)
    score_t = _one(score_threshold, "score_threshold")
    found = []
    for b in range(boxes.shape[0]):
        c = _corners(boxes[b], bool(center_point_box))
        for k in range(scores.shape[1]):
            s = scores[b, k]
            candidates = np.arange(s.size)
            if score_filter and score_t is not None:
                candidates = candidates[s > score_t]
            # highest score first; equal scores: the lower box index first
            order = candidates[np.lexsort((candidates, -s[candidates]))]
            chosen: list[int] = []
            for i in order:
                if len(chosen) >= limit:
                    break
                if not _overlaps(c, int(i), chosen, iou_t):
                    chosen.append(int(i))
            found += [(b, k, i) for i in chosen]
    return np.array(found, np.int64).reshape(len(found), 3)


define("non_max_suppression", ["boxes", "scores", "max_output", "iou_threshold",
                               "score_threshold"], _nms_infer, _nms,
       attrs={"center_point_box": (Attr.INT, 0), "score_filter": (Attr.BOOL, True)},
       method=False, namespace="cnn", value_shaped=True, grad=NONDIFF,
       doc="Greedy non-maximum suppression per (batch, class): boxes ``[B, N, 4]`` (corners "
           "``[y1, x1, y2, x2]``, or ``[xc, yc, w, h]`` with ``center_point_box=1``) taken by "
           "descending score (``scores [B, C, N]``, ties by lower index), skipping any whose "
           "IoU with an already taken box is above ``iou_threshold``, at most ``max_output`` "
           "per class; with ``score_filter`` only scores above ``score_threshold`` compete. "
           "Returns int64 ``[count, 3]`` rows ``(batch, class, box)`` (ONNX "
           "``NonMaxSuppression``).")
