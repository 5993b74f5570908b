"""Bad inputs give a clear, named error and leave no state behind (eager and in graphs)."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import nd4py as nd
from nd4py import (GraphError, NdDTypeError, NdError, OpError, PlaceholderError, SameDiff,
                   UnknownVariableError, VariableType)

F32 = np.float32


def snapshot(sd: SameDiff) -> tuple:
    """Everything a failed call must not change: variables (name, type, shape) and ops."""
    return ([(v.name, v.variable_type, v.shape, v.dtype) for v in sd.variables()],
            [(n.name, n.op.name, n.inputs, n.outputs) for n in sd.ops()])


@contextlib.contextmanager
def unchanged(sd: SameDiff):
    before = snapshot(sd)
    yield
    assert snapshot(sd) == before


@pytest.fixture
def sd() -> SameDiff:
    g = SameDiff.create()
    g.placeholder("x", nd.FLOAT, -1, 3)
    g.var("w", nd.FLOAT, 4, 2)
    g.placeholder("i", nd.INT, 2)
    return g


def test_errors_are_named_and_catchable_as_builtins():
    assert issubclass(OpError, ValueError) and issubclass(OpError, NdError)
    assert issubclass(NdDTypeError, TypeError)
    assert issubclass(GraphError, ValueError)
    assert issubclass(UnknownVariableError, KeyError)
    assert issubclass(PlaceholderError, ValueError)


# -- eager ---------------------------------------------------------------------------------------

def test_eager_shape_mismatch_names_op_and_shapes():
    a, b = nd.ones(2, 3), nd.ones(4, 5)
    for call in (lambda: a + b, lambda: nd.add(a, b), lambda: a.add(b)):
        with pytest.raises(OpError, match=r"^add:") as info:
            call()
        msg = str(info.value)
        assert "(2, 3)" in msg and "(4, 5)" in msg
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 3)))
    with pytest.raises(OpError, match=r"^sub:.*\(2, 3\).*\(4, 5\)"):
        a.subi(b)
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 3)))


def test_eager_matmul_inner_dim_mismatch():
    a = nd.ones(2, 3)
    with pytest.raises(OpError, match=r"^matmul: inner dims.*\(2, 3\).*\(2, 3\)"):
        a.mmul(a)
    with pytest.raises(OpError, match=r"matmul.*\(2, 2\)"):
        nd.matmul(a, nd.ones(2, 2))
    with pytest.raises(OpError, match="matmul"):
        a @ nd.ones(4)


@pytest.mark.parametrize("call,pattern", [
    (lambda a: a.sum(foo=1), r"sum: unknown attribute\(s\) \['foo'\]; valid: \['dims', 'keep_dims'\]"),
    (lambda a: nd.nn.relu(a, bogus=2), r"relu: unknown attribute.*bogus.*cutoff"),
    (lambda a: nd.clip_by_value(a, clip_min=0.0), r"clip_by_value: missing required attribute 'clip_max'"),
    (lambda a: a.cast(), r"cast: missing required attribute 'dtype'"),
    (lambda a: a.reshape(), r"reshape: missing required attribute 'shape'"),
    (lambda a: nd.relu(a, cutoff="x"), r"relu: attribute 'cutoff' \(float\)"),
    (lambda a: a.sum(dims="x"), r"sum: attribute 'dims'"),
    (lambda a: a.sum(keep_dims=1), r"sum: attribute 'keep_dims' \(bool\)"),
    (lambda a: a.reshape(4, 2), r"reshape: .*\(2, 3\).*\(4, 2\)"),
    (lambda a: a.permute(0), r"permute"),
    (lambda a: a.sum(5), r"sum: dim 5 is out of range"),
    (lambda a: nd.concat([a, nd.ones(4, 5)], 0), r"concat"),
    (lambda a: a.sum(0, dims=1), r"sum\(\) got multiple values for argument 'dims'"),
    (lambda a: nd.add(a), r"add: missing input 'y'"),
])
def test_eager_bad_attributes(call, pattern):
    a = nd.ones(2, 3)
    with pytest.raises(OpError, match=pattern):
        call(a)


@pytest.mark.parametrize("call", [
    lambda: nd.ones(2).cast("blah"),
    lambda: nd.zeros(2, dtype="floaty"),
    lambda: nd.to_dtype("floaty"),
    lambda: nd.create([1, 2], dtype="quad"),
    lambda: nd.create([1, 2], dtype="bfloat17"),
    lambda: SameDiff.create().placeholder("p", "floaty", 2),
])
def test_bad_dtype_names(call):
    with pytest.raises(NdDTypeError) as info:
        call()
    assert "data type" in str(info.value) or "dtype" in str(info.value)


def test_truth_value_of_ndarray():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(nd.ones(2))
    with pytest.raises(ValueError):
        if nd.create([1.0, 0.0]) > 0:
            pass
    assert bool(nd.ones(1)) is True  # a single element is fine


def test_sdvariable_truth_value_raises(sd):
    x = sd.get_variable("x")
    with pytest.raises(TypeError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError):
        if x > 0:
            pass


def test_eager_op_on_an_sdvariable_records_into_its_graph(sd):
    """One recorder: an nd.* call with a graph variable among its inputs records into that
    variable's graph (the eager array becomes a constant), whichever position it has."""
    before = len(sd.ops())
    out = nd.add(nd.ones(3), sd.get_variable("x"))
    assert out.sd is sd and len(sd.ops()) == before + 1 and out.shape[-1] == 3


