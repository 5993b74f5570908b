"""Beyond one machine, on Dask distributed (``pip install 'nd4py[distributed]'``).

* ``fit_distributed(sd, data, client, epochs=..., batch_size=..., averaging_frequency=...)``:
  data-parallel training of one SameDiff on the workers of a ``dask.distributed.Client`` —
  parameter averaging (DL4J's ``ParameterAveragingTrainingMaster``) or, with
  ``mode="gradients"``, synchronous gradient averaging — expressed as Dask tasks, so a lost
  worker's work is recomputed from lineage; returns a ``DistributedHistory`` (``fit.py``);
* ``predict_blocks(sd, dask_array, output)``: blockwise inference over ``map_blocks``, the
  model sent once per worker (``predict.py``).

The model travels in the safe file format (``serialize.to_bytes``), never as a pickle of its
graph or code. Dask is imported on first use: this package imports without it.

>>> from samediff.distributed import fit_distributed, predict_blocks
>>> history = fit_distributed(sd, (x, y), client, epochs=5, batch_size=32)  # doctest: +SKIP
"""
from .errors import DistributedTrainingError
from .fit import fit_distributed
from .history import DistributedHistory, RoundRecord
from .predict import predict_blocks

__all__ = ["fit_distributed", "predict_blocks", "DistributedTrainingError",
           "DistributedHistory", "RoundRecord"]
