"""Safe save/load of a ``SameDiff`` graph: a zip of ``graph.json`` and one ``.npy`` per array.

Loading never runs code from the file: the graph is JSON, arrays are read with
``allow_pickle=False`` after their header has been checked (object dtypes are refused before
numpy sees the data), every op is looked up in the op table by name, and every node is re-typed
with the op's own inference, so a file that contradicts itself is reported, not half-loaded.
Any damaged file raises a ``SerializationError`` subclass naming the file, never a bare
``ValueError``/``RecursionError``/``NotImplementedError`` from zipfile, json or numpy.

Loading is bounded: ``graph.json`` is refused beyond ``MAX_GRAPH_JSON_BYTES`` (256 MiB) and
each array member must declare exactly the size its ``.npy`` header and the graph's shape/dtype
need, both checked before anything is inflated, and reads never go past the declared size.

Saving is atomic: the file is written to a temporary ``.<name>.<8 random characters>.tmp`` beside the target,
fsynced, then renamed over it; a failed save removes its temporary and leaves the target as it
was. The temporary stays locked (``flock``) while it is written, so the next save to the same
target can tell a temporary left by a killed save (unlocked: removed) from a live one.

File layout (format ``nd4py-samediff``, version 1)::

    graph.json      {"format", "version", "variables": [...], "nodes": [...],
                     "training": null, "updater_state": {}}
    arrays/<i>.npy  value of the i-th variable (VARIABLEs and CONSTANTs, literals included)

A UTF8 (string) array is stored as one uint8 ``.npy`` vector: its ``n + 1`` int64 offsets
(little endian, C order over the elements, the first 0 and the last the byte count) and then
the elements' UTF-8 bytes, one after another -- never as pickled objects. Loading checks the
offsets and the UTF-8 before it makes the array of the shape ``graph.json`` declares.

A variable is ``{"name", "type", "dtype", "shape", "weak", "array"}`` (``shape`` may hold -1,
``array`` is a member name or null); a node is ``{"name", "op", "attrs", "inputs", "outputs"}``
with attributes in the JSON form of ``encode_attr``. Name scopes live in the names.

>>> import os, tempfile, numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 2)
>>> y = (x * 2.0).sum(name="y")
>>> path = os.path.join(tempfile.mkdtemp(), "model.sdz")
>>> sd.save(path)
>>> SameDiff.load(path).output({"x": np.ones((3, 2), np.float32)}, "y")["y"].item()
12.0
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import reprlib
import zipfile
import zlib
from typing import IO, Any, Callable, Iterator, NamedTuple

import numpy as np

from .dtypes import dtype_name, is_storage, is_string, to_dtype
from .atomic_file import write_atomically
from .errors import (CorruptFileError, FormatVersionError, NdError, SerializationError,
                     TrainingError, UnknownOpError, UnsafeFileError)
from .ir import Graph, Node, VariableType, decode_attrs
from .ops import REGISTRY, TensorType
from .ops.registry import encode_attr
from .training.config import TrainingConfig
from .training.model import TrainableModel
from .training.state import UpdaterState

FORMAT = "nd4py-samediff"
VERSION = 1
GRAPH_JSON = "graph.json"
_VTYPES = ("VARIABLE", "CONSTANT", "PLACEHOLDER", "ARRAY")
_PERSISTENT = ("VARIABLE", "CONSTANT")

#: Largest ``graph.json`` (uncompressed bytes) ``load`` accepts. The graph of a large model is a
#: few MiB; the limit only stops a small file from inflating into gigabytes. It is checked
#: against the size the zip declares before inflating, and the read stops at that declared size.
#: Raise it per call with ``load(path, max_graph_bytes=...)``, or globally by setting this.
MAX_GRAPH_JSON_BYTES = 256 << 20

_NPY_HEADER_MAX = 1 << 16   # npy v1 headers are at most 64 KiB; v2/3 headers are never that big
_MAX_JSON_DEPTH = 32        # graph.json nests about 6 deep (attributes: a few more)
_INT_LIMIT = 1 << 63        # every integer of graph.json fits an int64, like ND4J's longs
_MAX_RANK = 64              # numpy's own limit on dimensions
_MAX_ELEMENTS = 1 << 60     # elements x itemsize (<= 8) still fits an int64 byte count
_DEFLATE_MAX_RATIO = 1032   # zlib's documented bound: 1 deflated byte inflates to <= 1032

_short = reprlib.Repr()     # bounded reprs of file content in messages (cheap for huge values)
_short.maxstring = _short.maxother = 80
_short.maxlist = _short.maxdict = 6
_short.maxlevel = 3


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------

class Saved(NamedTuple):
    """What a file holds: the graph, its losses, training config and updater state (the fields
    of ``samediff.training.Model``: ``Model(*saved)`` trains like the saved model)."""

    graph: Graph
    losses: list[str]
    training_config: TrainingConfig | None
    updater_state: UpdaterState


def save(sd: TrainableModel, path: str | os.PathLike, *, save_updater_state: bool = True) -> None:
    """Write ``sd`` (a ``SameDiff``, or any ``TrainableModel``: its ``graph``,
    ``loss_variables``, ``training_config`` and ``updater_state``) to ``path`` atomically (an
    existing file survives any failure).

    The training config (if set) is saved in ``training``; with ``save_updater_state`` the
    updater's per-variable arrays and its iteration/epoch counters are saved too, so a loaded
    model trains on exactly where it stopped.

    A file-system failure (missing or unwritable directory, full disk...) raises ``SaveError``
    (an ``OSError`` too) naming ``path``; no temporary file and no partial target remain.
    """
    doc, arrays = _to_document(sd, save_updater_state)
    text = json.dumps(doc, indent=1)  # the document is checked JSON-clean by _to_document
    write_atomically(os.fspath(path),
                     lambda f: _write_zip(f, text, arrays, zipfile.ZIP_DEFLATED))


def to_bytes(sd: TrainableModel) -> bytes:
    """``sd`` in the file format, as bytes (what pickling a ``SameDiff`` carries): the same
    content ``save`` writes, updater state included, but stored uncompressed — weights barely
    deflate, and deflating a large model would cost seconds on every pickle or deepcopy.

    >>> from samediff import SameDiff
    >>> sd = SameDiff.create(); _ = sd.var("w", "ones", "float", 2)
    >>> from_bytes(to_bytes(sd)).graph.vars["w"].value.tolist()
    [1.0, 1.0]
    """
    doc, arrays = _to_document(sd, True)
    buf = io.BytesIO()
    _write_zip(buf, json.dumps(doc), arrays, zipfile.ZIP_STORED)
    return buf.getvalue()


def _write_zip(f: IO[bytes], text: str, arrays: list, compression: int) -> None:
    with zipfile.ZipFile(f, "w", compression=compression) as zf:
        zf.writestr(GRAPH_JSON, text)
        for member, arr in arrays:
            with zf.open(member, "w", force_zip64=True) as out:
                np.save(out, _npy_storable(arr), allow_pickle=False)


def _npy_storable(arr: np.ndarray) -> np.ndarray:
    """``arr``, or the bits of a storage type (bfloat16, float8...), which .npy cannot name,
    as unsigned integers of the same width; graph.json names the type, and loading views the
    bits back as it."""
    return arr.view(f"u{arr.dtype.itemsize}") if is_storage(arr.dtype) else arr


def _utf8_blob(name: str, arr: np.ndarray) -> np.ndarray:
    """A UTF8 array as its stored form: int64 offsets, then the UTF-8 bytes (uint8)."""
    try:
        encoded = [s.encode("utf-8") for s in arr.ravel().tolist()]
    except UnicodeEncodeError as exc:  # (a lone surrogate: Python strings may hold one)
        raise SerializationError(f"save: variable {name!r} holds a string that is not valid "
                                 f"UTF-8 ({exc})") from None
    offsets = np.zeros(len(encoded) + 1, "<i8")
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.concatenate([offsets.view(np.uint8), np.frombuffer(b"".join(encoded), np.uint8)])


def _utf8_from_blob(blob: np.ndarray, ttype: TensorType,
                    bad: Callable[[str], CorruptFileError]) -> np.ndarray:
    """The UTF8 array ``_utf8_blob`` stored, once its offsets and bytes are shown sound."""
    n = math.prod(ttype.shape)
    head = 8 * (n + 1)
    if blob.ndim != 1 or blob.size < head:
        raise bad(f"holds {blob.size} bytes, fewer than the {head} offset bytes of {n} "
                  f"strings; the file is damaged")
    offsets = blob[:head].view("<i8").astype(np.int64)
    data = blob[head:].tobytes()
    if offsets[0] != 0 or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0):
        raise bad("its string offsets are not a non-decreasing run from 0 to the byte count; "
                  "the file is damaged")
    try:
        texts = [data[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(),
                                                           offsets[1:].tolist())]
    except UnicodeDecodeError as exc:
        raise bad(f"holds bytes that are not UTF-8 ({exc}); the file is damaged") from None
    return np.array(texts, ttype.dtype).reshape(ttype.shape)


def _to_document(sd: TrainableModel, save_updater_state: bool) -> tuple[dict, list]:
    """The graph.json document and the ``(member name, array)`` pairs to store beside it."""
    variables, arrays = [], []
    graph, config, state = sd.graph, sd.training_config, sd.updater_state
    for i, info in enumerate(graph.vars.values()):
        member = None
        if info.value is not None:
            member = f"arrays/{i}.npy"
            value = info.value
            if is_string(value.dtype):
                value = _utf8_blob(info.name, value)
            arrays.append((member, value))
        variables.append({"name": info.name, "type": info.vtype.value,
                          "dtype": dtype_name(info.ttype.dtype), "shape": list(info.ttype.shape),
                          "weak": bool(info.ttype.weak), "array": member})
    nodes = []
    for node in graph.nodes:
        attrs = {k: encode_attr(v) for k, v in vars(node.attrs).items()}
        for key, value in attrs.items():
            try:
                json.dumps(value, allow_nan=True)
            except (TypeError, ValueError) as exc:
                raise SerializationError(
                    f"save: node {node.name!r} ({node.op.name}): attribute {key!r} = {value!r} "
                    f"has no JSON form ({exc}); give its attribute kind a JSON-friendly "
                    f"canonical value") from None
        _check_attrs_round_trip(node, attrs)
        nodes.append({"name": node.name, "op": node.op.name, "attrs": attrs,
                      "inputs": list(node.inputs), "outputs": list(node.outputs)})
    training, updater_state = None, {}
    if config is not None:
        training = config.to_dict()
    if save_updater_state and state.arrays:
        slots: dict[str, dict[str, str]] = {}
        for k, (param, per_slot) in enumerate(sorted(state.arrays.items())):
            info = graph.vars.get(param)
            if info is None or info.vtype is not VariableType.VARIABLE:
                continue  # state of a variable since frozen or removed: not part of the model
            slots[param] = {}
            for slot, arr in sorted(per_slot.items()):
                member = f"updater/{k}-{slot}.npy"
                arrays.append((member, arr))
                slots[param][slot] = member
        updater_state = {"iteration": state.iteration, "epoch": state.epoch,
                         "batch": state.batch, "arrays": slots}
    elif save_updater_state and (state.iteration or state.epoch):
        # a stateless updater (Sgd): only the counters
        updater_state = {"iteration": state.iteration, "epoch": state.epoch,
                         "batch": state.batch, "arrays": {}}
    doc = {"format": FORMAT, "version": VERSION, "variables": variables, "nodes": nodes,
           "loss_variables": list(sd.loss_variables), "training": training,
           "updater_state": updater_state}
    return doc, arrays


def _check_attrs_round_trip(node: Any, encoded: dict) -> None:
    """Refuse at save time what ``load`` would not rebuild exactly (an attribute kind whose
    ``coerce`` does not invert ``encode_attr``), rather than write a subtly different graph."""
    text = json.dumps(encoded, sort_keys=True)
    try:
        back = vars(decode_attrs(node.op, json.loads(text)))
        same = json.dumps({k: encode_attr(v) for k, v in back.items()}, sort_keys=True) == text
    except (NdError, TypeError, ValueError):
        same = False
    if not same:
        raise SerializationError(
            f"save: node {node.name!r} ({node.op.name}): attributes {node.attrs!r} do not survive "
            f"their JSON form {text}; the attribute kind's coerce must accept encode_attr's output")


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
#
# A damaged file can make zipfile, zlib, json or numpy raise almost anything (NotImplementedError
# for a flipped "version needed" byte, RecursionError for deep JSON, ValueError for a 5,000-digit
# integer, OverflowError for absurd shapes). The loader validates what it reads (sizes before
# inflating, JSON depth and integer ranges, every field's type) and turns what those libraries
# raise at each step into a ``CorruptFileError`` naming the file; ``load`` keeps a last net for
# whatever the graph machinery (op inference, variable creation) raises on data it rejects.

def load(path: str | os.PathLike, *, max_graph_bytes: int | None = None) -> Saved:
    """Read what ``save`` wrote (``SameDiff.load`` makes a SameDiff of it).

    A missing or unreadable file raises the plain ``OSError`` (e.g. ``FileNotFoundError``);
    a damaged one a ``SerializationError`` subclass naming it (``CorruptFileError``,
    ``UnsafeFileError``, ``FormatVersionError``, ``UnknownOpError``). ``graph.json`` is refused
    beyond ``max_graph_bytes`` (default ``MAX_GRAPH_JSON_BYTES``, 256 MiB) before inflating.
    """
    path = os.fspath(path)
    limit = MAX_GRAPH_JSON_BYTES if max_graph_bytes is None else max_graph_bytes
    with open(path, "rb") as f:  # errors opening the file are the file system's, not damage
        return _load_from(f, path, limit)


def from_bytes(data: bytes, source: str = "<bytes>") -> Saved:
    """Read what ``to_bytes`` made, with every check ``load`` makes; errors name ``source``
    (e.g. ``"<pickled SameDiff>"``). Unbounded: the bytes are already in memory."""
    return _load_from(io.BytesIO(data), source, max(len(data), MAX_GRAPH_JSON_BYTES))


def _load_from(f: IO[bytes], path: str, limit: int) -> Saved:
    try:
        with _open_zip(f, path) as zf:
            doc = _read_document(zf, path, limit)
            return _build(doc, zf, path)
    except (SerializationError, MemoryError):
        raise  # ours name the file; MemoryError is the machine's, not the file's
    except NdError as exc:  # the graph machinery rejected the content
        raise CorruptFileError(f"load: {path!r}: the saved graph is inconsistent: "
                               f"{exc}") from exc
    except Exception as exc:  # noqa: BLE001 -- see the note above ``load``
        raise CorruptFileError(f"load: {path!r} is damaged and cannot be loaded "
                               f"({type(exc).__name__}: {_short.repr(str(exc))})") from exc


def _open_zip(f: IO[bytes], path: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError) as exc:
        raise CorruptFileError(f"load: {path!r} is not a SameDiff file, or it is truncated or "
                               f"damaged (not a readable zip archive: {exc})") from exc


@contextlib.contextmanager
def _reading_member(bad: Callable[[str], CorruptFileError]) -> Iterator[None]:
    """Report what zipfile/zlib raise on a damaged member (bad CRC, broken deflate stream,
    unsupported method...) as the ``CorruptFileError`` that ``bad`` makes."""
    try:
        yield
    except SerializationError:
        raise  # already named (CorruptFileError is a ValueError too)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
            NotImplementedError) as exc:
        raise bad(f"is damaged ({exc})") from exc


def _member_info(zf: zipfile.ZipFile, name: str,
                 bad: Callable[[str], CorruptFileError]) -> zipfile.ZipInfo:
    """The member's zip entry, once the size it declares is shown to be possible."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise bad("missing from the archive; the file is truncated or was not written by "
                  "SameDiff.save") from None
    if info.file_size > _max_inflated_size(info):
        raise bad(f"declares {info.file_size} bytes, more than its {info.compress_size} "
                  f"compressed bytes can hold; the zip header is damaged")
    return info


