"""SameDiff.save / SameDiff.load: exact round trips, and files that must be refused.

* a small MLP (placeholder with -1, variables, constants, a name scope, a two-output split, a
  weak literal from ``x * 2.0``) and a one-op graph for every sample of every op of the table
  (``op_samples.SAMPLES``) survive save + load: same summary, same variables, same attributes,
  same outputs (random ops: after resetting the seed);
* truncated, garbage, damaged, wrong-magic, future-version, unknown-op, self-contradicting and
  pickle-carrying files raise the named ``SerializationError`` subclasses, never unpickle;
* an interrupted save leaves the previous file intact and no temporary file behind.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

from samediff import SameDiff, random_state
from samediff.errors import (CorruptFileError, FormatVersionError, NdError, SerializationError,
                             UnknownOpError, UnsafeFileError)
from samediff.ops import REGISTRY, OpDef, TensorType
from samediff.ops.registry import Attr, REQUIRED

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES, cast_inputs, run_attrs
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES, cast_inputs, run_attrs

SEED = 777


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _mlp() -> tuple[SameDiff, dict]:
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 4)
    with sd.name_scope("layer0"):
        w0 = sd.var("w", "xavier", "float", 4, 6)
        b0 = sd.var("b", np.linspace(-1, 1, 6).astype(np.float32))
        h = sd.nn.relu(x.mmul(w0) + b0, name="h")
    with sd.name_scope("head"):
        a, b = h.split(num_or_sizes=2, axis=1)       # two outputs: split, split:1
        y = (a * 2.0 + b[:, 1:2]).sum(dims=1, name="y")  # weak literal, nested slice attr
    offset = sd.constant("offset", np.float64(0.5))
    steps = sd.constant("steps", np.arange(3, dtype=np.int32))
    z = y.cast("float64", name="z") + offset
    sd.math.mul(steps, 3, name="steps3")               # int weak literal
    z.rename("z_plus_offset")
    feeds = {"x": np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)}
    return sd, feeds


def _roundtrip(sd: SameDiff, tmp_path, name: str = "g.sdz") -> SameDiff:
    path = tmp_path / name
    sd.save(path)
    return SameDiff.load(path)


def _assert_same_graph(a: SameDiff, b: SameDiff) -> None:
    assert a.summary() == b.summary()
    assert list(a.graph.vars) == list(b.graph.vars)
    for name, ia in a.graph.vars.items():
        ib = b.graph.vars[name]
        assert (ia.vtype, ia.ttype) == (ib.vtype, ib.ttype), name
        if ia.value is None:
            assert ib.value is None, name
        else:
            assert ib.value.dtype == ia.value.dtype and ib.value.shape == ia.value.shape, name
            np.testing.assert_array_equal(ib.value, ia.value, err_msg=name)
        assert (ia.producer is None) == (ib.producer is None), name
    assert len(a.graph.nodes) == len(b.graph.nodes)
    for na, nb in zip(a.graph.nodes, b.graph.nodes):
        assert (na.name, na.op, na.inputs, na.outputs) == (nb.name, nb.op, nb.inputs, nb.outputs)
        assert vars(na.attrs) == vars(nb.attrs), na.name
        assert type(na.attrs) is type(nb.attrs)


def _outputs(sd: SameDiff, feeds: dict, names: list[str], random: bool = False) -> dict:
    if random:
        random_state.set_seed(SEED)
    return {k: v.numpy() for k, v in sd.output(feeds, *names).items()}


def _assert_same_outputs(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def _array_outputs(sd: SameDiff) -> list[str]:
    return [n for n, i in sd.graph.vars.items() if i.producer is not None]


def _rewrite(path, doc_edit=None, members: dict | None = None) -> None:
    """Rewrite the zip at ``path``: edit graph.json with ``doc_edit(doc)``, replace members."""
    with zipfile.ZipFile(path) as zf:
        contents = {n: zf.read(n) for n in zf.namelist()}
    if doc_edit is not None:
        doc = json.loads(contents["graph.json"])
        doc_edit(doc)
        contents["graph.json"] = json.dumps(doc).encode()
    contents.update(members or {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in contents.items():
            zf.writestr(n, data)


def _npy(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _member_of(path, var: str) -> str:
    with zipfile.ZipFile(path) as zf:
        doc = json.loads(zf.read("graph.json"))
    return next(v["array"] for v in doc["variables"] if v["name"] == var)


@pytest.fixture
def saved(tmp_path):
    sd, feeds = _mlp()
    path = tmp_path / "mlp.sdz"
    sd.save(path)
    return sd, feeds, path


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------

def test_mlp_round_trip(saved):
    sd, feeds, path = saved
    loaded = SameDiff.load(path)
    _assert_same_graph(sd, loaded)
    names = _array_outputs(sd)
    _assert_same_outputs(_outputs(loaded, feeds, names), _outputs(sd, feeds, names))
    assert loaded.get_variable("x").shape == (-1, 4)
    assert loaded.graph.vars["literal"].ttype.weak
    assert {v.name for v in loaded.trainable_variables()} == {"layer0/w", "layer0/b"}


def test_loaded_graph_is_independent_and_extendable(saved):
    sd, feeds, path = saved
    loaded = SameDiff.load(path)
    loaded.get_variable("layer0/b").set_array(np.zeros(6, np.float32))
    assert not np.array_equal(sd.get_variable("layer0/b").get_arr().numpy(), np.zeros(6))
    out = (loaded.get_variable("head/y") * 3.0).rename("tripled")
    assert out.name == "tripled" and "literal_1" in loaded.graph.vars
    assert loaded.output(feeds, "tripled")["tripled"].shape == (5,)
    with pytest.raises(NdError):
        loaded.placeholder("x", "float", 2)  # names stay taken


def test_document_layout(saved):
    _, _, path = saved
    with zipfile.ZipFile(path) as zf:
        doc = json.loads(zf.read("graph.json"))
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
        members = set(zf.namelist())
    assert (doc["format"], doc["version"]) == ("nd4py-samediff", 1)
    assert doc["training"] is None and doc["updater_state"] == {}
    x = doc["variables"][0]
    assert x == {"name": "x", "type": "PLACEHOLDER", "dtype": "float32", "shape": [-1, 4],
                 "weak": False, "array": None}
    arrays = {v["array"] for v in doc["variables"] if v["array"]}
    assert arrays | {"graph.json"} == members
    assert len(arrays) == sum(v["type"] in ("VARIABLE", "CONSTANT") for v in doc["variables"])
    split = next(n for n in doc["nodes"] if n["op"] == "split")
    assert split["outputs"] == ["head/split", "head/split:1"]
    assert split["attrs"] == {"num_or_sizes": [2], "axis": 1}


def test_save_updater_state_flag_accepted(tmp_path):
    sd, _ = _mlp()
    sd.save(tmp_path / "a.sdz", save_updater_state=False)
    sd.save(str(tmp_path / "b.sdz"), save_updater_state=True)
    _assert_same_graph(SameDiff.load(str(tmp_path / "a.sdz")), SameDiff.load(tmp_path / "b.sdz"))


def test_overwrite_keeps_permissions(saved):
    sd, _, path = saved
    os.chmod(path, 0o640)
    sd.save(path)
    assert os.stat(path).st_mode & 0o777 == 0o640


def _cases() -> list:
    out = []
    for name in sorted(REGISTRY):
        for i, sample in enumerate(SAMPLES.get(name, ())):
            out.extend(pytest.param(name, i, dt, id=f"{name}-{i}-{dt}") for dt in sample.dtypes)
    return out


def _one_op_graph(op: OpDef, inputs: list, attrs: dict, leading_unknown: bool):
    """One placeholder per array input; Python scalars become weak literals."""
    sd = SameDiff.create()
    args, feeds = [], {}
    for k, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            shape = ((-1,) + x.shape[1:]) if leading_unknown and x.ndim else x.shape
            args.append(sd.placeholder(f"in{k}", x.dtype, *shape))
            feeds[f"in{k}"] = x
        else:
            args.append(x)
    sd._record(op, args, dict(attrs))
    return sd, feeds


def test_every_op_has_a_round_trip_case():
    missing = sorted(n for n in REGISTRY if not SAMPLES.get(n))
    assert not missing, f"ops with no save/load round trip (no samples): {missing}"


@pytest.mark.parametrize("name, i, dtype", _cases())
def test_op_round_trip(name, i, dtype, tmp_path):
    op, sample = REGISTRY[name], SAMPLES[name][i]
    inputs, attrs = cast_inputs(sample, dtype), run_attrs(sample, dtype)
    variants = [False]
    if not op.random and any(isinstance(x, np.ndarray) and x.ndim for x in inputs):
        variants.append(True)  # also with unknown (-1) leading dims, where the op allows it
    for leading_unknown in variants:
        try:
            sd, feeds = _one_op_graph(op, inputs, attrs, leading_unknown)
        except NdError:
            assert leading_unknown, f"{name}: sample does not build"
            continue
        loaded = _roundtrip(sd, tmp_path, f"{name}-{leading_unknown}.sdz")
        _assert_same_graph(sd, loaded)
        outs = _array_outputs(sd)
        _assert_same_outputs(_outputs(loaded, feeds, outs, op.random),
                             _outputs(sd, feeds, outs, op.random))


# --------------------------------------------------------------------------------------------
# files that must be refused
# --------------------------------------------------------------------------------------------

def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        SameDiff.load(tmp_path / "nope.sdz")


@pytest.mark.parametrize("keep", [0, 10, 0.5, -22, -1])
def test_truncated_file(saved, keep):
    _, _, path = saved
    data = path.read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else keep
    path.write_bytes(data[:cut])
    with pytest.raises(CorruptFileError):
        SameDiff.load(path)


def test_garbage_file(tmp_path):
    path = tmp_path / "garbage.sdz"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    with pytest.raises(CorruptFileError, match="not a readable zip"):
        SameDiff.load(path)


def test_damaged_member_bad_crc(saved):
    _, _, path = saved
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(_member_of(path, "layer0/w"))
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for k in range(start + 4, start + info.compress_size - 4, 7):  # inside the deflate stream
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="damaged"):
        SameDiff.load(path)


def test_zip_without_graph_json(tmp_path):
    path = tmp_path / "empty.sdz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("other.txt", "hello")
    with pytest.raises(CorruptFileError, match="graph.json"):
        SameDiff.load(path)


def test_graph_json_not_json(saved):
    _, _, path = saved
    _rewrite(path, members={"graph.json": b"{not json"})
    with pytest.raises(CorruptFileError, match="not valid JSON"):
        SameDiff.load(path)


def test_wrong_magic(saved):
    _, _, path = saved
    _rewrite(path, lambda d: d.update(format="keras"))
    with pytest.raises(FormatVersionError, match="not an nd4py SameDiff file"):
        SameDiff.load(path)


@pytest.mark.parametrize("version, match", [(2, "newer nd4py"), (0, "invalid"), ("1", "invalid"),
                                            (None, "invalid"), (True, "invalid")])
def test_unsupported_version(saved, version, match):
    _, _, path = saved
    _rewrite(path, lambda d: d.update(version=version))
    with pytest.raises(FormatVersionError, match=match):
        SameDiff.load(path)


def test_unknown_user_defined_op(tmp_path, monkeypatch):
    udf = OpDef(name="my_square", inputs=("x",), attr_kinds={"k": (Attr.INT, REQUIRED)},
                infer=lambda t, a: t[0], impl=lambda x, *, k: np.asarray(x) ** 2 * k,
                doc="test UDF")
    monkeypatch.setitem(REGISTRY, udf.name, udf)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1)
    sd._record(udf, [x], {"k": 3}, name="sq")
    path = tmp_path / "udf.sdz"
    sd.save(path)
    loaded = SameDiff.load(path)  # registered: loads fine
    assert loaded.output({"x": np.ones(2, np.float32)}, "sq")["sq"].numpy().tolist() == [3, 3]
    monkeypatch.delitem(REGISTRY, udf.name)
    with pytest.raises(UnknownOpError, match=r"udf.sdz.*'sq'.*'my_square'.*import") as err:
        SameDiff.load(path)
    assert isinstance(err.value, SerializationError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("bad", [np.zeros((4, 5), np.float32), np.zeros((4, 6), np.float64),
                                 np.zeros((), np.float32), np.zeros((4, 6), np.int32)])
def test_array_contradicting_the_graph(saved, bad):
    _, _, path = saved
    _rewrite(path, members={_member_of(path, "layer0/w"): _npy(bad)})
    with pytest.raises(CorruptFileError, match="layer0/w"):
        SameDiff.load(path)


def test_missing_array_member(saved):
    _, _, path = saved
    member = _member_of(path, "offset")
    with zipfile.ZipFile(path) as zf:
        keep = {n: zf.read(n) for n in zf.namelist() if n != member}
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in keep.items():
            zf.writestr(n, data)
    with pytest.raises(CorruptFileError, match="offset"):
        SameDiff.load(path)


def _edit_var(name, **changes):
    def edit(doc):
        next(v for v in doc["variables"] if v["name"] == name).update(changes)
    return edit


def _edit_node(op, **changes):
    def edit(doc):
        next(n for n in doc["nodes"] if n["op"] == op).update(changes)
    return edit


@pytest.mark.parametrize("edit, match", [
    (_edit_var("head/y", shape=[-1, 2]), "head/y"),                  # contradicts inference
    (_edit_var("head/y", dtype="float64"), "head/y"),
    (_edit_var("layer0/w", shape=[4, 7]), "layer0/w"),               # vs its array
    (_edit_var("x", type="SOMETHING"), "x"),
    (_edit_var("x", shape=[-2, 4]), "x"),
    (_edit_var("x", dtype="object"), "x"),
    (_edit_var("x", array="arrays/0.npy"), "x"),                     # placeholders hold no array
    (_edit_node("split", attrs={"num_or_sizes": [4], "axis": 1}), "split"),
    (_edit_node("split", attrs={"num_or_sizes": "two"}), "split"),
    (_edit_node("relu", inputs=["undefined"]), "undefined"),
    (_edit_node("relu", outputs=["x"]), "x"),
    (lambda d: d["nodes"].reverse(), "not a variable defined before"),
    (lambda d: d["nodes"].pop(), "produced by no node"),
    (lambda d: d["variables"].append(d["variables"][0]), "defined twice"),
    (lambda d: d.pop("nodes"), "lists"),
])
def test_inconsistent_graph(saved, edit, match):
    _, _, path = saved
    _rewrite(path, edit)
    with pytest.raises(CorruptFileError, match=match):
        SameDiff.load(path)


def test_pickled_object_array_is_never_unpickled(saved, monkeypatch):
    _, _, path = saved
    evil = np.array([{"payload": 1}, None], dtype=object)
    _rewrite(path, members={_member_of(path, "layer0/b"): _npy(evil, allow_pickle=True)})

    def forbidden(*args, **kwargs):
        pytest.fail("load tried to unpickle data from the file")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    with pytest.raises(UnsafeFileError, match="layer0/b") as err:
        SameDiff.load(path)
    assert isinstance(err.value, CorruptFileError)


def test_raw_pickle_instead_of_npy_is_refused(saved, monkeypatch):
    _, _, path = saved
    _rewrite(path, members={_member_of(path, "layer0/b"): pickle.dumps(np.zeros(6))})
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    with pytest.raises(CorruptFileError, match="not a valid .npy"):
        SameDiff.load(path)


def test_oversized_member_refused_before_decompressing(saved):
    _, _, path = saved
    big = np.zeros(200_000, np.float32)  # compresses to little, inflates to 800 kB
    _rewrite(path, members={_member_of(path, "offset"): _npy(big)})
    with pytest.raises(CorruptFileError, match="'offset'.* far more than"):
        SameDiff.load(path)


# --------------------------------------------------------------------------------------------
# atomic saves
# --------------------------------------------------------------------------------------------

def _boom_after(n_ok: int, original, exc=OSError("disk full")):
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > n_ok:
            raise exc
        return original(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_interrupted_save_keeps_previous_file(saved, monkeypatch, exc):
    sd, feeds, path = saved
    before = path.read_bytes()
    sd.get_variable("layer0/b").set_array(np.full(6, 7.0, np.float32))
    monkeypatch.setattr(np, "save", _boom_after(2, np.save, exc))
    with pytest.raises(type(exc)):
        sd.save(path)
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]
    monkeypatch.undo()
    old = SameDiff.load(path)
    np.testing.assert_array_equal(old.get_variable("layer0/b").get_arr().numpy(),
                                  np.linspace(-1, 1, 6).astype(np.float32))


def test_failed_rename_leaves_no_temp_file(saved, monkeypatch):
    sd, _, path = saved
    before = path.read_bytes()
    monkeypatch.setattr(os, "replace", _boom_after(0, os.replace))
    with pytest.raises(OSError):
        sd.save(path)
    assert path.read_bytes() == before and os.listdir(path.parent) == [path.name]


def test_interrupted_first_save_creates_nothing(tmp_path, monkeypatch):
    sd, _ = _mlp()
    monkeypatch.setattr(zipfile.ZipFile, "writestr", _boom_after(0, zipfile.ZipFile.writestr))
    with pytest.raises(OSError):
        sd.save(tmp_path / "new.sdz")
    assert os.listdir(tmp_path) == []


def test_unencodable_attribute_fails_before_writing(tmp_path, monkeypatch):
    odd = Attr.INT.__class__("anything", lambda v: v)
    udf = OpDef(name="odd_attr", inputs=("x",), attr_kinds={"obj": (odd, REQUIRED)},
                infer=lambda t, a: t[0], impl=lambda x, *, obj: x, doc="test UDF")
    monkeypatch.setitem(REGISTRY, udf.name, udf)
    sd = SameDiff.create()
    sd._record(udf, [sd.placeholder("x", "float", 2)], {"obj": frozenset({1})})
    with pytest.raises(SerializationError, match="obj"):
        sd.save(tmp_path / "odd.sdz")
    assert os.listdir(tmp_path) == []


def test_weak_literal_types_survive(tmp_path):
    sd = SameDiff.create()
    x = sd.placeholder("x", "int32", 3)
    (x * 2).rename("i")
    (x > 1.5).rename("b")
    (x.cast("float16") + True).rename("h")
    loaded = _roundtrip(sd, tmp_path)
    _assert_same_graph(sd, loaded)
    assert [i.ttype for n, i in loaded.graph.vars.items() if n.startswith("literal")] == [
        TensorType((), np.dtype(np.int64), True), TensorType((), np.dtype(np.float64), True),
        TensorType((), np.dtype(np.bool_), True)]
    feeds = {"x": np.array([1, 2, 3], np.int32)}
    _assert_same_outputs(_outputs(loaded, feeds, ["i", "b", "h"]),
                         _outputs(sd, feeds, ["i", "b", "h"]))


def test_attribute_kind_that_does_not_invert_its_encoding_fails_at_save(tmp_path, monkeypatch):
    lossy = Attr.INT.__class__("lossy", lambda v: v if isinstance(v, tuple) else tuple(v)[::-1])
    udf = OpDef(name="lossy_attr", inputs=("x",), attr_kinds={"t": (lossy, REQUIRED)},
                infer=lambda t, a: t[0], impl=lambda x, *, t: x, doc="test UDF")
    monkeypatch.setitem(REGISTRY, udf.name, udf)
    sd = SameDiff.create()
    sd._record(udf, [sd.placeholder("x", "float", 2)], {"t": (1, 2)})  # JSON [1, 2] -> (2, 1)
    with pytest.raises(SerializationError, match="do not survive"):
        sd.save(tmp_path / "lossy.sdz")
    assert os.listdir(tmp_path) == []


def test_udf_round_trip_and_missing_udf(tmp_path):
    udf = pytest.importorskip("samediff.udf")
    handle = udf.register("serialize_test_scale", lambda x, *, k: x * k,
                          properties={"k": 2.0}, replace=True)
    try:
        sd = SameDiff.create()
        x = sd.placeholder("x", "float", -1)
        sd._record(handle.op, [x], {"k": 3.0}, name="scaled")
        sd.save(tmp_path / "udf.sdz")
        loaded = SameDiff.load(tmp_path / "udf.sdz")
        _assert_same_graph(sd, loaded)
        feeds = {"x": np.arange(3, dtype=np.float32)}
        _assert_same_outputs(_outputs(loaded, feeds, ["scaled"]), _outputs(sd, feeds, ["scaled"]))
    finally:
        udf.unregister("serialize_test_scale")
    with pytest.raises(UnknownOpError, match="serialize_test_scale.*samediff.udf"):
        SameDiff.load(tmp_path / "udf.sdz")


def test_member_with_unsupported_compression_is_a_named_error(saved):
    """zipfile raises NotImplementedError for an unknown compression method: reported as a
    damaged member, never as a crash."""
    path = saved[2]
    data = bytearray(open(path, "rb").read())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("graph.json")
    local = info.header_offset
    assert data[local:local + 4] == b"PK\x03\x04"
    data[local + 8:local + 10] = (99).to_bytes(2, "little")  # compression method 99: unknown
    central = data.find(b"PK\x01\x02")
    while central >= 0:  # the central directory repeats the method for each member
        name_len = int.from_bytes(data[central + 28:central + 30], "little")
        if bytes(data[central + 46:central + 46 + name_len]) == b"graph.json":
            data[central + 10:central + 12] = (99).to_bytes(2, "little")
        central = data.find(b"PK\x01\x02", central + 4)
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(CorruptFileError, match="damaged"):
        SameDiff.load(path)
