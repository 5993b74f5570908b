"""Imported ONNX models: nd4py's compiled inference against onnxruntime (CPU) and
``onnx.reference`` -- float32, each contestant timed in a process of its own, processes
alternating round by round, ratios from the same run (``timing.alternating_processes``).

Why processes of their own: onnxruntime's intra-op threads spin after each run (its default)
and nd4py's helper thread polls after each split kernel; in one process each slowed the other
(same run: nd4py's encoder at batch 1 11.9 -> 7.5 ms and onnxruntime's CNN at batch 1
7.0 -> 4.5 ms once onnxruntime's spinning was turned off). A user runs one of them.

The two models are built here with ``onnx.helper`` and seeded numpy weights (no torch), in the
form PyTorch's exporter gives them, each with a symbolic batch dim ``N``:

* **cnn** -- ResNet-style: stem conv 3x3 (3 -> 32) + BatchNormalization + Relu, three stages of
  two basic residual blocks (two 3x3 convs with BatchNormalization; an identity shortcut, or a
  strided 1x1 conv + BatchNormalization projection where the width or stride changes; widths
  32 / 64 / 128, stride 2 between stages), GlobalAveragePool, Flatten, Gemm to 10 classes;
  input ``[N, 3, 64, 64]``, opset 17.
* **enc** -- a post-LN transformer encoder as ``torch.onnx.export`` (opset 17, dynamic batch)
  writes it: 2 layers, d 256, 4 heads, feed-forward 1,024, seq 128; ``MatMul`` + ``Add``
  projections, heads by ``Reshape`` (its target from ``Shape -> Gather -> Unsqueeze ->
  Concat``, as the exporter computes it) and ``Transpose``, ``MatMul`` / ``Div`` by
  ``sqrt(64)`` / ``Softmax`` attention, ``LayerNormalization``, Erf GELU
  (``x * 0.5 * (1 + erf(x / sqrt 2))`` as ``Div``, ``Erf``, ``Add``, ``Mul``, ``Mul``); input
  ``[N, 128, 256]``.

Rows: **cnn-b1**, **cnn-b32**, **enc-b1**, **enc-b32** (batch 1 and 32). Contestants (their
column names in the tables and the JSON in parentheses):

* **nd4py** -- ``samediff.onnx.import_onnx`` once per model, then ``sd.output({"x": x}, y)``
  with the compiled executor (the default; one plan per batch size, built on the first call).
  Its first-call time (import + the first run at each batch size, which builds the plan) is
  printed separately, next to onnxruntime's session-creation time; kernels already in the
  on-disk kernel cache (an earlier run's) are loaded, not compiled (``bench_first_call.py``
  times a cold cache).
* **numpy** -- skipped: there is no numpy ONNX runtime other than ``onnx.reference``.
* **onnxruntime** (``ort``) -- ``InferenceSession`` with ``CPUExecutionProvider`` and default
  threads (graph optimizations at their default, all). Not a dependency: skipped, with a
  note, when not installed.
* **onnx.reference** (``onnx.ref``) -- ``ReferenceEvaluator``, batch-1 rows only and few
  samples (it is slow), in a second alternating run against nd4py (one call per sample).

Before timing, nd4py's outputs are checked against onnxruntime's (or, without it, the
reference's) at both batch sizes: the max absolute error and the max error relative to the
largest reference magnitude are printed; over 1e-4 relative is reported as a mismatch.

Goal (issue 26): every row <= 1.0x onnxruntime's time; the ratios are reported either way.
``--profile ROW`` (e.g. ``--profile enc-b32``) prints instead where nd4py's time goes on one
row: the plan (``sd.last_plan.explain()``) and the profiler's per-op table.
Run ``python benchmarks/bench_onnx.py [--json] [--quick] [--busy] [--profile ROW]``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
from timing import (alternating_processes, child_samples, comparison_parser,  # benchmarks/
                    print_ratios)

import nd4py as nd

OPSET = 17
IMG, CLASSES, WIDTHS = 64, 10, (32, 64, 128)
SEQ, D, HEADS, FF, LAYERS = 128, 256, 4, 1024, 2
BATCHES = (1, 32)
BURST = 3
F32 = np.float32
TOLERANCE = 1e-4  # relative to the largest reference magnitude


# -- the models ------------------------------------------------------------------------------

class _Builder:
    """Nodes and initializers of one graph, with fresh names and seeded weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"/{base}_{self.count}"

    def init(self, base: str, value: np.ndarray) -> str:
        from onnx import numpy_helper
        name = f"{base}_{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list, **attrs) -> str:
        from onnx import helper
        out = self.name(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out

    def const(self, value: np.ndarray) -> str:
        """A ``Constant`` node, as the exporter writes scalars and shape pieces."""
        from onnx import helper, numpy_helper
        out = self.name("Constant")
        self.nodes.append(helper.make_node("Constant", [], [out], name=out + "_node",
                                           value=numpy_helper.from_array(np.asarray(value))))
        return out

    def uniform(self, bound: float, shape: tuple) -> np.ndarray:
        return self.rng.uniform(-bound, bound, shape).astype(F32)

    def model(self, x_shape: list, y_shape: list, out: str):
        from onnx import TensorProto, helper
        self.nodes.append(helper.make_node("Identity", [out], ["y"], name="output"))
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _conv_bn(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int) -> str:
    """Conv (no bias, He-scaled weights) then inference-mode BatchNormalization."""
    w = b.init("conv.weight", b.uniform(math.sqrt(6.0 / (cin * k * k)), (cout, cin, k, k)))
    y = b.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
               pads=[k // 2] * 4)
    gamma = b.init("bn.weight", b.rng.uniform(0.5, 1.0, cout).astype(F32))
    beta = b.init("bn.bias", b.uniform(0.1, (cout,)))
    mean = b.init("bn.running_mean", b.uniform(0.1, (cout,)))
    var = b.init("bn.running_var", b.rng.uniform(0.5, 1.5, cout).astype(F32))
    return b.node("BatchNormalization", [y, gamma, beta, mean, var], epsilon=1e-5)


def build_cnn():
    """The ResNet-style CNN (see the module docstring) as an ``onnx.ModelProto``."""
    b = _Builder(1)
    h = b.node("Relu", [_conv_bn(b, "x", 3, WIDTHS[0], 3, 1)])
    cin = WIDTHS[0]
    for stage, width in enumerate(WIDTHS):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            a = b.node("Relu", [_conv_bn(b, h, cin, width, 3, stride)])
            a = _conv_bn(b, a, width, width, 3, 1)
            short = h if stride == 1 and cin == width else _conv_bn(b, h, cin, width, 1, stride)
            h = b.node("Relu", [b.node("Add", [a, short])])
            cin = width
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h])], axis=1)
    bound = 1.0 / math.sqrt(cin)
    w = b.init("fc.weight", b.uniform(bound, (CLASSES, cin)))
    bias = b.init("fc.bias", b.uniform(bound, (CLASSES,)))
    out = b.node("Gemm", [h, w, bias], alpha=1.0, beta=1.0, transB=1)
    return b.model(["N", 3, IMG, IMG], ["N", CLASSES], out)


