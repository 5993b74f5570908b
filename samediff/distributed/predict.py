"""``predict_blocks``: a model's output over a dask array, block by block, on the workers.

The model travels once per worker, not once per block: its bytes (``serialize.to_bytes``, no
pickle) are scattered to every worker (``broadcast=True``), and each worker process turns them
into a model on the first block it runs and keeps it, keyed by the bytes' SHA-256
(``payload.cached``). Blocks are computed with ``Model.output`` (the path ``sd.output`` runs,
with the client's executor), so the result equals local ``sd.output`` exactly.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import compiler
from ..errors import TrainingError
from .payload import cached, encode_model, where
from .tasks import using_executor


def _predict_block(block: np.ndarray, payload: bytes, digest: str, placeholder: str,
                   output: str, executor: str) -> np.ndarray:
    """(On a worker.) The output for one block of rows."""
    entry = cached(payload, digest, where())
    with entry.lock, using_executor(executor):
        out = np.asarray(entry.model.output({placeholder: block}, output)[output])
    if out.ndim == 0 or out.shape[0] != block.shape[0]:
        raise TrainingError(f"predict_blocks: {output!r} gave shape {out.shape} for a block of "
                            f"{block.shape[0]} rows; it must have one row per input row")
    return out


def _placeholder(sd: Any, output: str, placeholder: str | None) -> str:
    if placeholder is not None:
        return placeholder
    cfg = sd.training_config
    if cfg is not None and len(cfg.feature_mapping) == 1:
        return cfg.feature_mapping[0]
    used = {i for n in sd.graph.needed([output]) for i in n.inputs}
    found = [n for n, v in sd.graph.vars.items()
             if v.vtype.value == "PLACEHOLDER" and n in used]
    if len(found) != 1:
        raise TrainingError(f"predict_blocks: {output!r} depends on placeholders {found}; say "
                            f"which one the array feeds with placeholder=")
    return found[0]


def _output_type(sd: Any, output: str, placeholder: str, x: Any) -> tuple[tuple, np.dtype]:
    """Trailing shape and dtype of ``output`` per row: from the graph when it knows them,
    else from running the model on the first row."""
    ttype = sd.graph.vars[output].ttype
    shape = tuple(ttype.shape)
    if shape and all(d >= 0 for d in shape[1:]) and ttype.dtype is not None:
        return shape[1:], np.dtype(ttype.dtype)
    first = np.asarray(x[:1].compute())
    probe = np.asarray(sd.output({placeholder: first}, output)[output].numpy())
    return probe.shape[1:], probe.dtype


def predict_blocks(sd: Any, x: Any, output: Any, placeholder: str | None = None, *,
                   client: Any = None) -> Any:
    """``output`` of ``sd`` for every row of the dask array ``x`` (fed to ``placeholder``:
    default the training config's single feature placeholder, or the only placeholder
    ``output`` depends on), as a dask array chunked like ``x`` along axis 0, of the output's
    dtype. Nothing runs until it is computed. With a Dask ``client`` (default: the current
    one, if any) the model is scattered to every worker once; without one the model bytes
    ride in the graph (the local schedulers share this process's cache).

    >>> y = predict_blocks(sd, da.from_array(x, chunks=256), "softmax")  # doctest: +SKIP
    >>> y.compute()                                                        # doctest: +SKIP
    """
    import dask.array as da
    name = getattr(output, "name", output)
    sd.graph.var(name)  # an unknown name is an error that names it
    placeholder = _placeholder(sd, name, placeholder)
    if not isinstance(x, da.Array):
        x = da.from_array(np.asarray(x), chunks=(max(1, len(x)),) + np.shape(x)[1:])
    if x.ndim == 0:
        raise TrainingError("predict_blocks: x must have a first (row) axis")
    if any(len(c) > 1 for c in x.chunks[1:]):
        x = x.rechunk({i: -1 for i in range(1, x.ndim)})
    trailing, dtype = _output_type(sd, name, placeholder, x)
    data, digest = encode_model(sd)
    if client is None:
        try:
            from distributed import default_client
            client = default_client()
        except (ImportError, ValueError):
            client = None
    # a key of its own, as fit.py's model (a content-hash key raced its own release)
    payload = data if client is None else client.scatter(data, broadcast=True, hash=False)
    chunks = (x.chunks[0],) + tuple((d,) for d in trailing)
    out_rank, in_rank = 1 + len(trailing), x.ndim
    extra: dict[str, Any] = {}
    if out_rank < in_rank:
        extra["drop_axis"] = list(range(out_rank, in_rank))
    elif out_rank > in_rank:
        extra["new_axis"] = list(range(in_rank, out_rank))
    return x.map_blocks(_predict_block, payload, digest, placeholder, name,
                        compiler.get_executor(), dtype=dtype, chunks=chunks,
                        meta=np.empty((0,) * out_rank, dtype), **extra)
