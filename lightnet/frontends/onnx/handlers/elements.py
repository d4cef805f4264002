"""Ops that move elements by position or pick them by index: GatherElements, GatherND,
ScatterND, ScatterElements (and Scatter, its old name), TopK, CumSum, Trilu (LightNet's
ops of those names), and ConstantOfShape, which reaches mapping only when the folding
could not take it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


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
           **n.as_output)


@handler("ScatterND", 11, 13, 16, 18)
def scatter_nd(c: Converter, n: Node, *, reduction="none"):
    data, idx, updates = (c.val(n.input(i)) for i in range(3))
    if data.dtype != updates.dtype:
        raise Unsupported(f"data and updates of dtypes {data.dtype} and {updates.dtype}")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction '{reduction}'")
    c.emit("scatter_nd", {"data": data, "indices": idx, "updates": updates},
           {"reduction": reduction}, data.dtype, data.shape, **n.as_output)


@handler("CumSum", 11, 14)
def cumsum(c: Converter, n: Node, *, exclusive=0, reverse=0):
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("a bool input")
    axis = normalize_axes([_const_int(c, n, 1, "axis")], x.rank)[0]
    c.emit("cumsum", {"src": x}, {"axis": axis, "exclusive": bool(exclusive),
                                  "reverse": bool(reverse)}, x.dtype, x.shape, **n.as_output)


@handler("Trilu", 14)
def trilu(c: Converter, n: Node, *, upper=1):
    x = c.val(n.input(0))
    k = _const_int(c, n, 1, "k") if n.has_input(1) else 0
    if x.rank < 2:
        raise Unsupported(f"a rank-{x.rank} input (Trilu needs at least 2 dims)")
    c.emit("trilu", {"src": x}, {"upper": bool(upper), "k": k}, x.dtype, x.shape, **n.as_output)


@handler("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(c: Converter, n: Node, *, value=None):
    """Reached only when the folding could not take the node: its shape is computed from
    data (unsupported, naming it), or is no shape."""
    shape = np.asarray(c.const(n.input(0), "shape")).reshape(-1)
    raise Unsupported(f"shape {shape.tolist()} (expected dims >= 0)")


@handler("TopK", 1)
def topk_1(c: Converter, n: Node, *, k, axis=-1):
    _topk(c, n, int(k), axis, True)


@handler("TopK", 10)
def topk_10(c: Converter, n: Node, *, axis=-1):
    _topk(c, n, _const_int(c, n, 1, "K"), axis, True)


@handler("TopK", 11, 24)
def topk(c: Converter, n: Node, *, axis=-1, largest=1, sorted=1):
    # sorted 0 allows any order: the sorted one is one of them.
    _topk(c, n, _const_int(c, n, 1, "K"), axis, bool(largest))


def _topk(c: Converter, n: Node, k: int, axis: int, largest: bool):
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    axis = normalize_axes([axis], x.rank)[0]
    if not 0 < k <= x.shape[axis]:
        raise Unsupported(f"K {k} for an axis of {x.shape[axis]} (expected 1 to "
                          f"{x.shape[axis]}; 0 gives empty outputs)")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    c.emit_outputs("topk", {"src": x}, {"axis": axis, "k": k, "largest": largest},
                   {"values": (x.dtype, shape, n.outputs[0]),
                    "indices": ("TL_INT32", shape, n.outputs[1] if len(n.outputs) > 1 else "")},
                   hint=n.name or n.outputs[0])


def _indices(c: Converter, name: str, what: str):
    """An indices input: TL_INT32 (ONNX's int64 ones are range-checked into it)."""
    v = c.val(name)
    if v.dtype != "TL_INT32":
        raise Unsupported(f"{what} of dtype {v.dtype} (expected int32 or int64)")
    return v


@handler("GatherND", 11, 12, 13)
def gather_nd(c: Converter, n: Node, *, batch_dims=0):
    x = c.val(n.input(0))
    idx = _indices(c, n.input(1), "indices")
    q = idx.shape[-1] if idx.rank else 0
    if not 1 <= q <= x.rank - batch_dims:
        raise Unsupported(f"index tuples of {q} for {x.rank - batch_dims} non-batch axes "
                          "(expected 1 or more)")
    shape = idx.shape[:-1] + x.shape[batch_dims + q:]
    y = c.emit("gather_nd", {"src": x, "indices": idx}, {"batch_dims": batch_dims}, x.dtype,
               shape or (1,), hint=n.name or n.outputs[0])
    c.reshape_output(n, y, c.out_shape(n))


@handler("Scatter", 9, 11)
@handler("ScatterElements", 11, 13, 16, 18)
def scatter_elements(c: Converter, n: Node, *, axis=0, reduction="none"):
    data = c.val(n.input(0))
    if data.dtype == "TL_BOOL":
        raise Unsupported("bool data")
    idx = _indices(c, n.input(1), "indices")
    updates = c.val(n.input(2))
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction {reduction}")
    axis = normalize_axes([axis], data.rank)[0]
    c.emit("scatter_elements", {"data": data, "indices": idx, "updates": updates},
           {"axis": axis, "reduction": reduction}, data.dtype, data.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])
