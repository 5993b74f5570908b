"""UTF8 (string) tensors: the dtype at the front door, refusals by name, the data-movement and
comparison ops that take strings, cast's string rules, save/load, compiled plans and ONNX
import (checked against onnx.reference). The string ops themselves are also covered row by
row by the registry suites (tests/op_samples_strings.py)."""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, compiler, dtypes
from samediff.errors import CorruptFileError, NdDTypeError, OpError
from samediff.ops import get_op

UTF8 = np.dtypes.StringDType()


def text(rows) -> np.ndarray:
    return np.array(rows, dtype=UTF8)


# --------------------------------------------------------------------------------------------
# The dtype at the front door
# --------------------------------------------------------------------------------------------

def test_utf8_names_and_front_door():
    assert nd.UTF8 == nd.DataType.UTF8 == dtypes.UTF8 == UTF8
    for name in ("utf8", "UTF8", "string", "str", "StringDType128"):
        assert nd.to_dtype(name) == UTF8
    assert nd.to_dtype(np.str_) == UTF8 and nd.to_dtype("<U5") == UTF8
    assert nd.nd4j_name(UTF8) == "UTF8" and dtypes.is_string(UTF8)
    assert not dtypes.is_string(np.dtype(np.float32)) and UTF8 in nd.DataType.values()
    # Python text, numpy's fixed-width text and object arrays of str all become UTF8
    for value in (["a", "bé"], np.array(["a", "bé"]), np.array(["a", "bé"], dtype=object)):
        x = nd.create(value)
        assert x.dtype == UTF8 and x.numpy().tolist() == ["a", "bé"]
    assert nd.create("solo").shape == () and nd.create("solo").numpy().item() == "solo"
    x = nd.create(["x", "日本"])
    assert repr(x) == "NDArray(['x', '日本'], dtype=utf8)" and str(x) == "['x' '日本']"
    assert np.asarray(x).dtype == UTF8 and x.numpy().dtype == UTF8
    with pytest.raises(NdDTypeError, match="object is not supported"):
        nd.create(np.array(["a", 1], dtype=object))  # other object arrays stay refused


def test_placeholders_take_utf8():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DataType.UTF8, -1)
    assert x.dtype == UTF8
    y = sd._record(get_op("identity"), [x], {}, "y")
    out = sd.output({"x": np.array(["p", "q"])}, "y")["y"].numpy()  # ("<U1" feeds convert)
    assert out.dtype == UTF8 and out.tolist() == ["p", "q"]
    assert y.dtype == UTF8


def test_numpy_without_string_dtype_gives_a_named_error(monkeypatch):
    monkeypatch.setattr(dtypes, "_UTF8", None)
    for use in (lambda: nd.to_dtype("utf8"), lambda: dtypes.UTF8, lambda: nd.UTF8,
                lambda: nd.DataType.UTF8):
        with pytest.raises(NdDTypeError, match="UTF8 tensors need numpy >= 2"):
            use()


# --------------------------------------------------------------------------------------------
# Refusals by name
# --------------------------------------------------------------------------------------------

def test_ops_refuse_utf8_by_name():
    sd = SameDiff.create()
    x = sd.placeholder("x", UTF8, 2)
    for name, ins in (("add", [x, x]), ("exp", [x]), ("gt", [x, x]), ("sum", [x])):
        with pytest.raises(NdDTypeError, match=rf"{name}: utf8 tensors are only taken by .*"
                                               rf"string_concat.*cast to a number first"):
            sd._record(get_op(name), ins, {}, None)
    with pytest.raises(NdDTypeError, match="exp: utf8 tensors"):  # eagerly too, where numpy fails
        nd.exp(nd.create(["a"]))
    with pytest.raises(OpError, match="string_concat: x must be a utf8"):
        nd.string_concat(nd.create([1.0]), nd.create(["a"]))
    with pytest.raises(OpError, match="back-reference"):
        nd.regex_full_match(nd.create(["aa"]), pattern=r"(a)\1")
    with pytest.raises(OpError, match="locale 'tr_TR'"):
        nd.string_normalize(nd.create(["I"]), case_change_action="LOWER", locale="tr_TR")


@pytest.mark.parametrize("pattern,what", [
    ("(?=a)a", "look-ahead"), ("(?<!b)a", "look-behind"), ("(?>a)", "atomic"),
    ("a++", "possessive"), (r"a\Z", r"\\Z"), ("[[:alpha:]]", "POSIX"), ("(?U)a*", "U flag"),
    (r"\p{Greek}", "RE2-only escapes")])
def test_regex_refuses_constructs_re2_reads_differently(pattern, what):
    from samediff.ops.strings import check_re2
    with pytest.raises(ValueError, match=what):
        check_re2(pattern)
    # what both read alike passes, RE2's ASCII classes included
    assert check_re2(r"[\]a]+(?i:b)\d").fullmatch("]aB1") and not check_re2(r"\d").fullmatch("٣")


