"""Basic indexing keys (``x[0, 1:3, None, ...]``) as canonical, hashable attribute values.

``strided_slice`` stores its key as a plain tuple so that it is hashable, comparable and JSON
serializable like every other attribute: each item is an int, ``("slice", start, stop, step)``
(each may be None), ``"newaxis"`` or ``"ellipsis"``. Advanced indexing (arrays, lists, masks)
is a different op (``gather``) and is rejected here with a pointer to it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

_NEWAXIS, _ELLIPSIS, _SLICE = "newaxis", "ellipsis", "slice"


def index_to_spec(key: Any) -> tuple:
    """Canonical form of a basic-indexing key, the ``index`` attribute of ``strided_slice``.

    Raises ``TypeError`` for keys that are not basic indexing (arrays, lists, bool masks).

    >>> index_to_spec((0, slice(None, 2), None, ...))
    (0, ('slice', None, 2, None), 'newaxis', 'ellipsis')
    """
    spec = tuple(_index_item(k) for k in (key if isinstance(key, tuple) else (key,)))
    if spec.count(_ELLIPSIS) > 1:
        raise ValueError("an index can only have a single ellipsis ('...')")
    return spec


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _index_item(k: Any) -> Any:
    if k is None:
        return _NEWAXIS
    if k is Ellipsis:
        return _ELLIPSIS
    if _is_int(k):
        return int(k)
    if isinstance(k, slice):
        bounds = (k.start, k.stop, k.step)
        if not all(v is None or _is_int(v) for v in bounds):
            raise TypeError(f"slice bounds must be ints or None, got {k!r}")
        if k.step == 0:
            raise ValueError("slice step cannot be zero")
        return (_SLICE, *(None if v is None else int(v) for v in bounds))
    raise TypeError(f"unsupported index {k!r} (type {type(k).__name__}): only ints, slices, "
                    f"None (newaxis) and ... are supported (basic slicing); to select by an "
                    f"array or list of indices use gather, for a boolean mask use where")


def spec_to_index(spec: Sequence[Any]) -> tuple:
    """The Python indexing key for a canonical spec (inverse of ``index_to_spec``).

    >>> spec_to_index((0, ("slice", None, 2, None), "newaxis", "ellipsis"))
    (0, slice(None, 2, None), None, Ellipsis)
    """
    out: list[Any] = []
    for item in spec:
        if _is_int(item):
            out.append(int(item))
        elif item == _NEWAXIS:
            out.append(None)
        elif item == _ELLIPSIS:
            out.append(Ellipsis)
        elif (isinstance(item, tuple) and len(item) == 4 and item[0] == _SLICE
              and all(v is None or _is_int(v) for v in item[1:]) and item[3] != 0):
            out.append(slice(*item[1:]))
        else:
            raise ValueError(f"invalid index item {item!r}: expected an int, ('slice', start, "
                             f"stop, step) with a non-zero step, 'newaxis' or 'ellipsis'")
    if out.count(Ellipsis) > 1:
        raise ValueError("an index can only have a single ellipsis ('...')")
    return tuple(out)


def indexed_shape(shape: Sequence[int], spec: Sequence[Any]) -> tuple[int, ...]:
    """Shape of ``x[spec_to_index(spec)]`` for ``x`` of ``shape``; -1 dims stay unknown."""
    index = spec_to_index(spec)
    rank = len(shape)
    consumed = sum(1 for k in index if k is not None and k is not Ellipsis)
    if consumed > rank:
        raise IndexError(f"too many indices: {consumed} for an array of rank {rank}")
    pos, out = 0, []
    for k in index:
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            out.extend(shape[pos:pos + rank - consumed])
            pos += rank - consumed
        else:
            d, pos = shape[pos], pos + 1
            if isinstance(k, slice):
                out.append(len(range(*k.indices(d))) if d >= 0 else -1)
            elif d >= 0 and not -d <= k < d:
                raise IndexError(f"index {k} is out of range for dim {pos - 1} of size {d}")
    return tuple(out) + tuple(shape[pos:])
