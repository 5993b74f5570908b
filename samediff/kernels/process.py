"""Process-wide settings, applied once when ``samediff`` is imported (``apply()``).

**Malloc thresholds.** Keep freed array memory in the process instead of returning it to the
OS at every free. glibc serves large allocations (above ``M_MMAP_THRESHOLD``, 128 KiB to
start) with fresh ``mmap`` s and gives freed heap tops back (above ``M_TRIM_THRESHOLD``).
Every op result is a new numpy array, so a training step of a small CNN mapped and unmapped the same few hundred KiB
dozens of times per step, and each first touch of a fresh page is a page fault: measured on
the W7 LeNet step (2 cores, a VM where faults are dear), 5.0-5.1 ms per step with glibc's
defaults against 3.9 ms with large arrays kept on the heap (a relu over 147k floats: 0.16 ms
in the step, 0.016 ms on a warm buffer). PyTorch avoids the same cost with its caching
allocator; numpy has none for arrays this size.

``tune()`` raises both thresholds (arrays up to ``MMAP_THRESHOLD`` come from the heap; up to
``TRIM_THRESHOLD`` of free heap top is kept for reuse). The cost: freed memory up to that much
stays in the process (RSS) until reused. It runs when ``samediff`` is imported, on glibc only;
set ``ND4PY_MALLOC_TUNING=0`` to keep the process's allocator as it was (or set glibc's own
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``, which win).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["apply", "tune", "applied"]

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_THRESHOLD = 32 << 20   # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 128 << 20

#: whether ``tune()`` changed the allocator in this process
applied = False


def tune() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module docstring); returns whether it
    did (False: not glibc, opted out, or the user set glibc's variables)."""
    global applied
    if applied:
        return True
    if (os.environ.get("ND4PY_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux")
            or any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"))):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return applied


def apply() -> None:
    """``tune()`` the allocator. (nd4py sets no OpenMP wait policy: it runs no OpenMP pool
    since its fused kernels split in halves on ``workers``' helper instead of ``prange``.)"""
    tune()  # large arrays stay on the heap: no page faults per op
