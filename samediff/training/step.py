"""The training step as one plan: forward, backward, regularization and updater together.

``TrainStep`` records, once per graph and config:

* the backward pass into the graph itself (ND4J-style ``<name>-grad`` variables, shared with
  ``calculate_gradients``);
* the regularization terms, the updater's rule for every trainable variable and the summed
  loss into *detached* nodes: they are recorded with the graph's own machinery under the name
  scope ``train/`` and then taken out of it, so the user's graph (its summary, its saved file)
  does not change. Updater state and the per-step scalars (learning rate, bias corrections) are
  placeholders of the detached part; the scalars are weak Python floats, so a float32 model
  stays float32.

Each step then runs one cached plan (compiled by default) whose inputs are the batch, the
parameters, the updater state and the scalars, and whose outputs are the loss, the new
parameters and the new state, which are copied into the parameters' and state's own buffers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import TrainingError
from ..graph import Node, SameDiff, VarInfo, VariableType, _check_feed, typed_plan
from ..ops import TensorType
from ..array import type_of
from .config import TrainingConfig

_WEAK_FLOAT = type_of(1.0)


class UpdaterState:
    """Per-parameter updater arrays plus the step/epoch counters (saved with the model)."""

    def __init__(self, iteration: int = 0, epoch: int = 0, batch: int = 0) -> None:
        # steps done in all, epochs completed, batches done in the current epoch
        self.iteration, self.epoch, self.batch = iteration, epoch, batch
        self.arrays: dict[str, dict[str, np.ndarray]] = {}

    def ensure(self, sd: SameDiff, params: list[str], slots: tuple[str, ...],
               init: dict[str, float] | None = None) -> None:
        """Create missing state arrays, filled with the updater's initial values."""
        for p in params:
            value = sd._vars[p].value
            have = self.arrays.setdefault(p, {})
            for s in slots:
                arr = have.get(s)
                if arr is None or arr.shape != value.shape or arr.dtype != value.dtype:
                    have[s] = np.full_like(value, (init or {}).get(s, 0.0))
            for s in set(have) - set(slots):
                del have[s]


