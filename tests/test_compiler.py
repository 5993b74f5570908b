"""The fused compiler: grouping, compiled vs interpreter, dtypes, memory safety, passes,
per-group fallback, strict mode and the on-disk kernel cache."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler
from samediff.compiler import codegen
from samediff.compiler import plan as cplan

# `both()` is one call site tracing many different graphs: its retrace warning is expected
pytestmark = [pytest.mark.compiled, pytest.mark.filterwarnings("ignore::tracing.RetraceWarning")]
RNG = np.random.default_rng(7)


def both(fn, *args):
    """fn's traced result with the compiled executor and with the interpreter."""
    with nd.graph_scope() as scope:
        compiled = fn(*args)
    previous = compiler.set_executor("interpreter")
    try:
        with nd.graph_scope():
            reference = fn(*args)
    finally:
        compiler.set_executor(previous)
    return compiled, reference, scope.plan


def arr(*shape, dtype=np.float32):
    return nd.create(RNG.standard_normal(shape).astype(dtype))


def test_elementwise_chain_is_one_kernel_and_matches_interpreter():
    x, b = arr(33, 17), arr(17)
    got, want, plan = both(lambda x, b: nd.nn.gelu(nd.math.tanh(x * 0.5 + b) - x / 3.0), x, b)
    assert plan.kind == "compiled"
    kernels = [s for s in plan.steps if isinstance(s, cplan.KernelStep)]
    assert len(kernels) == 1 and kernels[0].kernels is not None, plan.explain()
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcasting_scalars_bools_and_where(dtype):
    x, row, col = arr(4, 5, dtype=dtype), arr(5, dtype=dtype), arr(4, 1, dtype=dtype)

    def f(x, row, col):
        y = nd.nn.relu(x * row + col) - 2
        mask = (y > 0.1) & (x < 1.5)
        return nd.where(mask, nd.exp(-y), y * y), mask

    (got, gmask), (want, wmask), plan = both(f, x, row, col)
    assert got.dtype == want.dtype == dtype and gmask.dtype == np.bool_
    np.testing.assert_array_equal(gmask.numpy(), wmask.numpy())
    # (an absolute tolerance too: where x * row + col is near 2, y's few correct digits are
    # those left after the cancellation -- the kernel's fused multiply-add rounds once, numpy
    # twice -- and y * y differs by ~1e-8 relative 1e-5; 40 of 300 random inputs did)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_matmul_goes_to_blas_with_a_fused_epilogue():
    x, w, b = arr(8, 16), arr(16, 4), arr(4)
    got, want, plan = both(lambda x, w, b: nd.nn.relu(x @ w + b), x, w, b)
    assert [type(s).__name__ for s in plan.steps] == ["Node", "KernelStep"], plan.explain()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_inputs_are_never_written_and_outputs_never_reused():
    x = arr(64)
    before = x.numpy().copy()

    @nd.compile
    def f(x):
        y = x * 2.0
        return y + 1.0, y

    a1, b1 = f(x)
    keep_a, keep_b = a1.numpy().copy(), b1.numpy().copy()
    a2, b2 = f(x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert not np.shares_memory(a1.numpy(), a2.numpy())
    np.testing.assert_array_equal(a1.numpy(), keep_a)
    np.testing.assert_array_equal(b1.numpy(), keep_b)


def test_cse_and_constant_folding_keep_results_independent():
    x = arr(6)

    @nd.compile
    def f(x):
        ones = nd.ones(6)                 # folded at plan time
        a = nd.exp(x) + ones
        b = nd.exp(x) + ones              # merged with a
        return a, b, ones

    a, b, ones = f(x)
    plan = f._last.plan
    assert plan.merged >= 2 and plan.folded >= 1, plan.explain()
    np.testing.assert_allclose(a.numpy(), np.exp(x.numpy()) + 1, rtol=1e-6)
    assert not np.shares_memory(a.numpy(), b.numpy())
    ones.numpy()[:] = 5                   # the user's copy, not the plan's constant
    np.testing.assert_array_equal(f(x)[2].numpy(), np.ones(6, np.float32))


def test_samediff_output_uses_compiled_plans_with_unknown_batch():
    sd = nd.SameDiff.create()
    inp = sd.placeholder("x", nd.FLOAT, -1, 3)
    b = sd.var("b", np.array([0.5, -1.0, 2.0], np.float32))
    out = sd.nn.sigmoid(inp * 2.0 + b, name="out")
    for batch in (1, 5):
        feed = RNG.standard_normal((batch, 3)).astype(np.float32)
        got = sd.output({"x": feed}, "out")["out"].numpy()
        want = 1 / (1 + np.exp(-(feed * 2 + np.array([0.5, -1.0, 2.0], np.float32))))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert sd.last_plan.kind == "compiled"
    assert out.name == "out"


def test_a_group_that_fails_to_compile_falls_back(monkeypatch, caplog):
    real = codegen.render
    monkeypatch.setattr(cplan, "render", lambda spec: real(spec).replace("o0[", "undefined_name["))
    x = arr(10)
    with caplog.at_level(logging.WARNING, logger="nd4py.compiler"):
        got, want, plan = both(lambda x: nd.math.sin(x) * 3.0 + 1.0, x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())   # identical: same numpy code
    assert "FALLBACK" in plan.explain() and plan.reason
    assert any("falls back" in r.message for r in caplog.records)


def test_strict_mode_raises(monkeypatch):
    monkeypatch.setattr(cplan, "render", lambda spec: "syntax error here")
    previous = cplan.set_strict(True)
    try:
        with pytest.raises(cplan.CompilationError, match="failed"):
            with nd.graph_scope():
                y = nd.math.cos(arr(3)) * 2.0  # held: only live results are computed
        assert y is not None
    finally:
        cplan.set_strict(previous)


_SCRIPT = textwrap.dedent("""
    import numpy as np, nd4py as nd
    from samediff.compiler import codegen
    @nd.compile
    def f(x):
        return nd.nn.gelu(x * 1.5 - 0.25)
    y = f(nd.create(np.linspace(-3, 3, 50, dtype=np.float32)))
    mod = next(iter(codegen._loaded.values()))
    print(sum(mod.kernel.stats.cache_hits.values()), float(y.numpy().sum()))
""")


def test_kernels_are_cached_on_disk_across_processes(tmp_path):
    env = {**os.environ, "ND4PY_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    assert first[0] == "0" and int(second[0]) >= 1   # the second process loaded, not compiled
    assert first[1] == second[1]
    assert list((tmp_path / "kernels").glob("k_*.py"))


@pytest.mark.parametrize("reduce", [lambda y: y.sum(1), lambda y: y.mean(-1, keep_dims=True),
                                    lambda y: y.max(1), lambda y: y.min(), lambda y: y.sum()])
def test_reductions_fuse_with_the_chain_that_feeds_them(reduce):
    x, b = arr(9, 7), arr(9, 7)
    got, want, plan = both(lambda x, b: reduce(nd.math.tanh(x * 0.5 - b) + 1.0), x, b)
    steps = [type(s).__name__ for s in plan.steps]
    assert steps == ["ReduceStep"], plan.explain()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_value_read_elsewhere_is_not_swallowed_by_a_reduction():
    x = arr(5, 4)
    (total, y), (want_total, want_y), plan = both(lambda x: ((x * 2.0).sum(1), x * 2.0), x)
    # two summation orders: float32 rounding is bounded by the terms' magnitudes, not the
    # total's (a total near zero by cancellation differs by more than 1e-6 of itself)
    bound = 4 * np.finfo(np.float32).eps * np.abs(2.0 * x.numpy()).sum(1)
    assert (np.abs(total.numpy() - want_total.numpy()) <= bound).all()
    np.testing.assert_array_equal(y.numpy(), want_y.numpy())


def test_identity_shape_adjoints_are_dropped_when_shapes_are_exact():
    """``SameDiff.output`` plans are keyed by exact shapes, so a ``reduce_to_like`` whose input
    already has the target shape is dropped; an output that thereby becomes a fed input is
    still handed out as a copy."""
    from samediff import SameDiff
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 3)
    same = sd.base.reduce_to_like(x, x, name="same")
    fed = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = sd.output({"x": fed}, "same")["same"].numpy()
    np.testing.assert_array_equal(out, fed)
    assert not np.shares_memory(out, fed)
    plan = sd.last_plan
    if plan.kind == "compiled":
        assert plan.identities == 1 and "identity adjoint" in plan.explain()
    assert same.name == "same"


@pytest.mark.parametrize("anchor", ["softmax", "log_softmax", "layer_norm"])
def test_row_kernels_fuse_the_elementwise_prologue(anchor):
    """``anchor(x @ w * a + b)``: the bias/scale chain is computed inside the row kernel (one
    kernel after the matmul), with the interpreter's results; when the chain's value is also
    needed elsewhere (other than as the anchor's input), it stays a kernel of its own."""
    rng = np.random.default_rng(3)
    x, w = rng.random((37, 19), dtype=np.float32), rng.random((19, 11), dtype=np.float32)
    b, g = rng.random(11, dtype=np.float32), rng.random(11, dtype=np.float32)

    def apply(z):
        return nd.nn.layer_norm(z, g, b, dims=[-1]) if anchor == "layer_norm" else \
            getattr(nd.nn, anchor)(z, dim=-1)

    def fused(x, w, b):
        return apply(nd.nn.relu(x @ w * 0.5 + b)) * 2.0

    def shared(x, w, b):  # z is not the anchor's input: the row pass cannot see it
        z = x @ w + b
        return apply(z * 0.5) + z

    for fn, kernels in ((fused, 1), (shared, 2)):
        compiled = nd.compile(fn)
        got = compiled(nd.create(x), nd.create(w), nd.create(b)).numpy()
        previous = compiler.set_executor("interpreter")
        try:
            want = nd.compile(fn)(nd.create(x), nd.create(w), nd.create(b)).numpy()
        finally:
            compiler.set_executor(previous)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
        text = compiled.explain()
        assert text.count("kernel [fused]") == kernels, text


def test_a_row_prologue_moves_down_past_unrelated_steps():
    """``softmax(q @ k^T / 8) @ v`` with ``v``'s projection recorded between the scale and the
    softmax (as exported attention is): the scale still folds into the softmax's row kernel,
    with the interpreter's results -- and stays a kernel of its own when a step in between
    reads it."""
    rng = np.random.default_rng(5)
    q, k, x, w = (rng.random(s, dtype=np.float32) for s in ((6, 16, 8), (6, 8, 16),
                                                           (6, 16, 8), (8, 8)))

    def moved(q, k, x, w):
        scores = (q @ k) / 8.0
        v = nd.nn.relu(x @ w)  # unrelated to the scores: a matmul and a kernel between
        return nd.nn.softmax(scores, dim=-1) @ v

    def read_between(q, k, x, w):
        scores = (q @ k) / 8.0
        v = x @ w + scores[:, :, :8]  # the step in between reads the scaled scores
        return nd.nn.softmax(scores, dim=-1) @ v

    for fn, prologue in ((moved, True), (read_between, False)):
        args = [nd.create(a) for a in (q, k, x, w)]
        compiled = nd.compile(fn)
        got = compiled(*args).numpy()
        previous = compiler.set_executor("interpreter")
        try:
            want = nd.compile(fn)(*args).numpy()
        finally:
            compiler.set_executor(previous)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
        text = compiled.explain()
        assert ("div -> softmax" in text) == prologue, text


@pytest.mark.parametrize("shape,bshape", [((2, 3), (3,)), ((64, 33), (33,)), ((4, 3, 5), (5,)),
                                          ((3, 2, 5), (2, 5)), ((0, 3), (3,))])
def test_bias_gradient_sum_is_fused_into_its_kernel_bit_for_bit(shape, bshape):
    """``reduce_to_like(g, b)`` over leading dims (a bias gradient) becomes one more output of
    the kernel computing ``g``, equal to numpy's sum bit for bit (signed zeros too)."""
    from samediff.ops.call import op

    def f(x, y, b):
        g = x * y - 0.25
        return op.reduce_to_like(g, b), g

    x, y, b = arr(*shape), arr(*shape), nd.create(np.full(bshape, -0.0, np.float32))
    # a plan of its own: plans are cached by rank and broadcast pattern, and one built for
    # the empty batch ((0, 3): nothing to sum, no fused sum) would serve (2, 3) and (64, 33)
    nd.clear_cache()
    (got, g), (want, gw), plan = both(f, x, y, b)
    kernels = [s for s in plan.steps if isinstance(s, cplan.KernelStep)]
    assert len(plan.steps) == 1 and kernels[0].sum_leads, plan.explain()
    assert "reduce_to_like" in plan.explain()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))
    np.testing.assert_array_equal(g.numpy(), gw.numpy())