def _linear(b: _Builder, x: str, cin: int, cout: int) -> str:
    """``nn.Linear`` on a 3-D input as the exporter writes it: MatMul by the transposed
    weight, then ``Add(bias, .)``."""
    bound = 1.0 / math.sqrt(cin)
    w = b.init("linear.weight_t", b.uniform(bound, (cin, cout)))
    bias = b.init("linear.bias", b.uniform(bound, (cout,)))
    return b.node("Add", [bias, b.node("MatMul", [x, w])])


def _dims(b: _Builder, x: str, n: int) -> list:
    """``x.shape[i]`` for i < n as the exporter computes them: Shape, Gather, Unsqueeze."""
    out = []
    for i in range(n):
        g = b.node("Gather", [b.node("Shape", [x]), b.const(np.array(i, np.int64))], axis=0)
        out.append(b.node("Unsqueeze", [g, b.const(np.array([0], np.int64))]))
    return out


def _encoder_layer(b: _Builder, x: str) -> str:
    hd = D // HEADS
    batch, seq = _dims(b, x, 2)

    def heads(t: str, perm: list) -> str:
        shape = b.node("Concat", [batch, seq, b.const(np.array([HEADS], np.int64)),
                                  b.const(np.array([hd], np.int64))], axis=0)
        return b.node("Transpose", [b.node("Reshape", [t, shape])], perm=perm)
    q = heads(_linear(b, x, D, D), [0, 2, 1, 3])
    k = heads(_linear(b, x, D, D), [0, 2, 3, 1])  # (k.transpose(-1, -2) folded in)
    scores = b.node("Div", [b.node("MatMul", [q, k]), b.const(np.array(math.sqrt(hd), F32))])
    v = heads(_linear(b, x, D, D), [0, 2, 1, 3])
    a = b.node("Transpose", [b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])],
               perm=[0, 2, 1, 3])
    model = b.const(np.array([D], np.int64))
    a = b.node("Reshape", [a, b.node("Concat", [batch, seq, model], axis=0)])
    h = _layer_norm(b, b.node("Add", [x, _linear(b, a, D, D)]))
    f = _linear(b, h, D, FF)
    erf = b.node("Erf", [b.node("Div", [f, b.const(np.array(math.sqrt(2.0), F32))])])
    gelu = b.node("Mul", [b.node("Mul", [f, b.node("Add", [erf, b.const(np.array(1.0, F32))])]),
                          b.const(np.array(0.5, F32))])
    return _layer_norm(b, b.node("Add", [h, _linear(b, gelu, FF, D)]))


