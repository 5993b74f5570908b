"""What a kernel derives from an array that never changes, kept while that array lives:
onnxruntime's prepacking of initializers, for nd4py's constants.

A convolution derives from its weights a Winograd filter transform (``U [36, C, O]``: 0.17 ms
at 128x128 channels) or an ``[O, kH*kW*C]`` transposed copy (0.09 ms at 128x128, ~9 ms at
512x512 -- more than the convolution itself at batch 1) on every call; for frozen weights
``derived`` does it once.

Frozen arrays are the ones ``freeze`` registered -- a SameDiff CONSTANT's value (``ir.Var``;
``get_arr`` hands out a read-only view of it, ``set_array`` replaces it) and a compiled plan's
folded constants -- and views of them, or arrays that, with every array they view, are
read-only. Registering changes nothing in the array: its flags stay as they were, so Numba
kernels see the same argument types with or without this (a read-only array is another type
to Numba: another compile). Whoever registers an array promises not to write it while it is
registered (``thaw`` ends that: ``gradcheck`` perturbs constants in place).

Entries are keyed by the owner (the array at the end of the view chain, held by a weak
reference: its entries go when it does), the view's address, shape, strides and dtype, and
what was derived; least recently used ones go beyond ``BUDGET_BYTES``.

>>> import numpy as np
>>> w = freeze(np.ones((2, 3)))
>>> derived(w.T, "copy", np.ascontiguousarray) is derived(w.T, "copy", np.ascontiguousarray)
True
>>> is_frozen(w[:, 1:]), is_frozen(np.ones(2))
(True, False)
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

__all__ = ["freeze", "thaw", "is_frozen", "derived", "clear", "held_bytes", "BUDGET_BYTES"]

#: At most this many bytes of derived arrays are kept (least recently used go first); 0 keeps
#: none. ``ND4PY_DERIVED_MB`` sets it (default 512 MiB).
BUDGET_BYTES = int(float(os.environ.get("ND4PY_DERIVED_MB", "512")) * (1 << 20))

_lock = threading.RLock()  # (an owner's finalizer may run while an entry is being dropped)
_frozen: dict[int, weakref.ref] = {}   # id(owner) -> the registered owner
_entries: OrderedDict = OrderedDict()  # key -> (weakref to the owner, value, bytes)
_by_owner: dict[int, set] = {}          # id(owner) -> its keys
_held = 0


def _owner_of(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def freeze(a: np.ndarray) -> np.ndarray:
    """Register ``a`` (an array owning its memory) as never written from now on; returns it."""
    if isinstance(a, np.ndarray) and a.base is None:
        with _lock:
            if _registered(a):
                return a
            _forget(id(a))  # a dead array's entries under a reused id
            _frozen[id(a)] = weakref.ref(a)
            weakref.finalize(a, _forget, id(a))
    return a


def thaw(a: np.ndarray) -> None:
    """``a`` (registered by ``freeze``) may be written again: what was derived from it goes."""
    with _lock:
        if _registered(a):
            _forget(id(a))


def _registered(owner: np.ndarray) -> bool:
    ref = _frozen.get(id(owner))
    return ref is not None and ref() is owner


def _frozen_owner(a: np.ndarray) -> np.ndarray | None:
    """The owner at the end of ``a``'s view chain when it is registered, or when the whole
    chain is read-only (down to no base, or to bytes); else None."""
    read_only = True
    while True:
        read_only = read_only and not a.flags.writeable
        if not isinstance(a.base, np.ndarray):
            break
        a = a.base
    if _registered(a) or read_only and (a.base is None or isinstance(a.base, bytes)):
        return a
    return None


def is_frozen(a: Any) -> bool:
    """Whether nothing writes ``a``: a view of a ``freeze`` d array, or read-only throughout."""
    return isinstance(a, np.ndarray) and _frozen_owner(a) is not None


def derived(a: np.ndarray, what: str, make: Callable[[np.ndarray], Any]) -> Any:
    """``make(a)``, computed once per frozen ``a`` (per ``what``) and then kept; for any other
    ``a`` computed on every call. Callers only read what it returns."""
    owner = _frozen_owner(a) if BUDGET_BYTES > 0 else None
    if owner is None:
        return make(a)
    key = (id(owner), what, a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
    with _lock:
        hit = _entries.get(key)
        if hit is not None and hit[0]() is owner:
            _entries.move_to_end(key)
            return hit[1]
    value = make(a)
    if isinstance(value, np.ndarray) and _owner_of(value) is not owner \
            and value.nbytes <= BUDGET_BYTES:
        _keep(key, owner, value)  # (a view of the owner costs nothing to remake)
    return value


def _keep(key: tuple, owner: np.ndarray, value: np.ndarray) -> None:
    global _held
    with _lock:
        _drop(key)
        oid = key[0]
        if oid not in _by_owner:
            _by_owner[oid] = set()
            if oid not in _frozen:  # (registered owners' finalizers are already set)
                weakref.finalize(owner, _forget, oid)
        _by_owner[oid].add(key)
        _entries[key] = (weakref.ref(owner), value, value.nbytes)
        _held += value.nbytes
        while _held > BUDGET_BYTES and _entries:
            _drop(next(iter(_entries)))


def _drop(key: tuple) -> None:
    global _held
    entry = _entries.pop(key, None)
    if entry is not None:
        _held -= entry[2]
        keys = _by_owner.get(key[0])
        if keys is not None:
            keys.discard(key)


def _forget(oid: int) -> None:
    """The owner is gone (or thawed): its registration and entries go."""
    with _lock:
        _frozen.pop(oid, None)
        for key in list(_by_owner.pop(oid, ())):
            _drop(key)


def clear() -> None:
    """Drop every kept value (registrations stay)."""
    with _lock:
        for key in list(_entries):
            _drop(key)


def held_bytes() -> int:
    """Bytes of derived arrays kept now."""
    return _held
