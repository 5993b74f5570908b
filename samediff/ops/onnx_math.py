"""Table ops added for ONNX import (math family): see samediff/onnx/converters/math*.py."""
from __future__ import annotations
