"""LightNet: a description-driven neural-network inference engine.

    ctx = lightnet.Context()
    ctx.init("model.json")
    ctx.compile("cpu")
    ctx.load("weights.npz")
    ctx.set_data("input", array)
    ctx.run()
    result = ctx.get_data("output")
"""

from lightnet.context import Context
from lightnet.errors import CheckError, LightNetError
from lightnet.tensor import DType

__all__ = ["CheckError", "Context", "DType", "LightNetError"]
