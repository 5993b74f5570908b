"""The kernels and process runtime: compiled code the op table calls, and what it runs on.

The bottom layer of ``samediff``: it imports numpy, Numba/llvmlite, the BLAS wheel and the
standard library -- nothing of the op table, the compiler or anything above
(``tests/test_import_layers.py`` checks).

* ``cnn`` -- convolution and pooling drivers; ``im2col``, ``winograd`` -- their GEMM routes;
  ``geometry`` -- window arithmetic shared with the ops' shape inference (no Numba);
* ``matmul`` -- 2-D products on numpy's BLAS or split over two threads on the private BLAS
  (``blas``), whichever ``routes`` measured faster for the shape class on this machine;
* ``compiling`` -- the compile mode and the one compile thread: in background mode a kernel
  not compiled yet is no route (numpy's run meanwhile); ``split`` -- halves in turn until
  the helper's hand-off is compiled;
* ``finite`` -- the bit-test NaN/inf count training runs after each gradient;
* ``workers`` -- the helper thread; ``spin`` -- its native spin-wait hand-off;
* ``forksafe`` -- the at-fork gate every BLAS-calling driver passes (no Numba import);
* ``fastload`` -- loads cached kernels without initializing Numba's whole compiler;
* ``process`` -- process-wide settings: glibc malloc thresholds.

Importing this package loads none of them. The op table holds ``lazy("cnn")`` proxies, so
Numba is imported (and cached kernels loaded) by the first op that runs a kernel, never by
``import nd4py``.

>>> from samediff.kernels import lazy
>>> geo = lazy("geometry")
>>> geo.axis_pads(5, 3, 1, 1, "same")
(1, 1, 5)
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__all__ = ["lazy"]


class _LazyModule:
    """Stands for ``samediff.kernels.<name>`` and imports it on first attribute access.

    Every access goes to the real module (after ~0.1 us of lookup), so a value rebound
    there later (a test's monkeypatch, a flag) is seen here too."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattribute__(self, attr: str) -> Any:
        # every lookup lands here (not in __getattr__, which Python reaches only after a failed
        # normal lookup has raised and caught an AttributeError: ~1 us on each kernel call)
        module = _get(self, "_module")
        if module is None:
            module = importlib.import_module(f"{__name__}.{_get(self, '_name')}")
            if "numba" in sys.modules:  # its kernels (and those it imported) load fast
                importlib.import_module(f"{__name__}.fastload").adopt_kernels()
            _set(self, "_module", module)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "loaded" if _get(self, "_module") is not None else "not loaded"
        return f"<lazy module {__name__}.{_get(self, '_name')} ({state})>"


_get, _set = object.__getattribute__, object.__setattr__


_proxies: dict[str, _LazyModule] = {}


def lazy(name: str) -> Any:
    """A stand-in for the kernel module ``samediff.kernels.<name>`` that imports it (and so
    Numba) on first attribute access -- for callers that must import cheaply.

    >>> lazy("matmul") is lazy("matmul")
    True
    """
    proxy = _proxies.get(name)
    if proxy is None:
        proxy = _proxies[name] = _LazyModule(name)
    return proxy
