"""Compiled plans: fuse elementwise chains into Numba kernels, run everything else as library
calls (matmul goes to BLAS through numpy), free buffers after their last reader.

``CompiledPlan(nodes, input_slots, output_slots, types)`` has the same interface as the
interpreter plan (``execute(inputs) -> outputs``, ``explain()``), so the planner can be swapped
without tracing or SameDiff knowing. A group that cannot be compiled (a Numba error, an
unsupported construct) runs through the interpreter instead — per group, not all-or-nothing —
and the reason is logged once and reported by ``explain()``. ``ND4PY_STRICT=1`` (or
``set_strict(True)``) raises instead.

A plan runs as one generated Python function (``driver.py``: values in locals, library calls
bound once, kernels launched from per-shape records): a step costs little more than the
call it makes. Leading-dims sums (bias gradients) ride along in the kernel computing
their input (``reduce.fuse_leading_sums``).
"""
from __future__ import annotations

import logging
import math
import os
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .. import interpreter, profiler
from . import compile_helper
from ..errors import NdError
from ..kernels import workers
from ..ops import TensorType
from ..ops.families import reduce_shape
from .driver import build_driver
from .codegen import KernelSpec, NodeSpec, load, render
from .passes import epilogue_of, fold_epilogues, protect_outputs, simplify
from .grouping import Group, compute_dtype, fuse_reductions, fuse_row_prologues, partition
from .reduce import fuse_leading_sums, render_reduce, split_pattern
from .rowwise import render_rows, row_epsilon, row_view_shape, spec_for_rows

if TYPE_CHECKING:
    from ..pictures import Picture

log = logging.getLogger("nd4py.compiler")
#: Groups with at least this many elements run their kernel on two halves of its outer loop
#: at once (``workers.split_leading``), when that loop has two iterations or more. A
#: tanh-GELU, median us whole / in halves (2 cores): quiet, 74/58 at 64 Ki elements, 159/102
#: at 128 Ki, 296/171 at 256 Ki; with another process spinning on one core, 45/53, 88/94,
#: 182/190 (the helper seldom gets the busy core; the caller takes the half back). From
#: 128 Ki the quiet gain (1.5x) outweighs the loaded loss (5-10 %).
PARALLEL_THRESHOLD = 1 << 17


def split_extent(outer: int, size: int) -> int:
    """The outer-loop extent a kernel of ``size`` elements is split at (``PARALLEL_THRESHOLD``,
    two iterations or more), else 0: run whole."""
    return outer if size >= PARALLEL_THRESHOLD and outer >= 2 else 0
_strict = os.environ.get("ND4PY_STRICT", "") not in ("", "0")
_WEAK_SAMPLE = {"f": 1.0, "i": 1, "u": 1, "b": True}  # Python scalars of each kind


class CompilationError(NdError, RuntimeError):
    """Strict mode: a group could not be compiled."""

    strict = True  # tells the planner hook not to fall back


def set_strict(flag: bool) -> bool:
    """Raise instead of falling back to the interpreter; returns the previous setting."""
    global _strict
    previous, _strict = _strict, bool(flag)
    return previous


def _arrays(values: dict, slots: Sequence[Any]) -> list[np.ndarray]:
    """The kernel's array arguments (values are ndarrays; anything else is converted)."""
    arrays = [values[s] for s in slots]
    for a in arrays:
        if type(a) is not np.ndarray:
            return [np.asarray(a) for a in arrays]
    return arrays


