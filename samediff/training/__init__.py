"""Training: configuration, updaters, learning-rate schedules, the compiled train step, ``fit``.

Training reads and writes a model only through the ``TrainableModel`` contract (``model.py``):
a ``SameDiff`` meets it, and so does a ``Model`` built from a saved file or bytes.

>>> from samediff.training import TrainingConfig, Adam, CosineSchedule
>>> config = TrainingConfig(updater=Adam(CosineSchedule(1e-3, total_steps=1000, warmup_steps=100)),
...                         feature_mapping=["x"], label_mapping=["y"])
"""
from .config import TrainingConfig
from .history import EpochRecord, History, LossCurve
from .model import Model, TrainableModel
from .listeners import (CheckpointListener, EarlyStopping, LambdaListener, Listener,
                        ProfilingListener, ScoreListener)
from .schedules import (CosineSchedule, CycleSchedule, ExponentialSchedule, FixedSchedule,
                        InverseSchedule, MapSchedule, PolySchedule, RampSchedule, Schedule,
                        ScheduleType, SigmoidSchedule, StepSchedule)
from .trainer import NonFiniteError, evaluate, fit
from .updaters import (AdaDelta, AdaGrad, AdaMax, Adam, AdamW, AMSGrad, Momentum, Nadam,
                       Nesterovs, NoOp, RmsProp, Sgd, Updater)

__all__ = ["TrainingConfig", "TrainableModel", "Model", "fit", "evaluate", "NonFiniteError",
           "History", "EpochRecord", "LossCurve", "Listener",
           "LambdaListener", "ScoreListener", "EarlyStopping", "CheckpointListener", "ProfilingListener",
           "Schedule",
           "ScheduleType", "FixedSchedule", "StepSchedule", "ExponentialSchedule",
           "InverseSchedule", "PolySchedule", "SigmoidSchedule", "MapSchedule", "CycleSchedule",
           "CosineSchedule", "RampSchedule", "Updater", "Sgd", "Momentum", "Nesterovs", "Adam",
           "AdamW", "AdaMax", "Nadam", "AMSGrad", "AdaGrad", "AdaDelta", "RmsProp", "NoOp"]
