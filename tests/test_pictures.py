"""Graph pictures (samediff/pictures): the DOT text parses — by a small parser written here from
the DOT grammar, not by searching for substrings — and holds every box, edge and cluster it
should; the SVG is well-formed XML with one box per node, inside its cluster, overlapping none;
odd names survive both; plans show fused kernels, library calls and interpreter fallbacks; a
cond shows its bodies; a training step shows its forward, backward and update groups."""
from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from samediff import SameDiff, compiler
from samediff.compiler import plan as plan_module
from samediff.control import cond
from samediff.interpreter import InterpreterPlan
from samediff.ir import Graph, VariableType
from samediff.ops import TensorType, get_op
from samediff.pictures import Picture, graph_picture, to_svg, write_picture
from samediff.training import TrainingConfig
from samediff.training.trainer import train_step_for
from samediff.training.updaters import Sgd

F32, F64 = np.dtype("float32"), np.dtype("float64")
SVG = "{http://www.w3.org/2000/svg}"


# -- a DOT parser, from the grammar (graphviz.org/doc/info/lang.html) ---------------------------

_TOKEN = re.compile(r'''\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->|--)|(?P<punct>[{}\[\];,=:])
                        |(?P<id>[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)))''',
                    re.X | re.S)


def tokenize(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens; a quoted string's value is unquoted (only ``\\"`` is an escape in
    DOT's quoted strings; a backslash-newline is a line continuation)."""
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SyntaxError(f"DOT: bad token at {pos}: {text[pos:pos + 20]!r}")
        pos = m.end()
        if m["str"] is not None:
            raw = m["str"][1:-1]
            out.append(("id", re.sub(r'\\(["\n])', lambda e: "" if e[1] == "\n" else '"', raw)))
        elif m["arrow"] is not None:
            out.append(("arrow", m["arrow"]))
        elif m["punct"] is not None:
            out.append((m["punct"], m["punct"]))
        else:
            out.append(("id", m["id"]))
    return out


def label_text(escaped: str) -> list[str]:
    """A label's lines, its escString read as Graphviz does: ``\\\\`` is a backslash, ``\\n``
    ``\\l`` ``\\r`` end a line."""
    lines, cur, i = [], "", 0
    while i < len(escaped):
        c = escaped[i]
        if c == "\\" and i + 1 < len(escaped):
            nxt = escaped[i + 1]
            if nxt in "nlr":
                lines.append(cur)
                cur = ""
            else:
                cur += nxt
            i += 2
            continue
        cur += c
        i += 1
    return lines + [cur]


class Dot:
    """Parse result: nodes (id -> attrs), their cluster (innermost subgraph id), edges
    (src, dst, attrs), subgraphs (id -> attrs incl. label, parent)."""

    def __init__(self, text: str) -> None:
        self.toks, self.i = tokenize(text), 0
        self.nodes: dict[str, dict] = {}
        self.where: dict[str, str | None] = {}
        self.edges: list[tuple[str, str, dict]] = []
        self.subgraphs: dict[str, dict] = {}
        if self.peek() == ("id", "strict"):
            self.i += 1
        kind = self.take("id")
        assert kind in ("graph", "digraph"), kind
        self.directed = kind == "digraph"
        if self.peek()[0] == "id":
            self.name = self.take("id")
        self.take("{")
        self.stmt_list(None)
        self.take("}")
        if self.i != len(self.toks):
            raise SyntaxError(f"DOT: trailing tokens {self.toks[self.i:self.i + 3]}")

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "")

    def take(self, kind: str) -> str:
        tok = self.peek()
        if tok[0] != kind:
            raise SyntaxError(f"DOT: expected {kind}, got {tok} at token {self.i}")
        self.i += 1
        return tok[1]

    def stmt_list(self, sub: str | None) -> None:
        while self.peek()[0] not in ("}", "eof"):
            self.stmt(sub)
            if self.peek()[0] == ";":
                self.i += 1

    def attr_list(self) -> dict:
        attrs: dict = {}
        while self.peek()[0] == "[":
            self.i += 1
            while self.peek()[0] != "]":
                key = self.take("id")
                self.take("=")
                attrs[key] = self.take("id")
                if self.peek()[0] in (",", ";"):
                    self.i += 1
            self.take("]")
        return attrs

    def subgraph(self, parent: str | None) -> str:
        name = f"anon{self.i}"
        if self.peek() == ("id", "subgraph"):
            self.i += 1
            if self.peek()[0] == "id":
                name = self.take("id")
        self.subgraphs[name] = {"parent": parent}
        self.take("{")
        self.stmt_list(name)
        self.take("}")
        return name

    def node_id(self, sub: str | None) -> str:
        nid = self.take("id")
        if self.peek()[0] == ":":  # a port
            self.i += 1
            self.take("id")
        if nid not in self.nodes:
            self.nodes[nid], self.where[nid] = {}, sub
        return nid

    def stmt(self, sub: str | None) -> None:
        tok = self.peek()
        if tok == ("id", "subgraph") or tok[0] == "{":
            self.subgraph(sub)
            return
        if tok[1] in ("graph", "node", "edge") and self.toks[self.i + 1][0] == "[":
            self.i += 1
            self.attr_list()
            return
        if self.toks[self.i + 1][0] == "=":  # ID '=' ID: an attribute of the (sub)graph
            key = self.take("id")
            self.take("=")
            value = self.take("id")
            if sub is not None:
                self.subgraphs[sub][key] = value
            return
        ends = [self.node_id(sub)]
        while self.peek()[0] == "arrow":
            assert (self.take("arrow") == "->") == self.directed
            ends.append(self.node_id(sub))
        attrs = self.attr_list()
        if len(ends) == 1:
            self.nodes[ends[0]].update(attrs)
        for a, b in zip(ends, ends[1:]):
            self.edges.append((a, b, attrs))

    # -- reading the result -----------------------------------------------------------------
    def lines(self, nid: str) -> list[str]:
        label = self.nodes[nid].get("label")
        return [nid] if label is None else label_text(label)  # (Graphviz's default: the id)

    def by_name(self) -> dict[str, str]:
        """First label line (the name) -> node id; names must be unique."""
        names = [(self.lines(n)[0], n) for n in self.nodes]
        assert len({k for k, _ in names}) == len(names), names
        return dict(names)

    def clusters_of(self, nid: str) -> list[str]:
        """The labels of the clusters around ``nid``, innermost first."""
        out, sub = [], self.where[nid]
        while sub is not None:
            if sub.startswith("cluster"):
                out.append(label_text(self.subgraphs[sub].get("label", ""))[0])
            sub = self.subgraphs[sub]["parent"]
        return out

    def named_edges(self) -> set[tuple[str, str]]:
        return {(self.lines(a)[0], self.lines(b)[0]) for a, b, _ in self.edges}


