"""Run ONNX models through the importer the way ONNX's backend tests do, and sweep the
backend node-test suite shipped in the ``onnx`` wheel.

``run(model, inputs)`` imports a model (a graph input that an op needs at import -- a
``Reshape`` target fed as an input -- is taken as a static input with the value given, and
the import retried) and runs it on positional inputs, returning the outputs in the
graph's order.

``python -m samediff.onnx.backend [--ops Relu,Add] [--show-fail] [--write-failures PATH]``
runs every node test (1,884 cases in onnx 1.23) and prints the pass rate and every failure
by cause.
"""
from __future__ import annotations

import argparse
import collections
import sys
import warnings
from typing import Any, Sequence

import numpy as np

from ..dtypes import as_utf8, is_storage, is_string
from .importer import element_name, import_with_outputs, load_model
from .table import OnnxStaticInputError, all_nodes, bodies

__all__ = ["run", "feeding", "node_cases", "check_case", "sweep"]


def run(model: Any, inputs: Sequence[Any]) -> list[Any]:
    """Import ``model`` and run it on ``inputs`` (in the order of its graph inputs that are
    not initializers); the outputs in the graph's order. A sequence is a list of arrays (in
    and out), an empty optional None; the sequences' lengths (and an optional's emptiness)
    are passed to the import from the values fed."""
    proto, base = load_model(model)
    source = model if base is not None else proto  # (a file: its external data beside it)
    initializers = {t.name for t in proto.graph.initializer}
    given = [vi for vi in proto.graph.input if vi.name not in initializers]
    feeds = {vi.name: x for vi, x in zip(given, inputs)}
    static: dict[str, Any] = {}
    layouts: dict[str, Any] = {}
    for vi, x in zip(given, inputs):
        _structure(vi.name, vi.type, x, static, layouts)
    while True:
        try:
            sd, where = import_with_outputs(source, static_inputs=static,
                                            sequence_inputs=layouts)  # (parsed once)
            break
        except OnnxStaticInputError as exc:
            needed = [n for n in feeding(proto, exc.input_name) if n in feeds]
            if not needed or all(n in static for n in needed):
                raise
            static.update({n: feeds[n] for n in needed})
    placeholders = {p.name for p in sd.placeholders()}
    fed: dict[str, np.ndarray] = {}
    for name, x in feeds.items():
        for k, v in ([(element_name(name, i), e) for i, e in enumerate(x)]
                     if isinstance(x, list) else [(name, x)] if x is not None else []):
            if k in placeholders:
                fed[k] = as_utf8(np.asarray(v))  # (onnx's strings are object arrays)
    wanted = _names(list(where.values()))
    got = sd.output(fed, *wanted) if wanted else {}

    def rebuild(at: Any) -> Any:
        if at is None or isinstance(at, str):
            return None if at is None else np.asarray(got[at].numpy())
        return [rebuild(a) for a in at]
    return [rebuild(where[vo.name]) for vo in proto.graph.output]


def _structure(name: str, tp: Any, value: Any, static: dict[str, Any],
               layouts: dict[str, Any]) -> None:
    """What the import needs to know of fed value ``value`` of a non-tensor graph input: an
    optional fed None is empty (a static input), a sequence's length (its element shapes
    when the model declares none)."""
    kind = tp.WhichOneof("value")
    if kind == "optional_type":
        if value is None:
            static[name] = None
            return
        tp = tp.optional_type.elem_type
        kind = tp.WhichOneof("value")
    if kind == "sequence_type" and isinstance(value, list):
        elem = tp.sequence_type.elem_type.tensor_type
        layouts[name] = (len(value) if elem.HasField("shape")
                         else [np.shape(e) for e in value])


def _names(where: list) -> list[str]:
    """The variable names in ``import_with_outputs``'s output layout, flattened."""
    out: list[str] = []
    for at in where:
        if isinstance(at, str):
            out.append(at)
        elif at is not None:
            out += _names(at)
    return out


def feeding(model: Any, name: str) -> list[str]:
    """The graph inputs value ``name`` is computed from (itself, if it is one), found by
    walking the producing nodes back (bodies' outer-scope reads included)."""
    graph = model.graph
    producers = {}
    for node in all_nodes(graph.node):  # (a body's value may be the one needed)
        for out in node.output:
            producers[out] = node
    inputs = {vi.name for vi in graph.input}
    found, seen, todo = [], set(), [name]
    while todo:
        value = todo.pop()
        if value in seen or not value:
            continue
        seen.add(value)
        if value in inputs:
            found.append(value)
        node = producers.get(value)
        if node is not None:
            todo += list(node.input) + _outer_reads(node)
    return found


def _outer_reads(node: Any) -> list[str]:
    """Names a node's bodies read (their own inputs and outputs aside: a superset is fine)."""
    names = []
    for g in bodies(node):
        for inner in g.node:
            names += list(inner.input) + _outer_reads(inner)
    return names


