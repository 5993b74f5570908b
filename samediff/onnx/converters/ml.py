"""ONNX converters, domain ``ai.onnx.ml``: Binarizer, ArrayFeatureExtractor, LabelEncoder
(numeric or string keys and values) and TreeEnsemble -- all composed of
table ops, so they trace and compile like any other graph.

TreeEnsemble is evaluated level by level rather than as one opaque op: the comparison of
every interior node is computed for every sample at once (``[N, nodes]``), and each tree's
walk is then ``depth`` steps of one element-wise gather per step (the current node's
outcome) and one table lookup (the next node). The ensemble's constants stay constants; the
work is ``N * nodes + depth * N * trees``, with no per-sample Python loop. (A tree's output is
piecewise constant in its inputs, so no gradient flows either way.)
"""
from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...dtypes import as_utf8, is_string
from ..table import converter

_ML = "ai.onnx.ml"
_I64 = np.int64


def _c(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype)


# --- Binarizer, ArrayFeatureExtractor -------------------------------------------------------------

@converter("Binarizer", since=1, domain=_ML)
def _binarizer(node):
    x = node.input(0)
    dtype = node.dtype(x)
    threshold = float(node.attr("threshold", 0.0))
    # 1 where x > threshold, else 0 (NaN compares false: 0), in x's dtype
    return node.op("where", node.op("gt", x, _c(threshold, dtype)), _c(1, dtype), _c(0, dtype))


@converter("ArrayFeatureExtractor", since=1, domain=_ML)
def _array_feature_extractor(node):
    x, indices = node.input(0), node.input(1)
    picked = node.op("gather", x, node.op("reshape", indices, shape=(-1,)), axis=-1)
    if node.rank(x) == 1:  # a vector gives one row (as onnxruntime, ONNX's reference)
        return node.op("reshape", picked, shape=(1, -1))
    return picked


# --- LabelEncoder -------------------------------------------------------------------------------
# Keys and values are numbers or strings (UTF8 tensors): the input is compared with every key
# at once (``eq`` takes strings too), the first hit's value gathered, the default elsewhere.

def _pick(node, kind: str) -> tuple[str, object] | None:
    """The one ``keys_*``/``values_*`` attribute set (``kind`` is 'keys' or 'values')."""
    found = [(n, node.attr(f"{kind}_{n}")) for n in ("floats", "int64s", "strings", "tensor")
             if node.has_attr(f"{kind}_{n}")]
    if len(found) != 1:
        raise node.fail(f"LabelEncoder needs exactly one {kind}_* attribute, got "
                        f"{[f'{kind}_{n}' for n, _ in found] or 'none'}")
    return found[0]


def _utf8() -> np.dtype:
    return dtypes.UTF8  # (on use: numpy < 2 raises the named error, importing never does)


def _entries(name: str, value) -> np.ndarray:
    """A keys_*/values_* attribute as a flat array (strings as UTF8)."""
    if name == "strings":
        return np.asarray(list(value), _utf8())
    if name == "tensor":
        return as_utf8(np.asarray(value)).reshape(-1)
    return np.asarray(value, {"floats": np.float32, "int64s": np.int64}[name]).reshape(-1)


def _default(node, values_name: str, values: np.ndarray) -> np.ndarray:
    """The value of inputs matching no key (ONNX: "_Unused", -1 or -0.0 when unset)."""
    if values_name == "tensor":
        d = node.attr("default_tensor")
        if d is None or np.size(d) == 0:
            d = ("_Unused" if is_string(values.dtype) else
                 -1 if values.dtype.kind in "iu" else -0.0)
        d = as_utf8(np.asarray(d)).reshape(-1)[0] if np.size(d) else d
        if is_string(values.dtype) != isinstance(d, str):
            raise node.fail(f"default_tensor ({type(d).__name__}) and values_tensor "
                            f"({values.dtype}) must both be strings or both numbers")
        return _c(d, values.dtype)
    if values_name == "strings":
        return _c(node.attr("default_string", "_Unused"), _utf8())
    if values_name == "floats":
        return _c(node.attr("default_float", -0.0), np.float32)
    return _c(node.attr("default_int64", -1), np.int64)


