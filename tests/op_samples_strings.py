"""Sample rows of the string ops in samediff/ops/strings.py, added to op_samples.SAMPLES like
the other families' rows. Inputs are UTF8 arrays (never cast: the rows run in the ``default``
dtype only, so no float64 copy of a string input is ever made); references are plain Python
loops over ``str``, written from the ONNX definitions: character by character splitting and
whitespace runs, an explicit matcher for the few pattern shapes used, and word-by-word stop
word filtering."""
from __future__ import annotations

import numpy as np

UTF8 = np.dtypes.StringDType()
DEFAULT = "default"
I64 = np.dtype(np.int64)


def _text(rows) -> np.ndarray:
    return np.array(rows, dtype=UTF8)


def _concat_ref(x, y):
    xb, yb = np.broadcast_arrays(np.asarray(x, object), np.asarray(y, object))
    out = [a + b for a, b in zip(xb.reshape(-1).tolist(), yb.reshape(-1).tolist())]
    return _text(out).reshape(xb.shape)


def _split_one(s: str, delimiter, maxsplit) -> list[str]:
    """StringSplit of one string, scanned character by character."""
    limit = -1 if maxsplit is None else maxsplit
    pieces: list[str] = []
    if not delimiter:  # runs of whitespace separate; leading/trailing whitespace vanishes
        i = 0
        while i < len(s):
            while i < len(s) and s[i].isspace():
                i += 1
            if i == len(s):
                break
            if limit >= 0 and len(pieces) == limit:  # the rest as it is (onnx.reference)
                pieces.append(s[i:])
                break
            j = i
            while j < len(s) and not s[j].isspace():
                j += 1
            pieces.append(s[i:j])
            i = j
        return pieces
    start, i = 0, 0
    while i <= len(s) - len(delimiter):
        if (limit < 0 or len(pieces) < limit) and s[i:i + len(delimiter)] == delimiter:
            pieces.append(s[start:i])
            i += len(delimiter)
            start = i
        else:
            i += 1
    pieces.append(s[start:])
    return pieces


def _split_ref(x, *, delimiter, maxsplit):
    x = np.asarray(x)
    rows = [_split_one(s, delimiter, maxsplit) for s in x.reshape(-1).tolist()]
    width = max((len(r) for r in rows), default=0)
    padded = [r + [""] * (width - len(r)) for r in rows]
    subs = _text(padded).reshape(*x.shape, width)
    return subs, np.array([len(r) for r in rows], I64).reshape(x.shape)


def _starts_with_digit_ref(pattern: str):
    """The references of the two patterns the rows use, written as loops."""
    def ref(x, *, pattern):
        x = np.asarray(x)
        out = []
        for s in x.reshape(-1).tolist():
            if pattern == r"\d+[a-z]*":  # one or more ASCII digits, then ASCII lower case
                i = 0
                while i < len(s) and s[i] in "0123456789":
                    i += 1
                ok = i > 0 and all("a" <= c <= "z" for c in s[i:])
            else:  # "(ab|c)*"
                i, ok = 0, True
                while i < len(s):
                    if s.startswith("ab", i):
                        i += 2
                    elif s[i] == "c":
                        i += 1
                    else:
                        ok = False
                        break
            out.append(ok)
        return np.array(out, np.bool_).reshape(x.shape)
    return ref


def _normalize_ref(x, *, case_change_action, is_case_sensitive, stopwords, locale):
    x = np.asarray(x)
    kept = []
    for s in x.reshape(-1).tolist():
        if is_case_sensitive:
            drop = any(s == w for w in stopwords)
        else:
            drop = any(s.casefold() == w.casefold() for w in stopwords)
        if not drop:
            kept.append(s.lower() if case_change_action == "LOWER" else
                        s.upper() if case_change_action == "UPPER" else s)
    out = _text(kept or [""])
    return out.reshape(1, -1) if x.ndim == 2 else out


def strings_samples(S) -> dict:
    """op name -> sample rows (``S`` is op_samples.Sample)."""
    text = dict(dtypes=(DEFAULT,), smooth=False)
    return {
        "string_concat": [
            S([_text([["a", "bé"], ["", "日本"]]), _text(["x", ""])], reference=_concat_ref,
              out_dtype=UTF8, **text),
            S([_text("zero-d "), _text(["1", "22"])], reference=_concat_ref, out_dtype=UTF8,
              **text),
        ],
        "string_split": [
            S([_text(["a,b,,c", "", "x"])], {"delimiter": ","}, _split_ref,
              out_dtype=(UTF8, I64), **text),
            S([_text([["  one two\tthree ", ""], ["four", " \n "]])], {}, _split_ref,
              out_dtype=(UTF8, I64), **text),
            S([_text(["a--b--c--d", "e--f"])], {"delimiter": "--", "maxsplit": 2},
              _split_ref, out_dtype=(UTF8, I64), **text),
            S([_text([" a b  c ", "d"])], {"maxsplit": 1}, _split_ref,
              out_dtype=(UTF8, I64), **text),
        ],
        "regex_full_match": [
            S([_text(["123abc", "12", "abc", "1a2", "", "٣"])], {"pattern": r"\d+[a-z]*"},
              _starts_with_digit_ref(r"\d+[a-z]*"), out_dtype="bool", **text),
            S([_text([["abcab", "ac"], ["", "abx"]])], {"pattern": "(ab|c)*"},
              _starts_with_digit_ref("(ab|c)*"), out_dtype="bool", **text),
        ],
        "string_normalize": [
            S([_text(["Monday", "tuesday", "MONDAY", "Straße"])],
              {"case_change_action": "UPPER", "stopwords": ["monday"]}, _normalize_ref,
              out_dtype=UTF8, **text),
            S([_text([["Monday", "Tuesday", "monday"]])],
              {"case_change_action": "LOWER", "is_case_sensitive": True,
               "stopwords": ["monday"]}, _normalize_ref, out_dtype=UTF8, **text),
            S([_text(["a", "A"])], {"stopwords": ["a"]}, _normalize_ref, out_dtype=UTF8,
              **text),
        ],
    }
