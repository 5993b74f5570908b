"""tracing: turns eager nd4py calls into SameDiff graphs (graph_scope, LazyArray, compile).

It sits between ``samediff`` (op table, graph, interpreter) and the ``nd4py`` façade: it plugs
a trace into ``samediff.array.CURRENT_TRACE``, the one place every op call consults.
"""
