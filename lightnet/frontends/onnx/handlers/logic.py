"""Booleans and masks: Cast and CastLike, the comparisons (Equal, Less, LessOrEqual, Greater,
GreaterOrEqual), the logic ops (And, Or, Xor, Not), Where, IsNaN and IsInf, as LightNet's
`cast`, `compare`, `logic`, `logic_not`, `where`, `isnan` and `isinf` ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightnet.ir.shapes import broadcast_shape

from ..dispatch import handler
from ..dtypes import BFLOAT16, DOUBLE, FLOAT, FLOAT16, tl_dtype, type_name
from ..errors import Unsupported
from ..folding import legacy_b_shape
from ..graph import Node, Val

if TYPE_CHECKING:
    from ..converter import Converter

_COMPARE = {"Equal": "TL_EQ", "Less": "TL_LT", "LessOrEqual": "TL_LE", "Greater": "TL_GT",
            "GreaterOrEqual": "TL_GE"}
_LOGIC = {"And": "TL_AND", "Or": "TL_OR", "Xor": "TL_XOR"}


def _broadcast(*shapes) -> tuple[int, ...]:

    shape = shapes[0]
    for s in shapes[1:]:
        shape = broadcast_shape(shape, s)
    return shape


def cast_to(c: Converter, n: Node, x: Val, dtype: str, *, out=True) -> Val:
    """`x` as `dtype`: itself when it has it, else a `cast` op (the node's output, or
    with out=False a helper tensor)."""
    if x.dtype == dtype:
        if out:
            c.reshape_output(n, x, x.shape)
        return x
    kwargs = n.as_output if out else {"hint": f"{n.outputs[0]}_as_{dtype}"}
    return c.emit("cast", {"src": x}, {"dtype": dtype}, dtype, x.shape, **kwargs)


@handler("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(c: Converter, n: Node, *, to, saturate=1, round_mode="up"):
    # saturate and round_mode only concern 8-, 6- and 4-bit float targets, which are unsupported.
    _cast(c, n, to)


def _cast(c: Converter, n: Node, to: int):
    """Cast to ONNX element type `to`. A float16 or bfloat16 target of a wider float is
    refused: LightNet holds both as TL_FLOAT, and would not round the values."""
    x = c.val(n.input(0))
    source = c.info.get(n.input(0), (0, None))[0]
    if to in (FLOAT16, BFLOAT16) and source in (FLOAT, DOUBLE):
        raise Unsupported(f"a Cast from {type_name(source)} to {type_name(to)} of a computed "
                          f"tensor (LightNet holds {type_name(to)} as float32, unrounded)")
    cast_to(c, n, x, tl_dtype(to, "Cast target"))


@handler("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(c: Converter, n: Node, *, saturate=1, round_mode="up"):
    info = c.info.get(n.input(1))
    if info is None or not info[0]:
        raise Unsupported(f"target_type '{n.input(1)}' of unknown element type")
    _cast(c, n, info[0])


def _operands(c: Converter, n: Node, broadcast, axis) -> tuple[Val, Val]:
    """The two operands of a binary node, B aligned as before version 7 when asked."""
    a, b = c.val(n.input(0)), c.val(n.input(1))
    if a.dtype != b.dtype:
        raise Unsupported(f"operands of dtypes {a.dtype} and {b.dtype}")
    return a, c.reshape(b, legacy_b_shape(n.version, a.rank, b.shape, broadcast, axis))


@handler("Equal", 1, 7, 11, 13, 19)
@handler("Less", 1, 7, 9, 13)
@handler("Greater", 1, 7, 9, 13)
@handler("LessOrEqual", 12, 16)
@handler("GreaterOrEqual", 12, 16)
def compare(c: Converter, n: Node, *, broadcast=0, axis=None):
    a, b = _operands(c, n, broadcast, axis)
    c.emit("compare", {"src1": a, "src2": b}, {"cmp_op": _COMPARE[n.op_type]}, "TL_BOOL",
           _broadcast(a.shape, b.shape), **n.as_output)


@handler("And", 1, 7)
@handler("Or", 1, 7)
@handler("Xor", 1, 7)
def logic(c: Converter, n: Node, *, broadcast=0, axis=None):
    a, b = _operands(c, n, broadcast, axis)
    if a.dtype != "TL_BOOL":
        raise Unsupported(f"operands of dtype {a.dtype} (only bool)")
    c.emit("logic", {"src1": a, "src2": b}, {"logic_op": _LOGIC[n.op_type]}, "TL_BOOL",
           _broadcast(a.shape, b.shape), **n.as_output)


@handler("Not", 1)
def logic_not(c: Converter, n: Node):
    x = c.val(n.input(0))
    if x.dtype != "TL_BOOL":
        raise Unsupported(f"an input of dtype {x.dtype} (only bool)")
    c.emit("logic_not", {"src": x}, {}, "TL_BOOL", x.shape, **n.as_output)


@handler("Where", 9, 16)
def where(c: Converter, n: Node):
    cond, a, b = (c.val(n.input(i)) for i in range(3))
    if cond.dtype != "TL_BOOL":
        raise Unsupported(f"a condition of dtype {cond.dtype} (only bool)")
    if a.dtype != b.dtype:
        raise Unsupported(f"X and Y of dtypes {a.dtype} and {b.dtype}")
    c.emit("where", {"cond": cond, "src1": a, "src2": b}, {}, a.dtype,
           _broadcast(cond.shape, a.shape, b.shape), **n.as_output)


@handler("IsNaN", 9, 13, 20)
def isnan(c: Converter, n: Node):
    x = c.val(n.input(0))
    x.require_float("IsNaN input")
    c.emit("isnan", {"src": x}, {}, "TL_BOOL", x.shape, **n.as_output)


@handler("IsInf", 10, 20)
def isinf(c: Converter, n: Node, *, detect_positive=1, detect_negative=1):
    x = c.val(n.input(0))
    x.require_float("IsInf input")
    c.emit("isinf", {"src": x}, {"detect_positive": bool(detect_positive),
                                 "detect_negative": bool(detect_negative)},
           "TL_BOOL", x.shape, **n.as_output)
