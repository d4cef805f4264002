"""Reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin over any axes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node
from .elementwise import elew

if TYPE_CHECKING:
    from ..converter import Converter


@handler("ReduceMean", 1, 11, 13, 18)
@handler("ReduceSum", 1, 11, 13)
@handler("ReduceMax", 1, 11, 12, 13, 18, 20)
@handler("ReduceMin", 1, 11, 12, 13, 18, 20)
def reduce(c: Converter, n: Node, *, axes=None, keepdims=1, noop_with_empty_axes=0):
    """The kept axes are moved first and the reduced ones last, flattened to
    [1, kept, reduced, 1] and reduced by global average / max pooling."""
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
    kind = n.op_type[6:].lower()
    if kind in ("mean", "sum"):
        x.require_float(f"{n.op_type} input")
    if kind == "min" and x.dtype.startswith("TL_UINT"):
        raise Unsupported(f"unsigned input {x.dtype}")
    kept = [i for i in range(x.rank) if i not in axes]
    perm = kept + axes
    y = x
    if perm != sorted(perm):
        y = c.emit("transpose", {"src": x}, {"axes": perm}, x.dtype,
                   tuple(x.shape[p] for p in perm), hint=f"{n.outputs[0]}_transpose")
    k = math.prod(x.shape[i] for i in kept)
    r = math.prod(x.shape[i] for i in axes)
    y = c.reshape(y, (1, k, r, 1))
    if kind == "min":
        y = elew(c, n, y, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL", out=False)
    optype = "global_avgpool2d" if kind in ("mean", "sum") else "global_maxpool2d"
    y = c.emit(optype, {"src": y}, {}, x.dtype, (1, k, 1, 1), hint=f"{n.outputs[0]}_pool")
    if kind == "sum" and r != 1:
        y = elew(c, n, y, c.scalar(r, x.dtype, f"{n.outputs[0]}_count"), "TL_MUL", out=False)
    if kind == "min":
        y = elew(c, n, y, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL", out=False)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keepdims else tuple(
        d for i, d in enumerate(x.shape) if i not in axes)
    c.reshape(y, shape, out=n.outputs[0], hint=n.name or n.outputs[0])
