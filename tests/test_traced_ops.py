"""Traced against eager for every op of the table.

For every sample of ``op_samples.SAMPLES`` (every op of ``REGISTRY``) and every dtype it lists,
``samediff.bind`` is called once eagerly and once inside ``nd.graph_scope()``. While tracing,
the ``LazyArray`` outputs must already carry the eager result's shape and dtype (inferred
metadata) and refuse data access; after the scope they must equal the eager result exactly
(random ops: the same numbers, the seed being reset before each run).

Test ids read ``<op>-<sample index>-<dtype>``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nd4py as nd
from samediff import bind, create, random_state
from samediff.errors import TracingError
from samediff.ops import REGISTRY
from tracing import LazyArray

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES, cast_inputs, run_attrs
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES, cast_inputs, run_attrs

SEED = 4321


def _cases() -> list:
    out = []
    for name in sorted(REGISTRY):
        for i, sample in enumerate(SAMPLES.get(name, ())):
            out.extend(pytest.param(name, i, dt, id=f"{name}-{i}-{dt}") for dt in sample.dtypes)
    return out


CASES = _cases()


def _as_inputs(values: list) -> list:
    """numpy arrays become NDArrays (same dtype, zero copy); Python scalars stay weak."""
    return [create(v) if isinstance(v, np.ndarray) else v for v in values]


def _items(result: Any) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


@pytest.fixture(autouse=True)
def _fresh_cache():
    nd.clear_cache()
    yield
    nd.clear_cache()


def test_every_op_of_the_table_is_traced():
    untraced = sorted(n for n in REGISTRY if not SAMPLES.get(n))
    assert not untraced, f"ops with no traced-vs-eager case (no samples): {untraced}"


@pytest.mark.parametrize("name, i, dtype", CASES)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # edge samples: log2(-1) is NaN, as in numpy
def test_traced_equals_eager(name: str, i: int, dtype: str) -> None:
    op = REGISTRY[name]
    sample = SAMPLES[name][i]
    values, attrs = cast_inputs(sample, dtype), run_attrs(sample, dtype)

    if op.random:
        random_state.set_seed(SEED)
    eager = _items(bind(op, _as_inputs(values), dict(attrs)))
    assert all(type(e) is nd.NDArray for e in eager), "eager results must be plain NDArrays"

    if op.random:
        random_state.set_seed(SEED)
    with nd.graph_scope() as scope:
        traced = _items(bind(op, _as_inputs(values), dict(attrs)))
        assert len(traced) == len(eager), f"{name}: {len(traced)} traced outputs, {len(eager)} eager"
        for k, (t, e) in enumerate(zip(traced, eager)):
            assert isinstance(t, LazyArray), f"{name}[{k}]: traced result is {type(t).__name__}"
            assert not t.is_materialized
            # value_shaped ops (dynamic_partition): a -1 size is the one the run will give
            shape = tuple(d if d != -1 or not op.value_shaped else ed
                          for d, ed in zip(t.shape, e.shape))
            assert shape == e.shape, f"{name}[{k}]: traced shape {t.shape}, eager {e.shape}"
            assert t.dtype == e.dtype, f"{name}[{k}]: traced dtype {t.dtype}, eager {e.dtype}"
            assert t.rank == e.rank and (op.value_shaped or t.length == e.length)
        with pytest.raises(TracingError, match=name):
            np.asarray(traced[0])

    assert scope.plan is not None
    for k, (t, e) in enumerate(zip(traced, eager)):
        assert t.is_materialized, f"{name}[{k}] was not materialized when the scope ended"
        got, want = t.numpy(), e.numpy()
        assert got.dtype == want.dtype, f"{name}[{k}]: dtype {got.dtype}, eager {want.dtype}"
        assert got.shape == want.shape, f"{name}[{k}]: shape {got.shape}, eager {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=f"{name}[{k}] traced vs eager")