# -- graph construction ---------------------------------------------------------------------------

@pytest.mark.parametrize("build,pattern", [
    (lambda g, x, w: x + w, r"^add:.*\(-1, 3\).*\(4, 2\)"),
    (lambda g, x, w: x.mmul(w), r"^matmul: inner dims.*\(-1, 3\).*\(4, 2\)"),
    (lambda g, x, w: x + np.ones((4, 5), F32), r"^add:.*\(4, 5\)"),
    (lambda g, x, w: x - nd.ones(4, 5), r"^sub:.*\(4, 5\)"),
    (lambda g, x, w: g.nn.relu(x, bogus=1), r"relu: unknown attribute"),
    (lambda g, x, w: g.math.clip_by_value(x, clip_min=0.0), r"missing required attribute 'clip_max'"),
    (lambda g, x, w: x.sum(keep_dims="yes"), r"sum: attribute 'keep_dims'"),
    (lambda g, x, w: g.concat("c", [x, w], 0), r"concat"),
    (lambda g, x, w: x.reshape(4, 2), r"reshape"),
])
def test_graph_op_errors_leave_graph_unchanged(sd, build, pattern):
    x, w = sd.get_variable("x"), sd.get_variable("w")
    with unchanged(sd):
        with pytest.raises(OpError, match=pattern):
            build(sd, x, w)
    assert len(sd.variable_names()) == 3 and sd.ops() == []


def test_graph_bad_dtype_leaves_graph_unchanged(sd):
    with unchanged(sd):
        with pytest.raises(NdDTypeError):
            sd.get_variable("x").cast("xx")


def test_mixing_two_graphs(sd):
    other = SameDiff.create()
    y = other.var("y", nd.FLOAT, 3)
    y2 = y.reshape(1, 3)
    x = sd.get_variable("x")
    with unchanged(sd), unchanged(other):
        for call in (lambda: x + y, lambda: y + x, lambda: sd.math.add(x, y),
                     lambda: sd.concat([x, y2], 0), lambda: sd.concat([y2, x], 0),
                     lambda: sd.convert_to_constant(y)):
            with pytest.raises(GraphError, match="another SameDiff"):
                call()


def test_duplicate_variable_names(sd):
    x = sd.get_variable("x")
    with unchanged(sd):
        with pytest.raises(GraphError, match="'w' already exists"):
            sd.var("w", nd.FLOAT, 2)
        with pytest.raises(GraphError, match="'x' already exists"):
            sd.placeholder("x", nd.FLOAT, 2)
        with pytest.raises(GraphError, match="'w' already exists"):
            sd.constant("w", [1.0])
        with pytest.raises(GraphError, match="'w' already exists"):
            x.add(1, name="w")  # the literal 1 must not be left behind
        with pytest.raises(GraphError, match="'w' already exists"):
            x.add(np.ones(3, F32), name="w")
        with pytest.raises(GraphError, match="'w' already exists"):
            sd.nn.relu("w", x)
        with pytest.raises(GraphError):
            sd.get_variable("i").rename("x")


def test_duplicate_name_draws_no_random_numbers(sd):
    nd.random.set_seed(9)
    with pytest.raises(GraphError):
        sd.var("w", "xavier", nd.FLOAT, 3, 3)
    a = nd.random.normal(4)
    nd.random.set_seed(9)
    np.testing.assert_array_equal(nd.random.normal(4).numpy(), a.numpy())


def test_bad_variables(sd):
    with unchanged(sd):
        with pytest.raises(GraphError, match="fully known shape"):
            sd.var("v", nd.FLOAT, -1, 3)
        with pytest.raises(GraphError, match="fully known shape"):
            sd.var("v", "xavier", nd.FLOAT, -1, 3)
        with pytest.raises(GraphError, match="floating point"):
            sd.var("v", nd.INT, 3)
        with pytest.raises(GraphError, match="floating point"):
            sd.var("v", np.array([1, 2]))
        with pytest.raises(GraphError, match="floating point"):
            sd.var("v", np.ones(2, F32), dtype=nd.INT)
        with pytest.raises(GraphError, match="contradicts"):
            sd.var("v", np.ones(2, F32), 3)
        with pytest.raises(GraphError, match="unknown weight init"):
            sd.var("v", nd.FLOAT, 2, init="bogus")
        with pytest.raises(NdDTypeError, match="bogus_init"):
            sd.var("v", "bogus_init", nd.FLOAT, 2)  # not silently ignored
        with pytest.raises(GraphError, match="given twice"):
            sd.var("v", nd.FLOAT, 2, dtype=nd.DOUBLE)
        with pytest.raises(GraphError, match="given twice"):
            sd.var("v", "xavier", 2, 2, init="he")
        with pytest.raises(GraphError, match="identity"):
            sd.var("v", "identity", 2, 3)
        with pytest.raises(GraphError, match="cannot interpret"):
            sd.var("v", 2.5)
        with pytest.raises(GraphError, match="invalid shape"):
            sd.placeholder("p", nd.FLOAT, -2)
        with pytest.raises(GraphError, match="non-empty"):
            sd.var("", nd.FLOAT, 2)


