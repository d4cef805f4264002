"""QDQ models (ONNX Runtime's quantize_static, NNCF): a convolution or matrix product
between DequantizeLinear and QuantizeLinear nodes made one quantized operator before
the nodes are mapped, so that it computes on the 8-bit integers instead of a float
operator between two conversions:

    DequantizeLinear(xq) ---------------\\
    DequantizeLinear(wq, constant) ------ Conv / MatMul / Gemm [- Relu] - QuantizeLinear
    DequantizeLinear(bias, int32) ------/

becomes a `lightnet.QConv` (QLinearConv's inputs, a fused relu) or a `lightnet.QGemm`
(QLinearMatMul's inputs and a bias, B transposed when the Gemm's is), mapped by
handlers/quantize.py. Without a QuantizeLinear after it, the operator still reads the
integers and writes float (its output a float op reads). A pattern is taken when the
activation is per-tensor 8-bit with a constant scale and zero point, the weight a
constant per-tensor or per-output-channel 8-bit tensor (a MatMul's B may also be an
activation like A: attention's scores and its product with V), the bias (if any) int32
with zero points 0 and the scale x_scale * w_scale (the accumulator's), and the Gemm
computes A @ B (+ C) (transA 0, alpha 1, beta 1).

A MaxPool, Concat, Reshape or Transpose between DequantizeLinear nodes and a
QuantizeLinear of one scale and zero point (each per tensor, of equal values and dtype)
reads the integers and writes the QuantizeLinear's output itself: it only moves values,
and quantizing a dequantized value with its own scale and zero point gives it back.

Two more patterns become ONNX Runtime's operators where they compute the same integers:

    DequantizeLinear(a), DequantizeLinear(b) - Add / Mul - QuantizeLinear  (lightnet.QAdd,
    lightnet.QMul: QLinearAdd's inputs), always: qelew computes what the three nodes do,
    dequantizing in float32, adding or multiplying, quantizing;
    DequantizeLinear(x) - GlobalAveragePool - QuantizeLinear  (lightnet.QGlobalAveragePool)
    when both scales and H * W are powers of two: then every step of either computation is
    exact in float32 and both round the same value (other scales would round the sum
    differently from the float path, by a step now and then).

A Gather of computed indices (an embedding lookup) from a constant 8-bit table
dequantized per tensor becomes a `lightnet.DequantizedGather`: the rows gathered from
the integers, then dequantized (a word embedding of 30,522 x 768 is not dequantized
whole on every run; gathering and dequantizing commute).

Each needs per-tensor 8-bit activations of one dtype (inputs and output). Before all
these, element-wise float nodes of one 8-bit activation and constants of one value,
between its DequantizeLinear and a QuantizeLinear (a Gelu, attention's scale, a Relu),
become one table lookup, `lightnet.QLookup` (qlookup.py). Everything else of a QDQ
graph (a Softmax, a LayerNormalization) runs as it is written: dequantized, in float,
and quantized again.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .fusion import Graph
from .qlookup import lookups

__all__ = ["fuse_qdq"]

# The version of the nodes made: the one their handlers take.
VERSION = 1
_EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))


def _dequantize(g: Graph, name: str, reader):
    """The DequantizeLinear node making `name` with a constant scale and zero point
    (data, scale, zero point names), when only `reader` reads its output; else None."""
    d = g.made_by(name, "DequantizeLinear")
    if d is None or d.attrs.get("block_size") or not g.internal(name, reader):
        return None
    scale, zero = d.input(1), d.input(2)
    if scale not in g.consts or not zero or zero not in g.consts:
        return None
    return d


def _activation(g: Graph, name: str, reader):
    """(its quantized tensor, scale, zero point) of activation `name`, a per-tensor 8-bit
    DequantizeLinear's output, or None. Other nodes may read it too: each then reads it
    dequantized."""
    d = g.made_by(name, "DequantizeLinear")
    if d is None or d.attrs.get("block_size"):
        return None
    scale, zero = d.input(1), d.input(2)
    if scale not in g.consts or not zero or zero not in g.consts:
        return None
    if g.consts[scale].size != 1 or g.consts[zero].dtype not in _EIGHT_BIT:
        return None
    return [d.input(0), scale, zero]


def _weight(g: Graph, name: str, reader, channel_axis: int):
    """(weight, scale, zero point) of a constant 8-bit weight dequantized per tensor or
    along `channel_axis` (the output channels), or None."""
    d = _dequantize(g, name, reader)
    if d is None or d.input(0) not in g.consts:
        return None
    data, scale = g.consts[d.input(0)], g.consts[d.input(1)]
    if data.dtype not in _EIGHT_BIT:
        return None
    axis = d.attrs.get("axis", 1) % max(data.ndim, 1)
    if scale.size != 1 and (scale.ndim != 1 or axis != channel_axis):
        return None
    return [d.input(0), d.input(1), d.input(2)]


def _bias(g: Graph, name: str, reader, x_scale: str, w_scale: str):
    """The int32 tensor a DequantizeLinear of the accumulator's scale (x_scale *
    w_scale) and zero point 0 makes bias `name` of, or None."""
    d = _dequantize(g, name, reader)
    if d is None or d.input(0) not in g.consts:
        return None
    data = g.consts[d.input(0)]
    if data.dtype != np.int32 or data.ndim != 1:
        return None
    scale = g.consts[d.input(1)]
    expected = np.multiply(g.consts[x_scale], g.consts[w_scale], dtype=np.float32)
    zero = g.consts[d.input(2)]
    if np.any(zero) or np.size(scale) not in (1, data.size):
        return None
    if not np.allclose(np.reshape(scale, -1), np.reshape(expected, -1), rtol=1e-6, atol=0):
        return None
    return d.input(0)


def _output(g: Graph, node):
    """(the QuantizeLinear node taking `node`'s output, or None; whether a Relu lies
    between; the nodes the fused operator replaces)."""
    out = node.outputs[0]
    reader = g.only_reader(out)
    relu = reader is not None and reader.op_type == "Relu"
    if relu:
        reader = g.only_reader(reader.outputs[0])
    if reader is None or reader.op_type != "QuantizeLinear" or reader.attrs.get("block_size"):
        return None, False, [node]
    scale, zero = reader.input(1), reader.input(2)
    if (scale not in g.consts or g.consts[scale].size != 1 or not zero
            or zero not in g.consts or g.consts[zero].dtype not in _EIGHT_BIT):
        return None, False, [node]
    return reader, relu, [node] + ([g.only_reader(out)] if relu else []) + [reader]


def _fused(g: Graph, node):
    """(op type, inputs, attributes, the nodes replaced) of the quantized operator
    `node` (a Conv, MatMul or Gemm) becomes, or None."""
    attrs = dict(node.attrs)
    if node.op_type == "Gemm":
        if attrs.pop("transA", 0) or attrs.pop("alpha", 1.0) != 1.0:
            return None
        if attrs.pop("beta", 1.0) != 1.0 and node.has_input(2):
            return None
        attrs.pop("broadcast", None)
        trans_b = attrs.pop("transB", 0)
        if attrs:
            return None
        attrs = {"transB": trans_b}
        channel_axis = 0 if trans_b else 1
    elif node.op_type == "MatMul":
        channel_axis = 1
    else:
        channel_axis = 0
    x = _activation(g, node.input(0), node)
    w = _weight(g, node.input(1), node, channel_axis)
    if w is None and node.op_type == "MatMul":  # a product of two activations
        w = _activation(g, node.input(1), node)
    elif w is not None and node.op_type != "Conv" and g.consts[w[0]].ndim != 2:
        return None
    if x is None or w is None:
        return None
    bias = ""
    if node.op_type != "MatMul" and node.has_input(2):
        bias = _bias(g, node.input(2), node, x[1], w[1])
        if bias is None:
            return None
    quantize, relu, replaced = _output(g, node)
    y = [quantize.input(1), quantize.input(2)] if quantize else ["", ""]
    if relu:
        attrs["activation"] = "relu"
    op_type = "lightnet.QConv" if node.op_type == "Conv" else "lightnet.QGemm"
    return op_type, x + w + y + [bias], attrs, replaced


def _same_quantization(g: Graph, a, b) -> bool:
    """Whether (scale, zero point) names `a` and `b` hold equal values of one dtype."""
    (sa, za), (sb, zb) = a, b
    return (g.consts[za].dtype == g.consts[zb].dtype
            and np.array_equal(g.consts[sa], g.consts[sb])
            and np.array_equal(g.consts[za], g.consts[zb]))


def _moved(g: Graph, node):
    """(its op type, inputs, attributes, the nodes replaced) of the MaxPool, Concat,
    Reshape or Transpose `node` reading the integers (a Reshape's shape as it is), when
    it lies between DequantizeLinear nodes and a QuantizeLinear of one quantization
    (see the module docstring), or None."""
    if node.op_type == "MaxPool" and len([o for o in node.outputs if o]) != 1:
        return None  # its Indices output is read
    quantize, relu, replaced = _output(g, node)
    if quantize is None or relu:
        return None
    moved = node.inputs[:1] if node.op_type == "Reshape" else node.inputs  # not its shape
    inputs = [_activation(g, x, node) for x in moved]
    if not inputs or any(x is None for x in inputs):
        return None
    if not all(_same_quantization(g, x[1:], [quantize.input(1), quantize.input(2)])
               for x in inputs):
        return None
    dequantizes = [g.producer[x] for x in moved if g.internal(x, node)]
    return (node.op_type, [x[0] for x in inputs] + node.inputs[len(moved):], node.attrs,
            dequantizes + replaced)


def _quantized_output(g: Graph, node):
    """The QuantizeLinear that alone reads `node`'s output, per tensor 8-bit, or None."""
    quantize, relu, _ = _output(g, node)
    return None if relu else quantize


def _power_of_two(value) -> bool:
    mantissa, _ = np.frexp(np.float32(np.reshape(value, -1)[0]))
    return bool(mantissa == 0.5)


def _fused_elementwise(g: Graph, node):
    """(op type, inputs, attributes, the nodes replaced) of the lightnet.QAdd /
    lightnet.QMul an Add / Mul of two dequantized activations quantized again becomes,
    or None."""
    if len(node.inputs) != 2:
        return None
    a, b = (_activation(g, x, node) for x in node.inputs)
    quantize = _quantized_output(g, node)
    if a is None or b is None or quantize is None:
        return None
    if len({g.consts[z].dtype for z in (a[2], b[2], quantize.input(2))}) != 1:
        return None
    return (f"lightnet.Q{node.op_type}", a + b + [quantize.input(1), quantize.input(2)], {},
            [node, quantize])


def _fused_pool(g: Graph, node, shape_of):
    """(op type, inputs, attributes, the nodes replaced) of the
    lightnet.QGlobalAveragePool a GlobalAveragePool of a dequantized activation quantized
    again becomes where that is exact (see the module docstring), or None."""
    x = _activation(g, node.input(0), node)
    quantize = _quantized_output(g, node)
    shape = shape_of(node.input(0))
    if x is None or quantize is None or shape is None or len(shape) != 4:
        return None
    if g.consts[x[2]].dtype != g.consts[quantize.input(2)].dtype:
        return None
    scales = (g.consts[x[1]], g.consts[quantize.input(1)], shape[2] * shape[3])
    if not all(_power_of_two(v) for v in scales):
        return None
    return ("lightnet.QGlobalAveragePool", x + [quantize.input(1), quantize.input(2)], {},
            [node, quantize])


def _dequantized_gather(g: Graph, node):
    """(op type, inputs, attributes, the nodes replaced) of the lightnet.DequantizedGather
    a Gather of computed indices (an embedding lookup) from a constant 8-bit table
    dequantized per tensor becomes, or None."""
    d = _dequantize(g, node.input(0), node)
    if d is None or d.input(0) not in g.consts or node.input(1) in g.consts:
        return None
    if g.consts[d.input(1)].size != 1 or g.consts[d.input(2)].size != 1:
        return None
    return ("lightnet.DequantizedGather", [d.input(0), node.input(1), d.input(1), d.input(2)],
            node.attrs, [d, node])


FUSED = {"Conv": _fused, "MatMul": _fused, "Gemm": _fused, "Add": _fused_elementwise,
         "Mul": _fused_elementwise, "Gather": _dequantized_gather, "MaxPool": _moved, "Concat": _moved, "Reshape": _moved,
         "Transpose": _moved}


def fuse_qdq(nodes, consts, protected, shape_of=lambda name: None):
    """`nodes` (in graph order) with every quantized convolution and product of a QDQ
    model made one node, and its max pools and concats reading the integers (see the
    module docstring); `consts` maps names to constant values, `protected` names the
    graph outputs, `shape_of(name)` is a tensor's shape (None where unknown). The fused
    node keeps the name, index and
    outputs of the last node it replaces (the QuantizeLinear), and takes its place."""
    if not any(n.op_type == "DequantizeLinear" for n in nodes):
        return list(nodes)  # (every pattern starts at one)
    g = Graph(nodes, consts, protected)
    removed: set[int] = set()
    replacement: dict[int, object] = {}
    for final, (node, dead) in lookups(g).items():
        removed.update(id(n) for n in dead)
        removed.add(final)
        replacement[final] = node
    for n in g.nodes:
        if id(n) in removed:
            continue
        if n.op_type == "GlobalAveragePool":
            found = _fused_pool(g, n, shape_of)
        elif n.op_type in FUSED:
            found = FUSED[n.op_type](g, n)
        else:
            continue
        if found is None:
            continue
        op_type, inputs, attrs, replaced = found
        if any(id(r) in removed for r in replaced):
            continue
        removed.update(id(r) for r in replaced)
        last = replaced[-1]
        version = n.version if op_type == n.op_type else VERSION  # a moved node keeps its op
        replacement[id(last)] = dataclasses.replace(
            last, op_type=op_type, version=version, inputs=inputs, attrs=attrs)
    return [replacement.get(id(n), n) for n in g.nodes
            if id(n) not in removed or id(n) in replacement]
