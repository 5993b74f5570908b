"""ONNX converters of bytes and text: StringConcat, StringSplit, RegexFullMatch and
StringNormalizer, each one table op of ``samediff/ops/strings.py`` on UTF8 tensors (ONNX's
``STRING`` element type). ``Equal`` on strings, ``Cast`` to and from ``STRING`` and the
data-movement ops need nothing here: their table ops take UTF8 (``strings=True``).

A node the table op cannot serve as ONNX means it is refused at import, by name: an invalid
or non-RE2 regex, an unknown case action, a locale whose casing nd4py does not apply, a
StringNormalizer input that is neither ``[C]`` nor ``[1, C]``. ImageDecoder (an image file's
bytes to pixels) is ``decode_image`` of ``samediff/ops/image.py``.
"""
from __future__ import annotations

from ...dtypes import is_string
from ...ops.strings import check_re2
from ..table import converter


def _text(node, i: int):
    """Input ``i``, which must be a string tensor."""
    x = node.input(i)
    if not is_string(node.dtype(x)):
        raise node.fail(f"input {i} must be a string tensor, got {node.dtype(x)}")
    return x


@converter("StringConcat", since=20)
def _string_concat(node):
    return node.op("string_concat", _text(node, 0), _text(node, 1))


@converter("StringSplit", since=20)
def _string_split(node):
    maxsplit = node.attr("maxsplit")
    if maxsplit is not None and int(maxsplit) < 0:
        raise node.fail(f"maxsplit must be >= 0 (or unset: no limit), got {maxsplit}")
    delimiter = node.attr("delimiter") or None  # ("" and unset: runs of whitespace)
    return node.op("string_split", _text(node, 0), delimiter=delimiter,
                   maxsplit=None if maxsplit is None else int(maxsplit))


@converter("RegexFullMatch", since=20)
def _regex_full_match(node):
    pattern = node.attr("pattern")
    if pattern is None:
        raise node.fail("the pattern attribute is required")
    try:
        check_re2(pattern)
    except ValueError as exc:
        raise node.fail(str(exc)) from None
    return node.op("regex_full_match", _text(node, 0), pattern=pattern)


@converter("StringNormalizer", since=10)
def _string_normalizer(node):
    x = _text(node, 0)
    shape = node.shape(x)
    if not (len(shape) == 1 or (len(shape) == 2 and shape[0] in (1, -1))):
        raise node.fail(f"the input must be [C] or [1, C] (ONNX StringNormalizer), got "
                        f"{list(shape)}")
    action = node.attr("case_change_action", "NONE")
    if action not in ("NONE", "LOWER", "UPPER"):
        raise node.fail(f"case_change_action {action!r} is not one of NONE, LOWER, UPPER")
    try:
        return node.op("string_normalize", x, case_change_action=action,
                       is_case_sensitive=bool(node.attr("is_case_sensitive", 0)),
                       stopwords=list(node.attr("stopwords", [])),
                       locale=node.attr("locale", ""))
    except Exception as exc:  # noqa: BLE001 - the op's checks (the locale) name the problem
        raise node.fail(str(exc)) from None


@converter("ImageDecoder", since=20)
def _image_decoder(node):
    """An encoded image file (uint8 bytes) to ``[H, W, C]`` pixels (``decode_image``:
    Pillow decodes; the ``image`` extra)."""
    fmt = node.attr("pixel_format", "RGB")
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt not in ("RGB", "BGR", "Grayscale"):
        raise node.fail(f"pixel_format {fmt!r} is not one of RGB, BGR, Grayscale")
    return node.op("decode_image", node.input(0), pixel_format=fmt)
