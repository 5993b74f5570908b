"""One parametrized suite over every op of the table (STYLE §10).

For every sample of ``op_samples.SAMPLES`` and every dtype it lists:

* eager (``samediff.bind`` and the public ``nd4py`` function) against the independent reference,
  and the result dtype against the sample's stated dtype rule;
* the inferred ``TensorType`` against the eager result;
* a SameDiff graph (one placeholder per array input) against eager, with declared shapes and
  with the leading dim of every placeholder unknown (-1);
* random ops: reproducible under ``random_state.set_seed``, eagerly and in a graph.

Test ids read ``<op>-<sample index>-<dtype>``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, bind, random_state
from samediff.array import type_of
from samediff.errors import OpError
from samediff.ops import REGISTRY, OpDef

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import (DEFAULT, SAMPLES, Sample, cast_inputs, expected_dtype,
                            reference_inputs, run_attrs)
except ImportError:  # ... or tests/ became one
    from tests.op_samples import (DEFAULT, SAMPLES, Sample, cast_inputs, expected_dtype,
                                  reference_inputs, run_attrs)

SEED = 1234
#: edge-value samples (log2 of 0 and of negatives...) warn as numpy does; the values are checked
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                                        "ignore:invalid value:RuntimeWarning",
                                        "ignore:overflow:RuntimeWarning")

#: tolerances by result dtype; a sample's rtol/atol override the float32 ones
_DEFAULT_TOL = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-10, 1e-12),
                np.dtype(np.float16): (1e-3, 1e-3)}


def _cases(keep=lambda op, sample: True) -> list:
    out = []
    for name, samples in SAMPLES.items():
        op = REGISTRY.get(name)
        if op is None:
            continue  # reported by test_every_op_has_samples
        for i, sample in enumerate(samples):
            if keep(op, sample):
                out.extend(pytest.param(name, i, dt, id=f"{name}-{i}-{dt}") for dt in sample.dtypes)
    return out


ALL = _cases()
RANDOM = _cases(lambda op, s: op.random)
DYNAMIC = _cases(lambda op, s: not op.random and any(
    isinstance(x, np.ndarray) and x.ndim >= 1 for x in s.inputs))


def _setup(name: str, i: int, dtype: str) -> tuple[OpDef, Sample, list, dict]:
    sample = SAMPLES[name][i]
    return REGISTRY[name], sample, cast_inputs(sample, dtype), run_attrs(sample, dtype)


def _static_shape(op: OpDef, static: tuple, runtime: tuple) -> tuple:
    """``static`` as the run-time shape it promises: for an op whose output sizes depend on
    input values (``value_shaped``), an unknown (-1) size stands for the size that ran."""
    if op.value_shaped and len(static) == len(runtime):
        return tuple(r if s == -1 else s for s, r in zip(static, runtime))
    return tuple(static)


def _outs(result: Any) -> tuple[np.ndarray, ...]:
    """Results (one array or a tuple of them) as a tuple of numpy arrays."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(np.asarray(r) for r in items)


def _eager(op: OpDef, inputs: list, attrs: dict) -> tuple[np.ndarray, ...]:
    if op.random:
        random_state.set_seed(SEED)
    return _outs(bind(op, inputs, attrs))


def _public(op: OpDef, inputs: list, attrs: dict) -> Any:
    """The user-facing nd4py function of ``op``, called the way a user would."""
    attrs = dict(attrs)
    if op.random and not op.inputs:
        shape = attrs.pop("shape")
        return getattr(nd.random, op.name)(*shape, **attrs)
    if op.name in ("zeros", "ones"):  # nd.zeros(*shape, dtype=)
        return getattr(nd, op.name)(attrs["shape"], dtype=attrs.get("dtype"))
    fn = getattr(nd, op.name)
    if not callable(fn):  # nd.fft is the namespace: its op is nd.fft.fft
        fn = getattr(fn, op.name)
    if op.variadic:
        return fn(list(inputs), **attrs)
    # optional inputs by keyword: positionally only array-likes bind to them (frontends/nd4j.py)
    required = [x for spec, x in zip(op.inputs, inputs) if not spec.endswith("?")]
    optional = {spec[:-1]: x for spec, x in zip(op.inputs, inputs) if spec.endswith("?")}
    return fn(*required, **optional, **attrs)


