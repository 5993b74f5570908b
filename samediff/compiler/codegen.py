"""Render a fused elementwise group to Python source and load it as Numba kernels.

A group is described by a ``KernelSpec`` (hashable, shape-generic: ranks, dtypes and broadcast
patterns, never sizes). Its source defines one serial kernel, ``kernel`` (and ``kernel_io``,
below); a large group runs it on two halves of its outer loop at once
(``workers.split_leading``), not as a Numba ``prange`` loop: a ``parallel=True`` twin of
every kernel cost 0.7-1.7 s of compile time each (W9's first training step compiled for
19 s, 14 of them in ``prange`` twins) and ran no faster than two serial halves. Every temporary
is stored through an explicit cast to its node's dtype, and constants are typed, so float32
stays float32.

Compiled kernels are cached on disk: the source goes to ``<cache dir>/k_<hash>.py`` (hash of the
source plus Python/NumPy/Numba versions) and Numba's own ``cache=True`` keeps the machine code
beside it, so a new process loads instead of recompiling. The directory is configurable
(``ND4PY_CACHE_DIR``) and safe to delete at any time.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..kernels import fastload
from ..kernels.jit_options import PYTHON_CALLERS
from .exprs import Emitter
from ..kernels.fastmath import KERNEL_FASTMATH, __all__ as fastmath_names

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_PREFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.bool_): "np.bool_"}


@dataclass(frozen=True)
class NodeSpec:
    op: Any                 # OpDef (its scalar expression renders the element)
    attrs: Any
    args: tuple[str, ...]   # refs: a<k> (array input), s<k> (scalar input), t<k> (temporary)
    out: str
    out_dtype: np.dtype
    compute: np.dtype | None  # float dtype the node computes in (None: bool logic)


@dataclass(frozen=True)
class KernelSpec:
    rank: int
    flat: bool                                    # all arrays have the output's shape
    arrays: tuple[tuple[np.dtype, tuple[bool, ...]], ...]   # dtype, broadcast dims (True)
    scalars: int
    nodes: tuple[NodeSpec, ...]
    outputs: tuple[tuple[str, np.dtype], ...]
    # leading-dims sums (ref, leading dims summed): outputs after ``outputs``, accumulated in
    # place into zeroed arrays row after row (``reduce.fuse_leading_sums``); not flat
    sums: tuple[tuple[str, int], ...] = ()
    # (output, array input) pairs written in place: a donated buffer (``CompiledPlan._donate``)
    inplace: tuple[tuple[int, int], ...] = ()


def _arg(ref: str, compute: np.dtype | None) -> str:
    if ref.startswith("s") and compute is not None:
        return f"{_PREFIX[compute]}({ref})"  # weak scalars take the node's compute dtype
    return ref


#: Module header of every generated kernel file.
PRELUDE = ("import math", "import numpy as np", "import numba",
           "from samediff.kernels.spin import announce",
           "from samediff.kernels.vector_width import wide_vectors",
           "from samediff.compiler.mathlib import *  # noqa: F401,F403", "f32 = np.float32",
           "f64 = np.float64", "")
#: The kernel's name, and its twin's when outputs are written into the inputs they were
#: donated: each such output is then no parameter of its own, its values are stored through
#: the input's. Passed as two parameters, an output and the input it aliases defeat LLVM's
#: vectorizer (its run-time overlap check fails and the scalar loop runs: an SGD update of
#: 784x256 float32 took 103 us against 37 us through one parameter); through one, the loop is
#: vectorized.
KERNEL, INPLACE_KERNEL = "kernel", "kernel_io"


def decorator() -> str:
    """Every generated kernel's and loop's decorator (``nogil``: its halves run on two
    threads; Python calls it: ``kernels.jit_options.PYTHON_CALLERS``)."""
    options = "".join(f", {k}={v!r}" for k, v in PYTHON_CALLERS.items())
    return f"@numba.njit(error_model='numpy', fastmath=FASTMATH, cache=True, nogil=True{options})"


_FAST_CALLS = tuple(f"{name}(" for name in fastmath_names)


def module_source(lines: list[str]) -> str:
    """Join a rendered kernel module, defining the ``FASTMATH`` flags its decorators use.

    A kernel that calls the approximate float32 math library is already a few ulp from numpy,
    so it also lets LLVM contract ``a*b + c`` into FMAs (one rounding instead of two; ~30%
    faster for gelu-like chains). Kernels of plain arithmetic keep numpy's two roundings and
    stay bit-for-bit equal to the interpreter."""
    source = "\n".join(lines)
    flags = sorted(KERNEL_FASTMATH) if any(c in source for c in _FAST_CALLS) else []
    header = "FASTMATH = {" + ", ".join(repr(f) for f in flags) + "}" if flags else "FASTMATH = False"
    return header + "\n" + source


def kernel_params(spec: KernelSpec, outputs: list[str]) -> str:
    """Kernel parameters: array inputs, scalar inputs, then the output arguments."""
    return ", ".join([f"in{k}" for k in range(len(spec.arrays))]
                     + [f"s{k}" for k in range(spec.scalars)] + outputs)


def kernel_head(name: str, params: str) -> list[str]:
    """A kernel's decorator, ``def`` line and first statement. Every kernel takes a last
    parameter ``go`` (``workers.split_leading``'s token) and announces it at once: the
    thread running the other half takes the GIL only then, when it is free, instead of
    sleeping on it (a 32 Ki-element GELU in halves took 65 us ungated, against 25 us whole)."""
    return [decorator(), f"def {name}({params}, go):", "    wide_vectors()", "    announce(go)"]


def render(spec: KernelSpec) -> str:
    """Python source of the kernels for ``spec``."""
    body: list[str] = []
    if spec.flat:
        index = ["i"]
        loops = [("i", "o0.size")]
    else:
        index = [f"i{d}" for d in range(spec.rank)]
        loops = [(f"i{d}", f"o0.shape[{d}]") for d in range(spec.rank)]
    for k, (_, pattern) in enumerate(spec.arrays):
        if spec.flat:
            body.append(f"a{k} = in{k}[i]")
        else:
            idx = ", ".join("0" if b else index[d] for d, b in enumerate(pattern))
            body.append(f"a{k} = in{k}[{idx}]" if spec.rank else f"a{k} = in{k}[()]")
    for n in spec.nodes:
        expr = n.op.scalar(Emitter(n.compute or np.float64, n.attrs),
                           *(_arg(a, n.compute) for a in n.args))
        body.append(f"{n.out} = {_PREFIX[n.out_dtype]}({expr})")
    out_idx = "i" if spec.flat else (", ".join(index) if spec.rank else "()")
    writes = [f"o{k}[{out_idx}] = {ref}" for k, (ref, _) in enumerate(spec.outputs)]
    sums = [f"o{k}[{', '.join(index[lead:])}] += {ref}"
            for k, (ref, lead) in enumerate(spec.sums, start=len(spec.outputs))]
    outputs = [f"o{k}" for k in range(len(spec.outputs) + len(spec.sums))]
    variants = [(KERNEL, outputs, writes)]
    if spec.inplace:
        into = dict(spec.inplace)
        variants.append((INPLACE_KERNEL, [o for k, o in enumerate(outputs) if k not in into],
                         [f"in{into[k]}[{out_idx}] = {ref}" if k in into else line
                          for k, ((ref, _), line) in enumerate(zip(spec.outputs, writes))]))
    lines = list(PRELUDE)
    if not spec.outputs:  # only sums (smaller than the loops): the bounds come from the inputs
        loops = [(var, _bound(spec, d)) for d, (var, _) in enumerate(loops)]
    for name, outs, stores in variants:
        params = kernel_params(spec, outs)
        first = "o0" if "o0" in outs else f"in{dict(spec.inplace)[0]}"  # the loops' bounds
        loops = [(var, bound.replace("o0", first)) for var, bound in loops]
        lines += kernel_head(name, params)
        depth = 1
        for var, bound in loops:  # (none for a rank-0 output)
            lines.append("    " * depth + f"for {var} in range({bound}):")
            depth += 1
        lines += ["    " * depth + b for b in body + stores + sums] + [""]
    return module_source(lines)


def _bound(spec: KernelSpec, d: int) -> str:
    """The extent of loop ``d`` of a kernel whose every output is a leading-dims sum: an input
    not broadcast along ``d``, else a sum that keeps ``d``. (With neither, no operand knows it:
    the group runs in the interpreter.)"""
    for k, (_, pattern) in enumerate(spec.arrays):
        if not pattern[d]:
            return f"in{k}.shape[{d}]"
    for k, (_, lead) in enumerate(spec.sums):
        if d >= lead:
            return f"o{k}.shape[{d - lead}]"
    raise ValueError(f"no operand of the kernel spans its loop {d} (every input is broadcast "
                     f"there and every output sums it): the group runs in the interpreter")


def cache_dir() -> Path:
    """Where generated kernels live (``ND4PY_CACHE_DIR``, default ``~/.cache/nd4py/kernels``)."""
    env = os.environ.get("ND4PY_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "nd4py"
    return base / "kernels"


KERNEL_FORMAT = 5  # bump when the generated code or its loading changes: old files are ignored


def _versions() -> str:
    """Everything compiled kernels depend on besides their own source, hashed into every
    kernel's file name, so a kernel compiled under another nd4py, Python, NumPy, Numba or
    llvmlite, or for another CPU (model and feature flags), is never loaded — a cache directory
    shared by several machines or installs just holds more files. Numba's disk cache does not
    notice when a function a kernel calls changes, so the math library's source is in it too."""
    global _VERSIONS
    if _VERSIONS is None:
        import llvmlite
        import numba
        from llvmlite import binding as llvm
        here = Path(__file__).parent
        lib = hashlib.sha256(b"".join(p.read_bytes() for p in (
            here / "mathlib.py", here.parent / "kernels" / "fastmath.py"))).hexdigest()[:12]
        cpu = hashlib.sha256(f"{llvm.get_host_cpu_name()}:"
                             f"{llvm.get_host_cpu_features().flatten()}".encode()).hexdigest()[:12]
        _VERSIONS = (f"k{KERNEL_FORMAT}-nd{_nd4py_version()}-py{sys.version_info[:3]}-"
                     f"np{np.__version__}-nb{numba.__version__}-llvm{llvmlite.__version__}-"
                     f"lib{lib}-cpu{cpu}")
    return _VERSIONS


def _nd4py_version() -> str:
    try:
        from importlib.metadata import version
        return version("nd4py")
    except Exception:  # run from a source tree that is not installed
        return "src"


_VERSIONS: str | None = None


_loaded: dict[str, Any] = {}
_lock = threading.Lock()
_reused = 0


def _new_lock_in_child() -> None:
    """A forked child (the compile helper, a data loader) gets a free lock: a thread of the
    parent's that was inside ``load`` at the fork does not exist in the child."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def kernel_stats() -> dict[str, int]:
    """``kernel_modules``: distinct kernel modules loaded by this process (each compiled once
    per machine, then loaded from the disk cache); ``kernel_reuses``: requests answered with a
    module already loaded. A kernel is keyed by its source, which names values by their place
    in the kernel (``a0``, ``t1``...), never in the graph: the groups of a repeated block (the
    layers of an MLP, the blocks of a transformer) render the same source and share one
    module, as regional compilation reuses one compiled region.

    >>> sorted(kernel_stats())
    ['kernel_modules', 'kernel_reuses']
    """
    return {"kernel_modules": len(_loaded), "kernel_reuses": _reused}


def load(source: str) -> Any:
    """The module for ``source`` (loaded once per process; compiled once per machine)."""
    global _reused
    digest = hashlib.sha256((_versions() + "\n" + source).encode()).hexdigest()[:24]
    with _lock:
        module = _loaded.get(digest)
        if module is not None:
            _reused += 1
            return module
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"k_{digest}.py"
        if not path.exists() or path.read_text() != source:
            fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)  # atomic: concurrent processes never see half a file
        name = f"nd4py_kernel_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module  # Numba's disk cache resolves the module by name on load
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException:
            del sys.modules[name]
            raise
        fastload.adopt_module(module)  # a cached kernel loads without Numba's full set-up
        _loaded[digest] = module
        return module
