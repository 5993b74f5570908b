"""SameDiff.load on damaged and hostile files; SameDiff.save's clean-up and error reporting.

* every damaged file raises an ``NdError`` subclass whose message names the file, never what
  zipfile/json/numpy raise (NotImplementedError, RecursionError, ValueError, OverflowError...):
  regression tests for the fuzzer's findings, then two hypothesis properties (damaged bytes;
  mutated graph.json structure);
* sizes are checked before inflating: graph.json beyond its limit, a member whose zip header
  lies, an array member whose declared size disagrees with its shape;
* a save removes the temporaries that killed saves of the same target left, never a live one
  nor another target's; any failure leaves no temporary and the previous file intact;
* saving into a missing or unwritable directory raises ``SaveError`` naming the target.
"""
from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samediff import SameDiff, atomic_file, serialize
from samediff.errors import (CorruptFileError, FormatVersionError, NdError, SaveError,
                             SerializationError)
from samediff.ops import REGISTRY, OpDef
from samediff.ops.registry import REQUIRED, Attr
from samediff.training import TrainingConfig
from samediff.training.updaters import Adam

try:
    import fcntl
except ImportError:  # Windows: saves do not lock (nor clean up) temporaries
    fcntl = None
needs_flock = pytest.mark.skipif(fcntl is None, reason="no flock on this platform")
HYPOTHESIS = settings(max_examples=300, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _graph() -> SameDiff:
    """Small but varied: placeholders with -1, variables with updater state, an int constant,
    a two-output split, a nested slice attribute, weak literals, a loss, a training config."""
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
    w = sd.var("w", np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1))
    b = sd.var("b", np.zeros((1,), np.float32))
    sd.constant("steps", np.arange(4, dtype=np.int32))
    a, _ = x.split(num_or_sizes=[2, 1], axis=1)
    (a[:, 1:2] * 2.0).rename("half")
    (x.mmul(w) + b - y).square().mean(name="mse").mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Adam(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    rng = np.random.default_rng(0)
    sd.fit((rng.random((8, 3), dtype=np.float32), rng.random((8, 1), dtype=np.float32)),
           epochs=1, batch_size=8, verbose=0)  # gives the updater state arrays
    return sd


def _fingerprint(sd: SameDiff) -> tuple:
    """Everything save writes, in comparable form."""
    def value(v):
        return None if v is None else (v.dtype.str, v.shape, v.tobytes())

    variables = [(n, i.vtype, i.ttype, value(i.value)) for n, i in sd.graph.vars.items()]
    nodes = [(n.name, n.op.name, sorted(vars(n.attrs).items(), key=str), n.inputs, n.outputs)
             for n in sd.graph.nodes]
    config = sd.training_config.to_dict() if sd.training_config is not None else None
    state = sd.updater_state
    slots = {p: {s: value(a) for s, a in per.items()} for p, per in state.arrays.items()}
    return (variables, nodes, list(sd.loss_variables), json.dumps(config, sort_keys=True),
            (state.iteration, state.epoch, state.batch, slots))


@pytest.fixture(scope="module")
def original() -> SameDiff:
    return _graph()


@pytest.fixture(scope="module")
def good_bytes(original, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("good") / "good.sdz"
    original.save(path)
    return path.read_bytes()


@pytest.fixture
def saved(good_bytes, tmp_path):
    path = tmp_path / "model.sdz"
    path.write_bytes(good_bytes)
    return path


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _write_zip(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _with_graph_json(path, good: bytes, text: str | bytes) -> None:
    members = _members(good)
    members["graph.json"] = text.encode() if isinstance(text, str) else text
    _write_zip(path, members)


def _edited(path, good: bytes, edit) -> None:
    doc = json.loads(_members(good)["graph.json"])
    edit(doc)
    _with_graph_json(path, good, json.dumps(doc))


# Offsets of the fields _patch_member knows, in the local header and in the central directory.
_LOCAL = {"version": 4, "method": 8, "crc": 14, "compress_size": 18, "file_size": 22}
_CENTRAL = {"version": 6, "method": 10, "crc": 16, "compress_size": 20, "file_size": 24}
_WIDTH = {"version": 2, "method": 2, "crc": 4, "compress_size": 4, "file_size": 4}


def _patch_member(data: bytes, name: str, **fields: int) -> bytes:
    """Overwrite header fields of member ``name`` in both its local header and its central
    directory entry (zip64 markers in the local header are left alone: zipfile reads the
    central directory's sizes)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        local = zf.getinfo(name).header_offset
    central = out.find(b"PK\x01\x02")
    while central >= 0:
        name_len = int.from_bytes(out[central + 28:central + 30], "little")
        if bytes(out[central + 46:central + 46 + name_len]) == name.encode():
            break
        central = out.find(b"PK\x01\x02", central + 4)
    assert out[local:local + 4] == b"PK\x03\x04" and central >= 0
    for field, value in fields.items():
        width = _WIDTH[field]
        for at in (local + _LOCAL[field], central + _CENTRAL[field]):
            if out[at:at + width] != b"\xff" * width:
                out[at:at + width] = value.to_bytes(width, "little")
    return bytes(out)


def _raw_deflate(*segments: tuple[bytes, int]) -> bytes:
    """A raw deflate stream of ``data * repeat`` per segment, built without inflating anything
    big: a segment ends with a full flush, so its compressed bytes can simply be repeated."""
    stream = []
    for data, repeat in segments:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        stream.append((c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)) * repeat)
    stream.append(zlib.compressobj(9, zlib.DEFLATED, -15).flush())
    return b"".join(stream)


def _crc(*segments: tuple[bytes, int]) -> int:
    crc = 0
    for data, repeat in segments:
        for _ in range(repeat):
            crc = zlib.crc32(data, crc)
    return crc


def _with_deflated_graph_json(path, good: bytes, stream: bytes, crc: int, size: int) -> None:
    """Write ``good`` with graph.json replaced by a precomputed raw deflate ``stream``: stored
    first (so its bytes land verbatim), then its headers are patched to say deflated."""
    members = _members(good)
    members.pop("graph.json")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo("graph.json"), stream)  # ZIP_STORED
        for name, data in members.items():
            zf.writestr(name, data, zipfile.ZIP_DEFLATED)
    path.write_bytes(_patch_member(buf.getvalue(), "graph.json", method=zipfile.ZIP_DEFLATED,
                                   crc=crc, file_size=size))


def _load_fails_naming_the_file(path, error=NdError, match=None, **kwargs) -> NdError:
    with pytest.raises(error, match=match) as err:
        serialize.load(path, **kwargs)
    assert str(path) in str(err.value)
    return err.value


def _graph_doc(good: bytes) -> dict:
    return json.loads(_members(good)["graph.json"])


def _var(doc: dict, name: str) -> dict:
    return next(v for v in doc["variables"] if v["name"] == name)


# --------------------------------------------------------------------------------------------
# 10. damaged files: the fuzzer's findings
# --------------------------------------------------------------------------------------------

def test_good_file_round_trips(original, saved):
    assert _fingerprint(SameDiff.load(saved)) == _fingerprint(original)


def test_flipped_version_needed_to_extract(saved):
    """zipfile raises NotImplementedError("zip file version 25.5") when it reads the central
    directory."""
    saved.write_bytes(_patch_member(saved.read_bytes(), "graph.json", version=0xFF))
    err = _load_fails_naming_the_file(saved, CorruptFileError, "not a readable zip")
    assert isinstance(err.__cause__, NotImplementedError)


@pytest.mark.parametrize("first", ["graph.json", "arrays/"])
def test_an_unknown_compression_method(saved, first):
    """zipfile raises NotImplementedError("That compression method is not supported") when a
    member is opened, not when the archive is: the member's reader names it."""
    data = saved.read_bytes()
    member = next(n for n in _members(data) if n.startswith(first))
    saved.write_bytes(_patch_member(data, member, method=99))
    err = _load_fails_naming_the_file(saved, CorruptFileError, "damaged")
    assert isinstance(err.__cause__, NotImplementedError)


@pytest.mark.parametrize("depth", [200_000, 100])
def test_deeply_nested_json(saved, good_bytes, depth):
    """200,000 levels: json's RecursionError; 100 levels: parses, refused by the depth bound."""
    nested = "[" * depth + "]" * depth
    _with_graph_json(saved, good_bytes,
                     f'{{"format": "nd4py-samediff", "version": 1, "variables": {nested}}}')
    _load_fails_naming_the_file(saved, CorruptFileError, "nests")


def test_five_thousand_digit_version(saved, good_bytes):
    """Python refuses int("9" * 5000) with a ValueError (the int-str conversion limit)."""
    _with_graph_json(saved, good_bytes, '{"format": "nd4py-samediff", "version": '
                     + "9" * 5000 + ', "variables": [], "nodes": []}')
    _load_fails_naming_the_file(saved, CorruptFileError, "not valid JSON")


@pytest.mark.parametrize("version", [2 ** 64, -(2 ** 70)])
def test_version_outside_int64(saved, good_bytes, version):
    _edited(saved, good_bytes, lambda d: d.update(version=version))
    _load_fails_naming_the_file(saved, FormatVersionError, "invalid format version")


@pytest.mark.parametrize("var, shape", [
    ("w", [10 ** 30]),            # OverflowError in np.prod before
    ("w", [2 ** 40, 2 ** 40]),    # int64 dims whose product overflows int64
    ("x", [-1, 2 ** 62]),         # placeholders too: inference must not overflow either
    ("x", [1] * 65),              # more dims than numpy has
    ("x", [-1, 3.0]),
    ("x", [-1, True]),
    ("x", "3"),
    ("steps", [-1]),              # persistent values have known shapes
])
def test_absurd_shapes(saved, good_bytes, var, shape):
    _edited(saved, good_bytes, lambda d: _var(d, var).update(shape=shape))
    _load_fails_naming_the_file(saved, CorruptFileError, f"{var}'|int64")


def _set_attr(doc, op, **attrs):
    next(n for n in doc["nodes"] if n["op"] == op)["attrs"].update(attrs)


@pytest.mark.parametrize("edit", [
    lambda d: _var(d, "x").update(name=7),
    lambda d: _var(d, "x").update(type=["PLACEHOLDER"]),
    lambda d: _var(d, "x").update(dtype=32),
    lambda d: _var(d, "x").update(weak="no"),
    lambda d: _var(d, "w").update(array=["arrays/1.npy"]),
    lambda d: d["nodes"][0].update(name=None),
    lambda d: d["nodes"][0].update(inputs=[1]),
    lambda d: d["nodes"][0].update(outputs="split"),
    lambda d: d["nodes"][0].update(op={"name": "split"}),
    lambda d: d["nodes"][0].update(attrs=[]),
    lambda d: _set_attr(d, "split", axis=10 ** 30),
    lambda d: _set_attr(d, "split", axis=2 ** 62),
    lambda d: _set_attr(d, "split", num_or_sizes=[2 ** 62, -2 ** 62]),
    lambda d: d.update(loss_variables={"mse": 1}),
    lambda d: d.update(loss_variables=[3]),
    lambda d: d.update(training=[1]),
    lambda d: d["training"].update(updater={"type": 5}),
    lambda d: d["training"].update(feature_mapping=7),
    lambda d: d["updater_state"].update(iteration=-1),
    lambda d: d["updater_state"]["arrays"]["w"].update(M=5),
    lambda d: d["updater_state"]["arrays"].update(x={}),
    lambda d: d.update(variables={}),
    lambda d: d.pop("variables"),
    lambda d: d["variables"].append("x"),
])
def test_wrong_types_and_values(saved, good_bytes, edit):
    _edited(saved, good_bytes, edit)
    _load_fails_naming_the_file(saved, CorruptFileError)


def test_whatever_inference_raises_is_a_named_error(tmp_path, monkeypatch):
    """The last net: op inference meeting absurd-but-well-typed data may raise anything."""
    def infer(types, attrs):
        if attrs.k > 1000:
            raise OverflowError("k too large for this op")
        return types[0]

    udf = OpDef(name="damaged_test_op", inputs=("x",),
                attr_kinds={"k": (Attr.INT, REQUIRED)},
                infer=infer, impl=lambda x, *, k: x, doc="test op")
    monkeypatch.setitem(REGISTRY, udf.name, udf)
    sd = SameDiff.create()
    sd._record(udf, [sd.placeholder("x", "float", 2)], {"k": 3}, name="out")
    path = tmp_path / "udf.sdz"
    sd.save(path)
    _edited(path, path.read_bytes(), lambda d: d["nodes"][0]["attrs"].update(k=10 ** 9))
    err = _load_fails_naming_the_file(path, CorruptFileError, "OverflowError")
    assert isinstance(err.__cause__, OverflowError)


# --------------------------------------------------------------------------------------------
# 10. damaged files: properties
# --------------------------------------------------------------------------------------------

def _header_positions(data: bytes) -> list[int]:
    """Byte positions of the zip's structure (local headers, central directory, end record),
    where damage is most interesting: the rest is compressed data, guarded by CRCs."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        positions = list(range(zf.start_dir, len(data)))
        for info in zf.infolist():
            start = info.header_offset
            name_len = int.from_bytes(data[start + 26:start + 28], "little")
            extra_len = int.from_bytes(data[start + 28:start + 30], "little")
            positions.extend(range(start, start + 30 + name_len + extra_len))
    return positions


def _check_load(path, want: tuple) -> None:
    """Loading succeeds with the original graph or raises an NdError naming the file."""
    try:
        loaded = SameDiff.load(path)
    except NdError as exc:
        assert str(path) in str(exc), f"{type(exc).__name__} does not name the file: {exc}"
        return
    assert _fingerprint(loaded) == want


@HYPOTHESIS
@given(data=st.data())
def test_damaged_bytes_never_crash(original, good_bytes, tmp_path_factory, data):
    path = tmp_path_factory.getbasetemp() / "bytes.sdz"
    damaged = bytearray(good_bytes)
    anywhere = st.integers(0, len(damaged) - 1)
    in_headers = st.sampled_from(_header_positions(good_bytes))
    edits = data.draw(st.lists(st.tuples(st.one_of(in_headers, anywhere),
                                         st.sampled_from(["flip", "set"]),
                                         st.integers(0, 255)), min_size=1, max_size=6))
    for pos, kind, value in edits:
        damaged[pos] = damaged[pos] ^ (value or 1) if kind == "flip" else value
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(damaged))))
    path.write_bytes(bytes(damaged[:cut]))
    _check_load(path, _fingerprint(original))


def _paths(value, prefix=()) -> list[tuple]:
    """Every location in a JSON document, as a tuple of keys and indices."""
    out = []
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) else ())
    for key, child in items:
        out.append(prefix + (key,))
        out.extend(_paths(child, prefix + (key,)))
    return out


# Strings replaced after json.dumps: values json itself cannot write (or would take ages to).
_SPLICES = {"@@deep@@": "[" * 100_000 + "]" * 100_000, "@@digits@@": "9" * 5000,
            "@@huge@@": "1" + "0" * 400, "@@inf@@": "1e999"}
_ODD_INTS = [-1, 0, 1, 2, 3, 2 ** 31, 2 ** 62, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 10 ** 30]
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.sampled_from(_ODD_INTS), st.integers(-5, 5),
              st.floats(allow_nan=True), st.text(max_size=4), st.sampled_from(list(_SPLICES)),
              st.sampled_from(["x", "w", "float32", "VARIABLE", "ARRAY", "arrays/0.npy"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)


def _mutate(doc, path: tuple, kind: str, value) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if kind == "delete":
        del parent[key]
    elif kind == "duplicate" and isinstance(parent, list):
        parent.append(parent[key])
    elif kind == "wrap":
        parent[key] = [parent[key]]
    else:
        parent[key] = value


@HYPOTHESIS
@given(data=st.data())
def test_mutated_graph_json_never_crashes(good_bytes, tmp_path_factory, data):
    """Wrong types, huge numbers, deep nesting, missing keys: a named error, or a graph that
    is valid (it saves and loads back to itself)."""
    base = tmp_path_factory.getbasetemp()
    path, again = base / "mutated.sdz", base / "again.sdz"
    doc = _graph_doc(good_bytes)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        _mutate(doc, data.draw(st.sampled_from(paths)),
                data.draw(st.sampled_from(["replace", "replace", "delete", "duplicate",
                                           "wrap"])), data.draw(_VALUES))
    text = json.dumps(doc)
    for token, replacement in _SPLICES.items():
        text = text.replace(json.dumps(token), replacement)
    _with_graph_json(path, good_bytes, text)
    try:
        loaded = SameDiff.load(path)
    except NdError as exc:
        assert str(path) in str(exc), f"{type(exc).__name__} does not name the file: {exc}"
        return
    loaded.save(again)
    assert _fingerprint(SameDiff.load(again)) == _fingerprint(loaded)


# --------------------------------------------------------------------------------------------
# 11. sizes are checked before inflating
# --------------------------------------------------------------------------------------------

def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_graph_json_bomb_is_refused_before_inflating(saved, good_bytes):
    """A valid graph.json followed by 1 GiB of spaces: a 1 MB file that would load after
    inflating 1 GiB. Refused from the size its header declares, without inflating."""
    text = _members(good_bytes)["graph.json"]
    segments = [(text, 1), (b" " * (1 << 20), 1024)]
    _with_deflated_graph_json(saved, good_bytes, _raw_deflate(*segments), _crc(*segments),
                              len(text) + (1 << 30))
    assert saved.stat().st_size < 2 << 20
    start = time.perf_counter()
    peak = _peak_bytes(lambda: _load_fails_naming_the_file(
        saved, CorruptFileError, r"graph.json declares 1073\d+ bytes .*268435456-byte limit"))
    assert time.perf_counter() - start < 1.0 and peak < 4 << 20


def test_graph_json_limit_is_what_refuses_and_can_be_raised(saved, good_bytes, monkeypatch):
    """The same construction with 8 MiB of padding: valid, it loads; the limit refuses it."""
    text = _members(good_bytes)["graph.json"]
    segments = [(text, 1), (b" " * (1 << 20), 8)]
    _with_deflated_graph_json(saved, good_bytes, _raw_deflate(*segments), _crc(*segments),
                              len(text) + (8 << 20))
    SameDiff.load(saved)
    _load_fails_naming_the_file(saved, CorruptFileError, "max_graph_bytes",
                                max_graph_bytes=4 << 20)
    monkeypatch.setattr(serialize, "MAX_GRAPH_JSON_BYTES", 4 << 20)
    _load_fails_naming_the_file(saved, CorruptFileError, "limit")
    serialize.load(saved, max_graph_bytes=16 << 20)
    SameDiff.load(saved, max_graph_bytes=16 << 20)  # the public entry point forwards it
    with pytest.raises(CorruptFileError, match="max_graph_bytes"):
        SameDiff.load(saved, max_graph_bytes=4 << 20)


def test_lying_header_cannot_inflate_past_its_declared_size(saved, good_bytes):
    """Declares 2,000 bytes, inflates to 64 MiB: the read stops at 2,000 (then the CRC)."""
    segments = [(b" " * (1 << 20), 64)]
    _with_deflated_graph_json(saved, good_bytes, _raw_deflate(*segments), _crc(*segments), 2000)
    peak = _peak_bytes(lambda: _load_fails_naming_the_file(saved, CorruptFileError, "damaged"))
    assert peak < 4 << 20


def test_declared_size_beyond_what_deflate_can_produce(saved):
    """1 GiB declared for a 1.5 kB deflate stream: impossible (deflate expands at most
    1032:1), refused from the headers alone."""
    saved.write_bytes(_patch_member(saved.read_bytes(), "graph.json", file_size=1 << 30))
    _load_fails_naming_the_file(saved, CorruptFileError, "compressed bytes can hold")


def _array_member(good: bytes, var: str) -> str:
    return _var(_graph_doc(good), var)["array"]


@pytest.mark.parametrize("delta", [8, -4, 4096])
def test_array_member_size_must_match_its_shape(saved, good_bytes, delta, monkeypatch):
    """The size the zip declares must be the .npy header plus shape x itemsize exactly; the
    data is never read otherwise."""
    member = _array_member(good_bytes, "w")
    with zipfile.ZipFile(saved) as zf:
        size = zf.getinfo(member).file_size
    saved.write_bytes(_patch_member(saved.read_bytes(), member, file_size=size + delta))
    monkeypatch.setattr(np.lib.format, "read_array",
                        lambda *a, **k: pytest.fail("array data read before its size was checked"))
    # (declaring a little less truncates the header's read: then the CRC fails first)
    _load_fails_naming_the_file(saved, CorruptFileError,
                                rf"'w'.*(declares {size + delta} bytes|damaged.*CRC)")


def test_array_bomb_is_refused_before_inflating(saved, good_bytes):
    """A constant declared 2**28 float32 (1 GiB), its member declaring that size in a few
    hundred compressed bytes: refused before any inflating or allocation."""
    member = _array_member(good_bytes, "steps")
    doc = _graph_doc(good_bytes)
    _var(doc, "steps").update(dtype="float32", shape=[1 << 28])
    _with_graph_json(saved, good_bytes, json.dumps(doc))
    saved.write_bytes(_patch_member(saved.read_bytes(), member, file_size=128 + (1 << 30)))
    peak = _peak_bytes(lambda: _load_fails_naming_the_file(
        saved, CorruptFileError, "'steps'.*compressed bytes can hold"))
    assert peak < 4 << 20


# --------------------------------------------------------------------------------------------
# 12. stale temporaries
# --------------------------------------------------------------------------------------------

def _fake_temp(directory, name: str, size: int = 1000) -> None:
    (directory / name).write_bytes(b"\0" * size)


@needs_flock
def test_save_removes_stale_temporaries_of_its_target_only(original, tmp_path):
    target = tmp_path / "m.sdz"
    original.save(target)
    stale = [".m.sdz.abcd1234.tmp", ".m.sdz.zz__0099.tmp"]
    kept = [".other.sdz.abcd1234.tmp",     # another target
            ".m.sdz.x.abcd1234.tmp",       # temporary of target "m.sdz.x"
            ".m.sdz.abc.tmp",              # not the temporary pattern
            "m.sdz.abcd1234.tmp",          # no leading dot: a user's file
            ".m.sdz.abcd1234.tmp.keep"]
    for name in stale + kept:
        _fake_temp(tmp_path, name)
    original.save(target)
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["m.sdz"])
    assert _fingerprint(SameDiff.load(target)) == _fingerprint(original)


def test_temporary_names_match_the_cleanup_pattern(original, tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (seen.append(src), real_replace(src, dst)))
    original.save(tmp_path / "m.sdz")
    assert len(seen) == 1 and atomic_file._temporary_pattern("m.sdz").fullmatch(
        os.path.basename(seen[0]))


@needs_flock
def test_cleanup_never_follows_symlinks_or_removes_non_files(original, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, tmp_path / ".m.sdz.link0000.tmp")
    os.mkdir(tmp_path / ".m.sdz.dir00000.tmp")
    original.save(tmp_path / "m.sdz")
    assert victim.read_text() == "keep me"
    assert {".m.sdz.link0000.tmp", ".m.sdz.dir00000.tmp"} <= set(os.listdir(tmp_path))


_HOLD_LOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "wb")
f.write(b"partial save")
f.flush()
fcntl.flock(f.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


@needs_flock
def test_live_save_of_another_process_is_kept_killed_one_removed(original, tmp_path):
    """A temporary locked by a live process is another save in progress: kept. Once that
    process is killed (the kernel drops its lock), the next save removes it."""
    target, temp = tmp_path / "m.sdz", tmp_path / ".m.sdz.live0001.tmp"
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(temp)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        original.save(target)
        assert temp.exists()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    original.save(target)
    assert os.listdir(tmp_path) == ["m.sdz"]


@needs_flock
def test_lock_held_in_this_process_is_respected(original, tmp_path):
    """flock locks belong to the open file, so another thread's live save is seen as live."""
    temp = tmp_path / ".m.sdz.thrd0001.tmp"
    with open(temp, "wb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        original.save(tmp_path / "m.sdz")
        assert temp.exists()
    original.save(tmp_path / "m.sdz")
    assert not temp.exists()


def test_concurrent_saves_of_one_target_all_succeed(original, tmp_path):
    target, errors = tmp_path / "m.sdz", []

    def saver():
        try:
            for _ in range(5):
                original.save(target)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=saver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert os.listdir(tmp_path) == ["m.sdz"]
    assert _fingerprint(SameDiff.load(target)) == _fingerprint(original)


# --------------------------------------------------------------------------------------------
# 12/13. a failing save leaves nothing behind and names the target
# --------------------------------------------------------------------------------------------

def _failing(exc):
    def fail(*args, **kwargs):
        raise exc
    return fail


_FAILURE_POINTS = {
    "create": (atomic_file.tempfile, "NamedTemporaryFile"),
    "graph.json": (zipfile.ZipFile, "writestr"),
    "array": (np, "save"),
    "fsync": (os, "fsync"),
    "chmod": (os, "chmod"),
    "rename": (os, "replace"),
}


@needs_flock  # the overwrite cases start with a stale temporary, which must go too
@pytest.mark.parametrize("where", list(_FAILURE_POINTS))
@pytest.mark.parametrize("exc", [OSError(errno.ENOSPC, "No space left on device"),
                                 KeyboardInterrupt()], ids=["ENOSPC", "interrupt"])
@pytest.mark.parametrize("existing", [True, False], ids=["overwrite", "new"])
def test_failed_save_leaves_no_temporary_and_the_previous_file(original, tmp_path, monkeypatch,
                                                               where, exc, existing):
    target = tmp_path / "m.sdz"
    if existing:
        original.save(target)
        _fake_temp(tmp_path, ".m.sdz.stale000.tmp")  # left by an earlier killed save
    before = target.read_bytes() if existing else None
    changed = _graph()
    changed.get_variable("w").set_array(np.full((3, 1), 7.0, np.float32))
    monkeypatch.setattr(*_FAILURE_POINTS[where], _failing(exc))
    with pytest.raises(type(exc)) as err:
        changed.save(target)
    monkeypatch.undo()
    if isinstance(exc, OSError):
        assert isinstance(err.value, SaveError) and err.value.errno == errno.ENOSPC
        assert str(target) in str(err.value) and ".tmp" not in str(err.value)
        assert "disk is full" in str(err.value)
    assert os.listdir(tmp_path) == (["m.sdz"] if existing else [])
    if existing:
        assert target.read_bytes() == before
        assert _fingerprint(SameDiff.load(target)) == _fingerprint(original)


def test_save_into_missing_directory(original, tmp_path):
    target = tmp_path / "missing" / "m.sdz"
    with pytest.raises(SaveError, match=r"does not exist; create it first") as err:
        original.save(target)
    assert str(target) in str(err.value) and ".tmp" not in str(err.value)
    assert isinstance(err.value, OSError) and isinstance(err.value, SerializationError)
    assert err.value.errno == errno.ENOENT
    assert os.listdir(tmp_path) == []


def test_save_under_a_regular_file(original, tmp_path):
    """Fails for root too (unlike chmod)."""
    (tmp_path / "some_file").write_text("not a directory")
    target = tmp_path / "some_file" / "m.sdz"
    with pytest.raises(SaveError, match="not a directory") as err:
        original.save(target)
    assert str(target) in str(err.value) and err.value.errno == errno.ENOTDIR


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0,
                    reason="root (or Windows) ignores directory permissions")
def test_save_into_unwritable_directory(original, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(SaveError, match="no permission") as err:
            original.save(locked / "m.sdz")
        assert str(locked / "m.sdz") in str(err.value)
        assert err.value.errno == errno.EACCES
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


def test_permission_error_names_the_target_not_the_temporary(original, tmp_path, monkeypatch):
    """The same as above, for root too: the temporary's creation is refused."""
    monkeypatch.setattr(atomic_file.tempfile, "NamedTemporaryFile", _failing(
        PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".m.sdz.abcd1234.tmp"))))
    with pytest.raises(SaveError, match="no permission to create files") as err:
        original.save(tmp_path / "m.sdz")
    assert str(tmp_path / "m.sdz") in str(err.value) and ".tmp" not in str(err.value)


def test_except_oserror_still_catches_save_errors(original, tmp_path):
    try:
        original.save(tmp_path / "missing" / "m.sdz")
    except OSError as exc:
        assert isinstance(exc, NdError)
    else:
        pytest.fail("no error")