def node_cases(ops: Sequence[str] | None = None) -> list:
    """The ONNX backend node tests (``onnx.backend.test.loader``), optionally only those
    whose model uses one of ``ops`` (op types)."""
    from onnx.backend.test import loader
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = loader.load_node_model_tests()
    if ops:
        wanted = set(ops)
        cases = [c for c in cases if wanted & {n.op_type for n in c.model.graph.node}]
    return cases


def check_case(case: Any, executor: str | None = None) -> str:
    """'' when node test ``case`` passes, else why not (one line). ``executor``:
    ``"compiled"`` or ``"interpreter"`` for the run (default: the process's)."""
    from .. import compiler
    previous = compiler.set_executor(executor or compiler.get_executor())
    try:
        return _check(case)
    finally:
        compiler.set_executor(previous)


def _check(case: Any) -> str:
    for inputs, expected in case.data_sets:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = run(case.model, [_array(x) for x in inputs])
        except Exception as exc:  # noqa: BLE001 - the sweep reports every cause
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        pairs, why = _pair_outputs(got, expected)
        if why:
            return why
        for k, g, want in pairs:
            want = np.asarray(_array(want))
            if is_string(g.dtype) or want.dtype == object or g.dtype == object:
                # strings compare exactly, shape first (onnx's expected strings are objects)
                if want.dtype == object and is_string(g.dtype):
                    want = as_utf8(want)
                if g.shape != want.shape:
                    return f"output {k}: shape {g.shape}, expected {want.shape}"
                if g.dtype != want.dtype or not np.array_equal(g, want):
                    return f"output {k}: values differ"
                continue
            if g.dtype != want.dtype:
                return f"output {k}: dtype {g.dtype}, expected {want.dtype}"
            if g.shape != want.shape:
                return f"output {k}: shape {g.shape}, expected {want.shape}"
            if is_storage(want.dtype):  # (bfloat16, float8...: compared as the values they hold)
                g, want = g.astype(np.float64), want.astype(np.float64)
            if not np.allclose(g, want, rtol=case.rtol, atol=case.atol, equal_nan=True):
                err = np.max(np.abs(g.astype(np.float64) - want.astype(np.float64)))
                return f"output {k}: values differ (max |err| {err:.3g})"
    return ""


def _pair_outputs(got: list, expected: list) -> tuple[list[tuple[Any, Any, Any]], str]:
    """The (label, got, expected) tensor pairs to compare -- a sequence output element by
    element (labelled ``k[i]``), an optional by its content -- or why the outputs' structures
    differ (a sequence's length, an optional empty on one side only)."""
    pairs: list[tuple[Any, Any, Any]] = []

    def kind(v: Any) -> str:
        return ("an empty optional" if v is None else
                f"a sequence of {len(v)}" if isinstance(v, list) else "a tensor")

    def walk(label: Any, g: Any, want: Any) -> str:
        if g is None or want is None or isinstance(g, list) or isinstance(want, list):
            if kind(g) != kind(want):
                return f"output {label}: {kind(g)}, expected {kind(want)}"
            for i, (a, b) in enumerate(zip(g or [], want or [])):
                why = walk(f"{label}[{i}]", a, b)
                if why:
                    return why
            return ""
        pairs.append((label, g, want))
        return ""
    for k, (g, want) in enumerate(zip(got, expected)):
        why = walk(k, g, want)
        if why:
            return pairs, why
    return pairs, ""


def _array(value: Any) -> Any:
    """A test value given as a ``TensorProto`` (the suite's files) as an array (bfloat16,
    float8 and 4-bit values as ml_dtypes arrays); anything else as it is."""
    if hasattr(value, "raw_data"):
        from onnx import numpy_helper
        return numpy_helper.to_array(value)
    return value


def sweep(ops: Sequence[str] | None = None) -> dict[str, str]:
    """case name -> '' (passed) or the reason it failed."""
    return {case.name: check_case(case) for case in node_cases(ops)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ONNX backend node tests through nd4py")
    parser.add_argument("--ops", help="only tests using these op types (comma-separated)")
    parser.add_argument("--show-fail", action="store_true", help="one line per failure")
    parser.add_argument("--write-failures", metavar="PATH",
                        help="write the failures, one 'case<TAB>cause' line each (the list "
                             "tests/test_onnx_node_suite.py holds the suite to)")
    args = parser.parse_args(argv)
    results = sweep(args.ops.split(",") if args.ops else None)
    passed = sum(1 for r in results.values() if not r)
    causes = collections.Counter(r.split(":")[0] for r in results.values() if r)
    share = 100.0 * passed / max(1, len(results))
    print(f"{passed}/{len(results)} node tests pass ({share:.1f} %)")
    for cause, n in causes.most_common():
        print(f"  {n:5d}  {cause}")
    if args.write_failures:
        with open(args.write_failures, "w") as f:
            f.write("# ONNX backend node tests nd4py fails, and why (python -m "
                    "samediff.onnx.backend --write-failures)\n")
            for name, why in sorted(results.items()):
                if why:
                    f.write(f"{name}\t{why}\n")
    if args.show_fail:
        for name, why in sorted(results.items()):
            if why:
                print(f"{name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