def _max_inflated_size(info: zipfile.ZipInfo) -> int:
    """A bound on what a member can honestly inflate to (deflate cannot expand past 1032:1), so
    a small file cannot make the loader allocate gigabytes for an array it declares."""
    if info.compress_type == zipfile.ZIP_STORED:
        return info.compress_size
    if info.compress_type == zipfile.ZIP_DEFLATED:
        return info.compress_size * _DEFLATE_MAX_RATIO + 1024
    return info.file_size  # bzip2/lzma: bounded by the per-member checks only


def _read_document(zf: zipfile.ZipFile, path: str, limit: int) -> dict:
    doc = _parse_json(_read_graph_json(zf, path, limit), path)
    _check_format_and_version(doc, path)
    _check_json_bounds(doc, path)
    return doc


def _read_graph_json(zf: zipfile.ZipFile, path: str, limit: int) -> bytes:
    def bad(msg: str) -> CorruptFileError:
        return CorruptFileError(f"load: {path!r}: {GRAPH_JSON} {msg}")

    info = _member_info(zf, GRAPH_JSON, bad)
    too_big = (f"is larger than the {limit}-byte limit: the file is damaged or a zip bomb (if "
               f"it is genuine, load it with max_graph_bytes=... or raise "
               f"samediff.serialize.MAX_GRAPH_JSON_BYTES)")
    if info.file_size > limit:  # refused before inflating anything
        raise bad(f"declares {info.file_size} bytes and {too_big}")
    with _reading_member(bad), zf.open(info) as f:
        # Ask for no more than declared: zipfile inflates up to the size asked for before it
        # cuts at the declared size, so this bounds the work even if the header lies.
        raw = f.read(info.file_size + 1)
    if len(raw) > limit:
        raise bad(too_big)
    return raw


