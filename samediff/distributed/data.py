"""Turning ``fit_distributed``'s data into partitions on the workers, as Dask futures with
lineage (a partition lost with its worker is recomputed, never scattered-and-gone).

Accepted:

* numpy arrays, ``(features..., labels...)`` or ``{placeholder: array}``: cut along axis 0
  into ``partitions`` nearly equal contiguous blocks (``np.array_split``'s sizes), by wrapping
  them in dask arrays (``da.from_array``: the data rides in the task graph, so it is
  recomputable; for data larger than a few hundred MB give dask arrays read from storage);
* dask arrays, in the same two forms: their blocks along axis 0 are the partitions (every
  array must have the same chunks along axis 0; other axes are made whole);
* a list of ``.npz`` paths or fsspec URLs, one partition each, read by the worker that runs it
  (arrays keyed by placeholder name, or ``features``/``labels``);
* dask DataFrames / Series, ``{placeholder: ddf[[cols]] or ddf["col"]}`` or
  ``(ddf[feature_cols], ddf[label_cols])`` (positional, matched to the training config's
  ``feature_mapping`` + ``label_mapping`` as a tuple of arrays is): the frame's partitions are
  the partitions (``partitions=`` must be left out or equal ``npartitions``: repartition the
  frame before selecting columns). The worker turns each piece into a numpy array of its
  placeholder's dtype (``DataFrame.to_numpy(dtype=...)``): a DataFrame gives ``[n, columns]``;
  a Series gives ``[n, 1]`` (one feature column, as ``ddf[["col"]]`` would), or ``[n]`` when
  its placeholder is 1-D (e.g. integer class labels for a sparse loss). Every column must be
  numeric or bool (else a ``TrainingError`` naming the column and its dtype). The pieces must
  line up row for row: the same ``npartitions`` and ``divisions`` and the same source frame(s)
  (the leaves of their task graphs), else a ``TrainingError`` listing what differs; a piece
  filtered on its own (other rows per partition) is caught on the worker, naming the
  partition. The lengths come from the converted partitions (one small task each), so the
  frame is read once. ``pandas`` and ``dask.dataframe`` are imported only when such data is
  given (``pip install "nd4py[dataframe]"``).

A partition is handed to ``samediff.training.data.Batches`` as a tuple or dict, as a local
``fit`` takes its data.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import TrainingError
from .tasks import load_npz


class Partitions:
    """The futures of the partitions (``futures[p]`` holds partition ``p``) and their lengths."""

    def __init__(self, futures: list, lengths: list[int]) -> None:
        self.futures, self.lengths = futures, lengths

    def __len__(self) -> int:
        return len(self.futures)

    def batches(self, batch_size: int) -> list[int]:
        """Batches per epoch of each partition."""
        return [-(-n // batch_size) for n in self.lengths]


def _pack_tuple(*arrays: np.ndarray) -> tuple:
    return tuple(arrays)


def _pack_dict(names: Sequence[str], *arrays: np.ndarray) -> dict:
    return dict(zip(names, arrays))


def _rows(part: Any) -> int:
    first = next(iter(part.values())) if isinstance(part, dict) else part[0]
    return int(np.shape(first)[0])


class Placeholders:
    """What the data feed: each placeholder's dtype and rank (``None``: rank not fixed), and
    the names a positional ``(features..., labels...)`` tuple feeds (the training config's
    mappings). Dataframe columns are converted to these dtypes on the worker."""

    def __init__(self, specs: Mapping[str, tuple[np.dtype, int | None]],
                 features: Sequence[str], labels: Sequence[str]) -> None:
        self.specs, self.features, self.labels = dict(specs), list(features), list(labels)

    @classmethod
    def of(cls, sd: Any) -> "Placeholders":
        """The placeholders of ``sd`` and its training config's feature/label mappings."""
        cfg = sd.training_config
        specs = {v.name: (np.dtype(v.dtype), len(v.shape)) for v in sd.placeholders()}
        return cls(specs, cfg.feature_mapping if cfg else [], cfg.label_mapping if cfg else [])

    def positional(self, count: int) -> list[str]:
        """The placeholders ``count`` positional pieces feed (as ``fit`` matches a tuple)."""
        names = self.features + self.labels
        if count == len(self.features) and count < len(names):
            return list(self.features)  # features only
        if count != len(names) or not names:
            raise TrainingError(f"fit_distributed: the data has {count} parts but the training "
                                f"config maps {len(self.features)} feature(s) {self.features} "
                                f"and {len(self.labels)} label(s) {self.labels}; give a dict "
                                f"{{placeholder: ddf[cols]}} or match the mappings")
        return names


