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
  (arrays keyed by placeholder name, or ``features``/``labels``).

A partition is handed to ``samediff.training.data.Batches`` as a tuple or dict, as a local
``fit`` takes its data.
"""
from __future__ import annotations

import functools
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


def partition(data: Any, client: Any, n_partitions: int | None) -> Partitions:
    """``data`` on the workers of ``client`` as ``Partitions`` (see the module docstring)."""
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
        raise TrainingError(f"fit_distributed: cannot read data of type {type(data).__name__}; "
                            f"give (features, labels) numpy or dask arrays, a dict "
                            f"{{placeholder: array}}, or a list of .npz paths (one partition "
                            f"each)")
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
