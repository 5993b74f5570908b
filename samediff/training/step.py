"""The training step as one plan: forward, backward, regularization and updater together.

``TrainStep`` builds, once per graph and config, its own *step graph* — the user's graph is
never changed: autodiff's ``grad`` (a pure transform) gives a new graph with the backward pass,
and the regularization terms, the updater's rule for every trainable variable and the summed
loss are recorded into it under the name scope ``train/``. Updater state and the per-step
scalars (learning rate, bias corrections) are placeholders of the step graph; the scalars are
weak Python floats, so a float32 model stays float32.

Each step then runs one cached ``StepPlan`` (compiled by default) whose inputs are the batch,
the parameters, the updater state and the scalars, and whose outputs are the loss, the new
parameters and the new state, which are written into the parameters' and state's own buffers.
The step graph starts from the user's graph in *training mode* (``mode.py``: dropout active,
batch norm on batch statistics); the running statistics it computes are written into their
variables after each applied step, like the parameters.

**A non-finite step changes nothing.** The update writes straight into those buffers (buffer
donation), so NaN/inf must be caught before it runs. A ``StepPlan`` is therefore two compiled
plans with a check between them: the *gradient plan* (forward, backward, loss, penalty), then
``all_finite(loss, *gradients)`` (``finite.py``), then — only if that holds — the *update plan*
(regularization terms and updater rules, fused kernels writing in place). A refused step leaves
parameters, updater state and ``state.iteration`` exactly as they were (like the skipped steps of
PyTorch's ``GradScaler``); ``TrainStep.last_applied`` tells ``fit``, which raises or skips.

Why not one plan with ``where(ok, new, old)`` on every update: a rank-0 ``ok`` array makes each
update kernel a broadcasting (non-flat) kernel, measured 2x slower on a 784x256 weight, ~8% of
the W3 step; the split costs one plan dispatch and loses no fusion (update kernels start from
materialized gradients either way).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..array import type_of
from ..autodiff import grad
from ..compiler.cache import PLAN_CACHE, Structure, plan_flavor
from ..compiler.compile_helper import together
from ..errors import TrainingError
from ..ir import Graph, Node, VariableType, infer_node_types, needed_nodes
from ..ops import TensorType
from ..recorder import GraphRecorder
from ..execution import check_feed, typed_plan
from .config import TrainingConfig
from ..training_forms import training_graph
from .finite import all_finite
from .model import TrainableModel
from .state import UpdaterState

if TYPE_CHECKING:
    from ..pictures import Picture

_WEAK_FLOAT = type_of(1.0)


class TrainStep:
    """One training step of ``model`` under ``config`` (see the module docstring)."""

    def __init__(self, model: TrainableModel, config: TrainingConfig,
                 extra_outputs: tuple[str, ...] = ()) -> None:
        if config.updater is None:
            raise TrainingError("fit: the training config has no updater; e.g. "
                                "TrainingConfig(updater=Adam(1e-3), ...)")
        self.model, self.config = model, config
        if config.loss_variables:
            model.set_loss_variables(*config.loss_variables)
        losses = model.loss_variables
        if not losses:
            raise TrainingError("fit: no loss variables; mark one with v.mark_as_loss(), use an "
                                "sd.loss.* function, or set TrainingConfig(loss_variables=...)")
        for name in extra_outputs:  # before anything runs (donation updates in place)
            model.graph.var(name)
        # the graph in training mode (dropout on, batch statistics); the variables it updates
        # by assignment (running statistics) are not trained by gradient
        user, self.state_updates = training_graph(model.graph)
        upstream = user.upstream(losses)
        # like PyTorch/ND4J, variables no loss depends on (an unused head) are not trained
        self.params = [n for n in model.trainable_names() if user.vars[n].ttype.dtype.kind == "f"
                       and n in upstream and n not in self.state_updates]
        if not self.params:
            raise TrainingError("fit: no trainable (floating-point VARIABLE) variable affects "
                                f"the losses {list(losses)}")
        for name in config.feature_mapping + config.label_mapping:
            info = user.var(name)
            if info.vtype is not VariableType.PLACEHOLDER:
                raise TrainingError(f"fit: {name!r} in the feature/label mapping is a "
                                    f"{info.vtype.value}, not a placeholder")
        self.slots = tuple(config.updater.state_names())
        self.extra_outputs = tuple(extra_outputs)
        # the step graph: the user's graph + backward pass + update rules (the user's graph
        # itself is never changed)
        self.graph, self.grads = grad(user, losses, self.params)
        first = len(self.graph.nodes)
        # the nodes the backward pass added (a picture tells them from the forward ones)
        self.backward_nodes = frozenset(n.name for n in self.graph.nodes
                                        if n.name not in user.node_names)
        self._record_update(GraphRecorder(self.graph), losses)
        self.nodes: list[Node] = self.graph.nodes[first:]
        self._build_inputs(first)
        self._split_phases()
        # a fast path per batch type to the two plans the one plan cache holds (the cache's
        # generation tells when nd.clear_cache() emptied it)
        self._plans: dict[tuple, StepPlan] = {}
        self._generation = PLAN_CACHE.generation
        self._structures = (Structure.of(self._gradient_nodes), Structure.of(self._update_nodes))
        self._state_owner = {name: (p, s) for p, d in self.state_inputs.items()
                             for s, name in d.items()}  # placeholder -> (param, slot)
        infos = [(n, self.graph.vars[n]) for n in self._graph_inputs]
        self._placeholders = [(n, i) for n, i in infos if i.vtype is VariableType.PLACEHOLDER]
        self._fixed_names = sorted([n for n, i in infos if i.vtype is not VariableType.PLACEHOLDER]
                                   + list(self._state_owner))
        self._fixed: tuple | None = None
        self._accepted: set = set()  # (placeholder, shape) fed before as a checked ndarray
        self.last_penalty: float | None = None  # the L1/L2 penalty of the last step
        self.last_applied = True  # False: the last step's loss or a gradient was not finite

    # -- building ---------------------------------------------------------------------------
    def _build_inputs(self, first: int) -> None:
        # the forward and backward nodes the update part reads
        wanted = {i for n in self.nodes for i in n.inputs} | set(self.outputs())
        self.forward = needed_nodes(self.graph.nodes[:first], self.graph.producers(), wanted)
        # what the plan reads that is neither computed in it nor an updater input: the batch's
        # placeholders, parameters, constants (fixed per step; computed once)
        used = {i for n in self.forward + self.nodes for i in n.inputs}
        produced = {o for n in self.forward + self.nodes for o in n.outputs}
        own = {v.name for v in self.hyper_vars.values()} | set(self._state_names())
        self._graph_inputs = sorted(used - produced - own)

    def _split_phases(self) -> None:
        """Which nodes run before the finiteness check (forward, backward, loss, penalty) and
        which after it (the update rules), and what the first hands to the second."""
        updated = [self.new_params[p] for p in self.params]
        updated += [self.new_state[p][s] for p in self.params for s in self.slots]
        producers = {o: n for n in self.nodes for o in n.outputs}
        self._update_nodes = needed_nodes(self.nodes, producers, updated)
        self._update_outputs = list(dict.fromkeys(updated))
        produced = {o for n in self._update_nodes for o in n.outputs}
        reads = {i for n in self._update_nodes for i in n.inputs} - produced
        fed = (set(self._graph_inputs) | {v.name for v in self.hyper_vars.values()}
               | set(self._state_names()))
        # what the update reads that the first plan computes: the gradients, as a rule
        self._handoff = sorted(reads - fed)
        self._checked = list(dict.fromkeys([self.loss_name, *self.grads.values()]))
        first = [self.loss_name, *self.extra_outputs, *self.state_updates.values()]
        if self.penalty_name is not None:
            first.append(self.penalty_name)
        self._gradient_outputs = list(dict.fromkeys([*first, *self._checked, *self._handoff]))
        all_nodes = self.forward + self.nodes
        producers = {o: n for n in all_nodes for o in n.outputs}
        self._gradient_nodes = needed_nodes(all_nodes, producers, self._gradient_outputs)

    def _state_names(self) -> list[str]:
        """The updater-state placeholders, every parameter's slots."""
        return [name for d in self.state_inputs.values() for name in d.values()]

    def _record_update(self, rec: GraphRecorder, losses: list[str]) -> None:
        with rec.graph.name_scope("train"):
            self._record_update_rules(rec, rec.graph, self.config, losses)

    def _record_update_rules(self, rec: GraphRecorder, graph: Graph, cfg: TrainingConfig,
                             losses: list[str]) -> None:
        hyper_names = sorted(cfg.updater.hyper(0, 0))
        self.hyper_vars = {k: rec.add(VariableType.PLACEHOLDER, _WEAK_FLOAT, graph.scoped(f"hyper/{k}"))
                           for k in hyper_names}
        lr = self.hyper_vars.get("lr", self.hyper_vars.get("learning_rate"))
        if cfg.weight_decay and lr is None and cfg.weight_decay_apply_lr:
            raise TrainingError(f"fit: weight_decay with apply_lr needs the updater's learning "
                                f"rate, but {type(cfg.updater).__name__}.hyper() has no 'lr'")
        # the reported loss is the summed loss variables, as validation measures them; the
        # regularization penalty is reported on its own (gradients come from autodiff of the
        # losses, with the penalty's gradient and the maximize sign applied to them below)
        loss_terms = [rec.handle(n) for n in losses]
        total = loss_terms[0].sum() if loss_terms[0].rank else loss_terms[0]
        for t in loss_terms[1:]:
            total = total + (t.sum() if t.rank else t)
        penalty = None
        g_vars = graph.vars
        self.new_params: dict[str, str] = {}
        self.new_state: dict[str, dict[str, str]] = {}
        self.state_inputs: dict[str, dict[str, str]] = {}
        for p in self.params:
            pv, g = rec.handle(p), rec.handle(self.grads[p])
            ttype = g_vars[p].ttype
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
                state[s] = rec.add(VariableType.PLACEHOLDER, TensorType(ttype.shape, ttype.dtype),
                                   graph.scoped(f"{p}/{s}"))
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

    # -- running ----------------------------------------------------------------------------
    def outputs(self) -> list[str]:
        """Everything a step computes: loss, extra outputs, penalty, the gradients (checked for
        NaN/inf even when the updater ignores them, as ``NoOp`` does), new parameters, state."""
        names = [self.loss_name, *self.extra_outputs, *self.state_updates.values()]
        if self.penalty_name is not None:
            names.append(self.penalty_name)
        names.extend(self.grads.values())
        for p in self.params:
            names.append(self.new_params[p])
            names.extend(self.new_state[p][s] for s in self.slots)
        return names

    def prepare(self, feeds: dict[str, np.ndarray], state: UpdaterState, *,
                outer_errstate: dict | None = None) -> tuple[dict, StepPlan, tuple]:
        """A step's inputs on ``feeds`` (parameters, updater state, the schedule's scalars at
        ``state``'s counters, the batch, checked) and the ``StepPlan`` for their types (built
        once per batch type and kept); also ``_fixed_inputs(state)``. ``run`` executes these;
        ``samediff.distributed`` runs the plan's two halves apart (gradient mode)."""
        fixed = self._fixed_inputs(state)
        values = dict(fixed[0])
        hyper = self.config.updater.hyper(state.iteration, state.epoch)
        for k, var in self.hyper_vars.items():
            values[var.name] = float(hyper[k])
        shapes = []
        for name, info in self._placeholders:
            arr = feeds.get(name)
            # an ndarray of the placeholder's dtype and of a shape accepted before is taken as
            # it is (what check_feed would return); anything else goes through check_feed
            if type(arr) is np.ndarray and arr.dtype == info.ttype.dtype \
                    and (name, arr.shape) in self._accepted:
                values[name] = arr
                shapes.append((arr.shape, arr.dtype))
                continue
            if name not in feeds:
                if name in self.config.label_mapping:  # the batches carry no labels
                    raise TrainingError(
                        f"fit: label placeholder {name!r} ({info.ttype}) is missing from the "
                        f"batch (got {sorted(feeds)}); it is expected because the training "
                        f"config's label_mapping names it ({self.config.label_mapping}). Pass "
                        f"batches with labels ((features, labels) pairs, or dicts with a "
                        f"{name!r} key), or leave it out of label_mapping")
                raise TrainingError(f"fit: placeholder {name!r} ({info.ttype}) needs a value "
                                    f"from each batch; map it with TrainingConfig("
                                    f"feature_mapping=/label_mapping=) or pass dict batches "
                                    f"keyed by placeholder name (got {sorted(feeds)})")
            if outer_errstate is None:
                arr = check_feed(info, feeds[name])
            else:
                with np.errstate(**outer_errstate):
                    arr = check_feed(info, feeds[name])
            values[name] = arr
            shapes.append((arr.shape, arr.dtype))
            if type(arr) is np.ndarray and len(self._accepted) < 64:
                self._accepted.add((name, arr.shape))
        # (the executor in force too: a plan built under one must not run under another --
        # a Dask worker's cached model ran the compiled plans of an earlier task's executor)
        key = (fixed[2], tuple(shapes), plan_flavor())
        if self._generation != PLAN_CACHE.generation:  # nd.clear_cache() ran: plans are gone
            self._plans.clear()
            self._generation = PLAN_CACHE.generation
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 16:
                self._plans.clear()
            types = dict(fixed[1])
            types.update({n: TensorType(*t) for (n, _), t in zip(self._placeholders, shapes)})
            types.update({v.name: _WEAK_FLOAT for v in self.hyper_vars.values()})
            if outer_errstate is None:
                plan = self._plans[key] = self._make_plan(types)
            else:
                with np.errstate(**outer_errstate):
                    plan = self._plans[key] = self._make_plan(types)
        return values, plan, fixed

    def run(self, feeds: dict[str, np.ndarray], state: UpdaterState, *,
            outer_errstate: dict | None = None) -> tuple[float, dict]:
        """One step on a batch: updates parameters and ``state`` in place; returns the loss and
        the extra outputs asked for at construction. When the loss or a gradient is not finite
        nothing changes (parameters, state, ``state.iteration``) and ``last_applied`` is False.

        The plan runs with numpy's floating-point errors ignored. ``outer_errstate``: the
        caller has already set that for many steps (``fit`` does, per epoch: entering it costs
        ~3 us) and this is the error state outside it, used for converting feeds and building
        plans (whose warnings the user should see)."""
        values, plan, _ = self.prepare(feeds, state, outer_errstate=outer_errstate)
        # a non-finite step is reported by fit; numpy's warnings about it (interpreter, library
        # calls) would only repeat that, and compiled kernels never warn
        if outer_errstate is None:
            with np.errstate(all="ignore"):
                results, self.last_applied = plan.execute(values)
        else:
            results, self.last_applied = plan.execute(values)
        if self.last_applied:
            self.commit(results, values, state)
        self.last_penalty = (None if self.penalty_name is None
                             else float(results[self.penalty_name]))
        return float(results[self.loss_name]), {k: results[k] for k in self.extra_outputs}

    def commit(self, results: dict[str, Any], inputs: dict[str, Any],
               state: UpdaterState) -> None:
        """Make an applied step's ``results`` (a ``StepPlan``'s, by output name) the model's
        and ``state``'s: new parameters, updater arrays and running statistics written, and
        ``state.iteration`` advanced. ``inputs``: the values the step ran on (``prepare``'s),
        so a parameter whose buffer the update already wrote (donation) is not copied again.
        ``run`` calls it after a finite step; ``samediff.distributed`` after an update on
        averaged gradients."""
        model = self.model
        for p in self.params:
            new = results[self.new_params[p]]
            if new is not inputs.get(p):  # (a donated buffer already holds the update)
                model.write_value(p, new)
            for s in self.slots:
                _store(state.arrays[p][s], results[self.new_state[p][s]])
        for name, value in self.state_updates.items():  # running statistics
            model.write_value(name, results[value])
        state.iteration += 1

    @property
    def batch_placeholders(self) -> tuple[str, ...]:
        """The placeholders a step reads from each batch (features, labels...)."""
        return tuple(n for n, _ in self._placeholders)

    def _make_plan(self, types: dict[str, TensorType]) -> StepPlan:
        """Both plans for inputs of these types (exact shapes: the batch's), their kernels
        compiled as one pool (``compile_helper.together``)."""
        with together():
            return self._make_plans(types)

    def _make_plans(self, types: dict[str, TensorType]) -> StepPlan:
        gradients = typed_plan(self._gradient_nodes,
                               _inputs_of(self._gradient_nodes, self._gradient_outputs, types),
                               self._gradient_outputs, structure=self._structures[0])
        computed = infer_node_types(self._gradient_nodes, types)
        types = {**types, **{k: computed[k] for k in self._handoff}}
        # the new parameters and state are written straight into the old ones' buffers
        donate = {self.new_params[p]: p for p in self.params}
        donate.update({self.new_state[p][s]: self.state_inputs[p][s]
                       for p in self.params for s in self.slots})
        update = typed_plan(self._update_nodes,
                            _inputs_of(self._update_nodes, self._update_outputs, types),
                            self._update_outputs, donate, structure=self._structures[1])
        return StepPlan(gradients, self._gradient_outputs, self._checked, update,
                        self._update_outputs, self._handoff, sorted(set(donate.values())))

    def picture(self) -> "Picture":
        """The picture of the plans of the last batch type this step ran (``to_dot``)."""
        if not self._plans:
            raise TrainingError("to_dot: this training step has not run yet, so it has no plan "
                                "to draw; run one step (fit) first")
        plan = list(self._plans.values())[-1]
        kinds = {n: v.vtype.value.lower() for n, v in self.graph.vars.items()
                 if v.vtype is not VariableType.ARRAY}
        backward = self.backward_nodes
        return plan.picture(kinds, lambda node: "backward" if node.name in backward
                            else "forward")

    def to_dot(self) -> str:
        """Graphviz DOT text of this step's plans: the gradients plan's forward and backward
        phases, the finiteness check, the update plan; kernels as clusters."""
        return self.picture().to_dot()

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
        # the model holds the live values (set_array replaces them); literals of the update
        # rules live in the step graph
        if name in self.model.graph.vars:
            return self.model.read_value(name)
        value = self.graph.vars[name].value
        assert value is not None, name  # only valued variables are fixed inputs
        return value

    def _weak_type(self, name: str) -> TensorType | None:
        info = self.graph.vars.get(name)
        return info.ttype if info is not None and info.ttype.weak else None


