"""Sample rows of the ops in samediff/ops/onnx_extra.py (``bitcast``, ``non_max_suppression``),
added to op_samples.SAMPLES like the other families' rows. References are written from the
definitions: ``struct`` packing of each element's bytes, and the greedy NMS loop in plain
Python arithmetic."""
from __future__ import annotations

import struct

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import idx, u
except ImportError:  # ... or tests/ became one
    from .op_references import idx, u

#: struct codes (little endian) of the dtypes the bitcast samples use
_CODE = {"float32": "<f", "int32": "<i", "uint32": "<I", "float64": "<d", "int64": "<q",
         "uint64": "<Q", "int16": "<h", "uint16": "<H", "int8": "<b", "uint8": "<B"}


def _bitcast_ref(source: str):
    """Each element packed as ``source`` and unpacked as the target dtype."""
    def ref(x, *, dtype):
        target = np.dtype(dtype).name
        vals = [struct.unpack(_CODE[target], struct.pack(_CODE[source], v))[0]
                for v in np.asarray(x).reshape(-1).tolist()]
        return np.array(vals, dtype=target).reshape(np.shape(x))
    return ref


def _iou_suppresses(a, b, center, threshold) -> bool:
    """Whether boxes ``a`` and ``b`` overlap by an IoU above ``threshold`` (ONNX's rule: a
    box of no area, or no positive intersection, suppresses nothing)."""
    def span(box):
        if center:
            return (box[0] - box[2] / 2, box[0] + box[2] / 2,
                    box[1] - box[3] / 2, box[1] + box[3] / 2)
        return (min(box[1], box[3]), max(box[1], box[3]),
                min(box[0], box[2]), max(box[0], box[2]))
    ax0, ax1, ay0, ay1 = span(a)
    bx0, bx1, by0, by1 = span(b)
    w = min(ax1, bx1) - max(ax0, bx0)
    h = min(ay1, by1) - max(ay0, by0)
    if w <= 0 or h <= 0:
        return False
    inter = w * h
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def _nms_ref(boxes, scores, max_output, iou_threshold, score_threshold, *, center_point_box,
             score_filter):
    """Per batch and class: boxes by descending score (ties: lower index), each kept unless a
    kept box suppresses it, until the limit."""
    limit = max(int(np.asarray(max_output).reshape(-1)[0]), 0)
    iou_t = float(np.asarray(iou_threshold).reshape(-1)[0])
    score_t = float(np.asarray(score_threshold).reshape(-1)[0])
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            cands = [i for i in range(boxes.shape[1])
                     if not score_filter or scores[b, c, i] > score_t]
            cands.sort(key=lambda i: (-scores[b, c, i], i))
            kept: list[int] = []
            for i in cands:
                if len(kept) == limit:
                    break
                if not any(_iou_suppresses(boxes[b, i], boxes[b, j], center_point_box, iou_t)
                           for j in kept):
                    kept.append(i)
            rows += [[b, c, i] for i in kept]
    return np.array(rows, np.int64).reshape(len(rows), 3)


def onnx_extra_samples(S) -> dict:
    """The rows of every op of samediff/ops/onnx_extra.py (``S`` is ``op_samples.Sample``)."""
    # corner boxes [y1, x1, y2, x2] with clear overlaps and distinct scores
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                       [0.0, 10.0, 1.0, 11.0], [1.0, 10.1, 0.0, 11.1], [0.0, 100.0, 1.0, 101.0]],
                      [[0.5, 0.5, 2.5, 2.5], [0.0, 0.0, 2.0, 2.0], [5.0, 5.0, 6.0, 6.0],
                       [0.6, 0.4, 2.4, 2.6], [9.0, 9.0, 9.0, 9.5], [0.0, 0.0, 0.5, 0.5]]])
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.7, 0.2, 0.65, 0.4]],
                       [[0.35, 0.9, 0.55, 0.7, 0.8, 0.45], [0.5, 0.5, 0.5, 0.1, 0.2, 0.9]]])
    centers = np.array([[[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0],
                         [0.5, 10.5, 1.0, 1.0], [0.5, 10.6, 1.0, 1.0], [3.0, 3.0, 2.0, 0.5]]])

    def thr(v):
        return np.array([v])

    return {
        "bitcast": [
            S([u(2, 3)], {"dtype": "int32"}, _bitcast_ref("float32"), dtypes=("float32",),
              out_dtype="int32", smooth=False),
            S([u(4)], {"dtype": "uint64"}, _bitcast_ref("float64"), dtypes=("float64",),
              out_dtype="uint64", smooth=False),
            S([idx([[1065353216, -1082130432], [0, 2143289344]], np.int32)],
              {"dtype": "float32"}, _bitcast_ref("int32"), out_dtype="float32", smooth=False),
            S([idx([0, 1, 127, 128, 255], np.uint8)], {"dtype": "int8"}, _bitcast_ref("uint8"),
              out_dtype="int8", smooth=False),
        ],
        "non_max_suppression": [
            S([boxes, scores, idx([3]), thr(0.5), thr(0.0)], {}, _nms_ref, out_dtype="int64",
              smooth=False),
            S([boxes, scores, idx([2]), thr(0.3), thr(0.6)], {}, _nms_ref, out_dtype="int64",
              smooth=False),  # the score filter drops the low ones
            S([boxes, scores, idx([10]), thr(0.0), thr(0.99)], {"score_filter": False},
              _nms_ref, out_dtype="int64", smooth=False),  # any overlap suppresses
            S([centers, scores[:1], idx([4]), thr(0.4), thr(0.0)], {"center_point_box": 1},
              _nms_ref, out_dtype="int64", smooth=False),
        ],
    }
