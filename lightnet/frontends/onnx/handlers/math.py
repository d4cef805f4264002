"""Element-wise math: functions of one input mapped to LightNet's `unary` (Sign, Floor,
Ceil, Round, Log, the trigonometric and hyperbolic functions and their inverses, and the
activations Softplus, Softsign, Mish, Celu, ThresholdedRelu and Shrink), and Mod."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightnet.ir.shapes import broadcast_shape

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node
from .elementwise import unary

if TYPE_CHECKING:
    from ..converter import Converter


def _float_unary(func: str):
    def handle(c: Converter, n: Node, *, consumed_inputs=None):
        x = c.val(n.input(0))
        x.require_float(f"{n.op_type} input")
        unary(c, n, x, func)
    return handle


for _op, _func, _versions in [
        ("Floor", "floor", (1, 6, 13)), ("Ceil", "ceil", (1, 6, 13)), ("Round", "round", (11, 22)),
        ("Log", "log", (1, 6, 13)), ("Sin", "sin", (7, 22)), ("Cos", "cos", (7, 22)),
        ("Tan", "tan", (7, 22)), ("Asin", "asin", (7, 22)), ("Acos", "acos", (7, 22)),
        ("Atan", "atan", (7, 22)), ("Sinh", "sinh", (9, 22)), ("Cosh", "cosh", (9, 22)),
        ("Asinh", "asinh", (9, 22)), ("Acosh", "acosh", (9, 22)), ("Atanh", "atanh", (9, 22)),
        ("Softplus", "softplus", (1, 22)), ("Softsign", "softsign", (1, 22)),
        ("Mish", "mish", (18, 22))]:
    handler(_op, *_versions)(_float_unary(_func))


@handler("Sign", 9, 13)
def sign(c: Converter, n: Node):
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    unary(c, n, x, "sign")


def _alpha_unary(c: Converter, n: Node, func: str, alpha: float, beta: float = 0.0):
    x = c.val(n.input(0))
    x.require_float(f"{n.op_type} input")
    c.emit("unary", {"src": x}, {"func": func, "alpha": float(alpha), "beta": float(beta)},
           x.dtype, x.shape, out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("Celu", 12, 28)
def celu(c: Converter, n: Node, *, alpha=1.0):
    if alpha == 0:
        raise Unsupported("alpha 0")
    _alpha_unary(c, n, "celu", alpha)


@handler("ThresholdedRelu", 10, 22)
def thresholded_relu(c: Converter, n: Node, *, alpha=1.0):
    _alpha_unary(c, n, "thresholded_relu", alpha)


@handler("Shrink", 9)
def shrink(c: Converter, n: Node, *, bias=0.0, lambd=0.5):
    _alpha_unary(c, n, "shrink", lambd, bias)


@handler("Mod", 10, 13, 28)
def mod(c: Converter, n: Node, *, fmod=0):
    """fmod 0 is the floor remainder for floats too (Mod-28's rule; before, ONNX required
    fmod 1 for floats)."""
    a, b = c.val(n.input(0)), c.val(n.input(1))
    if a.dtype != b.dtype:
        raise Unsupported(f"operands of dtypes {a.dtype} and {b.dtype}")
    if a.dtype == "TL_BOOL":
        raise Unsupported("bool operands")

    c.emit("mod", {"src1": a, "src2": b}, {"fmod": bool(fmod)}, a.dtype,
           broadcast_shape(a.shape, b.shape), out=n.outputs[0], hint=n.name or n.outputs[0])
