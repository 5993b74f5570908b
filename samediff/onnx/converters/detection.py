"""ONNX converters, detection family: NonMaxSuppression, recorded as the table's
``non_max_suppression`` (samediff/ops/onnx_extra.py): the greedy selection is sequential and
its output length is known only at run time, so it is one value-shaped op."""
from __future__ import annotations

import numpy as np

from ..table import converter


@converter("NonMaxSuppression", since=10)
def _nms(node):
    boxes, scores = node.input(0), node.input(1)
    center = int(node.attr("center_point_box", 0))
    if center not in (0, 1):
        raise node.fail(f"center_point_box must be 0 (corners) or 1 (center, size), "
                        f"got {center}")
    if node.rank(boxes) != 3 or node.rank(scores) != 3:
        raise node.fail(f"boxes must be [batches, boxes, 4] and scores [batches, classes, "
                        f"boxes], got ranks {node.rank(boxes)} and {node.rank(scores)}")
    fdtype = node.dtype(boxes)
    # omitted optional inputs: ONNX's defaults (no boxes kept, IoU threshold 0, no score
    # filter -- that last one is an attribute, so -inf scores still compete)
    limit = node.input(2)
    if limit is None:
        limit = np.zeros(1, np.int64)
    iou = node.input(3)
    if iou is None:
        iou = np.zeros(1, fdtype)
    score = node.input(4)
    score_filter = score is not None
    if score is None:
        score = np.zeros(1, fdtype)
    return node.op("non_max_suppression", boxes, scores, limit, iou, score,
                   center_point_box=center, score_filter=score_filter)
