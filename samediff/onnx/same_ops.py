"""ONNX ops that are exactly one table op on the same inputs, with no attributes: the
importer converts them by this table and the exporter writes them by its inverse, so the two
directions cannot disagree.

>>> SAME["Round"], SAME_BACK["round_half_even"]
('round_half_even', 'Round')
"""
from __future__ import annotations

__all__ = ["SAME", "SAME_BACK"]

#: ONNX op type -> table op
SAME = {
    "Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Ceil": "ceil",
    "Floor": "floor", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos",
    "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
    "Atanh": "atanh", "Tanh": "tanh", "Sigmoid": "sigmoid", "Erf": "erf", "Sign": "sign",
    "Reciprocal": "reciprocal", "Not": "logical_not", "Softsign": "softsign",
    "Softplus": "softplus", "IsNaN": "isnan", "Relu": "relu", "Mish": "mish",
    "Identity": "identity", "Round": "round_half_even",
    "Add": "add", "Sub": "sub", "Mul": "mul", "Equal": "eq", "Less": "lt", "Greater": "gt",
    "LessOrEqual": "lte", "GreaterOrEqual": "gte", "And": "logical_and", "Or": "logical_or",
    "Xor": "logical_xor",
}

#: table op -> ONNX op: the inverse, plus table ops whose ONNX form is one op but whose import
#: takes more than one table op (ONNX's integer Div truncates, Pow keeps the base's type,
#: Max/Min are variadic, Where is checked by its own converter), and ``stop_gradient``
#: (the identity forward). ``relu`` and ``mish`` have exporters of their own (a cutoff; Mish
#: needs opset 18).
SAME_BACK = {table: onnx for onnx, table in SAME.items() if table not in ("relu", "mish")}
SAME_BACK.update({"div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min",
                  "where": "Where", "stop_gradient": "Identity"})
