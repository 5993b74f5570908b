"""The named errors of nd4py. Each says which op or name is involved and what to do.

They subclass the builtin a Python user would try to catch (``ValueError``, ``TypeError``,
``KeyError``) so generic handlers keep working.
"""
from __future__ import annotations

from typing import Callable


class NdError(Exception):
    """Base class of every nd4py error."""


class OpError(NdError, ValueError):
    """An op was called with inputs or attributes it cannot accept (shape, dtype, attr)."""


class ArgumentConflictError(OpError, TypeError):
    """One parameter of an op call was given twice: by two spellings (``axis=`` and
    ``dims=``), positionally and by keyword, or an output name both first and as ``name=``
    (Python's "got multiple values for argument"). Also an ``OpError``, as before."""


class NdDTypeError(NdError, TypeError):
    """A data type is unknown, unsupported, or wrong for an op."""


class GraphError(NdError, ValueError):
    """A SameDiff graph was used inconsistently (mixing graphs, duplicate names, bad conversions)."""


class UnknownVariableError(NdError, KeyError):
    """A variable name is not in the graph."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class PlaceholderError(NdError, ValueError):
    """A placeholder value is missing or contradicts the placeholder's declared shape/dtype."""


class TracingError(NdError, RuntimeError):
    """A traced (lazy) array was used in a way tracing cannot support, e.g. reading its data
    before its ``graph_scope`` ended, or touching it after the scope failed."""


class ConcretizationError(TracingError, TypeError):
    """A symbolic value (a traced array inside ``nd.compile``/``graph_scope``, a value being
    recorded by ``nd.grad``, a SameDiff variable) was asked for its data: ``if x > 0:``,
    ``float(x)``, ``x.item()``. It has none while the Python function runs (JAX's
    ``ConcretizationTypeError``); it is also a ``TypeError``, as Python's own conversions raise."""


class SerializationError(NdError, ValueError):
    """A SameDiff graph could not be saved or loaded."""


class CorruptFileError(SerializationError):
    """A saved graph file is truncated, damaged, or contradicts itself (arrays vs graph)."""


class UnsafeFileError(CorruptFileError):
    """A saved graph file holds data that could run code if loaded (e.g. a pickled object
    array); it is refused and never unpickled."""


class SaveError(SerializationError, OSError):
    """A graph could not be written (missing or unwritable directory, full disk...). The message
    names the target and what to do; the previous file at the target, if any, is unchanged.
    It is also an ``OSError`` carrying the original ``errno``, so ``except OSError`` still works."""


class FormatVersionError(SerializationError):
    """A file is not an nd4py SameDiff file, or was written by a newer, unsupported version."""


class UnknownOpError(SerializationError):
    """A saved graph uses an op that is not registered (e.g. a user-defined op whose module
    has not been imported yet)."""


class TrainingError(NdError, ValueError):
    """Training was configured or fed inconsistently (bad hyper-parameter, missing training
    config, data that does not match the feature/label placeholders...)."""


class DatasetError(NdError, ValueError):
    """A dataset file is missing, truncated or malformed, or a dataset's optional dependency
    is not installed; the message names the file (or package) and what is wrong."""


class EvaluationError(NdError, ValueError):
    """An evaluator (``Evaluation``, ``ROC``, ``RegressionEvaluation``...) was fed labels,
    predictions or masks it cannot use (shapes, class counts, NaN), or merged with an evaluator
    of another kind or configuration."""


class ConfigError(NdError, ValueError):
    """A setting (cache size, executor, option) was given a value it cannot take."""


class NdIndexError(NdError, IndexError):
    """An element index is out of range for an array's shape (or has the wrong number of
    indices)."""


class OpIndexError(OpError, NdIndexError):
    """An op's index is out of range for its input (``x[5]`` of a 4-element array, a
    ``gather`` index): an ``OpError`` like every bad op call, and an ``IndexError``, which
    numpy users catch."""


class NdAttributeError(NdError, AttributeError):
    """An array or graph variable has no attribute of that name (``x.summ()``). ``hint()``
    adds "did you mean 'sum'?" when the message is shown: ``hasattr`` probes, which only catch
    the error, never pay for the search."""

    def __init__(self, message: str, hint: Callable[[], str] = str) -> None:
        super().__init__(message)
        self._hint = hint

    def __str__(self) -> str:
        return f"{self.args[0]}{self._hint()}"


class GradientError(NdError, ValueError):
    """A gradient was asked for that cannot be computed (no path, non-differentiable op...)."""
