"""Safe save/load of a ``SameDiff`` graph: a zip of ``graph.json`` and one ``.npy`` per array.

Loading never runs code from the file: the graph is JSON, arrays are read with
``allow_pickle=False`` after their header has been checked (object dtypes are refused before
numpy sees the data), every op is looked up in the op table by name, and every node is re-typed
with the op's own inference, so a file that contradicts itself is reported, not half-loaded.
Saving is atomic: the file is written beside the target, fsynced, then renamed over it.

File layout (format ``nd4py-samediff``, version 1)::

    graph.json      {"format", "version", "variables": [...], "nodes": [...],
                     "training": null, "updater_state": {}}
    arrays/<i>.npy  value of the i-th variable (VARIABLEs and CONSTANTs, literals included)

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

import io
import json
import os
import tempfile
import zipfile
import zlib
from typing import Any

import numpy as np

from .dtypes import to_dtype
from .errors import (CorruptFileError, FormatVersionError, NdError, SerializationError,
                     UnknownOpError, UnsafeFileError)
from .graph import Node, SameDiff, VariableType
from .ops import REGISTRY, TensorType
from .ops.registry import encode_attr

FORMAT = "nd4py-samediff"
VERSION = 1
GRAPH_JSON = "graph.json"
_VTYPES = ("VARIABLE", "CONSTANT", "PLACEHOLDER", "ARRAY")
_PERSISTENT = ("VARIABLE", "CONSTANT")
_NPY_HEADER_MAX = 1 << 16  # npy v1 headers are at most 64 KiB; v2/3 headers are never that big


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------

def save(sd: SameDiff, path: str | os.PathLike, *, save_updater_state: bool = True) -> None:
    """Write ``sd`` to ``path`` atomically (an existing file survives any failure).

    The training config (if set) is saved in ``training``; with ``save_updater_state`` the
    updater's per-variable arrays and its iteration/epoch counters are saved too, so a loaded
    model trains on exactly where it stopped.
    """
    doc, arrays = _to_document(sd, save_updater_state)
    text = json.dumps(doc, indent=1)  # the document is checked JSON-clean by _to_document
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    mode = _file_mode(path)
    tmp = tempfile.NamedTemporaryFile(dir=directory, prefix=f".{os.path.basename(path)}.",
                                      suffix=".tmp", delete=False)
    try:
        with tmp:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(GRAPH_JSON, text)
                for member, arr in arrays:
                    with zf.open(member, "w", force_zip64=True) as f:
                        np.save(f, arr, allow_pickle=False)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp.name, mode)  # NamedTemporaryFile is 0600; give the usual permissions
        os.replace(tmp.name, path)
    except BaseException:
        try:
            os.unlink(tmp.name)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)


def _to_document(sd: SameDiff, save_updater_state: bool) -> tuple[dict, list]:
    """The graph.json document and the ``(member name, array)`` pairs to store beside it."""
    variables, arrays = [], []
    for i, info in enumerate(sd._vars.values()):
        member = None
        if info.value is not None:
            member = f"arrays/{i}.npy"
            arrays.append((member, info.value))
        variables.append({"name": info.name, "type": info.vtype.value,
                          "dtype": info.ttype.dtype.name, "shape": list(info.ttype.shape),
                          "weak": bool(info.ttype.weak), "array": member})
    nodes = []
    for node in sd._nodes:
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
    if sd._training_config is not None:
        training = sd._training_config.to_dict()
    if save_updater_state and sd._updater_state.arrays:
        state = sd._updater_state
        slots: dict[str, dict[str, str]] = {}
        for k, (param, per_slot) in enumerate(sorted(state.arrays.items())):
            info = sd._vars.get(param)
            if info is None or info.vtype is not VariableType.VARIABLE:
                continue  # state of a variable since frozen or removed: not part of the model
            slots[param] = {}
            for slot, arr in sorted(per_slot.items()):
                member = f"updater/{k}-{slot}.npy"
                arrays.append((member, arr))
                slots[param][slot] = member
        updater_state = {"iteration": state.iteration, "epoch": state.epoch,
                         "batch": state.batch, "arrays": slots}
    elif save_updater_state and (sd._updater_state.iteration or sd._updater_state.epoch):
        state = sd._updater_state  # a stateless updater (Sgd): only the counters
        updater_state = {"iteration": state.iteration, "epoch": state.epoch,
                         "batch": state.batch, "arrays": {}}
    doc = {"format": FORMAT, "version": VERSION, "variables": variables, "nodes": nodes,
           "loss_variables": list(sd._losses), "training": training,
           "updater_state": updater_state}
    return doc, arrays


def _check_attrs_round_trip(node: Any, encoded: dict) -> None:
    """Refuse at save time what ``load`` would not rebuild exactly (an attribute kind whose
    ``coerce`` does not invert ``encode_attr``), rather than write a subtly different graph."""
    text = json.dumps(encoded, sort_keys=True)
    try:
        back = vars(node.op.make_attrs(json.loads(text)))
        same = json.dumps({k: encode_attr(v) for k, v in back.items()}, sort_keys=True) == text
    except (NdError, TypeError, ValueError):
        same = False
    if not same:
        raise SerializationError(
            f"save: node {node.name!r} ({node.op.name}): attributes {node.attrs!r} do not survive "
            f"their JSON form {text}; the attribute kind's coerce must accept encode_attr's output")


def _file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777  # overwriting: keep the file's permissions
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(directory: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

def load(path: str | os.PathLike, cls: type = SameDiff) -> SameDiff:
    """Read a graph written by ``save`` into a new ``cls`` (a ``SameDiff``).

    A missing file is a plain ``FileNotFoundError``; a damaged one a ``CorruptFileError``.
    """
    path = os.fspath(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise CorruptFileError(f"load: {path!r} is not a SameDiff file or is truncated "
                               f"(not a readable zip archive: {exc})") from None
    with zf:
        doc = _read_document(zf, path)
        return _build(doc, zf, path, cls)


def _read_member(zf: zipfile.ZipFile, name: str, path: str) -> bytes:
    try:
        return zf.read(name)
    except KeyError:
        raise CorruptFileError(f"load: {path!r} has no {name!r} member; the file is truncated "
                               f"or was not written by SameDiff.save") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
            NotImplementedError) as exc:
        raise CorruptFileError(f"load: {path!r}: member {name!r} is damaged ({exc})") from None


def _read_document(zf: zipfile.ZipFile, path: str) -> dict:
    raw = _read_member(zf, GRAPH_JSON, path)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"load: {path!r}: {GRAPH_JSON} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        magic = doc.get("format") if isinstance(doc, dict) else None
        raise FormatVersionError(f"load: {path!r} is not an nd4py SameDiff file (format "
                                 f"{magic!r}, expected {FORMAT!r})")
    version = doc.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise FormatVersionError(f"load: {path!r} was written by a newer nd4py (format version "
                                 f"{version}; this one reads up to {VERSION}); upgrade nd4py")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FormatVersionError(f"load: {path!r} has an invalid format version {version!r}")
    return doc


def _build(doc: dict, zf: zipfile.ZipFile, path: str, cls: type) -> SameDiff:
    def bad(msg: str) -> CorruptFileError:
        return CorruptFileError(f"load: {path!r}: {msg}")

    variables, nodes = doc.get("variables"), doc.get("nodes")
    if not isinstance(variables, list) or not isinstance(nodes, list):
        raise bad("graph.json needs 'variables' and 'nodes' lists")
    sd = cls()
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
        sd._add_var(name, VariableType(vtype), ttype, value)

    available = {n for n, i in sd._vars.items() if i.vtype is not VariableType.ARRAY}
    for entry in nodes:
        node_name, op, attrs, inputs, outputs = _parse_node(entry, bad, path)
        if node_name in sd._node_names:
            raise bad(f"node name {node_name!r} is used twice")
        for i in inputs:
            if i not in available:
                raise bad(f"node {node_name!r} ({op.name}) reads {i!r}, which is not a variable "
                          f"defined before it")
        try:
            inferred = op.infer_types([types[i] for i in inputs], attrs)
        except NdError as exc:
            raise bad(f"node {node_name!r} does not type-check: {exc}") from None
        if len(inferred) != len(outputs):
            raise bad(f"node {node_name!r} ({op.name}) has {len(outputs)} outputs, "
                      f"its op produces {len(inferred)}")
        node = Node(node_name, op, attrs, inputs, outputs)
        for out, t in zip(outputs, inferred):
            info = sd._vars.get(out)
            if info is None or info.vtype is not VariableType.ARRAY or info.producer is not None:
                raise bad(f"node {node_name!r} output {out!r} is not an unproduced ARRAY variable")
            if t != info.ttype:
                raise bad(f"variable {out!r} is saved as {info.ttype}, but node {node_name!r} "
                          f"({op.name}) infers {t} from its inputs")
            info.producer = node
            available.add(out)
        sd._nodes.append(node)
        sd._node_names.add(node_name)
    orphans = [n for n, i in sd._vars.items() if i.vtype is VariableType.ARRAY and not i.producer]
    if orphans:
        raise bad(f"ARRAY variable(s) {orphans[:5]} are produced by no node")
    losses = doc.get("loss_variables", [])
    if not isinstance(losses, list) or not all(isinstance(n, str) and n in sd._vars for n in losses):
        raise bad(f"loss_variables {losses!r:.200} must name variables of the graph")
    sd._losses = list(losses)
    _load_training(sd, doc, zf, path, bad)
    return sd


def _load_training(sd: SameDiff, doc: dict, zf: zipfile.ZipFile, path: str, bad: Any) -> None:
    """Training config and updater state (absent in files saved before training existed)."""
    from .errors import TrainingError
    from .training.config import TrainingConfig
    from .training.step import UpdaterState
    training = doc.get("training")
    if training is not None:
        if not isinstance(training, dict):
            raise bad("'training' must be an object")
        try:
            sd._training_config = TrainingConfig.from_dict(training)
            config = sd._training_config
            for name in [*config.feature_mapping, *config.label_mapping,
                         *(config.loss_variables or [])]:
                sd._info(name)
        except (TrainingError, NdError, TypeError, ValueError) as exc:
            raise bad(f"training config cannot be restored: {exc}") from None
    state = doc.get("updater_state") or {}
    if not isinstance(state, dict):
        raise bad("'updater_state' must be an object")
    if not state:
        return
    it, ep, per_param = state.get("iteration"), state.get("epoch"), state.get("arrays", {})
    batch = state.get("batch", 0)
    if not (all(type(v) is int and v >= 0 for v in (it, ep, batch))
            and isinstance(per_param, dict)):
        raise bad("'updater_state' needs non-negative integers 'iteration', 'epoch' and "
                  "'batch' and an 'arrays' object")
    restored = UpdaterState(it, ep, batch)
    for param, slots in per_param.items():
        info = sd._vars.get(param)
        if info is None or info.vtype is not VariableType.VARIABLE or not isinstance(slots, dict):
            raise bad(f"updater state for {param!r}, which is not a VARIABLE of the graph")
        restored.arrays[param] = {
            str(slot): _read_array(zf, member, f"{param} (updater slot {slot})", info.ttype, path)
            for slot, member in slots.items() if isinstance(member, str)}
    sd._updater_state = restored


def _parse_variable(entry: Any, bad: Any) -> tuple[str, str, TensorType, str | None]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise bad(f"malformed variable entry {entry!r:.200}")
    name, vtype, shape = entry["name"], entry.get("type"), entry.get("shape")
    if vtype not in _VTYPES:
        raise bad(f"variable {name!r} has unknown type {vtype!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= -1 for d in shape):
        raise bad(f"variable {name!r} has an invalid shape {shape!r}")
    if vtype in _PERSISTENT and -1 in shape:
        raise bad(f"{vtype} {name!r} has unknown dims {shape}")
    try:
        dtype = to_dtype(entry.get("dtype"))
    except NdError:
        raise bad(f"variable {name!r} has unsupported dtype {entry.get('dtype')!r}") from None
    if vtype == "VARIABLE" and dtype.kind != "f":
        raise bad(f"VARIABLE {name!r} must be floating point, not {dtype}")
    weak, member = entry.get("weak", False), entry.get("array")
    if not isinstance(weak, bool) or not (member is None or isinstance(member, str)):
        raise bad(f"variable {name!r} has an invalid 'weak' or 'array' field")
    return name, vtype, TensorType(tuple(shape), dtype, weak), member


def _parse_node(entry: Any, bad: Any, path: str) -> tuple:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise bad(f"malformed node entry {entry!r:.200}")
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
        rec = op.make_attrs(attrs)
    except NdError as exc:
        raise bad(f"node {name!r}: invalid attributes: {exc}") from None
    return name, op, rec, tuple(inputs), tuple(outputs)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _read_array(zf: zipfile.ZipFile, member: str, name: str, ttype: TensorType,
                path: str) -> np.ndarray:
    def bad(msg: str) -> CorruptFileError:
        return CorruptFileError(f"load: {path!r}: array of variable {name!r} ({member}): {msg}")

    try:
        info = zf.getinfo(member)
    except KeyError:
        raise bad("missing from the archive (truncated file?)") from None
    expected = int(np.prod(ttype.shape, dtype=np.int64)) * ttype.dtype.itemsize
    if info.file_size > expected + _NPY_HEADER_MAX:  # refuse decompression bombs up front
        raise bad(f"{info.file_size} bytes is far more than its declared {ttype} needs")
    buf = io.BytesIO(_read_member(zf, member, path))
    try:  # parse the header ourselves first: numpy would unpickle object arrays if allowed to
        major, _ = np.lib.format.read_magic(buf)
        read_header = {1: np.lib.format.read_array_header_1_0,
                       2: np.lib.format.read_array_header_2_0}.get(major)
        if read_header is None:
            raise ValueError(f"unsupported .npy version {major}")
        shape, _, dtype = read_header(buf)
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        raise bad(f"not a valid .npy file ({exc})") from None
    if dtype.hasobject:
        raise UnsafeFileError(f"load: {path!r}: array of variable {name!r} ({member}) holds "
                              f"Python objects (dtype {dtype}); refusing to unpickle it")
    native = dtype.newbyteorder("=")
    if native != ttype.dtype or tuple(shape) != ttype.shape:
        raise bad(f"holds {TensorType(tuple(shape), dtype)}, but the graph declares {ttype}")
    buf.seek(0)
    try:
        arr = np.load(buf, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise bad(f"cannot be read ({exc})") from None
    return arr.astype(ttype.dtype, copy=False)  # native byte order
