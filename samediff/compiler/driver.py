"""One generated Python driver function per compiled plan.

A plan's steps cost their work plus a fixed Python cost each: looking values up in a dict,
building argument lists, choosing a kernel variant, freeing buffers. On small shapes that fixed
cost is most of a step (W3's training step: ~4 us of Python around a 0.5 us kernel call, ~1 us
around each library call). ``build_driver(plan)`` renders the whole plan as one straight-line
function instead, like PyTensor's generated thunks: every value is a local variable, every
library call is a direct call of the op's implementation with its attributes bound once, every
kernel is called through a per-step launch record cached by input shapes (what the step's
``_prepare`` computes), and a buffer is freed (``del``) after its last reader.

Whatever the fast path does not cover goes through the step's own general path with the same
inputs: a non-ndarray input or a new input shape (``KernelStep.run``: prepares, or runs the
interpreter), a library result that is not an ndarray (weak scalars, numpy scalars, tuples:
the interpreter's rules in ``_finish``), a library call that raises (the interpreter runs the
node again to raise its explained error). So results are the step loop's, bit for bit.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import interpreter
from ..arg_kinds import WEAK_SCALARS
from ..array import type_of
from ..errors import OpError
from ..kernels import workers

_ND = np.ndarray


def _finish(node: Any, args: tuple, out: Any) -> Any:
    """A library result that is not a plain ndarray, as ``interpreter.run_nodes`` stores it
    (one value for a single-output node, a list for several)."""
    if isinstance(out, tuple):
        if len(out) != len(node.outputs):
            raise OpError(f"{node.op.name}: produced {len(out)} outputs, graph expects "
                          f"{len(node.outputs)} [in node {node.name!r}]")
        outs = [np.asarray(o) for o in out]
        return outs if len(node.outputs) > 1 else outs[0]
    if args and all(type(a) in WEAK_SCALARS for a in args) and np.ndim(out) == 0 \
            and node.op.infer_types([type_of(a) for a in args], node.attrs)[0].weak:
        return out.item() if hasattr(out, "item") else out
    return np.asarray(out)


def _failed(node: Any, args: tuple, exc: Exception) -> None:
    """Raise the interpreter's error for this node (it names the op, shapes and node)."""
    interpreter.run_nodes((node,), dict(zip(node.inputs, args)))
    raise exc  # (the interpreter did not fail this time: the original error stands)


def _slow(step: Any, args: tuple, donors: tuple) -> tuple:
    """A kernel step through its general path (prepare a new shape, or interpret)."""
    values = dict(zip(step.arrays + step.scalars, args))
    # donors come in the order of the outputs they back (as ``_kernel_lines`` passes them)
    values.update(zip([step.donated[o] for o in step.outputs if o in step.donated], donors))
    step.run(values)
    return tuple(values[s] for s in step.outputs)


