"""Elementwise ONNX ops: unary math and activations, numpy-broadcasting binary ops,
comparisons and logic, variadic Sum/Mean/Max/Min, Where, Clip, Cast."""
from __future__ import annotations

import numpy as np

from ...ops import get_op
from ..same_ops import SAME
from ..table import converter

def _unary(op: str):
    def convert(node):
        return node.op(op, node.input(0))
    return convert


def _binary(op: str):
    def convert(node):
        return node.op(op, node.input(0), node.input(1))
    return convert


for _onnx, _op in SAME.items():
    converter(_onnx)((_unary if get_op(_op).inputs == ("x",) else _binary)(_op))


@converter("Div")
def _div(node):
    a, b = node.input(0), node.input(1)
    if node.dtype(a).kind in "iu":  # ONNX integer division truncates toward zero
        q = node.op("floor_div", node.op("abs", a), node.op("abs", b))
        neg = node.op("logical_xor", node.op("lt", a, np.zeros((), node.dtype(a))),
                      node.op("lt", b, np.zeros((), node.dtype(b))))
        return node.op("where", neg, node.op("neg", q), q)
    return node.op("div", a, b)


@converter("Pow")
def _pow(node):
    x, y = node.input(0), node.input(1)
    out = node.op("pow", x, y)
    if node.dtype(out) != node.dtype(x):  # ONNX: the result has the base's type
        out = node.op("cast", out, dtype=node.dtype(x))
    return out


@converter(("Sum", "Mean", "Max", "Min"))
def _variadic(node):
    op = {"Sum": "add", "Mean": "add", "Max": "maximum", "Min": "minimum"}[node.op_type]
    values = node.inputs()
    out = values[0]
    for v in values[1:]:
        out = node.op(op, out, v)
    if node.op_type == "Mean":
        out = node.op("div", out, np.asarray(len(values), node.dtype(out)))
    elif len(values) == 1:
        out = node.op("identity", out)
    return out


@converter("Where", since=9)
def _where(node):
    return node.op("where", node.input(0), node.input(1), node.input(2))


@converter("Cast")
def _cast(node):
    from ..dtypes import np_dtype
    return _cast_to(node, node.input(0), np_dtype(node.attr("to")))


@converter("CastLike", since=15)
def _cast_like(node):
    return _cast_to(node, node.input(0), node.dtype(node.input(1)))


#: the float8 types whose conversions saturate (``saturate=1``, ONNX's default): Cast,
#: CastLike and QuantizeLinear
FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def saturating_cast(node, x, dtype: np.dtype):
    """``x`` as ``dtype``, by numpy's conversion -- except that to a float8 type with the
    node's ``saturate`` (default 1) out-of-range values and infinities become the largest
    finite value of their sign (NaN stays NaN)."""
    if dtype.name in FLOAT8 and node.attr("saturate", 1) and node.dtype(x) != np.bool_:
        import ml_dtypes
        top = float(ml_dtypes.finfo(dtype).max)
        x = node.op("clip_by_value", x, clip_min=-top, clip_max=top)
    return node.op("cast", x, dtype=dtype)


def _cast_to(node, x, dtype: np.dtype):
    """ONNX's Cast: ``saturating_cast``, and float8_e8m0 rounding its exponent by
    ``round_mode``."""
    if dtype.name == "float8_e8m0fnu":
        return _to_e8m0(node, x, bool(node.attr("saturate", 1)),
                        str(node.attr("round_mode", "up")))
    return saturating_cast(node, x, dtype)


def _to_e8m0(node, x, saturate: bool, mode: str):
    """float8_e8m0fnu (a power of two 2**(e - 127), no sign, 0xFF NaN) from float32's
    exponent field, rounded up/down/nearest by the mantissa as ONNX defines (saturating at
    the largest exponent); NaN and infinity become NaN. Built from bit ops on the float32
    bits, since numpy's conversion (ml_dtypes') rounds differently."""
    if mode not in ("up", "down", "nearest"):
        raise node.fail(f"round_mode {mode!r} is not one of 'up', 'down', 'nearest'")
    u32 = np.dtype(np.uint32)

    def k(v: int) -> np.ndarray:
        return np.asarray(v, u32)

    bits = node.op("bitcast", node.op("cast", x, dtype=np.float32), dtype=u32)
    exp = node.op("bitwise_and", node.op("right_shift", bits, k(23)), k(0xFF))
    normal = node.op("neq", exp, k(0xFF))

    def bit_set(mask: int):
        return node.op("neq", node.op("bitwise_and", bits, k(mask)), k(0))
    if mode == "up":
        up = bit_set(0x7FFFFF)
    elif mode == "nearest":  # guard bit, and then round, sticky or a non-zero exponent
        sticky = node.op("logical_or", bit_set(0x200000), bit_set(0x1FFFFF))
        tie_break = node.op("logical_or", sticky, node.op("neq", exp, k(0)))
        up = node.op("logical_and", bit_set(0x400000), tie_break)
    else:
        up = None
    if up is not None:
        up = node.op("logical_and", up, normal)
        if saturate:
            up = node.op("logical_and", up, node.op("neq", exp, k(0xFE)))
        exp = node.op("add", exp, node.op("cast", up, dtype=u32))
    exp = node.op("where", normal, node.op("bitwise_and", exp, k(0xFF)), k(0xFF))
    return node.op("bitcast", node.op("cast", exp, dtype=np.uint8),
                   dtype=np.dtype("float8_e8m0fnu"))


@converter("Clip", since=(1, 11))
def _clip(node):
    x = node.input(0)
    dtype = node.dtype(x)
    if node.opset < 11:
        lo, hi = node.attr("min", None), node.attr("max", None)
    else:
        lo, hi = node.static(1, "min"), node.static(2, "max")
    out = x
    if lo is not None:
        out = node.op("maximum", out, np.asarray(lo, dtype))
    if hi is not None:
        out = node.op("minimum", out, np.asarray(hi, dtype))
    return out if out is not x else node.op("identity", x)


@converter("LeakyRelu")
def _leaky_relu(node):
    return node.op("leaky_relu", node.input(0), alpha=float(node.attr("alpha", 0.01)))


@converter("Elu")
def _elu(node):
    return node.op("elu", node.input(0), alpha=float(node.attr("alpha", 1.0)))


@converter("Selu")
def _selu(node):
    x = node.input(0)
    dtype = node.dtype(x)
    alpha = np.asarray(node.attr("alpha", 1.67326319217681884765625), dtype)
    gamma = np.asarray(node.attr("gamma", 1.05070102214813232421875), dtype)
    neg = node.op("mul", alpha, node.op("expm1", x))
    return node.op("mul", gamma, node.op("where", node.op("gt", x, np.zeros((), dtype)), x, neg))
