"""Session: compile and load a model once, then run it on new inputs many times."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from lightnet.compiler import targets
from lightnet.errors import LightNetError
from lightnet.files import model_source
from lightnet.ir import limits, symbolic
from lightnet.runtime.borders import Borders, signature
from lightnet.runtime.context import Context
from lightnet.runtime.gc_pause import while_building


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple  # whole numbers, and the names of symbolic dims ("N")


@dataclass
class Plan:
    """The model compiled and loaded for one value of each of its symbolic dims."""

    dims: dict[str, int]
    ctx: Context
    borders: Borders


class Session:
    """A compiled, loaded model: a JSON IR (a path or a dict) or an ONNX model
    (a path ending in .onnx, imported in memory: needs the onnx package).

    `inputs` are the tensors of its `input` ops; `outputs` the tensors no op
    reads, each with the dtype and shape the model's `interface` declares (its
    tensor's otherwise); a symbolic dim of a shape is its name ("N").
    `run({name: array})` checks every input's shape and dtype (the declared
    ones, converted, or the tensor's own), runs the model and returns a copy of
    every output by name, as declared. `memory_limit`, `fold_limit` and `threads`
    are the Context's: bytes (or `512M`), None for the machine's available memory;
    elements evaluating constants before the run may touch (an ONNX model's
    import too), None for lightnet.ir.limits.DEFAULT_FOLD_LIMIT; BLAS and oneDNN
    threads while running, None to leave them be. `seed` seeds the
    random values of `create` ops (Context's seed). `target`: auto (the
    default), dnnl or cpu; `precision`: f32 (the default), bf16 or auto, the data
    type the dnnl ops compute in (see lightnet.compiler.targets, Context.compile).

    A model with symbolic dims is compiled and loaded (planned) for the values
    the first run's inputs give them, and planned again when a run's inputs give
    other values; the last `plans` plans are kept (least recently used goes
    first), each its own compiled model with its own memory. A model without
    symbolic dims is planned once, here. `ctx` is the Context of the plan that
    ran last (None until the first run of a symbolic model).
    """

    @while_building
    def __init__(self, model, target: str = "auto", datafile=None, memory_limit=None,
                 threads=None, plans: int = 4, seed: int = 0, precision: str = "f32",
                 fold_limit=None):
        if isinstance(plans, bool) or not isinstance(plans, int) or plans < 1:
            raise LightNetError(f"plans: expected a whole number >= 1, found {plans!r}")
        self.target, self.memory_limit, self.threads = target, memory_limit, threads
        self.fold_limit = limits.parse_fold_limit(fold_limit)
        self.precision = precision
        targets.resolve_precision(precision, targets.resolve(target))  # refused here
        self.seed = seed
        self.max_plans = plans
        self.doc, self.label, weights = model_source.read(model, datafile, self.fold_limit)
        # Weights before optimizing: the optimizer may fold them (see Context.compile).
        self.weights = weights if weights is not None else {}
        self.symbols = symbolic.names(self.doc)
        self.bounds = symbolic.upper_bounds(self.doc, self.label)  # refused above them
        self.lock = threading.RLock()  # one run (and plan switch) at a time
        self._plans: OrderedDict[tuple, Plan] = OrderedDict()
        # A static model is checked once: its plan's context gives the signature.
        checked = None if self.symbols else self._context({})
        inputs, outputs = signature(self.doc, self.label, memory_limit, checked)
        # What a feed may be: the declared shape, or the tensor's own ([1] for a scalar).
        self._shapes = {n: (declared, own) for n, (_, declared, own) in inputs.items()}
        self.inputs = [TensorInfo(n, dtype, declared) for n, (dtype, declared, _) in inputs.items()]
        self.outputs = [TensorInfo(n, dtype, declared)
                        for n, (dtype, declared, _) in outputs.items()]
        self.ctx: Context | None = None if self.symbols else self._plan({}, checked).ctx

    @property
    def planned(self) -> list[dict[str, int]]:
        """The dims of the plans kept, least recently used first."""
        with self.lock:
            return [dict(p.dims) for p in self._plans.values()]

    def _context(self, dims: dict[str, int]) -> Context:
        """A new context of the model, initialized with `dims`."""
        ctx = Context(memory_limit=self.memory_limit, threads=self.threads, seed=self.seed,
                      fold_limit=self.fold_limit)
        ctx.init(self.doc, dims=dims, label=self.label)
        return ctx

    def _plan(self, dims: dict[str, int], checked: Context | None = None) -> Plan:
        """The plan for `dims`: the one kept, or a new one (dropping the least
        recently used when `plans` are kept), made in `checked` when given (a
        context initialized with `dims`)."""
        key = tuple(sorted(dims.items()))
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        ctx = checked if checked is not None else self._context(dims)
        ctx.compile(self.target, weights=self.weights, precision=self.precision)
        if len(self._plans) >= self.max_plans:
            _, old = self._plans.popitem(last=False)
            old.ctx.unload()  # its arenas go now, not when the last reference does
        ctx.load()
        plan = Plan(dict(dims), ctx, Borders(ctx))
        self._plans[key] = plan
        return plan

    def _dims(self, arrays: dict[str, np.ndarray]) -> dict[str, int]:
        """The values the inputs' shapes give the symbolic dims."""
        dims: dict[str, int] = {}
        for name, (declared, own) in self._shapes.items():
            problem = symbolic.match(declared, arrays[name].shape, dims, self.bounds)
            if problem is not None and (own == declared or symbolic.match(
                    own, arrays[name].shape, dims, self.bounds) is not None):
                raise LightNetError(f"input '{name}': {problem}")
        return dims

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
        arrays = {}
        for info in self.inputs:
            value = feeds[info.name]
            arrays[info.name] = (value if isinstance(value, np.ndarray)
                                 else np.asarray(value, info.dtype))
        dims = self._dims(arrays) if self.symbols else {}
        with self.lock:  # the plan, its inputs, run and outputs: one run at a time
            plan = self._plan(dims)
            self.ctx = plan.ctx
            with plan.ctx.lock:  # also against direct use of session.ctx (docs/runtime.md)
                for name, array in arrays.items():
                    plan.ctx.arrays[name][...] = plan.borders.to_tensor(name, array)
                plan.ctx.run()
                return {o.name: plan.borders.from_tensor(o.name, plan.ctx.get_data(o.name))
                        for o in self.outputs}
