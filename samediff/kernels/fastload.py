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

A load also leaves the library's linkable IR unparsed until something needs it. Numba keeps, next
to a cached function's machine code, its LLVM bitcode for linking into later callers, and on
every load parsed it and listed all its symbols (~1.5 ms of a ~4 ms load: ~0.04 s of W9's warm
start). A generated kernel is called from Python only: the one symbol its load looks up is its
CPython wrapper, which its own library always defines. So ``LazyLinkLibrary`` parses the bitcode
the first time a caller links it, or a symbol other than a wrapper is asked for.

>>> import numba
>>> adopt(numba.njit(lambda x: x + 1))  # not cached (no ``cache=True``): nothing to adopt
False
"""
from __future__ import annotations

import os
import sys
from typing import Any

try:  # Numba's internals: if they moved, our dispatchers just keep Numba's own cache
    import llvmlite.binding as llvm
    from numba.core.caching import FunctionCache
    from numba.core.codegen import JITCodeLibrary
    from numba.core.dispatcher import Dispatcher
    from numba.core.runtime import rtsys
except ImportError:  # pragma: no cover - depends on the Numba version
    FunctionCache = None  # type: ignore[assignment,misc]

ENABLED = os.environ.get("ND4PY_FAST_LOAD", "1") != "0" and FunctionCache is not None

#: fast loads that worked / that fell back to Numba's own (full-refresh) load; loaded
#: libraries whose linkable IR was parsed after all (linked into a caller, or asked for a
#: symbol other than a wrapper)
stats = {"fast_loads": 0, "fast_load_fallbacks": 0, "lazy_links_parsed": 0}

#: the prefixes of a CPython wrapper's symbol (Numba's ``fndesc.llvm_cpython_wrapper_name``:
#: ``cpython.`` + the function's name, mangled as the namespace ``cpython``)
_WRAPPER_PREFIXES = ("_ZN7cpython", "cpython.")
#: libraries that joined the JIT by a fast load (a load that fails after that must not be
#: retried: the retry would define the same symbols twice)
_joined = [0]

if FunctionCache is not None:
    class LazyLinkLibrary(JITCodeLibrary):
        """A JIT library loaded from object code that parses its linkable bitcode on first
        need (module docstring). It is only ever made by ``_unserialize`` below."""

        _bitcode: bytes | None = None

        @property  # type: ignore[override]
        def _shared_module(self) -> Any:
            """Numba's module for linking into callers: parsed (and its symbols registered
            with the JIT, as Numba's load does) on first access."""
            if self.__dict__.get("_linkable") is None and self._bitcode is not None:
                self._parse_bitcode()
            return self.__dict__.get("_linkable")

        @_shared_module.setter
        def _shared_module(self, module: Any) -> None:
            self.__dict__["_linkable"] = module

        def _parse_bitcode(self) -> None:
            bitcode, self._bitcode = self._bitcode, None
            module = llvm.parse_bitcode(bitcode)
            self.__dict__["_linkable"] = module
            self._codegen._engine._load_defined_symbols(module)
            stats["lazy_links_parsed"] += 1

        def get_pointer_to_function(self, name: str) -> int:
            bitcode = self._bitcode
            if bitcode is not None:
                # A wrapper is defined by its own function's library and declared by none;
                # its name in the bitcode's string table means this library defines it.
                if name.startswith(_WRAPPER_PREFIXES) and name.encode() in bitcode:
                    self._codegen._engine._defined_symbols.add(name)
                else:
                    self._parse_bitcode()
            return super().get_pointer_to_function(name)

        @classmethod
        def _unserialize(cls, codegen: Any, state: Any) -> Any:
            name, kind, data = state
            if kind != "object":
                return JITCodeLibrary._unserialize(codegen, state)
            object_code, bitcode = data
            library = cls(codegen, name)
            library.enable_object_caching()
            library._set_compiled_object(object_code)
            library._bitcode = bitcode
            _joined[0] += 1  # (before: a failure inside may come after the code joined)
            library._finalize_final_module()  # the machine code joins the JIT
            return library

    class RuntimeOnlyCache(FunctionCache):
        """A ``FunctionCache`` whose loads initialize Numba's runtime, not its whole compiler,
        and leave the library's linkable IR unparsed (``LazyLinkLibrary``). (Its entries are
        Numba's own: a function is found under the same key whether or not it was adopted
        when it was saved -- a compile helper saves functions it never adopted.)"""

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            codegen = target_context.codegen()
            joined = _joined[0]
            try:
                rtsys.initialize(target_context)
                usual = codegen._library_class
                if usual is not JITCodeLibrary:  # another codegen's libraries: as they are
                    data = self._load_overload(sig, target_context)
                else:  # (Numba's compile lock is held: no other library is made meanwhile)
                    codegen._library_class = LazyLinkLibrary
                    try:
                        data = self._load_overload(sig, target_context)
                    finally:
                        codegen._library_class = usual
            except Exception:  # noqa: BLE001 - anything: the full load below decides
                if _joined[0] != joined:
                    raise
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
