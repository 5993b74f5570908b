"""A ``Picture`` drawn as SVG without Graphviz: a small layered layout of our own.

Layout, in three steps:

1. **Layers.** A box's layer is its longest path from a source (topological depth), so every
   edge points down; an input moves down to just above its first reader.
2. **Packing.** Each cluster is packed like a page of text: its children (boxes, and its
   sub-clusters as solid blocks spanning their layers) are placed in order, each at the
   leftmost x where it overlaps nothing already placed on any of its layers. Packing bottom-up
   makes a cluster a rectangle no box of another cluster enters, whatever the nesting.
3. **Drawing.** Cluster rectangles (outermost first), edges as curves with arrowheads, then
   boxes (ellipses for inputs, rounded rectangles for ops, a diamond for a check). The gap
   below a layer leaves room for the margins and labels of the clusters that end or start
   there.

Simple on purpose: no crossing reduction beyond keeping a cluster's members together. Good for
the tens-to-hundreds of boxes of a model's step; use Graphviz (``dot``) for more.

>>> from samediff.pictures.model import Picture
>>> pic = Picture("p")
>>> _ = pic.box("a", ["x"], "placeholder"), pic.box("b", ["y", "exp"], "op")
>>> pic.edge("a", "b")
>>> text = to_svg(pic)
>>> text.startswith("<svg") and text.count('class="node"')
2
"""
from __future__ import annotations

from typing import Any

from .model import BOX_STYLES, CLUSTER_STYLES, Box, Picture

CHAR_W, LINE_H, PAD = 6.6, 14, 8           # font metrics (11px sans) and a box's inner margin
H_GAP, MARGIN, LABEL_H, CLUSTER_PAD = 18, 20, 16, 10


_CONTROL = {c: "\ufffd" for c in range(32) if chr(c) not in "\t\n\r"}
_XML = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", **_CONTROL}


def escape(text: str) -> str:
    """``text`` for XML character data: ``&<>`` escaped, and the control characters XML 1.0
    forbids (a name may hold any) shown as U+FFFD. (Not ``xml.sax.saxutils``: importing it
    costs 20 ms of ``import nd4py``.)"""
    return text.translate(_XML)


def quoteattr(text: str) -> str:
    """``text`` as a double-quoted XML attribute value."""
    return '"' + escape(text).replace('"', "&quot;") + '"'


def _size(b: Box) -> tuple[float, float]:
    w = max(len(line) for line in b.lines) * CHAR_W + 2 * PAD
    h = len(b.lines) * LINE_H + 2 * PAD - 4
    if BOX_STYLES[b.kind][0] == "ellipse":
        w, h = w * 1.2, h + 6
    elif BOX_STYLES[b.kind][0] == "diamond":
        w, h = w * 1.5, h * 1.6
    return w, h


def _layers(pic: Picture) -> dict[str, int]:
    """Longest path from a source, per box (edges into a box from boxes not yet placed wait)."""
    preds: dict[str, list[str]] = {b: [] for b in pic.boxes}
    for e in pic.edges:
        preds[e.dst].append(e.src)
    layer: dict[str, int] = {}
    for start in pic.boxes:
        stack = [start]
        while stack:
            b = stack[-1]
            if b in layer:
                stack.pop()
                continue
            todo = [p for p in preds[b] if p not in layer and p not in stack]
            if todo:
                stack.extend(todo)
                continue
            layer[b] = 1 + max((layer[p] for p in preds[b] if p in layer), default=-1)
            stack.pop()
    # an input sits right above its first reader, not on the top row with long edges down
    succs: dict[str, list[str]] = {}
    for e in pic.edges:
        succs.setdefault(e.src, []).append(e.dst)
    for b in pic.boxes:
        if not preds[b] and b in succs:
            layer[b] = max(0, min(layer[s] for s in succs[b]) - 1)
    return layer


