"""Damaged files holding nested bodies (a ``while_loop`` whose body holds a ``scan``): every
damage is a named ``CorruptFileError`` at load — a body reading a missing variable, a cycle
inside a body, a body without the inputs its node passes, attributes out of range, a body
that is not a graph, bodies nested past the file format's depth limit — never a crash."""
from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import CorruptFileError


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    sd = SameDiff.create()
    x, w = sd.placeholder("x", np.float64, 3), sd.var("w", np.ones(3))
    rows = nd.create(np.ones((2, 3)))
    nd.while_loop(lambda c: c.sum() < 10.0,
                  lambda c: nd.scan(lambda h, r: (h + r * w, None), c, rows)[0], x)
    path = tmp_path_factory.mktemp("nested") / "m.sdz"
    sd.save(path)
    with zipfile.ZipFile(path) as z:
        return path, {n: z.read(n) for n in z.namelist()}


def _body(g):
    return g["nodes"][0]["attrs"]["body"]


def _inner(g):  # the scan's body, inside the while_loop's body
    return _body(g)["nodes"][0]["attrs"]["body"]


def _nested(g, depth):
    """The while_loop's body wrapped ``depth`` times into loops of its own."""
    b = _body(g)
    for _ in range(depth):
        b = {"graph": 1, "variables": b["variables"], "outputs": ["o"],
             "nodes": [{"name": "s", "op": "while_loop", "inputs": ["x0", "capture"],
                        "outputs": ["o"], "attrs": {"cond": g["nodes"][0]["attrs"]["cond"],
                                                    "body": b, "num_carry": 1}}]}
    g["nodes"][0]["attrs"]["body"] = b


DAMAGE = {
    "a body reads a missing variable": (
        lambda g: _body(g)["nodes"][0]["inputs"].__setitem__(0, "nope"), "'nope'"),
    "a body returns a missing variable": (
        lambda g: _body(g).__setitem__("outputs", ["ghost"]), "'ghost'"),
    "a cycle inside a nested body": (
        lambda g: _inner(g)["nodes"][0]["inputs"].__setitem__(
            0, _inner(g)["nodes"][-1]["outputs"][0]), "no variable named"),
    "a body without the node's captured input": (
        lambda g: g["nodes"][0]["attrs"]["cond"]["variables"].pop(1), "takes 1 input\\(s\\), got 2"),
    "a nested scan's num_xs": (
        lambda g: _body(g)["nodes"][0]["attrs"].__setitem__("num_xs", 7), "scan"),
    "num_carry out of range": (
        lambda g: g["nodes"][0]["attrs"].__setitem__("num_carry", 9), "num_carry=9"),
    "a body that is a string": (
        lambda g: g["nodes"][0]["attrs"].__setitem__("body", "x"), "expected a graph"),
    "a body that is a list": (
        lambda g: g["nodes"][0]["attrs"].__setitem__("body", [1, 2]), "expected a graph"),
    "a cond returning a float": (
        lambda g: g["nodes"][0]["attrs"]["cond"].__setitem__("outputs", ["sum"]), "BOOL"),
    "bodies nested past the depth limit": (lambda g: _nested(g, 12), "nests deeper"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_nested_bodies_are_named_errors(saved, tmp_path, damage):
    path, members = saved
    graph = json.loads(members["graph.json"])
    edit, words = DAMAGE[damage]
    edit(graph)
    target = tmp_path / "damaged.sdz"
    with zipfile.ZipFile(target, "w") as z:
        for name, data in members.items():
            z.writestr(name, json.dumps(graph) if name == "graph.json" else data)
    with pytest.raises(CorruptFileError, match=words):
        SameDiff.load(target)


def test_the_undamaged_file_loads_and_runs(saved):
    back = SameDiff.load(saved[0])
    out = back.output({"x": np.zeros(3)}, "while_loop")["while_loop"].numpy()
    np.testing.assert_array_equal(out, [4.0, 4.0, 4.0])  # 0 -> 2 -> 4: sum 12 >= 10
