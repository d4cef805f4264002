"""Activations: Relu, Sigmoid, Tanh, Erf, Gelu, HardSigmoid, HardSwish, Swish, LeakyRelu,
PRelu, Clip, Elu, Selu, Softmax, LogSoftmax."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from lightnet.errors import LightNetError

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node, Val
from .elementwise import elew

if TYPE_CHECKING:
    from ..converter import Converter

_FLT_MAX = float(np.finfo(np.float32).max)


def _unary_op(optype: str, float_only=False):
    def handle(c: Converter, n: Node, *, consumed_inputs=None):
        x = c.val(n.input(0))
        if float_only:
            x.require_float(f"{n.op_type} input")
        c.emit(optype, {"src": x}, {}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
    return handle


handler("Relu", 1, 6, 13, 14)(_unary_op("relu"))
handler("Sigmoid", 1, 6, 13)(_unary_op("sigmoid", True))
handler("Tanh", 1, 6, 13)(_unary_op("tanh", True))
handler("Erf", 9, 13)(_unary_op("erf", True))
handler("HardSwish", 14, 22)(_unary_op("hard_swish", True))


@handler("HardSigmoid", 1, 6, 22)
def hard_sigmoid(c: Converter, n: Node, *, alpha=0.2, beta=0.5, consumed_inputs=None):
    x = c.val(n.input(0))
    x.require_float("HardSigmoid input")
    c.emit("hard_sigmoid", {"src": x}, {"alpha": alpha, "beta": beta}, x.dtype, x.shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("Swish", 24)
def swish(c: Converter, n: Node, *, alpha=1.0):
    x = c.val(n.input(0))
    x.require_float("Swish input")
    c.emit("swish", {"src": x}, {"alpha": alpha}, x.dtype, x.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@handler("Gelu", 20)
def gelu(c: Converter, n: Node, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate {approximate!r}")
    x = c.val(n.input(0))
    x.require_float("Gelu input")
    c.emit("gelu", {"src": x}, {"approximate": approximate}, x.dtype, x.shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("LeakyRelu", 1, 6, 16)
def leaky_relu(c: Converter, n: Node, *, alpha=0.01, consumed_inputs=None):
    x = c.val(n.input(0))
    c.emit("lrelu", {"src": x}, {"negslope": alpha}, x.dtype, x.shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("PRelu", 1, 6, 7, 9, 16)
def prelu(c: Converter, n: Node, *, consumed_inputs=None):
    x = c.val(n.input(0))
    slope_name = n.input(1)
    if c.is_const(slope_name):
        s = c.const(slope_name)
        if s.size and np.all(s == s.reshape(-1)[0]) and (n.version < 7 or s.ndim <= x.rank):
            c.emit("lrelu", {"src": x}, {"negslope": float(s.reshape(-1)[0])}, x.dtype, x.shape,
                   out=n.outputs[0], hint=n.name or n.outputs[0])
            return
    slope = c.val(slope_name)
    if n.version < 7 and slope.rank == 1 and x.rank > 2 and slope.shape[0] == x.shape[1] != 1:
        slope = c.reshape(slope, (slope.shape[0],) + (1,) * (x.rank - 2))
    zero = c.scalar(0, x.dtype, f"{n.outputs[0]}_zero")
    pos = c.emit("elew", {"src1": x, "src2": zero}, {"elew_op": "TL_MAX"}, x.dtype, x.shape,
                 hint=f"{n.outputs[0]}_pos")
    neg = c.emit("elew", {"src1": x, "src2": zero}, {"elew_op": "TL_MIN"}, x.dtype, x.shape,
                 hint=f"{n.outputs[0]}_neg")
    scaled = c.emit("elew", {"src1": neg, "src2": slope}, {"elew_op": "TL_MUL"}, x.dtype,
                    x.shape, hint=f"{n.outputs[0]}_scaled")
    c.emit("elew", {"src1": pos, "src2": scaled}, {"elew_op": "TL_SUM"}, x.dtype, x.shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("Clip", 1, 6)
def clip_attributes(c: Converter, n: Node, *, min=-_FLT_MAX, max=_FLT_MAX,  # noqa: A002
                    consumed_inputs=None):
    """Attribute form: the bounds default to float's lowest and largest values."""
    _clip(c, n, _clip_input(c, n), min, max)


