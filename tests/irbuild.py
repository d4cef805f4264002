"""Build IR documents in Python, for tests.

    m = ModelBuilder()
    x = m.input("data", [1, 3, 224, 224])
    y = m.relu(m.conv(x, 3, 64, 3, pad=1))
    m.to_dict()          # the IR document

Weights are `create` ops with uniform random values (seeded by tensor name),
or `from_file` ones to be filled from a weight file. The ops of a document
written by hand:

    {"ops": [create(), slice_(), op("print1", "print", {"src": "tensor2"}, msg="y")]}
"""

from __future__ import annotations

import math

import numpy as np

from lightnet import DType


def op(name: str, optype: str, ins=(), outs=(), **params) -> dict:
    """One op of an IR document. `ins` and `outs` map arg names to tensor names (a
    dict or pairs); `params` are its params, as written."""
    return {
        "name": name,
        "optype": optype,
        "tensors_in": [{"arg_name": a, "name": t} for a, t in dict(ins).items()],
        "tensors_out": [{"arg_name": a, "name": t} for a, t in dict(outs).items()],
        "params": [{"arg_name": k, "value": v} for k, v in params.items()],
    }


def create(name="create1", out="tensor1", **params) -> dict:
    """examples/example.json's first op: a create of TL_FLOAT [2, 4] (`params` change
    or add to that)."""
    return op(name, "create", outs={"dst": out}, **{"dtype": "TL_FLOAT", "dims": [2, 4], **params})


def slice_(name="slice1", src="tensor1", dst="tensor2", tensors_in=None, **params) -> dict:
    """examples/example.json's second op: columns 1 to 3 of tensor1. A param given as
    `...` is left out; `tensors_in` replaces the op's list of inputs as written."""
    params = {"axis": 1, "start": 1, "len": 3, **params}
    doc = op(name, "slice", {"src": src}, {"dst": dst},
             **{k: v for k, v in params.items() if v is not ...})
    if tensors_in is not None:
        doc["tensors_in"] = tensors_in
    return doc


