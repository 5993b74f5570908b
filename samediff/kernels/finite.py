"""``all_finite``: whether a step's loss and gradients hold no NaN and no infinity.

``StepPlan`` (``training/step.py``, through ``training/finite.py``) calls it between the
gradient plan and the update plan, so a step whose loss or gradients are not finite never
reaches the update, which writes the parameters and updater state in place. It runs once
per step next to a whole forward and backward pass, so it must be cheap and exact:

* **bit tests, no arithmetic**: an IEEE float is non-finite exactly when its exponent bits are
  all ones, so the check reads the bits as unsigned integers and counts those elements. Nothing
  can overflow (a ``sum(g)`` test gives false alarms for large finite gradients), and the
  integer reduction vectorizes without fast-math flags: ~12 us for a 784x256 float32 gradient,
  ~1.5 us for a small one, the Python around the call included;
* float16 and other dtypes go through ``np.isfinite`` (integers and bools are always finite);
* while the kernels compile in ``"background"``/``"interpret"`` compile modes
  (``kernels.compiling``), their numpy twin ``np.isfinite(x).all()`` answers: the same
  True/False, exactly.

>>> import numpy as np
>>> all_finite(np.float32(1.5), np.ones((3, 2), np.float32))
True
>>> all_finite(np.float32(1.5), np.array([1.0, np.inf], np.float32))
False
"""
from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from . import compiling, spin, workers
from .jit_options import PYTHON_CALLERS

#: arrays of at least this many elements are checked in two halves at once (``workers``).
#: Below it one core is faster: a serial pass over a 1 MB gradient takes ~12 us, and handing
#: half to another thread costs about as much when it sleeps (far more when other processes
#: share the cores)
_PARALLEL = 1 << 20

_MASK32, _MASK64 = np.uint32(0x7F800000), np.uint64(0x7FF0000000000000)  # exponent bits


@numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)
def _count(bits: Any, mask: Any, go: tuple) -> int:
    """How many elements of ``bits`` (a float array's bits, as unsigned integers) have all
    exponent bits set (NaN or +-inf). ``go``: the gate token of ``workers.on_halves``,
    announced once the GIL is let go."""
    spin.announce(go)
    bad = 0
    for i in range(bits.size):
        bad += (bits[i] & mask) == mask
    return bad


#: the unsigned integer type a float dtype's bits are read as, and its exponent mask. (The
#: bit view is taken in Python, ~0.35 us a call: Numba's ``ndarray.view`` took 0.2-0.3 s of
#: the kernel's cold compile, three quarters of it.)
_BITS = {np.dtype(np.float32): (np.uint32, _MASK32), np.dtype(np.float64): (np.uint64, _MASK64)}


def _warm(key: tuple) -> None:
    """Compile (or load) the kernel ``key`` names (``("finite", dtype)``)."""
    bits, mask = _BITS[key[1]]
    _count(np.ones(1, bits), mask, workers.NO_GO)


def _finite(x: Any) -> bool:
    """Whether every element of ``x`` (an array or a Python/numpy scalar) is finite."""
    arr = np.asarray(x)
    bits = _BITS.get(arr.dtype)
    if bits is None:  # float16 and other types: numpy decides (ints and bools are finite)
        return arr.dtype.kind in "biu" or bool(np.isfinite(arr).all())
    if arr.ndim == 0:  # the loss
        return math.isfinite(arr.item())
    # flat and C-contiguous (a library op's view, a transpose, is copied): the kernels compile
    # once per dtype, not once per rank and layout
    flat = np.ascontiguousarray(arr).reshape(-1)
    if not compiling.ready(("finite", arr.dtype), _warm):
        return bool(np.isfinite(arr).all())  # the numpy twin while the kernel compiles
    view, mask = flat.view(bits[0]), bits[1]
    if flat.size >= _PARALLEL:  # two halves of the flat array at once: the counts add up
        parts = workers.halves(flat.size, flat.size, _PARALLEL)
        counts = workers.on_halves(parts,
                                   lambda part, go: _count(view[part.start:part.stop], mask, go))
        return sum(counts) == 0
    return _count(view, mask, workers.NO_GO) == 0


def all_finite(*values: Any) -> bool:
    """True when every element of every value is finite (no NaN, no +-inf)."""
    return all(_finite(v) for v in values)