def partition(data: Any, client: Any, n_partitions: int | None,
              placeholders: Placeholders | None = None) -> Partitions:
    """``data`` on the workers of ``client`` as ``Partitions`` (see the module docstring);
    ``placeholders`` (needed for dataframe data) says what each piece feeds."""
    import dask
    import dask.array as da

    if isinstance(data, (list, tuple)) and data and all(isinstance(p, str) for p in data):
        futures = [client.submit(load_npz, p, key=f"samediff-npz-{i}-{dask.base.tokenize(p)}")
                   for i, p in enumerate(data)]
        lengths = client.gather([client.submit(_rows, f, pure=False) for f in futures])
        return Partitions(futures, [int(n) for n in lengths])
    names: list[str] | None = None
    if isinstance(data, Mapping):
        names, arrays = [str(k) for k in data], list(data.values())
    elif isinstance(data, (list, tuple)) and data:
        arrays = list(data)
    else:
        hint = (" (a whole dask DataFrame: give (ddf[feature_cols], ddf[label_cols]) or "
                "{placeholder: ddf[cols]})" if _is_frame(data) else "")
        raise TrainingError(f"fit_distributed: cannot read data of type {type(data).__name__}"
                            f"{hint}; give (features, labels) numpy or dask arrays or dask "
                            f"DataFrame/Series pieces, a dict {{placeholder: array}}, or a "
                            f"list of .npz paths (one partition each)")
    if any(_is_frame(a) for a in arrays):
        if not all(_is_frame(a) for a in arrays):
            raise TrainingError(f"fit_distributed: the data mixes dask DataFrame/Series pieces "
                                f"with other arrays ({[type(a).__name__ for a in arrays]}); "
                                f"give every piece from the same dask DataFrame")
        feeds = placeholders or Placeholders({}, [], [])
        return _frame_partitions(arrays, names or feeds.positional(len(arrays)),
                                 names is not None, feeds, client, n_partitions)
    if all(isinstance(a, da.Array) for a in arrays):
        arrays = _common_chunks(arrays)
    elif any(isinstance(a, da.Array) for a in arrays):
        raise TrainingError("fit_distributed: the data mixes dask and numpy arrays; give all "
                            "of them as dask arrays (da.from_array) or all as numpy arrays")
    else:
        arrays = [np.asarray(a) for a in arrays]
        n = _common_length(arrays)
        count = n_partitions or len(client.nthreads()) or 1  # (asks the scheduler now)
        if count > n:
            raise TrainingError(f"fit_distributed: {count} partitions for {n} examples; give "
                                f"partitions= at most the number of examples")
        sizes = tuple(len(s) for s in np.array_split(np.arange(n), count))
        arrays = [da.from_array(a, chunks=(sizes,) + a.shape[1:]) for a in arrays]
    if n_partitions is not None and n_partitions != arrays[0].numblocks[0]:
        arrays = [a.rechunk({0: _even(a.shape[0], n_partitions)}) for a in arrays]
    blocks = arrays[0].numblocks[0]
    # module functions (a partial of one): Dask ships them by reference, never as code
    pack = _pack_tuple if names is None else functools.partial(_pack_dict, tuple(names))
    parts = [dask.delayed(pack)(*[a.blocks[i] for a in arrays]) for i in range(blocks)]
    futures = client.compute(parts)
    lengths = [int(c) for c in arrays[0].chunks[0]]
    return Partitions(list(futures), lengths)


def _even(n: int, count: int) -> tuple[int, ...]:
    return tuple(len(s) for s in np.array_split(np.arange(n), count))


def _common_length(arrays: list[np.ndarray]) -> int:
    sizes = {a.shape[0] if a.ndim else None for a in arrays}
    if len(sizes) != 1 or None in sizes:
        raise TrainingError(f"fit_distributed: arrays must share their first (example) dim, "
                            f"got {[a.shape for a in arrays]}")
    return int(sizes.pop())


def _common_chunks(arrays: list) -> list:
    """Dask arrays chunked only along axis 0, all alike there (the partitions)."""
    if len({a.shape[0] for a in arrays}) != 1:
        raise TrainingError(f"fit_distributed: arrays must share their first (example) dim, "
                            f"got {[a.shape for a in arrays]}")
    first = arrays[0].chunks[0]
    out = []
    for a in arrays:
        whole = {i: -1 for i in range(1, a.ndim)}
        if a.chunks[0] != first:
            whole[0] = first
        out.append(a.rechunk(whole) if whole else a)
    return out


# -- dask dataframes ------------------------------------------------------------------------