@handler("Clip", 11, 12, 13)
def clip_inputs(c: Converter, n: Node):
    """Input form: a missing bound is no bound (infinities pass through); a computed bound
    is an `elew` TL_MAX / TL_MIN (min > max then gives max, as ONNX says)."""
    x = _clip_input(c, n)
    bounds = []
    for i, what in ((1, "min"), (2, "max")):
        if not n.has_input(i):
            bounds.append(None)
        elif c.is_const(n.input(i)):
            bounds.append(float(c.const(n.input(i), what).reshape(())))
        else:
            bound = c.val(n.input(i))
            if bound.shape and bound.shape != (1,):
                raise LightNetError(f"node {n.label} (Clip-{n.version}): {what} has shape "
                                    f"{list(bound.shape)}, expected a scalar (an invalid "
                                    "ONNX model)")
            bounds.append(bound)
    lo, hi = bounds
    if isinstance(lo, Val) or isinstance(hi, Val):
        if lo is not None and hi is not None:
            lo = lo if isinstance(lo, Val) else c.scalar(lo, x.dtype, f"{n.outputs[0]}_min")
            x = elew(c, n, x, lo, "TL_MAX", out=False)
            lo = None
        _clip(c, n, x, lo, hi)
        return
    _clip(c, n, x, lo, hi)


def _clip_input(c: Converter, n: Node) -> Val:
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    return x


def _clip(c: Converter, n: Node, x: Val, lo, hi):
    """x limited to [lo, hi]; each a number, a scalar Val, or None (no bound)."""
    if lo is not None and hi is not None:
        lo = min(lo, hi)  # min > max: every value is max, as ONNX says
        c.emit("clip", {"src": x}, {"min": lo, "max": hi}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
    elif lo is not None:
        bound = lo if isinstance(lo, Val) else c.scalar(lo, x.dtype, f"{n.outputs[0]}_min")
        elew(c, n, x, bound, "TL_MAX")
    elif hi is not None:
        bound = hi if isinstance(hi, Val) else c.scalar(hi, x.dtype, f"{n.outputs[0]}_max")
        elew(c, n, x, bound, "TL_MIN")
    else:
        c.reshape_output(n, x, x.shape)


def _elu(c: Converter, n: Node, alpha: float, gamma: float):
    """gamma * (x > 0 ? x : alpha * (exp(x) - 1)): a `unary` elu, scaled by gamma (Selu)."""
    x = c.val(n.input(0))
    x.require_float(f"{n.op_type} input")
    params = {"func": "elu", "alpha": float(alpha), "beta": 0.0}
    if gamma == 1:
        c.emit("unary", {"src": x}, params, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
        return
    y = c.emit("unary", {"src": x}, params, x.dtype, x.shape, hint=f"{n.outputs[0]}_elu")
    elew(c, n, y, c.scalar(gamma, x.dtype, f"{n.outputs[0]}_gamma"), "TL_MUL")


@handler("Elu", 1, 6, 22)
def elu(c: Converter, n: Node, *, alpha=1.0, consumed_inputs=None):
    _elu(c, n, alpha, 1.0)


@handler("Selu", 1, 6, 22)
def selu(c: Converter, n: Node, *, alpha=1.67326319217681884765625,
         gamma=1.05070102214813232421875, consumed_inputs=None):
    _elu(c, n, alpha, gamma)


def _softmax_flattened(optype: str):
    def handle(c: Converter, n: Node, *, axis=1):
        """Before version 13: over the input flattened to
        [prod(d[:axis]), prod(d[axis:])], normalized over the second dim."""
        x = c.val(n.input(0))
        x.require_float(f"{n.op_type} input")
        rank = max(x.rank, 1)
        axis = normalize_axes([axis], rank)[0]
        c.require(optype)
        if axis == rank - 1:
            c.emit(optype, {"src": x}, {"axis": axis}, x.dtype, x.shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
            return
        flat = c.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        y = c.emit(optype, {"src": flat}, {"axis": 1}, x.dtype, flat.shape, hint=n.outputs[0])
        c.reshape(y, x.shape, out=n.outputs[0])
    return handle


def _softmax(optype: str):
    def handle(c: Converter, n: Node, *, axis=-1):
        x = c.val(n.input(0))
        x.require_float(f"{n.op_type} input")
        axis = normalize_axes([axis], max(x.rank, 1))[0]
        c.emit(optype, {"src": x}, {"axis": axis}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
    return handle


handler("Softmax", 1, 11)(_softmax_flattened("softmax"))
handler("Softmax", 13)(_softmax("softmax"))
handler("LogSoftmax", 1, 11)(_softmax_flattened("log_softmax"))
handler("LogSoftmax", 13)(_softmax("log_softmax"))