class _Block:
    """A placed item: a box, or a packed cluster of items."""

    def __init__(self, top: int, bottom: int, width: float, box: Box | None = None,
                 cluster: Any = None, items: list | None = None, depth: int = 0) -> None:
        self.top, self.bottom, self.width = top, bottom, width
        self.box, self.cluster, self.items, self.depth = box, cluster, items or [], depth
        self.x = 0.0


def _pack(items: list[_Block]) -> float:
    """Place ``items`` (in order) at the leftmost free x over their layers; returns the width."""
    taken: dict[int, list[tuple[float, float]]] = {}
    right = 0.0
    for it in items:
        x, moved = 0.0, True
        while moved:
            moved = False
            for row in range(it.top, it.bottom + 1):
                for a, b in taken.get(row, ()):
                    if x < b + H_GAP and a < x + it.width + H_GAP:
                        x, moved = b + H_GAP, True
        it.x = x
        for row in range(it.top, it.bottom + 1):
            taken.setdefault(row, []).append((x, x + it.width))
        right = max(right, x + it.width)
    return right


def _build(pic: Picture, cid: str | None, kids: tuple[dict, dict], layer: dict[str, int],
           sizes: dict[str, tuple[float, float]], sources: set[str]) -> list[_Block]:
    boxes, subs = kids
    items = [_Block(layer[b.id], layer[b.id], sizes[b.id][0], box=b) for b in boxes.get(cid, ())]
    for c in subs.get(cid, ()):
        inner = _build(pic, c.id, kids, layer, sizes, sources)
        if not inner:
            continue
        width = max(_pack(inner), len(c.label) * CHAR_W) + 2 * CLUSTER_PAD
        depth = 1 + max((i.depth for i in inner), default=0)
        items.append(_Block(min(i.top for i in inner), max(i.bottom for i in inner), width,
                            cluster=c, items=inner, depth=depth))
    # by layer; within one, a chain's next op before the inputs joining it (so a chain stays in
    # its column), else in the builder's order (the sort is stable)
    items.sort(key=lambda i: (i.top, i.box is not None and i.box.id in sources))
    return items


def _clusters(items: list[_Block]) -> list[_Block]:
    out = []
    for it in items:
        if it.cluster is not None:
            out.append(it)
            out += _clusters(it.items)
    return out