def test_the_parser_can_fail():
    with pytest.raises(SyntaxError):
        Dot('digraph "g" { "a" -> "b" ')  # no closing brace
    with pytest.raises(SyntaxError):
        Dot('digraph "g" { "a [label="x"]; }')  # unbalanced quote
    with pytest.raises(SyntaxError):
        Dot('digraph "g" { "a" [label] }')  # attribute without value
    d = Dot('digraph { subgraph cluster_a { label="A"; b [label="x\\\\y\\nz"]; } c -> b }')
    assert d.lines("b") == ["x\\y", "z"] and d.clusters_of("b") == ["A"]
    assert d.named_edges() == {("c", "x\\y")}


# -- SVG checks ---------------------------------------------------------------------------

def svg_layout(text: str) -> tuple[dict, dict]:
    """Box id -> (x0, y0, x1, y1) and its text lines; cluster id -> rectangle."""
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    boxes, clusters = {}, {}
    for g in root.iter(SVG + "g"):
        cls = g.get("class")
        if cls == "node":
            shape = next(e for e in g if e.tag != SVG + "title" and e.tag != SVG + "text")
            if shape.tag == SVG + "rect":
                x, y = float(shape.get("x")), float(shape.get("y"))
                rect = (x, y, x + float(shape.get("width")), y + float(shape.get("height")))
            elif shape.tag == SVG + "ellipse":
                cx, cy = float(shape.get("cx")), float(shape.get("cy"))
                rx, ry = float(shape.get("rx")), float(shape.get("ry"))
                rect = (cx - rx, cy - ry, cx + rx, cy + ry)
            else:
                pts = [tuple(map(float, p.split(","))) for p in shape.get("points").split()]
                rect = (min(p[0] for p in pts), min(p[1] for p in pts),
                        max(p[0] for p in pts), max(p[1] for p in pts))
            boxes[g.get("id")] = (rect, [t.text for t in g.findall(SVG + "text")])
        elif cls == "cluster":
            r = g.find(SVG + "rect")
            x, y = float(r.get("x")), float(r.get("y"))
            clusters[g.get("id")] = (x, y, x + float(r.get("width")), y + float(r.get("height")))
    return boxes, clusters


