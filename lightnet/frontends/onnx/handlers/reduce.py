"""Reductions over any axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp; and the index of
the extreme along one axis: ArgMax, ArgMin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightnet.ir.shapes import reduce_axes_shape

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


# The reduce op's func of each ONNX reduction.
FUNCS = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
         "ReduceProd": "prod", "ReduceSumSquare": "sum_square", "ReduceL1": "l1",
         "ReduceL2": "l2", "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp"}


@handler("ReduceMean", 1, 11, 13, 18)
@handler("ReduceSum", 1, 11, 13)
@handler("ReduceMax", 1, 11, 12, 13, 18, 20)
@handler("ReduceMin", 1, 11, 12, 13, 18, 20)
@handler("ReduceProd", 1, 11, 13, 18)
@handler("ReduceSumSquare", 1, 11, 13, 18)
@handler("ReduceL1", 1, 11, 13, 18)
@handler("ReduceL2", 1, 11, 13, 18)
@handler("ReduceLogSum", 1, 11, 13, 18, 28)
@handler("ReduceLogSumExp", 1, 11, 13, 18, 28)
def reduce(c: Converter, n: Node, *, axes=None, keepdims=1, noop_with_empty_axes=0):
    """One reduce op over the axes (attribute, or input from ReduceSum-13 and
    version 18; none given: all of them, or with noop_with_empty_axes none: each
    element's own term, |x| or x * x or log x, or the input itself)."""
    from lightnet.archs.cpu.kernels.reduce import FLOAT_REDUCE_FUNCS

    x = c.val(n.input(0))
    axes_input = (n.op_type == "ReduceSum" and n.version >= 13) or n.version >= 18
    if axes_input and n.has_input(1):
        axes = c.const(n.input(1), "axes").reshape(-1).tolist()
    if not axes and not noop_with_empty_axes:
        axes = list(range(x.rank))
    axes = sorted(set(normalize_axes(axes or [], x.rank)))
    func = FUNCS[n.op_type]
    if func in FLOAT_REDUCE_FUNCS:
        x.require_float(f"{n.op_type} input")
    if not axes and func not in ("sum_square", "l1", "l2", "log_sum"):
        c.reshape_output(n, x, x.shape)  # nothing reduced: the input itself
        return
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    y = c.emit("reduce", {"src": x}, {"func": func, "axes": axes, "keepdims": bool(keepdims)},
               x.dtype, reduce_axes_shape(x.shape, axes, bool(keepdims)),
               hint=n.name or n.outputs[0])
    c.reshape_output(n, y, c.out_shape(n))


@handler("ArgMax", 1, 11, 12, 13)
@handler("ArgMin", 1, 11, 12, 13)
def arg_reduce(c: Converter, n: Node, *, axis=0, keepdims=1, select_last_index=0):
    """One arg_reduce op; its int32 indices are the int64 ones ONNX declares."""

    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    axis = normalize_axes([axis], x.rank)[0]
    y = c.emit("arg_reduce", {"src": x},
               {"func": n.op_type[3:].lower(), "axis": axis, "keepdims": bool(keepdims),
                "select_last_index": bool(select_last_index)},
               "TL_INT32", reduce_axes_shape(x.shape, [axis], bool(keepdims)),
               hint=n.name or n.outputs[0])
    c.reshape_output(n, y, c.out_shape(n))
