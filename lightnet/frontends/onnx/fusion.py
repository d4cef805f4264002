"""Subgraphs exporters write for one activation or normalization, recognised before
the nodes are mapped and replaced by the single ONNX node they compute:

- GELU, x * 0.5 * (1 + erf(x / sqrt(2))) with its products in any order (and
  x * (1 / sqrt(2)) for the division), becomes Gelu; its tanh form (GPT-2's),
  x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))), Gelu with
  approximate "tanh";
- SiLU, x * Sigmoid(x), becomes Swish;
- x * HardSigmoid(x) with alpha 1/6 and beta 0.5 becomes HardSwish;
- layer normalization written out, ReduceMean - Sub - Pow 2 (or d * d) -
  ReduceMean - Add epsilon - Sqrt - Div over the trailing axes, then an
  optional Mul by a constant scale and Add of a constant bias, becomes
  LayerNormalization.

It happens in the importer, on the ONNX graph, because that is where the
pattern's constants are known values and where every such model comes from
(docs/onnx.md). A replaced node's intermediate results must be read by nothing
outside the pattern and be no graph output; its constants must equal the
pattern's to float32 precision (relative 1e-6).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["Graph", "fuse"]

# Versions of the nodes made: those the importer maps.
GELU_VERSION = 20
SWISH_VERSION = 24
HARD_SWISH_VERSION = 14
LAYER_NORM_VERSION = 17


class Graph:
    """The nodes still to map, with who produces and who reads each tensor."""

    def __init__(self, nodes, consts, protected):
        self.nodes = list(nodes)
        self.consts = consts
        self.protected = set(protected)
        self.producer = {o: n for n in self.nodes for o in n.outputs if o}
        self.readers: dict[str, list] = {}
        for n in self.nodes:
            for x in n.inputs:
                if x:
                    self.readers.setdefault(x, []).append(n)

    def only_reader(self, name):
        """The one node reading `name` (None if there are several, none, or it is a
        graph output)."""
        readers = self.readers.get(name, [])
        if name in self.protected or len({id(n) for n in readers}) != 1:
            return None
        return readers[0]

    def internal(self, name, *readers) -> bool:
        """`name` is read by exactly the nodes `readers` (a node reading it twice
        counts once) and is no graph output."""
        got = {id(n) for n in self.readers.get(name, [])}
        return name not in self.protected and got == {id(n) for n in readers}

    def made_by(self, name, op_type):
        n = self.producer.get(name)
        return n if n is not None and n.op_type == op_type else None

    def scalar(self, name):
        """The value of a constant holding one number, else None."""
        value = self.consts.get(name)
        if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind != "f":
            return None
        return float(np.asarray(value).reshape(()))


def _near(value, target) -> bool:
    return value is not None and math.isclose(value, target, rel_tol=1e-6)


def _other(node, name):
    """The other input of a two-input node one of whose inputs is `name`."""
    a, b = node.inputs[0], node.input(1)
    return b if a == name else a if b == name else None


def _gelu(g: Graph, erf):
    """Erf at the heart of a GELU: the nodes to replace and the Gelu's input."""
    scaled = g.producer.get(erf.inputs[0])
    if scaled is None or not g.internal(erf.inputs[0], erf):
        return None
    if scaled.op_type == "Div" and _near(g.scalar(scaled.input(1)), math.sqrt(2)):
        x = scaled.inputs[0]
    elif scaled.op_type == "Mul":
        x = next((a for a, b in (scaled.inputs, scaled.inputs[::-1])
                  if _near(g.scalar(b), 1 / math.sqrt(2))), None)
    else:
        return None
    plus = g.only_reader(erf.outputs[0])
    if x is None or plus is None or plus.op_type != "Add" or not _near(
            g.scalar(_other(plus, erf.outputs[0])), 1.0):
        return None
    tail = _half_x_times(g, plus, x)
    return None if tail is None else ([scaled, erf, plus] + tail, x)


