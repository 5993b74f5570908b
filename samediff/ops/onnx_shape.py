"""Table ops added for ONNX import (shape family): see samediff/onnx/converters/shape*.py."""
from __future__ import annotations