@pytest.mark.parametrize("shape,bshape", [((64, 33), (33,)), ((4, 3, 5), (3, 5))])
def test_a_kernel_whose_every_output_is_a_sum(shape, bshape):
    """A layer norm's gain and bias gradients: ``g`` is only summed, so the kernel has no
    output of the loops' shape and takes their bounds from an input (it once took them from
    a sum, which has fewer dims, and fell back to the interpreter)."""
    from samediff.ops.call import op

    def f(x, y, b):
        g = x + y * 0.5
        return op.reduce_to_like(g, b), op.reduce_to_like(g * y, b)

    x, y, b = arr(*shape), arr(*shape), nd.create(np.zeros(bshape, np.float32))
    got, want, plan = both(f, x, y, b)
    kernels = [s for s in plan.steps if isinstance(s, cplan.KernelStep)]
    assert len(plan.steps) == 1 and kernels[0].kernels is not None, plan.explain()
    assert not kernels[0].spec.outputs and len(kernels[0].spec.sums) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_a_sums_only_kernel_whose_loop_no_operand_spans_is_refused_by_name():
    """Every input broadcast along a loop that every output sums: no operand knows the
    loop's extent, so rendering refuses (``compile`` then leaves the group interpreted)."""
    from samediff.compiler import codegen
    spec = codegen.KernelSpec(rank=1, flat=False, arrays=((np.dtype(np.float32), (True,)),),
                              scalars=0, nodes=(), outputs=(), sums=(("a0", 1),))
    with pytest.raises(ValueError, match="no operand of the kernel spans its loop 0"):
        codegen.render(spec)


