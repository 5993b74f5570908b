"""ND4J's convolution and pooling configs: ``Conv1DConfig``, ``Conv2DConfig``,
``Pooling2DConfig``, with ND4J's field names, defaults and builders.

A config is front-end data: passed among the arguments of an op call (``sd.cnn.conv2d(x, w, b,
config)``, ``nd.cnn.maxPooling2d(x, config)``) it expands into that op's attributes
(``op_attrs``); the ops themselves only know attributes (``samediff/ops/cnn.py``). Any
``OpConfig`` works this way (``split_call`` in ``nd4j.py`` knows no config by name).

>>> Conv2DConfig.builder().kH(3).kW(3).sH(2).sW(2).isSameMode(True).build().op_attrs(None)
{'stride': (2, 2), 'padding': 'same', 'dilation': (1, 1), 'data_format': 'NCHW', 'weights_format': 'HWIO'}
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import OpError
from ..ops.cnn import swap_weights


class OpConfig(abc.ABC):
    """A bundle of attributes in ND4J's spelling: ``op_attrs(op)`` gives the op's attributes."""

    @abc.abstractmethod
    def op_attrs(self, op: Any) -> dict:
        """The attributes of ``op`` this config stands for."""

    #: the fields that give the kernel size (the weights' spatial sizes), in weights order
    KERNEL: ClassVar[tuple[str, ...]] = ()

    def check_inputs(self, op: Any, inputs: list, attrs: dict) -> None:
        """Refuse a config that disagrees with the call it is given to: a kernel size (``kH``,
        ``kW``...) other than the weights' (the weights decide it; ND4J's configs repeat
        it). ``inputs`` and ``attrs`` are the call's, the config's attributes among them.

        >>> import numpy as np
        >>> from samediff.ops import REGISTRY
        >>> w = np.zeros((3, 3, 1, 4), np.float32)  # HWIO: a 3x3 kernel
        >>> try:
        ...     Conv2DConfig(kH=5, kW=5).check_inputs(REGISTRY["conv2d"], [w, w], {})
        ... except OpError as e:
        ...     print(str(e)[:76])
        conv2d: Conv2DConfig says kH=5, kW=5 but the weights w (HWIO, shape (3, 3, 1
        """
        given = {f: getattr(self, f) for f in self.KERNEL if getattr(self, f) >= 1}
        names = [s.rstrip("?") for s in op.inputs]
        slot = next((i for i, n in enumerate(names) if n in ("w", "dw")), None)
        if not given or slot is None or slot >= len(inputs):
            return
        shape = _static_shape(inputs[slot])
        kind, default = op.attr_kinds.get("weights_format", (None, None))
        if shape is None or kind is None:
            return
        wfmt = kind.coerce(attrs.get("weights_format", default))
        if len(shape) != len(wfmt):
            return  # the op's inference names the wrong rank
        kernel = [d for d, c in zip(shape, wfmt) if c not in "IO"]
        wanted = [getattr(self, f) for f in self.KERNEL]
        if all(v < 1 or v == k for v, k in zip(wanted, kernel)):
            return
        say = ", ".join(f"{f}={v}" for f, v in given.items())
        has = "x".join(str(k) for k in kernel)
        other = swap_weights(wfmt)
        alt = [d for d, c in zip(shape, other) if c not in "IO"]
        if other in kind.name.split("|") and all(v < 1 or v == k for v, k in zip(wanted, alt)):
            fix = (f"set weightsFormat={other!r} in the {type(self).__name__}"
                   if "weightsFormat" in _field_names(self) else
                   f"pass weights_format={other!r}")
            tail = f"; read as {other} (PyTorch's/ONNX's layout) they fit: {fix}"
        else:
            tail = (f"; the weights decide the kernel size: leave {', '.join(given)} out of "
                    f"the config or give weights of that size")
        raise OpError(f"{op.name}: {type(self).__name__} says {say} but the weights "
                      f"{names[slot]} ({wfmt}, shape {tuple(shape)}) have kernel {has}"
                      f"{tail}")

    @classmethod
    def builder(cls) -> _Builder:
        """ND4J's builder: ``Conv2DConfig.builder().kH(3).kW(3).build()``."""
        return _Builder(cls)

    def _check(self, positive: tuple[str, ...], non_negative: tuple[str, ...] = ()) -> None:
        name = type(self).__name__
        for f in positive + non_negative:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise OpError(f"{name}: {f} must be an int, got {v!r}")
            if v < (1 if f in positive else 0):
                raise OpError(f"{name}: {f} must be {'>= 1' if f in positive else '>= 0'}, got "
                              f"{v} (set it, e.g. {name}.builder().{f}(...))")

    def _pool_type(self, op: Any) -> None:
        """Refuse a ``type`` that names another pooling than ``op``'s (None: the op's)."""
        if self.type is None:
            return
        self._choice("type", ("MAX", "AVG", "PNORM"))
        kind = op.name.split("_")[0].upper() if op is not None else self.type.upper()
        if kind in ("MAX", "AVG") and self.type.upper() != kind:
            call = (f"{self.type.lower()}Pooling{op.name[-2:]}" if self.type.upper() != "PNORM"
                    else "maxPooling/avgPooling (there is no p-norm pooling)")
            raise OpError(f"{op.name}: {type(self).__name__}(type={self.type!r}) asks for "
                          f"{self.type.upper()} pooling but this is {kind} pooling; call "
                          f"{call}, or leave type out (the op decides)")

    def _choice(self, field: str, options: tuple[str, ...]) -> str:
        v = getattr(self, field)
        if not isinstance(v, str) or v.upper() not in options:
            raise OpError(f"{type(self).__name__}: {field} must be one of {options}, got {v!r}")
        return v.upper()


def _static_shape(value: Any) -> tuple[int, ...] | None:
    """The shape of an array, variable or nested list when it is fully known, else None."""
    shape = getattr(value, "shape", None)
    if shape is None and isinstance(value, (list, tuple)):
        shape = np.shape(value)
    if shape is None:
        return None
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):  # None for unknown sizes
        return None
    return shape if all(d >= 0 for d in shape) else None


def _field_names(cfg: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(cfg)}


class _Builder:
    """``Config.builder().field(value)...build()``: one chainable setter per field."""

    def __init__(self, cls: type) -> None:
        self._cls, self._values = cls, {}
        self._fields = {f.name for f in dataclasses.fields(cls)}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._fields:
            raise AttributeError(f"{self._cls.__name__}.builder() has no field {name!r}; "
                                 f"fields: {sorted(self._fields)}")

        def set_(value: Any) -> _Builder:
            self._values[name] = value
            return self
        return set_

    def build(self) -> Any:
        return self._cls(**self._values)


_WEIGHTS = {"YXIO": "HWIO", "HWIO": "HWIO", "OIYX": "OIHW", "OIHW": "OIHW"}


@dataclass(frozen=True)
class _Window2D(OpConfig):
    """The fields ND4J's 2-D configs share, in their order: kernel, stride, padding,
    dilation (each H then W)."""

    kH: int = -1
    kW: int = -1
    sH: int = 1
    sW: int = 1
    pH: int = 0
    pW: int = 0
    dH: int = 1
    dW: int = 1

    def _window_attrs(self, same: bool) -> dict:
        return {"stride": (self.sH, self.sW),
                "padding": "same" if same else (self.pH, self.pW),
                "dilation": (self.dH, self.dW)}


@dataclass(frozen=True)
class Conv2DConfig(_Window2D):
    """ND4J's ``Conv2DConfig``: kernel ``kH``/``kW`` (documentation: the weights decide),
    stride, padding, dilation, ``isSameMode``, ``dataFormat`` "NCHW"|"NHWC", ``weightsFormat``
    "YXIO"/"HWIO" ([kH, kW, iC, oC], ND4J's default) | "OIYX"/"OIHW" (PyTorch/ONNX)."""

    KERNEL: ClassVar[tuple[str, ...]] = ("kH", "kW")
    isSameMode: bool = False
    dataFormat: str = "NCHW"
    weightsFormat: str = "YXIO"

    def __post_init__(self) -> None:
        self._check(("sH", "sW", "dH", "dW"), ("pH", "pW"))
        self._choice("dataFormat", ("NCHW", "NHWC"))
        self._choice("weightsFormat", tuple(_WEIGHTS))

    def op_attrs(self, op: Any) -> dict:
        attrs = {**self._window_attrs(self.isSameMode), "data_format": self.dataFormat.upper(),
                 "weights_format": _WEIGHTS[self.weightsFormat.upper()]}
        if op is not None and "kernel" in op.attr_kinds:  # im2Col: the kernel is an attribute
            attrs["kernel"] = (self.kH, self.kW)
        if op is not None and "weights_format" not in op.attr_kinds:  # im2Col/col2Im: no weights
            attrs.pop("weights_format")
        return attrs


@dataclass(frozen=True)
class Conv1DConfig(OpConfig):
    """ND4J's ``Conv1DConfig``: kernel ``k``, stride ``s``, padding ``p``, dilation ``d``,
    ``isSameMode``, ``dataFormat`` "NCW"|"NWC", ``weightsFormat`` "WIO" ([k, iC, oC]) | "OIW"."""

    KERNEL: ClassVar[tuple[str, ...]] = ("k",)
    k: int = -1
    s: int = 1
    p: int = 0
    d: int = 1
    isSameMode: bool = False
    dataFormat: str = "NCW"
    weightsFormat: str = "WIO"

    def __post_init__(self) -> None:
        self._check(("s", "d"), ("p",))
        self._choice("dataFormat", ("NCW", "NWC"))
        self._choice("weightsFormat", ("WIO", "OIW"))

    def op_attrs(self, op: Any) -> dict:
        return {"stride": self.s, "padding": "same" if self.isSameMode else self.p,
                "dilation": self.d, "data_format": self.dataFormat.upper(),
                "weights_format": self.weightsFormat.upper()}


@dataclass(frozen=True)
class Pooling2DConfig(_Window2D):
    """ND4J's ``Pooling2DConfig``: kernel ``kH``/``kW`` (required), stride (default 1),
    padding, dilation, ``type`` (None: the op decides; another op's type is refused),
    ``divisor`` "EXCLUDE_PADDING" (ND4J's default) | "INCLUDE_PADDING" for average pooling,
    ``isSameMode``, ``isNHWC``."""

    type: str | None = None
    divisor: str = "EXCLUDE_PADDING"
    isSameMode: bool = False
    isNHWC: bool = False

    def __post_init__(self) -> None:
        self._check(("kH", "kW", "sH", "sW", "dH", "dW"), ("pH", "pW"))
        self._pool_type(None)
        self._choice("divisor", ("EXCLUDE_PADDING", "INCLUDE_PADDING"))

    def op_attrs(self, op: Any) -> dict:
        self._pool_type(op)
        attrs = {"kernel": (self.kH, self.kW), **self._window_attrs(self.isSameMode),
                 "data_format": "NHWC" if self.isNHWC else "NCHW"}
        if op is not None and "count_include_pad" in op.attr_kinds:
            attrs["count_include_pad"] = self.divisor.upper() == "INCLUDE_PADDING"
        return attrs


def _pool_attrs(cfg: Any, op: Any, kernel: Any, stride: Any, padding: Any, dilation: Any,
                data_format: str) -> dict:
    cfg._pool_type(op)
    attrs = {"kernel": kernel, "stride": stride, "padding": "same" if cfg.isSameMode else padding,
             "dilation": dilation, "data_format": data_format}
    if op is not None and "count_include_pad" in op.attr_kinds:
        attrs["count_include_pad"] = cfg.divisor.upper() == "INCLUDE_PADDING"
    return attrs


@dataclass(frozen=True)
class Pooling1DConfig(OpConfig):
    """ND4J's ``Pooling1DConfig``: kernel ``k`` (required), stride ``s``, padding ``p``,
    dilation ``d``, ``type`` (as ``Pooling2DConfig``'s: ``maxPooling1d``/``avgPooling1d``
    decide), ``divisor`` as ``Pooling2DConfig``, ``isSameMode``, ``isNCW`` (default True: NCW)."""

    k: int = -1
    s: int = 1
    p: int = 0
    d: int = 1
    type: str | None = None
    divisor: str = "EXCLUDE_PADDING"
    isSameMode: bool = False
    isNCW: bool = True

    def __post_init__(self) -> None:
        self._check(("k", "s", "d"), ("p",))
        self._pool_type(None)
        self._choice("divisor", ("EXCLUDE_PADDING", "INCLUDE_PADDING"))

    def op_attrs(self, op: Any) -> dict:
        return _pool_attrs(self, op, self.k, self.s, self.p, self.d,
                           "NCW" if self.isNCW else "NWC")


@dataclass(frozen=True)
class Pooling3DConfig(OpConfig):
    """ND4J's ``Pooling3DConfig``: kernel ``kD``/``kH``/``kW`` (required), stride, padding,
    dilation (each D, H, W), ``type`` (as Pooling2DConfig's), ``divisor``, ``isSameMode``,
    ``dataFormat`` "NCDHW" (default) | "NDHWC" (older ND4J's ``isNCDHW=False`` also works)."""

    kD: int = -1
    kW: int = -1
    kH: int = -1
    sD: int = 1
    sW: int = 1
    sH: int = 1
    pD: int = 0
    pW: int = 0
    pH: int = 0
    dD: int = 1
    dW: int = 1
    dH: int = 1
    type: str | None = None
    divisor: str = "EXCLUDE_PADDING"
    isSameMode: bool = False
    dataFormat: str = "NCDHW"
    isNCDHW: bool | None = None

    def __post_init__(self) -> None:
        self._check(("kD", "kW", "kH", "sD", "sW", "sH", "dD", "dW", "dH"), ("pD", "pW", "pH"))
        self._pool_type(None)
        self._choice("divisor", ("EXCLUDE_PADDING", "INCLUDE_PADDING"))
        self._choice("dataFormat", ("NCDHW", "NDHWC"))
        if self.isNCDHW and self.dataFormat.upper() == "NDHWC":  # False + the default is fine
            raise OpError("Pooling3DConfig: isNCDHW=True contradicts dataFormat='NDHWC'; give "
                          "the layout once (dataFormat)")

    def op_attrs(self, op: Any) -> dict:
        fmt = self.dataFormat.upper() if self.isNCDHW is None else (
            "NCDHW" if self.isNCDHW else "NDHWC")
        return _pool_attrs(self, op, (self.kD, self.kH, self.kW), (self.sD, self.sH, self.sW),
                           (self.pD, self.pH, self.pW), (self.dD, self.dH, self.dW), fmt)


@dataclass(frozen=True)
class LocalResponseNormalizationConfig(OpConfig):
    """ND4J's ``LocalResponseNormalizationConfig``: ``alpha`` (1), ``beta`` (0.5), ``bias``
    (1), ``depth`` (5: the half-width of the channel window)."""

    alpha: float = 1.0
    beta: float = 0.5
    bias: float = 1.0
    depth: int = 5

    def __post_init__(self) -> None:
        self._check((), ("depth",))
        for f in ("alpha", "beta", "bias"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise OpError(f"LocalResponseNormalizationConfig: {f} must be a number, got {v!r}")

    def op_attrs(self, op: Any) -> dict:
        return {"alpha": float(self.alpha), "beta": float(self.beta), "bias": float(self.bias),
                "depth": self.depth}


@dataclass(frozen=True)
class _Window3D(OpConfig):
    """The fields ND4J's 3-D convolution configs share: kernel, stride, padding, dilation
    (each D, H, W), ``isSameMode``, ``dataFormat`` "NCDHW"|"NDHWC"."""

    kD: int = -1
    kH: int = -1
    kW: int = -1
    sD: int = 1
    sH: int = 1
    sW: int = 1
    pD: int = 0
    pH: int = 0
    pW: int = 0
    dD: int = 1
    dH: int = 1
    dW: int = 1
    isSameMode: bool = False
    dataFormat: str = "NCDHW"

    def __post_init__(self) -> None:
        self._check(("sD", "sH", "sW", "dD", "dH", "dW"), ("pD", "pH", "pW"))
        self._choice("dataFormat", ("NCDHW", "NDHWC"))

    def op_attrs(self, op: Any) -> dict:
        return {"stride": (self.sD, self.sH, self.sW),
                "padding": "same" if self.isSameMode else (self.pD, self.pH, self.pW),
                "dilation": (self.dD, self.dH, self.dW), "data_format": self.dataFormat.upper()}


@dataclass(frozen=True)
class Conv3DConfig(_Window3D):
    """ND4J's ``Conv3DConfig`` (``conv3d``): kernel ``kD``/``kH``/``kW`` (documentation: the
    weights decide), stride, padding, dilation, ``isSameMode``, ``dataFormat`` "NDHWC" (ND4J's
    default for this config) | "NCDHW"; ``biasUsed`` is ignored (a bias is passed or not).
    Weights: ND4J's ``[kD, kH, kW, iC, oC]``."""

    KERNEL: ClassVar[tuple[str, ...]] = ("kD", "kH", "kW")
    dataFormat: str = "NDHWC"
    biasUsed: bool = False


@dataclass(frozen=True)
class DeConv2DConfig(_Window2D):
    """ND4J's ``DeConv2DConfig`` (``deconv2d``): kernel ``kH``/``kW`` (documentation),
    stride, padding, dilation, ``isSameMode`` (output = input * stride), ``dataFormat``
    "NCHW" (default) | "NHWC". Weights: ND4J's ``[kH, kW, oC, iC]``."""

    KERNEL: ClassVar[tuple[str, ...]] = ("kH", "kW")
    isSameMode: bool = False
    dataFormat: str = "NCHW"

    def __post_init__(self) -> None:
        self._check(("sH", "sW", "dH", "dW"), ("pH", "pW"))
        self._choice("dataFormat", ("NCHW", "NHWC"))

    def op_attrs(self, op: Any) -> dict:
        return {**self._window_attrs(self.isSameMode), "data_format": self.dataFormat.upper()}


@dataclass(frozen=True)
class DeConv3DConfig(_Window3D):
    """ND4J's ``DeConv3DConfig`` (``deconv3d``): as ``Conv3DConfig``, ``dataFormat`` "NCDHW"
    (ND4J's default for this config) | "NDHWC". Weights: ND4J's ``[kD, kH, kW, oC, iC]``."""

    KERNEL: ClassVar[tuple[str, ...]] = ("kD", "kH", "kW")


__all__ = ["Conv1DConfig", "Conv2DConfig", "Conv3DConfig", "DeConv2DConfig", "DeConv3DConfig",
           "LocalResponseNormalizationConfig", "OpConfig", "Pooling1DConfig", "Pooling2DConfig",
           "Pooling3DConfig"]
