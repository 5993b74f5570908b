"""One parameter given twice is refused, whatever the spellings (nd4py issue 21, item 5).

Driven by the tables: every op's keyword spellings (``keyword_spellings``: own name, the
``KEYWORD_ALIASES``, camelCase) and every numpy ``FUNCTIONS`` entry whose parameters name one
attribute twice. Only ``split_call`` / the numpy dispatcher run: no op executes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import ArgumentConflictError, OpError
from samediff.frontends.nd4j import keyword_spellings, resolve_keyword, split_call
from samediff.frontends.numpy import FUNCTIONS, numpy_function
from samediff.ops import REGISTRY


def _input_names(op) -> list[str]:
    return [s.lstrip("*").rstrip("?") for s in op.inputs]


def _spelling_pairs():
    for op in REGISTRY.values():
        for param, spellings in keyword_spellings(op).items():
            for a, b in itertools.combinations(spellings, 2):
                yield pytest.param(op.name, param, a, b, id=f"{op.name}-{a}-{b}")


PAIRS = list(_spelling_pairs())


def test_the_alias_tables_give_pairs_to_check():
    # the tables must produce the pairs the issue names, or the sweep below checks nothing
    ids = {p.id for p in PAIRS}
    assert {"sum-dims-axis", "sum-keep_dims-keepdims", "sum-keep_dims-keepDims",
            "variance-bias_corrected-biasCorrected", "cast-dtype-dataType",
            "softmax-dim-axis"} <= ids


@pytest.mark.parametrize("op_name, param, a, b", PAIRS)
def test_two_spellings_of_one_parameter_are_refused(op_name, param, a, b):
    op = REGISTRY[op_name]
    assert resolve_keyword(op, a) == resolve_keyword(op, b) == param
    others = {i: "in" for i in _input_names(op) if i != param}
    for values in ((1, 2), (1, 1)):  # as in Python: the same value twice is refused too
        with pytest.raises(ArgumentConflictError) as info:
            split_call(op, (), {**others, a: values[0], b: values[1]})
        message = str(info.value)
        assert op_name in message and f"{a}=" in message and f"{b}=" in message
        assert isinstance(info.value, TypeError) and isinstance(info.value, OpError)


def _first_attr_cases():
    for op in REGISTRY.values():
        if op.variadic or op.min_inputs != len(op.inputs) or not op.attr_kinds:
            continue
        first = next(iter(op.attr_kinds))
        for spelling in keyword_spellings(op)[first]:
            yield pytest.param(op.name, first, spelling, id=f"{op.name}-{spelling}")


@pytest.mark.parametrize("op_name, attr, spelling", list(_first_attr_cases()))
def test_positional_and_keyword_for_one_attribute_are_refused(op_name, attr, spelling):
    op = REGISTRY[op_name]
    inputs = tuple(f"in{i}" for i in range(len(op.inputs)))
    with pytest.raises(ArgumentConflictError, match=rf"{op_name}\(\) got multiple values for "
                                                    rf"argument '{attr}'.*{spelling}="):
        split_call(op, (*inputs, 1), {spelling: 2})


def test_positional_and_keyword_for_one_input_are_refused():
    x = nd.create(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ArgumentConflictError, match=r"gather\(\) got multiple values for input "
                                                    r"'indices'"):
        nd.gather(x, [0], indices=[1])
    with pytest.raises(ArgumentConflictError, match=r"layer_norm\(\) .* input 'bias'"):
        nd.layer_norm(x, nd.ones(3), nd.zeros(3), bias=nd.zeros(3))
    assert nd.gather(x, indices=[1], axis=1).shape == (2, 1)  # keywords alone still work


def test_the_issues_examples():
    x = nd.create(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ArgumentConflictError, match=r"sum\(\).*'dims'.*axis=0.*dims=1"):
        x.sum(axis=0, dims=1)
    with pytest.raises(ArgumentConflictError, match=r"'keep_dims'.*keepdims=True.*keepDims="):
        x.sum(0, keepdims=True, keepDims=False)
    with pytest.raises(ArgumentConflictError, match=r"'dims'.*\(0,\) positionally.*axis=1"):
        x.sum(0, axis=1)
    assert x.sum(keepDims=True, axis=1).shape == (2, 1)  # one of each is fine


def test_an_output_name_given_twice_is_refused():
    sd = nd.SameDiff.create()
    v = sd.placeholder("x", "float", -1, 3)
    with pytest.raises(ArgumentConflictError, match=r"relu\(\) .*output name: 'h' .*name='g'"):
        sd.nn.relu("h", v, 0.0, name="g")
    with pytest.raises(ArgumentConflictError, match=r"output name: 'h' .*name='g'"):
        v.sum("h", 0, name="g")
    assert "h" not in sd.variableNames() and "g" not in sd.variableNames()  # nothing recorded


def _numpy_conflicts():
    for name, entries in FUNCTIONS.items():
        for entry in entries:
            by_target: dict[str, list[str]] = {}
            for p, target in entry.attrs.items():
                by_target.setdefault(target[0] if isinstance(target, tuple) else target,
                                     []).append(p)
            for target, params in by_target.items():
                for a, b in itertools.combinations(params, 2):
                    yield pytest.param(name, entry, a, b, id=f"{name}-{a}-{b}")


NUMPY_CONFLICTS = list(_numpy_conflicts())


def test_numpy_tables_have_aliases_to_check():
    assert {"clip-a_min-min", "clip-a_max-max", "reshape-shape-newshape"} <= {
        p.id for p in NUMPY_CONFLICTS}


@pytest.mark.parametrize("name, entry, a, b", NUMPY_CONFLICTS)
def test_numpy_spellings_of_one_parameter_are_refused(name, entry, a, b):
    def func(*args, **kwargs):
        raise AssertionError("numpy must not run")
    func.__name__, func.__module__ = name.split(".")[-1], "numpy"
    op = REGISTRY[entry.op]
    arrays = [np.ones(6)] * (1 if op.variadic else len(op.inputs))
    args = ([arrays],) if op.variadic else tuple(arrays)

    def never(*_):
        raise AssertionError("the call must be refused before anything runs")
    with pytest.raises(ArgumentConflictError, match=rf"{entry.op}: numpy's {a}= and {b}="):
        numpy_function(never, never, func, args, {a: 1, b: 2})
