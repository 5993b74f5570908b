"""ND4J's control-flow methods of ``SameDiff`` — ``ifCond`` and ``whileLoop`` with their call
forms — as a mixin the facade inherits, so the facade's file keeps to graphs, variables and
running them."""
from __future__ import annotations

from typing import Any

from .cond import if_cond
from .while_loop import while_loop_nd4j


class ControlFlowMethods:
    """``sd.ifCond`` / ``sd.whileLoop`` (and their snake_case names)."""

    def if_cond(self, out_name: Any, if_name: Any = None, cond: Any = None,
                true_body: Any = None, false_body: Any = None, *, inputs: Any = ()) -> Any:
        """ND4J's ``ifCond(outName, ifName, cond, trueBody, falseBody)`` (also
        ``ifCond(cond, trueBody, falseBody)``): lambdas taking ``(sd, inputs)``; ``cond``
        returns a BOOL scalar of this graph, each body its result(s), recorded as the branches
        of one ``cond`` node (only the taken one runs). ``inputs``: the variables handed to
        the lambdas — a body reads only those (``samediff.control.cond``)."""
        if callable(out_name):  # ifCond(cond, trueBody, falseBody)
            out_name, if_name, cond, true_body, false_body = None, None, out_name, if_name, cond
        return if_cond(self, out_name, if_name, cond, true_body, false_body, inputs)

    ifCond = if_cond

    def while_loop(self, out_names: Any, loop_name: Any = None, loop_vars: Any = None,
                   cond: Any = None, body: Any = None) -> list:
        """ND4J's ``whileLoop(outputNames, loopName, loopVars, cond, body)`` (also
        ``whileLoop(loopVars, cond, body)``): lambdas taking ``(sd, inputs)``; ``cond``
        returns a BOOL scalar, ``body`` the new loop variables; one ``while_loop`` node
        (``samediff.control.while_loop``)."""
        if callable(loop_name):  # whileLoop(loopVars, cond, body)
            out_names, loop_name, loop_vars, cond, body = (None, None, out_names, loop_name,
                                                           loop_vars)
        return while_loop_nd4j(self, out_names, loop_name, loop_vars, cond, body)

    whileLoop = while_loop
