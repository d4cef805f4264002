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