def test_generated_driver_equals_the_step_loop_and_frees_after_last_reader():
    """The plan's one generated function (``driver.py``) gives the step-by-step loop's results
    bit for bit, on its first call (launch records not cached yet: general path) and after."""
    from samediff import interpreter

    def f(x, w, b, v):
        h = nd.nn.relu(x @ w + b)
        return nd.nn.softmax(h * 2.0 - v, -1), h.sum(0), (h @ w.T).mean()

    x, w, b, v = arr(6, 5), arr(5, 5), arr(5), arr(6, 5)
    with nd.graph_scope() as scope:
        outs = f(x, w, b, v)
    assert len([o.numpy() for o in outs]) == 3
    plan = scope.plan
    # fresh inputs of the plan's input types (the first call prepares their launch records)
    rng = np.random.default_rng(1)
    inputs = [1.5 if plan.types[s].weak else  # (a weak Python scalar input stays one)
              rng.standard_normal(plan.types[s].shape).astype(plan.types[s].dtype)
              for s in plan.input_slots]
    values = dict(plan.constants)
    values.update(zip(plan.input_slots, inputs))
    for step in plan.steps:
        if isinstance(step, cplan.KernelStep):
            step.run(values)
        else:
            interpreter.run_nodes((step,), values)
    want = [values[s] for s in plan._results]
    for _ in range(2):
        got = plan.execute(inputs)
        for g, w_ in zip(got, want):
            np.testing.assert_array_equal(g, w_)
    assert "del " in plan._drive.source and "values[" not in plan._drive.source


