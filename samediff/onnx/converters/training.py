"""ONNX converters, domain ``ai.onnx.preview.training``: the optimizer steps Adagrad, Adam and
Momentum (standard and Nesterov) -- element-wise arithmetic on their inputs, composed of
table ops.

Each takes a learning rate ``R`` and an update count ``T`` (scalars) and then, for ``n``
optimized tensors, ``n`` values, ``n`` gradients and ``n`` of each optimizer state, in that
order; its outputs are the ``n`` new values followed by the ``n`` new states of each kind.
The scalar learning-rate factor (which depends on ``T`` at run time) is computed in float64,
as the ONNX reference does with Python scalars, then used in each tensor's dtype.
"""
from __future__ import annotations

import numpy as np

from ..table import converter

_DOMAIN = "ai.onnx.preview.training"
_F64 = np.dtype(np.float64)


def _c(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype)


def _groups(node, states: int) -> list[list]:
    """The per-tensor input groups ``[x, g, state...]``, checked against the input count."""
    rest = node.num_inputs - 2
    per = 2 + states
    if rest <= 0 or rest % per:
        raise node.fail(f"{node.op_type} takes R, T and then {per} inputs per optimized "
                        f"tensor (X, G and {states} state(s)), got {node.num_inputs} inputs")
    n = rest // per
    if node.num_outputs > (1 + states) * n:
        raise node.fail(f"{node.op_type} of {n} tensor(s) has {(1 + states) * n} outputs, the "
                        f"node names {node.num_outputs}")
    return [[node.input(2 + j * n + i) for j in range(per)] for i in range(n)]


def _scalar(node, i: int, what: str):
    """Input ``i`` (a one-element R or T) as a float64 scalar."""
    v = node.input(i)
    if v is None:
        raise node.fail(f"input {i} ({what}) is required")
    if node.rank(v) > 1 or any(d > 1 for d in node.shape(v)):
        raise node.fail(f"{what} must be a scalar, got shape {list(node.shape(v))}")
    return node.op("reshape", node.op("cast", v, dtype=_F64), shape=())


def _regularized(node, x, g, coef: float):
    """``norm_coefficient * X + G`` (the gradient of the L2 term added)."""
    return g if coef == 0.0 else node.op("add", node.op("mul", x, _c(coef, node.dtype(x))), g)


def _in(node, scalar, like):
    """A float64 scalar in ``like``'s dtype."""
    dtype = node.dtype(like)
    return scalar if dtype == _F64 else node.op("cast", scalar, dtype=dtype)


def _outputs(groups: list[list]) -> tuple:
    """Per-tensor tuples ``(x_new, state_new...)`` -> all x_new, then each state kind."""
    return tuple(v for kind in zip(*groups) for v in kind)


@converter("Adagrad", since=1, domain=_DOMAIN)
def _adagrad(node):
    r, t = _scalar(node, 0, "R"), _scalar(node, 1, "T")
    decay = float(node.attr("decay_factor", 0.0))
    eps = float(node.attr("epsilon", 0.0))
    coef = float(node.attr("norm_coefficient", 0.0))
    # r = R / (1 + T * decay_factor)
    rate = node.op("div", r, node.op("add", node.op("mul", t, _c(decay, _F64)), _c(1, _F64)))
    out = []
    for x, g, h in _groups(node, 1):
        dtype = node.dtype(x)
        gr = _regularized(node, x, g, coef)
        h_new = node.op("add", h, node.op("square", gr))
        denom = node.op("add", node.op("sqrt", h_new), _c(eps, dtype))
        step = node.op("div", node.op("mul", _in(node, rate, x), gr), denom)
        out.append((node.op("sub", x, step), h_new))
    return _outputs(out)


@converter("Adam", since=1, domain=_DOMAIN)
def _adam(node):
    r, t = _scalar(node, 0, "R"), _scalar(node, 1, "T")
    alpha = float(node.attr("alpha", 0.9))
    beta = float(node.attr("beta", 0.999))
    eps = float(node.attr("epsilon", 0.0))
    coef = float(node.attr("norm_coefficient", 0.0))
    post = float(node.attr("norm_coefficient_post", 0.0))
    # R_adjusted = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R (the unused branch is
    # computed at T = 1, not T = 0, where it would divide 0 by 0)
    later = node.op("gt", t, _c(0, _F64))
    t1 = node.op("where", later, t, _c(1, _F64))
    corrected = node.op("div", node.op("mul", r, node.op("sqrt", node.op(
        "sub", _c(1, _F64), node.op("pow", _c(beta, _F64), t1)))),
        node.op("sub", _c(1, _F64), node.op("pow", _c(alpha, _F64), t1)))
    rate = node.op("where", later, corrected, r)
    out = []
    for x, g, v, h in _groups(node, 2):
        dtype = node.dtype(x)
        gr = _regularized(node, x, g, coef)
        v_new = node.op("add", node.op("mul", v, _c(alpha, dtype)),
                        node.op("mul", gr, _c(1 - alpha, dtype)))
        h_new = node.op("add", node.op("mul", h, _c(beta, dtype)),
                        node.op("mul", node.op("square", gr), _c(1 - beta, dtype)))
        denom = node.op("add", node.op("sqrt", h_new), _c(eps, dtype))
        x_new = node.op("sub", x, node.op("mul", _in(node, rate, x), node.op("div", v_new, denom)))
        if post != 0.0:
            x_new = node.op("mul", x_new, _c(1 - post, dtype))
        out.append((x_new, v_new, h_new))
    return _outputs(out)


@converter("Momentum", since=1, domain=_DOMAIN)
def _momentum(node):
    r, t = _scalar(node, 0, "R"), _scalar(node, 1, "T")
    alpha, beta = node.attr("alpha"), node.attr("beta")
    coef = node.attr("norm_coefficient")
    mode = node.attr("mode")
    missing = [n for n, v in (("alpha", alpha), ("beta", beta), ("norm_coefficient", coef),
                              ("mode", mode)) if v is None]
    if missing:
        raise node.fail(f"Momentum needs the attribute(s) {missing} (they have no default)")
    if mode not in ("standard", "nesterov"):
        raise node.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    alpha, beta, coef = float(alpha), float(beta), float(coef)
    # the gradient's coefficient is 1 at the first iteration (T = 0)
    beta_t = node.op("where", node.op("gt", t, _c(0, _F64)), _c(beta, _F64), _c(1, _F64))
    out = []
    for x, g, v in _groups(node, 1):
        dtype = node.dtype(x)
        gr = _regularized(node, x, g, coef)
        v_new = node.op("add", node.op("mul", v, _c(alpha, dtype)),
                        node.op("mul", gr, _in(node, beta_t, x)))
        direction = v_new if mode == "standard" else node.op(
            "add", gr, node.op("mul", v_new, _c(alpha, dtype)))
        out.append((node.op("sub", x, node.op("mul", direction, _in(node, r, x))), v_new))
    return _outputs(out)