def _assert_close(got: np.ndarray, want: Any, sample: Sample, what: str) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, reference {want.shape}"
    if got.dtype.kind in "biuT":  # (T: utf8 strings, compared exactly too)
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    real = np.finfo(got.dtype).dtype  # a complex result: the tolerances of its parts
    rtol, atol = _DEFAULT_TOL[real]
    if real != np.float64:
        rtol = sample.rtol if sample.rtol is not None else rtol
        atol = sample.atol if sample.atol is not None else atol
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=rtol, atol=atol,
                               err_msg=what)


def _assert_same(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"{what}[{k}]: dtype {g.dtype}, expected {w.dtype}"
        np.testing.assert_array_equal(g, w, err_msg=f"{what}[{k}]")


# --------------------------------------------------------------------------------------------
# The table itself
# --------------------------------------------------------------------------------------------


def test_every_op_has_samples():
    # user-defined ops (samediff.udf) join the table at run time; the built-in ones need samples
    missing = sorted(n for n, op in REGISTRY.items() if op.namespace != "udf" and n not in SAMPLES)
    unknown = sorted(set(SAMPLES) - set(REGISTRY))
    counts = sorted(n for n, s in SAMPLES.items() if not 1 <= len(s) <= 4)
    assert not missing, f"ops without samples in tests/op_samples.py: {missing}"
    assert not unknown, f"samples name unknown ops: {unknown}"
    assert not counts, f"ops need 1-4 samples: {counts}"


def test_samples_are_well_formed():
    problems = []
    for name, samples in SAMPLES.items():
        op = REGISTRY.get(name)
        for i, s in enumerate(samples):
            where = f"{name}[{i}]"
            if op is not None and op.random != (s.reference is None):
                problems.append(f"{where}: random ops need reference=None, others a reference")
            if op is not None and op.random and s.check is None:
                problems.append(f"{where}: a random op needs a check")
            for dt in s.dtypes:
                if dt != DEFAULT:
                    np.dtype(dt)
                if dt.startswith(("int", "uint", "bool")):
                    for x in s.inputs:
                        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and not np.all(
                                x == np.round(x)):
                            problems.append(f"{where}: runs in {dt} but has non-integral inputs")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# Eager vs reference, inference vs eager
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,i,dtype", ALL)
def test_eager_matches_reference(name, i, dtype):
    op, sample, inputs, attrs = _setup(name, i, dtype)
    got = _eager(op, inputs, attrs)
    for k, g in enumerate(got):
        want_dtype = expected_dtype(sample, dtype, k)
        assert g.dtype == want_dtype, f"{name}: result dtype {g.dtype}, expected {want_dtype}"
    if op.random:
        sample.check(got[0], attrs)
    else:
        full = vars(op.make_attrs(attrs))
        want = _outs(sample.reference(*reference_inputs(inputs), **full))
        assert len(got) == len(want), f"{name}: {len(got)} outputs, reference {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, sample, f"{name} output {k}")
    # the public function is the same op: identical result
    if op.random:
        random_state.set_seed(SEED)
    _assert_same(_outs(_public(op, inputs, attrs)), got, f"nd4py.{name}")


@pytest.mark.parametrize("name,i,dtype", ALL)
def test_view_flag_tells_the_truth(name, i, dtype):
    """Tracing refuses in-place updates through views by the op's ``view`` flag, so an op whose
    eager result can share its input's buffer must declare it."""
    op, _, inputs, attrs = _setup(name, i, dtype)
    if not inputs or not isinstance(inputs[0], np.ndarray) or op.random:
        return
    shares = any(np.shares_memory(g, inputs[0]) for g in _eager(op, inputs, attrs) if g.size)
    assert not shares or op.view, f"{name}: the eager result is a view of input 0; set view=True"


@pytest.mark.parametrize("name,i,dtype", ALL)
def test_inferred_type_matches_eager(name, i, dtype):
    op, sample, inputs, attrs = _setup(name, i, dtype)
    types = [type_of(x) for x in inputs]
    inferred = op.infer_types(types, op.make_attrs(attrs))
    got = _eager(op, inputs, attrs)
    assert len(inferred) == len(got), f"{name}: inferred {len(inferred)} outputs, eager {len(got)}"
    for k, (t, g) in enumerate(zip(inferred, got)):
        assert (_static_shape(op, t.shape, g.shape), t.dtype) == (g.shape, g.dtype), (
            f"{name} output {k}: inferred {t}, eager {g.dtype}{list(g.shape)}")


# --------------------------------------------------------------------------------------------
# SameDiff vs eager
# --------------------------------------------------------------------------------------------


def _graph(op: OpDef, inputs: list, attrs: dict, leading_unknown: bool = False):
    """A SameDiff with one placeholder per array input (Python scalars stay weak literals)."""
    sd = SameDiff.create()
    args, feeds = [], {}
    for k, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            shape = ((-1,) + x.shape[1:]) if leading_unknown and x.ndim else x.shape
            ph = sd.placeholder(f"in{k}", x.dtype, *shape)
            args.append(ph)
            feeds[ph.name] = x
        else:
            args.append(x)
    out = sd._record(op, args, attrs)
    return sd, (out if isinstance(out, tuple) else (out,)), feeds


def _run(sd: SameDiff, outs: tuple, feeds: dict, random: bool) -> tuple[np.ndarray, ...]:
    if random:
        random_state.set_seed(SEED)
    result = sd.output(feeds, *[o.name for o in outs])
    return tuple(result[o.name].numpy() for o in outs)


@pytest.mark.parametrize("name,i,dtype", ALL)
def test_samediff_matches_eager(name, i, dtype):
    op, sample, inputs, attrs = _setup(name, i, dtype)
    want = _eager(op, inputs, attrs)
    sd, outs, feeds = _graph(op, inputs, attrs)
    for v, w in zip(outs, want):
        assert (_static_shape(op, v.shape, w.shape), v.dtype) == (w.shape, w.dtype), (
            f"{name}: variable {v!r} vs eager")
    _assert_same(_run(sd, outs, feeds, op.random), want, f"SameDiff {name}")


@pytest.mark.parametrize("name,i,dtype", DYNAMIC)
def test_samediff_unknown_leading_dim(name, i, dtype):
    op, sample, inputs, attrs = _setup(name, i, dtype)
    if sample.dynamic_refuses:
        with pytest.raises(OpError, match=name):
            _graph(op, inputs, attrs, leading_unknown=True)
        return
    want = _eager(op, inputs, attrs)
    sd, outs, feeds = _graph(op, inputs, attrs, leading_unknown=True)
    assert len(outs) == len(want)
    for v, w in zip(outs, want):
        compatible = len(v.shape) == w.ndim and all(d in (-1, a) for d, a in zip(v.shape, w.shape))
        assert compatible and v.dtype == w.dtype, (f"{name}: inferred {v.dtype}{list(v.shape)} "
                                                   f"does not fit eager {w.dtype}{list(w.shape)}")
    _assert_same(_run(sd, outs, feeds, False), want, f"SameDiff(-1) {name}")


# --------------------------------------------------------------------------------------------
# Random ops: reproducibility
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,i,dtype", RANDOM)
def test_random_reproducible(name, i, dtype):
    op, sample, inputs, attrs = _setup(name, i, dtype)
    random_state.set_seed(7)
    first, second = _outs(bind(op, inputs, attrs)), _outs(bind(op, inputs, attrs))
    random_state.set_seed(7)
    _assert_same(_outs(bind(op, inputs, attrs)), first, f"{name} after set_seed")
    if first[0].size >= 100:
        assert not np.array_equal(first[0], second[0]), f"{name}: two draws are identical"

    sd, outs, feeds = _graph(op, inputs, attrs)
    random_state.set_seed(7)
    g1 = sd.output(feeds, outs[0].name)[outs[0].name].numpy()
    g2 = sd.output(feeds, outs[0].name)[outs[0].name].numpy()
    random_state.set_seed(7)
    g3 = sd.output(feeds, outs[0].name)[outs[0].name].numpy()
    _assert_same((g3,), (g1,), f"SameDiff {name} after set_seed")
    _assert_same((g1,), first, f"SameDiff {name} vs eager")  # one stream for both
    if g1.size >= 100:
        assert not np.array_equal(g1, g2), f"SameDiff {name}: two runs drew the same numbers"