def json_value(v):
    """`v` as a JSON document holds it: tuples as lists, numpy scalars as numbers."""
    if isinstance(v, (tuple, list)):
        return [json_value(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def input_op(name: str, array, dtype: str | None = None) -> dict:
    """An input op `input_NAME` of tensor NAME, with `array`'s shape and dtype (or the
    dtype named `dtype`)."""
    return op(f"input_{name}", "input", outs={"dst": name},
              dtype=dtype or DType.from_numpy(array.dtype).name, dims=list(array.shape))


def create_op(name: str, array, dtype: str | None = None) -> dict:
    """A create op `create_NAME` of tensor NAME holding `array`."""
    return op(f"create_{name}", "create", outs={"dst": name},
              dtype=dtype or DType.from_numpy(array.dtype).name, dims=list(array.shape),
              data=array.reshape(-1).tolist())


def op_model(optype: str, inputs: dict, params=None, outs=("dst",), static=False, dtypes=None,
             extra=()) -> dict:
    """A model of one op `op` of `optype`: it reads `inputs` (arg name -> array, each
    tensor named like its arg) and writes tensors out_ARG for its `outs`; then come the
    `extra` ops. The inputs are input ops, or create ops holding the data when `static`;
    `dtypes` (arg -> dtype name) overrides an input's dtype, so that a check of shapes
    and dtypes needs no data of that dtype."""
    make = create_op if static else input_op
    ops = [make(arg, np.asarray(a), (dtypes or {}).get(arg)) for arg, a in inputs.items()]
    ops.append(op("op", optype, {arg: arg for arg in inputs}, {o: f"out_{o}" for o in outs},
                  **{k: json_value(v) for k, v in (params or {}).items()}))
    return {"ops": [*ops, *extra]}


class ModelBuilder:
    def __init__(self):
        self.ops: list[dict] = []
        self._counts: dict[str, int] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}

    def _name(self, prefix: str) -> str:
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        return f"{prefix}{self._counts[prefix]}"

    def op(self, optype: str, ins: dict, outs=("dst",), name: str | None = None, **params):
        """Add an op; returns its output tensor name (or a tuple of them)."""
        name = name or self._name(optype)
        out_names = [f"{name}_{arg}" if len(outs) > 1 else name for arg in outs]
        self.ops.append(op(name, optype, ins, zip(outs, out_names), **params))
        return out_names[0] if len(outs) == 1 else tuple(out_names)

    def input(self, name: str, dims, dtype: str = "TL_FLOAT") -> str:
        self.shapes[name] = tuple(dims)
        return self.op("input", {}, name=name, dims=list(dims), dtype=dtype)

    def weight(self, prefix: str, dims, low: float = -1.0, high: float = 1.0,
               from_file: bool = False) -> str:
        name = self._name(prefix)
        self.shapes[name] = tuple(dims)
        params = {"dtype": "TL_FLOAT", "dims": list(dims), "from_file": from_file}
        if not from_file:
            params["ran"] = [low, high]
        return self.op("create", {}, name=name, **params)

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0,
             group: int = 1, scale: float | None = None) -> str:
        """A conv2d with He-scaled random weights (keeps activations in range)."""
        bound = scale if scale is not None else math.sqrt(6.0 / (cin // group * k * k))
        w = self.weight("w", [cout, cin // group, k, k], -bound, bound)
        b = self.weight("b", [cout], -0.1, 0.1)
        return self.op("conv2d", {"src": x, "weight": w, "bias": b}, group=group, size=[k, k],
                       stride=[stride, stride], padding=[pad] * 4)

    def batchnorm(self, x: str, channels: int) -> str:
        return self.op("batchnorm", {
            "src": x,
            "scale": self.weight("bn_scale", [channels], 0.5, 1.5),
            "offset": self.weight("bn_offset", [channels], -0.2, 0.2),
            "mean": self.weight("bn_mean", [channels], -0.2, 0.2),
            "var": self.weight("bn_var", [channels], 0.5, 1.5),
        }, epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.op("relu", {"src": x})

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0) -> str:
        return self.op("maxpool2d", {"src": x}, size=[k, k], stride=[stride, stride],
                       padding=[pad] * 4)

    def add(self, a: str, b: str) -> str:
        return self.op("elew", {"src1": a, "src2": b}, elew_op="TL_SUM")

    def concat(self, xs, axis: int = 1) -> str:
        return self.op("concat", {f"src{i}": x for i, x in enumerate(xs, 1)}, axis=axis)

    def to_dict(self) -> dict:
        return {"ops": list(self.ops)}


def squeezenet(m: ModelBuilder, x: str, classes: int = 1000, width: float = 1.0) -> str:
    """SqueezeNet 1.1: a conv stem, eight fire modules, a 1x1 conv classifier."""

    def fire(x, cin, squeeze, expand):
        s = m.relu(m.conv(x, cin, squeeze, 1))
        e1 = m.relu(m.conv(s, squeeze, expand, 1))
        e3 = m.relu(m.conv(s, squeeze, expand, 3, pad=1))
        return m.concat([e1, e3]), 2 * expand

    def w(c):
        return max(1, int(c * width))

    y = m.relu(m.conv(x, 3, w(64), 3, stride=2))
    y = m.maxpool(y, 3, 2)
    c = w(64)
    for i, (sq, ex) in enumerate([(16, 64), (16, 64), (32, 128), (32, 128),
                                  (48, 192), (48, 192), (64, 256), (64, 256)]):
        y, c = fire(y, c, w(sq), w(ex))
        if i in (1, 3):
            y = m.maxpool(y, 3, 2)
    y = m.relu(m.conv(y, c, classes, 1))
    return m.op("global_avgpool2d", {"src": y})


def conv_bn_relu(rng, from_file=False, shared_weight=False):
    """x -> conv(w1, b1) -> batchnorm -> relu, a model whose batchnorm folds into the
    conv when compiled with its weights; with `shared_weight` a second conv reads w1
    too. Returns the model, feeds and (from_file) the weights, drawn from `rng`."""
    m = ModelBuilder()
    x = m.input("x", (1, 3, 7, 7))
    names = {}

    def weight(prefix, dims, low, high):
        name = m.weight(prefix, dims, low, high, from_file=from_file)
        names[name] = rng.uniform(low, high, dims).astype(np.float32)
        return name

    w = weight("w", [4, 3, 3, 3], -0.5, 0.5)
    y = m.op("conv2d", {"src": x, "weight": w, "bias": weight("b", [4], -0.1, 0.1)},
             size=[3, 3], padding=[1, 1, 1, 1])
    y = m.op("batchnorm", {"src": y, "scale": weight("s", [4], 0.5, 1.5),
                           "offset": weight("o", [4], -0.2, 0.2),
                           "mean": weight("mu", [4], -0.2, 0.2),
                           "var": weight("var", [4], 0.5, 1.5)}, epsilon=1e-3)
    m.relu(y)
    if shared_weight:
        m.op("conv2d", {"src": x, "weight": w, "bias": weight("b", [4], -0.1, 0.1)},
             size=[3, 3])
    feeds = {"x": rng.standard_normal((1, 3, 7, 7)).astype(np.float32)}
    return m.to_dict(), feeds, (names if from_file else {})