def _parse_json(raw: bytes, path: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError as exc:
        raise CorruptFileError(f"load: {path!r}: {GRAPH_JSON} nests too deeply to be a SameDiff "
                               f"graph") from exc
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, integers of > 4300 digits
        raise CorruptFileError(f"load: {path!r}: {GRAPH_JSON} is not valid JSON "
                               f"({_short.repr(str(exc))})") from exc


def _check_format_and_version(doc: Any, path: str) -> None:
    """Magic and version first: a newer version's file may hold things this one would reject."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        magic = doc.get("format") if isinstance(doc, dict) else None
        raise FormatVersionError(f"load: {path!r} is not an nd4py SameDiff file (format "
                                 f"{_short.repr(magic)}, expected {FORMAT!r})")
    version = doc.get("version")
    valid = type(version) is int and 1 <= version < _INT_LIMIT
    if valid and version > VERSION:
        raise FormatVersionError(f"load: {path!r} was written by a newer nd4py (format version "
                                 f"{version}; this one reads up to {VERSION}); upgrade nd4py")
    if not valid:
        raise FormatVersionError(f"load: {path!r} has an invalid format version "
                                 f"{_short.repr(version)}")


def _check_json_bounds(doc: Any, path: str) -> None:
    """Bound what the rest of the loader and op inference meet: JSON allows any nesting depth
    and any number of digits, numpy and the type checks do not."""
    stack = [(doc, 1)]
    while stack:  # iterative: the check itself must not recurse
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > _MAX_JSON_DEPTH:
                raise CorruptFileError(f"load: {path!r}: {GRAPH_JSON} nests deeper than "
                                       f"{_MAX_JSON_DEPTH} levels; it is not a SameDiff graph")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict)
                                                  else value))
        elif type(value) is int and not -_INT_LIMIT <= value < _INT_LIMIT:
            raise CorruptFileError(f"load: {path!r}: {GRAPH_JSON} holds the integer "
                                   f"{_short.repr(value)}, outside the int64 range")


def _build(doc: dict, zf: zipfile.ZipFile, path: str) -> Saved:
    def bad(msg: str) -> CorruptFileError:
        return CorruptFileError(f"load: {path!r}: {msg}")

    variables, nodes = doc.get("variables"), doc.get("nodes")
    if not isinstance(variables, list) or not isinstance(nodes, list):
        raise bad("graph.json needs 'variables' and 'nodes' lists")
    graph = Graph()
    types: dict[str, TensorType] = {}
    for entry in variables:
        name, vtype, ttype, member = _parse_variable(entry, bad)
        if name in types:
            raise bad(f"variable {name!r} is defined twice")
        value = None
        if vtype in _PERSISTENT:
            if member is None:
                raise bad(f"{vtype} {name!r} has no array")
            value = _read_array(zf, member, name, ttype, path)
        elif member is not None:
            raise bad(f"{vtype} {name!r} cannot hold an array")
        types[name] = ttype
        graph.add_var(name, VariableType(vtype), ttype, value)

    available = {n for n, i in graph.vars.items() if i.vtype is not VariableType.ARRAY}
    for entry in nodes:
        node_name, op, attrs, inputs, outputs = _parse_node(entry, bad, path)
        if node_name in graph.node_names:
            raise bad(f"node name {node_name!r} is used twice")
        for i in inputs:
            if i not in available:
                raise bad(f"node {node_name!r} ({op.name}) reads {i!r}, which is not a variable "
                          f"defined before it")
        try:
            inferred = op.infer_types([types[i] for i in inputs], attrs)
        except NdError as exc:
            raise bad(f"node {node_name!r} does not type-check: {exc}") from exc
        if len(inferred) != len(outputs):
            raise bad(f"node {node_name!r} ({op.name}) has {len(outputs)} outputs, "
                      f"its op produces {len(inferred)}")
        node = Node(node_name, op, attrs, inputs, outputs)
        for out, t in zip(outputs, inferred):
            info = graph.vars.get(out)
            if info is None or info.vtype is not VariableType.ARRAY or info.producer is not None:
                raise bad(f"node {node_name!r} output {out!r} is not an unproduced ARRAY variable")
            if t != info.ttype:
                raise bad(f"variable {out!r} is saved as {info.ttype}, but node {node_name!r} "
                          f"({op.name}) infers {t} from its inputs")
            info.producer = node
            available.add(out)
        graph.nodes.append(node)
        graph.node_names.add(node_name)
    orphans = [n for n, i in graph.vars.items() if i.vtype is VariableType.ARRAY and not i.producer]
    if orphans:
        raise bad(f"ARRAY variable(s) {orphans[:5]} are produced by no node")
    losses = doc.get("loss_variables", [])
    if not _str_list(losses) or not all(n in graph.vars for n in losses):
        raise bad(f"loss_variables {_short.repr(losses)} must name variables of the graph")
    graph.validate()
    config, state = _load_training(graph, doc, zf, path, bad)
    return Saved(graph, list(losses), config, state)


def _load_training(graph: Graph, doc: dict, zf: zipfile.ZipFile, path: str,
                   bad: Any) -> tuple[Any, UpdaterState]:
    """Training config and updater state (absent in files saved before training existed)."""
    training, config = doc.get("training"), None
    if training is not None:
        if not isinstance(training, dict):
            raise bad("'training' must be an object")
        try:
            config = TrainingConfig.from_dict(training)
            for name in [*config.feature_mapping, *config.label_mapping,
                         *(config.loss_variables or [])]:
                graph.var(name)
        except (TrainingError, NdError, TypeError, ValueError, KeyError, AttributeError,
                OverflowError) as exc:
            raise bad(f"training config cannot be restored: {exc}") from exc
    state = doc.get("updater_state") or {}
    if not isinstance(state, dict):
        raise bad("'updater_state' must be an object")
    if not state:
        return config, UpdaterState()
    it, ep, per_param = state.get("iteration"), state.get("epoch"), state.get("arrays", {})
    batch = state.get("batch", 0)
    if not (all(type(v) is int and v >= 0 for v in (it, ep, batch))
            and isinstance(per_param, dict)):
        raise bad("'updater_state' needs non-negative integers 'iteration', 'epoch' and "
                  "'batch' and an 'arrays' object")
    restored = UpdaterState(it, ep, batch)
    for param, slots in per_param.items():
        info = graph.vars.get(param)
        if info is None or info.vtype is not VariableType.VARIABLE or not isinstance(slots, dict):
            raise bad(f"updater state for {param!r}, which is not a VARIABLE of the graph")
        if not all(isinstance(member, str) for member in slots.values()):
            raise bad(f"updater state for {param!r}: slot members must be strings")
        restored.arrays[param] = {
            slot: _read_array(zf, member, f"{param} (updater slot {slot})", info.ttype, path)
            for slot, member in slots.items()}
    return config, restored


def _parse_variable(entry: Any, bad: Any) -> tuple[str, str, TensorType, str | None]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise bad(f"malformed variable entry {_short.repr(entry)}")
    name, vtype, shape = entry["name"], entry.get("type"), entry.get("shape")
    if vtype not in _VTYPES:
        raise bad(f"variable {name!r} has unknown type {_short.repr(vtype)}")
    if not _valid_shape(shape):
        raise bad(f"variable {name!r} has an invalid shape {_short.repr(shape)} (at most "
                  f"{_MAX_RANK} dims, each -1 or 0..{_MAX_ELEMENTS}, at most {_MAX_ELEMENTS} "
                  f"elements)")
    if vtype in _PERSISTENT and -1 in shape:
        raise bad(f"{vtype} {name!r} has unknown dims {shape}")
    try:
        dtype = to_dtype(entry.get("dtype"))
    except NdError as exc:
        raise bad(f"variable {name!r} has unsupported dtype "
                  f"{_short.repr(entry.get('dtype'))}") from exc
    if vtype == "VARIABLE" and dtype.kind != "f":
        raise bad(f"VARIABLE {name!r} must be floating point, not {dtype}")
    weak, member = entry.get("weak", False), entry.get("array")
    if not isinstance(weak, bool) or not (member is None or isinstance(member, str)):
        raise bad(f"variable {name!r} has an invalid 'weak' or 'array' field")
    return name, vtype, TensorType(tuple(shape), dtype, weak), member


def _valid_shape(shape: Any) -> bool:
    """Dims are ints, -1 (unknown) or non-negative, and the element count fits an int64 byte
    count, so no size computation downstream can overflow."""
    if not isinstance(shape, list) or len(shape) > _MAX_RANK:
        return False
    if not all(type(d) is int and -1 <= d <= _MAX_ELEMENTS for d in shape):
        return False
    return math.prod(d for d in shape if d >= 0) <= _MAX_ELEMENTS


def _parse_node(entry: Any, bad: Any, path: str) -> tuple:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise bad(f"malformed node entry {_short.repr(entry)}")
    name, op_name, attrs = entry["name"], entry.get("op"), entry.get("attrs", {})
    inputs, outputs = entry.get("inputs"), entry.get("outputs")
    if not isinstance(op_name, str) or not isinstance(attrs, dict):
        raise bad(f"node {name!r} has a malformed 'op' or 'attrs' field")
    if not (_str_list(inputs) and _str_list(outputs) and outputs):
        raise bad(f"node {name!r} has malformed 'inputs'/'outputs' lists")
    op = REGISTRY.get(op_name)
    if op is None:
        raise UnknownOpError(
            f"load: {path!r}: node {name!r} uses op {op_name!r}, which is not registered; if "
            f"it is a user-defined op, import the module that registers it (samediff.udf) "
            f"before loading")
    try:
        rec = decode_attrs(op, attrs)  # graph-valued attributes (bodies) decode to graphs
    except UnknownOpError as exc:  # a body uses an op this process has not registered
        raise UnknownOpError(f"load: {path!r}: node {name!r} ({op_name}): {exc}") from exc
    except NdError as exc:
        raise bad(f"node {name!r}: invalid attributes: {exc}") from exc
    return name, op, rec, tuple(inputs), tuple(outputs)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _read_array(zf: zipfile.ZipFile, member: str, name: str, ttype: TensorType,
                path: str) -> np.ndarray:
    """The member's array, once its header and declared size match ``ttype`` exactly.

    Nothing past the .npy header is inflated before the size the zip declares is shown to be
    header + shape x itemsize, and the data is then streamed into one preallocated array."""
    def bad(msg: str) -> CorruptFileError:
        return CorruptFileError(f"load: {path!r}: array of variable {name!r} ({member}): {msg}")

    info = _member_info(zf, member, bad)
    if is_string(ttype.dtype):
        return _read_utf8(zf, info, name, ttype, path, bad)
    nbytes = math.prod(ttype.shape) * ttype.dtype.itemsize
    if info.file_size > nbytes + _NPY_HEADER_MAX:  # refuse decompression bombs up front
        raise bad(f"{info.file_size} bytes is far more than its declared {ttype} needs")
    shape, dtype, header_size = _npy_header(zf, info, name, path, bad)
    stored = np.dtype(f"u{ttype.dtype.itemsize}") if is_storage(ttype.dtype) else ttype.dtype
    if dtype.newbyteorder("=") != stored or shape != ttype.shape:
        raise bad(f"holds {TensorType(shape, dtype)}, but the graph declares {ttype}")
    if info.file_size != header_size + nbytes:
        raise bad(f"declares {info.file_size} bytes, but its {header_size}-byte .npy header and "
                  f"{ttype} make {header_size + nbytes}; the file is damaged")
    arr = _npy_body(zf, info, bad)  # reads exactly nbytes of data
    arr = arr.astype(stored, copy=False)  # native byte order
    return arr.view(ttype.dtype) if stored != ttype.dtype else arr


def _read_utf8(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, ttype: TensorType,
               path: str, bad: Callable[[str], CorruptFileError]) -> np.ndarray:
    """A UTF8 array's member: a uint8 vector (offsets, then bytes; see the module docstring).
    Its length depends on the text, so only the zip's own bound on inflation applies."""
    shape, dtype, header_size = _npy_header(zf, info, name, path, bad)
    if dtype != np.uint8 or len(shape) != 1:
        raise bad(f"holds {TensorType(shape, dtype)}, but a utf8 array is stored as a uint8 "
                  f"vector of offsets and bytes")
    if info.file_size != header_size + shape[0]:
        raise bad(f"declares {info.file_size} bytes, but its {header_size}-byte .npy header "
                  f"and {shape[0]} bytes make {header_size + shape[0]}; the file is damaged")
    return _utf8_from_blob(_npy_body(zf, info, bad), ttype, bad)


def _npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, path: str,
                bad: Callable[[str], CorruptFileError]) -> tuple[tuple, np.dtype, int]:
    """``(shape, dtype, header bytes)`` of an array member's .npy header, read alone (nothing
    past it is inflated); a dtype holding Python objects is refused, never unpickled."""
    with _reading_member(bad), zf.open(info) as f:
        shape, dtype = _read_npy_header(f, bad)
        header_size = f.tell()
    if dtype.hasobject:
        raise UnsafeFileError(f"load: {path!r}: array of variable {name!r} ({info.filename}) "
                              f"holds Python objects (dtype {dtype}); refusing to unpickle it")
    return shape, dtype, header_size


def _npy_body(zf: zipfile.ZipFile, info: zipfile.ZipInfo,
              bad: Callable[[str], CorruptFileError]) -> np.ndarray:
    """The member's array, once ``_npy_header`` and its size were checked."""
    with _reading_member(bad), zf.open(info) as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def _read_npy_header(f: IO[bytes], bad: Callable[[str], CorruptFileError]
                     ) -> tuple[tuple[int, ...], np.dtype]:
    """Parse the .npy header ourselves: numpy would unpickle object arrays if allowed to."""
    try:
        major, _ = np.lib.format.read_magic(f)
        read_header = {1: np.lib.format.read_array_header_1_0,
                       2: np.lib.format.read_array_header_2_0}.get(major)
        if read_header is None:
            raise ValueError(f"unsupported .npy version {major}")
        shape, _, dtype = read_header(f)
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        raise bad(f"not a valid .npy file ({exc})") from exc
    return tuple(shape), dtype
