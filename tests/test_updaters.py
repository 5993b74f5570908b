"""Updaters and schedules: every updater against an independent numpy float64 reference of its
documented formula, driven eagerly (NDArray, float64 and float32) and through a SameDiff graph
(placeholders for param/grad/state/hyper, ``sd.output`` step by step, as the trainer does);
convergence on a quadratic; schedule values; JSON round trips; errors."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import TrainingError
from samediff.training.schedules import (CosineSchedule, CycleSchedule, ExponentialSchedule,
                                         FixedSchedule, InverseSchedule, MapSchedule,
                                         PolySchedule, RampSchedule, Schedule, ScheduleType,
                                         SigmoidSchedule, StepSchedule)
from samediff.training.updaters import (AMSGrad, AdaDelta, AdaGrad, AdaMax, Adam, AdamW, Momentum,
                                        Nadam, Nesterovs, NoOp, RmsProp, Sgd, UPDATERS, Updater)

IT = ScheduleType.ITERATION
STEPS = 5
SHAPE = (3, 4)


# -- numpy float64 references, written from the formulas (t = it + 1) --------------------------
def r_sgd(p, g, s, it, lr):
    return p - lr * g, s


def r_momentum(mu):
    def f(p, g, s, it, lr):
        v = mu * s.get("v", 0.0) + g
        return p - lr * v, {"v": v}
    return f


def r_nesterovs(mu):
    def f(p, g, s, it, lr):
        v_prev = s.get("v", np.zeros_like(p))
        v = mu * v_prev - lr * g
        return p - mu * v_prev + (1 + mu) * v, {"v": v}
    return f


def r_adam(b1, b2, eps, wd=0.0, amsgrad=False):
    def f(p, g, s, it, lr):
        t = it + 1
        m = b1 * s.get("m", 0.0) + (1 - b1) * g
        v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        vh = np.maximum(s.get("vh", 0.0), v) if amsgrad else v
        alpha = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return p - alpha * m / (np.sqrt(vh) + eps) - lr * wd * p, {"m": m, "v": v, "vh": vh}
    return f


def r_adamax(b1, b2):
    def f(p, g, s, it, lr):
        m = b1 * s.get("m", 0.0) + (1 - b1) * g
        u = np.maximum(b2 * s.get("u", 0.0), np.abs(g)) + 1e-32
        return p - lr / (1 - b1 ** (it + 1)) * m / u, {"m": m, "u": u}
    return f


def r_nadam(b1, b2, eps):
    def f(p, g, s, it, lr):
        m = b1 * s.get("m", 0.0) + (1 - b1) * g
        v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        m_bar = (b1 * m + (1 - b1) * g) / (1 - b1 ** (it + 1))
        return p - lr * m_bar / (np.sqrt(v) + eps), {"m": m, "v": v}
    return f


def r_adagrad(eps):
    def f(p, g, s, it, lr):
        h = s.get("h", eps) + g * g  # ND4J starts the history at epsilon
        return p - lr * g / (np.sqrt(h) + eps), {"h": h}
    return f


def r_rmsprop(decay, eps):
    def f(p, g, s, it, lr):
        c = decay * s.get("c", eps) + (1 - decay) * g * g  # ND4J starts the cache at epsilon
        return p - lr * g / (np.sqrt(c) + eps), {"c": c}
    return f


def r_adadelta(rho, eps):
    def f(p, g, s, it, lr):
        msg = rho * s.get("msg", 0.0) + (1 - rho) * g * g
        msdx = s.get("msdx", 0.0)
        d = g * np.sqrt(msdx + eps) / np.sqrt(msg + eps)
        return p - lr * d, {"msg": msg, "msdx": rho * msdx + (1 - rho) * d * d}
    return f


def r_noop(p, g, s, it, lr):
    return p, s


# (id, updater, reference, lr(it)) — non-default hyper-parameters so each one matters
CASES = [
    ("sgd", Sgd(0.1), r_sgd, lambda it: 0.1),
    ("momentum", Momentum(0.1, 0.8), r_momentum(0.8), lambda it: 0.1),
    ("nesterovs", Nesterovs(0.1, 0.7), r_nesterovs(0.7), lambda it: 0.1),
    ("adam", Adam(0.05, 0.8, 0.95, 1e-6), r_adam(0.8, 0.95, 1e-6), lambda it: 0.05),
    ("adamw", AdamW(0.05, 0.8, 0.95, 1e-6, weight_decay=0.1),
     r_adam(0.8, 0.95, 1e-6, wd=0.1), lambda it: 0.05),
    ("adamax", AdaMax(0.05, 0.8, 0.95), r_adamax(0.8, 0.95), lambda it: 0.05),
    ("nadam", Nadam(0.05, 0.8, 0.95, 1e-6), r_nadam(0.8, 0.95, 1e-6), lambda it: 0.05),
    ("amsgrad", AMSGrad(0.05, 0.8, 0.95, 1e-6), r_adam(0.8, 0.95, 1e-6, amsgrad=True),
     lambda it: 0.05),
    ("adagrad", AdaGrad(0.3, 1e-3), r_adagrad(1e-3), lambda it: 0.3),
    ("rmsprop", RmsProp(0.05, 0.7, 1e-4), r_rmsprop(0.7, 1e-4), lambda it: 0.05),
    ("adadelta", AdaDelta(0.8, 1e-3), r_adadelta(0.8, 1e-3), lambda it: 1.0),
    ("adadelta_lr", AdaDelta(0.8, 1e-3, learning_rate=0.5), r_adadelta(0.8, 1e-3),
     lambda it: 0.5),
    ("noop", NoOp(), r_noop, lambda it: 0.0),
    ("adam_sched", Adam(ExponentialSchedule(IT, 0.1, 0.5)), r_adam(0.9, 0.999, 1e-8),
     lambda it: 0.1 * 0.5 ** it),
    ("nesterovs_sched", Nesterovs(StepSchedule(IT, 0.2, 0.5, 2), MapSchedule(IT, {0: 0.5, 3: 0.9})),
     None, None),
]
IDS = [c[0] for c in CASES]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=SHAPE), [rng.normal(size=SHAPE) for _ in range(STEPS)]


def _reference(case):
    name, upd, ref, lr = case
    p0, grads = _data()
    if ref is None:  # Nesterovs with both schedules: momentum changes at step 3
        def ref(p, g, s, it, lr):
            return r_nesterovs(0.5 if it < 3 else 0.9)(p, g, s, it, lr)

        def lr(it):
            return 0.2 * 0.5 ** (it // 2)
    p, s, out = p0, {}, []
    for it, g in enumerate(grads):
        p, s = ref(p, g, s, it, lr(it))
        out.append(p)
    return out


def _init_state(upd, dtype):
    return {k: np.full(SHAPE, upd.state_init()[k], dtype) for k in upd.state_names()}


def run_eager(upd, dtype, hyper_as=float):
    p0, grads = _data()
    p = nd.create(p0, dtype=dtype)
    state = {k: nd.create(v) for k, v in _init_state(upd, dtype).items()}
    out = []
    for it, g in enumerate(grads):
        hyper = {k: hyper_as(v) for k, v in upd.hyper(it, 0).items()}
        p, state = upd.update(p, nd.create(g, dtype=dtype), state, hyper)
        assert set(state) == set(upd.state_names())
        out.append(p.numpy())
    return out


def run_graph(upd, dtype, hyper_dtype):
    """Exactly how the trainer uses an updater: build once on placeholders, run step by step."""
    p0, grads = _data()
    sd = SameDiff.create()
    p = sd.placeholder("p", dtype, *SHAPE)
    g = sd.placeholder("g", dtype, *SHAPE)
    state = {k: sd.placeholder(f"s_{k}", dtype, *SHAPE) for k in upd.state_names()}
    hyper = {k: sd.placeholder(f"h_{k}", hyper_dtype) for k in upd.hyper(0, 0)}
    new_p, new_s = upd.update(p, g, state, hyper)
    assert new_p.dtype == np.dtype(dtype)
    names = [new_p.name] + [new_s[k].name for k in upd.state_names()]
    pv, sv, out = p0.astype(dtype), _init_state(upd, dtype), []
    for it, gv in enumerate(grads):
        feeds = {"p": pv, "g": gv.astype(dtype), **{f"s_{k}": v for k, v in sv.items()},
                 **{f"h_{k}": np.asarray(v, hyper_dtype) for k, v in upd.hyper(it, 0).items()}}
        res = sd.output(feeds, *names)
        pv = res[new_p.name].numpy()
        sv = {k: res[new_s[k].name].numpy() for k in upd.state_names()}
        out.append(pv)
    return out


def _compare(got, want, dtype):
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=2e-5)
    for step, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == np.dtype(dtype), f"step {step}: dtype {a.dtype}, wanted {dtype}"
        np.testing.assert_allclose(a, b, err_msg=f"step {step}", **tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eager_matches_reference(case, dtype):
    _compare(run_eager(case[1], dtype), _reference(case), dtype)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("adam", "nesterovs", "adagrad")],
                         ids=["adam", "nesterovs", "adagrad"])
def test_eager_float64_scalar_arrays_keep_float32(case):
    """Hyper values given as float64 0-d NDArrays must not promote a float32 parameter."""
    got = run_eager(case[1], "float32", hyper_as=lambda v: nd.create(np.float64(v), dtype="float64"))
    _compare(got, _reference(case), "float32")


@pytest.mark.parametrize("dtype,hyper_dtype", [("float64", "float64"), ("float32", "float64"),
                                               ("float32", "float32")])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_graph_matches_reference(case, dtype, hyper_dtype):
    _compare(run_graph(case[1], dtype, hyper_dtype), _reference(case), dtype)


@pytest.mark.compiled
def test_graph_compiled_adam_float32():
    case = CASES[IDS.index("adam")]
    _compare(run_graph(case[1], "float32", "float64"), _reference(case), "float32")


# -- interface invariants ---------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hyper_keys_stable_and_have_lr(case):
    upd = case[1]
    keys = set(upd.hyper(0, 0))
    assert "lr" in keys
    assert all(set(upd.hyper(it, ep)) == keys for it, ep in [(1, 0), (7, 2), (1000, 9)])
    assert all(isinstance(v, float) for v in upd.hyper(3, 1).values())
    assert set(upd.state_init()) == set(upd.state_names())
    assert upd.learning_rate_at(3, 1) == upd.hyper(3, 1)["lr"]


def test_every_updater_is_tested():
    assert {type(c[1]).__name__ for c in CASES} == set(UPDATERS)


# -- convergence on a quadratic ---------------------------------------------------------------
CONVERGE = [Sgd(0.1), Momentum(0.05, 0.9), Nesterovs(0.05, 0.9), Adam(0.1), AdamW(0.1),
            AdaMax(0.1), Nadam(0.1), AMSGrad(0.1), AdaGrad(0.5), RmsProp(0.02),
            AdaDelta(0.9, 1e-3), Adam(CosineSchedule(0.2, total_steps=300, warmup_steps=20))]


@pytest.mark.parametrize("upd", CONVERGE, ids=lambda u: type(u).__name__)
def test_minimizes_quadratic(upd):
    a = np.array([1.0, 2.0, 0.5, 3.0])
    c = np.array([1.0, -2.0, 3.0, 0.5])

    def loss(p):
        return 0.5 * float(np.sum(a * (p - c) ** 2))

    p = nd.create(np.zeros(4), dtype="float64")
    state = {k: nd.full((4,), v, dtype="float64") for k, v in upd.state_init().items()}
    start = loss(p.numpy())
    for it in range(300):
        grad = nd.create(a * (p.numpy() - c))
        p, state = upd.update(p, grad, state, upd.hyper(it, 0))
    assert loss(p.numpy()) < 1e-2 * start, (type(upd).__name__, loss(p.numpy()), start)


def test_noop_leaves_params_unchanged():
    p = nd.create([1.0, 2.0])
    new_p, state = NoOp().update(p, nd.create([5.0, 5.0]), {}, NoOp().hyper(4, 1))
    assert new_p.numpy().tolist() == [1.0, 2.0] and state == {}


# -- schedules --------------------------------------------------------------------------------
E = ScheduleType.EPOCH
SCHEDULE_VALUES = [
    (StepSchedule(IT, 1.0, 0.5, 10), [(0, 0, 1.0), (9, 0, 1.0), (10, 0, 0.5), (25, 0, 0.25)]),
    (ExponentialSchedule(IT, 2.0, 0.9), [(0, 0, 2.0), (3, 5, 1.458)]),
    (ExponentialSchedule(E, 2.0, 0.9), [(3, 0, 2.0), (0, 2, 1.62)]),
    (InverseSchedule(IT, 1.0, 0.5, 2.0), [(0, 0, 1.0), (2, 0, 0.25), (6, 0, 1 / 16)]),
    (PolySchedule(IT, 1.0, 2.0, 10), [(0, 0, 1.0), (5, 0, 0.25), (9, 0, 0.01), (10, 0, 0.0),
                                      (50, 0, 0.0)]),
    (SigmoidSchedule(IT, 2.0, 1.0, 5), [(5, 0, 1.0), (0, 0, 2 / (1 + math.exp(5))),
                                        (10**6, 0, 2.0), (-10**6, 0, 0.0)]),
    (MapSchedule(E, {0: 1.0, 3: 0.5, 7: 0.1}), [(100, 0, 1.0), (0, 2, 1.0), (0, 3, 0.5),
                                                (0, 6, 0.5), (0, 9, 0.1)]),
    (CycleSchedule(IT, 0.1, 1.0, 10, 2, 0.1), [(0, 0, 0.1), (2, 0, 0.55), (4, 0, 1.0),
                                               (6, 0, 0.55), (8, 0, 0.1), (9, 0, 0.01),
                                               (12, 0, 0.55)]),
    (CosineSchedule(1.0, total_steps=10, warmup_steps=2, min_value=0.1),
     [(0, 0, 0.0), (1, 0, 0.5), (2, 0, 1.0), (6, 0, 0.55), (10, 0, 0.1), (20, 0, 0.1)]),
    (CosineSchedule(1.0, total_steps=4), [(0, 0, 1.0), (2, 0, 0.5), (4, 0, 0.0)]),
    (FixedSchedule(0.3), [(0, 0, 0.3), (99, 9, 0.3)]),
    (RampSchedule(FixedSchedule(2.0), 4), [(0, 0, 0.5), (1, 0, 1.0), (3, 0, 2.0), (9, 0, 2.0)]),
]


@pytest.mark.parametrize("sched,points", SCHEDULE_VALUES, ids=lambda x: type(x).__name__)
def test_schedule_values(sched, points):
    for it, ep, want in points:
        got = sched.value_at(it, ep)
        assert isinstance(got, float)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (it, ep)


@pytest.mark.parametrize("sched", [s for s, _ in SCHEDULE_VALUES], ids=lambda s: type(s).__name__)
def test_schedule_json_round_trip(sched):
    back = Schedule.from_json(json.loads(json.dumps(sched.to_json())))
    assert back == sched and hash(back) == hash(sched)
    assert [back.value_at(i, i // 3) for i in range(30)] == [sched.value_at(i, i // 3)
                                                            for i in range(30)]


ROUND_TRIP = [c[1] for c in CASES] + [
    Adam(CosineSchedule(0.01, total_steps=100, warmup_steps=10)),
    AdamW(RampSchedule(StepSchedule(E, 0.1, 0.5, 2), 3), weight_decay=0.3),
    Momentum(0.1, CycleSchedule(IT, 0.5, 0.9, 6, 2, 0.5)),
    RmsProp(PolySchedule(IT, 0.1, 1.0, 20)), AdaDelta(learning_rate=SigmoidSchedule(IT, 1, 1, 2)),
]


@pytest.mark.parametrize("upd", ROUND_TRIP, ids=lambda u: type(u).__name__)
def test_updater_json_round_trip(upd):
    d = json.loads(json.dumps(upd.to_json()))
    assert d["type"] == type(upd).__name__
    back = Updater.from_json(d)
    assert back == upd and type(back) is type(upd)
    for it, ep in [(0, 0), (4, 1), (15, 3), (60, 9)]:
        assert back.hyper(it, ep) == upd.hyper(it, ep)
    np.testing.assert_array_equal(run_eager(back, "float64")[-1], run_eager(upd, "float64")[-1])


def test_schedule_type_accepts_names():
    assert StepSchedule("epoch", 1.0, 0.5, 1).schedule_type is E
    assert MapSchedule("ITERATION", {"0": 1.0, "5": 2.0}).value_at(5) == 2.0


# -- errors -----------------------------------------------------------------------------------
BAD = [
    lambda: Sgd(-0.1), lambda: Sgd(float("nan")), lambda: Sgd("0.1"), lambda: Sgd(True),
    lambda: Adam(beta1=1.0), lambda: Adam(beta1=-0.1), lambda: Adam(beta2=1.5),
    lambda: Adam(epsilon=-1e-8), lambda: AMSGrad(beta2=1.0), lambda: Nadam(beta1=2),
    lambda: AdaMax(-1.0), lambda: AdamW(weight_decay=-0.1), lambda: Nesterovs(0.1, 1.0),
    lambda: Momentum(0.1, -0.5), lambda: RmsProp(rms_decay=1.0), lambda: AdaGrad(epsilon=-1),
    lambda: AdaDelta(rho=1.2), lambda: AdaDelta(learning_rate=-1),
    lambda: StepSchedule(IT, 1.0, 0.5, 0), lambda: StepSchedule(IT, 1.0, -0.5, 1),
    lambda: MapSchedule(IT, {1: 0.1}), lambda: MapSchedule(IT, {0: 0.1, -1: 0.2}),
    lambda: PolySchedule(IT, 1.0, 1.0, 0), lambda: CosineSchedule(1.0, total_steps=5, warmup_steps=5),
    lambda: CosineSchedule(1.0, total_steps=5, min_value=2.0),
    lambda: CycleSchedule(IT, 1.0, 0.5, 10, 2, 0.1), lambda: CycleSchedule(IT, 0.1, 1.0, 3, 2, 0.1),
    lambda: ExponentialSchedule("sometimes", 1.0, 0.5), lambda: RampSchedule(0.1, 3),
    lambda: Updater.from_json({"type": "Adamz"}), lambda: Updater.from_json({"lr": 0.1}),
    lambda: Updater.from_json({"type": "Adam", "learning_rate": 0.1, "momentum": 0.9}),
    lambda: Schedule.from_json({"type": "WarpSchedule"}),
]


@pytest.mark.parametrize("make", BAD, ids=range(len(BAD)))
def test_bad_hyper_parameters_raise(make):
    with pytest.raises(TrainingError):
        make()


def test_error_messages_name_the_problem():
    with pytest.raises(ValueError, match=r"Adam: beta1 must be in \[0, 1\), got 1.0"):
        Adam(beta1=1.0)
    with pytest.raises(TrainingError, match="unknown updater type 'Adamz'.*Adam"):
        Updater.from_json({"type": "Adamz"})


def test_schedule_giving_bad_value_at_run_time():
    sgd = Sgd(ExponentialSchedule(IT, -1.0, 0.5))
    with pytest.raises(TrainingError, match="learning-rate schedule.*iteration 2"):
        sgd.hyper(2, 0)
    nes = Nesterovs(0.1, MapSchedule(IT, {0: 0.5, 3: 1.5}))
    nes.hyper(2, 0)
    with pytest.raises(TrainingError, match="momentum"):
        nes.hyper(3, 0)


def test_update_with_missing_state_or_hyper():
    adam, p = Adam(), nd.create([1.0])
    with pytest.raises(TrainingError, match=r"missing slots \['v'\]"):
        adam.update(p, p, {"m": p}, adam.hyper(0, 0))
    with pytest.raises(TrainingError, match=r"hyper is missing \['alpha_t'\]"):
        adam.update(p, p, {"m": p, "v": p}, {"lr": 0.1})