def _is_frame(x: Any) -> bool:
    """A dask DataFrame or Series? Never imports dask.dataframe: whoever built one did."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(x, (dd.DataFrame, dd.Series))


def _sources(piece: Any) -> frozenset:
    """Names of the leaves of ``piece``'s task graph: the frames it was derived from."""
    expr = getattr(piece, "expr", None)
    if expr is not None:  # dask-expr (dask >= 2025, or with dask-expr installed)
        return frozenset(e._name for e in expr.walk() if not e.dependencies())
    graph = piece.__dask_graph__()  # legacy dask.dataframe: a HighLevelGraph
    return frozenset(k for k, deps in graph.dependencies.items() if not deps)


def _frame_partitions(pieces: list, names: list[str], by_name: bool, feeds: Placeholders,
                      client: Any, n_partitions: int | None) -> Partitions:
    """The partitions of dask DataFrame/Series ``pieces`` feeding placeholders ``names``."""
    import dask
    from pandas.api.types import is_numeric_dtype

    first = pieces[0]
    if n_partitions is not None and n_partitions != first.npartitions:
        raise TrainingError(f"fit_distributed: partitions={n_partitions}, but a dask DataFrame's "
                            f"partitions are the partitions ({first.npartitions} here); "
                            f"repartition the frame first (ddf.repartition(npartitions="
                            f"{n_partitions})) and select the columns from it")
    differ = []
    for what, get in (("npartitions", lambda q: q.npartitions),
                      ("divisions", lambda q: tuple(q.divisions)),
                      ("source frames (graph leaves)", lambda q: sorted(_sources(q)))):
        values = [get(q) for q in pieces]
        if any(v != values[0] for v in values[1:]):
            differ.append(f"{what}: " + ", ".join(f"{n!r} {v}" for n, v in zip(names, values)))
    if differ:
        raise TrainingError("fit_distributed: the dataframe pieces do not line up row for row; "
                            "select every piece from one dask DataFrame (ddf[feature_cols], "
                            "ddf[label_cols]). They differ in " + "; ".join(differ))
    specs = []
    for name, piece in zip(names, pieces):
        if name not in feeds.specs:
            raise TrainingError(f"fit_distributed: no placeholder named {name!r} (the model "
                                f"has {sorted(feeds.specs)}); dataframe columns are converted "
                                f"to their placeholder's dtype")
        dtype, rank = feeds.specs[name]
        series = isinstance(piece, sys.modules["dask.dataframe"].Series)
        columns = {piece.name: piece.dtype} if series else dict(piece.dtypes.items())
        for column, kind in columns.items():
            if not is_numeric_dtype(kind):
                raise TrainingError(f"fit_distributed: column {column!r} (for {name!r}) has "
                                    f"dtype {kind}, which is not numeric; encode it as numbers "
                                    f"(e.g. .cat.codes) or leave it out")
        ndim = 1 if series and rank == 1 else 2
        if rank is not None and rank != ndim:
            raise TrainingError(f"fit_distributed: placeholder {name!r} is {rank}-D, but a dask "
                                f"{'Series' if series else 'DataFrame'} gives "
                                f"{'[n] or [n, 1]' if series else '[n, columns]'} arrays")
        specs.append((name, dtype.str, ndim))
    blocks = [q.to_delayed() for q in pieces]
    parts = [dask.delayed(_convert_frames)(tuple(specs), by_name, p, *[b[p] for b in blocks])
             for p in range(first.npartitions)]
    futures = client.compute(parts)
    lengths = client.gather([client.submit(_rows, f, pure=False) for f in futures])
    return Partitions(list(futures), [int(n) for n in lengths])


def _convert_frames(specs: tuple, by_name: bool, index: int, *frames: Any) -> tuple | dict:
    """(On a worker.) Partition ``index`` of the pieces as numpy arrays: ``specs`` holds
    ``(placeholder, dtype, ndim)`` per piece (see the module docstring)."""
    arrays = []
    for (name, dtype, ndim), frame in zip(specs, frames):
        array = np.asarray(frame.to_numpy(dtype=np.dtype(dtype)))
        arrays.append(array.reshape(-1, 1) if array.ndim == 1 and ndim == 2 else array)
    rows = {name: len(a) for (name, _, _), a in zip(specs, arrays)}
    if len(set(rows.values())) > 1:
        raise TrainingError(f"fit_distributed: partition {index} of the dataframe pieces has "
                            f"different row counts {rows}: they must come from the same rows "
                            f"of one frame (filter the frame, then select the columns)")
    names = [name for name, _, _ in specs]
    return dict(zip(names, arrays)) if by_name else tuple(arrays)
