"""Graph-valued op attributes: an IR graph as an attribute (the body of a cond / while / scan
op, an ONNX sub-graph) is frozen, hashable by structure, part of plan keys, and saved and
loaded with the graph that uses it.

The op used here, ``call_body``, exists only in this module (registered by a fixture and
removed after): it applies its ``body`` graph to its inputs. It declares the body
(``bodies=("body",)``) and runs it with ``samediff.control.run_body`` — through the plan cache,
with no interpreter of its own.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import surface
from samediff.control import run_body
from samediff.errors import GraphError, OpError
from samediff.ir import Graph, VariableType
from samediff.ops import REGISTRY, TensorType, get_op
from samediff.ops.registry import NONDIFF, REQUIRED, Attr, OpDef, encode_attr, register

F64 = np.dtype("float64")


def body_graph(scale: float = 2.0) -> Graph:
    """y = exp(x * scale) + c, with a constant c: a body with a value to save."""
    g = Graph()
    g.add_var("x", VariableType.PLACEHOLDER, TensorType((-1,), F64))
    g.add_var("c", VariableType.CONSTANT, TensorType((), F64), np.array(0.5))
    g.add_var("scale", VariableType.CONSTANT, TensorType((), F64, True), np.array(scale))
    (m,) = g.record(get_op("mul"), ("x", "scale"))
    (e,) = g.record(get_op("exp"), (m,))
    g.record(get_op("add"), (e, "c"), name="y")
    g.set_outputs("y")
    return g


def _body_inputs(body: Graph) -> list[str]:
    return [n for n, v in body.vars.items() if v.vtype is VariableType.PLACEHOLDER]


def _infer(types, attrs):
    body = attrs.body
    names = _body_inputs(body)
    if len(names) != len(types):
        raise OpError(f"call_body: the body takes {len(names)} inputs, got {len(types)}")
    return [body.retype(dict(zip(names, types)))[body.nodes[-1].outputs[0]]]


def _impl(*xs, body):
    return run_body(body, xs)[0]


@pytest.fixture
def call_body():
    op = register(OpDef(name="call_body", inputs=("*xs",), attr_kinds={"body": (Attr.GRAPH,
                                                                                  REQUIRED)},
                        infer=_infer, impl=_impl, namespace="udf", method=False,
                        grad=NONDIFF, bodies=("body",),
                        doc="Apply a graph attribute (test-only)."))
    try:
        yield op
    finally:
        del REGISTRY["call_body"]
        surface.remove_op_methods("call_body")


def test_a_graph_attribute_is_frozen_hashable_and_copied_from_the_users_graph(call_body):
    body = body_graph()
    rec = call_body.make_attrs({"body": body})
    assert rec.body.frozen and not body.frozen  # the caller's graph stays editable
    assert rec is call_body.make_attrs({"body": body_graph()})  # equal bodies: one record
    assert rec is not call_body.make_attrs({"body": body_graph(3.0)})
    with pytest.raises(GraphError, match="frozen"):
        rec.body.record(get_op("exp"), ("x",))
    with pytest.raises(OpError, match="expected a graph"):
        call_body.make_attrs({"body": "not a graph"})


def test_json_form_round_trips_exactly(call_body):
    body = body_graph().freeze()
    again = Graph.from_dict(encode_attr(body))
    assert again == body and hash(again) == hash(body)
    doc = encode_attr(body)
    doc["nodes"][0]["op"] = "no_such_op"
    with pytest.raises(nd.UnknownOpError, match="no_such_op"):
        Graph.from_dict(doc)
    with pytest.raises(GraphError, match="malformed"):
        Graph.from_dict({"graph": 1, "variables": [{"name": "x"}], "nodes": []})


def test_eager_traced_and_samediff_use_of_a_graph_attribute(call_body, tmp_path):
    x = np.array([0.0, 0.5, -1.0])
    want = np.exp(x * 2.0) + 0.5
    got = nd.bind(call_body, [nd.create(x)], {"body": body_graph()})
    np.testing.assert_allclose(got.numpy(), want)

    with nd.graph_scope():  # the attribute is part of the trace key: plans are reused
        traced = nd.bind(call_body, [nd.create(x)], {"body": body_graph()})
    np.testing.assert_allclose(traced.numpy(), want)

    sd = nd.SameDiff.create()
    p = sd.placeholder("p", nd.DOUBLE, -1)
    out = sd.do_udf(call_body, p, body=body_graph(), name="out")[0]
    assert out.shape == (-1,)
    np.testing.assert_allclose(sd.output({"p": x}, "out")["out"].numpy(), want)
    sd.save(tmp_path / "m.sdz")
    loaded = nd.SameDiff.load(tmp_path / "m.sdz")
    (node,) = loaded.ops()
    assert node.attrs.body == body_graph().freeze()
    np.testing.assert_allclose(loaded.output({"p": x}, "out")["out"].numpy(), want)