class StepPlan:
    """One training step's plans: the gradient plan, the finiteness check, and the update plan
    (run only when the loss and every gradient are finite). ``execute(values)`` takes every
    input by name and returns ``({output name: value}, applied)``."""

    def __init__(self, gradients: Any, gradient_outputs: list[str], checked: list[str],
                 update: Any, update_outputs: list[str], handoff: list[str],
                 written: list[str]) -> None:
        self.gradients, self.update = gradients, update
        self._gradient_outputs, self._checked = gradient_outputs, checked
        self._update_outputs, self._handoff, self._written = update_outputs, handoff, written

    @property
    def kind(self) -> str:
        kinds = dict.fromkeys([self.gradients.kind, self.update.kind])
        return "+".join(kinds)

    @property
    def donations(self) -> int:
        """Outputs of the update plan written into their input's buffer (``CompiledPlan``)."""
        return getattr(self.update, "donations", 0)

    @property
    def handoff(self) -> list[str]:
        """What the update plan reads that the gradient plan computes (the gradients)."""
        return self._handoff

    def execute(self, values: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Both halves: ``run_gradients``, then ``run_update`` only if the check held."""
        results, finite = self.run_gradients(values)
        if not finite:
            return results, False
        return self.run_update(values, results), True

    def run_gradients(self, values: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The gradient plan on ``values`` (every input by name): ``({output: value}, finite)``
        — ``finite`` when the loss and every gradient are. Nothing is written."""
        first = self.gradients.execute([values[k] for k in self.gradients.input_slots])
        results = dict(zip(self._gradient_outputs, first))
        return results, all_finite(*[results[k] for k in self._checked])

    def run_update(self, values: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
        """The update plan on ``values`` and the gradient plan's ``results`` (at least the
        ``handoff`` names); returns ``results`` with the new parameters and state added.
        Writes the parameters' and state's buffers in place (donation)."""
        values = {**values, **results}
        self._unshare(values)
        second = self.update.execute([values[k] for k in self.update.input_slots])
        results.update(zip(self._update_outputs, second))
        return results

    def _unshare(self, values: dict[str, Any]) -> None:
        """Copy a handed-over value (a gradient) that shares its buffer with one the update
        writes in place — say the gradient is a reshaped parameter: the update plan cannot see
        that, and the gradient must not change while the update runs."""
        written = {id(_owner(values[k])) for k in self._written}
        for k in self._handoff:
            if id(_owner(values[k])) in written:
                values[k] = np.array(values[k], copy=True)

    def picture(self, kinds: dict[str, str] = {},  # noqa: B006 (read only)
                phase_of: Any = None) -> "Picture":
        """Both plans and the check between them (``samediff.pictures.step_picture``)."""
        from ..pictures import step_picture  # (down a layer; drawing is not paid at import)
        return step_picture(self.gradients, self.update, self._checked, kinds, phase_of)

    def to_dot(self) -> str:
        """Graphviz DOT text of the gradients plan, the check and the update plan."""
        return self.picture().to_dot()

    def explain(self) -> str:
        return (f"gradients {self.gradients.explain()}\n"
                f"then, if the loss and all gradients are finite, update {self.update.explain()}")


def _owner(value: Any) -> Any:
    """The object owning an array's memory (numpy points every view at it)."""
    base = getattr(value, "base", None)
    return value if base is None else base


def _inputs_of(nodes: list[Node], outputs: list[str],
               types: dict[str, TensorType]) -> dict[str, TensorType]:
    """The entries of ``types`` that ``nodes`` (computing ``outputs``) read: a plan's inputs."""
    used = {i for n in nodes for i in n.inputs} | set(outputs)
    return {k: t for k, t in types.items() if k in used}


def _store(target: np.ndarray, value: np.ndarray) -> None:
    if value is not target:  # a donated buffer already holds the update
        np.copyto(target, value)
