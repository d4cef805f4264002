"""Ops that pick or place entries by index: TopK, GatherND, ScatterElements (and
Scatter, its old name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


@handler("TopK", 1)
def topk_1(c: Converter, n: Node, *, k, axis=-1):
    _topk(c, n, int(k), axis, True)


@handler("TopK", 10)
def topk_10(c: Converter, n: Node, *, axis=-1):
    _topk(c, n, _k_input(c, n), axis, True)


@handler("TopK", 11, 24)
def topk(c: Converter, n: Node, *, axis=-1, largest=1, sorted=1):
    # sorted 0 allows any order: the sorted one is one of them.
    _topk(c, n, _k_input(c, n), axis, bool(largest))


def _k_input(c: Converter, n: Node) -> int:
    k = np.asarray(c.const(n.input(1), "K")).reshape(-1)
    if k.size != 1:
        raise Unsupported(f"K of {k.size} values (expected one)")
    return int(k[0])


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
