"""An If whose condition is a constant, replaced by the branch it takes.

Exporters write Ifs whose condition is known once the input shapes are: a function
TorchScript scripts while tracing (ViTDet's get_rel_pos asks whether a position table
must be resized, once per table; DINOv3's RoPE whether to pad). The converter folds
the condition like any constant (folding.py) and puts the taken branch's nodes where
the If was; the branch not taken is never read, so it may hold anything.

A branch is a GraphProto with no inputs that may read any value of the scopes around
it by name. The names it defines (its nodes' outputs, its initializers) become fresh
ones, so that they clash neither with the outer graph's nor with another copy's (each
layer's If of one scripted function defines the same names); its nested subgraphs'
reads of them are renamed with them, and its reads of outer values kept. Identity
nodes bind the branch's outputs to the If's, in order.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from lightnet.errors import LightNetError

from .graph import Node


def subgraphs(attributes) -> list:
    """The GraphProtos among a node's AttributeProtos (an If's branches, a Loop's body)."""
    graphs = []
    for a in attributes:
        if a.HasField("g"):
            graphs.append(a.g)
        graphs.extend(a.graphs)
    return graphs


def _defined(graph) -> set[str]:
    """The names `graph` itself defines: its inputs, initializers and nodes' outputs."""
    names = {i.name for i in graph.input}
    names.update(t.name for t in graph.initializer)
    names.update(t.values.name for t in graph.sparse_initializer)
    names.update(o for n in graph.node for o in n.output if o)
    return names


def outer_reads(graph) -> set[str]:
    """The names `graph` (its nested subgraphs too) reads from the scopes around it."""
    reads = {o.name for o in graph.output}
    for n in graph.node:
        reads.update(x for x in n.input if x)
        for g in subgraphs(n.attribute):
            reads |= outer_reads(g)
    return reads - _defined(graph)


def all_names(graph) -> set[str]:
    """Every value name in `graph` and its nested subgraphs (fresh names avoid them)."""
    names = _defined(graph) | {o.name for o in graph.output}
    for n in graph.node:
        names.update(x for x in n.input if x)
        for g in subgraphs(n.attribute):
            names |= all_names(g)
    return names


def _rename_reads(graph, renamed: dict[str, str]) -> None:
    """Rename, in place, the reads of outer values `graph` (a subgraph of a branch
    being inlined) makes of the names in `renamed` (those it defines itself shadow them)."""
    renamed = {k: v for k, v in renamed.items() if k not in _defined(graph)}
    if not renamed:
        return
    for o in graph.output:
        o.name = renamed.get(o.name, o.name)
    for n in graph.node:
        n.input[:] = [renamed.get(x, x) for x in n.input]
        for g in subgraphs(n.attribute):
            _rename_reads(g, renamed)


def taken_branch(n: Node, cond: np.ndarray) -> str:
    """The attribute of the branch If `n` takes on the constant condition `cond` (a bool
    of one element)."""
    if cond.dtype != np.bool_ or cond.size != 1:
        raise LightNetError(f"node {n.label} (If-{n.version}): condition '{n.input(0)}' must "
                            f"be one bool, found {cond.dtype} {list(cond.shape)} (an invalid "
                            "ONNX model)")
    return "then_branch" if cond.reshape(-1)[0] else "else_branch"


def inline(onnx, n: Node, which: str, fresh: Callable[[str], str],
           node_name: Callable[[str], str]) -> tuple[list, list]:
    """(NodeProtos, initializer TensorProtos) that compute If `n`'s outputs as its
    branch `which` does: its nodes and initializers under fresh names (`fresh`,
    `node_name` make unique tensor and node names from a hint), then an Identity per
    output."""
    branch = n.attrs[which]
    what = f"node {n.label} (If-{n.version}): {which}"
    if len(branch.input):
        raise LightNetError(f"{what} has {len(branch.input)} inputs, expected none (an "
                            "invalid ONNX model)")
    if len(branch.output) != len(n.outputs):
        raise LightNetError(f"{what} has {len(branch.output)} outputs, expected "
                            f"{len(n.outputs)}, the If's (an invalid ONNX model)")
    if len(branch.sparse_initializer):
        raise LightNetError(f"{what}: sparse initializer "
                            f"'{branch.sparse_initializer[0].values.name}' is not supported")
    prefix = n.name or n.outputs[0]
    renamed: dict[str, str] = {}
    for name in [t.name for t in branch.initializer] + [
            o for m in branch.node for o in m.output if o]:
        if name not in renamed:
            renamed[name] = fresh(f"{prefix}/{name}")
    initializers = []
    for t in branch.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(t)
        copy.name = renamed[t.name]
        initializers.append(copy)
    nodes = []
    for m in branch.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(m)
        copy.name = node_name(f"{prefix}/{m.name or m.op_type}")
        copy.input[:] = [renamed.get(x, x) for x in m.input]
        copy.output[:] = [renamed.get(x, x) for x in m.output]
        for g in subgraphs(copy.attribute):
            _rename_reads(g, renamed)
        nodes.append(copy)
    for out, value in zip(n.outputs, branch.output):
        if out:
            nodes.append(onnx.helper.make_node("Identity", [renamed.get(value.name, value.name)],
                                               [out], name=node_name(f"{prefix}/{out}")))
    return nodes, initializers
