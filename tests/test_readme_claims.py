"""Inline claims of the README hold: every `code span` that is a Python expression over the
names below (``nd``, ``sd``, ``x``...) runs, eagerly or in a SameDiff graph. Fragments with
``...`` must at least name attributes that exist. The Java column of the ND4J table and spans
quoting Java are not Python claims and are left out. (The ```python blocks run in
test_readme.py.)"""
from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import numpy as np
import pytest

import nd4py as nd
import samediff
import samediff.onnx  # noqa: F401 - the README names samediff.onnx.import_onnx
import samediff.distributed  # noqa: F401 - and samediff.distributed (dask loads on first use)

# `nd.profile_summary()` reports the last profile: the claims run after one (whichever tests
# this process ran before)
with nd.profile(None):
    (nd.create([1.0]) + 1).numpy()

README = Path(__file__).resolve().parent.parent / "README.md"
JAVA_SPANS = {"max(x, y)"}  # "ND4J's `max(x, y)` is available as `nd.maximum`"


def _python_spans() -> list[str]:
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.S)
    head, table = text.split("## ND4J → nd4py", 1)
    table, tail = table.split("\n## ", 1)
    # the ND4J table's first column quotes Java: keep the nd4py columns only
    rows = ["|".join(line.strip().strip("|").split("|")[1:]) if line.startswith("|") else line
            for line in table.splitlines()]
    spans = []
    for span in re.findall(r"`([^`\n]+)`", "\n".join([head, *rows, tail])):
        spans += [s.strip() for s in span.split(" / ")]  # "nd.FLOAT / nd.DOUBLE": alternatives
    return [s for s in spans if s not in JAVA_SPANS]


def _eager() -> dict:
    return {"x": nd.create(np.arange(1, 7, dtype=np.float32).reshape(2, 3)),
            "y": nd.create(np.ones((2, 3), np.float32)),
            "a": nd.create(np.ones((2, 3), np.float32)),
            "b": nd.create(np.ones((3, 2), np.float32)),
            "w": nd.create(np.ones((3, 3), np.float32))}


def _graph(names: tuple[str, ...]) -> dict:
    sd = nd.SameDiff.create()
    x = sd.placeholder(names[0], nd.FLOAT, -1, 3)
    w = sd.var(names[1], nd.create(np.ones((3, 3), np.float32)))
    b = sd.var(names[2], nd.zeros(3))
    x.mmul(w).add(b).sum().mark_as_loss()
    sd.calculate_gradients({names[0]: np.ones((2, 3), np.float32)}, names[1])
    return {"sd": sd, "x": x, "w": w, "b": b, "y": sd.placeholder(names[3], nd.FLOAT, -1, 3)}


def _graph_named_like_the_readme() -> dict:  # sd.get_variable("w") finds w
    return _graph(("x", "w", "b", "y"))


def _graph_with_free_names() -> dict:  # sd.placeholder("x", ...) can create x
    return _graph(("features", "weights", "bias", "labels"))


ROOTS = {"nd", "np", "samediff", "sd", "x", "y", "a", "b", "w"}


def _claims() -> list[str]:
    out = []
    for span in _python_spans():
        try:
            tree = ast.parse(span, mode="eval")
        except SyntaxError:
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if names & ROOTS and names <= ROOTS | set(dir(builtins)):
            out.append(span)
    return sorted(set(out))


CLAIMS = _claims()


def test_the_readme_makes_many_checkable_claims():
    assert len(CLAIMS) >= 60


@pytest.mark.parametrize("span", CLAIMS)
def test_readme_inline_claim_holds(span):
    tree = ast.parse(span, mode="eval")
    fragment = any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(tree))
    errors = []
    for extra in (_eager, _graph_named_like_the_readme, _graph_with_free_names):
        ns = {"nd": nd, "np": np, "samediff": samediff, **extra()}
        try:
            if fragment:  # e.g. nd.matmul(a, b, transpose_x=...): the names must exist
                for node in ast.walk(tree):
                    if isinstance(node, ast.Attribute):
                        eval(compile(ast.Expression(node), span, "eval"), ns)
            else:
                eval(compile(tree, span, "eval"), ns)
            return
        except Exception as exc:  # noqa: BLE001 - collected, reported below
            errors.append(f"{extra.__name__[1:]}: {type(exc).__name__}: {exc}")
    pytest.fail(f"README claim `{span}` does not run: " + " | ".join(errors)[:600])