@converter("LabelEncoder", since=1, domain=_ML)
def _label_encoder_1(node):
    # classes_strings[i] <-> i: strings become their index, integers their class name
    classes = np.asarray(list(node.attr("classes_strings", [])), _utf8())
    x = node.input(0)
    index = np.arange(classes.size, dtype=np.int64)
    if is_string(node.dtype(x)):
        return _encode(node, x, classes, index, _c(node.attr("default_int64", -1), np.int64))
    return _encode(node, x, index, classes, _c(node.attr("default_string", "_Unused"), _utf8()))


@converter("LabelEncoder", since=(2, 4), domain=_ML)
def _label_encoder(node):
    x = node.input(0)
    kname, keys = _pick(node, "keys")
    vname, values = _pick(node, "values")
    keys, values = _entries(kname, keys), _entries(vname, values)
    if keys.size != values.size:
        raise node.fail(f"keys ({keys.size}) and values ({values.size}) differ in length")
    return _encode(node, x, keys, values, _default(node, vname, values))


def _encode(node, x, keys: np.ndarray, values: np.ndarray, default: np.ndarray):
    """``values[k]`` where ``x == keys[k]``, else ``default``."""
    xdtype = node.dtype(x)
    if is_string(xdtype) != is_string(keys.dtype) or not (is_string(xdtype)
                                                         or xdtype.kind in "iuf"):
        raise node.fail(f"input of dtype {xdtype} cannot be looked up among keys of dtype "
                        f"{keys.dtype} (string keys take string inputs, numeric keys numeric "
                        f"ones)")
    # one entry per key, the last of repeated keys winning (NaN keys: one NaN entry)
    table: dict = {}
    nan_value = None
    for k, v in zip(keys.astype(xdtype).tolist(), values.tolist()):
        if isinstance(k, float) and math.isnan(k):
            nan_value = v
        else:
            table[k] = v
    ukeys = np.array(list(table), xdtype)
    uvalues = np.array(list(table.values()), values.dtype)
    if ukeys.size:
        hits = node.op("eq", node.op("expand_dims", x, axis=-1), ukeys)  # [..., keys]
        which = node.op("argmax", node.op("cast", hits, dtype=np.int32), dims=(-1,))
        out = node.op("where", node.op("any", hits, dims=(-1,)),
                      node.op("gather", uvalues, which, axis=0), default)
    elif is_string(values.dtype):  # (no keys: the default everywhere, in x's shape)
        out = node.op("where", node.op("neq", x, x), default, default)
    else:
        out = node.op("full_like", x, value=default.item(), dtype=values.dtype)
    if nan_value is not None and xdtype.kind == "f":
        out = node.op("where", node.op("isnan", x), _c(nan_value, values.dtype), out)
    return out


# --- TreeEnsemble -------------------------------------------------------------------------------

#: nodes_modes: the comparison ``x <op> split`` each interior node makes (6: set membership)
_COMPARE = {0: "lte", 1: "lt", 2: "gte", 3: "gt", 4: "eq", 5: "neq"}
_MEMBER = 6


def _ints(node, name: str, n: int | None = None, default=None) -> np.ndarray:
    v = node.attr(name, default)
    if v is None:
        raise node.fail(f"TreeEnsemble needs the attribute {name!r}")
    v = np.asarray(v, _I64).reshape(-1)
    if n is not None and v.size != n:
        raise node.fail(f"{name} has {v.size} entries, expected {n} (one per entry of "
                        f"nodes_* or leaf_*)")
    return v


def _tree_depth(node, roots, nxt_true, nxt_false, n_nodes: int) -> int:
    """The longest root-to-leaf path (in interior nodes), checking the trees are trees."""
    depth = 0
    for root in roots.tolist():
        stack = [(root, 1, frozenset())]
        while stack:
            s, d, path = stack.pop()
            if s >= n_nodes:  # a leaf state
                depth = max(depth, d - 1)
                continue
            if s in path:
                raise node.fail(f"the nodes under root {root} form a cycle at node {s}")
            stack += [(int(nxt_true[s]), d + 1, path | {s}), (int(nxt_false[s]), d + 1,
                                                              path | {s})]
    return depth


