"""Table ops added for ONNX import (nn family): see samediff/onnx/converters/nn*.py."""
from __future__ import annotations
