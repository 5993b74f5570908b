"""ONNX converters: the math family."""
from __future__ import annotations

from ..table import converter  # noqa: F401
