"""Frozen arrays (``samediff.kernels.frozen``): what kernels derive from a CONSTANT's value is
kept, and never outlives or misrepresents it -- a constant replaced with ``set_array``, thawed
into a VARIABLE or restored from a checkpoint gives the new value's results."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from samediff import SameDiff, compiler
from samediff.errors import OpError
from samediff.gradcheck import check_gradients
from samediff.kernels import frozen
from samediff.kernels import winograd as W

RNG = np.random.default_rng(7)


def _counting():
    calls = []

    def make(a):
        calls.append(1)
        return np.ascontiguousarray(a.T) * 2
    return make, calls


def test_derived_is_computed_once_per_frozen_array_and_view():
    w = frozen.freeze(RNG.standard_normal((4, 6)))
    make, calls = _counting()
    first = frozen.derived(w, "t", make)
    assert frozen.derived(w, "t", make) is first and len(calls) == 1
    np.testing.assert_array_equal(first, w.T * 2)
    half = frozen.derived(w[:, :3], "t", make)  # another view: its own entry
    np.testing.assert_array_equal(half, w[:, :3].T * 2)
    assert frozen.derived(w[:, :3], "t", make) is half and len(calls) == 2
    frozen.derived(w, "other", make)  # another thing derived: its own entry
    assert len(calls) == 3


def test_writeable_arrays_and_read_only_views_of_them_are_never_kept():
    w = RNG.standard_normal((4, 6))
    make, calls = _counting()
    frozen.derived(w, "t", make)
    frozen.derived(w, "t", make)
    view = w[:, :]
    view.flags.writeable = False  # read-only, but its base is not: w can still change it
    assert not frozen.is_frozen(view)
    frozen.derived(view, "t", make)
    assert len(calls) == 3
    ro = np.ones(3)
    ro.flags.writeable = False  # read-only all the way down counts
    assert frozen.is_frozen(ro) and frozen.is_frozen(ro[1:])


def test_entries_go_with_their_array_on_thaw_and_beyond_the_budget(monkeypatch):
    gc.collect()  # (earlier tests' garbage would drop its entries during the count below)
    before = frozen.held_bytes()
    w = frozen.freeze(RNG.standard_normal((64, 64)))
    frozen.derived(w, "t", lambda a: a * 2)
    assert frozen.held_bytes() == before + w.nbytes
    del w
    gc.collect()
    assert frozen.held_bytes() == before
    v = frozen.freeze(RNG.standard_normal((8, 8)))
    make, calls = _counting()
    frozen.derived(v, "t", make)
    frozen.thaw(v)  # writeable again: nothing derived survives
    assert not frozen.is_frozen(v)
    v[0, 0] = 1e6
    assert frozen.derived(v, "t", make)[0, 0] == 2e6 and len(calls) == 2
    monkeypatch.setattr(frozen, "BUDGET_BYTES", 3 * 512)
    frozen.clear()
    arrays = [frozen.freeze(RNG.standard_normal(64)) for _ in range(4)]  # 512 bytes each
    for a in arrays:
        frozen.derived(a, "t", lambda a: a + 1)
    assert frozen.held_bytes() == 3 * 512  # the least recently used went


def _conv_reference(x, w):
    """NCHW ``x`` (*) HWIO ``w``, stride 1, padding 1: every output a sum over its window."""
    kh, kw, c, o = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    n, _, h, wd = x.shape
    out = np.zeros((n, o, h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,co->nohw", xp[:, :, i:i + h, j:j + wd], w[i, j])
    return out


def _conv_graph(w_value):
    sd = SameDiff.create()
    x = sd.placeholder("x", "float32", 1, 64, 6, 6)
    w = sd.constant("w", w_value)
    sd.cnn.conv2d(x, w, padding=1).rename("y")
    return sd


@pytest.mark.parametrize("executor", ["compiled", "interpreter"])
def test_a_replaced_constant_gives_the_new_weights_results(executor):
    """A single image, 64 channels: the Winograd route with the filter transform kept."""
    compiler.set_executor(executor)  # (the autouse fixture restores it)
    assert W.applies((3, 3), (1, 1), (1, 1), 64, 64, np.float32, 36, 6, images=1, kept=True)
    x = RNG.standard_normal((1, 64, 6, 6)).astype(np.float32)
    w1, w2 = (RNG.standard_normal((3, 3, 64, 64)).astype(np.float32) for _ in range(2))
    sd = _conv_graph(w1)
    for w in (w1, w2, w1):
        sd.get_variable("w").set_array(w)
        for _ in range(2):
            got = sd.output({"x": x}, "y")["y"].numpy()
            want = _conv_reference(x.astype(np.float64), w.astype(np.float64))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


def test_constants_are_read_only_to_users_and_thawed_when_they_become_variables():
    w = RNG.standard_normal((3, 3, 64, 64)).astype(np.float32)
    sd = _conv_graph(w)
    arr = sd.get_variable("w").get_arr()
    with pytest.raises(OpError, match="read-only.*set_array"):
        arr.addi(1.0)
    np.testing.assert_array_equal(sd.get_variable("w").get_arr().numpy(), w)
    stored = sd.graph.var("w").value
    assert frozen.is_frozen(stored) and stored.flags.writeable  # (same Numba types as before)
    sd.convert_to_variable(sd.get_variable("w"))
    assert not frozen.is_frozen(sd.graph.var("w").value)
    sd.get_variable("w").get_arr().addi(1.0)  # a VARIABLE: trained in place
    np.testing.assert_array_equal(sd.get_variable("w").get_arr().numpy(), w + 1)


def test_a_checkpoint_restore_replaces_a_constant_instead_of_writing_it():
    from samediff.training.model import write_value
    sd = _conv_graph(np.zeros((3, 3, 64, 64), np.float32))
    old = sd.graph.var("w").value
    write_value(sd.graph, "w", np.ones((3, 3, 64, 64), np.float32))
    assert (old == 0).all() and (sd.graph.var("w").value == 1).all()
    assert frozen.is_frozen(sd.graph.var("w").value)


def test_gradient_check_with_respect_to_a_constant_perturbs_a_thawed_copy():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", 1, 64, 4, 4)
    w = sd.constant("w", RNG.standard_normal((3, 3, 64, 64)) * 0.1)
    (sd.cnn.conv2d(x, w, padding=1) ** 2).sum().mark_as_loss()
    before = sd.graph.var("w").value.copy()
    result = check_gradients(sd, {"x": RNG.standard_normal((1, 64, 4, 4))}, wrt=["w"],
                             max_per_variable=6)
    assert result.passed, str(result)
    np.testing.assert_array_equal(sd.graph.var("w").value, before)
