"""LightNet: a description-driven neural-network inference engine.

    ctx = lightnet.Context()
    ctx.init("model.json")
    ctx.compile("cpu", weights="weights.npz")   # weights known: rules fold them
    ctx.load()
    ctx.set_data("input", array)
    ctx.run()
    result = ctx.get_data("output")

or, for a model with `input` ops: `lightnet.Session("model.json").run({"x": x})`.
A model built in Python with `lightnet.nn` (docs/builder.md) is taken the same
way: `lightnet.Session(nn.Model(outputs=y))`. `lightnet.quantize("model.onnx",
"samples.npz", "model.int8.onnx")` makes an int8 model (docs/quantization.md).
"""

from lightnet.errors import CheckError, LightNetError, LightNetWarning
from lightnet.ir.tensor import DType
from lightnet.runtime.context import Context
from lightnet.runtime.session import Session, TensorInfo
from lightnet.quantization import quantize

__all__ = ["CheckError", "Context", "DType", "LightNetError", "LightNetWarning", "Session",
           "TensorInfo", "quantize"]
