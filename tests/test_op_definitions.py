"""One home per convention: an op's gradient rule and training form are part of its definition
(nothing attaches them later, nothing mutates a registered ``OpDef``), and the compiler's
epilogue fold reads declared op facts (``epilogue``, ``activation``), not op names.
"""
from __future__ import annotations

import pathlib
import re

import pytest

import samediff.ops as ops_package
from samediff.compiler.passes import epilogue_of, fold_epilogues
from samediff.ir import Node
from samediff.ops import REGISTRY, OpDef
from samediff.ops import registry
from samediff.ops.cnn_attrs import choice
from samediff.ops.families import same_type
from samediff.ops.registry import NONDIFF, Activation, Attr, register
from samediff.ops.validate import check_op


def fake(**fields) -> OpDef:
    """An unregistered op definition (fine as given, unless ``fields`` break it)."""
    base = {"name": "fake_op", "inputs": ("x",), "attr_kinds": {}, "infer": same_type,
            "impl": lambda x: x, "doc": "A test op.", "grad": NONDIFF}
    return OpDef(**{**base, **fields})


# --- gradient rules: decided with the definition --------------------------------------------

def test_an_op_is_registered_only_with_its_gradient_decision():
    with pytest.raises(ValueError, match="no gradient decision.*grad=NONDIFF"):
        register(fake(name="undecided_op", grad=None))
    assert "undecided_op" not in REGISTRY


def test_every_op_carries_its_rule_or_nondiff():
    assert [n for n, o in REGISTRY.items() if o.grad is None] == []
    assert [n for n, o in REGISTRY.items()
            if o.training is not None and not callable(o.training)] == []
    assert callable(REGISTRY["dropout"].training) and callable(REGISTRY["batch_norm"].training)


def test_nothing_attaches_rules_or_mutates_definitions_after_the_fact():
    assert not any(hasattr(registry, f) for f in ("defgrad", "deftraining", "nondifferentiable"))
    root = pathlib.Path(ops_package.__file__).parent
    assert not list(root.glob("grads_*.py"))  # no out-of-line rule registries
    for path in root.glob("*.py"):
        text = path.read_text()
        # only OpDef.__post_init__ sets (its own, derived) fields of a frozen OpDef
        targets = re.findall(r"object\.__setattr__\((\w+)", text)
        assert all(t == "self" for t in targets) and (not targets or path.name == "registry.py"), \
            f"{path.name} sets fields of a frozen object: {targets}"
    # ... and nothing above the table does either (UDFs keep their rule in a slot of their own)
    for path in root.parent.rglob("*.py"):
        targets = re.findall(r"object\.__setattr__\(([\w.]+)", path.read_text())
        assert all(t == "self" for t in targets), f"{path.name} sets fields of {targets}"
        assert not re.search(r"dataclasses\.replace\(|from dataclasses import .*\breplace\b",
                             text), f"{path.name} rebuilds definitions with dataclasses.replace"


# --- epilogue facts ---------------------------------------------------------------------------

def test_epilogue_and_activation_facts_are_validated():
    assert any("does not have" in p for p in check_op(fake(epilogue="activation")))
    wrong_default = fake(attr_kinds={"post": (Attr.STR, "relu")}, epilogue="post")
    assert any('default to "none"' in p for p in check_op(wrong_default))
    problems = check_op(fake(activation=Activation("relu", when=(("cutoff", 0.0),))))
    assert any("one-input elementwise" in p for p in problems)
    assert any("does not have" in p for p in problems)
    assert REGISTRY["conv2d"].epilogue == "activation"
    assert REGISTRY["relu"].activation == Activation("relu", when=(("cutoff", 0.0),))


LIB = fake(name="lib_op", attr_kinds={"post": (choice("none", "relu"), "none")}, epilogue="post")
GELU_LIKE = fake(name="gelu_like", elementwise=True, unfused="test op",
                 activation=Activation("gelu"))


def _chain(act: OpDef, attrs: dict) -> list[Node]:
    return [Node("p", LIB, LIB.default_attrs, ("x",), ("y",)),
            Node("a", act, act.make_attrs(attrs), ("y",), ("z",))]


def test_epilogue_fold_reads_facts_not_names():
    """Whatever the ops are called: an activation op folds into a producer declaring an
    epilogue attribute that takes it; other attributes, other activations, or ops without the
    fact are left alone."""
    relu = REGISTRY["relu"]
    (fused,) = fold_epilogues(_chain(relu, {}), ["z"])
    assert fused.op is LIB and fused.attrs.post == "relu" and fused.outputs == ("z",)
    assert epilogue_of(fused) == "relu" and epilogue_of(_chain(relu, {})[0]) == "none"
    assert len(fold_epilogues(_chain(relu, {"cutoff": 0.5}), ["z"])) == 2  # not the activation
    assert len(fold_epilogues(_chain(GELU_LIKE, {}), ["z"])) == 2  # the producer does not take it
    assert len(fold_epilogues(_chain(REGISTRY["sigmoid"], {}), ["z"])) == 2  # no fact declared
    assert len(fold_epilogues(_chain(relu, {}), ["y", "z"])) == 2  # pre-activation is an output