def _layer_norm(b: _Builder, x: str) -> str:
    gamma = b.init("norm.weight", b.rng.uniform(0.8, 1.2, D).astype(F32))
    beta = b.init("norm.bias", b.uniform(0.1, (D,)))
    return b.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)


def build_encoder():
    """The transformer encoder (see the module docstring) as an ``onnx.ModelProto``."""
    b = _Builder(2)
    h = "x"
    for _ in range(LAYERS):
        h = _encoder_layer(b, h)
    return b.model(["N", SEQ, D], ["N", SEQ, D], h)


MODELS = {"cnn": (build_cnn, (3, IMG, IMG)), "enc": (build_encoder, (SEQ, D))}
ROWS = [f"{m}-b{n}" for m in MODELS for n in BATCHES]
MODEL_OF = {row: row.split("-")[0] for row in ROWS}


def inputs() -> dict:
    """A seeded input per row."""
    rng = np.random.default_rng(0)
    return {f"{m}-b{n}": rng.standard_normal((n, *MODELS[m][1])).astype(F32)
            for m in MODELS for n in BATCHES}


# -- the contestants -------------------------------------------------------------------------

def nd_sessions(protos: dict, xs: dict, first_call: dict | None = None) -> dict:
    """``{row: fn}`` for nd4py; ``first_call`` (when given) gets each model's import seconds
    and each row's first-run (plan-building) seconds."""
    from samediff.onnx import import_onnx
    rows = {}
    for m, proto in protos.items():
        t0 = time.perf_counter()
        sd = import_onnx(proto)
        if first_call is not None:
            first_call[f"{m}-import"] = time.perf_counter() - t0
        for n in BATCHES:
            row = f"{m}-b{n}"
            feed = {"x": xs[row]}
            rows[row] = (lambda sd=sd, feed=feed: sd.output(feed, "y")["y"])
            if first_call is not None:
                t0 = time.perf_counter()
                rows[row]()
                first_call[f"{row}-first-run"] = time.perf_counter() - t0
            rows[row].sd = sd  # (for --profile: its last_plan)
    return rows