def _donated(buf: Any, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The donated input's buffer when the output can be written through it (same shape and
    dtype, C-contiguous, writeable), else a fresh one (``KernelStep._out_buffer``)."""
    if type(buf) is _ND and buf.shape == shape and buf.dtype == dtype \
            and buf.flags.c_contiguous and buf.flags.writeable:
        return buf
    return np.empty(shape, dtype)


def _kernel_lines(k: int, step: Any, name: Callable[[Any], str], env: dict) -> list[str]:
    """Call kernel step ``k``: its fast path when the launch record for these shapes is cached,
    else ``_slow``."""
    arrays = [name(s) for s in step.arrays]
    scalars = [name(s) for s in step.scalars]
    donors = [name(step.donated[o]) for o in step.outputs if o in step.donated]
    outs = [name(o) for o in step.outputs]
    env[f"S{k}"], env[f"L{k}"] = step, step._launches
    env[f"K{k}"] = step.kernels.kernel
    key = "(" + "".join(f"{a}.shape, " for a in arrays) + ")"
    guard = " and ".join(f"type({a}) is ND" for a in arrays) or "True"
    lines = [f"R = L{k}.get({key}) if {guard} else None", "if R:"]
    body = ["T = R[0]"]
    for j, (o, d) in enumerate(zip(step.outputs, step.out_dtypes)):
        env[f"D{k}_{j}"] = d
        donor = step.donated.get(o)
        if o in step.sum_leads:  # a leading-dims sum, accumulated into zeros
            body.append(f"o{j} = ZEROS(R[1][{step.sum_leads[o]}:], D{k}_{j})")
        elif donor is not None:
            body.append(f"o{j} = DON({name(donor)}, R[1], D{k}_{j})")
        else:
            body.append(f"o{j} = EMPTY(R[1], D{k}_{j})")
    call_args = [f"{a} if T[{i}] is None else {a}.reshape(T[{i}])" for i, a in enumerate(arrays)]
    call_args += scalars
    call_args += [f"o{j}" if o in step.sum_leads else f"o{j} if R[3] is None else o{j}.reshape(R[3])"
                  for j, o in enumerate(step.outputs)]
    call = f"LAUNCH(K{k}, R[2], {', '.join(call_args)}, *R[5])"
    into = step.spec.inplace
    if into:  # the twin storing through the donated inputs, when every buffer was taken
        env[f"KI{k}"] = step.kernels.kernel_io
        skip = {j for j, _ in into}
        io_args = call_args[:len(arrays) + len(scalars)] + [
            a for j, a in enumerate(call_args[len(arrays) + len(scalars):]) if j not in skip]
        taken = " and ".join(f"o{j} is {arrays[a]}" for j, a in into)
        body += [f"if {taken}:", f"    LAUNCH(KI{k}, R[2], {', '.join(io_args)}, *R[5])",
                 "else:", "    " + call]
    else:
        body.append(call)
    body += [f"{v} = o{j}" if o in step.sum_leads else f"{v} = o{j} if R[4] is None else "
             f"o{j}.reshape(R[4])" for j, (v, o) in enumerate(zip(outs, step.outputs))]
    lines += ["    " + b for b in body]
    slow_args = "(" + "".join(f"{a}, " for a in arrays + scalars) + ")"
    donor_args = "(" + "".join(f"{a}, " for a in donors) + ")"
    lines += ["else:", f"    {', '.join(outs)}, = SLOW(S{k}, {slow_args}, {donor_args})"]
    return lines


def reshape_like(node: Any, types: Any) -> tuple | None:
    """``(input shape, output shape)`` when library ``node`` is a view op (``view`` flag) that,
    for its input's static shape, only reshapes: its result holds the input's elements in the
    same C order (expand_dims, squeeze, reshape; not a transpose or a slice). Decided once by
    running the op on a probe of distinct values; None otherwise. Then ``x.reshape(shape)``
    gives the op's values without the call (a view, or a copy where the op's view could not
    be a reshape: plans treat every library result as a possible view either way).

    >>> from samediff.ir import Node
    >>> from samediff.ops import TensorType, get_op
    >>> f32 = np.dtype("float32")
    >>> t = {"x": TensorType((4,), f32), "y": TensorType((4, 1), f32), "m": TensorType((2, 2), f32)}
    >>> expand, permute = get_op("expand_dims"), get_op("permute")
    >>> reshape_like(Node("e", expand, expand.make_attrs({"axis": 1}), ("x",), ("y",)), t)
    ((4,), (4, 1))
    >>> transpose = Node("p", permute, permute.make_attrs({"dims": (1, 0)}), ("m",), ("m",))
    >>> print(reshape_like(transpose, t))
    None
    """
    op = node.op
    if not op.view or op.multi_output or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    tin, tout = types[node.inputs[0]], types[node.outputs[0]]
    if tin.weak or tout.weak or tin.dtype != tout.dtype or min((*tin.shape, *tout.shape, 0)) < 0:
        return None
    size = int(np.prod(tin.shape, dtype=np.int64))
    if size != int(np.prod(tout.shape, dtype=np.int64)) or size > 1 << 20:
        return None  # (a huge probe is not worth building; the call stays)
    probe = np.arange(size, dtype=np.int64).reshape(tin.shape)
    try:
        got = op.impl(probe, **node.attrs.__dict__)
    except Exception:  # noqa: BLE001 - the op wants something else: keep the call
        return None
    if type(got) is not _ND or got.shape != tuple(tout.shape) \
            or not np.array_equal(got.reshape(-1), probe.reshape(-1)):
        return None
    return tuple(tin.shape), tuple(tout.shape)


def _library_lines(k: int, node: Any, name: Callable[[Any], str], env: dict,
                   types: Any) -> list[str]:
    """Call library node ``k``'s implementation directly (interpreter rules on odd results);
    a reshape-like view op is a ``reshape`` (``reshape_like``) when its input is as typed."""
    lines = _call_lines(k, node, name, env, types)
    shapes = reshape_like(node, types)
    if shapes is None:
        return lines
    env[f"I{k}"], env[f"O{k}"] = shapes
    x, out = name(node.inputs[0]), name(node.outputs[0])
    return ([f"if type({x}) is ND and {x}.shape == I{k}:", f"    {out} = {x}.reshape(O{k})",
             "else:"] + ["    " + line for line in lines])


def _call_lines(k: int, node: Any, name: Callable[[Any], str], env: dict,
                types: Any) -> list[str]:
    env[f"F{k}"], env[f"N{k}"] = node.op.impl, node
    attrs = node.attrs.__dict__
    args = [name(i) for i in node.inputs]
    call = ", ".join(args + ([f"**A{k}"] if attrs else []))
    if attrs:
        env[f"A{k}"] = attrs
    packed = "(" + "".join(f"{a}, " for a in args) + ")"
    outs = [name(o) for o in node.outputs]
    lines = ["try:", f"    R = F{k}({call})", "except Exception as exc:",
             f"    FAILED(N{k}, {packed}, exc)"]
    if len(outs) == 1 and not any(types[i].weak for i in node.inputs):
        lines.append(f"{outs[0]} = R if type(R) is ND else FINISH(N{k}, {packed}, R)")
    elif len(outs) == 1:  # weak scalars in: the interpreter's rules decide (lr * 0.5 stays weak)
        lines.append(f"{outs[0]} = FINISH(N{k}, {packed}, R)")
    else:
        lines.append(f"{', '.join(outs)}, = FINISH(N{k}, {packed}, R)")
    return lines


def build_driver(plan: Any, kernel_step: type) -> Callable[[list], list]:
    """The plan as one function ``drive(inputs) -> results`` (see the module docstring)."""
    names: dict[Any, str] = {}
    env: dict[str, Any] = {"ND": _ND, "EMPTY": np.empty, "ZEROS": np.zeros, "DON": _donated,
                           "SLOW": _slow, "FINISH": _finish, "FAILED": _failed,
                           "LAUNCH": workers.split_leading}
    for j, (slot, value) in enumerate(plan.constants.items()):
        names[slot] = f"c{j}"
        env[f"C{j}"] = value

    def name(slot: Any) -> str:
        if slot not in names:
            names[slot] = f"v{len(names)}"
        return names[slot]

    inputs = [name(s) for s in plan.input_slots]
    lines = ["def drive(inputs):"]
    if inputs:
        lines.append(f"    {', '.join(inputs)}, = inputs")
    lines += [f"    c{j} = C{j}" for j in range(len(plan.constants))]
    for k, (step, frees) in enumerate(zip(plan.steps, plan._frees)):
        if isinstance(step, kernel_step) and step.kernels is not None:
            body = _kernel_lines(k, step, name, env)
        elif isinstance(step, kernel_step):  # no kernel: the interpreter runs the group
            body = [f"{', '.join(name(o) for o in step.outputs)}, = SLOW(S{k}, ("
                    + "".join(f"{name(a)}, " for a in step.arrays + step.scalars) + "), ("
                    + "".join(f"{name(step.donated[o])}, " for o in step.outputs
                              if o in step.donated) + "))"]
            env[f"S{k}"] = step
        else:
            body = _library_lines(k, step, name, env, plan.types)
        lines += ["    " + b for b in body]
        # a freed value was produced before (inputs, constants and results are never freed)
        gone = [names[s] for s in frees if s in names]
        if gone:
            lines.append(f"    del {', '.join(gone)}")
    lines.append(f"    return [{', '.join(name(s) for s in plan._results)}]")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<nd4py plan driver {id(plan):x}>", "exec")
    exec(code, env)  # noqa: S102 - our own generated source
    drive = env["drive"]
    drive.source = source  # (for reading: explain() does not print it)
    return drive
