"""ND4J's positional call forms of the cnn layout ops, rewritten to the ops' own order
(``OVERLOADS`` in ``nd4j.py``). Each rewrites only calls that match its ND4J pattern and
leaves every other call (nd4py's own order, keywords) alone.

* ``upsampling2d(input, scaleH, scaleW, nchw)`` and the older ``upsampling2d(input, nchw,
  scaleH, scaleW)``; ``upsampling3d(input, ncdhw, scaleD, scaleH, scaleW)``;
* ``batchToSpace(x, blocks, croppingTop, croppingBottom)`` and ``spaceToBatch(x, blocks,
  paddingTop, paddingBottom)``: ND4J builds its ``[M, 2]`` crops/paddings matrix from these
  two rows (``new int[][]{croppingTop, croppingBottom}``), so they are the (begin, end) pair
  of the first and of the second spatial axis.

>>> _upsampling_overload(2)(("x", True, 2, 3))
('x', (2, 3), 'NCHW')
>>> _rows_overload(("x", [2, 2], [0, 0], [1, 0]))
('x', (2, 2), ((0, 0), (1, 0)))
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _upsampling_overload(n: int):
    formats = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}[n]

    def rewrite(args: tuple) -> tuple:
        if len(args) != n + 2:
            return args
        x, rest = args[0], args[1:]
        if _is_bool(rest[0]) and all(_is_int(s) for s in rest[1:]):  # (x, nchw, scales...)
            flag, scales = rest[0], rest[1:]
        elif _is_bool(rest[-1]) and all(_is_int(s) for s in rest[:-1]):  # (x, scales..., nchw)
            flag, scales = rest[-1], rest[:-1]
        else:
            return args
        return (x, tuple(int(s) for s in scales), formats[0] if flag else formats[1])
    return rewrite


def _is_row(v: Any) -> bool:
    return isinstance(v, (list, tuple, np.ndarray)) and len(v) == 2 and all(
        _is_int(e) for e in v)


def _rows_overload(args: tuple) -> tuple:
    if len(args) != 4 or not (_is_row(args[2]) and _is_row(args[3])):
        return args
    x, blocks, top, bottom = args
    return (x, tuple(int(b) for b in blocks), (tuple(int(e) for e in top),
                                               tuple(int(e) for e in bottom)))


CNN_OVERLOADS = {"upsampling2d": _upsampling_overload(2), "upsampling3d": _upsampling_overload(3),
                 "batch_to_space": _rows_overload, "space_to_batch": _rows_overload}