class TrainStep:
    """One training step of ``sd`` under ``config`` (see the module docstring)."""

    def __init__(self, sd: SameDiff, config: TrainingConfig, extra_outputs: tuple[str, ...] = ()) -> None:
        from ..autodiff import gradient_names
        if config.updater is None:
            raise TrainingError("fit: the training config has no updater; e.g. "
                                "TrainingConfig(updater=Adam(1e-3), ...)")
        self.sd, self.config = sd, config
        if config.loss_variables:
            sd.set_loss_variables(*config.loss_variables)
        if not sd._losses:
            raise TrainingError("fit: no loss variables; mark one with v.mark_as_loss(), use an "
                                "sd.loss.* function, or set TrainingConfig(loss_variables=...)")
        for name in extra_outputs:  # before anything runs (donation updates in place)
            sd._info(name)
        upstream = _upstream(sd, sd._losses)
        # like PyTorch/ND4J, variables no loss depends on (an unused head) are not trained
        self.params = [v.name for v in sd.trainable_variables()
                       if sd._vars[v.name].ttype.dtype.kind == "f" and v.name in upstream]
        if not self.params:
            raise TrainingError("fit: no trainable (floating-point VARIABLE) variable affects "
                                f"the losses {list(sd._losses)}")
        for name in config.feature_mapping + config.label_mapping:
            info = sd._info(name)
            if info.vtype is not VariableType.PLACEHOLDER:
                raise TrainingError(f"fit: {name!r} in the feature/label mapping is a "
                                    f"{info.vtype.value}, not a placeholder")
        self.slots = tuple(config.updater.state_names())
        self.grads = gradient_names(sd, self.params)
        self.extra_outputs = tuple(extra_outputs)
        self._build_detached()
        self._plans: dict[tuple, Any] = {}
        self._outputs = self.outputs()
        self._state_owner = {name: (p, s) for p, d in self.state_inputs.items()
                             for s, name in d.items()}  # placeholder -> (param, slot)
        infos = [(n, self.vars.get(n) or sd._vars[n]) for n in self._graph_inputs]
        self._placeholders = [(n, i) for n, i in infos if i.vtype is VariableType.PLACEHOLDER]
        self._fixed_names = sorted([n for n, i in infos if i.vtype is not VariableType.PLACEHOLDER]
                                   + list(self._state_owner))
        self._fixed: tuple | None = None
        self.last_penalty: float | None = None  # the L1/L2 penalty of the last step

    # -- building ---------------------------------------------------------------------------
    def _build_detached(self) -> None:
        sd, cfg = self.sd, self.config
        first, old_vars, old_names = len(sd._nodes), dict(sd._vars), set(sd._node_names)
        try:
            with sd.name_scope("train"):
                self._record_update(sd, cfg)
        finally:  # take the new nodes and variables out of the user's graph, even on failure
            self.nodes: list[Node] = sd._nodes[first:]
            del sd._nodes[first:]
            self.vars: dict[str, VarInfo] = {k: v for k, v in sd._vars.items() if k not in old_vars}
            sd._vars = old_vars
            sd._node_names = old_names
        producers = {o for n in self.nodes for o in n.outputs}
        self.forward = self._needed_graph_nodes(producers)
        # what the plan reads that is neither computed in it nor an updater input: the batch's
        # placeholders, parameters, constants (fixed per step; computed once)
        used = {i for n in self.forward + self.nodes for i in n.inputs}
        produced = {o for n in self.forward + self.nodes for o in n.outputs}
        own = {v.name for v in self.hyper_vars.values()} | set(self._state_names())
        self._graph_inputs = sorted(used - produced - own)

    def _state_names(self) -> list[str]:
        """The updater-state placeholders, every parameter's slots."""
        return [name for d in self.state_inputs.values() for name in d.values()]

    def _record_update(self, sd: SameDiff, cfg: TrainingConfig) -> None:
        hyper_names = sorted(cfg.updater.hyper(0, 0))
        self.hyper_vars = {k: sd._add_var(sd._scoped(f"hyper/{k}"), VariableType.PLACEHOLDER,
                                          _WEAK_FLOAT) for k in hyper_names}
        lr = self.hyper_vars.get("lr", self.hyper_vars.get("learning_rate"))
        if cfg.weight_decay and lr is None and cfg.weight_decay_apply_lr:
            raise TrainingError(f"fit: weight_decay with apply_lr needs the updater's learning "
                                f"rate, but {type(cfg.updater).__name__}.hyper() has no 'lr'")
        # the reported loss is the summed loss variables, as validation measures them; the
        # regularization penalty is reported on its own (gradients come from autodiff of the
        # losses, with the penalty's gradient and the maximize sign applied to them below)
        loss_terms = [sd._vars[n].sdvar for n in sd._losses]
        total = loss_terms[0].sum() if loss_terms[0].rank else loss_terms[0]
        for t in loss_terms[1:]:
            total = total + (t.sum() if t.rank else t)
        penalty = None
        self.new_params: dict[str, str] = {}
        self.new_state: dict[str, dict[str, str]] = {}
        self.state_inputs: dict[str, dict[str, str]] = {}
        for p in self.params:
            pv, g = sd._vars[p].sdvar, sd._vars[self.grads[p]].sdvar
            ttype = sd._vars[p].ttype
            if not cfg.minimize:
                g = -g
            terms = []
            if cfg.l2:
                g = g + pv * cfg.l2
                terms.append(pv.square().sum() * (0.5 * cfg.l2))
            if cfg.l1:
                g = g + pv.sign() * cfg.l1
                terms.append(pv.abs().sum() * cfg.l1)
            for term in terms:
                penalty = term if penalty is None else penalty + term
            state = {}
            for s in self.slots:
                state[s] = sd._add_var(sd._scoped(f"{p}/{s}"), VariableType.PLACEHOLDER,
                                       TensorType(ttype.shape, ttype.dtype))
            self.state_inputs[p] = {s: v.name for s, v in state.items()}
            new_p, new_s = cfg.updater.update(pv, g, state, dict(self.hyper_vars))
            if cfg.weight_decay:
                factor = lr * cfg.weight_decay if cfg.weight_decay_apply_lr else cfg.weight_decay
                new_p = new_p - pv * factor
            if getattr(new_p, "dtype", ttype.dtype) != ttype.dtype:
                new_p = new_p.cast(dtype=ttype.dtype)
            self.new_params[p] = new_p.name
            self.new_state[p] = {s: new_s[s].name for s in self.slots}
        self.loss_name = total.name
        self.penalty_name = None if penalty is None else penalty.name

    def _needed_graph_nodes(self, produced_here: set[str]) -> list[Node]:
        """The graph's own nodes (forward and backward) the detached part reads."""
        wanted = {i for n in self.nodes for i in n.inputs if i not in produced_here}
        wanted |= {o for o in self.outputs() if o not in produced_here}
        needed: list[Node] = []
        for node in reversed(self.sd._nodes):
            if any(o in wanted for o in node.outputs):
                needed.append(node)
                wanted.update(node.inputs)
        return needed[::-1]

    # -- running ----------------------------------------------------------------------------
    def outputs(self) -> list[str]:
        names = [self.loss_name, *self.extra_outputs]
        if self.penalty_name is not None:
            names.append(self.penalty_name)
        for p in self.params:
            names.append(self.new_params[p])
            names.extend(self.new_state[p][s] for s in self.slots)
        return names

    def run(self, feeds: dict[str, np.ndarray], state: UpdaterState) -> tuple[float, dict]:
        """One step on a batch: updates parameters and ``state`` in place; returns the loss and
        the extra outputs asked for at construction."""
        sd = self.sd
        fixed = self._fixed_inputs(state)
        values = dict(fixed[0])
        hyper = self.config.updater.hyper(state.iteration, state.epoch)
        for k, var in self.hyper_vars.items():
            values[var.name] = float(hyper[k])
        feed_types = []
        for name, info in self._placeholders:
            if name not in feeds:
                raise TrainingError(f"fit: placeholder {name!r} ({info.ttype}) needs a value "
                                    f"from each batch; map it with TrainingConfig("
                                    f"feature_mapping=/label_mapping=) or pass dict batches "
                                    f"keyed by placeholder name (got {sorted(feeds)})")
            arr = _check_feed(info, feeds[name])
            values[name] = arr
            feed_types.append(TensorType(arr.shape, arr.dtype))
        key = (fixed[2], tuple(feed_types))
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 16:
                self._plans.clear()
            types = dict(fixed[1])
            types.update({n: t for (n, _), t in zip(self._placeholders, feed_types)})
            types.update({v.name: _WEAK_FLOAT for v in self.hyper_vars.values()})
            # new parameters and state may be written straight into the old ones' buffers
            donate = {self.new_params[p]: p for p in self.params}
            donate.update({self.new_state[p][s]: self.state_inputs[p][s]
                           for p in self.params for s in self.slots})
            plan = self._plans[key] = typed_plan(self.forward + self.nodes, types, self._outputs,
                                                 donate)
        results = dict(zip(self._outputs, plan.execute([values[k] for k in plan.input_slots])))
        for p in self.params:
            _store(sd._vars[p].value, results[self.new_params[p]])
            for s in self.slots:
                _store(state.arrays[p][s], results[self.new_state[p][s]])
        state.iteration += 1
        self.last_penalty = (None if self.penalty_name is None
                             else float(results[self.penalty_name]))
        return float(results[self.loss_name]), {k: results[k] for k in self.extra_outputs}

    def _fixed_inputs(self, state: UpdaterState) -> tuple[dict, dict, tuple]:
        """Values, types and cache key of the inputs that are the same arrays every step
        (parameters, constants, updater state), rebuilt only when one of them is replaced
        (``set_array``, a resized state) — checked by identity each step."""
        sources = [self._source(name, state) for name in self._fixed_names]
        cached = self._fixed
        if cached is not None and len(cached[3]) == len(sources) and all(
                a is b for a, b in zip(cached[3], sources)):
            return cached[:3]
        values, types = {}, {}
        for name, value in zip(self._fixed_names, sources):
            weak_type = self._weak_type(name)
            if weak_type is not None:  # a Python literal stays a weak Python scalar
                values[name], types[name] = value.item(), weak_type
            else:
                values[name], types[name] = value, TensorType(value.shape, value.dtype)
        key = tuple((k, types[k]) for k in self._fixed_names)
        self._fixed = (values, types, key, sources)
        return values, types, key

    def _source(self, name: str, state: UpdaterState) -> np.ndarray:
        owner = self._state_owner.get(name)
        if owner is not None:
            return state.arrays[owner[0]][owner[1]]
        return (self.vars.get(name) or self.sd._vars[name]).value

    def _weak_type(self, name: str) -> TensorType | None:
        info = self.vars.get(name) or self.sd._vars.get(name)
        return info.ttype if info is not None and info.ttype.weak else None


def _store(target: np.ndarray, value: np.ndarray) -> None:
    if value is not target:  # a donated buffer already holds the update
        np.copyto(target, value)


def _upstream(sd: SameDiff, names: list[str]) -> set[str]:
    """Every variable the values ``names`` are computed from (and the names themselves)."""
    producers = {o: n for n in sd._nodes for o in n.outputs}
    seen, stack = set(names), list(names)
    while stack:
        node = producers.get(stack.pop())
        if node is not None:
            for i in node.inputs:
                if i not in seen:
                    seen.add(i)
                    stack.append(i)
    return seen