def _half_x_times(g: Graph, plus, x):
    """The product of x, 0.5 and `plus`'s output (1 + erf, 1 + tanh) in any
    association: its Mul nodes, or None."""
    first = g.only_reader(plus.outputs[0])
    if first is None or first.op_type != "Mul":
        return None
    factor = _other(first, plus.outputs[0])
    if factor == x or _near(g.scalar(factor), 0.5):
        # (x * (1 + erf)) * 0.5 or ((1 + erf) * 0.5) * x: a Mul by the third factor
        last = g.only_reader(first.outputs[0])
        if last is None or last.op_type != "Mul":
            return None
        third = _other(last, first.outputs[0])
        if not (_near(g.scalar(third), 0.5) if factor == x else third == x):
            return None
        return [first, last]
    half = g.made_by(factor, "Mul")  # (x * 0.5) * (1 + erf)
    if half is not None and g.internal(factor, first) and x in half.inputs and _near(
            g.scalar(_other(half, x)), 0.5):
        return [half, first]
    return None


def _scaled_by(g: Graph, name, reader, value):
    """(node, other input) when `name` is made by a Mul of something by the constant
    `value` and read by `reader` alone, else None."""
    mul = g.made_by(name, "Mul")
    if mul is None or not g.internal(name, reader):
        return None
    other = next((a for a, b in (mul.inputs, mul.inputs[::-1]) if _near(g.scalar(b), value)),
                 None)
    return None if other is None else (mul, other)


def _gelu_tanh(g: Graph, tanh):
    """Tanh at the heart of GPT-2's GELU, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x +
    0.044715 * x ** 3))), its products in any order: the nodes and the Gelu's input."""
    inner = _scaled_by(g, tanh.inputs[0], tanh, math.sqrt(2 / math.pi))
    if inner is None:
        return None
    add = g.made_by(inner[1], "Add")
    if add is None or not g.internal(inner[1], inner[0]):
        return None
    for x, cubic in (add.inputs, add.inputs[::-1]):
        scaled = _scaled_by(g, cubic, add, 0.044715)
        power = g.made_by(scaled[1], "Pow") if scaled else None
        if power is not None and power.inputs[0] == x and g.internal(scaled[1], scaled[0]) \
                and _near(g.scalar(power.input(1)), 3.0):
            break
    else:
        return None
    plus = g.only_reader(tanh.outputs[0])
    if plus is None or plus.op_type != "Add" or not _near(
            g.scalar(_other(plus, tanh.outputs[0])), 1.0):
        return None
    tail = _half_x_times(g, plus, x)
    return None if tail is None else ([power, scaled[0], add, inner[0], tanh, plus] + tail, x)


def _swish(g: Graph, sigmoid):
    """x * Sigmoid(x)."""
    x = sigmoid.inputs[0]
    mul = g.only_reader(sigmoid.outputs[0])
    if mul is None or mul.op_type != "Mul" or _other(mul, sigmoid.outputs[0]) != x:
        return None
    return [sigmoid, mul], x


def _hard_swish(g: Graph, hard_sigmoid):
    """x * HardSigmoid(x, alpha=1/6, beta=0.5)."""
    x = hard_sigmoid.inputs[0]
    if not (_near(hard_sigmoid.attrs.get("alpha", 0.2), 1 / 6)
            and _near(hard_sigmoid.attrs.get("beta", 0.5), 0.5)):
        return None
    mul = g.only_reader(hard_sigmoid.outputs[0])
    if mul is None or mul.op_type != "Mul" or _other(mul, hard_sigmoid.outputs[0]) != x:
        return None
    return [hard_sigmoid, mul], x


def _reduce_axes(g: Graph, node, rank):
    """The sorted, non-negative axes of a keepdims ReduceMean, else None."""
    if node.op_type != "ReduceMean" or not node.attrs.get("keepdims", 1):
        return None
    axes = node.attrs.get("axes")
    if node.has_input(1):
        axes = g.consts.get(node.input(1))
        axes = None if axes is None else np.asarray(axes).reshape(-1).tolist()
    if not axes:
        return None
    return sorted(int(a) % rank for a in axes)


