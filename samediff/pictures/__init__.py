"""Pictures of graphs and plans: Graphviz DOT text, and SVG with or without Graphviz.

``sd.to_dot()`` draws a SameDiff graph (inputs styled by kind — placeholders blue, variables
yellow, constants grey — one box per op with its output shape and dtype, ``cond`` bodies as
nested clusters); ``plan.to_dot()`` draws a compiled plan (a green cluster per fused kernel,
library calls amber, interpreter fallbacks red and labelled) or an interpreter plan; a training
step's plans (``TrainStep.to_dot()``) show the forward and backward phases of the gradients
plan, the finiteness check, and the update plan. ``write_picture(obj, path)`` (and
``sd.save_picture(path)``) writes any of them to a file.

* Imports flow down: this package reads IR graphs and plan objects (duck-typed) and imports
  nothing above ``samediff.ir``, so the compiler, the training step and SameDiff import it.
* ``model.py`` — the picture as data and its DOT text; ``build.py`` — from graphs and plans;
  ``svg.py`` — our own layered layout, used when Graphviz is missing.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", np.float32, -1, 3)
>>> y = sd.nn.relu(x * 2.0, 0.0)
>>> dot = sd.to_dot()
>>> dot.startswith('digraph "SameDiff"') and dot.count("->")
3
"""
from __future__ import annotations

import os
import shutil
from typing import Any

from .build import graph_picture, plan_picture, step_picture
from .model import BOX_STYLES, CLUSTER_STYLES, Picture, quote
from .svg import to_svg

ENGINES = ("auto", "dot", "graphviz", "builtin")


def picture_of(obj: Any) -> Picture:
    """The ``Picture`` of ``obj``: a ``Picture``, an IR ``Graph``, or anything with a
    ``picture()`` method (SameDiff, plans, training steps)."""
    if isinstance(obj, Picture):
        return obj
    if hasattr(obj, "picture"):
        return obj.picture()
    if hasattr(obj, "vars") and hasattr(obj, "nodes"):
        return graph_picture(obj)
    raise TypeError(f"write_picture: cannot draw a {type(obj).__name__}; pass a SameDiff, a "
                    f"graph, a plan (explain()'s object) or a training step")


def write_picture(obj: Any, path: str | os.PathLike, engine: str = "auto") -> str:
    """Write a picture of ``obj`` (see ``picture_of``) to ``path``; returns which renderer
    wrote it.

    A ``.dot``/``.gv`` path gets the DOT text (``"dot-text"``). Any other suffix (``.svg``,
    or ``.png``/``.pdf`` with Graphviz) is rendered by, in order (``engine="auto"``):
    the Graphviz ``dot`` program if it is on ``PATH`` (``"dot"``), else the ``graphviz``
    Python package (``"graphviz"``; it too needs the program), else — SVG only — our own
    layout (``"builtin"``, ``svg.py``: layered boxes, curved edges, cluster rectangles; no
    dependency). ``engine`` forces one of them.

    >>> import tempfile, pathlib
    >>> from samediff.pictures.model import Picture
    >>> pic = Picture("p"); _ = pic.box("a", ["x"], "placeholder")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_picture(pic, pathlib.Path(d) / "p.svg", engine="builtin")
    'builtin'
    """
    if engine not in ENGINES:
        raise ValueError(f"write_picture: engine must be one of {ENGINES}, got {engine!r}")
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower().lstrip(".") or "svg"
    pic = picture_of(obj)
    if suffix in ("dot", "gv"):
        _write(path, pic.to_dot() + "\n")
        return "dot-text"
    program = shutil.which("dot") if engine in ("auto", "dot") else None
    if program is not None:
        import subprocess  # (stdlib, only when drawing: it is not needed to import nd4py)
        done = subprocess.run([program, f"-T{suffix}", "-o", path], input=pic.to_dot().encode(),
                              capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"write_picture: dot failed: {done.stderr.decode()[:500]}")
        return "dot"
    if engine == "dot":
        raise RuntimeError("write_picture: the Graphviz `dot` program is not on PATH")
    if engine in ("auto", "graphviz"):
        try:
            import graphviz  # optional: only a renderer, never needed to import samediff
            data = graphviz.Source(pic.to_dot()).pipe(format=suffix)
        except Exception as exc:  # noqa: BLE001 - missing package, or its missing program
            if engine == "graphviz":
                raise RuntimeError(f"write_picture: the graphviz package failed: {exc}") from exc
        else:
            with open(path, "wb") as f:
                f.write(data)
            return "graphviz"
    if suffix != "svg":
        raise ValueError(f"write_picture: without Graphviz only .svg and .dot can be written, "
                         f"not .{suffix}")
    _write(path, to_svg(pic))
    return "builtin"


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


__all__ = ["Picture", "picture_of", "write_picture", "graph_picture", "plan_picture",
           "step_picture", "to_svg", "quote", "BOX_STYLES", "CLUSTER_STYLES", "ENGINES"]
