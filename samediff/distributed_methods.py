"""Dask methods of ``SameDiff`` -- ``fit_distributed`` / ``fitDistributed`` and
``predict_blocks`` -- as a mixin the facade inherits (as ``OnnxMethods``). They call
``samediff.distributed``, which imports Dask on first use (``pip install 'nd4py[distributed]'``)."""
from __future__ import annotations

from typing import Any


class DistributedMethods:
    """``sd.fit_distributed(data, client, ...)`` (also ``fitDistributed``, DL4J's
    ``SparkComputationGraph.fit`` counterpart) and ``sd.predict_blocks(dask_array, output)``."""

    def fit_distributed(self, data: Any, client: Any = None, **options: Any) -> Any:
        """Train this graph on a Dask cluster: ``samediff.distributed.fit_distributed(self,
        data, client, **options)`` (parameter or gradient averaging); returns its
        ``DistributedHistory``."""
        from .distributed import fit_distributed
        return fit_distributed(self, data, client, **options)

    fitDistributed = fit_distributed

    def predict_blocks(self, x: Any, output: Any, placeholder: str | None = None, *,
                       client: Any = None) -> Any:
        """``output`` for every row of the dask array ``x``, block by block on the workers
        (``samediff.distributed.predict_blocks``): a dask array chunked like ``x``."""
        from .distributed import predict_blocks
        return predict_blocks(self, x, output, placeholder, client=client)
