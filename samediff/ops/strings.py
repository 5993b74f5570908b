"""String (UTF8) table ops, and ``cast``'s rules for strings.

UTF8 tensors are numpy >= 2 ``StringDType`` arrays (``samediff.dtypes.UTF8``). The ops here
take and give them; none is differentiable (text has no derivative, and the numeric outputs --
counts, match flags -- are piecewise constant). They have no compiled kernels: a compiled plan
runs them as library steps (``impl`` on the numpy values), like every op without a scalar
expression.

* ``string_concat(x, y)``: elementwise concatenation with numpy broadcasting (ONNX
  ``StringConcat``).
* ``string_split(x, delimiter=None, maxsplit=None)`` -> ``(substrings, counts)``: ONNX
  ``StringSplit``. Without a delimiter (None or ``""``, which ONNX treats alike) each string is
  split on runs of whitespace, leading and trailing whitespace dropped (so ``""`` and ``"  "``
  give no substrings); with one, consecutive delimiters delimit empty strings. ``maxsplit``
  bounds the splits (the unsplit rest is the last substring, kept as it is -- trailing
  whitespace included, as onnx.reference has it). ``substrings`` is
  ``x.shape + [most substrings of any element]``, shorter rows padded with ``""``; ``counts``
  (int64, ``x.shape``) says how many are real.
* ``regex_full_match(x, pattern)`` -> bool: whether each whole string matches ``pattern``
  (ONNX ``RegexFullMatch``). ONNX specifies RE2 syntax; it runs on Python's ``re`` with
  ``re.ASCII`` (RE2's ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII, Python's Unicode by
  default), and patterns using constructs whose meaning differs between the two (or that RE2
  lacks: look-around, back-references, atomic groups, possessive quantifiers, conditionals,
  ``\\Z``, ``(?U)``, POSIX ``[[:alpha:]]`` classes) are refused by name (``check_re2``). One
  difference is left: with ``re.ASCII`` case-insensitive matching folds ASCII letters only,
  where RE2 folds all of Unicode.
* ``string_normalize(x, case_change_action, is_case_sensitive, stopwords, locale)``: ONNX
  ``StringNormalizer`` on a ``[C]`` or ``[1, C]`` tensor: elements equal to a stop word
  (compared case-folded unless ``is_case_sensitive``) are dropped, the rest lower- or
  upper-cased (``"LOWER"``/``"UPPER"``, or ``"NONE"``); if every element is dropped the result
  is ``[""]`` (``[[""]]`` for ``[1, C]``). Casing is Unicode's default casing (Python's
  ``str.lower``/``upper``), which every locale but Turkish, Azeri and Lithuanian shares:
  those locales are refused by name.

>>> import numpy as np, nd4py as nd
>>> words = nd.create(np.array(["a,b", "c"], dtype=nd.UTF8))
>>> parts, counts = nd.string_split(words, delimiter=",")
>>> parts.numpy().tolist(), counts.numpy().tolist()
([['a', 'b'], ['c', '']], [2, 1])
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..dtypes import is_storage, is_string, storage_compute_type
from .families import broadcast_shapes
from .registry import NONDIFF, REQUIRED, Attr, AttrKind, TensorType, _opt, define

_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


def _need_strings(types: list[TensorType], names: tuple[str, ...]) -> None:
    for t, name in zip(types, names):
        if not is_string(t.dtype):
            raise ValueError(f"{name} must be a utf8 (string) tensor, got {t.dtype}; make one "
                             f"with nd.create([...], dtype=nd.UTF8) or cast(x, dtype='utf8')")


def _strs(v: Any) -> tuple[str, ...]:
    """A list of strings (stop words) as a tuple."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, str) or not isinstance(v, (list, tuple)):
        raise TypeError(f"expected a list of strings, got {v!r}")
    if not all(isinstance(s, str) for s in v):
        raise TypeError(f"expected a list of strings, got {v!r}")
    return tuple(v)


#: A list of strings (JSON form: a list)
STRS = AttrKind("strs", _strs)