def ort_sessions(protos: dict, xs: dict, first_call: dict | None = None) -> dict | None:
    """``{row: fn}`` for onnxruntime, or None when it is not installed; ``first_call`` (when
    given) gets each model's session-creation seconds (its graph optimizations)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sessions = {}
    for m, p in protos.items():
        t0 = time.perf_counter()
        sessions[m] = ort.InferenceSession(p.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
        if first_call is not None:
            first_call[f"ort-{m}-session"] = time.perf_counter() - t0
    return {row: (lambda s=sessions[MODEL_OF[row]], x=xs[row]: s.run(None, {"x": x})[0])
            for row in ROWS}


def reference_sessions(protos: dict, xs: dict, rows: list) -> dict:
    """``{row: fn}`` for ``onnx.reference.ReferenceEvaluator`` on the given rows."""
    from onnx.reference import ReferenceEvaluator
    evaluators = {m: ReferenceEvaluator(p) for m, p in protos.items()}
    return {row: (lambda e=evaluators[MODEL_OF[row]], x=xs[row]: e.run(None, {"x": x})[0])
            for row in rows}


def check(nd_rows: dict, oracle: dict) -> dict:
    """Max absolute and relative (to the oracle's largest magnitude) error per row."""
    out = {}
    for row, fn in oracle.items():
        want = np.asarray(fn(), np.float64)
        got = np.asarray(nd_rows[row]().numpy(), np.float64)
        if got.shape != want.shape:
            out[row] = {"shape": list(got.shape), "expected_shape": list(want.shape)}
            continue
        err = float(np.abs(got - want).max())
        out[row] = {"max_abs_err": err, "max_rel_err": err / max(float(np.abs(want).max()),
                                                                 1e-30)}
    return out


# -- the runs ---------------------------------------------------------------------------------

def run_profile(row: str, protos: dict, xs: dict) -> None:
    """Where nd4py's time goes on one row: its plan, then the per-op table of a few runs."""
    m = MODEL_OF[row]
    fn = nd_sessions({m: protos[m]}, xs)[row]
    fn()  # (builds the plan: kept out of the profile)
    print(f"{row}: {fn.sd.last_plan.explain()}\n")
    with nd.profile(warmup=1, steps=5) as prof:
        for _ in range(6):
            fn()
    print(f"{row}, 5 runs:")
    nd.profile_summary(prof)


def _child(name: str, rows: list, bursts: int) -> None:
    """One contestant's process (``timing.alternating_processes``): its sessions for
    ``rows``, then ``child_samples``' JSON on the last line."""
    protos = {m: build() for m, (build, _) in MODELS.items()}
    xs = inputs()
    if name == "nd4py":
        fns = nd_sessions(protos, xs)
    elif name == "ort":
        fns = ort_sessions(protos, xs)
    else:
        fns = reference_sessions(protos, xs, rows)
    print(json.dumps(child_samples({r: fns[r] for r in rows}, bursts,
                                   BURST if name != "onnx.ref" else 1)))


def main() -> None:
    parser = comparison_parser(__doc__, processes=False)
    parser.add_argument("--profile", choices=ROWS, help="print where nd4py's time goes on "
                        "this row (its plan and the profiler's per-op table) and stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--bursts", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.rows.split(","), args.bursts)
        return
    protos = {m: build() for m, (build, _) in MODELS.items()}
    xs = inputs()
    if args.profile:
        run_profile(args.profile, protos, xs)
        return
    say = (lambda *a: None) if args.json else print
    first_call: dict = {}
    ours = nd_sessions(protos, xs, first_call)
    say("nd4py first call (import, then the first run per batch size, which builds the plan): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in first_call.items()))
    ort_first: dict = {}
    theirs = ort_sessions(protos, xs, ort_first)
    if theirs is None:
        say("onnxruntime is not installed: its column is skipped (pip install onnxruntime)")
    else:
        say("onnxruntime session creation: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in ort_first.items()))
        first_call.update(ort_first)
    say("numpy: skipped (no numpy ONNX runtime other than onnx.reference)")
    b1 = [r for r in ROWS if r.endswith("-b1")]
    oracle_name = "onnxruntime" if theirs is not None else "onnx.reference"
    errors = check(ours, theirs if theirs is not None else reference_sessions(protos, xs, ROWS))
    for row, e in errors.items():
        if "max_abs_err" not in e:
            say(f"{row}: MISMATCH, nd4py's output shape {e['shape']} != {e['expected_shape']}")
        else:
            verdict = "ok" if e["max_rel_err"] <= TOLERANCE else f"MISMATCH (> {TOLERANCE:g})"
            say(f"{row}: nd4py vs {oracle_name}: max abs err {e['max_abs_err']:.2e}, "
                f"relative to the largest |output| {e['max_rel_err']:.2e} -- {verdict}")
    del ours, theirs  # (their threads must not run next to the timed processes)

    def command(rows: list, bursts: int) -> list:
        return [sys.executable, __file__, "--rows", ",".join(rows), "--bursts", str(bursts)]
    names = ["nd4py"] + (["ort"] if oracle_name == "onnxruntime" else [])
    rounds = 3 if args.quick else 7
    result = alternating_processes(command(ROWS, 3), names, ROWS, rounds, args.busy)
    if not args.json:
        print_ratios(result, names, args.busy)
    # the reference: batch 1 only, one call per sample (a call takes 0.1-0.5 s; at batch
    # 32 several seconds)
    ref = alternating_processes(command(b1, 2), ["nd4py", "onnx.ref"], b1,
                                1 if args.quick else 3, args.busy)
    if args.json:
        print(json.dumps({"first_call_s": first_call, "errors_vs_" + oracle_name: errors,
                          "rows": result, "reference_rows": ref}, indent=1))
    else:
        print_ratios(ref, ["nd4py", "onnx.ref"], args.busy)


if __name__ == "__main__":
    main()
