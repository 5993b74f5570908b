"""Front ends as tables (samediff/frontends): the ND4J table is checked against the op table,
every ND4J name reaches its op everywhere (nd, nd.<ns>, sd.<ns>, sd, methods), broken tables fail
when built, and the ND4J argument rule packs calls as documented."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import nd4py as nd
from samediff import NDArray, SameDiff, SDVariable, udf
from samediff.errors import OpError
from samediff.frontends import ND4J, Frontend, FrontendTableError, Namespace, check, names_to_ops
from samediff.frontends.nd4j import split_call
from samediff.ops import REGISTRY, OpDef
from samediff.ops.registry import GROUPS
from tracing import LazyArray

ND4J_NAMES = sorted((name, op_name) for op_name, names in ND4J.names.items() for name in names)


# -- the tables ---------------------------------------------------------------------------------

def test_nd4j_tables_are_consistent_with_the_op_table():
    assert check(ND4J) == []
    assert all(op_name in REGISTRY for op_name in ND4J.names)
    names = [name for name, _ in ND4J_NAMES]
    assert len(names) == len(set(names)), "two ops claim one name"
    assert not set(names) & set(REGISTRY), "a front-end name shadows an op's own name"
    shown = {g for space in ND4J.namespaces.values() for g in space.groups}
    assert shown == set(GROUPS) - {"udf"}  # user-defined ops: top level and methods only


def test_op_definitions_carry_no_front_end_names():
    fields = OpDef.__dataclass_fields__
    assert "nd4j" not in fields and "aliases" not in fields
    ops_dir = pathlib.Path(__file__).parents[1] / "samediff" / "ops"
    for path in ops_dir.glob("*.py"):  # layering: the op table never imports a front end
        imports = [line for line in path.read_text().splitlines()
                   if line.lstrip().startswith(("import ", "from "))]
        assert not [line for line in imports if "frontends" in line], path.name


def _frontend(**changes):
    spec = dict(name="broken", names={}, namespaces={}, split_call=split_call)
    spec.update(changes)
    return Frontend(**spec)


@pytest.mark.parametrize("changes, message", [
    (dict(names={"leaky_relu": "leakyRelu", "leaky_reluu": "lr"}), "op 'leaky_reluu'"),
    (dict(names={"leaky_relu": "lr", "hard_tanh": "lr"}), "'lr' is claimed by ops 'leaky_relu' and 'hard_tanh'"),
    (dict(names={"maximum": "max"}), "name 'max' given to op 'maximum' is the name of op 'max'"),
    (dict(names={"exp": "not-a-name"}), "not a Python identifier"),
    (dict(namespaces={"nn": Namespace(("nn", "nnn"))}), "unknown op group(s) ['nnn']"),
    (dict(inplace=("add", "subb")), "inplace refers to op 'subb'"),
])
def test_a_broken_table_fails_when_built_and_names_the_problem(changes, message):
    with pytest.raises(FrontendTableError, match="front end 'broken'") as info:
        _frontend(**changes)
    assert message in str(info.value)


def test_an_op_name_wins_over_a_table_name():
    table = names_to_ops({"maximum": ("max",), "minimum": ("elementwise_min",)}, REGISTRY.values())
    assert table["max"] is REGISTRY["max"] and table["elementwise_min"] is REGISTRY["minimum"]
    only_nn = names_to_ops(ND4J.names, [REGISTRY["leaky_relu"]])
    assert set(only_nn) == {"leaky_relu", "leakyRelu"}  # names of absent ops are left out


# -- every ND4J name reaches its op -------------------------------------------------------------

@pytest.mark.parametrize("name, op_name", ND4J_NAMES)
def test_every_nd4j_name_resolves_everywhere(name, op_name):
    op = REGISTRY[op_name]
    sd = SameDiff.create()
    assert getattr(nd, name).__name__ == op_name
    assert getattr(sd, name).__name__ == op_name  # SameDiff.__getattr__
    assert getattr(sd.all_ops, name).__name__ == op_name
    for ns, space in ND4J.namespaces.items():
        shown = op.namespace in space.groups
        assert (name in dir(getattr(sd, ns))) == shown, (ns, name)
        if shown:
            assert getattr(getattr(sd, ns), name).__name__ == op_name
        if space.eager:
            assert (name in dir(getattr(nd, ns))) == shown, (ns, name)
    for cls in (NDArray, LazyArray, SDVariable):
        assert (getattr(getattr(cls, name, None), "__name__", None) == op_name) == op.method, cls


def test_nd4j_names_compute_like_the_op():
    a = np.array([[-1.5, 0.25], [2.0, -3.0]], np.float32)
    x = nd.create(a)
    np.testing.assert_array_equal(nd.leakyRelu(x, 0.1).numpy(), nd.leaky_relu(x, 0.1).numpy())
    np.testing.assert_array_equal(x.hardSigmoid().numpy(), x.hard_sigmoid().numpy())
    np.testing.assert_array_equal(nd.nn.silu(x).numpy(), nd.swish(x).numpy())
    assert x.castTo(nd.DOUBLE).dtype == x.cast_to(nd.DOUBLE).dtype == np.float64
    np.testing.assert_allclose(x.mmul(x).numpy(), a @ a)
    sd = SameDiff.create()
    v = sd.constant("v", a)
    h = sd.nn.leakyRelu("h", v, 0.1)
    assert h.name == "h"
    np.testing.assert_array_equal(h.eval().numpy(), nd.leaky_relu(x, 0.1).numpy())
    np.testing.assert_allclose(sd.linalg.tensorMmul(v, v, [1], [0]).eval().numpy(), a @ a)
    y = nd.create(a.copy())
    assert y.addi(1.0) is y and y.numpy()[0, 1] == 1.25  # ND4J's in-place table


def test_a_udf_appears_at_once_and_leaves_the_nd4j_names_alone():
    @udf.op(inputs=("x",), replace=True)
    def frontend_twice(x):
        "2 * x"
        return 2 * x
    try:
        x = nd.create([1.0, -2.0])
        sd = SameDiff.create()
        assert nd.frontend_twice(x).numpy().tolist() == [2.0, -4.0]
        assert x.frontend_twice().numpy().tolist() == [2.0, -4.0]
        assert sd.frontend_twice(sd.constant("c", [3.0])).eval().numpy().tolist() == [6.0]
        assert "frontend_twice" in dir(sd.all_ops) and "frontend_twice" not in dir(sd.math)
        assert sd.nn.leakyRelu.__name__ == "leaky_relu"
    finally:
        udf.unregister("frontend_twice")


# -- the ND4J argument rule ---------------------------------------------------------------------

X, Y, G, B = (object() for _ in range(4))  # stand-ins for arrays (anything not a scalar)


@pytest.mark.parametrize("op_name, args, kwargs, leading, expected", [
    ("sum", (X, 0, 1), {}, False, ([X], {"dims": (0, 1)}, None)),               # packed ints
    ("sum", (X, np.int64(0), 1), {}, False, ([X], {"dims": (0, 1)}, None)),
    ("sum", (X, 1), {"keep_dims": True}, False, ([X], {"dims": (1,), "keep_dims": True}, None)),
    ("sum", (X, (0, 1), True), {}, False, ([X], {"dims": (0, 1), "keep_dims": True}, None)),
    ("reshape", (X, 2, 3), {}, False, ([X], {"shape": (2, 3)}, None)),
    ("leaky_relu", (X, 0.5), {}, False, ([X], {"alpha": 0.5}, None)),
    ("leaky_relu", ("h", X, 0.5), {}, True, ([X], {"alpha": 0.5}, "h")),      # leading name
    ("leaky_relu", (X,), {"name": "h"}, True, ([X], {}, "h")),
    ("matmul", (), {"x": X, "y": Y, "transpose_x": True}, False, ([X, Y], {"transpose_x": True}, None)),
    ("concat", ([X, Y], 1), {}, False, ([X, Y], {"axis": 1}, None)),            # variadic list
    ("concat", (X, Y), {"axis": 1}, False, ([X, Y], {"axis": 1}, None)),        # leading arrays
    ("layer_norm", (X, G), {}, False, ([X, G], {}, None)),                      # optional absent
    ("layer_norm", (X, G, B, (1,)), {}, False, ([X, G, B], {"dims": (1,)}, None)),
    ("layer_norm", (X, G, (1,), 1e-3), {}, False, ([X, G], {"dims": (1,), "epsilon": 1e-3}, None)),
    ("cast", (X, "float64"), {}, False, ([X], {"dtype": "float64"}, None)),
])
def test_split_call(op_name, args, kwargs, leading, expected):
    inputs, attrs, name = split_call(REGISTRY[op_name], args, kwargs, leading)
    assert (inputs, attrs, name) == expected
    assert all(a is b for a, b in zip(inputs, expected[0]))


@pytest.mark.parametrize("op_name, args, kwargs, message", [
    ("matmul", (X,), {}, "missing input 'y'"),
    ("leaky_relu", (X, 0.1, 0.2), {}, "too many positional arguments"),
    ("leaky_relu", (X, 0.1), {"alpha": 0.2}, "got multiple values for argument 'alpha'"),
    ("concat", (1,), {}, "expected at least one array"),
])
def test_split_call_errors_name_the_op(op_name, args, kwargs, message):
    with pytest.raises(OpError, match=op_name) as info:
        split_call(REGISTRY[op_name], args, kwargs)
    assert message in str(info.value)


def test_nd4j_packing_end_to_end():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = nd.create(a)
    np.testing.assert_array_equal(x.sum(0, 1).numpy(), a.sum((0, 1)))
    np.testing.assert_array_equal(nd.sum(x, 1).numpy(), a.sum(1))
    assert x.reshape(3, 2).shape == (3, 2)
    sd = SameDiff.create()
    s = sd.base.sum("s", sd.constant("c", a), 0, 1)
    assert s.name == "s" and s.eval().item() == a.sum()


def test_the_array_api_namespace_is_built_from_its_front_end_table(monkeypatch):
    import nd4py.array_api as xp
    from samediff.frontends import array_api as table
    assert table.check() == []
    for name in (*table.UNARY, *table.BINARY, *table.EAGER, *table.REDUCTIONS, *table.MOMENTS,
                 *table.CUMULATIVE, *table.SEARCH):
        assert getattr(xp, name).__name__ == name
    for name in (*table.FFT_AXIS, *table.FFT_AXES):
        assert getattr(xp.fft, name).__name__ == name
    for name in table.LINALG_EAGER:
        assert getattr(xp.linalg, name).__name__ == name
    assert (xp.__array_api_version__, xp.float32) == (table.VERSION, table.DTYPES["float32"])
    # a table naming a missing op is reported, naming the table, the name and the op
    monkeypatch.setitem(table.UNARY, "sine", "sinus")
    assert table.check() == ["UNARY['sine'] refers to op 'sinus', which is not in the op table"]
