"""Load our cached kernels without initializing all of Numba's compiler first.

Numba's disk cache calls ``target_context.refresh()`` before every load: on the first load of a
process that imports and registers every implementation Numba has (its numpy, linalg, random,
typed containers, datetime... modules, and through ``numba.np.arraymath``'s BLAS check all of
``scipy.linalg`` when SciPy is installed). That is ~0.8-1.5 s on this 2-core machine, the
largest part of a warm start (a new process running plans compiled earlier): a warm W1 took
0.4 s to import Numba, ~0.9 s in that refresh and 0.1 s for its two kernel loads and its run.

Loading a cached function needs none of it: the machine code is already compiled; the LLVM
JIT and Numba's runtime (NRT: allocation, reference counts) are all it links against. So the
dispatchers of our own kernels (the generated ones, ``compiler/codegen.py``, and this layer's)
get a cache whose load initializes only the runtime. A miss still compiles as before (Numba's
compiler refreshes the context itself), and a load that fails this way is retried the usual
way, so the worst case is the old cost. Dispatchers of other code are never touched.
``ND4PY_FAST_LOAD=0`` turns it off.

>>> import numba
>>> adopt(numba.njit(lambda x: x + 1))  # not cached (no ``cache=True``): nothing to adopt
False
"""
from __future__ import annotations

import os
import sys
from typing import Any

try:  # Numba's internals: if they moved, our dispatchers just keep Numba's own cache
    from numba.core.caching import FunctionCache
    from numba.core.dispatcher import Dispatcher
    from numba.core.runtime import rtsys
except ImportError:  # pragma: no cover - depends on the Numba version
    FunctionCache = None  # type: ignore[assignment,misc]

ENABLED = os.environ.get("ND4PY_FAST_LOAD", "1") != "0" and FunctionCache is not None

#: fast loads that worked / that fell back to Numba's own (full-refresh) load
stats = {"fast_loads": 0, "fast_load_fallbacks": 0}

if FunctionCache is not None:
    class RuntimeOnlyCache(FunctionCache):
        """A ``FunctionCache`` whose loads initialize Numba's runtime, not its whole compiler."""

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                rtsys.initialize(target_context)
                data = self._load_overload(sig, target_context)
            except Exception:  # noqa: BLE001 - anything: the full load below decides
                data = None
                stats["fast_load_fallbacks"] += 1
            else:
                if data is not None:
                    stats["fast_loads"] += 1
                    return data
            return super().load_overload(sig, target_context)  # miss: the usual path


def adopt(dispatcher: Any) -> bool:
    """Give ``dispatcher`` (a Numba dispatcher with ``cache=True``) the runtime-only load;
    True if it has it now."""
    if not ENABLED or not isinstance(dispatcher, Dispatcher):
        return False
    cache = getattr(dispatcher, "_cache", None)
    if isinstance(cache, RuntimeOnlyCache):
        return True
    if type(cache) is not FunctionCache:  # caching off (a NullCache), or someone else's
        return False
    dispatcher._cache = RuntimeOnlyCache(dispatcher.py_func)
    return True


def adopt_module(module: Any) -> int:
    """``adopt`` every cached dispatcher defined in ``module``; how many have the fast load."""
    return sum(adopt(v) for v in list(vars(module).values()) if isinstance(v, Dispatcher)) \
        if ENABLED else 0


def adopt_kernels() -> int:
    """``adopt_module`` for every module of this layer imported so far."""
    prefix = __name__.rpartition(".")[0] + "."
    return sum(adopt_module(m) for name, m in list(sys.modules.items())
               if name.startswith(prefix) and m is not None)


__all__ = ["ENABLED", "adopt", "adopt_kernels", "adopt_module", "stats"]
