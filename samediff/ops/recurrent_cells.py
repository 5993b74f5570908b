"""The math of one time step of the recurrent cells (LSTM, GRU, simple RNN), forward and back.

``recurrent.py`` runs these over a sequence (layouts, directions, sequence lengths); here a
step sees time-major slices: ``zx [batch, gates * hidden]``, the step's input projection
``x @ W + b`` (computed for the whole sequence in one GEMM), the previous state ``h`` (and
``c``), and the recurrent weights ``R [hidden, gates * hidden]``. Gates are in the canonical
order each cell documents; ``recurrent.py`` permutes ONNX's orders into it.

A forward step returns the new state and a *tape* (what its backward step needs). A backward
step takes the gradient reaching the new state and returns the gradient of ``zx``, of the
previous state, and adds the weights' gradients into an accumulator.

Activations are ONNX's list (which has ND4J's ``LSTMLayerConfig`` activations too): each is
``(name, alpha, beta)``; the derivative is written from the pre-activation and the output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .registry import AttrKind

Activation = tuple[str, float, float]


def _sigmoid(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # (no overflow for large |x|, unlike 1 / (1 + e^-x))


def _hard_sigmoid(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.clip(a * x + b, 0.0, 1.0)


def _elu(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0.0)))


#: name -> (f(x, alpha, beta), f'(x, y, alpha, beta), default alpha, default beta)
ACTIVATIONS: dict[str, tuple[Callable, Callable, float, float]] = {
    "sigmoid": (_sigmoid, lambda x, y, a, b: y * (1.0 - y), 0.0, 0.0),
    "tanh": (lambda x, a, b: np.tanh(x), lambda x, y, a, b: 1.0 - y * y, 0.0, 0.0),
    "relu": (lambda x, a, b: np.maximum(x, 0.0), lambda x, y, a, b: (x > 0).astype(x.dtype),
             0.0, 0.0),
    "identity": (lambda x, a, b: x, lambda x, y, a, b: np.ones_like(x), 0.0, 0.0),
    "affine": (lambda x, a, b: a * x + b, lambda x, y, a, b: np.full_like(x, a), 1.0, 0.0),
    "leaky_relu": (lambda x, a, b: np.where(x >= 0, x, a * x),
                   lambda x, y, a, b: np.where(x >= 0, 1.0, a).astype(x.dtype), 0.01, 0.0),
    "thresholded_relu": (lambda x, a, b: np.where(x > a, x, 0.0).astype(x.dtype),
                         lambda x, y, a, b: (x > a).astype(x.dtype), 1.0, 0.0),
    "scaled_tanh": (lambda x, a, b: a * np.tanh(b * x),
                    lambda x, y, a, b: a * b * (1.0 - np.tanh(b * x) ** 2), 1.0, 1.0),
    "hard_sigmoid": (_hard_sigmoid,
                     lambda x, y, a, b: np.where((a * x + b > 0) & (a * x + b < 1), a,
                                                 0.0).astype(x.dtype), 0.2, 0.5),
    "elu": (_elu, lambda x, y, a, b: np.where(x >= 0, 1.0, y + a).astype(x.dtype), 1.0, 0.0),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)),
                 lambda x, y, a, b: 1.0 / (1.0 + np.abs(x)) ** 2, 0.0, 0.0),
    "softplus": (lambda x, a, b: np.logaddexp(0.0, x), lambda x, y, a, b: _sigmoid(x, a, b),
                 0.0, 0.0),
}
#: ONNX's and ND4J's spellings of the same activations
_ACTIVATION_ALIASES = {"linear": "identity", "none": "identity", "leakyrelu": "leaky_relu",
                       "thresholdedrelu": "thresholded_relu", "threshhold_relu":
                       "thresholded_relu", "scaledtanh": "scaled_tanh", "scaled_tahn":
                       "scaled_tanh", "hardsigmoid": "hard_sigmoid"}


def activation(spec: Any) -> Activation:
    """``"tanh"``, ``("leaky_relu", 0.1)`` or ``("scaled_tanh", 1.7, 0.67)`` as ``(name,
    alpha, beta)`` with the activation's default parameters filled in."""
    name, *params = (spec,) if isinstance(spec, str) else tuple(spec)
    key = str(name).lower()
    key = _ACTIVATION_ALIASES.get(key, key)
    if key not in ACTIVATIONS or len(params) > 2:
        raise ValueError(f"unknown activation {spec!r}; known: {sorted(ACTIVATIONS)}, each a "
                         f"name or (name, alpha[, beta])")
    _, _, alpha, beta = ACTIVATIONS[key]
    given = [float(p) for p in params] + [alpha, beta][len(params):]
    return key, given[0], given[1]


