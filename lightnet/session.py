"""Session: compile and load a model once, then run it on new inputs many times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightnet import model_file
from lightnet.borders import Borders
from lightnet.context import Context
from lightnet.errors import LightNetError


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


class Session:
    """A compiled, loaded model: a JSON IR (a path or a dict) or an ONNX model
    (a path ending in .onnx, imported in memory: needs the onnx package).

    `inputs` are the tensors of its `input` ops; `outputs` the tensors no op
    reads, each with the dtype and shape the model's `interface` declares (its
    tensor's otherwise). `run({name: array})` checks every input's shape and
    dtype (the declared ones, converted, or the tensor's own), runs the model
    and returns a copy of every output by name, as declared. `memory_limit` and
    `threads` are the Context's: bytes (or `512M`), None for the machine's
    available memory; BLAS and oneDNN threads while running, None to leave them
    be. `target`: auto (the default), dnnl or cpu (see lightnet.targets).
    """

    def __init__(self, model, target: str = "auto", datafile=None, memory_limit=None,
                 threads=None):
        self.ctx = Context(memory_limit=memory_limit, threads=threads)
        weights = model_file.init(self.ctx, model, datafile)  # an ONNX model brings its own
        # Weights before optimizing: the optimizer may fold them (see Context.compile).
        self.ctx.compile(target, weights=weights if weights is not None else {})
        self.ctx.load()
        self.borders = Borders(self.ctx)
        self.inputs = [TensorInfo(n, *self.borders.declared(n)) for n in self.ctx.inputs]
        self.outputs = [TensorInfo(n, *self.borders.declared(n)) for n in self.ctx.outputs]

    def run(self, feeds: dict | None = None) -> dict[str, np.ndarray]:
        feeds = dict(feeds or {})
        names = [i.name for i in self.inputs]
        for name in feeds:
            if name not in names:
                raise LightNetError(f"'{name}' is not an input of the model "
                                    f"(inputs: {', '.join(names) or 'none'})")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise LightNetError(f"inputs {missing} are not given")
        for info in self.inputs:
            value = feeds[info.name]
            array = value if isinstance(value, np.ndarray) else np.asarray(value, info.dtype)
            feeds[info.name] = self.borders.to_tensor(info.name, array)
        with self.ctx.lock:  # inputs, run and outputs: one run at a time (docs/runtime.md)
            for name, array in feeds.items():
                self.ctx.arrays[name][...] = array
            self.ctx.run()
            outputs = {o.name: self.ctx.get_data(o.name) for o in self.outputs}
        return {name: self.borders.from_tensor(name, array) for name, array in outputs.items()}
