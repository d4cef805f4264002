"""Control flow: If. One whose condition folds to a constant is replaced by the branch
it takes before mapping (inlining.py); one that reaches mapping is refused: its
condition is computed at run time (LightNet plans one graph before the run), or
became a constant when folding had no round left to inline it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dispatch import handler
from ..errors import NotKnown, Unsupported
from ..folding import FOLD_ROUNDS
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter


@handler("If", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def if_(c: Converter, n: Node, *, then_branch, else_branch):
    cond = n.input(0)
    if c.is_const(cond):
        raise Unsupported(f"node {n.label}: condition '{cond}' became a constant in the last "
                          f"of constant folding's {FOLD_ROUNDS} rounds, which left none to "
                          "inline the branch it takes")
    c.val(cond)  # (a condition no node computes, or one a refused node does, said so)
    producer = next((m for m in c.nodes if cond in m.outputs), None)
    source = "a graph input" if producer is None else (
        f"computed by node {producer.label} ({producer.op_type})")
    raise NotKnown(f"node {n.label}: condition '{cond}' is computed at run time ({source}); "
                   "expected a constant (an initializer, a Constant, or a value constant "
                   "folding computes), whose branch the importer inlines")
