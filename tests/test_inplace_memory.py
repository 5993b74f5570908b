"""In-place ops write in place (issue 21): ``x.addi(y)`` computes straight into ``x``'s buffer
(``OpDef.into``: numpy's ``out=``), eagerly and in graph_scope plans, so peak memory does not
grow by the array's size. Peaks are measured with tracemalloc, which sees numpy's buffers."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import NdDTypeError, OpError
from samediff.frontends import ND4J
from samediff.ops import REGISTRY

SHAPE = (1024, 2048)  # 8 MiB of float32


def _peak_fraction(fn, nbytes: int) -> float:
    """Peak traced memory during ``fn()`` above what was allocated before, over ``nbytes``."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return (tracemalloc.get_traced_memory()[1] - base) / nbytes
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def operands():
    return {"scalar": 3.0, "array": nd.create(np.full(SHAPE, 2.0, np.float32)),
            "row": nd.create(np.linspace(1, 2, SHAPE[1], dtype=np.float32)),
            "float64 array": nd.create(np.full(SHAPE, 2.0))}  # cast in numpy's small buffers


UPDATES = {"addi": lambda x, y: x.addi(y), "subi": lambda x, y: x.subi(y),
           "muli": lambda x, y: x.muli(y), "divi": lambda x, y: x.divi(y),
           "rsubi": lambda x, y: x.rsubi(y), "rdivi": lambda x, y: x.rdivi(y),
           "+=": lambda x, y: x.__iadd__(y), "-=": lambda x, y: x.__isub__(y),
           "*=": lambda x, y: x.__imul__(y), "/=": lambda x, y: x.__itruediv__(y),
           "**=": lambda x, y: x.__ipow__(y), "%=": lambda x, y: x.__imod__(y)}


CASES = [(name, operand) for name in UPDATES for operand in ("scalar", "array")] + [
    (name, operand) for name in ("addi", "divi") for operand in ("row", "float64 array")]


@pytest.mark.parametrize("name, operand", CASES, ids=[f"{n}-{o}" for n, o in CASES])
def test_eager_inplace_updates_allocate_no_temporary(name, operand, operands):
    update = UPDATES[name]
    y = operands[operand]
    x = nd.create(np.ones(SHAPE, np.float32))
    buffer = x.numpy()
    expected = update(nd.create(np.ones(SHAPE, np.float32)), y).numpy()
    x.assign(1.0)
    assert _peak_fraction(lambda: update(x, y), x.nbytes) < 0.05
    assert x.numpy() is buffer
    np.testing.assert_array_equal(x.numpy(), expected)


def test_views_write_through_without_a_temporary():
    x = nd.create(np.zeros(SHAPE, np.float32))
    assert _peak_fraction(lambda: x[0:512].addi(1.0), x.nbytes) < 0.05
    assert _peak_fraction(lambda: x[:, ::2].muli(3.0), x.nbytes) < 0.05
    assert x.numpy()[:512, 0] .tolist() == [3.0] * 512 and x.numpy()[:512, 1].tolist() == [1.0] * 512
    assert x.numpy()[512:].sum() == 0.0


@pytest.mark.parametrize("target, other", [
    (np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(3, dtype=np.float64)),  # rounded
    (np.arange(6, dtype=np.int32).reshape(2, 3), np.int64(7)),                         # same kind
    (np.arange(6, dtype=np.int64).reshape(2, 3), 5),
    (np.array([True, False]), True),
    (np.float16(1.5) * np.ones((2, 2), np.float16), 1e-3),
])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "rsub", "maximum"])
def test_inplace_equals_the_op_cast_into_the_target(target, other, name):
    x = nd.create(target.copy())
    method = getattr(x, name + "i", None) or (lambda y: x._inplace(REGISTRY[name], [x, y], {},
                                                                   False))
    try:
        expected = getattr(nd.create(target), name)(other).numpy().astype(target.dtype)
    except OpError as exc:  # e.g. bool - bool: the in-place form refuses it the same way
        with pytest.raises(type(exc), match=name):
            method(other)
        np.testing.assert_array_equal(x.numpy(), target)
        return
    method(other)
    np.testing.assert_array_equal(x.numpy(), expected)


def test_overlapping_operands_give_numpys_no_overlap_result():
    a = np.arange(9.0).reshape(3, 3)
    x = nd.create(a.copy())
    x.addi(x.transpose())
    np.testing.assert_array_equal(x.numpy(), a + a.T)
    y = nd.create(np.arange(5.0))
    y[1:].subi(y[:-1])
    np.testing.assert_array_equal(y.numpy(), [0.0, 1.0, 1.0, 1.0, 1.0])


def test_refused_updates_are_named_and_leave_the_array_unchanged():
    ints = nd.create(np.arange(4))
    with pytest.raises(NdDTypeError, match=r"addi: cannot write a float64 result into a int64"):
        ints.addi(1.5)
    with pytest.raises(NdDTypeError, match="divi"):
        ints.divi(2)  # true division gives floats; numpy's out= refuses them too
    small = nd.create(np.ones(3, np.float32))
    with pytest.raises(OpError, match=r"muli: in-place result has shape \(2, 3\) but the target "
                                      r"has shape \(3,\)"):
        small.muli(nd.ones(2, 3))
    with pytest.raises(OpError, match="add.*cannot be broadcast"):
        small.addi(nd.ones(4))
    with pytest.raises(OpError, match="read-only.*dup"):
        nd.create(np.broadcast_to(np.ones(3, np.float32), (2, 3))).addi(1.0)
    with pytest.raises(OpError, match="add.*out of bounds for int8"):
        nd.create(np.ones(2, np.int8)).addi(1000)
    assert ints.numpy().tolist() == [0, 1, 2, 3] and small.numpy().tolist() == [1.0] * 3


def test_every_inplace_method_has_a_write_into_implementation():
    """The table's fact, not a name list: every op with an ``<op>i`` method or an augmented
    assignment writes into its target (``//=`` keeps a temporary: floor_div's infinity fix-up)."""
    missing = [n for n in (*ND4J.inplace, "pow", "floor_mod") if REGISTRY[n].into is None]
    assert missing == []


@pytest.mark.compiled
def test_graph_scope_plans_write_inplace_updates_into_the_target():
    x = nd.create(np.ones(SHAPE, np.float32))
    buffer = x.numpy()

    def update():
        with nd.graph_scope():  # the kernel of test_compiled_ops' add sample (2-D + scalar)
            x.addi(2.0)
    update()  # plan built (and its kernel compiled) outside the measurement
    assert _peak_fraction(update, x.nbytes) < 0.05
    assert x.numpy() is buffer and np.all(x.numpy() == 5.0)


def test_graph_scope_inplace_keeps_earlier_reads_of_the_old_value():
    x = nd.create(np.arange(6, dtype=np.float32).reshape(2, 3))
    with nd.graph_scope():
        before = x * 2.0
        x.addi(1.0)
        after = x * 2.0
    np.testing.assert_array_equal(before.numpy(), np.arange(6).reshape(2, 3) * 2.0)
    np.testing.assert_array_equal(after.numpy(), (np.arange(6).reshape(2, 3) + 1.0) * 2.0)