def _members(node, modes: np.ndarray) -> np.ndarray:
    """Each interior node's set (NaN-padded rows; all NaN for non-member nodes)."""
    member_nodes = np.flatnonzero(modes == _MEMBER)
    values = node.attr("membership_values")
    if member_nodes.size == 0:
        return np.full((modes.size, 1), np.nan)
    if values is None:
        raise node.fail("set-membership nodes (mode 6) need membership_values")
    sets, current = [], []
    for v in np.asarray(values, np.float64).reshape(-1).tolist():
        if math.isnan(v):  # NaN ends a set
            sets.append(current)
            current = []
        else:
            current.append(v)
    if current:
        sets.append(current)
    if len(sets) != member_nodes.size:
        raise node.fail(f"membership_values holds {len(sets)} NaN-delimited sets for "
                        f"{member_nodes.size} set-membership nodes")
    out = np.full((modes.size, max(1, max(len(s) for s in sets))), np.nan)
    for i, s in zip(member_nodes.tolist(), sets):
        out[i, :len(s)] = s
    return out


@converter("TreeEnsemble", since=5, domain=_ML)
def _tree_ensemble(node):
    x = node.input(0)
    if node.rank(x) != 2:
        raise node.fail(f"TreeEnsemble takes X of shape [N, features], got rank {node.rank(x)}")
    xdtype = node.dtype(x)
    if xdtype.kind != "f":
        raise node.fail(f"X of dtype {xdtype} is not supported (float16/32/64 inputs)")
    splits = node.attr("nodes_splits")
    if splits is None:
        raise node.fail("TreeEnsemble needs nodes_splits")
    splits = np.asarray(splits, np.float64).reshape(-1)
    n_nodes = splits.size
    features = _ints(node, "nodes_featureids", n_nodes)
    modes = _ints(node, "nodes_modes", n_nodes)
    bad = sorted(set(modes.tolist()) - set(_COMPARE) - {_MEMBER})
    if bad:
        raise node.fail(f"unknown nodes_modes {bad} (0-5 compare, 6 set membership)")
    true_ids, false_ids = _ints(node, "nodes_truenodeids", n_nodes), \
        _ints(node, "nodes_falsenodeids", n_nodes)
    true_leaf = _ints(node, "nodes_trueleafs", n_nodes).astype(bool)
    false_leaf = _ints(node, "nodes_falseleafs", n_nodes).astype(bool)
    tracks = _ints(node, "nodes_missing_value_tracks_true", n_nodes,
                   default=[0] * n_nodes).astype(bool)
    weights = node.attr("leaf_weights")
    if weights is None:
        raise node.fail("TreeEnsemble needs leaf_weights")
    weights = np.asarray(weights, np.float64).reshape(-1)
    targets = _ints(node, "leaf_targetids", weights.size)
    roots = _ints(node, "tree_roots")
    n_targets = int(node.attr("n_targets", 0) or 0)
    if n_targets <= 0 or (targets.size and (targets.min() < 0 or targets.max() >= n_targets)):
        raise node.fail(f"n_targets must be positive and cover leaf_targetids, got "
                        f"{n_targets}")
    n_leaves = weights.size
    for ids, leaf, what in ((true_ids, true_leaf, "true"), (false_ids, false_leaf, "false")):
        limit = np.where(leaf, n_leaves, n_nodes)
        if np.any((ids < 0) | (ids >= limit)):
            raise node.fail(f"nodes_{what}nodeids point outside the nodes/leaves")
    if roots.size == 0 or roots.min() < 0 or roots.max() >= n_nodes:
        raise node.fail("tree_roots must name interior-node entries")
    aggregate = int(node.attr("aggregate_function", 1))
    post = int(node.attr("post_transform", 0))
    if aggregate not in (0, 1, 2, 3):
        raise node.fail(f"aggregate_function {aggregate} is unknown (0 average, 1 sum, 2 min, "
                        f"3 max)")
    if post not in (0, 1, 2, 3):
        raise node.fail(f"post_transform {post} is not supported (0 none, 1 softmax, "
                        f"2 logistic, 3 softmax_zero work; 4 probit needs erfinv)")

    # states: interior nodes 0..n_nodes-1, then leaves (which loop on themselves)
    nxt_true = np.concatenate([np.where(true_leaf, true_ids + n_nodes, true_ids),
                               np.arange(n_nodes, n_nodes + n_leaves)]).astype(_I64)
    nxt_false = np.concatenate([np.where(false_leaf, false_ids + n_nodes, false_ids),
                                np.arange(n_nodes, n_nodes + n_leaves)]).astype(_I64)
    depth = _tree_depth(node, roots, nxt_true, nxt_false, n_nodes)

    # every node's outcome for every sample, compared in float64: [N, nodes]
    xd = node.op("cast", x, dtype=np.float64)
    xsel = node.op("gather", xd, features, axis=1)
    outcome = None
    for mode in sorted(set(modes.tolist())):
        if mode == _MEMBER:
            sets = _members(node, modes)  # [nodes, k]; NaN never matches
            hit = node.op("any", node.op("eq", node.op("expand_dims", xsel, axis=-1), sets),
                          dims=(-1,))
        else:
            hit = node.op(_COMPARE[mode], xsel, splits)
        outcome = hit if outcome is None else node.op("where", modes == mode, hit, outcome)
    if tracks.any():  # a missing (NaN) feature follows the true branch where asked
        outcome = node.op("logical_or", outcome,
                          node.op("logical_and", node.op("isnan", xsel), tracks))

    # the walk: each step reads the current node's outcome (an element-wise gather on the
    # flattened outcomes, row r at offset r * nodes) and moves to the chosen child
    flat = node.op("reshape", outcome, shape=(-1,))
    row = node.op("sub", node.op("cumsum", node.op("ones_like", node.op(
        "slice", xsel, begin=(0, 0), size=(-1, 1)), dtype=np.int64), axis=0),
        _c(1, _I64))                                                        # [N, 1]
    base = node.op("mul", row, _c(n_nodes, _I64))
    state = node.op("add", node.op("mul", row, _c(0, _I64)), roots.reshape(1, -1))  # [N, T]
    for _ in range(depth):
        at = node.op("add", base, node.op("minimum", state, _c(n_nodes - 1, _I64)))
        went = node.op("gather", flat, at, axis=0)
        state = node.op("where", went, node.op("gather", nxt_true, state, axis=0),
                        node.op("gather", nxt_false, state, axis=0))
    leaf = node.op("sub", state, _c(n_nodes, _I64))                        # [N, T]

    # aggregate each tree's leaf weight into its target
    w = node.op("gather", weights, leaf, axis=0)
    mine = node.op("one_hot", node.op("gather", targets, leaf, axis=0), depth=n_targets,
                   dtype=np.bool_)                                          # [N, T, targets]
    w = node.op("expand_dims", w, axis=-1)
    if aggregate in (0, 1):
        y = node.op("sum", node.op("where", mine, w, _c(0, np.float64)), dims=(1,))
        if aggregate == 0:
            y = node.op("div", y, _c(roots.size, np.float64))
    else:  # untouched targets keep ONNX's start value, the dtype's largest / lowest
        big = np.finfo(xdtype).max
        fill = _c(big if aggregate == 2 else -big, np.float64)
        y = node.op("min" if aggregate == 2 else "max",
                    node.op("where", mine, w, fill), dims=(1,))
    y = _post_transform(node, y, post)
    return node.op("cast", y, dtype=xdtype)


def _post_transform(node, y, post: int):
    if post == 1:
        return node.op("softmax", y, dim=-1)
    if post == 2:
        return node.op("sigmoid", y)
    if post == 3:  # softmax over the non-zero scores; zeros stay zero
        zero = node.op("eq", y, _c(0, np.float64))
        shifted = node.op("where", zero, _c(-np.inf, np.float64), y)
        probs = node.op("softmax", shifted, dim=-1)
        return node.op("where", zero, _c(0, np.float64), probs)
    return y