# --------------------------------------------------------------------------------------------
# The ops that take strings (flagged ``strings=True``): eager, inferred, interpreter, compiled
# --------------------------------------------------------------------------------------------

A = text([["ab", "c", ""], ["d", "é", "ff"]])
B = text([["ab", "x", ""], ["q", "é", "f"]])
MASK = np.array([[True, False, True], [False, True, False]])
FLAGGED = [
    ("identity", [A], {}, lambda a: a),
    ("cast", [A], {"dtype": "utf8"}, lambda a: a),
    ("reshape", [A], {"shape": (3, 2)}, lambda a: a.reshape(3, 2)),
    ("transpose", [A], {}, lambda a: a.T),
    ("permute", [A], {"dims": (1, 0)}, lambda a: a.T),
    ("expand_dims", [A], {"axis": 1}, lambda a: a[:, None]),
    ("squeeze", [A[:1]], {}, lambda a: a[0]),
    ("flatten", [A], {}, lambda a: a.reshape(-1)),
    ("concat", [A, B], {"axis": 1}, lambda a, b: np.concatenate([a, b], 1)),
    ("stack", [A, B], {}, lambda a, b: np.stack([a, b])),
    ("gather", [A, np.array([1, 0, 1])], {"axis": 0}, lambda a, i: a[[1, 0, 1]]),
    ("gather", [A, np.array(2)], {"axis": 1}, lambda a, i: a[:, 2]),
    ("slice", [A], {"begin": (0, 1), "size": (2, -1)}, lambda a: a[:, 1:]),
    ("strided_slice", [A], {"index": (("slice", None, None, -1), 1)}, lambda a: a[::-1, 1]),
    ("tile", [A], {"reps": (1, 2)}, lambda a: np.tile(a, (1, 2))),
    ("broadcast_to", [A[:1]], {"shape": (3, 3)}, lambda a: np.broadcast_to(a, (3, 3))),
    ("eq", [A, B], {}, lambda a, b: a == b),
    ("neq", [A, B[:1]], {}, lambda a, b: a != b),
    ("where", [MASK, A, B], {}, lambda m, a, b: np.where(m, a, b)),
    ("cast", [text(["1.5", "-2", "INF"])], {"dtype": "float32"},
     lambda a: np.array([1.5, -2, np.inf], np.float32)),
    ("cast", [np.array([0.25, 3.0], np.float32)], {"dtype": "utf8"},
     lambda a: np.array(["0.25", "3.0"], object)),
]


@pytest.mark.parametrize("name,ins,attrs,expect", FLAGGED,
                         ids=[f"{f[0]}-{k}" for k, f in enumerate(FLAGGED)])
