"""``graph_scope()``: trace a block of eager code, then plan, cache, execute and materialize.

>>> import nd4py as nd
>>> a, b = nd.ones(2, 3), nd.ones(3, 4)
>>> with nd.graph_scope() as scope:
...     out = nd.nn.relu(nd.matmul(a, b) - 1)
>>> out.numpy().tolist()[0]
[2.0, 2.0, 2.0, 2.0]
"""
from __future__ import annotations

import sys
from typing import Any

from samediff.array import CURRENT_TRACE
from samediff.compiler.cache import PLAN_CACHE
from samediff.errors import TracingError
from samediff.samediff import SameDiff

from .trace import Trace


class GraphScope:
    """Records the ops of a block into a graph; ``end()`` (or leaving ``with``) runs it.

    Scopes nest by joining: a scope begun while another scope (or a compiled function's
    trace) is tracing on this thread records into that outer trace, as a nested ``jax.jit``
    inlines, so a library function that opens its own scope composes with its caller's. The
    inner scope's arrays stay traced until the outer scope ends (ND4J refuses nested scopes;
    joining keeps the contract that matters: each array gets the eager value once its
    outermost scope ends). A joined scope keeps its own ``training`` mode for the ops of its
    block. A compiled function called inside a scope is inlined the same way.

    >>> import nd4py as nd
    >>> def library_fn(v):
    ...     with nd.graph_scope():          # joins the caller's scope when there is one
    ...         return nd.exp(v) + 1
    >>> z = nd.zeros(2)
    >>> with nd.graph_scope() as outer:
    ...     y = library_fn(z) * 2
    >>> y.numpy().tolist(), [n.op.name for n in outer.graph.graph.nodes]
    ([4.0, 4.0], ['exp', 'add', 'mul'])
    """

    def __init__(self, name: str | None = None, training: bool = False) -> None:
        if name is None:
            frame = sys._getframe(1)
            name = f"graph_scope at {frame.f_code.co_filename}:{frame.f_lineno}"
        self.name = name
        self.training = training
        self._trace: Trace | None = None
        self._token: Any = None
        self._done: Trace | None = None
        self._out_slots: tuple[int, ...] = ()
        self.plan: Any = None
        self._entered = False  # begun by ``with``: ND4J's explicit begin() inside is the same
        self._joined_mode: bool | None = None  # joined an outer trace: its mode to restore
        self._joined: str | None = None  # the owner of the trace this scope joined

    def begin(self) -> "GraphScope":
        if self._trace is not None and self._entered:
            self._entered = False  # try (GraphScope scope = ...) { scope.begin(); ... }
            return self
        if self._trace is not None:
            raise TracingError(f"{self.name}: begin() called twice")
        outer = CURRENT_TRACE.get()
        if outer is not None:  # join: record into the outer trace, in this scope's mode
            self._trace, self._joined_mode = outer, outer.training
            outer.training = self.training
            return self
        self._trace = Trace(owner=self.name, training=self.training)
        self._token = CURRENT_TRACE.set(self._trace)
        return self

    def end(self) -> "GraphScope":
        """Stop tracing; plan (or fetch the cached plan), execute, materialize. A scope that
        joined an outer one only leaves it: the outer scope's end runs everything."""
        if self._joined_mode is not None:
            self._leave_outer()
            return self
        trace = self._close()
        self.plan, self._out_slots = trace.finish()
        self._done = trace
        return self

    def abort(self) -> None:
        """Discard the trace without executing anything (arrays from it become unusable).
        A joined scope leaves the outer trace as it is: its ops are the outer block's, as if
        written there, and the exception that aborted it reaches the outer block."""
        if self._joined_mode is not None:
            self._leave_outer()
            return
        self._close().discard()

    def _leave_outer(self) -> None:
        trace = self._trace
        if CURRENT_TRACE.get() is not trace:
            raise TracingError(f"{self.name}: ended after the scope it joined ({trace.owner}) "
                               f"ended; end nested scopes before their outer scope")
        trace.training, self._joined_mode, self._trace = self._joined_mode, None, None
        self._joined = trace.owner

    def close(self) -> None:
        """ND4J's ``close()`` (what try-with-resources calls): discard a trace still open
        (nothing runs), else nothing; safe to call more than once."""
        if self._trace is not None:
            self.abort()

    def _close(self) -> Trace:
        if self._trace is None:
            raise TracingError(f"{self.name}: end() without begin()")
        trace, self._trace = self._trace, None
        CURRENT_TRACE.reset(self._token)
        return trace

    def __enter__(self) -> "GraphScope":
        self.begin()
        self._entered = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self._entered = False
        if self._trace is None:  # ended (or closed) inside the block, as in ND4J's port
            return False
        if exc_type is None:
            self.end()
        else:
            self.abort()
        return False

    # -- inspection -----------------------------------------------------------------------
    @property
    def graph(self) -> SameDiff:
        """The traced graph as a SameDiff (after the scope ended)."""
        if self._done is None:
            if self._joined is not None:
                raise TracingError(f"{self.name}: this scope joined {self._joined}, which traced and "
                                   f"planned its ops; ask that scope for the graph")
            raise TracingError(f"{self.name}: the graph is available after the scope ends")
        return self._done.to_samediff(self._out_slots)

    def summary(self) -> str:
        return self.graph.summary()

    def explain(self) -> str:
        """The traced graph, the plan that ran it, and the plan-cache statistics."""
        return "\n".join([self.summary(), self.plan.explain(),
                          f"cache: {PLAN_CACHE.stats.as_dict()}"])


def graph_scope(name: str | None = None, *, training: bool = False) -> GraphScope:
    """Trace the ops of a ``with`` block (or ``begin()``/``end()``) into one planned graph.

    ``training=True`` traces in training mode: dropout drops and batch norm uses the batch's
    statistics (``samediff/ops/train_mode.py``)."""
    if name is None:
        frame = sys._getframe(1)
        name = f"graph_scope at {frame.f_code.co_filename}:{frame.f_lineno}"
    return GraphScope(name, training)
