"""The ``SameDiff`` graph API: variables, naming, type conversions, namespaces, execution."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from nd4py import GraphError, NDArray, SameDiff, SDVariable, VariableType, WeightInit

F32 = np.float32


@pytest.fixture
def sd() -> SameDiff:
    return SameDiff.create()


def test_create_gives_empty_graph():
    sd = SameDiff.create()
    assert isinstance(sd, SameDiff)
    assert sd.variable_names() == [] and sd.ops() == []
    assert SameDiff.create() is not sd


def test_placeholder_unknown_dims_propagate(sd):
    x = sd.placeholder("x", nd.FLOAT, -1, 3)
    w = sd.var("w", np.ones((3, 2), F32))
    b = sd.var("b", nd.FLOAT, 2)
    y = x.mmul(w)
    z = y + b
    h = sd.nn.relu(z)
    assert x.shape == (-1, 3) and x.variable_type is VariableType.PLACEHOLDER
    assert y.shape == (-1, 2) and z.shape == (-1, 2) and h.shape == (-1, 2)
    assert h.dtype == nd.FLOAT and h.rank == 2
    feed = np.arange(12, dtype=F32).reshape(4, 3) - 5
    out = sd.output({"x": feed}, h.name)[h.name]
    assert isinstance(out, NDArray) and out.shape == (4, 2)
    np.testing.assert_allclose(out.numpy(), np.maximum(feed @ np.ones((3, 2), F32), 0))
    # the same graph takes another batch size
    assert sd.output({"x": np.ones((1, 3), F32)}, h.name)[h.name].shape == (1, 2)
    assert sd.placeHolder("x2", "float", (2, -1)).shape == (2, -1)


def test_var_from_array_copies(sd):
    a = np.array([[1.0, 2.0]], F32)
    v = sd.var("v", a)
    a[0, 0] = 99
    assert v.variable_type is VariableType.VARIABLE
    assert v.shape == (1, 2) and v.dtype == nd.FLOAT
    np.testing.assert_array_equal(v.get_arr().numpy(), [[1.0, 2.0]])
    assert sd.var("v64", np.zeros(2)).dtype == np.float64
    assert sd.var("vcast", np.zeros(2), dtype=nd.FLOAT).dtype == nd.FLOAT


def test_var_dtype_and_shape_gives_zeros(sd):
    v = sd.var("v", nd.DOUBLE, 2, 3)
    assert v.shape == (2, 3) and v.dtype == np.float64
    np.testing.assert_array_equal(v.get_arr().numpy(), np.zeros((2, 3)))
    assert sd.var("t", nd.FLOAT, (4, 5)).shape == (4, 5)
    assert sd.var("k", dtype="half", shape=(2,)).dtype == np.float16
    assert sd.var("d", 3).dtype == nd.FLOAT  # default FLOAT


@pytest.mark.parametrize("scheme", ["xavier", "xavier_uniform", "relu", "he", "he_uniform",
                                    "lecun", "lecun_uniform", "uniform", "normal"])
def test_random_init_schemes_shape_dtype(sd, scheme):
    nd.random.set_seed(0)
    v = sd.var("w", scheme, nd.FLOAT, 8, 6)
    d = sd.var("d", scheme, nd.DOUBLE, 3, 2)
    assert v.shape == (8, 6) and v.dtype == nd.FLOAT
    assert d.shape == (3, 2) and d.dtype == nd.DOUBLE
    a = v.get_arr().numpy()
    assert np.all(np.isfinite(a)) and a.std() > 0 and len(np.unique(a)) == a.size


@pytest.mark.parametrize("scheme,expected", [
    ("ones", np.ones((3, 3), F32)), ("zeros", np.zeros((3, 3), F32)),
    ("identity", np.eye(3, dtype=F32))])
def test_deterministic_init_schemes(sd, scheme, expected):
    v = sd.var("w", scheme, nd.FLOAT, 3, 3)
    np.testing.assert_array_equal(v.get_arr().numpy(), expected)
    assert v.get_arr().dtype == nd.FLOAT


@pytest.mark.parametrize("scheme,variance", [
    ("xavier", 2 / 500), ("xavier_uniform", 2 / 500), ("he", 2 / 300), ("relu", 2 / 300),
    ("he_uniform", 2 / 300), ("lecun", 1 / 300), ("lecun_uniform", 1 / 300)])
def test_init_variance_on_large_shape(sd, scheme, variance):
    nd.random.set_seed(1)
    a = sd.var("w", scheme, nd.FLOAT, 300, 200).get_arr().numpy()
    assert abs(a.mean()) < 0.1 * np.sqrt(variance)
    assert a.var() == pytest.approx(variance, rel=0.05)
    if scheme.endswith("uniform"):
        assert np.abs(a).max() <= np.sqrt(3 * variance) + 1e-6


def test_uniform_and_normal_scheme_ranges(sd):
    nd.random.set_seed(2)
    u = sd.var("u", "uniform", 10000).get_arr().numpy()
    assert u.min() >= -1 and u.max() <= 1 and abs(u.mean()) < 0.05
    n = sd.var("n", "normal", 10000).get_arr().numpy()
    assert n.std() == pytest.approx(1.0, rel=0.05)


def test_weight_init_object_with_explicit_fans(sd):
    nd.random.set_seed(3)
    v = sd.var("w", WeightInit("xavier", fan_in=10, fan_out=30), nd.FLOAT, 200, 200)
    assert v.get_arr().numpy().var() == pytest.approx(2 / 40, rel=0.05)
    c = sd.var("c", WeightInit("constant", value=0.5), nd.FLOAT, 2, 2)
    np.testing.assert_array_equal(c.get_arr().numpy(), np.full((2, 2), 0.5, F32))
    k = sd.var("k", init=WeightInit("uniform", low=2.0, high=3.0), shape=(100,))
    assert 2.0 <= k.get_arr().numpy().min() and k.get_arr().numpy().max() <= 3.0


def test_init_is_seeded(sd):
    nd.random.set_seed(5)
    a = sd.var("a", "xavier", 4, 4).get_arr().numpy()
    nd.random.set_seed(5)
    b = sd.var("b", "xavier", 4, 4).get_arr().numpy()
    c = sd.var("c", "xavier", 4, 4).get_arr().numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_constant_and_scalar(sd):
    c = sd.constant("c", [1, 2, 3])
    assert c.variable_type is VariableType.CONSTANT
    assert c.dtype == nd.LONG and c.shape == (3,)
    f = sd.constant("f", [1.0, 2.0])
    assert f.dtype == nd.FLOAT
    anon = sd.constant(np.ones((2, 2), F32))
    assert anon.name == "constant" and anon.shape == (2, 2)
    s = sd.scalar("s", 2.5)
    assert s.shape == () and s.dtype == nd.FLOAT and s.variable_type is VariableType.CONSTANT
    assert sd.scalar("si", 3, dtype=nd.INT).dtype == nd.INT
    assert s.eval().item() == 2.5
    np.testing.assert_array_equal((c * 2).eval().numpy(), [2, 4, 6])


def test_four_variable_types(sd):
    p = sd.placeholder("p", nd.FLOAT, 2)
    v = sd.var("v", nd.FLOAT, 2)
    c = sd.constant("c", np.ones(2, F32))
    a = p + v + c
    assert [x.variable_type for x in (p, v, c, a)] == [
        VariableType.PLACEHOLDER, VariableType.VARIABLE, VariableType.CONSTANT, VariableType.ARRAY]
    assert sd.trainable_variables() == [v]
    assert sd.placeholders() == [p]
    assert VariableType.ARRAY == "ARRAY"


def test_auto_names_are_unique(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    a, b, c = x + 1, x + 2, x * 3
    assert (a.name, b.name, c.name) == ("add", "add_1", "mul")
    assert len({v.name for v in sd.variables()}) == len(sd.variables())
    v1, v2 = sd.var(None, nd.FLOAT, 1), sd.var(None, nd.FLOAT, 1)
    assert v1.name != v2.name


def test_explicit_names(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    y = x.add(1, name="y")
    z = sd.math.mul(y, 2, name="z")
    r = sd.nn.relu("r", z, 0)
    assert (y.name, z.name, r.name) == ("y", "z", "r")
    assert sd.get_variable("r") is r
    np.testing.assert_array_equal(r.eval({"x": np.array([-5, 1], F32)}).numpy(), [0, 4])


def test_name_scopes_nest(sd):
    with sd.name_scope("layer1"):
        w = sd.var("w", nd.FLOAT, 2, 2)
        with sd.name_scope("inner"):
            c = sd.constant("c", np.ones((2, 1), F32))
            m = w.mmul(c)
        a = w + 1
    after = sd.var("w", nd.FLOAT, 1)
    assert w.name == "layer1/w"
    assert c.name == "layer1/inner/c"
    assert m.name == "layer1/inner/matmul"
    assert a.name == "layer1/add"
    assert after.name == "w"  # scope popped
    with pytest.raises(GraphError):
        with sd.name_scope("a/b"):
            pass


def test_lookup(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    y = x * 2
    assert sd.get_variable("x") is x and sd.getVariable(y.name) is y
    assert sd.has_variable("x") and not sd.has_variable("nope")
    assert sd.variable_names() == ["x", "literal", y.name]
    assert sd.get_shape(y.name) == (2,)


def test_rename(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    y = x * 2
    z = y + 1
    assert y.rename("doubled") is y
    assert y.name == "doubled" and sd.get_variable("doubled") is y
    assert not sd.has_variable("mul")
    out = sd.output({"x": np.array([1, 2], F32)}, "doubled", z.name)
    np.testing.assert_array_equal(out["doubled"].numpy(), [2, 4])
    np.testing.assert_array_equal(out[z.name].numpy(), [3, 5])
    with pytest.raises(GraphError):
        y.rename("x")


def test_convert_variable_to_constant(sd):
    v = sd.var("v", np.array([1.0, 2.0], F32))
    out = v * 2
    assert sd.convert_to_constant(v) is v
    assert v.variable_type is VariableType.CONSTANT
    assert sd.trainable_variables() == []
    np.testing.assert_array_equal(out.eval().numpy(), [2, 4])


def test_convert_placeholder_to_constant(sd):
    p = sd.placeholder("p", nd.FLOAT, -1)
    out = p + 1
    sd.convert_to_constant(p, np.array([3.0, 4.0, 5.0], F32))
    assert p.variable_type is VariableType.CONSTANT
    assert p.shape == (3,)
    np.testing.assert_array_equal(p.get_arr().numpy(), [3, 4, 5])
    np.testing.assert_array_equal(sd.output(None, out.name)[out.name].numpy(), [4, 5, 6])
    with pytest.raises(GraphError):
        sd.convert_to_constant(sd.placeholder("q", nd.FLOAT, 1))  # needs a value


def test_convert_to_variable(sd):
    c = sd.constant("c", np.array([1.0], F32))
    assert sd.convert_to_variable(c) is c
    assert c.variable_type is VariableType.VARIABLE
    assert sd.trainable_variables() == [c]
    ci = sd.constant("ci", [1, 2])
    with pytest.raises(GraphError, match="ci"):
        sd.convert_to_variable(ci)
    assert ci.variable_type is VariableType.CONSTANT
    with pytest.raises(GraphError):
        sd.convert_to_variable(c + 1)  # an ARRAY
    with pytest.raises(GraphError):
        sd.convert_to_constant(c * 1)


def test_namespaces(sd):
    a = np.array([[0.5, -1.0], [2.0, 3.0]], F32)
    x = sd.constant("x", a)
    checks = {
        sd.math.exp(x): np.exp(a),
        sd.nn.relu(x): np.maximum(a, 0),
        sd.nn.sigmoid(x): 1 / (1 + np.exp(-a)),
        sd.linalg.tensor_mmul(x, x, [1], [0]): a @ a,
        sd.base.sum(x, 1): a.sum(1),
        sd.base.reshape(x, 4): a.reshape(4),
        sd.matmul(x, x): a @ a,
        sd.concat([x, x], 1): np.concatenate([a, a], 1),
        sd.mmul(x, x): a @ a,
    }
    for var, expected in checks.items():
        assert isinstance(var, SDVariable)
        assert var.shape == expected.shape
        np.testing.assert_allclose(var.eval().numpy(), expected, rtol=1e-6)
    r = sd.random.normal("r", shape=(3, 4))
    assert r.shape == (3, 4) and r.dtype == nd.FLOAT
    with pytest.raises(AttributeError):
        sd.nn.exp


def test_leading_name_style(sd):
    x = sd.placeholder("x", nd.FLOAT, -1, 2)
    h = sd.nn.relu("hidden", x, 0)
    c = sd.concat("cat", [x, h], 1)
    s = sd.base.sum("total", c, 1)
    assert (h.name, c.name, s.name) == ("hidden", "cat", "total")
    assert c.shape == (-1, 4) and s.shape == (-1,)
    out = s.eval({"x": np.array([[1, -2]], F32)})
    np.testing.assert_array_equal(out.numpy(), [1 - 2 + 1 + 0])


def test_output_runs_only_needed_ops(sd):
    a = sd.constant("a", np.arange(6, dtype=F32).reshape(2, 3))
    p = sd.placeholder("p", nd.FLOAT, 2, 3)
    good = (a * 2).sum(name="good")
    sd.math.log(p + a, name="bad")  # needs p, which is never fed
    out = sd.output({}, "good")
    assert list(out) == ["good"]
    assert out["good"].item() == 30.0
    assert sd.output_single(None, "good").item() == 30.0
    assert sd.outputSingle({}, good.name).item() == 30.0
    assert good.eval().item() == 30.0
    both = sd.output({}, ["good", "a"])
    assert set(both) == {"good", "a"}


def test_output_accepts_variables_and_returns_copies_of_persistent_values(sd):
    w = sd.var("w", np.ones(2, F32))
    y = w * 3
    out = sd.output({}, y, w)
    np.testing.assert_array_equal(out[y.name].numpy(), [3, 3])
    out["w"].addi(100)  # must not change the variable
    np.testing.assert_array_equal(w.get_arr().numpy(), [1, 1])


def test_eval_with_placeholders(sd):
    x = sd.placeholder("x", nd.INT, 3)
    y = x * x
    np.testing.assert_array_equal(y.eval({"x": np.array([1, 2, 3], np.int32)}).numpy(), [1, 4, 9])
    assert y.eval({"x": np.array([1, 2, 3], np.int32)}).dtype == nd.INT


def test_multi_output_split(sd):
    a = sd.constant("a", np.arange(6, dtype=F32).reshape(2, 3))
    s = sd.split("s", a, 3, axis=1)
    assert isinstance(s, tuple) and len(s) == 3
    assert [v.name for v in s] == ["s", "s:1", "s:2"]
    assert all(v.shape == (2, 1) for v in s)
    out = sd.output({}, "s", "s:1", "s:2")
    for i, name in enumerate(["s", "s:1", "s:2"]):
        np.testing.assert_array_equal(out[name].numpy(), np.arange(6).reshape(2, 3)[:, i:i + 1])
    t = a.split([1, 2], axis=1)
    assert [v.name for v in t] == ["split", "split:1"] and t[1].shape == (2, 2)
    assert len(sd.ops()) == 2  # one node per split, not one per output


def test_summary_lists_variables_and_ops(sd):
    x = sd.placeholder("x", nd.FLOAT, -1, 3)
    w = sd.var("w", nd.FLOAT, 3, 2)
    sd.constant("c", np.ones(2, F32))
    sd.nn.relu(x.mmul(w), name="out")
    text = sd.summary()
    lines = text.splitlines()
    row = {ln.split()[0]: ln.split() for ln in lines if ln and ln.split()[0] in ("x", "w", "c", "out")}
    assert row["x"][1] == "PLACEHOLDER" and "(?," in text and row["x"][-2] == "float32"
    assert row["w"][1:3] == ["VARIABLE", "(3,"]
    assert row["c"][1] == "CONSTANT"
    assert row["out"][1] == "ARRAY" and row["out"][-1] == "relu"
    assert "matmul" in text and "relu" in text
    assert "5 variables, 2 ops" in lines[0]
    assert "x, w" in text  # matmul's wiring
    assert repr(sd) == "SameDiff(5 variables, 2 ops)"


def test_sdvariable_operators_match_eager():
    a = np.array([[1.0, -2.0], [3.0, 4.0]], F32)

    def expr(t):
        return (((t * 2 - 1) / 3) ** 2 + abs(-t) @ t.T - (t > 0).cast(nd.FLOAT) + 2
                - t % 3 + 1 / (t * t) - 7 // t + t.sum(1, keep_dims=True)
                + (1 - t) * (2 ** t).mean())

    sd = SameDiff.create()
    graph = expr(sd.constant("a", a))
    eager = expr(nd.create(a))
    assert isinstance(graph, SDVariable)
    assert graph.shape == eager.shape and graph.dtype == eager.dtype
    np.testing.assert_allclose(graph.eval().numpy(), eager.numpy(), rtol=1e-6)


def test_sdvariable_comparisons_and_logic_match_eager():
    a = np.array([1.0, 2.0, 3.0], F32)
    sd = SameDiff.create()
    v, e = sd.constant("a", a), nd.create(a)
    for f in (lambda t: t > 2, lambda t: t == 2, lambda t: t != 2, lambda t: t <= 2,
              lambda t: (t > 1) & (t < 3), lambda t: (t < 2) | (t > 2), lambda t: ~(t > 1),
              lambda t: (t > 1) ^ (t > 2)):
        g = f(v)
        assert g.dtype == nd.BOOL
        np.testing.assert_array_equal(g.eval().numpy(), f(e).numpy())


def test_reflected_ops_with_numpy_arrays_on_sdvariable(sd):
    v = sd.constant("v", np.array([1.0, 2.0], F32))
    r = np.array([10.0, 20.0], F32) - v
    assert isinstance(r, SDVariable)
    np.testing.assert_array_equal(r.eval().numpy(), [9, 18])
    assert isinstance(3 * v, SDVariable) and (3 * v).dtype == nd.FLOAT


def test_augmented_assignment_rebinds_but_addi_refuses(sd):
    v = sd.constant("v", np.array([1.0, 2.0], F32))
    original = v
    v += 1
    assert v is not original and isinstance(v, SDVariable)
    assert v.variable_type is VariableType.ARRAY
    np.testing.assert_array_equal(v.eval().numpy(), [2, 3])
    np.testing.assert_array_equal(original.eval().numpy(), [1, 2])
    n_vars, n_ops = len(sd.variable_names()), len(sd.ops())
    for name in ("addi", "subi", "muli", "divi", "rsubi", "rdivi"):
        with pytest.raises(GraphError, match=name):
            getattr(original, name)(1)
    assert (len(sd.variable_names()), len(sd.ops())) == (n_vars, n_ops)


def test_set_array_and_get_arr(sd):
    w = sd.var("w", np.zeros((2, 2), F32))
    y = w + 1
    w.set_array(np.full((2, 2), 3.0))  # float64 value is stored as the variable's float32
    assert w.get_arr().dtype == nd.FLOAT
    np.testing.assert_array_equal(y.eval().numpy(), np.full((2, 2), 4.0))
    w.set_array([[1, 2], [3, 4]])  # ints convert safely
    np.testing.assert_array_equal(y.eval().numpy(), [[2, 3], [4, 5]])
    c = sd.constant("c", np.ones(2, F32))
    c.set_array(np.array([5.0, 6.0], F32))
    np.testing.assert_array_equal(c.get_arr().numpy(), [5, 6])
    assert y.get_arr() is None
    assert sd.placeholder("p", nd.FLOAT, 1).get_arr() is None
    with pytest.raises(GraphError, match="shape"):
        w.set_array(np.ones(3, F32))
    with pytest.raises(GraphError):
        y.set_array(np.ones((2, 2), F32))  # an op output holds no value
    with pytest.raises(nd.PlaceholderError):  # a placeholder's array (ND4J: set, then
        # convertToConstant) is checked like a feed
        sd.get_variable("p").set_array(np.ones(2, F32))
    with pytest.raises(GraphError, match="c"):
        sd.constant("ci", [1, 2]).set_array(np.array([1.5, 2.5]))  # would truncate
    np.testing.assert_array_equal(sd.get_variable("ci").get_arr().numpy(), [1, 2])


def test_get_arr_is_live(sd):
    w = sd.var("w", np.zeros(2, F32))
    w.get_arr().addi(1)
    np.testing.assert_array_equal((w * 1).eval().numpy(), [1, 1])


def test_sdvariable_repr(sd):
    w = sd.var("w", nd.FLOAT, 2, 3)
    assert repr(w) == "SDVariable(name='w', type=VARIABLE, shape=(2, 3), dtype=FLOAT)"


def test_literals_and_arrays_become_constants(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    y = x * 2.0 + np.array([1.0, 1.0], F32)
    kinds = {v.name: v.variable_type for v in sd.variables()}
    assert kinds["literal"] is VariableType.CONSTANT
    assert kinds["constant"] is VariableType.CONSTANT
    assert y.dtype == nd.FLOAT  # the Python float literal is weak
    np.testing.assert_array_equal(y.eval({"x": np.array([1, 2], F32)}).numpy(), [3, 5])


def test_explicit_output_name_may_equal_an_auto_input_name(sd):
    x = sd.placeholder("x", nd.FLOAT, 2)
    y = x.add(1, name="literal")
    z = x.add(np.ones(2, F32), name="constant")
    assert y.name == "literal" and z.name == "constant"
    feed = {"x": np.array([1, 2], F32)}
    np.testing.assert_array_equal(y.eval(feed).numpy(), [2, 3])
    np.testing.assert_array_equal(z.eval(feed).numpy(), [2, 3])
    assert len(set(sd.variable_names())) == len(sd.variable_names()) == 5
