"""The facts ops declare (flags, scalar expressions, row kernels, accumulators), the import-time
validation that keeps them consistent, ``op`` (``samediff.ops.call``), and the contracts of the
ops added through one definition each (``log2``, ``exp2``, ``cube``, ``hard_swish``, ``mish``)
that the table-driven suites cannot state: limits and signs of zero, gradient conventions.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, create
from samediff.compiler.exprs import Emitter
from samediff.compiler.rowwise import ROW_VARIANTS
from samediff.errors import OpError
from samediff.frontends import ND4J
from samediff.ops import REGISTRY, OpDef, TensorType
from samediff.ops.call import op
from samediff.ops.families import same_type
from samediff.ops.registry import NONDIFF, Accumulator, Attr, RowKernel
from samediff.ops.validate import check_op

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES


def fake(**fields) -> OpDef:
    """An unregistered op definition (fine as given, unless ``fields`` break it)."""
    base = {"name": "fake_op", "inputs": ("x",), "attr_kinds": {}, "infer": same_type,
            "impl": lambda x: x, "doc": "A test op.", "grad": NONDIFF}
    return OpDef(**{**base, **fields})


# --- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, problem", [
    ({"elementwise": True}, "no scalar expression"),
    ({"elementwise": True, "scalar": lambda e, x, y: x}, "scalar must be a callable"),
    ({"scalar": lambda e, x: x}, "not elementwise"),
    ({"elementwise": True, "scalar": lambda e, x: x, "unfused": "slow"}, "drop one"),
    ({"exact": True}, "exact=True needs a scalar"),
    ({"unfused": "why not"}, "only applies to elementwise"),
    ({"elementwise": True, "unfused": "x", "view": True}, "view op cannot be elementwise"),
    ({"reduction": True}, "dims and keep_dims"),
    ({"accumulate": Accumulator("0.0", "acc + {v}")}, "only applies to reductions"),
    ({"row_kernel": RowKernel("softmax", axis="dim")}, "does not have"),
    ({"random": True, "grad": lambda ins, outs, gs, a: [None]}, "random op cannot have"),
])
def test_validation_names_the_inconsistency(fields, problem):
    problems = check_op(fake(**fields))
    assert any(problem in p for p in problems), problems


def test_the_table_is_consistent():
    assert {n: check_op(o) for n, o in REGISTRY.items() if check_op(o)} == {}
    assert set(RowKernel.VARIANTS) == set(ROW_VARIANTS)  # the compiler implements every variant
    with pytest.raises(ValueError, match="variant"):
        RowKernel("rms_norm", axis="dims")


def test_well_formed_definition_passes():
    ok = fake(elementwise=True, scalar=lambda e, x: f"({x} + {e.c(1)})", exact=True,
              attr_kinds={"alpha": (Attr.FLOAT, 0.5)})
    assert check_op(ok) == []


def _attrs_for(name: str):
    """An attribute record to render with: the defaults, else a sample's (required attrs)."""
    opdef = REGISTRY[name]
    if opdef.default_attrs is not None:
        return opdef.default_attrs
    return opdef.make_attrs(SAMPLES[name][0].attrs)


@pytest.mark.parametrize("name", sorted(n for n, o in REGISTRY.items() if o.fusable))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_expressions_render_to_python(name, dtype):
    """Each declared expression renders (with the compiler's emitter) to a Python expression:
    a syntax error shows up here, without Numba."""
    args = [f"a{k}" for k in range(len(REGISTRY[name].inputs))]
    source = REGISTRY[name].scalar(Emitter(dtype, _attrs_for(name)), *args)
    compile(source, f"<{name}>", "eval")
    assert all(a in source for a in args[:1])


# --- op: free-function calls on values ----------------------------------------------------------

def test_op_runs_eagerly_on_arrays():
    x = create(np.array([1.0, -2.0, 3.0]))
    out = op.where(x > 0.0, x, op.zeros_like(x))
    np.testing.assert_array_equal(out.numpy(), [1.0, 0.0, 3.0])
    np.testing.assert_array_equal(op.sum(x, dims=(0,), keep_dims=True).numpy(), [2.0])


def test_op_records_into_the_graph_of_its_first_value_input():
    sd = SameDiff.create()
    v = sd.var("v", np.array([1.0, 4.0]))
    y = op.maximum(2.0, v)  # the weak scalar first: dispatch goes to the first value with _apply
    assert sd.has_variable(y.name)
    np.testing.assert_array_equal(y.eval().numpy(), [2.0, 4.0])


