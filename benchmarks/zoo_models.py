"""The model-zoo CNNs of issue 26 -- exported from torchvision here -- through nd4py's ONNX
import: correctness against onnxruntime and ``onnx.reference``, and compiled inference time
against onnxruntime's (float32, CPU).

Issue 26 asks that the model-zoo CNNs shipped with onnx's backend test data (AlexNet,
DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet) import and
give their expected outputs. Those files are downloaded at test time; without a network the
same architectures come from torchvision instead, exported here. **This script runs in an
environment with torch and torchvision** (torch is never a dependency of nd4py), plus onnx
and onnxruntime.

Models (torchvision's, ``weights=None`` after ``torch.manual_seed(0)``, ``eval()``): alexnet,
densenet121, googlenet (Inception v1; ``aux_logits=False``, ``transform_input=False``),
inception_v3 (``aux_logits=False``, input 299 x 299), resnet50, shufflenet_v2_x1_0,
squeezenet1_0, squeezenet1_1, vgg19, and **zfnet** -- defined here: AlexNet with ZFNet's
7 x 7 / 2 first convolution and 5 x 5 / 2 second one. Each is exported with
``torch.onnx.export`` (TorchScript exporter: ``dynamo=False``, opset 17, a dynamic batch
axis; constant folding on, so batch norms sit next to their convolutions as separate
``BatchNormalization`` nodes or folded, as the exporter decides) into a temporary directory
(``--keep DIR`` keeps the files). The features the last ``Gemm`` reads (the pooled,
flattened activations) become a second graph output, ``features``, compared too: with
random weights some logits hardly depend on the input (GoogLeNet's are its last layer's
bias to 1e-12), so the features are what checks the convolutions.

Per model:

* ``SameDiff.import_onnx`` (timed: "import s"), then the first compiled run at batch 1
  ("first run s": it builds the plan; kernels already in the on-disk kernel cache load
  instead of compiling);
* nd4py's outputs at batch 1 and 2 (seeded standard-normal inputs) against onnxruntime's
  (``CPUExecutionProvider``, default threads and graph optimizations): max absolute error,
  and max error relative to the largest |output|; over 1e-4 relative is a mismatch;
* nd4py's batch-1 output against ``onnx.reference.ReferenceEvaluator``'s, run in a child
  process with a time limit (``--reference-timeout``, 60 s): where the reference takes longer
  the column says so ("skip >60s");
* times: median of interleaved runs of nd4py (compiled) and onnxruntime at batch 1 and 8
  (``timing.interleaved``; the ratio is nd4py's time over onnxruntime's, from the same run).

The table: model, params (millions), ONNX nodes, import s, first run s, nd4py and ort ms and
their ratio at batch 1 and 8, the relative errors against ort and the reference; then each
model's errors in full and its wall time (export, reference, import, checks, timing).
``--models a,b`` picks models; ``--quick`` times fewer runs; ``--json`` prints one JSON object.
Run ``python benchmarks/zoo_models.py [--json] [--quick] [--models ...] [--keep DIR]``.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from timing import comparison_parser, interleaved  # benchmarks/timing.py

OPSET = 17
TOLERANCE = 1e-4  # relative to the largest reference magnitude
CHECK_BATCHES = (1, 2)
TIME_BATCHES = (1, 8)
F32 = np.float32


# -- torchvision, whose C++ ops may not load -------------------------------------------------

def _torchvision_models():
    """``torchvision.models``, imported in an environment whose torchvision wheel was built
    for another torch (its C++ ops do not load): only the ops' fake registrations fail there,
    and the classification models need none of those ops, so the failing registrations are
    let through as plain functions."""
    import torch
    original = torch.library.register_fake

    def tolerant(op, *args, **kwargs):
        deco = original(op, *args, **kwargs)

        def apply(fn):
            try:
                return deco(fn)
            except RuntimeError:
                return fn
        return apply
    torch.library.register_fake = tolerant
    try:
        from torchvision import models
    finally:
        torch.library.register_fake = original
    return models


# -- the models ------------------------------------------------------------------------------

def _zfnet():
    """ZFNet (Zeiler & Fergus 2013) as an AlexNet variant: a 7x7/2 first convolution and a
    5x5/2 second one (padded so the features end at 6 x 6 x 256, as AlexNet's), then
    AlexNet's classifier. (No local response normalization: PyTorch exports
    ``nn.LocalResponseNorm`` not as an ONNX LRN but as a decomposition whose
    ``Reshape(x, [x.size(0), 1, C, H, -1])`` has two run-time elements, after which nd4py's
    import loses the static dims an ``If`` on them needs -- see the report of issue 26.)"""
    from torch import nn
    return nn.Sequential(
        nn.Conv2d(3, 96, 7, stride=2, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, stride=2, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
        nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 1000))


#: name -> (builder taking torchvision.models, input side)
MODELS = {
    "alexnet": (lambda m: m.alexnet(weights=None), 224),
    "densenet121": (lambda m: m.densenet121(weights=None), 224),
    "googlenet": (lambda m: m.googlenet(weights=None, aux_logits=False,
                                        transform_input=False, init_weights=True), 224),
    "inception_v3": (lambda m: m.inception_v3(weights=None, aux_logits=False,
                                              init_weights=True), 299),
    "resnet50": (lambda m: m.resnet50(weights=None), 224),
    "shufflenet_v2_x1_0": (lambda m: m.shufflenet_v2_x1_0(weights=None), 224),
    "squeezenet1_0": (lambda m: m.squeezenet1_0(weights=None), 224),
    "squeezenet1_1": (lambda m: m.squeezenet1_1(weights=None), 224),
    "vgg19": (lambda m: m.vgg19(weights=None), 224),
    "zfnet": (lambda m: _zfnet(), 224),
}


def export(name: str, directory: str) -> str:
    """Build ``name`` (seeded, eval mode) and export it to ``<directory>/<name>.onnx``."""
    import torch
    build, side = MODELS[name]
    torch.manual_seed(0)
    model = build(_torchvision_models()).eval()
    path = os.path.join(directory, f"{name}.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        # (the TorchScript exporter's deprecation notice, and its notes on what it did not
        # constant-fold: the ONNX graph says the same)
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 3, side, side),), path, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                          opset_version=OPSET, dynamo=False)
    return path


def inputs(side: int) -> dict:
    """A seeded standard-normal input per batch size (checks and timing)."""
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((n, 3, side, side)).astype(F32)
            for n in sorted(set(CHECK_BATCHES) | set(TIME_BATCHES))}


# -- onnx.reference, in a child process with a time limit ------------------------------------

def reference_worker(model_path: str, x_path: str, out_path: str) -> None:
    """(The child process.) ``onnx.reference`` on one input; writes its outputs."""
    from onnx.reference import ReferenceEvaluator
    np.savez(out_path, *ReferenceEvaluator(model_path).run(None, {"x": np.load(x_path)}))


def reference_output(model_path: str, x: np.ndarray, timeout: float):
    """``(outputs, seconds)``, or ``(None, why)`` when the reference fails or takes longer than
    ``timeout`` seconds (a child process: it can be stopped, and the parent holds no model
    meanwhile)."""
    directory = os.path.dirname(model_path)
    x_path, out_path = os.path.join(directory, "x.npy"), os.path.join(directory, "ref.npz")
    np.save(x_path, x)
    t0 = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--reference-worker",
                               model_path, x_path, out_path], check=False, timeout=timeout,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None, f"skip >{timeout:g}s"
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"reference failed: {last[:200]}"
    with np.load(out_path) as f:
        ys = [f[f"arr_{i}"] for i in range(len(f.files))]
    os.remove(out_path)
    os.remove(x_path)
    return ys, seconds


# -- one model --------------------------------------------------------------------------------

def _add_features_output(proto) -> list:
    """Make the input of the last ``Gemm`` (the flattened features) a graph output named
    ``features`` too (an ``Identity``); the output names to compare."""
    from onnx import TensorProto, helper
    gemms = [n for n in proto.graph.node if n.op_type == "Gemm"]
    if not gemms:
        return ["y"]
    proto.graph.node.append(helper.make_node("Identity", [gemms[-1].input[0]], ["features"]))
    proto.graph.output.append(helper.make_tensor_value_info("features", TensorProto.FLOAT,
                                                            None))
    return ["y", "features"]


def errors(got, want) -> dict:
    """Max absolute error and max error relative to ``want``'s largest magnitude."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return {"shape": list(got.shape), "expected_shape": list(want.shape),
                "max_rel_err": float("inf")}
    err = float(np.abs(got - want).max())
    return {"max_abs_err": err, "max_rel_err": err / max(float(np.abs(want).max()), 1e-30)}


