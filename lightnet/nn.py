"""Build a model in Python ([docs/builder.md](../docs/builder.md)):

    from lightnet import nn
    x = nn.input("x", [1, 3, 32, 32])
    w = nn.constant(weights)                       # a numpy array: a weight of the model
    y = nn.relu(nn.conv2d(x, w, b, size=[3, 3], padding=[1, 1, 1, 1]))
    model = nn.Model(outputs=y)                    # Session(model), Context.init(model)

One function per abstract op, generated from its description (lightnet/auto/nn.py:
its inputs positional, its params keyword-only with the description's defaults),
plus `input`, `constant` and `Model` (lightnet/ir/builder.py).
"""

from lightnet.auto.nn import *  # noqa: F403 - the ops' builder functions
from lightnet.auto.nn import __all__ as _op_builders
from lightnet.ir.builder import Action, Model, Tensor, constant, input

__all__ = ["Action", "Model", "Tensor", "constant", "input", *_op_builders]