def test_op_without_a_value_input_is_a_clear_error():
    with pytest.raises(OpError, match=r"op\.add: none of its inputs \(ndarray, float\)"):
        op.add(np.ones(2), 1.0)
    with pytest.raises(OpError, match="unknown op 'no_such_op'"):
        _ = op.no_such_op
    assert "where" in dir(op)


def test_udf_gradient_rules_take_values_only():
    @nd.udf.op(inputs=("x",), replace=True)
    def twice(x):
        "2 x"
        return 2.0 * x

    @twice.gradient
    def _(ins, outs, gs, attrs):
        return [2.0 * gs[0]]

    try:
        sd = SameDiff.create()
        w = sd.var("w", np.array([1.0, 2.0]))
        sd.all_ops.twice(w).sum().mark_as_loss()
        np.testing.assert_array_equal(sd.calculate_gradients({}, "w")["w"].numpy(), [2.0, 2.0])
    finally:
        nd.udf.unregister("twice")


# --- the ops added through one definition each -----------------------------------------------------

NEW_OPS = ("log2", "exp2", "cube", "hard_swish", "mish")


@pytest.mark.parametrize("name", NEW_OPS)
def test_new_op_is_everywhere(name):
    opdef = REGISTRY[name]
    assert opdef.elementwise and opdef.fusable and callable(opdef.grad)
    x = nd.create([0.5, 2.0])
    assert np.array_equal(getattr(nd, name)(x).numpy(), getattr(x, name)().numpy())
    sd = SameDiff.create()
    v = sd.var("v", np.array([0.5, 2.0]))
    ns = getattr(sd, opdef.namespace)
    np.testing.assert_allclose(getattr(ns, name)(v).eval().numpy(), getattr(x, name)().numpy())


def test_new_op_names():
    assert nd.log2(nd.create([8.0])).numpy().tolist() == [3.0]  # exact at powers of two
    assert nd.exp2(nd.create([3.0])).numpy().tolist() == [8.0]
    assert REGISTRY["cube"].namespace == "math" and REGISTRY["mish"].namespace == "nn"
    assert nd.nn.hardswish.__name__ == "hard_swish" and "hardswish" in ND4J.names["hard_swish"]


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activation_limits_keep_the_sign_of_zero(dtype):
    x = nd.create(np.array([-math.inf, -1e30, -5.0, -3.0, -0.0, math.inf, math.nan], dtype))
    hs, mi = nd.nn.hard_swish(x).numpy(), nd.nn.mish(x).numpy()
    np.testing.assert_array_equal(hs, [-0.0, -0.0, -0.0, -0.0, -0.0, math.inf, math.nan])
    assert np.signbit(hs[:5]).all()
    assert np.signbit(mi[:2]).all() and mi[0] == 0 and mi[1] == 0
    assert mi[4] == 0 and np.signbit(mi[4]) and mi[5] == math.inf and np.isnan(mi[6])
    cube = nd.cube(x).numpy()
    assert np.signbit(cube[4]) and cube[0] == -math.inf and cube[5] == math.inf


def grad_of(fn, values):
    sd = SameDiff.create()
    v = sd.var("v", np.asarray(values, dtype=np.float64))
    fn(v).sum().mark_as_loss()
    return sd.calculate_gradients({}, "v")["v"].numpy()


def test_hard_swish_gradient_follows_pytorch():
    # 0 below -3; x/3 + 1/2 on [-3, 3], both ends included; 1 above (torch.nn.Hardswish)
    x = [-4.0, -3.0, -1.5, 0.0, 3.0, 4.0, -math.inf, math.inf]
    np.testing.assert_allclose(grad_of(lambda v: v.hard_swish(), x),
                               [0.0, -0.5, 0.0, 0.5, 1.5, 1.0, 0.0, 1.0])


def test_mish_gradient_is_finite_at_infinity():
    g = grad_of(lambda v: v.mish(), [-math.inf, -1000.0, 0.0, 1000.0, math.inf])
    np.testing.assert_allclose(g, [0.0, 0.0, math.tanh(math.log(2.0)), 1.0, 1.0])


@pytest.mark.parametrize("name", NEW_OPS)
def test_new_op_inference_keeps_float32(name):
    (t,) = REGISTRY[name].infer_types([TensorType((2, -1), np.dtype(np.float32))],
                                      REGISTRY[name].default_attrs)
    assert t == TensorType((2, -1), np.dtype(np.float32))
