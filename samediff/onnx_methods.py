"""ONNX methods of ``SameDiff`` -- ``import_onnx`` / ``importOnnx`` and ``to_onnx`` -- as a
mixin the facade inherits (as ``ControlFlowMethods``), so the facade's file keeps to graphs,
variables and running them. ``samediff.onnx`` (and the ``onnx`` package) load on first call."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


class OnnxMethods:
    """``SameDiff.import_onnx`` (also ``importOnnx``) and ``sd.to_onnx``."""

    @staticmethod
    def import_onnx(model: Any, *, trainable: bool = False,
                    static_inputs: Mapping[str, Any] | None = None,
                    sequence_inputs: Mapping[str, Any] | None = None) -> Any:
        """An ONNX model (a path, bytes or ``onnx.ModelProto``) as a SameDiff graph
        (``samediff.onnx.import_onnx``; needs ``pip install 'nd4py[onnx]'``). ND4J's importer
        is ``OnnxFrameworkImporter.runImport``; here also ``SameDiff.importOnnx``."""
        from .onnx import import_onnx
        return import_onnx(model, trainable=trainable, static_inputs=static_inputs,
                           sequence_inputs=sequence_inputs)

    importOnnx = import_onnx

    def to_onnx(self, path: Any = None, *, opset: int = 17,
                outputs: Sequence[str] | None = None) -> Any:
        """This graph as an ONNX model (``samediff.onnx.export.to_onnx``), written to ``path``
        when given; an ``OnnxExportError`` lists every node whose op has no ONNX form."""
        from .onnx.export import to_onnx
        return to_onnx(self, path, opset=opset, outputs=outputs)
