"""Ops that carry sub-graphs (control flow), above the interpreter, the plan cache and autodiff.

An op here is an ordinary op of the table (registered on import, the way ``samediff.udf``
registers user-defined ops) whose bodies are graph-valued attributes named by its
``OpDef.bodies`` fact. That one fact is what the rest of the system reads: the compiler keeps
such a node one library call (never merged or folded when a body draws random numbers) and
``explain()`` shows its bodies, ``summary()`` prints them indented, the serializer saves them
in the graph's JSON, and the op's own rules — written here, where running, typing and
differentiating a graph are available — run the taken body through the plan cache, type both
bodies, and differentiate by building VJP bodies. Nothing below this package imports it;
``samediff/__init__.py`` imports it, so its ops exist before any saved graph is loaded.

* ``bodies.py`` — recording a Python function as a body (``trace_body``), running a body
  through the plan cache (``run_body``), and the named errors.
* ``cond.py`` — ``cond`` (the op, ``nd.cond``, and ND4J's ``sd.ifCond``) and ``switch`` (a
  chain of ``cond`` s).
* ``loops.py`` — ``scan`` (the op and ``nd.scan``; its gradient is a reverse scan) and
  ``fori_loop`` (a scan with a counter).
* ``while_loop.py`` — ``while_loop`` (the op, ``nd.while_loop`` and ND4J's ``sd.whileLoop``),
  with two gradients: save every carry, or binomial checkpointing.
* ``nd4j_methods.py`` — ``sd.ifCond`` / ``sd.whileLoop``, a mixin of ``SameDiff``.

>>> import nd4py as nd
>>> nd.cond(nd.create(True), lambda x: x + 1, lambda x: x - 1, nd.create([1.0])).numpy().tolist()
[2.0]
"""
from .bodies import (BranchMismatchError, CaptureError, PredicateError, run_body,  # noqa: F401
                     trace_body)
from .cond import COND, cond, if_cond, switch  # noqa: F401
from .loops import SCAN, CarryError, fori_loop, scan  # noqa: F401
from .while_loop import WHILE, while_loop, while_loop_nd4j  # noqa: F401

__all__ = ["BranchMismatchError", "CaptureError", "PredicateError", "COND", "cond", "if_cond",
           "switch", "SCAN", "CarryError", "fori_loop", "scan", "WHILE", "while_loop",
           "while_loop_nd4j", "run_body", "trace_body"]