def _layernorm(g: Graph, mean, rank_of):
    """ReduceMean(x) at the start of a written-out layer normalization: the nodes,
    x, the normalized axis, epsilon, and the scale and bias names (None: absent)."""
    x = mean.inputs[0]
    rank = rank_of(x)
    axes = _reduce_axes(g, mean, rank) if rank else None
    if axes is None or axes != list(range(axes[0], rank)):
        return None
    sub = g.only_reader(mean.outputs[0])
    if sub is None or sub.op_type != "Sub" or sub.inputs != [x, mean.outputs[0]]:
        return None
    d = sub.outputs[0]
    square = next((n for n in g.readers.get(d, []) if n.op_type in ("Pow", "Mul")), None)
    if square is None or not (
            (square.op_type == "Pow" and square.inputs[0] == d
             and _near(g.scalar(square.input(1)), 2.0))
            or (square.op_type == "Mul" and square.inputs == [d, d])):
        return None
    var = g.only_reader(square.outputs[0])
    if var is None or _reduce_axes(g, var, rank) != axes:
        return None
    add = g.only_reader(var.outputs[0])
    epsilon = None if add is None or add.op_type != "Add" else g.scalar(
        _other(add, var.outputs[0]))
    if epsilon is None or epsilon < 0:
        return None
    sqrt = g.only_reader(add.outputs[0])
    div = None if sqrt is None or sqrt.op_type != "Sqrt" else g.only_reader(sqrt.outputs[0])
    if div is None or div.op_type != "Div" or div.inputs != [d, sqrt.outputs[0]]:
        return None
    if not g.internal(d, square, div):
        return None
    nodes = [mean, sub, square, var, add, sqrt, div]
    scale = bias = None
    width = rank - axes[0]
    affine = g.only_reader(div.outputs[0])
    if affine is not None and affine.op_type == "Mul":
        scale = _other(affine, div.outputs[0])
        if not _affine_constant(g, scale, width):
            scale = None
        else:
            nodes.append(affine)
            shift = g.only_reader(affine.outputs[0])
            if shift is not None and shift.op_type == "Add":
                bias = _other(shift, affine.outputs[0])
                if _affine_constant(g, bias, width):
                    nodes.append(shift)
                else:
                    bias = None
    return nodes, x, axes[0], epsilon, scale, bias


def _affine_constant(g: Graph, name, width) -> bool:
    """A float constant that broadcasts over the normalized axes alone."""
    value = g.consts.get(name)
    if value is None or np.asarray(value).dtype.kind != "f":
        return False
    shape = np.shape(value)
    return len(shape) <= width or all(d == 1 for d in shape[:len(shape) - width])


def fuse(nodes, consts, protected, rank_of, add_const):
    """`nodes` (in graph order) with every pattern above replaced by one node.

    `consts` maps names to constant values, `protected` names the graph outputs,
    `rank_of(name)` gives a tensor's rank (None: unknown), and `add_const(hint,
    value, like)` adds a [1] constant of tensor `like`'s type and returns its
    name (a layer normalization without a scale gets a scale of 1). A fused
    node (a graph.Node) keeps the name, index and outputs of its pattern's last
    node and takes its place."""
    g = Graph(nodes, consts, protected)
    removed: set[int] = set()
    replacement: dict[int, object] = {}

    def replace(found, op_type, version, inputs, **attrs):
        group, last = found, found[-1]
        if any(id(n) in removed for n in group):
            return
        removed.update(id(n) for n in group)
        replacement[id(last)] = dataclasses.replace(
            last, op_type=op_type, version=version, inputs=inputs, attrs=attrs)

    for n in g.nodes:
        if n.op_type == "Erf":
            found = _gelu(g, n)
            if found:
                replace(found[0], "Gelu", GELU_VERSION, [found[1]], approximate="none")
        elif n.op_type == "Tanh":
            found = _gelu_tanh(g, n)
            if found:
                replace(found[0], "Gelu", GELU_VERSION, [found[1]], approximate="tanh")
        elif n.op_type == "Sigmoid":
            found = _swish(g, n)
            if found:
                replace(found[0], "Swish", SWISH_VERSION, [found[1]], alpha=1.0)
        elif n.op_type == "HardSigmoid":
            found = _hard_swish(g, n)
            if found:
                replace(found[0], "HardSwish", HARD_SWISH_VERSION, [found[1]])
        elif n.op_type == "ReduceMean":
            found = _layernorm(g, n, rank_of)
            if found:
                group, x, axis, epsilon, scale, bias = found
                if scale is None:
                    scale = add_const(f"{group[-1].outputs[0]}_scale", 1.0, x)
                inputs = [x, scale] + ([bias] if bias else [])
                replace(group, "LayerNormalization", LAYER_NORM_VERSION, inputs,
                        axis=axis, epsilon=epsilon)
    if not removed:
        return g.nodes
    return [replacement.get(id(n), n) for n in g.nodes
            if id(n) not in removed or id(n) in replacement]
