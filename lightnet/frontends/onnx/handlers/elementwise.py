"""Element-wise arithmetic: binary and variadic ops as LightNet `elew` ops; Neg,
Reciprocal, Sqrt, Exp and Abs as `unary` ops; Expand as `expand`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lightnet.ir.shapes import broadcast_shape

from ..dispatch import handler
from ..dtypes import NP_OF_TL
from ..errors import Unsupported
from ..folding import legacy_b_shape
from ..graph import FLOAT_TL, Node, Val, lnshape

if TYPE_CHECKING:
    from ..converter import Converter

_ELEW = {"Add": "TL_SUM", "Sub": "TL_SUB", "Mul": "TL_MUL", "Div": "TL_DIV", "Pow": "TL_POW",
         "Max": "TL_MAX", "Min": "TL_MIN", "Sum": "TL_SUM", "Mean": "TL_SUM"}


def elew(c: Converter, n: Node, a: Val, b: Val, op: str, *, out=True) -> Val:
    """`a op b` with numpy broadcasting: the node's output, or (out=False) a helper tensor."""
    if a.dtype != b.dtype:
        raise Unsupported(f"operands of dtypes {a.dtype} and {b.dtype}")
    if a.dtype == "TL_BOOL":
        raise Unsupported("bool operands")

    shape = broadcast_shape(a.shape, b.shape) if a.shape and b.shape else (a.shape or b.shape)
    kwargs = {"out": n.outputs[0], "hint": n.name or n.outputs[0]} if out else {
        "hint": f"{n.outputs[0]}_part"}
    return c.emit("elew", {"src1": a, "src2": b}, {"elew_op": op}, a.dtype, shape, **kwargs)


def unary(c: Converter, n: Node, x: Val, func: str, *, out=True) -> Val:
    """func(x) (a `unary` op): the node's output, or (out=False) a helper tensor."""
    kwargs = {"out": n.outputs[0], "hint": n.name or n.outputs[0]} if out else {
        "hint": f"{n.outputs[0]}_{func}"}
    return c.emit("unary", {"src": x}, {"func": func}, x.dtype, x.shape, **kwargs)


def exp(c: Converter, n: Node, x: Val, *, out: bool) -> Val:
    return unary(c, n, x, "exp", out=out)


@handler("Add", 1, 6, 7, 13, 14)
@handler("Sub", 1, 6, 7, 13, 14)
@handler("Mul", 1, 6, 7, 13, 14)
@handler("Div", 1, 6, 7, 13, 14)
@handler("Pow", 1, 7, 12, 13, 15)
def binary(c: Converter, n: Node, *, broadcast=0, axis=None, consumed_inputs=None):
    a = c.val(n.input(0))
    if n.op_type == "Pow" and c.is_const(n.input(1)):
        e = c.const(n.input(1))
        if a.dtype not in FLOAT_TL and np.any(e != np.trunc(e)):
            raise Unsupported(f"a fractional exponent for a {a.dtype} base")
        if e.dtype != NP_OF_TL[a.dtype]:
            name = c.fresh(f"{n.input(1)}_as_{a.dtype}")
            c.consts[name] = e.astype(NP_OF_TL[a.dtype])
            b = c.materialize(name)
        else:
            b = c.val(n.input(1))
    else:
        b = c.val(n.input(1))
    b = c.reshape(b, legacy_b_shape(n.version, a.rank, b.shape, broadcast, axis))
    elew(c, n, a, b, _ELEW[n.op_type])


@handler("Sum", 1, 6, 8, 13)
@handler("Max", 1, 6, 8, 12, 13)
@handler("Min", 1, 6, 8, 12, 13)
@handler("Mean", 1, 6, 8, 13)
def variadic(c: Converter, n: Node, *, consumed_inputs=None):
    xs = [c.val(x) for x in n.inputs if x]
    op = _ELEW[n.op_type]
    if len(xs) == 1:
        c.reshape_output(n, xs[0], xs[0].shape)
        return
    acc = xs[0]
    for i, x in enumerate(xs[1:]):
        last = i == len(xs) - 2 and n.op_type != "Mean"
        acc = elew(c, n, acc, x, op, out=last)
    if n.op_type == "Mean":
        if acc.dtype not in FLOAT_TL:
            raise Unsupported("Mean of integers")
        k = c.scalar(1.0 / len(xs), acc.dtype, f"{n.outputs[0]}_recip")
        elew(c, n, acc, k, "TL_MUL")


@handler("Neg", 1, 6, 13)
def neg(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    if x.dtype.startswith("TL_UINT") or x.dtype == "TL_BOOL":
        raise Unsupported(f"{x.dtype} input")
    unary(c, n, x, "neg")


@handler("Reciprocal", 1, 6, 13)
def reciprocal(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    x.require_float("Reciprocal input")
    unary(c, n, x, "reciprocal")


@handler("Sqrt", 1, 6, 13)
def sqrt(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    x.require_float("Sqrt input")
    unary(c, n, x, "sqrt")


@handler("Abs", 1, 6, 13)
def abs_(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    if x.dtype.startswith("TL_UINT"):
        c.reshape_output(n, x, x.shape)
        return
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    unary(c, n, x, "abs")


@handler("Exp", 1, 6, 13)
def exp_(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    x.require_float("Exp input")
    exp(c, n, x, out=True)


@handler("Expand", 8, 13)
def expand(c: Converter, n: Node):

    x = c.val(n.input(0))
    shape = broadcast_shape(x.shape, [int(d) for d in c.const(n.input(1), "shape").reshape(-1)])
    if shape == x.shape:
        c.reshape_output(n, x, shape)
        return
    c.emit("expand", {"src": x}, {"dims": list(lnshape(shape))}, x.dtype, shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])
