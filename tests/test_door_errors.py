"""Errors a new user meets first: a misspelt or ND4J-era method, misspelt feed/output names,
``fit`` without data, a traced array passed to a graph, ``None`` for an op input."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import GraphError, OpError, PlaceholderError, TrainingError
from samediff.training.config import TrainingConfig
from samediff.training.updaters import Sgd


@pytest.fixture
def sd():
    sd = nd.SameDiff.create()
    x = sd.placeholder("input", "float", -1, 3)
    label = sd.placeholder("label", "float", -1, 2)
    w = sd.var("w", np.ones((3, 2), np.float32))
    probs = sd.nn.softmax(x.mmul(w), name="probs")
    ((probs - label) ** 2).mean().rename("loss").mark_as_loss()
    return sd


FEED = {"input": np.ones((4, 3), np.float32)}


# -- missing methods -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, suggestion", [
    ("run", "'output'"),                           # other libraries' names
    ("predict", "'output'"),
    ("execBackwards", "'calculate_gradients'"),
    ("outptu", "'output'"),                        # a typo of a method
    ("calculateGradient", "'calculateGradients'"),
    ("reul", "'relu'"),                            # a typo of an op
])
def test_missing_attribute_suggests_the_closest_name(sd, name, suggestion):
    with pytest.raises(AttributeError) as info:
        getattr(sd, name)
    msg = str(info.value)
    assert msg.startswith(f"SameDiff has no method or op {name!r}; did you mean {suggestion}")
    assert len(msg) < 160  # not a list of every op


def test_missing_attribute_without_a_close_name(sd):
    with pytest.raises(AttributeError, match=r"no method or op 'xyzzy'; see dir\(sd\)"):
        getattr(sd, "xyzzy")
    assert not hasattr(sd, "xyzzy") and hasattr(sd, "relu") and hasattr(sd, "output")


# -- unknown feed and output names ---------------------------------------------------------------
def test_misspelt_feed_suggests_a_placeholder(sd):
    with pytest.raises(nd.UnknownVariableError,
                       match=r"cannot feed 'inptu'.*did you mean 'input'\?.*placeholders: "
                             r"\['input', 'label'\]"):
        sd.output({"inptu": FEED["input"]}, "probs")


def test_misspelt_output_suggests_a_variable(sd):
    with pytest.raises(nd.UnknownVariableError, match=r"'prob'.*did you mean 'probs'\?"):
        sd.output(FEED, "prob")
    with pytest.raises(KeyError):  # UnknownVariableError is still a KeyError
        sd.output(FEED, "prob")


def test_feeding_a_non_placeholder_and_missing_feeds_still_say_so(sd):
    with pytest.raises(PlaceholderError, match="'w' is a VARIABLE, not a placeholder"):
        sd.output({"w": np.ones((3, 2), np.float32)}, "probs")
    with pytest.raises(PlaceholderError, match="placeholder 'input'.*needs a value"):
        sd.output({}, "probs")


# -- fit without data ----------------------------------------------------------------------------
@pytest.mark.parametrize("data, what", [(None, "data is required"),
                                        (5, "cannot read data of type int")])
def test_fit_without_usable_data(sd, data, what):
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["input"],
                                          label_mapping=["label"]))
    with pytest.raises(TrainingError, match=rf"fit: {what}; give \(features, labels\) arrays.*"
                                            r"dict \{placeholder name: array\}.*re-iterable"):
        sd.fit(data, 10)
    if data is not None:  # validation=None means no validation
        with pytest.raises(TrainingError, match=rf"fit \(validation\): {what}"):
            sd.fit((np.ones((4, 3), np.float32), np.ones((4, 2), np.float32)), 1,
                   validation=data)


def test_fit_without_config_names_the_config(sd):
    with pytest.raises(TrainingError, match="no training config"):
        sd.fit(None, 10)


# -- a traced array in a SameDiff graph ----------------------------------------------------------
def test_lazy_array_in_a_samediff_op_names_the_mix(sd):
    v = sd.get_variable("probs")
    with nd.graph_scope():
        lazy = nd.ones(2) * 2
        for call in (lambda: v + lazy, lambda: sd.math.add(v, lazy), lambda: nd.add(lazy, v)):
            with pytest.raises(GraphError, match=r"add: cannot use a LazyArray in a SameDiff "
                                                 r"graph: traced arrays \(graph_scope / "
                                                 r"nd.compile\) and graph variables cannot be mixed"):
                call()


# -- None for an op input ------------------------------------------------------------------------
def test_layer_norm_optional_bias_may_be_none():
    x = nd.create(np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32))
    gain = nd.ones(4)
    want = nd.layer_norm(x, gain).numpy()
    for out in (nd.layer_norm(x, gain, None), nd.layer_norm(x, gain, None, -1),
                nd.layer_norm(x, gain, bias=None), nd.layer_norm(x, gain, nd.zeros(4)),
                nd.layer_norm(x, gain=gain, bias=None, dims=-1)):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(nd.linear(x, nd.ones(4, 3), None).numpy(),
                               nd.linear(x, nd.ones(4, 3)).numpy())


def test_layer_norm_gain_is_required():
    x = nd.ones(2, 4)
    with pytest.raises(OpError, match=r"layer_norm: input 'gain' is required and cannot be None "
                                      r"\(inputs: x, gain, bias\?; those marked \? may be left out"):
        nd.layer_norm(x, None)
    with pytest.raises(OpError, match="layer_norm: input 'gain' is required"):
        nd.layer_norm(x, gain=None)
    with pytest.raises(OpError, match="layer_norm: missing input 'gain'"):
        nd.layer_norm(x)
    sd = nd.SameDiff.create()
    v = sd.placeholder("x", "float", -1, 4)
    with pytest.raises(OpError, match="layer_norm: input 'gain' is required"):
        sd.nn.layer_norm(v, None)
    assert sd.nn.layerNorm("ln", v, nd.ones(4), None, -1).shape == (-1, 4)


def test_none_as_an_input_is_named():
    with pytest.raises(OpError, match="an op input is None"):
        nd.exp(None)
    with pytest.raises(OpError, match="an op input is None"):
        nd.ones(2) + None
    with pytest.raises(OpError, match="create: cannot make an array from None"):
        nd.create(None)
    sd = nd.SameDiff.create()
    v = sd.placeholder("x", "float", 2)
    with pytest.raises(OpError, match="add: an input is None"):
        v + None
    with pytest.raises(OpError, match="exp: an input is None"):
        sd.math.exp(None)
