"""Reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin over any axes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


@handler("ReduceMean", 1, 11, 13, 18)
@handler("ReduceSum", 1, 11, 13)
@handler("ReduceMax", 1, 11, 12, 13, 18, 20)
@handler("ReduceMin", 1, 11, 12, 13, 18, 20)
def reduce(c: Converter, n: Node, *, axes=None, keepdims=1, noop_with_empty_axes=0):
    """One reduce op over the axes (attribute, or input from ReduceSum-13 and
    version 18; none given: all of them)."""
    from lightnet.archs.cpu.kernels import reduce_axes_shape

    x = c.val(n.input(0))
    axes_input = (n.op_type == "ReduceSum" and n.version >= 13) or n.version >= 18
    if axes_input and n.has_input(1):
        axes = c.const(n.input(1), "axes").reshape(-1).tolist()
    if not axes:
        if noop_with_empty_axes:
            c.reshape_output(n, x, x.shape)
            return
        axes = list(range(x.rank))
    axes = sorted(set(normalize_axes(axes, x.rank)))
    func = n.op_type[6:].lower()
    if func == "mean":
        x.require_float(f"{n.op_type} input")
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    y = c.emit("reduce", {"src": x}, {"func": func, "axes": axes, "keepdims": bool(keepdims)},
               x.dtype, reduce_axes_shape(x.shape, axes, bool(keepdims)),
               hint=n.name or n.outputs[0])
    c.reshape_output(n, y, c.out_shape(n))
