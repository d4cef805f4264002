"""Quantized lookup tables: element-wise float nodes between the DequantizeLinear of
one 8-bit tensor and a QuantizeLinear, made one table lookup before the nodes are mapped.

In a QDQ model, what lies between quantized tensors of one scale and zero point each
is often a chain of element-wise float operators of one activation, with constants of
one value beside it: a Gelu written out (DequantizeLinear - Div - Erf - QuantizeLinear -
DequantizeLinear - Add 1 - QuantizeLinear, a Mul by x, a Mul by 0.5, each quantized),
attention's scale (a Mul by the quantized 1 / sqrt(d)). Each output code is then a
function of the one input code at the same place, one of 256 values: evaluating the
nodes on the 256 codes (in float32, as ONNX's reference does; the QuantizeLinear /
DequantizeLinear pairs inside too) gives a table, and the whole subgraph becomes a
`lightnet.QLookup` of the input (`qlookup`: one pass over 8-bit values instead of
float conversions, transcendentals and quantizations). The result is exactly what the
float path computes, Erf, Tanh and Sigmoid evaluated in float64 and rounded to float32
(within a rounding of any float32 implementation, so a value at a half step may round
to the other neighbour: one step).

A subgraph is traced back from a QuantizeLinear (per tensor, 8-bit, constant scale and
zero point) through the element-wise nodes of `ELEMENTWISE` and per-tensor
QuantizeLinear / DequantizeLinear nodes, to constants of one value and to the
DequantizeLinear of one 8-bit tensor, its source (not a constant). A node whose output
is also read elsewhere stays for that reader.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["lookups"]

VERSION = 1  # of the nodes made: the one their handler takes
_EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))
_erf = np.vectorize(math.erf, otypes=[np.float64])

# Float32 in, float32 out; the transcendentals in float64, rounded once.
UNARY = {
    "Erf": lambda x: _erf(x.astype(np.float64)),
    "Tanh": lambda x: np.tanh(x.astype(np.float64)),
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x.astype(np.float64))),
    "Relu": lambda x: np.maximum(x, np.float32(0)),
    "Neg": np.negative,
    "Abs": np.abs,
}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
ELEMENTWISE = set(UNARY) | set(BINARY)


@dataclasses.dataclass
class _Trace:
    """The nodes computing a tensor from constants and sources, and those sources."""

    nodes: dict  # id -> node
    sources: set


def _per_tensor(g, node) -> bool:
    """A QuantizeLinear / DequantizeLinear of one constant float32 scale and one constant
    8-bit zero point (which says the integers' dtype)."""
    scale, zero = node.input(1), node.input(2)
    if set(node.attrs) - {"axis"} or scale not in g.consts or g.consts[scale].size != 1:
        return False
    if g.consts[scale].dtype != np.float32 or not zero or zero not in g.consts:
        return False
    return g.consts[zero].size == 1 and g.consts[zero].dtype in _EIGHT_BIT


def _trace(g, name, memo) -> _Trace | None:
    """How float tensor `name` is computed element-wise from constants of one value and
    8-bit sources, or None when it is not."""
    if name in memo:
        return memo[name]
    memo[name] = None  # a cycle (an invalid graph) traces to nothing
    result = _trace_node(g, name, memo)
    memo[name] = result
    return result


def _trace_node(g, name, memo) -> _Trace | None:
    if name in g.consts:
        value = g.consts[name]
        return _Trace({}, set()) if value.size == 1 and value.dtype == np.float32 else None
    n = g.producer.get(name)
    if n is None or len([o for o in n.outputs if o]) != 1:
        return None
    if n.op_type == "DequantizeLinear":
        if not _per_tensor(g, n):
            return None
        x = n.input(0)
        if x in g.consts:
            return _Trace({id(n): n}, set()) if g.consts[x].size == 1 else None
        q = g.made_by(x, "QuantizeLinear")
        inner = _trace(g, q.input(0), memo) if q is not None and _per_tensor(g, q) else None
        if inner is None or len(inner.sources) > 1:  # x is the source
            return _Trace({id(n): n}, {x})
        return _Trace({**inner.nodes, id(q): q, id(n): n}, inner.sources)
    if n.op_type not in ELEMENTWISE or n.attrs:
        return None
    if len(n.inputs) != (1 if n.op_type in UNARY else 2):
        return None
    traces = [_trace(g, x, memo) for x in n.inputs]
    if any(t is None for t in traces):
        return None
    nodes = {id(n): n}
    for t in traces:
        nodes.update(t.nodes)
    return _Trace(nodes, set().union(*(t.sources for t in traces)))


def _codes(dtype) -> np.ndarray:
    """The 256 values of an 8-bit dtype in the order of their bytes (0..255 read as
    `dtype`): a table's index is the byte."""
    return np.arange(256, dtype=np.uint8).view(dtype)


def _evaluate(g, nodes, source, source_dtype):
    """The values of every node's output on the 256 codes of `source`."""
    values = {source: _codes(source_dtype)}

    def get(name):
        return values[name] if name in values else np.reshape(g.consts[name], ())

    for n in nodes:
        x = get(n.input(0))
        if n.op_type == "DequantizeLinear":
            scale, zero = get(n.input(1)), get(n.input(2))
            out = np.multiply(np.subtract(x, zero, dtype=np.float32), scale,
                              dtype=np.float32)
        elif n.op_type == "QuantizeLinear":
            scale, zero = get(n.input(1)), get(n.input(2))
            info = np.iinfo(zero.dtype)
            q = np.rint(np.divide(x, scale, dtype=np.float32)) + np.float32(zero)
            out = np.clip(q, info.min, info.max).astype(zero.dtype)
        elif n.op_type in UNARY:
            out = UNARY[n.op_type](x).astype(np.float32)
        else:
            out = BINARY[n.op_type](x, get(n.input(1)), dtype=np.float32)
        values[n.outputs[0]] = np.broadcast_to(out, (256,))
    return values


def _table(g, final, trace):
    """The 256 output codes of QuantizeLinear `final`, indexed by the source's byte;
    None where a float value on the way is not finite (left to the float path)."""
    (source,) = trace.sources
    readers = [r for r in g.readers.get(source, []) if id(r) in trace.nodes]
    source_dtype = g.consts[readers[0].input(2)].dtype
    nodes = [n for n in g.nodes if id(n) in trace.nodes] + [final]
    with np.errstate(all="ignore"):
        values = _evaluate(g, nodes, source, source_dtype)
    for n in nodes:
        v = values[n.outputs[0]]
        if v.dtype.kind == "f" and not np.all(np.isfinite(v)):
            return None
    return source, np.ascontiguousarray(values[final.outputs[0]])


def lookups(g):
    """{id of a QuantizeLinear: (the lightnet.QLookup node replacing it, the nodes only
    it read)} for every subgraph of `g` (a fusion.Graph) that is one table lookup, the
    largest ones: traced from the last QuantizeLinear back."""
    found, taken = {}, set()
    for final in reversed(g.nodes):
        if id(final) in taken or final.op_type != "QuantizeLinear":
            continue
        if not _per_tensor(g, final):
            continue
        trace = _trace(g, final.input(0), {})
        if trace is None or len(trace.sources) != 1:
            continue
        if not any(n.op_type in ELEMENTWISE for n in trace.nodes.values()):
            continue  # a requantization only
        made = _table(g, final, trace)
        if made is None:
            continue
        source, table = made
        node = dataclasses.replace(final, op_type="lightnet.QLookup", version=VERSION,
                                   inputs=[source], attrs={"table": table})
        dead = _only_read_by(g, trace.nodes, final)
        taken.update(id(n) for n in dead)
        taken.add(id(final))
        found[id(final)] = (node, dead)
    return found


def _only_read_by(g, nodes, final) -> list:
    """The nodes of `nodes` that nothing but `final` and each other needs (graph order)."""
    dead = {id(final)}
    for n in reversed(g.nodes):
        if id(n) not in nodes:
            continue
        outs = [o for o in n.outputs if o]
        if all(o not in g.protected and all(id(r) in dead for r in g.readers.get(o, []))
               for o in outs):
            dead.add(id(n))
    return [n for n in g.nodes if id(n) in dead and n is not final]
