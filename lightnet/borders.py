"""Session's borders: a model's inputs and outputs as its producer declares them (the
IR's `interface`: int64, float16, scalars) against what its tensors hold (TL_INT32,
TL_FLOAT, [1]), and the conversion between the two."""

from __future__ import annotations

import math

import numpy as np

from lightnet.context import Context
from lightnet.errors import LightNetError


class Borders:
    """The declared dtype and shape of every input and output of a loaded context
    (its tensor's where the model declares none), and the conversions."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.ports = {}
        interface = ctx.interface
        if interface is None:
            return
        for kind, declared, names in (("input", interface.inputs, ctx.inputs),
                                      ("output", interface.outputs, ctx.outputs)):
            for port in declared:
                if port.name not in names:
                    raise LightNetError(f"interface: '{port.name}' is not an {kind} of the model "
                                        f"({kind}s: {', '.join(names) or 'none'})")
                size = ctx.tensors[port.name].len
                if math.prod(port.shape) != size:
                    raise LightNetError(f"interface: {kind} '{port.name}': declared shape "
                                        f"{list(port.shape)} has {math.prod(port.shape)} "
                                        f"elements, the tensor has {size}")
                self.ports[port.name] = port

    def declared(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        """(dtype, shape) of input or output `name` as the model declares it."""
        port = self.ports.get(name)
        if port is not None:
            return np.dtype(port.dtype), port.shape
        entry = self.ctx.tensors[name]
        return entry.dtype.np, entry.shape

    def to_tensor(self, name: str, array: np.ndarray) -> np.ndarray:
        """Input `name` fed as `array`, as its tensor holds it: the declared dtype and
        shape are converted (integers range-checked), the tensor's own taken as they are."""
        dtype, shape = self.declared(name)
        entry = self.ctx.tensors[name]
        target = entry.dtype.np
        if array.dtype not in (dtype, target):
            raise LightNetError(f"input '{name}': expected dtype {dtype}, found {array.dtype}")
        if array.shape not in (shape, entry.shape):
            raise LightNetError(f"input '{name}': expected shape {shape}, found {array.shape}")
        if array.dtype != target and target.kind in "iu" and array.size:
            limits = np.iinfo(target)
            outside = (array < limits.min) | (array > limits.max)
            if outside.any():
                raise LightNetError(
                    f"input '{name}': {array.dtype} value {array[outside].flat[0]} does not fit "
                    f"in the model's {target} tensor [{limits.min}, {limits.max}]")
        return array.astype(target, copy=False).reshape(entry.shape)

    def from_tensor(self, name: str, array: np.ndarray) -> np.ndarray:
        """Output `name`'s data as the model declares it."""
        port = self.ports.get(name)
        if port is None:
            return array
        return array.astype(port.dtype, copy=False).reshape(port.shape)