def test_flagged_ops_take_strings(name, ins, attrs, expect):
    op = get_op(name)
    assert op.strings
    # the expectation on object arrays: Python's own str semantics, not numpy's StringDType
    want = expect(*[x.astype(object) if x.dtype == UTF8 else x for x in ins])
    want = np.asarray(want)
    got = nd.bind(op, [nd.create(x) for x in ins], attrs).numpy()
    assert got.shape == want.shape and got.tolist() == want.tolist()
    assert got.dtype == (UTF8 if want.dtype == object else want.dtype)
    for executor in ("interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            sd = SameDiff.create()
            phs = [sd.placeholder(f"in{k}", x.dtype, *x.shape) for k, x in enumerate(ins)]
            out = sd._record(op, phs, attrs, "out")
            assert (tuple(out.shape), out.dtype) == (got.shape, got.dtype)
            result = sd.output({p.name: x for p, x in zip(phs, ins)}, "out")["out"].numpy()
        finally:
            compiler.set_executor(previous)
        assert result.dtype == got.dtype and result.tolist() == got.tolist(), executor


def test_comparing_with_python_text():
    x = nd.create(["a", "b"])
    assert (x == "b").numpy().tolist() == [False, True]
    assert (x != "b").numpy().tolist() == [True, False]
    assert (nd.create([1.0]) == "b").numpy().tolist() == [False]  # (numbers: numpy 2's rule)
    sd = SameDiff.create()
    v = sd.placeholder("x", UTF8, -1)
    e = v == "b"
    assert sd.output({"x": np.array(["b", "c"])}, e.name)[e.name].numpy().tolist() == [True,
                                                                                      False]


def test_a_compiled_plan_runs_string_ops_as_library_steps():
    sd = SameDiff.create()
    x = sd.placeholder("x", UTF8, -1)
    n = sd.placeholder("n", nd.FLOAT, -1)
    low = sd._record(get_op("string_normalize"), [x], {"case_change_action": "LOWER"}, None)
    parts, counts = sd._record(get_op("string_split"), [low], {"delimiter": "-"}, None)
    match = sd._record(get_op("regex_full_match"), [low], {"pattern": "[a-z]+(-[a-z]+)*"}, None)
    # numbers around the strings still fuse: counts -> float -> arithmetic
    score = sd._record(get_op("cast"), [counts], {"dtype": "float32"}, None) * 2.0 + n
    total = sd._record(get_op("where"), [match, score, n], {}, "total")
    joined = sd._record(get_op("string_concat"), [low, parts[:, :1].reshape(-1)], {}, "joined")
    feeds = {"x": np.array(["Ab-C", "x9", "D-e-F"]), "n": np.array([1, 2, 3], np.float32)}
    results = {}
    for executor in ("interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            out = sd.output(feeds, total.name, joined.name)
            results[executor] = {k: v.numpy() for k, v in out.items()}
            plan = sd.last_plan
        finally:
            compiler.set_executor(previous)
        assert plan.kind == executor
    # the string ops are library steps of the compiled plan; the float arithmetic a kernel
    steps = [type(s).__name__ for s in plan.steps]
    assert "KernelStep" in steps and "Node" in steps, plan.explain()
    for k in ("total", "joined"):
        np.testing.assert_array_equal(results["compiled"][k], results["interpreter"][k])
    assert results["compiled"]["total"].tolist() == [5.0, 2.0, 9.0]
    assert results["compiled"]["joined"].tolist() == ["ab-cab", "x9x9", "d-e-fd"]


# --------------------------------------------------------------------------------------------
# cast: ONNX Cast's rules for strings
# --------------------------------------------------------------------------------------------

def test_cast_numbers_to_strings_as_onnx_reference():
    from onnx import TensorProto
    from onnx.reference.ops.op_cast import cast_to
    for x in (np.array([0.1, 2.0, -0.0, 1e20, np.inf, np.nan, 3.25e-5], np.float32),
              np.array([0.1, 1 / 3], np.float64), np.array([-7, 0, 2**40], np.int64),
              np.array([True, False])):
        got = nd.cast(nd.create(x), dtype=nd.UTF8).numpy()
        want = cast_to(x, TensorProto.STRING, saturate=True)
        assert got.tolist() == want.tolist(), x.dtype
    assert nd.cast(nd.create([0.1], dtype="float32"), dtype="utf8").numpy().tolist() == ["0.1"]


def test_cast_strings_to_numbers():
    s = nd.create(["3.14", "1e-5", "1E8", "+INF", "inf", "-INF", "NaN", " 2 "])
    got = nd.cast(s, dtype="float32").numpy()
    want = np.array([3.14, 1e-5, 1e8, np.inf, np.inf, -np.inf, np.nan, 2], np.float32)
    np.testing.assert_array_equal(got, want)
    assert nd.cast(nd.create(["100.5", "-7", "1e3", "-2.9"]), dtype="int32").numpy().tolist() \
        == [100, -7, 1000, -2]
    assert nd.cast(nd.create(["true", "False", "0", "1", "0.5"]), dtype="bool").numpy().tolist() \
        == [True, False, False, True, True]
    with pytest.raises(OpError, match=r"cannot read 'Hello' as float32"):
        nd.cast(nd.create(["Hello"]), dtype="float32")
    with pytest.raises(OpError, match="out of its range"):
        nd.cast(nd.create(["300"]), dtype="int8")


# --------------------------------------------------------------------------------------------
# Save and load
# --------------------------------------------------------------------------------------------

def _string_model() -> SameDiff:
    sd = SameDiff.create()
    x = sd.placeholder("x", UTF8, -1)
    k = sd.constant("k", nd.create(text([["é,", ""], ["ab", "日本"]])))
    sd._record(get_op("string_concat"), [x, k], {}, "c")
    sd._record(get_op("cast"), [k], {"dtype": "utf8"}, "same")
    return sd


def test_utf8_constants_save_and_load(tmp_path):
    path = tmp_path / "m.sdz"
    _string_model().save(path)
    with zipfile.ZipFile(path) as zf:
        member = next(n for n in zf.namelist() if n.startswith("arrays/"))
        stored = np.load(io.BytesIO(zf.read(member)), allow_pickle=False)
    assert stored.dtype == np.uint8  # offsets and UTF-8 bytes, never pickled objects
    loaded = SameDiff.load(path)
    k = loaded.graph.vars["k"].value
    assert k.dtype == UTF8 and k.tolist() == [["é,", ""], ["ab", "日本"]]
    out = loaded.output({"x": np.array(["a", "b"])}, "c")["c"].numpy()
    assert out.tolist() == [["aé,", "b"], ["aab", "b日本"]]


def _rewrite(path, member: str, data: np.ndarray) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    buf = io.BytesIO()
    np.save(buf, data, allow_pickle=False)
    members[member] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)


@pytest.mark.parametrize("damage,why", [
    (lambda b: np.concatenate([b[:8], np.full(8, 255, np.uint8), b[16:]]), "offsets"),
    (lambda b: b[:-1], "offsets"),
    (lambda b: b[:20], "fewer than"),
    (lambda b: np.concatenate([b[:-2], np.array([0xC3, 0x28], np.uint8)]), "not UTF-8"),
    (lambda b: b.astype(np.int16), "uint8 vector"),
])
def test_damaged_utf8_arrays_are_named(tmp_path, damage, why):
    path = tmp_path / "m.sdz"
    _string_model().save(path)
    with zipfile.ZipFile(path) as zf:
        member = next(n for n in zf.namelist() if n.startswith("arrays/"))
        blob = np.load(io.BytesIO(zf.read(member)), allow_pickle=False)
    _rewrite(path, member, damage(blob))
    with pytest.raises(CorruptFileError, match=why):
        SameDiff.load(path)


# --------------------------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------------------------

def test_onnx_string_model_matches_reference_evaluator():
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    from samediff.onnx import backend
    nodes = [
        helper.make_node("StringNormalizer", ["x"], ["n"], case_change_action="LOWER",
                         stopwords=["the"]),
        helper.make_node("StringConcat", ["n", "suffix"], ["c"]),
        helper.make_node("StringSplit", ["c"], ["parts", "counts"], delimiter="-"),
        helper.make_node("RegexFullMatch", ["n"], ["m"], pattern=r"[a-z]+\d?"),
        helper.make_node("Equal", ["x", "probe"], ["e"]),
        helper.make_node("Cast", ["counts"], ["s"], to=TensorProto.STRING),
        helper.make_node("LabelEncoder", ["n"], ["code"], domain="ai.onnx.ml",
                         keys_strings=["cat", "dog2"], values_int64s=[1, 2], default_int64=0),
    ]
    graph = helper.make_graph(
        nodes, "strings", [helper.make_tensor_value_info("x", TensorProto.STRING, ["C"])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (
            ("c", TensorProto.STRING), ("parts", TensorProto.STRING),
            ("counts", TensorProto.INT64), ("m", TensorProto.BOOL), ("e", TensorProto.BOOL),
            ("s", TensorProto.STRING), ("code", TensorProto.INT64))],
        [helper.make_tensor("suffix", TensorProto.STRING, [1], [b"-x"]),
         helper.make_tensor("probe", TensorProto.STRING, [1], ["THE".encode()])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    x = np.array(["Cat", "THE", "Dog2", "a-b"], dtype=object)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for executor in ("interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            got = backend.run(model, [x])
        finally:
            compiler.set_executor(previous)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.tolist() == w.tolist(), executor


@pytest.mark.parametrize("opset,attrs,x", [
    (1, {"classes_strings": ["a", "b"], "default_int64": 7}, ["b", "z", "a"]),
    (1, {"classes_strings": ["a", "b"], "default_string": "?"}, [1, 5, 0]),
    (2, {"keys_strings": ["a", "b"], "values_strings": ["A", "B"], "default_string": "-"},
     ["b", "q", "a"]),
    (2, {"keys_int64s": [3, 4], "values_strings": ["three", "four"]}, [4, 0, 3]),
])
def test_onnx_label_encoder_with_strings(opset, attrs, x):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    from samediff.onnx import backend
    strings_in = isinstance(x[0], str)
    ins = np.array(x, dtype=object if strings_in else np.int64)
    out_type = (TensorProto.INT64 if strings_in and "values_strings" not in attrs
                else TensorProto.STRING)
    graph = helper.make_graph(
        [helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING if strings_in
                                       else TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", out_type, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", opset)])
    (got,) = backend.run(model, [ins])
    if opset == 1:  # (onnx.reference has no LabelEncoder-1: its definition, by hand)
        classes = attrs["classes_strings"]
        want = ([classes.index(v) if v in classes else attrs["default_int64"] for v in x]
                if strings_in else
                [classes[v] if 0 <= v < len(classes) else attrs["default_string"] for v in x])
    else:
        (want,) = ReferenceEvaluator(model).run(None, {"x": ins})
        want = want.tolist()
    assert got.tolist() == want


def test_onnx_regex_outside_re2_is_refused_at_import():
    from onnx import TensorProto, helper
    from samediff.onnx import OnnxImportError, import_onnx
    graph = helper.make_graph(
        [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(?<=a)b")], "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(OnnxImportError, match="RegexFullMatch.*look-behind"):
        import_onnx(model)
