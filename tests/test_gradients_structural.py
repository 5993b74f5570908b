"""Gradient rules of the shape ops, matrix products, nn ops, creation/random ops and the gradient
helpers, checked against finite differences.

One record per (op, inputs, attrs): a float64 graph ``sum(op(vars) * W)`` (every output of a
multi-output op gets its own ``W``) must pass ``check_gradients``. Integer inputs (indices) and
``like`` inputs of the helpers are constants. Then: unknown (-1) batch dims, second derivatives,
and the documented conventions (``scatter_update`` duplicates, ``*_like`` ops).
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.autodiff import GradientError
from samediff.gradcheck import check_gradients
from samediff.ops import REGISTRY
from samediff.ops.registry import NONDIFF

try:
    from op_samples import SAMPLES
except ImportError:
    from tests.op_samples import SAMPLES

RNG = np.random.default_rng(11)


def u(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


class Const:
    """An input given to the graph as a constant (never checked)."""

    def __init__(self, value):
        self.value = np.asarray(value)


def ix(values, dtype=np.int64):
    return Const(np.asarray(values, dtype=dtype))


def case(op, *inputs, id=None, **attrs):
    return pytest.param(op, list(inputs), attrs, id=id or op)


def from_samples(op, first_only=False, smooth=False):
    """Cases from ``SAMPLES[op]``: float inputs become variables (only the first with
    ``first_only``: the ``like`` inputs of the helpers lend just their shape), the rest
    constants; with ``smooth`` only the samples finite differences apply to."""
    out = []
    for k, s in enumerate(SAMPLES[op]):
        if smooth and not s.smooth:
            continue
        inputs = [x if isinstance(x, np.ndarray) and x.dtype.kind == "f"
                  and (j == 0 or not first_only) else Const(x) for j, x in enumerate(s.inputs)]
        out.append(pytest.param(op, inputs, dict(s.attrs), id=f"{op}-sample{k}"))
    return out


SHAPE = [
    case("reshape", u(2, 3, 2), shape=(3, -1)),
    case("reshape", u(3, 1), shape=(1, 3, 1), id="reshape-1"),
    case("reshape", u(2, 3, 2), shape=(3, -1), order="f", id="reshape-f"),
    case("permute", u(2, 3, 2), dims=(2, 0, 1)), case("transpose", u(2, 3, 2)),
    case("expand_dims", u(2, 3), axis=1),
    case("expand_dims", u(2, 3), axis=-1, id="expand_dims-neg"),
    case("squeeze", u(2, 1, 3, 1)), case("squeeze", u(2, 1, 3, 1), axis=(1,), id="squeeze-axis"),
    case("flatten", u(2, 3, 2)), case("flatten", u(2, 3, 2), order="f", id="flatten-f"),
    case("concat", u(2, 3), u(1, 3), u(3, 3)),
    case("concat", u(2, 1), u(2, 3), axis=-1, id="concat-1"),
    case("concat", u(2, 3), id="concat-one"),
    case("stack", u(2, 3), u(2, 3), u(2, 3)),
    case("stack", u(3, 2), u(3, 2), axis=-1, id="stack-1"),
    case("unstack", u(2, 3, 2), axis=1), case("unstack", u(3, 2), id="unstack-0"),
    case("split", u(4, 3), num_or_sizes=(2,)),
    case("split", u(2, 7), num_or_sizes=(2, -1, 1), axis=1, id="split-sizes"),
    case("slice", u(4, 3), begin=(1, 0), size=(2, -1)),
    case("slice", u(3, 4, 2), begin=(0, 1, 1), size=(3, 2, 1), id="slice-3d"),
    *from_samples("strided_slice"),
    case("gather", u(4, 3), ix([[2, 0], [3, 3]])),  # repeated index: gradients add up
    case("gather", u(4, 3), ix([-1, 0, -1], np.int32), axis=1, id="gather-axis1"),
    case("gather", u(2, 3, 2), ix([[1, 0], [2, 1]]), axis=1, id="gather-rank3"),
    case("dynamic_partition", u(5, 2), ix([1, 0, 2, 1, 1]), num_partitions=3),
    case("dynamic_partition", u(2, 3, 2), ix([[0, 2, 0], [0, 0, 2]], np.int32), num_partitions=3,
         id="dynamic_partition-2d-empty-part"),
    case("gather", u(2, 3, 2), ix([1, 1, 0]), axis=-1, id="gather-last"),
    case("gather", u(5), ix(2), id="gather-scalar"),
    case("scatter_add", u(5, 2), ix([1, 3, 1]), u(3, 2)),
    case("scatter_add", u(4, 2), ix([[0], [-1]]), u(1, 2), id="scatter_add-broadcast"),
    case("scatter_update", u(5, 2), ix([0, 2, 4]), u(3, 2)),
    case("scatter_update", u(5, 2), ix([0, 2, 0, 2, 3]), u(5, 2), id="scatter_update-dups"),
    case("scatter_update", u(4, 3), ix([[3], [1]], np.int32), u(1, 3),
         id="scatter_update-broadcast"),
    case("tile", u(2, 3), reps=(2, 1)), case("tile", u(2, 3), reps=(2, 1, 2), id="tile-rank-up"),
    case("tile", u(3), reps=(2, 2), id="tile-1d"),
    case("repeat", u(2, 3), repeats=2), case("repeat", u(2, 3), repeats=3, axis=1, id="repeat-1"),
    case("repeat", u(2, 1), repeats=2, axis=-2, id="repeat-neg"),
    case("repeat", u(), repeats=3, axis=0, id="repeat-scalar"),
    case("broadcast_to", u(3, 1), shape=(2, 3, 4)),
    case("broadcast_to", u(), shape=(2, 2), id="bt-0d"),
    case("pad", u(2, 3), paddings=((1, 0), (2, 1)), constant=1.0),
    case("pad", u(3, 4), paddings=((1, 1), (2, 2)), mode="reflect", id="pad-reflect"),
    case("pad", u(3, 4), paddings=((2, 1), (1, 0)), mode="symmetric", id="pad-symmetric"),
    case("pad", u(3), paddings=((4, 5),), mode="reflect", id="pad-reflect-wide"),
    case("pad", u(2), paddings=((3, 3),), mode="symmetric", id="pad-symmetric-wide"),
    case("reverse", u(2, 3, 2), dims=(0, 2)),
    case("reverse", u(3, 1), dims=(-2,), id="reverse-neg"),
]

LINALG = [
    *[case("matmul", u(*(4, 3) if tx else (3, 4)), u(*(2, 4) if ty else (4, 2)),
           transpose_x=tx, transpose_y=ty, transpose_result=tr,
           id=f"matmul-{int(tx)}{int(ty)}{int(tr)}")
      for tx in (False, True) for ty in (False, True) for tr in (False, True)],
    case("matmul", u(2, 3, 2), u(2, 2), id="matmul-batch-broadcast"),
    case("matmul", u(1, 2, 3), u(2, 2, 3), transpose_y=True, id="matmul-batch-1"),
    case("matmul", u(3), u(3), id="matmul-1d-1d"),
    case("matmul", u(3), u(3, 2), id="matmul-1d-2d"),
    case("matmul", u(2, 3), u(3), transpose_x=False, id="matmul-2d-1d"),
    case("matmul", u(3, 2), u(3), transpose_x=True, id="matmul-2dT-1d"),
    case("matmul", u(3), u(2, 2, 3), transpose_y=True, transpose_result=True, id="matmul-1d-batch"),
    case("tensor_mmul", u(2, 3, 2), u(3, 2), dims_x=(1, 0), dims_y=(0, 1)),
    case("tensor_mmul", u(2, 3, 2), u(2, 2, 3), dims_x=(2, 1), dims_y=(0, 2), id="tensor_mmul-2"),
    case("tensor_mmul", u(3), u(2), dims_x=(), dims_y=(), id="tensor_mmul-outer"),
    case("dot", u(3, 4), u(3, 4)), case("dot", u(3, 4), u(4), dims=(1,), id="dot-dims"),
    case("dot", u(3, 4), u(1, 4), dims=(0,), id="dot-broadcast"),
    case("cross", u(2, 3), u(2, 3)), case("cross", u(4, 1, 3), u(2, 3), id="cross-broadcast"),
    *from_samples("tril"), *from_samples("triu"),
]

NN = [
    case("softmax", u(3, 4)), case("softmax", u(3, 4), dim=0, id="softmax-0"),
    case("log_softmax", u(3, 4)), case("log_softmax", u(2, 3, 2), dim=1, id="log_softmax-1"),
    case("layer_norm", u(3, 4), u(4), u(4)),
    case("layer_norm", u(3, 4), u(4), id="layer_norm-nobias"),
    case("layer_norm", u(2, 3, 2), u(2, 2), u(2), dims=(0, 2), id="layer_norm-dims02"),
    case("layer_norm", u(2, 3, 2), u(2), Const(0.5), dims=(1, 2), id="layer_norm-partial-gain"),
    case("batch_norm", u(3, 4), u(4), u(4, lo=0.5, hi=2.0), u(4), u(4)),
    case("batch_norm", u(2, 3, 2), u(3), u(3, lo=0.5, hi=2.0), u(3), u(3), axis=1,
         id="batch_norm-axis1"),
    case("bias_add", u(3, 4), u(4)),
    case("bias_add", u(2, 3, 2), u(3), nchw=True, id="bias_add-nchw"),
    case("linear", u(2, 3), u(3, 4), u(4)), case("linear", u(3), u(3, 2), id="linear-1d"),
    case("linear", u(2, 2, 3), u(3, 2), u(2), id="linear-batch"),
    # (the padding row's zero gradient is a definition, not the derivative finite differences
    # see: tests/test_sequence_ops.py; repeated ids accumulate)
    *[c for c in from_samples("embedding") if c.values[2].get("padding_idx") is None],
    *from_samples("rms_norm"), *from_samples("scaled_dot_product_attention"),
    *from_samples("dot_product_attention"), *from_samples("multi_head_dot_product_attention"),
    *[c for op in ("lstm_layer", "gru_layer", "rnn_layer") for c in from_samples(op, smooth=True)],
]

HELPERS = [
    case("reduce_to_like", u(2, 3, 4), Const(u(3, 1))),
    case("broadcast_like", u(3, 1), Const(u(2, 3, 4))),
    case("reshape_like", u(2, 6), Const(u(3, 4))),
    *from_samples("slice_grad", True), *from_samples("pad_grad", True),
    *from_samples("split_like", True),
]


def build(op, inputs, attrs):
    sd = SameDiff.create()
    args = [sd.constant(f"c{i}", x.value) if isinstance(x, Const) else sd.var(f"x{i}", x)
            for i, x in enumerate(inputs)]
    result = getattr(sd.all_ops, op)(*args, **attrs)
    outs = result if isinstance(result, tuple) else (result,)
    loss = None
    for k, out in enumerate(outs):
        if any(d < 0 for d in out.shape):  # sizes known only at run time (dynamic_partition)
            term = (out * out).sum()
        else:
            term = (out * sd.constant(f"W{k}", RNG.standard_normal(out.shape))).sum()
        loss = term if loss is None else loss + term
    loss.mark_as_loss()
    return sd


ALL_CASES = SHAPE + LINALG + NN + HELPERS


@pytest.mark.parametrize("op, inputs, attrs", ALL_CASES)
def test_gradient_matches_finite_differences(op, inputs, attrs):
    result = check_gradients(build(op, inputs, attrs))
    assert result.passed, str(result)


MODULES = ("shape_ops", "slicing", "linalg", "nn", "creation", "random_ops", "adjoints",
           "sequence", "attention", "recurrent")
NONDIFFERENTIABLE = ["one_hot", "zeros", "ones", "full", "linspace", "arange", "eye", "uniform",
                     "normal", "bernoulli", "truncated_normal"]
NO_INPUT_GRADIENT = ["zeros_like", "ones_like", "full_like"]
#: gradients computed in one op (back through time), not differentiable again
# op: what its refusal says (named: the user learns which op and why)
FIRST_ORDER_ONLY = {"lstm_layer_grad": "back through time in one op",
                    "gru_layer_grad": "back through time in one op",
                    "rnn_layer_grad": "back through time in one op",
                    "scaled_dot_product_attention_grad": "take second derivatives in float64"}


def test_every_structural_op_is_covered():
    mine = {n for n, op in REGISTRY.items() if op.impl.__module__.split(".")[-1] in MODULES
            or op.infer.__module__.split(".")[-1] in MODULES}
    covered = ({p.values[0] for p in ALL_CASES} | set(NONDIFFERENTIABLE)
               | set(NO_INPUT_GRADIENT) | set(FIRST_ORDER_ONLY))
    assert mine - covered == set()
    assert all(REGISTRY[n].grad is not None for n in mine)


@pytest.mark.parametrize("op", NONDIFFERENTIABLE)
def test_creation_random_and_one_hot_are_nondifferentiable(op):
    assert REGISTRY[op].grad is NONDIFF


@pytest.mark.parametrize("op", sorted(FIRST_ORDER_ONLY))
def test_fused_gradients_refuse_a_second_derivative_by_name(op):
    sample = SAMPLES[op][0]
    sd = SameDiff.create()
    args = [sd.var(f"x{i}", x) if x.dtype.kind == "f" else sd.constant(f"c{i}", x)
            for i, x in enumerate(sample.inputs)]
    outs = getattr(sd.all_ops, op)(*args, **sample.attrs)
    sum(o.sum() for o in outs).mark_as_loss()
    with pytest.raises(GradientError, match=FIRST_ORDER_ONLY[op]):
        sd.calculate_gradients({}, "x0")


@pytest.mark.parametrize("op", NO_INPUT_GRADIENT)
def test_like_ops_read_only_the_shape(op):
    attrs = {"value": 2.0} if op == "full_like" else {}
    sd = SameDiff.create()
    x = sd.var("x", u(2, 3))
    (x * getattr(sd.creation, op)(x, **attrs)).sum().mark_as_loss()  # x's values flow once
    result = check_gradients(sd)
    assert result.passed, str(result)
    sd = SameDiff.create()
    x = sd.var("x", u(2, 3))
    getattr(sd.creation, op)(x, **attrs).sum().mark_as_loss()
    with pytest.raises(GradientError, match="does not affect any loss"):
        sd.calculate_gradients({}, "x")


# --- conventions ----------------------------------------------------------------------------------

def grads_of(fn, *values):
    sd = SameDiff.create()
    vs = [sd.var(f"v{i}", np.asarray(v, dtype=np.float64)) for i, v in enumerate(values)]
    fn(sd, *vs).mark_as_loss()
    grads = sd.calculate_gradients({}, *[v.name for v in vs])
    return [grads[v.name].numpy() for v in vs]


def test_scatter_update_duplicates_only_the_winner_gets_gradient():
    w = np.arange(1.0, 9.0).reshape(4, 2)
    gref, gupd = grads_of(
        lambda sd, r, up: (sd.shape.scatter_update(r, sd.constant("i", np.array([1, 3, 1])), up)
                           * sd.constant("w", w)).sum(),
        np.zeros((4, 2)), np.ones((3, 2)))
    np.testing.assert_array_equal(gref, [[1, 2], [0, 0], [5, 6], [0, 0]])  # overwritten rows: 0
    np.testing.assert_array_equal(gupd, [[0, 0], [7, 8], [3, 4]])  # the first index-1 row lost


def test_gather_repeated_indices_accumulate():
    (g,) = grads_of(lambda sd, x: x.gather(sd.constant("i", np.array([2, 0, 2])), axis=1).sum(),
                    np.ones((2, 3)))
    np.testing.assert_array_equal(g, [[1, 0, 2], [1, 0, 2]])


def test_pad_reflect_sends_mirrored_copies_back():
    (g,) = grads_of(lambda sd, x: sd.shape.pad(x, ((2, 1),), mode="reflect").sum(),
                    [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(g, [1, 3, 2])  # padded: x2 x1 | x0 x1 x2 | x1


def test_concat_with_two_unknown_sizes_uses_runtime_split():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 3)
    b = sd.var("b", np.array([0.7, -1.3, 1.1]))
    both = sd.shape.concat([x * b, x + b], axis=0)
    (both * sd.constant("W", np.array([0.3, -0.8, 1.7]))).sum().mark_as_loss()
    names = {n.op.name for n in sd.graph.nodes}
    b.gradient()
    assert "split_like" in {n.op.name for n in sd.graph.nodes} - names
    result = check_gradients(sd, {"x": u(2, 3)}, ["b", "x"])
    assert result.passed, str(result)


# --- unknown (-1) dims ---------------------------------------------------------------------------

def _bn(sd, h, b):
    return sd.nn.batch_norm(h, b, b * b + 1.0, b, b)


DYNAMIC = [
    ("reshape", lambda sd, h, b: h.reshape(-1, 3, 1)),
    ("flatten-f", lambda sd, h, b: sd.shape.flatten(h, order="f")),
    ("reshape-f", lambda sd, h, b: sd.reshape(h, "f", 3, -1)),
    ("cross", lambda sd, h, b: sd.math.cross(h, b)),
    ("dynamic_partition", lambda sd, h, b: sd.dynamicPartition(
        h, sd.cast(h[:, 0] > 0.5, dtype=np.int32), 2)[1]),
    ("squeeze", lambda sd, h, b: sd.shape.squeeze(h.reshape(-1, 1, 3), axis=(1,))),
    ("expand_dims", lambda sd, h, b: sd.shape.expand_dims(h, 0)),
    ("transpose", lambda sd, h, b: h.T), ("permute", lambda sd, h, b: h.permute(1, 0)),
    ("concat-0", lambda sd, h, b: sd.shape.concat([h, sd.shape.expand_dims(b, 0)], axis=0)),
    ("concat-1", lambda sd, h, b: sd.shape.concat([h, h * h], axis=1)),
    ("stack", lambda sd, h, b: sd.shape.stack([h, h * h], axis=1)),
    ("unstack", lambda sd, h, b: sd.shape.stack(list(sd.shape.unstack(h, axis=1))[::-1], axis=1)),
    ("split", lambda sd, h, b: sd.shape.concat(list(sd.shape.split(h, (1, 2), axis=1))[::-1],
                                               axis=1)),
    ("slice", lambda sd, h, b: sd.shape.slice(h, (0, 1), (-1, 2))),
    ("strided_slice", lambda sd, h, b: h[::-1, 1:]),
    ("gather", lambda sd, h, b: h.gather(sd.constant("i", np.array([0, 0])))),
    ("gather-1", lambda sd, h, b: h.gather(sd.constant("i", np.array([2, 0])), axis=1)),
    ("scatter_add", lambda sd, h, b: sd.shape.scatter_add(h, sd.constant("i", np.array([0])),
                                                          sd.shape.expand_dims(b, 0))),
    ("scatter_update", lambda sd, h, b: sd.shape.scatter_update(
        h, sd.constant("i", np.array([0])), sd.shape.expand_dims(b * b, 0))),
    ("tile", lambda sd, h, b: h.tile(2, 2)),
    ("repeat", lambda sd, h, b: h.repeat(2, axis=0)),
    ("repeat-none", lambda sd, h, b: h.repeat(2)),
    ("pad", lambda sd, h, b: sd.shape.pad(h, ((1, 2), (0, 1)))),
    ("pad-reflect", lambda sd, h, b: sd.shape.pad(h, ((0, 0), (2, 1)), mode="reflect")),
    ("reverse", lambda sd, h, b: h.reverse(0)),
    ("matmul", lambda sd, h, b: h.mmul(sd.constant("M", np.arange(6.0).reshape(3, 2)))),
    ("matmul-1d", lambda sd, h, b: h.mmul(b)),
    ("matmul-T", lambda sd, h, b: sd.base.matmul(h, h, transpose_x=True)),
    ("tensor_mmul", lambda sd, h, b: sd.linalg.tensor_mmul(h, h, dims_x=(0,), dims_y=(0,))),
    ("dot", lambda sd, h, b: sd.linalg.dot(h, b, dims=(1,))),
    ("softmax", lambda sd, h, b: sd.nn.softmax(h)),
    ("log_softmax", lambda sd, h, b: sd.nn.log_softmax(h, dim=0)),
    ("layer_norm", lambda sd, h, b: sd.nn.layer_norm(h, b, b)),
    ("batch_norm", _bn),
    ("bias_add", lambda sd, h, b: sd.nn.bias_add(h, b)),
    ("linear", lambda sd, h, b: sd.nn.linear(h, sd.constant("M", np.arange(6.0).reshape(3, 2)))),
]


@pytest.mark.parametrize("fn", [f for _, f in DYNAMIC], ids=[n for n, _ in DYNAMIC])
def test_unknown_batch_dim(fn):
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 3)
    b = sd.var("b", np.array([0.7, -1.3, 1.1]))
    out = fn(sd, x * b + 0.5, b)
    (out * out).sum().mark_as_loss()
    for batch in (1, 4):
        result = check_gradients(sd, {"x": u(batch, 3)}, ["b", "x"])
        assert result.passed, f"batch {batch}: {result}"


# --- second derivatives: rules (and helper ops) are written with table ops --------------------

SECOND = [
    ("softmax", lambda sd, v: sd.nn.softmax(v)),
    ("log_softmax", lambda sd, v: sd.nn.log_softmax(v, dim=0)),
    ("layer_norm", lambda sd, v: sd.nn.layer_norm(v, v[0] + 1.0)),
    ("matmul", lambda sd, v: sd.base.matmul(v, v, transpose_y=True)),
    ("tile", lambda sd, v: v.tile(2, 1) * v.tile(2, 1)),
    ("repeat", lambda sd, v: v.repeat(2, axis=1) ** 2),
    ("pad", lambda sd, v: sd.shape.pad(v, ((1, 1), (2, 1)), mode="reflect") ** 2),
    ("gather", lambda sd, v: v.gather(sd.constant("i", np.array([1, 1, 0]))) ** 2),
    ("slice", lambda sd, v: v[1:, ::2] ** 2),
    ("concat", lambda sd, v: sd.shape.concat([v * v, v], axis=1) ** 2),
    ("reshape", lambda sd, v: sd.nn.softmax(v.reshape(-1))),
    ("cross", lambda sd, v: sd.math.cross(v, v * v + v[::-1])),
    ("batch_norm", lambda sd, v: sd.nn.batch_norm(v * v, v[0], v[1] * v[1] + 1.0, v[0], v[1])),
]


@pytest.mark.parametrize("fn", [f for _, f in SECOND], ids=[n for n, _ in SECOND])
def test_second_derivative(fn):
    sd = SameDiff.create()
    v = sd.var("v", u(2, 3))
    out = fn(sd, v)
    (out * sd.constant("W", RNG.standard_normal(out.shape))).sum().mark_as_loss()
    g = v.gradient()
    sd.set_loss_variables((g * sd.constant("W2", RNG.standard_normal((2, 3)))).sum(name="gl"))
    result = check_gradients(sd)
    assert result.passed, str(result)


@pytest.mark.parametrize("ty", [False, True], ids=["w", "w^T"])
def test_a_stack_times_a_matrix_differentiates_the_matrix_in_one_product(ty):
    """``x [2, 3, 4] @ w`` (a dense layer over a sequence): the weight's gradient is one GEMM
    over the 6 rows, ``x2^T g2`` -- no per-batch products summed by ``reduce_to_like`` --
    and equals the sum over the batch written out here."""
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 4) if ty else (4, 5))
    sd = SameDiff.create()
    xv, wv = sd.var("x", x), sd.var("w", w)
    out = xv.matmul(wv, transpose_y=ty) if ty else sd.nn.linear(xv, wv)
    (out * sd.constant("g", np.arange(30.0).reshape(2, 3, 5))).sum().mark_as_loss()
    grads = sd.calculate_gradients({}, "x", "w")
    g = np.arange(30.0).reshape(2, 3, 5)
    want = sum(x[b].T @ g[b] for b in range(2))
    np.testing.assert_allclose(grads["w"].numpy(), want.T if ty else want, rtol=1e-12)
    np.testing.assert_allclose(grads["x"].numpy(), g @ (w if ty else w.T), rtol=1e-12)
    assert "reduce_to_like" not in {n.op.name for n in sd.graph.nodes}
