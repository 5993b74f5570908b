"""ONNX's control-flow operators expressed with the ops here, as the ONNX importer will map
them — no kernels of their own — each against a numpy reference written from the ONNX
operator spec:

* ``Loop`` (trip count ``M`` given at run time, a loop condition, carried values, scan
  outputs): one ``while_loop`` node whose carry is ``(i, cond, v...)``, ``M`` a captured input
  read by its condition body, the scan outputs its per-step outputs;
* ``Scan`` with per-input axes and directions: ``permute`` / ``reverse`` around one ``scan``;
* ``If`` whose branches read outer-scope values: ``cond`` with captures."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.ir import Graph, VariableType
from samediff.ops import TensorType
from samediff.recorder import GraphRecorder

F64, I64, BOOL = np.dtype("float64"), np.dtype("int64"), np.dtype("bool")


def _graph(fn, *types):
    rec = GraphRecorder(Graph())
    xs = [rec.add(VariableType.PLACEHOLDER, TensorType(shape, dtype), f"x{k}")
          for k, (shape, dtype) in enumerate(types)]
    outs = fn(*xs)
    rec.graph.set_outputs(*[o.name for o in outs])
    return rec.graph.freeze()


def onnx_loop_ref(m, cond, v):
    """ONNX Loop: ``for i in range(M) while cond: cond, v, scan = body(i, cond, v)``, with
    the body below: cond <- sum(v) < 10, v <- v + i, scan output v * 2."""
    i, scans = 0, []
    while (m is None or i < m) and cond:
        cond, v, scan = bool(v.sum() < 10.0), v + i, v * 2.0
        scans.append(scan)
        i += 1
    return v, (np.stack(scans) if scans else np.zeros((0, *v.shape)))


def onnx_loop(sd, m, cond, v):
    """The importer's mapping: carry (i, cond, v), M captured (absent: no bound)."""
    carry = [((), I64), ((), BOOL), ((3,), F64)]
    bound = [((), I64)] if m is not None else []
    keep_going = _graph(lambda i, c, v, *m: ((i < m[0]) & c,) if m else (c,), *carry, *bound)
    body = _graph(lambda i, c, v, *m: (i + 1, v.sum() < 10.0, v + i.cast("float64"), v * 2.0),
                  *carry, *bound)
    i0 = sd.constant("i0", np.array(0, np.int64))
    return nd.while_loop([i0, cond, v, *([m] if m is not None else [])],
                         cond=keep_going, body=body, num_carry=3)


@pytest.mark.parametrize("m, cond", [(5, True), (2, True), (0, True), (None, True),
                                     (5, False)])
def test_onnx_loop_with_a_run_time_trip_count_and_scan_outputs(m, cond):
    sd = SameDiff.create()
    v = sd.placeholder("v", np.float64, 3)
    c = sd.placeholder("cond", np.bool_)
    m_ph = sd.placeholder("M", np.int64) if m is not None else None
    _, _, v_out, scans = onnx_loop(sd, m_ph, c, v)
    feeds = {"v": np.array([0.5, 1.0, 1.5]), "cond": np.array(cond)}
    if m is not None:
        feeds["M"] = np.array(m, np.int64)
    got = sd.output(feeds, v_out.name, scans.name)
    want_v, want_scans = onnx_loop_ref(m, cond, feeds["v"])
    np.testing.assert_array_equal(got[v_out.name].numpy(), want_v)
    np.testing.assert_array_equal(got[scans.name].numpy(), want_scans)


def onnx_scan_ref(state, inputs, axes, directions, out_axis, out_direction):
    """ONNX Scan: iterate along each input's axis (reversed where its direction is 1); the
    body: state <- state + x0 * x1, output state * 3, stacked along ``out_axis``."""
    rows = [np.moveaxis(x, a, 0)[::-1 if d else 1] for x, a, d in zip(inputs, axes, directions)]
    outs = []
    for x0, x1 in zip(*rows):
        state = state + x0 * x1
        outs.append(state * 3.0)
    stacked = np.stack(outs)[::-1 if out_direction else 1]
    return state, np.moveaxis(stacked, 0, out_axis)


def onnx_scan(state, inputs, axes, directions, out_axis, out_direction):
    """The mapping: each input permuted so its scan axis leads and reversed where its
    direction is 1; one scan; its stacked output reversed and moved to ``out_axis``."""
    rows = []
    for x, a, d in zip(inputs, axes, directions):
        order = [a] + [k for k in range(len(x.shape)) if k != a]
        x = x.permute(*order)
        rows.append(nd.reverse(x, dims=(0,)) if d else x)
    state, ys = nd.scan(lambda s, r: (s + r[0] * r[1], (s + r[0] * r[1]) * 3.0), state,
                        tuple(rows))
    if out_direction:
        ys = nd.reverse(ys, dims=(0,))
    order = list(range(1, len(ys.shape)))
    order.insert(out_axis, 0)
    return state, ys.permute(*order)


@pytest.mark.parametrize("axes, directions, out_axis, out_direction",
                         [((0, 0), (0, 0), 0, 0), ((1, 0), (1, 0), 1, 0),
                          ((0, 1), (0, 1), 1, 1)])
def test_onnx_scan_with_per_input_axes_and_directions(axes, directions, out_axis,
                                                      out_direction):
    rng = np.random.default_rng(31)
    state = rng.normal(size=4)
    shapes = [(5, 4) if a == 0 else (4, 5) for a in axes]
    inputs = [rng.normal(size=s) for s in shapes]
    want = onnx_scan_ref(state, inputs, axes, directions, out_axis, out_direction)
    f = nd.compile(lambda s, a, b: onnx_scan(s, [a, b], axes, directions, out_axis,
                                             out_direction))
    got = f(*[nd.create(x) for x in (state, *inputs)])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-13)


def test_onnx_if_reading_outer_scope_values():
    """ONNX If's branches read outer values by name (implicit inputs): here they are
    captures of the cond node, so gradients reach them."""
    sd = SameDiff.create()
    x = sd.placeholder("x", np.float64, 3)
    outer = sd.var("outer", np.array([1.0, 2.0, 3.0]))
    y = nd.cond(x.sum() > 0, lambda: (x * outer).sum(), lambda: (outer - x).sum())
    y.mark_as_loss()
    for feed, want, grad in ((np.ones(3), 6.0, np.ones(3)), (-np.ones(3), 9.0, np.ones(3))):
        assert sd.output({"x": feed}, y.name)[y.name].numpy() == want
        np.testing.assert_array_equal(sd.calculate_gradients({"x": feed}, "outer")["outer"]
                                      .numpy(), grad)