def test_int_variable_conversions_refused(sd):
    c = sd.constant("c", [1, 2])
    with pytest.raises(GraphError, match="floating-point"):
        sd.convert_to_variable(c)
    assert c.variable_type is VariableType.CONSTANT
    with pytest.raises(GraphError, match="PLACEHOLDER"):
        sd.convert_to_variable("x")
    with pytest.raises(UnknownVariableError):
        sd.convert_to_constant("nope")


# -- execution -----------------------------------------------------------------------------------

def test_missing_placeholder_is_named(sd):
    y = sd.get_variable("x") * 2
    with pytest.raises(PlaceholderError, match=r"placeholder 'x'.*needs a value"):
        sd.output({}, y.name)
    with pytest.raises(PlaceholderError, match="'x'"):
        y.eval()


def test_placeholder_shape_contradiction(sd):
    y = sd.get_variable("x") * 2
    for bad in (np.ones((2, 4), F32), np.ones(3, F32), np.ones((1, 1, 3), F32)):
        with pytest.raises(PlaceholderError, match=r"'x' has shape \(-1, 3\)"):
            sd.output({"x": bad}, y.name)
    # -1 accepts any size; a safe dtype converts
    assert sd.output({"x": np.ones((7, 3), np.float64)}, y.name)[y.name].shape == (7, 3)


def test_placeholder_unsafe_dtype(sd):
    y = sd.get_variable("i") + 1
    with pytest.raises(PlaceholderError, match=r"'i' is int32; got float32"):
        sd.output({"i": np.ones(2, F32)}, y.name)
    with pytest.raises(PlaceholderError):
        sd.output({"i": [1.5, 2.5]}, y.name)
    out = sd.output({"i": np.array([1, 2], np.int64)}, y.name)[y.name]
    assert out.dtype == nd.INT
    np.testing.assert_array_equal(out.numpy(), [2, 3])
    with pytest.raises(PlaceholderError):
        sd.convert_to_constant("i", np.ones(2, F32))
    assert sd.get_variable("i").variable_type is VariableType.PLACEHOLDER


def test_feeding_a_non_placeholder(sd):
    y = sd.get_variable("i") + 1
    with pytest.raises(PlaceholderError, match="'w' is a VARIABLE, not a placeholder"):
        sd.output({"i": np.ones(2, np.int32), "w": np.ones((4, 2), F32)}, y.name)
    with pytest.raises(PlaceholderError, match="ARRAY"):
        sd.output({"i": np.ones(2, np.int32), y.name: np.ones(2, np.int32)}, y.name)
    with pytest.raises(UnknownVariableError, match="nope"):
        sd.output({"i": np.ones(2, np.int32), "nope": 1}, y.name)


def test_unknown_output_name(sd):
    with pytest.raises(UnknownVariableError, match="'nope'"):
        sd.output({}, "nope")
    with pytest.raises(UnknownVariableError, match="did you mean"):
        with sd.name_scope("s"):
            sd.var("v", nd.FLOAT, 1)
        sd.get_variable("v")
    with pytest.raises(KeyError):  # catchable as the builtin too
        sd.get_variable("nope")
    with pytest.raises(GraphError):
        sd.output({})
    for wrong in (None, 3):  # not a name: said so, not an AttributeError from the lookup
        with pytest.raises(GraphError, match="variable names or SDVariables"):
            sd.output({}, wrong)


def test_runtime_shape_error_names_node(sd):
    a = sd.placeholder("a", nd.FLOAT, -1)
    b = sd.placeholder("b", nd.FLOAT, -1)
    s = a.add(b, name="total")
    with pytest.raises(OpError, match=r"add:.*\[in node 'total'\]"):
        sd.output({"a": np.ones(2, F32), "b": np.ones(3, F32)}, s.name)
    # the graph still works afterwards
    np.testing.assert_array_equal(
        sd.output({"a": np.ones(2, F32), "b": np.ones(2, F32)}, s.name)[s.name].numpy(), [2, 2])


def test_set_array_bad_values_keep_old_value(sd):
    w = sd.get_variable("w")
    with pytest.raises(GraphError, match="shape"):
        w.set_array(np.ones(3, F32))
    with pytest.raises(GraphError, match="complex64 values do not convert safely"):
        w.set_array(np.ones((4, 2), np.complex64))
    np.testing.assert_array_equal(w.get_arr().numpy(), np.zeros((4, 2)))
