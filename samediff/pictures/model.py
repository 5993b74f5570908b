r"""A picture of a graph or plan as plain data — boxes, clusters, edges — and its Graphviz DOT
text. ``build.py`` fills a ``Picture`` from IR graphs and plans; ``svg.py`` draws one without
Graphviz. Keeping the picture as data (not DOT strings) is what lets both renderers, and the
tests, agree on what is in it.

>>> pic = Picture("demo")
>>> pic.box("a", ["x", "placeholder float32[2]"], "placeholder")
'a'
>>> pic.box("b", ['say "hi"\\', "exp"], "kernel", cluster=pic.cluster("k", "kernel 0", "kernel"))
'b'
>>> pic.edge("a", "b")
>>> print(pic.to_dot())  # doctest: +NORMALIZE_WHITESPACE
digraph "demo" {
  graph [rankdir=TB, fontname="Helvetica", fontsize=11, labeljust=l];
  node [fontname="Helvetica", fontsize=10];
  edge [color="#555555", arrowsize=0.7];
  "a" [label="x\nplaceholder float32[2]", shape=ellipse, style=filled, fillcolor="#dbeafe", color="#2563eb"];
  subgraph "cluster_k" {
    label="kernel 0"; style="rounded"; color="#16a34a"; penwidth=1.5;
    "b" [label="say \"hi\"\\\nexp", shape=box, style="rounded,filled", fillcolor="#dcfce7", color="#16a34a"];
  }
  "a" -> "b";
}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

#: How each kind of box looks: (DOT shape, fill colour, border colour, dashed border).
#: Inputs are styled by variable kind; op boxes by how the plan runs them.
BOX_STYLES: dict[str, tuple[str, str, str, bool]] = {
    "placeholder": ("ellipse", "#dbeafe", "#2563eb", False),   # fed per call
    "variable": ("ellipse", "#fef9c3", "#a16207", False),      # trainable, persistent
    "constant": ("ellipse", "#f3f4f6", "#6b7280", True),
    "input": ("ellipse", "#ffffff", "#374151", False),          # a plan input of unknown kind
    "op": ("box", "#ffffff", "#374151", False),                 # an op of a graph
    "kernel": ("box", "#dcfce7", "#16a34a", False),             # inside a fused kernel
    "library": ("box", "#fef3c7", "#d97706", False),            # a library call (BLAS, numpy)
    "fallback": ("box", "#fee2e2", "#dc2626", True),            # run by the interpreter instead
    "interpreted": ("box", "#ede9fe", "#7c3aed", False),        # an interpreter plan's node
    "check": ("diamond", "#fce7f3", "#be185d", False),          # the training step's NaN check
}
#: How each kind of cluster looks: (border colour, dashed, fill colour or "").
CLUSTER_STYLES: dict[str, tuple[str, bool, str]] = {
    "kernel": ("#16a34a", False, ""),
    "fallback": ("#dc2626", True, ""),
    "body": ("#7c3aed", True, ""),
    "cond": ("#7c3aed", False, ""),
    "plan": ("#1f2937", False, "#f9fafb"),
    "forward": ("#2563eb", False, "#eff6ff"),
    "backward": ("#c2410c", False, "#fff7ed"),
    "update": ("#15803d", False, "#f0fdf4"),
    "interpreter": ("#7c3aed", False, ""),
}


@dataclass
class Box:
    """One node of the picture: label lines (the first is the name), its kind (a key of
    ``BOX_STYLES``), the cluster it sits in, and whether it is an output (drawn bold)."""

    id: str
    lines: tuple[str, ...]
    kind: str
    cluster: str | None = None
    output: bool = False


@dataclass
class Cluster:
    """A group drawn as a rectangle (DOT ``subgraph cluster_*``); clusters nest by ``parent``."""

    id: str
    label: str
    kind: str
    parent: str | None = None


@dataclass
class Edge:
    src: str
    dst: str
    dashed: bool = False
    label: str = ""


@dataclass
class Picture:
    """Boxes, clusters and edges, in the order they were added (a topological order where the
    builder could give one)."""

    title: str = "graph"
    boxes: dict[str, Box] = field(default_factory=dict)
    clusters: dict[str, Cluster] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def box(self, id: str, lines: Iterable[str], kind: str, cluster: str | None = None,
            output: bool = False) -> str:
        """Add a box (``kind``: a key of ``BOX_STYLES``); returns its id."""
        if kind not in BOX_STYLES:
            raise ValueError(f"unknown box kind {kind!r}; one of {sorted(BOX_STYLES)}")
        self.boxes[id] = Box(id, tuple(lines), kind, cluster, output)
        return id

    def cluster(self, id: str, label: str, kind: str, parent: str | None = None) -> str:
        """Add a cluster (its DOT name is ``cluster_<id>``); returns its id."""
        if kind not in CLUSTER_STYLES:
            raise ValueError(f"unknown cluster kind {kind!r}; one of {sorted(CLUSTER_STYLES)}")
        self.clusters[id] = Cluster(id, label, kind, parent)
        return id

    def edge(self, src: str, dst: str, dashed: bool = False, label: str = "") -> None:
        self.edges.append(Edge(src, dst, dashed, label))

    def children(self) -> tuple[dict, dict]:
        """Per cluster id (``None``: top level), its boxes and its sub-clusters, in order."""
        boxes: dict[str | None, list[Box]] = {}
        subs: dict[str | None, list[Cluster]] = {}
        for b in self.boxes.values():
            boxes.setdefault(b.cluster, []).append(b)
        for c in self.clusters.values():
            subs.setdefault(c.parent, []).append(c)
        return boxes, subs

    def to_dot(self) -> str:
        """Graphviz DOT text: one statement per box, a ``subgraph cluster_*`` per cluster."""
        boxes, subs = self.children()
        out = [f"digraph {quote(self.title)} {{",
               '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, labeljust=l];',
               '  node [fontname="Helvetica", fontsize=10];',
               '  edge [color="#555555", arrowsize=0.7];']

        def emit(cid: str | None, indent: str) -> None:
            for b in boxes.get(cid, ()):
                out.append(f"{indent}{_dot_box(b)}")
            for c in subs.get(cid, ()):
                colour, dashed, fill = CLUSTER_STYLES[c.kind]
                style = ("rounded" + (",dashed" if dashed else "") + (",filled" if fill else ""))
                out.append(f"{indent}subgraph {quote('cluster_' + c.id)} {{")
                out.append(f"{indent}  label={quote(c.label)}; style={quote(style)}; "
                           f"color={quote(colour)}; penwidth=1.5;"
                           + (f" fillcolor={quote(fill)};" if fill else ""))
                emit(c.id, indent + "  ")
                out.append(f"{indent}}}")
        emit(None, "  ")
        for e in self.edges:
            attrs = []
            if e.dashed:
                attrs.append("style=dashed")
            if e.label:
                attrs.append(f"label={quote(e.label)}")
            out.append(f"  {quote(e.src)} -> {quote(e.dst)}"
                       + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
        out.append("}")
        return "\n".join(out)


def _dot_box(b: Box) -> str:
    shape, fill, colour, dashed = BOX_STYLES[b.kind]
    style = ("rounded," if shape == "box" else "") + "filled" + (",dashed" if dashed else "")
    style = style if "," not in style else quote(style)
    bold = ", penwidth=2.5" if b.output else ""
    return (f"{quote(b.id)} [label={quote(chr(10).join(b.lines))}, shape={shape}, "
            f"style={style}, fillcolor={quote(fill)}, color={quote(colour)}{bold}];")


def quote(text: str) -> str:
    r"""``text`` as a DOT quoted string. Inside quotes DOT unescapes only ``\\"``; a label
    would also read ``\\n``, ``\\l``, ``\\N``... as escapes, so a backslash is doubled
    (shown as one), a quote escaped, and a line break written as ``\\n``; a lone ``\\r``
    becomes ``\\n`` too. So any name, however odd, shows as itself.

    >>> print(quote('a"b\\c\nd'))
    "a\"b\\c\nd"
    """
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'