def activations_kind(count: int, what: str) -> AttrKind:
    """The attribute kind of a cell's ``count`` activations (``what`` names them)."""
    def coerce(v: Any) -> tuple[Activation, ...]:
        specs = (v,) if isinstance(v, str) else tuple(v)
        if len(specs) != count:
            raise ValueError(f"expected {count} activations ({what}), got {v!r}")
        return tuple(activation(s) for s in specs)
    return AttrKind(f"activations{count}", coerce)


def apply(act: Activation, x: np.ndarray) -> np.ndarray:
    return ACTIVATIONS[act[0]][0](x, act[1], act[2])


def derivative(act: Activation, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return ACTIVATIONS[act[0]][1](x, y, act[1], act[2])


# --- the cells ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepWeights:
    """What a step reads besides its input projection: ``R [hidden, gates * hidden]``,
    LSTM peepholes ``[3, hidden]`` (input, forget, output; or None), the GRU's recurrent bias
    inside the reset product (``linear_before_reset``; or None), the activations and the LSTM
    cell clip (0: none)."""

    R: np.ndarray
    peephole: np.ndarray | None
    recurrent_bias: np.ndarray | None
    acts: tuple[Activation, ...]
    clip: float = 0.0
    linear_before_reset: bool = False


class Grads:
    """Accumulated weight gradients of the steps of one direction."""

    def __init__(self, w: StepWeights) -> None:
        self.R = np.zeros_like(w.R)
        self.peephole = None if w.peephole is None else np.zeros_like(w.peephole)
        self.recurrent_bias = (None if w.recurrent_bias is None
                               else np.zeros_like(w.recurrent_bias))


def _split(z: np.ndarray, n: int) -> list[np.ndarray]:
    h = z.shape[-1] // n
    return [z[..., k * h:(k + 1) * h] for k in range(n)]


class LSTM:
    """Gates ``i, f, g, o`` (ND4J's ``i, f, c, o``; PyTorch's ``i, f, g, o``)::

        i = ga(zi + pi * c)   f = ga(zf + pf * c)   g = ca(zg)
        c' = clip(f * c + i * g)   o = ga(zo + po * c')   h' = o * oa(c')

    with activations ``(ga, ca, oa)`` (sigmoid, tanh, tanh by default) and ``clip`` bounding
    the cell state to ``[-clip, clip]`` (ND4J's ``cellClip``) when positive."""

    gates, states = 4, 2

    @staticmethod
    def step(zx: np.ndarray, state: tuple, w: StepWeights) -> tuple[tuple, tuple]:
        h, c = state
        ga, ca, oa = w.acts
        zi, zf, zg, zo = _split(zx + h @ w.R, 4)
        if w.peephole is not None:
            zi = zi + w.peephole[0] * c
            zf = zf + w.peephole[1] * c
        i, f, g = apply(ga, zi), apply(ga, zf), apply(ca, zg)
        raw = f * c + i * g
        c2 = np.clip(raw, -w.clip, w.clip) if w.clip > 0 else raw
        if w.peephole is not None:
            zo = zo + w.peephole[2] * c2
        o = apply(ga, zo)
        oc = apply(oa, c2)
        return (o * oc, c2), (zi, zf, zg, zo, i, f, g, o, raw, c2, oc)

    @staticmethod
    def step_back(d: tuple, state: tuple, tape: tuple, w: StepWeights,
                  acc: Grads) -> tuple[np.ndarray, tuple]:
        dh, dc = d
        h, c = state
        ga, ca, oa = w.acts
        zi, zf, zg, zo, i, f, g, o, raw, c2, oc = tape
        dzo = dh * oc * derivative(ga, zo, o)
        dc = dc + dh * o * derivative(oa, c2, oc)
        if w.peephole is not None:
            dc = dc + dzo * w.peephole[2]
        if w.clip > 0:
            dc = dc * (np.abs(raw) <= w.clip)
        dzi = dc * g * derivative(ga, zi, i)
        dzf = dc * c * derivative(ga, zf, f)
        dzg = dc * i * derivative(ca, zg, g)
        dc_prev = dc * f
        if w.peephole is not None:
            dc_prev = dc_prev + dzi * w.peephole[0] + dzf * w.peephole[1]
            acc.peephole[0] += (dzi * c).sum(0)
            acc.peephole[1] += (dzf * c).sum(0)
            acc.peephole[2] += (dzo * c2).sum(0)
        dz = np.concatenate([dzi, dzf, dzg, dzo], axis=-1)
        acc.R += h.T @ dz
        return dz, (dz @ w.R.T, dc_prev)


class GRU:
    """Gates ``r, z, n`` (ND4J's reset, update, cell ``r, u, c``; PyTorch's ``r, z, n``)::

        r = ga(zr + h Rr)   z = ga(zz + h Rz)   h' = z * h + (1 - z) * n
        n = ca(zn + (r * h) Rn)              (Cho et al.; ND4J's and ONNX's default)
        n = ca(zn + r * (h Rn + bRn))        (linear_before_reset: PyTorch's, cuDNN's)

    with activations ``(ga, ca)`` (sigmoid, tanh by default)."""

    gates, states = 3, 1

    @staticmethod
    def step(zx: np.ndarray, state: tuple, w: StepWeights) -> tuple[tuple, tuple]:
        (h,) = state
        ga, ca = w.acts
        hid = h.shape[-1]
        xr, xz, xn = _split(zx, 3)
        if w.linear_before_reset:
            hr = h @ w.R
            if w.recurrent_bias is not None:
                hr = hr + w.recurrent_bias
            r = apply(ga, xr + hr[:, :hid])
            z = apply(ga, xz + hr[:, hid:2 * hid])
            zn = xn + r * hr[:, 2 * hid:]
            rec = hr
        else:
            hr = h @ w.R[:, :2 * hid]
            r = apply(ga, xr + hr[:, :hid])
            z = apply(ga, xz + hr[:, hid:])
            rec = r * h
            zn = xn + rec @ w.R[:, 2 * hid:]
        n = apply(ca, zn)
        return (z * h + (1.0 - z) * n,), (xr + hr[:, :hid], xz + hr[:, hid:2 * hid], zn, r, z,
                                          n, rec)

    @staticmethod
    def step_back(d: tuple, state: tuple, tape: tuple, w: StepWeights,
                  acc: Grads) -> tuple[np.ndarray, tuple]:
        (dh,) = d
        (h,) = state
        ga, ca = w.acts
        hid = h.shape[-1]
        zr, zz, zn, r, z, n, rec = tape
        dzz = dh * (h - n) * derivative(ga, zz, z)
        dzn = dh * (1.0 - z) * derivative(ca, zn, n)
        dh_prev = dh * z
        if w.linear_before_reset:
            dzr = dzn * rec[:, 2 * hid:] * derivative(ga, zr, r)
            drec = np.concatenate([dzr, dzz, dzn * r], axis=-1)
            acc.R += h.T @ drec
            if acc.recurrent_bias is not None:
                acc.recurrent_bias += drec.sum(0)
            dh_prev = dh_prev + drec @ w.R.T
        else:
            drh = dzn @ w.R[:, 2 * hid:].T
            dzr = drh * h * derivative(ga, zr, r)
            acc.R[:, 2 * hid:] += rec.T @ dzn
            drz = np.concatenate([dzr, dzz], axis=-1)
            acc.R[:, :2 * hid] += h.T @ drz
            dh_prev = dh_prev + drh * r + drz @ w.R[:, :2 * hid].T
        return np.concatenate([dzr, dzz, dzn], axis=-1), (dh_prev,)


class SimpleRNN:
    """``h' = act(zx + h R)`` (ONNX's ``RNN``, PyTorch's ``nn.RNN``; tanh by default)."""

    gates, states = 1, 1

    @staticmethod
    def step(zx: np.ndarray, state: tuple, w: StepWeights) -> tuple[tuple, tuple]:
        (h,) = state
        z = zx + h @ w.R
        y = apply(w.acts[0], z)
        return (y,), (z, y)

    @staticmethod
    def step_back(d: tuple, state: tuple, tape: tuple, w: StepWeights,
                  acc: Grads) -> tuple[np.ndarray, tuple]:
        (dh,) = d
        (h,) = state
        z, y = tape
        dz = dh * derivative(w.acts[0], z, y)
        acc.R += h.T @ dz
        return dz, (dz @ w.R.T,)


CELLS: dict[str, Any] = {"lstm": LSTM, "gru": GRU, "rnn": SimpleRNN}

