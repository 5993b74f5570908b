"""Gradient checking: autodiff gradients vs central finite differences, in float64.

Like ND4J's ``GradCheckUtil`` and JAX's ``check_grads``. The graph is first copied with every
floating-point value, placeholder and cast promoted to float64 (differences in float32 are too
noisy to check anything), then for each checked variable and element:
``numeric = (L(x + eps) - L(x - eps)) / (2 eps)`` where ``L`` is the sum of all losses, compared
with the analytic gradient by relative error ``|a - n| / max(|a|, |n|)``; an element passes when
that is at most ``max_rel_error`` or ``|a - n| <= min_abs_error``.

>>> import numpy as np
>>> from samediff import SameDiff
>>> from samediff.gradcheck import check_gradients
>>> sd = SameDiff.create()
>>> w = sd.var("w", np.array([0.5, -1.5]))
>>> loss = sd.math.tanh(w * w).sum().mark_as_loss()
>>> check_gradients(sd).passed
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .kernels import frozen
from .samediff import SameDiff, VariableType
from .ops import TensorType


@dataclass
class VariableReport:
    name: str
    max_rel_error: float
    max_abs_error: float
    worst_index: tuple[int, ...]
    checked: int
    failures: int


@dataclass
class GradCheckResult:
    """Outcome of ``check_gradients``: ``passed`` and a report per variable."""

    passed: bool
    reports: dict[str, VariableReport] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"gradient check {'PASSED' if self.passed else 'FAILED'}"]
        for r in self.reports.values():
            lines.append(f"  {r.name}: max rel error {r.max_rel_error:.3e} (abs "
                         f"{r.max_abs_error:.3e}) at {r.worst_index}, {r.failures}/{r.checked} "
                         f"elements failed")
        return "\n".join(lines)


def as_float64(sd: SameDiff) -> SameDiff:
    """A copy of ``sd`` with floating-point values, placeholders and casts in float64."""
    out = SameDiff.create()

    def widen(t: TensorType) -> TensorType:
        return t._replace(dtype=np.dtype(np.float64)) if t.dtype.kind == "f" and not t.weak else t

    for info in sd.graph.vars.values():
        if info.producer is not None:
            continue
        value = info.value
        if value is not None and value.dtype.kind == "f" and not info.ttype.weak:
            value = value.astype(np.float64)
        out.graph.add_var(info.name, info.vtype, widen(info.ttype), value)
    for node in sd.graph.nodes:
        attrs = dict(vars(node.attrs))
        for k, v in attrs.items():
            if isinstance(v, np.dtype) and v.kind == "f":
                attrs[k] = np.dtype(np.float64)
        made = out.graph.record(node.op, node.inputs, attrs, node.outputs[0])
        for got, want in zip(made, node.outputs):
            if got != want:  # a renamed secondary output
                out.graph.rename(got, want)
    out.set_loss_variables(*sd.loss_variables)
    return out


def check_gradients(sd: SameDiff, placeholders: Mapping[str, Any] | None = None,
                    wrt: list[str] | None = None, *, eps: float = 1e-6,
                    max_rel_error: float = 1e-5, min_abs_error: float = 1e-8,
                    max_per_variable: int | None = None, seed: int = 0,
                    verbose: bool = False) -> GradCheckResult:
    """Check the gradients of ``sd``'s losses w.r.t. ``wrt`` (default: all VARIABLEs).

    ``max_per_variable`` limits the elements checked per variable (a random subset).
    Works for user-defined ops like any other op."""
    g = as_float64(sd)
    feeds = {k: np.asarray(getattr(v, "_data", v), dtype=np.float64)
             if np.asarray(getattr(v, "_data", v)).dtype.kind == "f" else np.asarray(getattr(v, "_data", v))
             for k, v in (placeholders or {}).items()}
    names = wrt if wrt is not None else [v.name for v in g.trainable_variables()]
    analytic = {k: v.numpy() for k, v in g.calculate_gradients(feeds, *names).items()}
    losses = g.loss_variables
    rng = np.random.default_rng(seed)

    def total_loss() -> float:
        values = g.output(feeds, *losses)
        return float(sum(np.sum(values[n].numpy(), dtype=np.float64) for n in losses))

    result = GradCheckResult(passed=True)
    for name in names:
        info = g.graph.var(name)
        is_feed = info.vtype is VariableType.PLACEHOLDER
        base = feeds[name] if is_feed else info.value
        frozen.thaw(base)  # (a CONSTANT of this private copy: perturbed in place below)
        flat = base.reshape(-1)  # a view: perturbations write into the graph's own value
        indices = np.arange(flat.size)
        if max_per_variable is not None and flat.size > max_per_variable:
            indices = rng.choice(flat.size, max_per_variable, replace=False)
        rep = VariableReport(name, 0.0, 0.0, (), 0, 0)
        for i in indices:
            orig = flat[i]
            flat[i] = orig + eps
            plus = total_loss()
            flat[i] = orig - eps
            minus = total_loss()
            flat[i] = orig
            numeric = (plus - minus) / (2 * eps)
            a = float(analytic[name].reshape(-1)[i])
            abs_err = abs(a - numeric)
            rel = 0.0 if abs_err == 0 else abs_err / max(abs(a), abs(numeric))
            ok = rel <= max_rel_error or abs_err <= min_abs_error
            rep.checked += 1
            rep.failures += 0 if ok else 1
            rep.max_abs_error = max(rep.max_abs_error, abs_err)
            # relative error only means something where the difference is not negligible
            if abs_err > min_abs_error and rel > rep.max_rel_error:
                rep.max_rel_error = rel
                rep.worst_index = tuple(int(j) for j in np.unravel_index(i, base.shape))
        result.reports[name] = rep
        result.passed &= rep.failures == 0
    if verbose:
        print(result)
    return result