def run_model(name: str, directory: str, args) -> dict:
    """Export, reference, import, check and time one model; a failing stage is recorded
    (``failed``: stage and error) and ends the model's run."""
    import onnx
    side = MODELS[name][1]
    res: dict = {"model": name, "seconds": {}}
    wall = time.perf_counter()
    stage = "export"
    try:
        t0 = time.perf_counter()
        path = export(name, directory)
        res["seconds"]["export"] = time.perf_counter() - t0
        gc.collect()  # (the torch model)
        proto = onnx.load(path)
        outputs = _add_features_output(proto)
        onnx.save(proto, path)
        res["params"] = int(sum(np.prod(t.dims) for t in proto.graph.initializer))
        res["nodes"] = len(proto.graph.node)
        res["op_types"] = sorted({n.op_type for n in proto.graph.node})
        del proto
        xs = inputs(side)

        stage = "onnx.reference"
        t0 = time.perf_counter()
        ref_y, ref_info = reference_output(path, xs[1], args.reference_timeout)
        res["seconds"]["reference"] = time.perf_counter() - t0
        if ref_y is None:
            res["reference"] = ref_info
        else:
            res["reference_s"] = ref_info

        stage = "import"
        from samediff import SameDiff
        t0 = time.perf_counter()
        sd = SameDiff.import_onnx(path)
        res["import_s"] = time.perf_counter() - t0

        stage = "first run"
        # (timed: the logits; checked: every output)
        nd_fn = {n: (lambda x=x: sd.output({"x": x}, "y")["y"].numpy()) for n, x in xs.items()}
        nd_all = {n: (lambda x=x: [v.numpy() for v in sd.output({"x": x}, *outputs).values()])
                  for n, x in xs.items()}
        t0 = time.perf_counter()
        nd_b1 = nd_all[1]()
        res["first_run_s"] = time.perf_counter() - t0

        stage = "onnxruntime"
        import onnxruntime as ort
        t0 = time.perf_counter()
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        res["ort_session_s"] = time.perf_counter() - t0
        ort_fn = {n: (lambda x=x: session.run(["y"], {"x": x})[0]) for n, x in xs.items()}

        stage = "check"
        res["vs_ort"], res["vs_reference"], res["ort_vs_reference"] = {}, {}, {}
        for n in CHECK_BATCHES:
            ours = nd_b1 if n == 1 else nd_all[n]()
            theirs = session.run(outputs, {"x": xs[n]})
            for k, out in enumerate(outputs):
                res["vs_ort"][f"b{n} {out}"] = errors(ours[k], theirs[k])
                if n == 1 and ref_y is not None:
                    res["vs_reference"][f"b1 {out}"] = errors(ours[k], ref_y[k])
                    res["ort_vs_reference"][f"b1 {out}"] = errors(theirs[k], ref_y[k])
            if n == 2:  # how much the logits depend on the input: a weak check if hardly
                res["logit_spread"] = float(np.abs(theirs[0][0] - theirs[0][1]).max()
                                            / max(float(np.abs(theirs[0]).max()), 1e-30))
        worst = [e["max_rel_err"] for e in res["vs_ort"].values()]
        worst += [e["max_rel_err"] for e in res.get("vs_reference", {}).values()]
        res["ok"] = max(worst) <= TOLERANCE
        res["seconds"]["import+checks"] = time.perf_counter() - t0 + res["import_s"] \
            + res["first_run_s"] + res["ort_session_s"]

        stage = "timing"
        t0 = time.perf_counter()
        rows = {f"b{n}": n for n in TIME_BATCHES}
        timed = interleaved({"nd4py": {r: nd_fn[n] for r, n in rows.items()},
                             "ort": {r: ort_fn[n] for r, n in rows.items()}},
                            rounds=args.rounds, burst=args.burst)
        res["times"] = timed
        res["seconds"]["timing"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 -- the report names the stage and the error
        res["failed"] = {"stage": stage, "error": f"{type(e).__name__}: {e}"[:2000]}
        res["ok"] = False
    res["seconds"]["total"] = time.perf_counter() - wall
    return res


# -- the report ------------------------------------------------------------------------------

def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def print_table(results: list) -> None:
    """The summary table, then each model's errors, failures and wall times."""
    head = (f"{'model':<19}{'params':>8}{'nodes':>6}{'import s':>9}{'1st run s':>10}"
            f"{'nd b1 ms':>10}{'ort b1 ms':>10}{'ratio':>7}{'nd b8 ms':>10}{'ort b8 ms':>10}"
            f"{'ratio':>7}{'rel err ort':>12}{'rel err ref':>12}")
    print(head)
    for r in results:
        t = r.get("times", {})
        b1, b8 = t.get("b1", {}), t.get("b8", {})
        ort_err = max((e["max_rel_err"] for e in r.get("vs_ort", {}).values()), default=None)
        ref_err = max((e["max_rel_err"] for e in r.get("vs_reference", {}).values()),
                      default=None)
        ref_col = _fmt(ref_err, ".1e", r.get("reference", "-"))
        if len(ref_col) > 11:
            ref_col = "failed"
        print(f"{r['model']:<19}{_fmt(r.get('params', 0) / 1e6 if 'params' in r else None, '.1f') + 'M':>8}"
              f"{_fmt(r.get('nodes'), 'd'):>6}{_fmt(r.get('import_s'), '.2f'):>9}"
              f"{_fmt(r.get('first_run_s'), '.2f'):>10}"
              f"{_fmt(b1.get('nd4py_ms'), '.1f'):>10}{_fmt(b1.get('ort_ms'), '.1f'):>10}"
              f"{_fmt(b1.get('vs_ort'), '.2f'):>6}x"
              f"{_fmt(b8.get('nd4py_ms'), '.1f'):>10}{_fmt(b8.get('ort_ms'), '.1f'):>10}"
              f"{_fmt(b8.get('vs_ort'), '.2f'):>6}x"
              f"{_fmt(ort_err, '.1e'):>12}{ref_col:>12}"
              + ("" if r.get("ok") else "  FAIL"))
    print(f"\n(relative errors: max |nd4py - oracle| / max |oracle|, worst of the logits and "
          f"the features at batch 1 and 2 against onnxruntime, batch 1 against onnx.reference;"
          f" > {TOLERANCE:g} fails)")
    for r in results:
        line = f"\n{r['model']}: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["seconds"].items())
        if "reference_s" in r:
            line += f" (onnx.reference alone {r['reference_s']:.1f} s)"
        print(line)
        if "failed" in r:
            print(f"  FAILED at {r['failed']['stage']}: {r['failed']['error']}")
        for oracle in ("vs_ort", "vs_reference", "ort_vs_reference"):
            for row, e in r.get(oracle, {}).items():
                if "shape" in e:
                    print(f"  {oracle} {row}: shape {e['shape']} != {e['expected_shape']}")
                else:
                    print(f"  {oracle} {row}: max abs err {e['max_abs_err']:.2e}, "
                          f"relative {e['max_rel_err']:.2e}")
        if "reference" in r:
            print(f"  onnx.reference: {r['reference']}")
        if "logit_spread" in r:
            print(f"  logits' spread between the two inputs of batch 2 (relative to max |y|): "
                  f"{r['logit_spread']:.1e}")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--reference-worker":
        reference_worker(*sys.argv[2:])
        return
    parser = comparison_parser(__doc__, processes=False)
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated model names (default: all)")
    parser.add_argument("--keep", metavar="DIR", help="export the models into DIR and keep them")
    parser.add_argument("--reference-timeout", type=float, default=60.0,
                        help="seconds onnx.reference may take per model (default 60)")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    if args.busy:
        parser.error("--busy is not supported here (the models already use both cores)")
    # big models: few runs (a VGG-19 batch of 8 takes seconds); --quick: one
    args.rounds, args.burst = (1, 1) if args.quick else (3, 3)
    say = (lambda *a, **k: None) if args.json else print
    results = []
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="zoo_models_")
    directory = args.keep or tmp.name
    os.makedirs(directory, exist_ok=True)
    try:
        for name in names:
            say(f"{name} ...", flush=True)
            r = run_model(name, directory, args)
            results.append(r)
            say(f"  {r['seconds']['total']:.1f} s" + (
                f", FAILED at {r['failed']['stage']}: {r['failed']['error'][:300]}"
                if "failed" in r else ""), flush=True)
            gc.collect()
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print()
        print_table(results)


if __name__ == "__main__":
    main()