def check_svg(pic: Picture) -> dict:
    """The SVG of ``pic`` parses, has one box per picture box (with its lines), every box
    inside each of its clusters and overlapping no other box, nested clusters inside their
    parents and siblings apart."""
    boxes, clusters = svg_layout(to_svg(pic))
    assert set(boxes) == set(pic.boxes)
    assert set(clusters) == {"cluster_" + c for c in pic.clusters}
    inside = lambda a, b: b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]
    apart = lambda a, b: a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    for bid, (rect, lines) in boxes.items():
        assert lines == [line.translate({c: "\ufffd" for c in range(32) if c not in (9, 10, 13)})
                         for line in pic.boxes[bid].lines]
        owner = pic.boxes[bid].cluster
        for cid, crect in clusters.items():
            ancestors, c = set(), owner
            while c is not None:
                ancestors.add("cluster_" + c)
                c = pic.clusters[c].parent
            assert inside(rect, crect) if cid in ancestors else apart(rect, crect), (bid, cid)
    rects = [r for r, _ in boxes.values()]
    assert all(apart(a, b) for i, a in enumerate(rects) for b in rects[i + 1:])
    for c in pic.clusters.values():
        if c.parent is not None:
            assert inside(clusters["cluster_" + c.id], clusters["cluster_" + c.parent])
    return boxes


# -- SameDiff graphs -------------------------------------------------------------------------

def small_graph() -> SameDiff:
    sd = SameDiff.create()
    x = sd.placeholder("x", np.float32, -1, 3)
    w = sd.var("w", np.ones((3, 2), np.float32))
    c = sd.constant("c", np.float32(2.0))
    h = x.mmul(w)
    sd.nn.relu(h * c + 1.0, 0.0)
    return sd


def test_samediff_dot_has_every_variable_op_and_edge():
    sd = small_graph()
    d = Dot(sd.to_dot())
    names = d.by_name()
    graph = sd.graph
    expected = {n for n, v in graph.vars.items() if v.vtype is not VariableType.ARRAY}
    expected |= {n.name for n in graph.nodes}
    assert set(names) == expected
    for node in graph.nodes:  # name, op, output type
        lines = d.lines(names[node.name])
        assert lines[-1] == str(graph.vars[node.outputs[0]].ttype)
        assert node.op.name in lines[:2]
    assert d.lines(names["x"]) == ["x", "placeholder float32[?,3]"]
    styles = {k: (d.nodes[names[k]]["shape"], d.nodes[names[k]]["fillcolor"]) for k in "xwc"}
    assert len(set(styles.values())) == 3  # placeholder, variable, constant look different
    wiring = {(i, n.name) for n in graph.nodes for i in n.inputs if i in expected}
    wiring |= {(graph.vars[i].producer.name, n.name) for n in graph.nodes for i in n.inputs
               if graph.vars[i].producer is not None}
    assert d.named_edges() == wiring
    check_svg(sd.picture())


def test_odd_names_survive_dot_and_svg(tmp_path):
    odd = ['say "hi"', "back\\slash", "two\nlines", "lit\\n", "a->b;{c}", "tab\there",
           "ctl\x01", "λ-ünï", "\\", '"']
    g = Graph()
    for k, name in enumerate(odd):
        g.add_var(name, VariableType.PLACEHOLDER, TensorType((2,), F32))
        g.record(get_op("exp"), (name,), name=f"{name}!{k}")
    pic = graph_picture(g, title='t"\\')
    d = Dot(pic.to_dot())
    assert d.name == 't"\\\\'  # (in a DOT id only \" is an escape: \\ stays two characters)
    # every label reads back as exactly the box's lines (a newline in a name breaks the line)
    assert {n: label_text(a["label"]) for n, a in d.nodes.items()} == \
        {b.id: "\n".join(b.lines).split("\n") for b in pic.boxes.values()}
    names = {b.lines[0]: b.id for b in pic.boxes.values()}
    assert set(names) == set(odd) | {f"{n}!{k}" for k, n in enumerate(odd)}
    assert {(a, b) for a, b, _ in d.edges} == {(names[n], names[f"{n}!{k}"])
                                              for k, n in enumerate(odd)}
    check_svg(graph_picture(g))
    assert write_picture(g, tmp_path / "odd.svg", engine="builtin") == "builtin"
    ET.parse(tmp_path / "odd.svg")


