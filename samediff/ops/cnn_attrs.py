"""Attribute kinds of the cnn ops, for any number of spatial axes: window sizes (kernel,
stride, dilation), padding, output sizes and layout names.

One int stands for every spatial axis (``stride=2``); ``n`` ints give one per axis. With one
spatial axis (conv1d, 1-D pooling) the value is a plain int. Padding is also ``"valid"`` (no
padding) or ``"same"`` (ND4J's ``isSameMode``: ``out = ceil(in / stride)``, kept as the string;
each op's geometry resolves it).
"""
from __future__ import annotations

from typing import Any

from .registry import Attr, AttrKind


def ints(v: Any, n: int, minimum: int) -> Any:
    """``v`` (an int or ``n`` ints, each >= ``minimum``) as ``n`` ints; a plain int if n == 1."""
    t = Attr.INTS.coerce(v)
    if len(t) == 1:
        t = t * n
    if len(t) != n or min(t) < minimum:
        what = "an int" if n == 1 else f"an int or {n} ints"
        raise ValueError(f"expected {what}, each >= {minimum}, got {v!r}")
    return t[0] if n == 1 else t


def window(n: int, minimum: int = 1) -> AttrKind:
    """Kernel, stride or dilation over ``n`` spatial axes."""
    return AttrKind(f"int>={minimum}" if n == 1 else f"int{n}", lambda v: ints(v, n, minimum))


def padding(n: int) -> AttrKind:
    """Padding before (and after) each of ``n`` spatial axes, ``"valid"`` or ``"same"``."""
    def coerce(v: Any) -> Any:
        if isinstance(v, str):
            low = v.lower()
            if low not in ("same", "valid"):
                raise ValueError(f'padding must be an int, {n} ints, "same" or "valid", '
                                 f'got {v!r}')
            return "same" if low == "same" else ints(0, n, 0)
        return ints(v, n, 0)
    return AttrKind(f"padding{n}", coerce)


def sizes(n: int) -> AttrKind:
    """Optional positive sizes of ``n`` spatial axes (``None``: inferred)."""
    return AttrKind(f"sizes{n}?", lambda v: None if v is None else ints(v, n, 1))


#: ND4J's ``WeightsFormat`` names of our layouts
_ALIASES = {"YXIO": "HWIO", "OIYX": "OIHW"}


def choice(*options: str) -> AttrKind:
    """One of the names ``options`` (any case): layout names are upper case (ND4J's
    weight-format names accepted), other names (``"relu"``) lower case."""
    def coerce(v: Any) -> str:
        s = Attr.STR.coerce(v)
        s = s.upper() if options[0].isupper() else s.lower()
        s = _ALIASES.get(s, s)
        if s not in options:
            raise ValueError(f"expected one of {options}, got {v!r}")
        return s
    return AttrKind("|".join(options), coerce)
