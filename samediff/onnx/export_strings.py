"""Exporters of the string ops (``samediff/ops/strings.py``) and ``decode_image``: each is
one ONNX node of the same meaning. ``StringConcat``, ``StringSplit``, ``RegexFullMatch`` and
``ImageDecoder`` exist from opset 20, so a graph using them exports at opset 20 or later (a
named error below it); ``StringNormalizer`` from opset 10."""
from __future__ import annotations

from . import converters  # noqa: F401 - fills the converter table read below
from .exporting import ExportContext, exports
from .table import supported


def _emit(ctx: ExportContext, node, onnx_op: str, **attrs) -> None:
    # the opset the op first appeared in: the importer's converter starts there too
    first = supported()[("", onnx_op)][0]
    if ctx.opset < first:
        raise ctx.fail(node, f"ONNX {onnx_op} needs opset {first} or later; "
                             f"export with to_onnx(..., opset={first})")
    ctx.emit(onnx_op, node.inputs, node.outputs, **attrs)


@exports("string_concat")
def _string_concat(ctx: ExportContext, node) -> None:
    _emit(ctx, node, "StringConcat")


@exports("string_split")
def _string_split(ctx: ExportContext, node) -> None:
    _emit(ctx, node, "StringSplit", delimiter=node.attrs.delimiter or None,
          maxsplit=node.attrs.maxsplit)


@exports("regex_full_match")
def _regex_full_match(ctx: ExportContext, node) -> None:
    _emit(ctx, node, "RegexFullMatch", pattern=node.attrs.pattern)


@exports("string_normalize")
def _string_normalize(ctx: ExportContext, node) -> None:
    a = node.attrs
    _emit(ctx, node, "StringNormalizer", case_change_action=a.case_change_action,
          is_case_sensitive=int(a.is_case_sensitive), stopwords=list(a.stopwords) or None,
          locale=a.locale or None)


@exports("decode_image")
def _decode_image(ctx: ExportContext, node) -> None:
    _emit(ctx, node, "ImageDecoder", pixel_format=node.attrs.pixel_format)