def test_cond_shows_its_bodies_as_nested_clusters():
    sd = SameDiff.create()
    x = sd.placeholder("x", np.float64, 2)
    cond(x.sum() > 0, lambda v: (v * 2.0).exp(), lambda v: -v, x)
    pic = sd.picture()
    d = Dot(pic.to_dot())
    node = next(n for n in sd.graph.nodes if n.op.name == "cond")
    bodies = dict(node.op.body_graphs(node.attrs))
    (cond_box,) = [n for n in d.nodes if d.lines(n)[0] == node.name]
    assert d.clusters_of(cond_box) == [f"cond {node.name}"]
    assert d.lines(cond_box)[1] == "cond [then_body: 2 nodes, else_body: 1 node]"
    boxes = {}
    for nid in d.nodes:
        around = d.clusters_of(nid)
        if len(around) == 2:
            assert around[1] == f"cond {node.name}"
            boxes.setdefault(around[0].split("(")[0], []).append(d.lines(nid)[0])
    assert set(boxes) == {"then_body", "else_body"}
    for attr, body in bodies.items():  # every input and op of each body, in its cluster
        inputs = [n for n, v in body.vars.items() if v.vtype is not VariableType.ARRAY]
        assert sorted(boxes[attr]) == sorted([*inputs, *(n.name for n in body.nodes)])
    runs = [(d.lines(b)[0], e["label"]) for a, b, e in d.edges if a == cond_box]
    assert sorted(runs) == sorted((i, attr) for attr, body in bodies.items() for i in body.inputs)
    assert all(e.get("style") == "dashed" for a, _, e in d.edges if a == cond_box)
    check_svg(pic)


# -- plans -----------------------------------------------------------------------------------

def chain_graph() -> tuple[Graph, str, dict]:
    g = Graph()
    g.add_var("x", VariableType.PLACEHOLDER, TensorType((4, 3), F64))
    g.add_var("w", VariableType.PLACEHOLDER, TensorType((3, 5), F64))
    (h,) = g.record(get_op("matmul"), ("x", "w"), name="h")
    (e,) = g.record(get_op("exp"), (h,), name="e")
    (y,) = g.record(get_op("mul"), (e, h), name="y")
    return g, y, g.retype({})


@pytest.mark.compiled
def test_compiled_plan_has_a_cluster_per_fused_kernel_and_marks_library_calls():
    g, y, types = chain_graph()
    plan = compiler.make_plan(g.nodes, ["x", "w"], [y], types)
    d = Dot(plan.to_dot())
    names = d.by_name()
    assert d.clusters_of(names["e"]) == ["step 1: fused kernel"] == d.clusters_of(names["y"])
    assert d.clusters_of(names["h"]) == [] and "step 0: library call" in d.lines(names["h"])
    assert d.lines(names["y"])[-1] == "float64[4,5]"
    assert d.nodes[names["y"]]["penwidth"] == "2.5"  # the plan's output
    assert d.named_edges() == {("x", "h"), ("w", "h"), ("h", "e"), ("e", "y"), ("h", "y")}
    check_svg(plan.picture())