def test_driver_runs_reshape_like_view_ops_as_reshape_and_keeps_other_views_as_calls():
    """A view op that only reshapes its input (expand_dims, squeeze) runs in the generated
    driver as ``ndarray.reshape``; a transpose is a view that is no reshape and stays a call.
    Results equal the interpreter's, also for a non-contiguous input (a transpose's view)."""
    def f(x, w):
        t = (x @ w).T  # a library view: not C-contiguous
        return nd.expand_dims(t, 1) * 2.0, nd.squeeze(nd.expand_dims(x.sum(1), 0), 0) + 1.0

    (got, want, plan) = both(f, arr(4, 3), arr(3, 5))
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w_.numpy())
    plan.execute([np.ones(plan.types[s].shape, np.float32) for s in plan.input_slots])
    source = plan._drive.source
    assert source.count(".reshape(O") >= 2, source
    transposes = [k for k, s in enumerate(plan.steps)
                  if not isinstance(s, cplan.KernelStep) and s.op.name in ("transpose", "permute")]
    assert transposes and all(f"reshape(O{k})" not in source for k in transposes), source


def test_a_large_group_runs_its_kernel_on_two_halves_bit_for_bit(monkeypatch, split_calls):
    """At ``PARALLEL_THRESHOLD`` elements and two outer iterations, a group's one kernel runs
    on two halves of its outer loop (``workers.split_leading``), not as a Numba ``prange``
    twin (a module holds no parallel kernel); the halves' results equal the whole call's bit
    for bit, for a flat group, a broadcast one and a row-wise one. (The threshold is lowered:
    the path is the same at any size.)"""
    splits = split_calls
    rng = np.random.default_rng(3)
    x = nd.create(rng.standard_normal((17, 9)).astype(np.float32))
    b = nd.create(rng.standard_normal(9).astype(np.float32))
    plans: list = []
    for fn, extent in ((lambda x, b: nd.math.tanh(x * 0.25 + 1.5) * 3.0, 17 * 9),
                       (lambda x, b: nd.math.sinh(x * 0.5 - b), 17),
                       (lambda x, b: nd.softmax(x * 2.0) + b, 17)):
        results = []
        for threshold in (64, 1 << 40):
            monkeypatch.setattr(cplan, "PARALLEL_THRESHOLD", threshold)
            for plan in {id(p): p for p in plans}.values():  # the cached plan: prepare again
                for step in plan.steps:
                    if isinstance(step, cplan.KernelStep):
                        step._preps.clear()
                        step._launches.clear()
            splits.clear()
            got, want, plan = both(fn, x, b)
            plans.append(plan)
            (step,) = [s for s in plan.steps if isinstance(s, cplan.KernelStep)]
            assert step.kernels is not None and not hasattr(step.kernels, "kernel_par")
            assert splits[-1] == (extent if threshold == 64 else 0), plan.explain()
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)
            results.append(got.numpy())
        np.testing.assert_array_equal(results[0], results[1])
