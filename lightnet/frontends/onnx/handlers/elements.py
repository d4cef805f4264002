"""Ops that move elements by position: GatherElements, ScatterND, CumSum, Trilu (LightNet's
`gather_elements`, `scatter_nd`, `cumsum`, `trilu`), and ConstantOfShape, which
reaches mapping only when the folding could not take it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


def _out(n: Node) -> dict:
    return {"out": n.outputs[0], "hint": n.name or n.outputs[0]}


def _const_int(c: Converter, n: Node, i: int, what: str) -> int:
    value = np.asarray(c.const(n.input(i), what)).reshape(-1)
    if value.size != 1:
        raise Unsupported(f"{what} of {value.size} values (expected one)")
    return int(value[0])


@handler("GatherElements", 11, 13)
def gather_elements(c: Converter, n: Node, *, axis=0):
    x, idx = c.val(n.input(0)), c.val(n.input(1))
    axis = normalize_axes([axis], x.rank)[0]
    if idx.dtype not in ("TL_INT32", "TL_INT16", "TL_INT8", "TL_UINT32", "TL_UINT16",
                         "TL_UINT8"):
        raise Unsupported(f"indices of dtype {idx.dtype}")
    c.emit("gather_elements", {"src": x, "indices": idx}, {"axis": axis}, x.dtype, idx.shape,
           **_out(n))


@handler("ScatterND", 11, 13, 16, 18)
def scatter_nd(c: Converter, n: Node, *, reduction="none"):
    data, idx, updates = (c.val(n.input(i)) for i in range(3))
    if data.dtype != updates.dtype:
        raise Unsupported(f"data and updates of dtypes {data.dtype} and {updates.dtype}")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction '{reduction}'")
    c.emit("scatter_nd", {"data": data, "indices": idx, "updates": updates},
           {"reduction": reduction}, data.dtype, data.shape, **_out(n))


@handler("CumSum", 11, 14)
def cumsum(c: Converter, n: Node, *, exclusive=0, reverse=0):
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("a bool input")
    axis = normalize_axes([_const_int(c, n, 1, "axis")], x.rank)[0]
    c.emit("cumsum", {"src": x}, {"axis": axis, "exclusive": bool(exclusive),
                                  "reverse": bool(reverse)}, x.dtype, x.shape, **_out(n))


@handler("Trilu", 14)
def trilu(c: Converter, n: Node, *, upper=1):
    x = c.val(n.input(0))
    k = _const_int(c, n, 1, "k") if n.has_input(1) else 0
    if x.rank < 2:
        raise Unsupported(f"a rank-{x.rank} input (Trilu needs at least 2 dims)")
    c.emit("trilu", {"src": x}, {"upper": bool(upper), "k": k}, x.dtype, x.shape, **_out(n))


@handler("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(c: Converter, n: Node, *, value=None):
    """Reached only when the folding could not take the node: its shape is computed from
    data (unsupported, naming it), or is no shape."""
    shape = np.asarray(c.const(n.input(0), "shape")).reshape(-1)
    raise Unsupported(f"shape {shape.tolist()} (expected dims >= 0)")