def to_svg(pic: Picture) -> str:
    """The picture as a standalone SVG document (see the module docstring for the layout)."""
    sizes = {b.id: _size(b) for b in pic.boxes.values()}
    layer = _layers(pic)
    sources = set(pic.boxes) - {e.dst for e in pic.edges}
    items = _build(pic, None, pic.children(), layer, sizes, sources)
    width = _pack(items)
    n_layers = 1 + max(layer.values(), default=0)
    row_h = [0.0] * n_layers
    for b, k in layer.items():
        row_h[k] = max(row_h[k], sizes[b][1])
    # the gap below a row holds the bottom margins of the clusters ending on it and the top
    # margins and labels of those starting on the next row
    below, above = [0.0] * n_layers, [0.0] * n_layers
    for it in _clusters(items):
        below[it.bottom] = max(below[it.bottom], it.depth * CLUSTER_PAD)
        above[it.top] = max(above[it.top], it.depth * (CLUSTER_PAD + LABEL_H) - CLUSTER_PAD)
    top = [0.0] * n_layers
    y = MARGIN + LABEL_H + above[0] + 8
    for k in range(n_layers):
        top[k] = y
        y += row_h[k] + 24 + below[k] + (above[k + 1] if k + 1 < n_layers else 0)
    height = y - 24 + MARGIN
    rects: list[str] = []
    labels: list[str] = []
    place: dict[str, tuple[float, float, float, float]] = {}

    def draw(blocks: list[_Block], x0: float) -> None:
        for it in blocks:
            if it.box is not None:
                w, h = sizes[it.box.id]
                k = it.top
                place[it.box.id] = (x0 + it.x, top[k] + (row_h[k] - h) / 2, w, h)
                continue
            c = it.cluster
            colour, dashed, fill = CLUSTER_STYLES[c.kind]
            pad_top = it.depth * (CLUSTER_PAD + LABEL_H) - CLUSTER_PAD
            y0 = top[it.top] - pad_top
            y1 = top[it.bottom] + row_h[it.bottom] + it.depth * CLUSTER_PAD
            rects.append(
                f'<g class="cluster" id={quoteattr("cluster_" + c.id)}>'
                f'<rect x="{x0 + it.x:.1f}" y="{y0:.1f}" width="{it.width:.1f}" '
                f'height="{y1 - y0:.1f}" rx="6" fill="{fill or "none"}" stroke="{colour}" '
                f'stroke-width="1.5"' + (' stroke-dasharray="5,3"' if dashed else '') + '/></g>')
            # labels go on top of the edges, with a halo, so lines crossing them stay readable
            labels.append(f'<text class="cluster-label" x="{x0 + it.x + 6:.1f}" '
                          f'y="{y0 + 13:.1f}" fill="{colour}" font-size="11" font-weight="bold" '
                          f'stroke="{fill or "white"}" stroke-width="3" paint-order="stroke">'
                          f'{escape(c.label)}</text>')
            draw(it.items, x0 + it.x + CLUSTER_PAD)
    draw(items, MARGIN)
    total_w = width + 2 * MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {total_w:.0f} {height:.0f}" '
           f'font-family="Helvetica, Arial, DejaVu Sans, sans-serif" font-size="11">',
           f'<title>{escape(pic.title)}</title>',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#555555"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{MARGIN}" y="{MARGIN}" font-size="13" font-weight="bold">'
           f'{escape(pic.title)}</text>']
    out += rects
    for e in pic.edges:
        out.append(_edge(place[e.src], place[e.dst], e.dashed, e.label))
    out += labels
    for b in pic.boxes.values():
        out.append(_box(b, *place[b.id]))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _edge(src: tuple, dst: tuple, dashed: bool, label: str) -> str:
    x1, y1 = src[0] + src[2] / 2, src[1] + src[3]
    x2, y2 = dst[0] + dst[2] / 2, dst[1]
    bend = max(20.0, (y2 - y1) / 2)
    path = (f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
            f'{x2:.1f},{y2:.1f}" fill="none" stroke="#555555" stroke-width="1.1" '
            f'marker-end="url(#arrow)"' + (' stroke-dasharray="4,3"' if dashed else '') + '/>')
    if label:
        path = (f'<g class="edge">{path}<text x="{(x1 + x2) / 2 + 4:.1f}" '
                f'y="{(y1 + y2) / 2:.1f}" fill="#555555" font-size="10">{escape(label)}</text></g>')
    return path


def _box(b: Box, x: float, y: float, w: float, h: float) -> str:
    shape, fill, colour, dashed = BOX_STYLES[b.kind]
    stroke = (f'fill="{fill}" stroke="{colour}" stroke-width="{2.5 if b.output else 1.2}"'
              + (' stroke-dasharray="4,2"' if dashed else ''))
    if shape == "ellipse":
        body = f'<ellipse cx="{x + w / 2:.1f}" cy="{y + h / 2:.1f}" rx="{w / 2:.1f}" ' \
               f'ry="{h / 2:.1f}" {stroke}/>'
    elif shape == "diamond":
        cx, cy = x + w / 2, y + h / 2
        body = (f'<polygon points="{cx:.1f},{y:.1f} {x + w:.1f},{cy:.1f} {cx:.1f},{y + h:.1f} '
                f'{x:.1f},{cy:.1f}" {stroke}/>')
    else:
        body = f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5" {stroke}/>'
    first = y + h / 2 - (len(b.lines) - 1) * LINE_H / 2 + 4
    texts = "".join(
        f'<text x="{x + w / 2:.1f}" y="{first + k * LINE_H:.1f}" text-anchor="middle"'
        + (' font-weight="bold"' if k == 0 else ' fill="#374151"') + f'>{escape(line)}</text>'
        for k, line in enumerate(b.lines))
    return (f'<g class="node" id={quoteattr(b.id)}><title>{escape(b.lines[0])}</title>'
            f'{body}{texts}</g>')
