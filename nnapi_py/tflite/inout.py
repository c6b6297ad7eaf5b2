"""A .tflite model's inputs and outputs as its user sees them -- name, shape (and the signature's
dynamic dimensions), dtype, quantization -- and the check of the arrays given to run().

    >>> m.inputs
    [input_1: float32[1, 128, 128, 3]]
    >>> m.run([x])      # x: one array per input, in this order, of that shape and dtype

run() takes exactly one array per input (a list in the model's input order, or a dict by name),
each of the input's shape -- a dimension the signature leaves open (-1) may have any size -- and
of its dtype, or of a dtype numpy casts to it without loss ("safe": float16 into float32, int8
into int32).  Anything else is a ValueError naming the input, so a run never reuses an earlier
run's values or reads an array of another layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a model."""
    name: str
    shape: Tuple[int, ...]          # as the file stores it (the shape a run uses by default)
    signature: Tuple[int, ...]      # -1 where any size is accepted
    dtype: Optional[np.dtype]       # None for a type numpy has no dtype for (e.g. RESOURCE)
    type_name: str                  # the TFLite type: FLOAT32, INT8, ...
    scale: float = 0.0              # quantization (0.0: none)
    zero_point: int = 0
    scales: Optional[Tuple[float, ...]] = None   # per-channel scales (along axis qdim)
    qdim: int = 0

    @property
    def quantization(self) -> Optional[Tuple[float, int]]:
        """(scale, zero_point), or None for a tensor that is not quantized."""
        return (self.scale, self.zero_point) if self.scale else None

    def text(self) -> str:
        """'x: int8[1, 49, 40] (scale 0.1016, zero point -128)'; -1 for a dynamic dimension."""
        dims = list(d if s != -1 else -1 for d, s in zip(self.shape, self.signature)) \
            if len(self.signature) == len(self.shape) else list(self.shape)
        dt = np.dtype(self.dtype).name if self.dtype is not None else self.type_name.lower()
        q = ""
        if self.scales is not None:
            q = f" (per-channel scales along axis {self.qdim}, zero point {self.zero_point})"
        elif self.scale:
            q = f" (scale {self.scale:.6g}, zero point {self.zero_point})"
        return f"{self.name}: {dt}{dims}{q}"

    __repr__ = text


def infos(tensors, indices: Sequence[int], signatures: Optional[Sequence[Sequence[int]]] = None) -> List[TensorInfo]:
    """TensorInfo of tensors[k] for each k in indices (reader.Tensor objects); signatures: the
    file's shape signatures of those tensors where the tensors' own were since resolved."""
    out = []
    for n, k in enumerate(indices):
        t = tensors[k]
        sig = tuple(signatures[n]) if signatures is not None else tuple(t.signature)
        out.append(TensorInfo(t.name, tuple(t.shape), sig, None if t.dtype is None else np.dtype(t.dtype),
                              t.type_name, float(t.scale or 0.0), int(t.zp or 0),
                              tuple(float(s) for s in t.scales) if t.scales is not None else None, int(t.qdim or 0)))
    return out


def _fits(info: TensorInfo, shape: Tuple[int, ...]) -> bool:
    sig = info.signature if len(info.signature) == len(info.shape) else info.shape
    return len(shape) == len(info.shape) and all(s == -1 or d == n for d, n, s in zip(shape, info.shape, sig))


def check_inputs(expected: Sequence[TensorInfo], inputs: Any) -> List[np.ndarray]:
    """The arrays to feed, one per expected input, in order; ValueError naming the input for a
    wrong count, name, shape or dtype."""
    if type(inputs) in (list, tuple) and len(inputs) == len(expected):
        # the usual call, a step of a streaming model: arrays of the inputs' own shapes and dtypes,
        # taken as they are (what the checks below return for them) without their cost (the
        # typing.Mapping check alone is a few us; issue 41)
        arrays = []
        for info, v in zip(expected, inputs):
            if type(v) is not np.ndarray or v.shape != info.shape or v.dtype != info.dtype:
                break
            arrays.append(v)
        else:
            return arrays
    names = [i.name for i in expected]
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise ValueError(f"no model input named {unknown}: the inputs are {names}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"inputs {missing} are not given (the model takes {len(names)}: {names})")
        inputs = [inputs[n] for n in names]
    elif isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        raise ValueError(f"run() takes a list of arrays, one per input in the model's order ({names}), "
                         f"or a dict by name: m.run([x])")
    if len(inputs) != len(expected):
        raise ValueError(f"{len(inputs)} input(s) given, the model takes {len(expected)}: "
                         f"{', '.join(i.text() for i in expected)}")
    arrays = []
    for info, v in zip(expected, inputs):
        a = np.asarray(v)
        if not _fits(info, a.shape):
            open_dims = " (it does not fit the shape signature: -1 takes any size)" if -1 in info.signature else ""
            raise ValueError(f"input {info.text()}: an array of shape {list(a.shape)} was given{open_dims}")
        if info.dtype is not None and a.dtype != info.dtype:
            if not np.can_cast(a.dtype, info.dtype, casting="safe"):
                raise ValueError(f"input {info.text()}: {a.dtype} values were given (convert them, e.g. "
                                 f"x.astype(np.{info.dtype.name}), where nothing is lost)")
            a = a.astype(info.dtype)
        arrays.append(a)
    return arrays


def first_run(ex, bound_inputs, outputs, fresh):
    """The first run of the reusable execution ex, with the caller's arrays bound zero-copy:
    bound_inputs are read in place and outputs written in place at every run, fresh values are
    copied into the execution's own buffers.  nn.Execution.bind() does the binding where it
    exists (issue 26: a run never writes into an array it was given unless bound); before it, a
    reusable execution's first run bound the arrays it was given."""
    if hasattr(ex, "bind"):
        ex.bind(bound_inputs, outputs)
        return ex.run(fresh, copy=False)
    ins = dict(bound_inputs)
    ins.update({n: np.array(a) for n, a in fresh.items()})    # its own, written into by later runs
    return ex.run(ins, outputs, copy=False)