class KernelStep:
    """A fused group compiled to a kernel (or run by the interpreter if that failed)."""

    def __init__(self, group: Group, types: Sequence[TensorType], needed_after: set) -> None:
        self.nodes = group.nodes
        self.outputs = [s for n in group.nodes for s in n.outputs if s in needed_after]
        if not self.outputs:  # dead group (should have been eliminated): keep the last value
            self.outputs = [group.nodes[-1].outputs[0]]
        external = []
        for n in group.nodes:
            for i in n.inputs:
                if i not in group.produced and i not in external:
                    external.append(i)
        self.arrays = [i for i in external if not types[i].weak]
        self.scalars = [i for i in external if types[i].weak]
        self.shape = group.shape
        self.out_dtypes = [types[s].dtype for s in self.outputs]
        # outputs that are leading-dims sums (bias gradients) -> how many dims they sum away
        self.sum_leads = {n.outputs[0]: len(self.shape) - len(types[n.outputs[0]].shape)
                          for n in group.sums}
        if self.sum_leads:  # the kernel writes them last
            self.outputs.sort(key=lambda o: o in self.sum_leads)
            self.out_dtypes = [types[s].dtype for s in self.outputs]
        self.reason = ""
        self.kernels: Any = None
        self._preps: dict[tuple, Any] = {}
        # input shapes -> the generated driver's launch record (``_launch``), or False
        self._launches: dict[tuple, Any] = {}
        self.donated: dict[Any, Any] = {}   # output slot -> input slot whose buffer it reuses
        self._module: Any = None  # the kernel module ``compile_job`` loaded, for ``compile``
        self.spec = self._spec(types)

    def _spec(self, types: Sequence[TensorType]) -> KernelSpec:
        rank = len(self.shape)
        refs = {s: f"a{k}" for k, s in enumerate(self.arrays)}
        refs.update({s: f"s{k}" for k, s in enumerate(self.scalars)})
        patterns = []
        for s in self.arrays:
            shp = (1,) * (rank - len(types[s].shape)) + tuple(types[s].shape)
            patterns.append((types[s].dtype, tuple(d == 1 and o != 1 for d, o in zip(shp, self.shape))))
        flat = all(tuple(types[s].shape) == tuple(self.shape) for s in self.arrays) \
            and not self.sum_leads
        specs = []
        for k, n in enumerate(self.nodes):
            if n.outputs[0] in self.sum_leads:
                continue
            ins = [types[i] for i in n.inputs]
            out = f"t{k}"
            specs.append(NodeSpec(n.op, n.attrs, tuple(refs[i] for i in n.inputs), out,
                                  types[n.outputs[0]].dtype, compute_dtype(ins)))
            refs[n.outputs[0]] = out
        self.flat = flat
        sums = [n for n in self.nodes if n.outputs[0] in self.sum_leads]
        return KernelSpec(rank, flat, tuple(patterns), len(self.scalars), tuple(specs),
                          tuple((refs[s], types[s].dtype) for s in self.outputs
                                if s not in self.sum_leads),
                          tuple((refs[n.inputs[0]], self.sum_leads[n.outputs[0]]) for n in sums
                                if n.outputs[0] in self.outputs))

    def source(self) -> str:
        return render(self.spec)

    def warmup_values(self, types: Sequence[TensorType]) -> dict:
        """Arrays of size 1 or 2 per dim, following each input's broadcast pattern (size 1
        where the group's own dim is 1: every input has 1 there, or lacks the dim)."""
        rank = len(self.shape)
        values = {}
        for s, (dtype, pattern) in zip(self.arrays, self.spec.arrays):
            full = tuple(1 if b or o == 1 else 2 for b, o in zip(pattern, self.shape))
            values[s] = np.ones(full[rank - len(types[s].shape):], dtype)
        return values

    def _warm_up(self, types: Sequence[TensorType]) -> None:
        """Run the kernel once on tiny inputs (its first call compiles it, or loads it)."""
        values = self.warmup_values(types)
        values.update({s: _WEAK_SAMPLE[types[s].dtype.kind] for s in self.scalars})
        if not self._call(values):
            raise ValueError("warm-up inputs do not match the kernel's broadcast pattern")

    def compile_job(self, types: Sequence[TensorType]) -> tuple | None:
        """What a helper process would compile for this step (``compile_helper.job``: the
        warm-up's kernel call, recorded here without running it), or None: nothing to
        compile, or a failure that ``compile`` will meet and report itself."""
        recorder = compile_helper.FirstCall()
        try:
            source = self.source()
            self._module = load(source)  # (``compile`` takes it from here)
            self.kernels = recorder
            self._warm_up(types)
            name, args = recorder.call  # type: ignore[misc]
            return compile_helper.job(source, getattr(self._module, name), name, args)
        except Exception:  # noqa: BLE001 - compile() reports it
            return None
        finally:
            self.kernels = None

    def compile(self, types: Sequence[TensorType]) -> None:
        """Generate, load and compile (on tiny inputs) — errors fall back."""
        try:
            module, self._module = self._module, None
            self.kernels = module if module is not None else load(self.source())
            self._warm_up(types)
        except Exception as exc:  # noqa: BLE001 - Numba raises many error types
            self.kernels = None
            self.reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if _strict:
                raise CompilationError(f"compiling fused group ({self.describe()}) failed: "
                                       f"{self.reason}") from exc
            log.warning("fused group (%s) falls back to the interpreter: %s",
                        self.describe(), self.reason)

    def _prepare(self, shapes: tuple) -> Any:
        """How to call the kernel for these input shapes: (output shape, reshape targets,
        split extent (``split_extent``)), or False if they do not fit the compiled broadcast pattern (possible when
        the graph had -1 dims) and the caller must interpret. Cached per shape tuple."""
        try:
            shape = np.broadcast_shapes(*shapes) if shapes else ()
        except ValueError:
            return False
        rank = len(self.shape)
        if len(shape) != rank:
            return False
        if self.flat:
            if any(sh != shape for sh in shapes):
                return False
            targets = [(-1,)] * len(shapes)
        else:
            targets = []
            for sh, (_, pattern) in zip(shapes, self.spec.arrays):
                full = (1,) * (rank - len(sh)) + tuple(sh)
                # a broadcast dim is read at index 0 (needs size 1), others at the loop index
                if not all((d == 1) if b else (d == o) for d, o, b in zip(full, shape, pattern)):
                    return False
                targets.append(full)
        size = math.prod(shape)
        outer = 0 if self.spec.sums or not shape else size if self.flat else shape[0]
        return shape, targets, split_extent(outer, size)  # (sums accumulate: never split)

    def _prep_for(self, shapes: tuple) -> Any:
        """``_prepare(shapes)``, cached per shape tuple (a plan sees few distinct shapes)."""
        prep = self._preps.get(shapes)
        if prep is None:
            if len(self._preps) > 64:
                self._preps.clear()
                self._launches.clear()  # (in place: the plan's driver holds this dict)
            prep = self._preps[shapes] = self._prepare(shapes)
            self._launches[shapes] = prep and self._launch(shapes, prep)
        return prep

    def _launch(self, shapes: tuple, prep: Any) -> tuple:
        """What the plan's driver (``driver.py``) needs to call the kernel on inputs of these
        shapes: (per array a reshape target or None, output allocation shape, split extent, the
        outputs' view for the kernel or None, their final shape or None, trailing arguments)."""
        shape, targets, split = prep
        flat_view = (-1,) if self.flat and len(shape) != 1 else None
        return (tuple(None if tuple(t) == sh or (self.flat and len(sh) == 1) else tuple(t)
                      for t, sh in zip(targets, shapes)),
                shape, split, flat_view, None, ())

    def _call(self, values: dict) -> bool:
        arrays = _arrays(values, self.arrays)
        shapes = tuple([a.shape for a in arrays])
        prep = self._preps.get(shapes)  # hot path: a plan is called with the same shapes
        if prep is None:
            prep = self._prep_for(shapes)
        if prep is False:
            return False
        shape, targets, split = prep
        args = [a.reshape(t) for a, t in zip(arrays, targets)]
        outs = ([self._out_buffer(values, s, shape, d) for s, d in zip(self.outputs, self.out_dtypes)]
                if self.donated else [np.empty(shape, d) if s not in self.sum_leads else
                                      np.zeros(shape[self.sum_leads[s]:], d)
                                      for s, d in zip(self.outputs, self.out_dtypes)])
        out_args = [o.reshape(-1) for o in outs] if self.flat else outs
        into = self.spec.inplace
        if into and all(outs[j] is arrays[k] for j, k in into):  # every donated buffer taken
            skip = {j for j, _ in into}
            out_args = [o for j, o in enumerate(out_args) if j not in skip]
            fn = self.kernels.kernel_io
        else:
            fn = self.kernels.kernel
        workers.split_leading(fn, split, *args, *[values[s] for s in self.scalars], *out_args)
        for s, o in zip(self.outputs, outs):
            values[s] = o
        return True

    def donate(self, slot: Any, inp: Any) -> None:
        """Output ``slot`` may be written into input ``inp``'s buffer (``CompiledPlan._donate``,
        before compiling). When the kernel reads ``inp`` element for element (not broadcast),
        it is generated with a twin that stores the output through ``inp`` itself
        (``codegen.INPLACE_KERNEL``): the calls take it when the buffer was taken."""
        self.donated[slot] = inp
        if inp in self.arrays and slot not in self.sum_leads:
            k = self.arrays.index(inp)
            if not any(self.spec.arrays[k][1]):
                self.spec = replace(
                    self.spec, inplace=self.spec.inplace + ((self.outputs.index(slot), k),))

    def _out_buffer(self, values: dict, slot: Any, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A fresh output array, or the donated input's buffer when it can be written through
        (same shape and dtype, C-contiguous, writeable: always, for the training step)."""
        if slot in self.sum_leads:
            return np.zeros(shape[self.sum_leads[slot]:], dtype)
        donor = self.donated.get(slot)
        if donor is not None:
            buf = values[donor]
            if type(buf) is np.ndarray and buf.shape == shape and buf.dtype == dtype \
                    and buf.flags.c_contiguous and buf.flags.writeable:
                return buf
        return np.empty(shape, dtype)

    def run(self, values: dict) -> None:
        if self.kernels is None or not self._call(values):
            interpreter.run_nodes(self.nodes, values)

    def describe(self) -> str:
        return " -> ".join(n.op.name for n in self.nodes)


class RowStep(KernelStep):
    """A row anchor (``op.row_kernel``: softmax, layer_norm... over the last axis) and its
    epilogue."""

    def __init__(self, group: Group, types: Sequence[TensorType], needed_after: set) -> None:
        self.prologue = group.prologue
        super().__init__(group, types, needed_after)
        # a full-shape input gives the call's shape (the anchor's input may be computed inside)
        self._full = next(s for s, (_, (brow, _)) in zip(self.arrays, self.spec.arrays)
                          if not brow)

    def _spec(self, types: Sequence[TensorType]) -> KernelSpec:
        self.flat = False
        return spec_for_rows(self.nodes, self.arrays, self.scalars, self.outputs, types,
                             self.shape)

    def source(self) -> str:
        anchor = self.nodes[self.prologue]
        return render_rows(self.spec, anchor.op.row_kernel.variant, row_epsilon(anchor),
                           self.prologue)

    def warmup_values(self, types: Sequence[TensorType]) -> dict:
        cols = 1 if self.shape[-1] == 1 else 2  # rows of one column fix the column patterns
        shape = (2,) * (len(self.shape) - 1) + (cols,)
        values = {}
        for s, (dtype, (brow, bcol)) in zip(self.arrays, self.spec.arrays):
            full = shape if not brow else ((cols,) if not bcol else ())
            values[s] = np.ones(full[len(full) - len(types[s].shape):] if brow else full, dtype)
        return values

    def _prepare(self, shapes: tuple) -> Any:
        """(shape, 2-D view shapes, rows, split extent) for these input shapes, or False."""
        shape = shapes[self.arrays.index(self._full)]
        if len(shape) != len(self.shape):
            return False
        views = [row_view_shape(sh, pattern, shape)
                 for sh, (_, pattern) in zip(shapes, self.spec.arrays)]
        if any(v is None for v in views):
            return False
        rows = math.prod(shape[:-1])
        return shape, views, rows, split_extent(rows, rows * shape[-1])

    def _launch(self, shapes: tuple, prep: Any) -> tuple:
        shape, views, rows, split = prep
        view = (rows, shape[-1])
        return (tuple(None if tuple(v) == sh else tuple(v) for v, sh in zip(views, shapes)),
                shape, split, None if view == shape else view, None, ())

    def _call(self, values: dict) -> bool:
        arrays = _arrays(values, self.arrays)
        prep = self._prep_for(tuple([a.shape for a in arrays]))
        if prep is False:
            return False
        shape, views, rows, split = prep
        outs = [np.empty(shape, d) for d in self.out_dtypes]
        workers.split_leading(self.kernels.kernel, split,
                              *[a.reshape(v) for a, v in zip(arrays, views)],
                              *[values[s] for s in self.scalars],
                              *[o.reshape(rows, shape[-1]) for o in outs])
        for s, o in zip(self.outputs, outs):
            values[s] = o
        return True


class ReduceStep(KernelStep):
    """An elementwise chain and the trailing-dims reduction it feeds, in one kernel."""

    def __init__(self, group: Group, types: Sequence[TensorType], needed_after: set) -> None:
        self.reduction = group.nodes[-1]
        self.split = group.reduce_split
        super().__init__(group, types, needed_after)
        self.outputs = list(self.reduction.outputs)
        self.out_dtypes = [types[self.reduction.outputs[0]].dtype]

    def _spec(self, types: Sequence[TensorType]) -> KernelSpec:
        self.flat = False
        chain = self.nodes[:-1]
        refs = {s: f"a{k}" for k, s in enumerate(self.arrays)}
        refs.update({s: f"s{k}" for k, s in enumerate(self.scalars)})
        patterns = tuple((types[s].dtype, split_pattern(types[s].shape, self.shape, self.split))
                         for s in self.arrays)
        specs = []
        for k, n in enumerate(chain):
            specs.append(NodeSpec(n.op, n.attrs, tuple(refs[i] for i in n.inputs), f"t{k}",
                                  types[n.outputs[0]].dtype,
                                  compute_dtype([types[i] for i in n.inputs])))
            refs[n.outputs[0]] = f"t{k}"
        out = self.reduction.outputs[0]
        return KernelSpec(2, False, patterns, len(self.scalars), tuple(specs),
                          ((refs[self.reduction.inputs[0]], types[out].dtype),))

    def source(self) -> str:
        return render_reduce(self.spec, self.reduction.op.accumulate)

    def warmup_values(self, types: Sequence[TensorType]) -> dict:
        # size 1 stays 1 (it decides the pattern), every other dim becomes 2: tiny, and never
        # an empty max/min (which _call leaves to the interpreter)
        return {s: np.ones(tuple(1 if d == 1 else 2 for d in types[s].shape), dtype)
                for s, (dtype, _) in zip(self.arrays, self.spec.arrays)}

    def _prepare(self, shapes: tuple) -> Any:
        """(rows, cols, 2-D view shapes, output shape, split extent) for these input shapes, or
        False when they do not fit the kernel (the interpreter runs the group instead)."""
        try:
            shape = np.broadcast_shapes(*shapes) if shapes else ()
        except ValueError:
            return False
        if len(shape) != len(self.shape):
            return False
        rows, cols = math.prod(shape[:self.split]), math.prod(shape[self.split:])
        if cols == 0 and not self.reduction.op.accumulate.empty:
            return False  # numpy raises for an empty max/min: let the interpreter say so
        views = []
        for sh, (_, (brow, bcol)) in zip(shapes, self.spec.arrays):
            if split_pattern(sh, shape, self.split) != (brow, bcol):
                return False
            views.append((1 if brow else rows, 1 if bcol else cols))
        attrs = self.reduction.attrs
        return (rows, cols, views, reduce_shape(shape, attrs.dims, attrs.keep_dims),
                split_extent(rows, rows * cols))

    def _launch(self, shapes: tuple, prep: Any) -> tuple:
        rows, cols, views, out_shape, split = prep
        return (tuple(None if tuple(v) == sh else tuple(v) for v, sh in zip(views, shapes)),
                (rows,), split, None, None if tuple(out_shape) == (rows,) else out_shape,
                (cols,))

    def _call(self, values: dict) -> bool:
        arrays = _arrays(values, self.arrays)
        prep = self._prep_for(tuple([a.shape for a in arrays]))
        if prep is False:
            return False
        rows, cols, views, out_shape, split = prep
        out = np.empty(rows, self.out_dtypes[0])
        workers.split_leading(self.kernels.kernel, split,
                              *[a.reshape(v) for a, v in zip(arrays, views)],
                              *[values[s] for s in self.scalars], out, cols)
        values[self.outputs[0]] = out.reshape(out_shape)
        return True


class CompiledPlan:
    """A plan of fused Numba kernels and library calls (see module docstring)."""

    kind = "compiled"

    def __init__(self, nodes: Sequence[Any], input_slots: Sequence[int],
                 output_slots: Sequence[int], types: Sequence[TensorType] | dict,
                 exact_shapes: bool = False, donate: dict | None = None) -> None:
        producers = {o: n for n in nodes for o in n.outputs}
        needed = interpreter.needed_nodes(nodes, producers, output_slots)
        simple = simplify(needed, types if exact_shapes else None)
        self.input_slots, self.output_slots = tuple(input_slots), tuple(output_slots)
        self.types = types  # every value's static type (read by pictures)
        self._results = [simple.resolve(s) for s in output_slots]
        before = len(simple.nodes)
        simple.nodes = fold_epilogues(simple.nodes, self._results)
        self.epilogues = before - len(simple.nodes)  # activations folded into library ops
        read = {i for n in simple.nodes for i in n.inputs} | set(self._results)
        self.constants = {k: v for k, v in simple.constants.items() if k in read}
        self._inputs_set = set(self.input_slots)
        self.identities = simple.identities
        self.merged = len(simple.alias) - simple.identities
        self.folded = len(needed) - before - len(simple.alias)
        raw = fuse_leading_sums(fuse_row_prologues(fuse_reductions(
            partition(simple.nodes, types), types, self._results), types, self._results), types)
        # which values each step must hand on: read by a later step, or a plan output
        later: set = set(self._results)
        needed_after: list[set] = [set()] * len(raw)
        for k in range(len(raw) - 1, -1, -1):
            needed_after[k] = set(later)
            step = raw[k]
            for n in (step.nodes if isinstance(step, Group) else [step]):
                later.update(n.inputs)
        self.steps: list = []
        for step, after in zip(raw, needed_after):
            if isinstance(step, Group):
                kind = RowStep if step.rowwise else (
                    ReduceStep if step.reduce_split is not None else KernelStep)
                self.steps.append(kind(step, types, after))
            else:
                self.steps.append(step)
        self._frees = self._plan_frees()
        self._drive: Any = None  # the generated driver (``driver.py``), built on first use
        # outputs the caller must get a copy of: constants (they live as long as the plan) and
        # library results that may be views of them, inputs, and values returned twice
        persistent = self._views_of(set(self.constants))
        self._shared = [r in persistent or r in self._inputs_set or self._results.count(r) > 1
                        for r in self._results]
        self._any_shared = any(self._shared)
        self.donations = self._donate(donate or {}, types)
        # (after donating: a kernel writing in place is generated so)
        ksteps = [s for s in self.steps if isinstance(s, KernelStep)]
        jobs = ([s.compile_job(types) for s in ksteps]
                if len(ksteps) >= compile_helper.MIN_COLD and compile_helper.enabled()
                else [None] * len(ksteps))
        self.reason = ""
        self._ready = threading.Event()  # set once the kernels are compiled (or fell back)
        self._compiled_ok = True
        self._when_compiled: list = []
        compile_helper.compile_each(jobs, lambda k: ksteps[k].compile(types),
                                    compile_helper.warmups([s for s in self.steps
                                                            if not isinstance(s, KernelStep)],
                                                           types) if any(jobs) else (),
                                    then=self._compiled)

    def _compiled(self, ok: bool) -> None:
        failed = [s for s in self.steps if isinstance(s, KernelStep) and s.kernels is None]
        self.reason = "; ".join(f"{s.describe()}: {s.reason}" for s in failed)
        self._compiled_ok = ok
        self._ready.set()
        callbacks, self._when_compiled = self._when_compiled, []
        for callback in callbacks:
            callback(ok)

    def when_compiled(self, callback: Any) -> None:
        """``callback(ok)`` once the kernels are compiled -- now, unless the plan was made in a
        ``compile_helper.together()`` block that has not ended; ``ok`` False: the compile was
        cut short (Ctrl-C, a strict-mode error). The plan cache files the plan then
        (``cache.PlanCache.get_or_build``): a plan is cached compiled, or not at all."""
        if self._ready.is_set():
            callback(self._compiled_ok)
        else:
            self._when_compiled.append(callback)

    def _wait_compiled(self) -> None:
        """Before the first run: the kernels of a plan made in a ``compile_helper.together()``
        block compile when it ends (on this thread: now; on another: wait for it)."""
        if not self._ready.is_set():  # (every profiled run asks: nothing to do once compiled)
            compile_helper.flush()
            self._ready.wait()

    def _views_of(self, slots: set) -> set:
        """``slots`` plus every library-call result that may be a view of one of them (numpy's
        reshape, transpose, slicing... return views); kernel outputs are always fresh."""
        out = set(slots)
        for step in self.steps:
            if not isinstance(step, KernelStep) and any(i in out for i in step.inputs):
                out.update(step.outputs)
        return out

    def _last_readers(self) -> dict[Any, int]:
        last: dict[Any, int] = {}
        for k, step in enumerate(self.steps):
            for n in (step.nodes if isinstance(step, KernelStep) else [step]):
                for i in n.inputs:
                    last[i] = k
        return last

    def _donate(self, donate: dict, types: Any) -> int:
        """Buffer donation (like JAX's ``donate_argnums``): output ``o`` may be written into
        input ``i``'s buffer when a plain elementwise kernel computes ``o`` with ``i``'s exact
        type and no later step reads ``i`` — e.g. a parameter and its updated value. The caller
        promises it no longer needs ``i``'s old contents. Returns how many were granted."""
        last, granted = self._last_readers(), 0
        inputs, results = set(self.input_slots), self._results
        for out, inp in donate.items():
            slot = self._results[self.output_slots.index(out)] if out in self.output_slots else None
            if slot is None or inp not in inputs or results.count(slot) > 1 \
                    or types[slot] != types[inp]:
                continue
            aliases = self._views_of({inp})  # the buffer, and views of it taken by library calls
            if aliases & set(results):
                continue
            read_until = max(last.get(a, -1) for a in aliases)
            for k, step in enumerate(self.steps):
                if type(step) is KernelStep and slot in step.outputs:
                    if read_until <= k and inp not in step.donated.values():
                        step.donate(slot, inp)
                        granted += 1
                    break
        return granted

    def _plan_frees(self) -> list[list[int]]:
        """After step k, drop values nobody reads later (never inputs or outputs)."""
        last = self._last_readers()
        keep = set(self.input_slots) | set(self._results) | set(self.constants)
        frees: list[list[int]] = [[] for _ in self.steps]
        for slot, k in last.items():
            if slot not in keep:
                frees[k].append(slot)
        return frees

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        if profiler.active:  # the only cost of the profiler when it is off
            return self._execute_profiled(inputs)
        if self._drive is None:
            self._wait_compiled()
            self._drive = build_driver(self, KernelStep)
        results = self._drive(inputs)
        return protect_outputs(results, self._shared) if self._any_shared else results

    def _execute_profiled(self, inputs: Sequence[Any]) -> list[Any]:
        """``execute`` with a trace event per step and one for the whole run, for the profiles
        recording it (none during a profile's warm-up: then it just runs)."""
        self._wait_compiled()
        into = profiler.plan_begin()
        try:
            start, recording = profiler.now_us(), 0.0  # (time spent recording, not running)
            values = dict(self.constants)
            values.update(zip(self.input_slots, inputs))
            for step, frees in zip(self.steps, self._frees):
                t = profiler.now_us()
                if isinstance(step, KernelStep):
                    step.run(values)
                    end = profiler.now_us()
                    if into:
                        profiler.complete(into, step.describe(), "kernel" if step.kernels
                                          is not None else "interpreter", t, profiler.step_args(
                                              [n.op.name for n in step.nodes], values,
                                              step.arrays + step.scalars, step.outputs), end)
                        recording += profiler.now_us() - end
                else:
                    interpreter.run_nodes((step,), values)
                    end = profiler.now_us()
                    if into:
                        act = epilogue_of(step)
                        ops = [step.op.name] + ([act] if act != "none" else [])
                        profiler.complete(into, step.op.name, "library", t, profiler.step_args(
                            ops, values, step.inputs, step.outputs), end)
                        recording += profiler.now_us() - end
                for s in frees:
                    values.pop(s, None)
            results = [values[s] for s in self._results]
            if into:
                profiler.complete(into, f"plan ({len(self.steps)} steps)", "plan", start,
                                  {"kind": self.kind, "recording_us": recording,
                                   "inputs": [profiler.describe(v) for v in inputs]})
            return protect_outputs(results, self._shared) if self._any_shared else results
        finally:
            profiler.plan_end()

    def explain(self) -> str:
        kernels = [s for s in self.steps if isinstance(s, KernelStep)]
        lines = [f"plan: compiled, {len(self.steps)} step(s), {len(kernels)} fused kernel(s), "
                 f"{self.folded} node(s) constant-folded, {self.merged} merged by CSE"
                 + (f", {self.epilogues} activation(s) folded into the op before"
                    if self.epilogues else "")
                 + (f", {self.identities} identity adjoint(s) dropped" if self.identities else "")]
        for s in self.steps:
            if isinstance(s, KernelStep):
                state = "fused" if s.kernels is not None else f"FALLBACK ({s.reason})"
                lines.append(f"  kernel [{state}]: {s.describe()}")
            else:
                act = epilogue_of(s)
                lines.append(f"  library: {s.op.name}" + (f" + {act}" if act != "none" else "")
                             + s.op.describe_bodies(s.attrs)
                             + s.op.describe_route([self.types[i] for i in s.inputs], s.attrs))
        return "\n".join(lines)

    def picture(self, **how: Any) -> "Picture":
        """This plan as a ``samediff.pictures.Picture`` (``plan_picture``'s keywords)."""
        from ..pictures import plan_picture  # (down a layer; drawing is not paid at import)
        return plan_picture(self, **how)

    def to_dot(self) -> str:
        """Graphviz DOT text of this plan: a cluster per fused kernel, library calls and
        interpreter fallbacks marked, each op with its output shape and dtype."""
        return self.picture().to_dot()
