"""ONNX converters: the nn family."""
from __future__ import annotations

from ..table import converter  # noqa: F401