# --- cast ---------------------------------------------------------------------------------------
# ONNX Cast's rules where strings are involved (the ``cast`` op calls this when either side is
# UTF8). Numbers become their shortest round-trip text in their own type (float32 0.1 is "0.1",
# not float64's "0.10000000149011612"), bools "True"/"False" (onnx.reference's ``astype(str)``);
# text becomes numbers by reading decimal and scientific literals and INF/+INF/-INF/NaN in any
# case. ONNX leaves text -> integer undefined beyond integer literals and says "100.5" "may
# yield 100": a non-integer literal is truncated toward zero. Text -> bool (undefined in ONNX)
# reads "true"/"false" in any case, or a number (nonzero is True).

def cast_strings(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` cast to ``dtype`` where ``x`` or ``dtype`` is UTF8 (ONNX Cast's string rules).

    >>> import numpy as np
    >>> from samediff.dtypes import UTF8
    >>> cast_strings(np.array([0.1, 2.0], np.float32), UTF8).tolist()
    ['0.1', '2.0']
    >>> cast_strings(np.array(["1e3", "-INF", "7.9"], UTF8), np.dtype(np.int64)).tolist()
    [1000, -9223372036854775808, 7]
    """
    x = np.asarray(x)
    if is_string(dtype):
        if is_string(x.dtype):
            return x.copy()
        if is_storage(x.dtype):  # (bfloat16...: their values, as the float32 they widen to)
            x = x.astype(storage_compute_type(x.dtype))
        return x.astype(dtype)
    texts = x.ravel().tolist()
    if dtype.kind == "b":
        return np.array([_read_bool(s) for s in texts], _BOOL).reshape(x.shape)
    if dtype.kind in "iu":
        return np.array([_read_int(s, dtype) for s in texts], dtype).reshape(x.shape)
    if dtype.kind == "c":
        return np.array([_read(complex, s, dtype) for s in texts], dtype).reshape(x.shape)
    wide = np.array([_read(float, s, dtype) for s in texts], np.float64).reshape(x.shape)
    if is_storage(dtype):
        return wide.astype(storage_compute_type(dtype)).astype(dtype)
    return wide.astype(dtype)


def _read(kind: type, text: str, dtype: np.dtype) -> Any:
    try:
        return kind(text)  # (Python's float reads inf/+inf/nan in any case, and "1E8")
    except ValueError:
        raise ValueError(f"cannot read {text!r} as {dtype} (ONNX Cast reads decimal and "
                         f"scientific literals, INF, +INF, -INF and NaN)") from None


def _read_int(text: str, dtype: np.dtype) -> int:
    try:
        value = int(text)
    except ValueError:
        f = _read(float, text, dtype)
        if math.isnan(f):
            raise ValueError(f"cannot cast {text!r} to {dtype}: NaN has no integer "
                             f"value") from None
        info = np.iinfo(dtype)  # (an infinity saturates, as numpy's float -> int does not)
        value = info.max if f == math.inf else info.min if f == -math.inf else int(f)
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ValueError(f"cannot cast {text!r} to {dtype}: out of its range "
                         f"[{info.min}, {info.max}]")
    return value


def _read_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("true", "false"):
        return word == "true"
    return _read(float, text, _BOOL) != 0.0


# --- string_concat --------------------------------------------------------------------------------

def _concat_infer(types: list[TensorType], a: Any) -> TensorType:
    _need_strings(types, ("x", "y"))
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), types[0].dtype)


define("string_concat", ["x", "y"], _concat_infer,
       # (numpy gives a 0-d result as a Python str: kept a UTF8 array)
       lambda x, y: np.asarray(np.strings.add(x, y), dtype=np.asarray(x).dtype),
       namespace="base", method=False, strings=True, grad=NONDIFF,
       doc="Elementwise ``x + y`` of utf8 tensors, broadcasting (ONNX ``StringConcat``).\n\n"
           ">>> import numpy as np, nd4py as nd\n"
           ">>> x = nd.create(np.array(['a', 'b'], dtype=nd.UTF8))\n"
           ">>> nd.string_concat(x, nd.create(np.array(['!'], dtype=nd.UTF8))).numpy().tolist()\n"
           "['a!', 'b!']")


# --- string_split --------------------------------------------------------------------------------

def _split_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    _need_strings(types, ("x",))
    if a.maxsplit is not None and a.maxsplit < 0:
        raise ValueError(f"maxsplit must be >= 0 (or None: no limit), got {a.maxsplit}")
    (x,) = types
    return [TensorType((*x.shape, -1), x.dtype), TensorType(x.shape, _I64)]


def _split(x, *, delimiter, maxsplit):
    x = np.asarray(x)
    sep = delimiter or None  # ("" is ONNX's "unset": runs of whitespace)
    limit = -1 if maxsplit is None else maxsplit
    pieces = [s.split(sep, limit) for s in x.ravel().tolist()]
    counts = np.array([len(p) for p in pieces], _I64).reshape(x.shape)
    width = max((len(p) for p in pieces), default=0)
    out = np.array([p + [""] * (width - len(p)) for p in pieces], x.dtype)
    return out.reshape(*x.shape, width), counts


define("string_split", ["x"], _split_infer, _split,
       attrs={"delimiter": (_opt(Attr.STR), None), "maxsplit": (Attr.OPT_INT, None)},
       namespace="base", method=False, strings=True, multi_output=True, value_shaped=True,
       grad=NONDIFF,
       doc="Split each string on ``delimiter`` (None or '': on runs of whitespace, ends "
           "trimmed), at most ``maxsplit`` times: ``(substrings [..., n] padded with '', "
           "counts int64)`` (ONNX ``StringSplit``).")


# --- regex_full_match ----------------------------------------------------------------------------

#: Constructs Python's ``re`` reads but RE2 does not (or reads differently), found by a scan
#: of the pattern that skips escaped characters: (what it looks like, what it is).
_NOT_RE2 = (("(?=", "a look-ahead"), ("(?!", "a negative look-ahead"),
            ("(?<=", "a look-behind"), ("(?<!", "a negative look-behind"),
            ("(?>", "an atomic group"), ("(?(", "a conditional group"),
            ("(?P=", "a named back-reference"))


def check_re2(pattern: str) -> re.Pattern:
    """``pattern`` compiled for ``re.fullmatch`` with RE2's meaning, or a ``ValueError``
    naming the construct RE2 and Python's ``re`` disagree on (or that either lacks).

    >>> check_re2(r"[a-z]+@\\w+\\.com").fullmatch("me@example.com") is not None
    True
    >>> check_re2(r"(a)\\1")
    Traceback (most recent call last):
    ...
    ValueError: pattern '(a)\\\\1' uses a back-reference (\\1), which RE2 (ONNX's regex syntax) does not have
    """
    def refuse(what: str) -> ValueError:
        return ValueError(f"pattern {pattern!r} uses {what}, which RE2 (ONNX's regex syntax) "
                          f"does not have")
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if e.isdigit() and e != "0" and not in_class:
                raise refuse(f"a back-reference (\\{e})")
            if e == "Z":
                raise refuse("\\Z (RE2 spells the end of the text \\z)")
            i += 2
            continue
        if in_class:
            in_class = c != "]" or pattern[i - 1] == "["  # ("[]...]": a literal ] first)
        elif c == "[":
            if pattern.startswith("[[:", i):
                raise ValueError(f"pattern {pattern!r} uses a POSIX class ([[:name:]]) "
                                 f"whose meaning differs in Python's re; use [a-z], \\d, "
                                 f"\\w or \\s")
            in_class = True
        else:
            for text, what in _NOT_RE2:
                if pattern.startswith(text, i):
                    raise refuse(what)
            if c in "*+?}" and pattern[i + 1:i + 2] == "+":
                raise refuse("a possessive quantifier")
            if c == "(" and pattern.startswith("(?", i) and "U" in _flags(pattern, i):
                raise ValueError(f"pattern {pattern!r} sets the U flag, which means "
                                 f"ungreedy in RE2 and Unicode in Python's re")
        i += 1
    try:
        return re.compile(pattern, re.ASCII)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regex here ({exc}); RE2-only "
                         f"escapes (\\p{{...}}, \\Q...\\E, \\C, \\z) are not supported") from None


def _flags(pattern: str, i: int) -> str:
    """The inline flag letters of the group opening at ``pattern[i]`` (``(?i)``, ``(?s:``)."""
    j = i + 2
    while j < len(pattern) and pattern[j].isalpha():
        j += 1
    return pattern[i + 2:j]


def _regex_infer(types: list[TensorType], a: Any) -> TensorType:
    _need_strings(types, ("x",))
    check_re2(a.pattern)
    return TensorType(types[0].shape, _BOOL)


def _regex(x, *, pattern):
    x = np.asarray(x)
    match = check_re2(pattern).fullmatch  # (re caches compiled patterns)
    return np.array([match(s) is not None for s in x.ravel().tolist()],
                    _BOOL).reshape(x.shape)


define("regex_full_match", ["x"], _regex_infer, _regex,
       attrs={"pattern": (Attr.STR, REQUIRED)},
       namespace="base", method=False, strings=True, grad=NONDIFF,
       doc="Whether each string matches ``pattern`` as a whole (bool; ONNX "
           "``RegexFullMatch``, RE2 syntax: constructs RE2 and Python's re read differently "
           "are refused by name).")


# --- string_normalize ----------------------------------------------------------------------------

_CASES = ("NONE", "LOWER", "UPPER")
#: Languages whose casing differs from Unicode's default (dotted/dotless i; Lithuanian's dot
#: above): Python's str.lower/upper would be wrong for them.
_SPECIAL_CASING = ("tr", "az", "lt")


def _check_normalize(case_change_action: str, locale: str) -> None:
    """The attributes' checks (inference and the eager call both make them)."""
    if case_change_action not in _CASES:
        raise ValueError(f"case_change_action must be one of {_CASES}, got "
                         f"{case_change_action!r}")
    language = locale.replace("-", "_").split("_")[0].lower()
    if language in _SPECIAL_CASING:
        raise ValueError(f"locale {locale!r}: its casing rules differ from Unicode's "
                         f"default casing, which is what nd4py applies; use another locale "
                         f"(en_US...) or case_change_action='NONE'")


def _normalize_infer(types: list[TensorType], a: Any) -> TensorType:
    _need_strings(types, ("x",))
    (x,) = types
    _check_normalize(a.case_change_action, a.locale)
    if x.rank == 2 and x.shape[0] in (1, -1):
        return TensorType((1, -1), x.dtype)
    if x.rank != 1:
        raise ValueError(f"x must be [C] or [1, C] (as ONNX StringNormalizer), got shape "
                         f"{list(x.shape)}")
    return TensorType((-1,), x.dtype)


def _normalize(x, *, case_change_action, is_case_sensitive, stopwords, locale):
    x = np.asarray(x)
    _check_normalize(case_change_action, locale)
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise ValueError(f"x must be [C] or [1, C], got shape {list(x.shape)}")
    if is_case_sensitive:
        kept = [s for s in x.ravel().tolist() if s not in stopwords]
    else:
        stops = {w.casefold() for w in stopwords}
        kept = [s for s in x.ravel().tolist() if s.casefold() not in stops]
    if case_change_action == "LOWER":
        kept = [s.lower() for s in kept]
    elif case_change_action == "UPPER":
        kept = [s.upper() for s in kept]
    out = np.array(kept or [""], x.dtype)  # (all dropped: one empty string)
    return out.reshape(1, -1) if x.ndim == 2 else out


define("string_normalize", ["x"], _normalize_infer, _normalize,
       attrs={"case_change_action": (Attr.STR, "NONE"), "is_case_sensitive": (Attr.BOOL, False),
              "stopwords": (STRS, ()), "locale": (Attr.STR, "")},
       namespace="base", method=False, strings=True, value_shaped=True, grad=NONDIFF,
       doc="ONNX ``StringNormalizer`` on ``[C]`` or ``[1, C]`` strings: drop the stop words "
           "(case-folded unless ``is_case_sensitive``), then ``case_change_action`` "
           "('NONE', 'LOWER', 'UPPER'); nothing left gives ``['']``.")

__all__ = ["cast_strings", "check_re2", "STRS"]
