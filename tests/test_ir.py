"""The graph IR (samediff/ir.py): its public API and the invariants every consumer relies on."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from samediff.errors import GraphError, OpError, UnknownVariableError
from samediff.ir import Graph, Node, VariableType
from samediff.ops import TensorType, get_op

F32 = np.dtype("float32")


def small_graph() -> Graph:
    """x -> exp -> y ; y + w -> z ; z.sum() -> s (and an unused branch u = neg(x))."""
    g = Graph()
    g.add_var("x", VariableType.PLACEHOLDER, TensorType((-1, 3), F32))
    g.add_var("w", VariableType.VARIABLE, TensorType((3,), F32), np.ones(3, F32))
    g.record(get_op("exp"), ("x",), name="y")
    g.record(get_op("add"), ("y", "w"), name="z")
    g.record(get_op("sum"), ("z",), {"dims": None}, name="s")
    g.record(get_op("neg"), ("x",), name="u")
    return g


def test_record_infers_types_and_names_outputs():
    g = small_graph()
    assert g.vars["z"].ttype == TensorType((-1, 3), F32)
    assert g.vars["s"].ttype.shape == ()
    assert [n.op.name for n in g.nodes] == ["exp", "add", "sum", "neg"]
    assert g.vars["z"].producer is g.nodes[1] and g.vars["x"].producer is None
    (out,) = g.record(get_op("exp"), ("x",))  # a fresh name from the op's
    assert out == "exp" and g.vars[out].vtype is VariableType.ARRAY
    g.validate()


def test_multi_output_names_and_a_failing_op_leaves_nothing():
    g = small_graph()
    outs = g.record(get_op("split"), ("z",), {"num_or_sizes": 3, "axis": 1}, name="parts")
    assert outs == ("parts", "parts:1", "parts:2")
    g.add_var("w4", VariableType.CONSTANT, TensorType((4,), F32), np.ones(4, F32))
    before = (dict(g.vars), list(g.nodes), g.version)
    with pytest.raises(OpError):
        g.record(get_op("add"), ("w", "w4"), name="bad")  # (3,) + (4,)
    with pytest.raises(UnknownVariableError, match="did you mean"):
        g.record(get_op("exp"), ("nope/x",))
    assert (dict(g.vars), list(g.nodes), g.version) == before


def test_nodes_are_frozen_and_rename_rebuilds_them():
    g = small_graph()
    node = g.nodes[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.inputs = ("a", "b")  # type: ignore[misc]
    g.rename("y", "why")
    assert g.nodes[1].inputs == ("why", "w") and g.nodes[0].outputs == ("why",)
    assert node.inputs == ("y", "w")  # the old node object is unchanged
    assert g.vars["why"].producer is g.nodes[0] and "y" not in g.vars
    with pytest.raises(GraphError, match="already exists"):
        g.rename("why", "z")
    g.validate()


def test_needed_upstream_and_subgraph():
    g = small_graph()
    assert [n.name for n in g.needed(["s"])] == ["y", "z", "s"]
    assert g.upstream(["z"]) == {"z", "y", "w", "x"}
    sub = g.subgraph(["s"])
    assert [n.name for n in sub.nodes] == ["y", "z", "s"]
    assert set(sub.vars) == {"x", "w", "y", "z", "s"}
    sub.validate()
    assert sub.version > g.version  # versions move forward along a graph's history


def test_toposort_orders_a_shuffled_graph_and_finds_cycles():
    g = small_graph()
    rng = random.Random(0)
    for _ in range(5):
        shuffled = g.copy()
        rng.shuffle(shuffled.nodes)
        order = shuffled.toposort()
        seen = {n for n, v in g.vars.items() if v.producer is None}
        for node in order:
            assert all(i in seen for i in node.inputs)
            seen.update(node.outputs)
    cyclic = Graph()
    cyclic.add_var("a", VariableType.ARRAY, TensorType((2,), F32))
    cyclic.add_var("b", VariableType.ARRAY, TensorType((2,), F32))
    cyclic.nodes = [Node("n1", get_op("exp"), get_op("exp").default_attrs, ("b",), ("a",)),
                    Node("n2", get_op("exp"), get_op("exp").default_attrs, ("a",), ("b",))]
    with pytest.raises(GraphError, match="cycle"):
        cyclic.toposort()


def test_retype_makes_unknown_dims_concrete_and_names_the_failing_node():
    g = small_graph()
    types = g.retype({"x": TensorType((5, 3), F32), "w": TensorType((3,), F32)})
    assert types["z"].shape == (5, 3) and types["s"].shape == ()
    with pytest.raises(OpError, match="in node 'z'"):
        g.retype({"x": TensorType((5, 4), F32), "w": TensorType((3,), F32)})


@pytest.mark.parametrize("damage, message", [
    (lambda g: g.nodes.append(g.nodes[0]), "two nodes"),
    (lambda g: g.nodes.insert(0, g.nodes.pop(1)), "before it is computed"),
    (lambda g: g.nodes.pop(), "without a producing node"),
    (lambda g: g.nodes.append(Node("q", get_op("exp"), get_op("exp").default_attrs, ("nope",),
                                   ("q",))), "unknown variable"),
])
def test_validate_names_the_broken_invariant(damage, message):
    g = small_graph()
    damage(g)
    with pytest.raises(GraphError, match=message):
        g.validate()


def test_copy_is_independent_but_shares_nodes_and_values():
    g = small_graph()
    c = g.copy()
    c.record(get_op("exp"), ("s",), name="extra")
    c.rename("w", "weights")
    assert "extra" not in g.vars and "w" in g.vars and len(g.nodes) == 4
    assert c.nodes[0] is g.nodes[0]  # untouched nodes are shared (they are immutable)
    assert c.vars["weights"].value is g.vars["w"].value


def test_frozen_graphs_hash_by_structure_and_refuse_changes():
    a, b = small_graph().freeze(), small_graph().freeze()
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(GraphError, match="frozen"):
        a.record(get_op("exp"), ("x",))
    with pytest.raises(TypeError, match="unhashable"):
        hash(small_graph())
    other = small_graph()
    other.vars["w"].value = np.full(3, 2.0, F32)  # same structure, other constant data
    assert other.freeze() != a
    renamed = small_graph()
    renamed.rename("u", "v")
    assert renamed.freeze() != a


def test_restore_from_a_copy_moves_the_version_forward():
    g = small_graph()
    saved = g.copy()
    g.record(get_op("exp"), ("s",), name="later")
    version = g.version
    g.restore_from(saved)
    assert "later" not in g.vars and len(g.nodes) == 4 and g.version > version
    g.validate()
    unchanged = g.version
    g.restore_from(g.copy())  # nothing changed: nothing to do
    assert g.version == unchanged


def test_name_scopes_and_unique_names():
    g = Graph()
    g.add_var("x", VariableType.PLACEHOLDER, TensorType((2,), F32))
    with g.name_scope("block"):
        (a,) = g.record(get_op("exp"), ("x",))
        (b,) = g.record(get_op("exp"), ("x",))
        with g.name_scope("inner"):
            (c,) = g.record(get_op("exp"), ("x",), name="e")
    assert (a, b, c) == ("block/exp", "block/exp_1", "block/inner/e")
    with pytest.raises(GraphError, match="invalid scope"):
        with g.name_scope("a/b"):
            pass
    with pytest.raises(GraphError, match="already exists"):
        g.new_name("x", "var")
