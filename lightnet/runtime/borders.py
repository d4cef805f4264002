"""Session's borders: a model's inputs and outputs as its producer declares them (the
IR's `interface`: int64, float16, scalars) against what its tensors hold (TL_INT32,
TL_FLOAT, [1]), and the conversion between the two."""

from __future__ import annotations

import math

import numpy as np

from lightnet.errors import LightNetError
from lightnet.ir import symbolic
from lightnet.runtime.context import Context


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


def signature(doc, label: str, memory_limit=None, checked: Context | None = None):
    """(inputs, outputs) of a model with or without symbolic dims: {name: (dtype,
    declared shape, the tensor's own shape)} in the model's order, shapes with
    the names of the dims they follow (see symbolic.shapes). The declared shape is the
    interface's (a scalar's [], say), else the tensor's. `checked`: a Context the
    model (without symbolic dims) is initialized in already, read instead of
    checking the model once more."""
    def check(dims):
        ctx = Context(memory_limit=memory_limit)
        try:
            ctx.init(doc, dims=dims, label=label)
        except LightNetError as e:
            if not symbols:
                raise
            values = ", ".join(f"{k} = {v}" for k, v in dims.items())
            raise LightNetError(f"{e} (checked with {values}: a model with symbolic dims "
                                "must pass its checks for any value of each)") from None
        return ctx

    symbols = symbolic.names(doc)
    own = symbolic.shapes(check, symbols) if symbols else None
    if checked is not None and not symbols:
        ctx = checked
    else:
        ctx = check({s: symbolic.PROBES[i] for i, s in enumerate(symbols)})
    if own is None:
        own = {n: ctx.tensors[n].shape for n in (*ctx.inputs, *ctx.outputs)}
    borders = Borders(ctx)  # checks the interface against the tensors
    declared = {}
    interface = doc.get("interface") if isinstance(doc, dict) else None
    for kind in ("inputs", "outputs"):
        for port in (interface or {}).get(kind, []):
            declared[port["name"]] = tuple(port["shape"])
    result = tuple({n: (borders.declared(n)[0], declared.get(n, own[n]), own[n]) for n in names_}
                   for names_ in (ctx.inputs, ctx.outputs))
    if ctx is not checked:
        ctx.cleanup()
    return result