def test_a_kernel_that_fell_back_to_the_interpreter_is_marked(monkeypatch):
    def broken(source):
        raise RuntimeError("no Numba today")
    monkeypatch.setattr(plan_module, "load", broken)
    previous = plan_module.set_strict(False)
    try:
        g, y, types = chain_graph()
        plan = plan_module.CompiledPlan(g.nodes, ["x", "w"], [y], types)
    finally:
        plan_module.set_strict(previous)
    d = Dot(plan.to_dot())
    names = d.by_name()
    (label,) = d.clusters_of(names["e"])
    assert label.startswith("step 1: fused kernel FALLBACK to the interpreter (RuntimeError")
    sub = next(s for s, a in d.subgraphs.items() if label_text(a.get("label", ""))[0] == label)
    assert d.subgraphs[sub]["style"] == "rounded,dashed"
    for n in ("e", "y"):
        assert d.lines(names[n])[-1] == "interpreter fallback"
        assert d.nodes[names[n]]["fillcolor"] == "#fee2e2"
    assert d.nodes[names["h"]]["fillcolor"] != "#fee2e2"
    check_svg(plan.picture())
    # an interpreter plan chosen as a fallback says so on every node, and in its title
    fallback = InterpreterPlan(g.nodes, ["x", "w"], [y], types, reason="compiler declined")
    d = Dot(fallback.to_dot())
    assert "fallback: compiler declined" in d.name
    assert all(d.lines(n)[-1] == "interpreter fallback" for n in d.nodes
               if d.nodes[n]["shape"] == "box")


def test_training_step_shows_forward_backward_and_update_groups():
    sd = SameDiff.create()
    x = sd.placeholder("x", np.float32, -1, 4)
    y = sd.placeholder("y", np.float32, -1, 3)
    w = sd.var("w", np.full((4, 3), 0.1, np.float32))
    b = sd.var("b", np.zeros(3, np.float32))
    (y * sd.nn.log_softmax(x.mmul(w) + b)).sum(1).mean().neg().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    with pytest.raises(Exception, match="call fit first"):
        sd.to_dot(training=True)
    sd.fit((np.ones((8, 4), np.float32), np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2, 0, 1]]),
           batch_size=8, verbose=0)
    step = train_step_for(sd, sd.training_config, ())
    plan = list(step._plans.values())[-1]
    d = Dot(sd.to_dot(training=True))
    names = d.by_name()
    forward = {n.name for n in sd.graph.nodes}
    for node in plan.gradients.nodes:  # interpreter plans in the test suite
        around = d.clusters_of(names[node.name])
        assert around[-1] == "gradients plan (interpreter)"
        assert around[0] == ("backward" if node.name in step.backward_nodes else "forward")
        if node.name in forward:
            assert around[0] == "forward"
    assert {n.name for n in plan.gradients.nodes} & step.backward_nodes
    for node in plan.update.nodes:
        assert d.clusters_of(names[node.name]) == ["update plan (interpreter): runs after the check"]
    check = names["all_finite"]
    checked = [step.loss_name, *step.grads.values()]
    assert {d.lines(a)[0] for a, b, _ in d.edges if b == check} == {
        step.graph.vars[v].producer.name for v in checked}
    w_grad = step.graph.vars[step.grads["w"]]  # named apart from its node: both are shown
    assert d.lines(names[w_grad.producer.name])[-2:] == [f"{w_grad.name}: {w_grad.ttype}",
                                                          "interpreter"]
    for p in ("w", "b"):  # each parameter feeds its update; its gradient too
        (new,) = [n for n in plan.update.nodes if n.outputs[0] == step.new_params[p]]
        assert (p, new.name) in d.named_edges()
    check_svg(sd.picture(training=True))


# -- writing files ---------------------------------------------------------------------------

def test_write_picture_picks_a_renderer(tmp_path, monkeypatch):
    sd = small_graph()
    path = os.environ.get("PATH", "")
    assert sd.save_picture(tmp_path / "g.dot") == "dot-text"
    Dot((tmp_path / "g.dot").read_text())
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setitem(__import__("sys").modules, "graphviz", None)  # not installed
    assert sd.save_picture(tmp_path / "g.svg") == "builtin"
    root = ET.parse(tmp_path / "g.svg").getroot()
    assert len([g for g in root.iter(SVG + "g") if g.get("class") == "node"]) == \
        len(sd.picture().boxes)
    with pytest.raises(ValueError, match="only .svg and .dot"):
        sd.save_picture(tmp_path / "g.png")
    with pytest.raises(RuntimeError, match="not on PATH"):
        sd.save_picture(tmp_path / "g2.svg", engine="dot")
    # a `dot` program on PATH is used, and given the DOT text
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "dot"
    fake.write_text('#!/bin/sh\n[ "$1" = "-Tsvg" ] && [ "$2" = "-o" ] && cat > "$3"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + path)
    assert sd.save_picture(tmp_path / "via_dot.svg") == "dot"
    assert (tmp_path / "via_dot.svg").read_text() == sd.to_dot()
