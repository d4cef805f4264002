"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, the QOperator
forms QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger, ONNX Runtime's
QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearConcat and QLinearAveragePool
(com.microsoft), and the quantized
operators (`lightnet.QConv`, `lightnet.QGemm`, `lightnet.QAdd`,
`lightnet.QGlobalAveragePool`, `lightnet.DequantizedGather`) that qdq.py makes of a QDQ model's DequantizeLinear -
operator - QuantizeLinear, and the table lookups (`lightnet.QLookup`) qlookup.py makes of
its element-wise float chains.

A quantized convolution or product reads its weight, scales and zero points as constants
(LightNet prepares the weight once, at load); its activation zero points are one value.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from lightnet.ir.shapes import (autopad_padding, broadcast_shape, conv2d_output_hw,
                                 matmul_shape)
from lightnet.ir.tensor import DType

from ..dispatch import handler
from ..dtypes import BFLOAT16, FLOAT, FLOAT16, tl_dtype, to_tl_array, type_name
from ..errors import Unsupported
from ..graph import Node, Val
from .conv import _spatial_params

if TYPE_CHECKING:
    from ..converter import Converter

QUANTIZED = ("TL_UINT8", "TL_INT8", "TL_UINT16", "TL_INT16")
DEQUANTIZED = QUANTIZED + ("TL_INT32",)
EIGHT_BIT = ("TL_UINT8", "TL_INT8")
VERSIONS = (10, 13, 19, 21, 23, 24, 25, 28)


def _per_axis(c: Converter, scale: Val, x: Val, axis: int) -> int:
    """The axis param of a quantize / dequantize of `x`: ONNX's axis, made
    non-negative, for a scale per index of it (any in-range value for one scale)."""
    if math.prod(scale.shape) == 1 or not x.rank:
        return 0
    if not -x.rank <= axis < x.rank:
        raise Unsupported(f"axis {axis} of a rank-{x.rank} input")
    return axis % x.rank


def _float_scale(c: Converter, name: str, what: str) -> Val:
    scale = c.val(name)
    if scale.dtype != "TL_FLOAT":
        raise Unsupported(f"{what} of dtype {scale.dtype} (only float, float16, bfloat16)")
    return scale


@handler("QuantizeLinear", *VERSIONS)
def quantize_linear(c: Converter, n: Node, *, axis=1, block_size=0, output_dtype=0,
                    precision=0, saturate=1):
    # saturate only concerns float8 outputs, which LightNet has no dtype for.
    x = c.val(n.input(0))
    if x.dtype != "TL_FLOAT":
        raise Unsupported(f"QuantizeLinear input of dtype {x.dtype} (only float)")
    if block_size:
        raise Unsupported("blocked quantization (block_size)")
    if precision not in (0, FLOAT):
        raise Unsupported(f"precision {type_name(precision)}")
    scale = _float_scale(c, n.input(1), "y_scale")
    zero = c.val(n.input(2)) if n.has_input(2) else None
    if zero is not None:
        dtype = zero.dtype
    else:
        dtype = tl_dtype(output_dtype, "output_dtype") if output_dtype else "TL_UINT8"
    if dtype not in QUANTIZED:
        raise Unsupported(f"quantizing to {dtype} (LightNet quantizes to "
                          f"{', '.join(QUANTIZED)})")
    c.emit("quantize", {"src": x, "scale": scale, "zero": zero},
           {"axis": _per_axis(c, scale, x, axis), "dtype": dtype}, dtype, x.shape,
           **n.as_output)


@handler("DequantizeLinear", *VERSIONS)
def dequantize_linear(c: Converter, n: Node, *, axis=1, block_size=0, output_dtype=0):
    x = c.val(n.input(0))
    if x.dtype not in DEQUANTIZED:
        raise Unsupported(f"DequantizeLinear input of dtype {x.dtype} (LightNet dequantizes "
                          f"{', '.join(DEQUANTIZED)})")
    if block_size:
        raise Unsupported("blocked quantization (block_size)")
    if output_dtype not in (0, FLOAT, FLOAT16, BFLOAT16):
        raise Unsupported(f"output_dtype {type_name(output_dtype)}")
    scale = _float_scale(c, n.input(1), "x_scale")
    zero = c.val(n.input(2)) if n.has_input(2) else None
    c.emit("dequantize", {"src": x, "scale": scale, "zero": zero},
           {"axis": _per_axis(c, scale, x, axis)}, "TL_FLOAT", x.shape, **n.as_output)


@handler("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(c: Converter, n: Node):
    x = c.val(n.input(0))
    if x.dtype != "TL_FLOAT":
        raise Unsupported(f"DynamicQuantizeLinear input of dtype {x.dtype} (only float)")
    outs = {"dst": ("TL_UINT8", x.shape, n.outputs[0])}
    for arg, dtype, i in (("scale", "TL_FLOAT", 1), ("zero", "TL_UINT8", 2)):
        outs[arg] = (dtype, (1,), n.outputs[i] if c.used(n, i) else None)
    vals = c.emit_outputs("dynamic_quantize", {"src": x}, {}, outs, hint=n.outputs[0])
    for arg, i in (("scale", 1), ("zero", 2)):
        if c.used(n, i):  # ONNX's are scalars
            c.bind(n.outputs[i], dataclasses.replace(vals[arg], shape=()))


# ONNX Runtime's quantized element-wise operators and pooling ---------------------------------
# A com.microsoft node has no ONNX schema here: its version is 0. Their scales and zero
# points are one value each.

def qelew(c: Converter, n: Node, elew_op: str):
    """A qelew from QLinearAdd's / QLinearMul's inputs: A, A_scale, A_zero_point, B,
    B_scale, B_zero_point, C_scale, C_zero_point ("" where absent)."""
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = (n.inputs + [""] * 8)[:8]
    x1, x2 = c.val(a), c.val(b)
    _eight_bit(x1, f"{n.op_type.split('.')[-1]}'s A")
    shape = broadcast_shape(x1.shape, x2.shape)
    if x1.shape != shape == x2.shape:
        # A broadcast to B (a bias added to a product): B first, as qelew's variants
        # broadcast their second input (the sum and product are the same either way).
        (a, a_scale, a_zero), (b, b_scale, b_zero) = (b, b_scale, b_zero), (a, a_scale, a_zero)
        x1, x2 = x2, x1
    ins = {"src1": x1, "src1_scale": _one(c, a_scale), "src1_zero": _one(c, a_zero),
           "src2": x2, "src2_scale": _one(c, b_scale), "src2_zero": _one(c, b_zero),
           "dst_scale": _one(c, y_scale), "dst_zero": _one(c, y_zero)}
    c.emit("qelew", ins, {"elew_op": elew_op}, x1.dtype, shape, **n.as_output)


def _one(c: Converter, name: str) -> Val | None:
    """A scale or zero point: one value, [1]; None for an absent optional input."""
    if not name:
        return None
    v = c.val(name)
    if math.prod(v.shape) != 1:
        raise Unsupported(f"'{name}' of shape {list(v.shape)} (one value per tensor)")
    return c.reshape(v, (1,))


@handler("lightnet.QAdd", 1)  # made of a QDQ model's Add (qdq.py)
@handler("com.microsoft.QLinearAdd", 0)
def qlinear_add(c: Converter, n: Node):
    qelew(c, n, "TL_SUM")


@handler("lightnet.QMul", 1)  # made of a QDQ model's Mul (qdq.py)
@handler("com.microsoft.QLinearMul", 0)
def qlinear_mul(c: Converter, n: Node):
    qelew(c, n, "TL_MUL")


def _transposed(c: Converter, x: Val, perm: list[int], **out) -> Val:
    """`x` with its axes permuted (a channels-last operator's input and output)."""
    return c.emit("transpose", {"src": x}, {"axes": perm}, x.dtype,
                  tuple(x.shape[i] for i in perm), **out)


@handler("lightnet.QGlobalAveragePool", 1)
@handler("com.microsoft.QLinearGlobalAveragePool", 0)
def qlinear_global_average_pool(c: Converter, n: Node, *, channels_last=0):
    x = c.val(n.input(0))
    _eight_bit(x, "QLinearGlobalAveragePool's input")
    if x.rank != 4:
        raise Unsupported(f"a rank-{x.rank} input (only 2-D pooling, rank 4)")
    if channels_last:
        x = _transposed(c, x, [0, 3, 1, 2], hint=n.outputs[0])
    scale, zero, y_scale, y_zero = (n.inputs[1:] + [""] * 4)[:4]
    ins = {"src": x, "src_scale": _one(c, scale), "src_zero": _one(c, zero),
           "dst_scale": _one(c, y_scale), "dst_zero": _one(c, y_zero)}
    shape = (x.shape[0], x.shape[1], 1, 1)
    if not channels_last:
        c.emit("qglobal_avgpool2d", ins, {}, x.dtype, shape, **n.as_output)
        return
    y = c.emit("qglobal_avgpool2d", ins, {}, x.dtype, shape, hint=n.outputs[0])
    c.reshape(y, (shape[0], 1, 1, shape[1]), out=n.outputs[0])


def _requantized(c: Converter, x: Val, scale: str, zero: str, y_scale: str, y_zero: str,
                 hint: str) -> Val:
    """8-bit `x` of (scale, zero) in (y_scale, y_zero): x itself when the two are equal,
    else dequantized and quantized again in float32 (the lookup table ONNX Runtime's
    QLinearConcat builds holds these values: its DequantizeLinear and QuantizeLinear)."""
    ins = [_one(c, name) for name in (scale, zero, y_scale, y_zero)]
    values = [None if not name else np.reshape(c.const(name, name), -1)
              for name in (scale, zero, y_scale, y_zero)]
    if (values[0] is not None and np.array_equal(values[0], values[2])
            and np.array_equal(values[1] if zero else 0, values[3] if y_zero else 0)):
        return x
    d = c.emit("dequantize", {"src": x, "scale": ins[0], "zero": ins[1]}, {"axis": 0},
               "TL_FLOAT", x.shape, hint=f"{hint}_dequantized")
    return c.emit("quantize", {"src": d, "scale": ins[2], "zero": ins[3]},
                  {"axis": 0, "dtype": x.dtype}, x.dtype, x.shape, hint=f"{hint}_requantized")


@handler("com.microsoft.QLinearConcat", 0)
def qlinear_concat(c: Converter, n: Node, *, axis):
    """Each input (X, X_scale, X_zero_point after Y_scale, Y_zero_point) requantized to
    the output's scale and zero point, then concatenated: ONNX Runtime's arithmetic."""
    y_scale, y_zero, rest = n.input(0), n.input(1), n.inputs[2:]
    if not rest or len(rest) % 3:
        raise Unsupported(f"{len(n.inputs)} inputs (Y_scale, Y_zero_point, then (X, "
                          "X_scale, X_zero_point) for each input)")
    xs = []
    for k in range(0, len(rest), 3):
        x = c.val(rest[k])
        _eight_bit(x, f"QLinearConcat's input {k // 3}")
        if y_zero and x.dtype != c.val(y_zero).dtype:
            raise Unsupported(f"input {k // 3} of dtype {x.dtype} and Y_zero_point of dtype "
                              f"{c.val(y_zero).dtype} (one dtype)")
        xs.append(_requantized(c, x, rest[k + 1], rest[k + 2], y_scale, y_zero,
                               n.outputs[0]))
    if len({x.rank for x in xs}) != 1 or not -xs[0].rank <= axis < xs[0].rank:
        raise Unsupported(f"axis {axis} of inputs of ranks {[x.rank for x in xs]}")
    axis %= xs[0].rank
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    if len(xs) == 1:
        c.reshape_output(n, xs[0], shape)
        return
    c.emit("concat", {"src": xs}, {"axis": axis}, xs[0].dtype, shape, **n.as_output)


@handler("com.microsoft.QLinearAveragePool", 0)
def qlinear_average_pool(c: Converter, n: Node, *, kernel_shape, auto_pad="NOTSET",
                         ceil_mode=0, channels_last=0, count_include_pad=0, pads=None,
                         strides=None):
    """ONNX Runtime's QLinearAveragePool: X dequantized, AveragePool's float average,
    quantized. (ONNX Runtime sums each window in its own order and adds the zero point
    before rounding: the two agree to within a step, now and then one apart.)"""
    from .conv import pool, pooled_shape

    x = c.val(n.input(0))
    _eight_bit(x, "QLinearAveragePool's input")
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"a rank-{x.rank} input (1-D, 2-D and 3-D pooling: rank 3 to 5)")
    if channels_last:
        x = _transposed(c, x, [0, x.rank - 1, *range(1, x.rank - 1)], hint=n.outputs[0])
    scale, zero, y_scale, y_zero = (n.inputs[1:] + [""] * 4)[:4]
    d = c.emit("dequantize", {"src": x, "scale": _one(c, scale), "zero": _one(c, zero)},
               {"axis": 0}, "TL_FLOAT", x.shape, hint=f"{n.outputs[0]}_dequantized")
    attrs = {"kernel_shape": kernel_shape, "auto_pad": auto_pad, "ceil_mode": ceil_mode,
             "count_include_pad": count_include_pad, "pads": pads, "strides": strides}
    shape = pooled_shape(d, **{k: v for k, v in attrs.items() if v is not None})
    pooled = pool(c, n, "avgpool2d", d, shape, **attrs,
                  out=c.fresh(f"{n.outputs[0]}_pooled"))
    y_dtype = c.val(y_zero).dtype if y_zero else x.dtype
    if y_dtype != x.dtype:
        raise Unsupported(f"X of dtype {x.dtype} and Y_zero_point of dtype {y_dtype} "
                          "(one dtype)")
    ins = {"src": pooled, "scale": _one(c, y_scale), "zero": _one(c, y_zero)}
    params = {"axis": 0, "dtype": x.dtype}
    if not channels_last:
        c.emit("quantize", ins, params, x.dtype, pooled.shape, **n.as_output)
        return
    y = c.emit("quantize", ins, params, x.dtype, pooled.shape, hint=n.outputs[0])
    _transposed(c, y, [0, *range(2, y.rank), 1], **n.as_output)


# Quantized convolution and product -----------------------------------------------------------

def _static(c: Converter, name: str, what: str, shape=None) -> Val | None:
    """ONNX tensor `name`, which must be a constant, as a LightNet constant (reshaped
    to `shape` when given); None for an absent optional input."""
    if not name:
        return None
    value = c.const(name, what)
    if shape is None or tuple(shape) == tuple(value.shape):
        return c.val(name)
    array = to_tl_array(np.reshape(value, shape), f"constant '{name}'")
    return c.tensor_const(array, DType.from_numpy(array.dtype).name, name)


def _zero(c: Converter, name: str, what: str) -> Val | None:
    """An activation's zero point: one value."""
    zero = _static(c, name, what)
    if zero is not None and math.prod(zero.shape) != 1:
        raise Unsupported(f"{what} of shape {list(zero.shape)} (one zero point per tensor)")
    return zero


def _weight_zero(c: Converter, name: str, what: str) -> Val | None:
    """A weight's zero point; None when it is 0 (symmetric weights, which oneDNN takes)."""
    if name and not np.any(c.const(name, what)):
        return None
    return _static(c, name, what)


def _eight_bit(v: Val, what: str):
    if v.dtype not in EIGHT_BIT:
        raise Unsupported(f"{what} of dtype {v.dtype} (only uint8 and int8)")


def _out_dtype(c: Converter, y_scale: str, y_zero: str, x: Val) -> str:
    """The dtype of a quantized convolution's or product's output: y_zero_point's, the
    input's without one (ONNX's reference), float without a y_scale (a QDQ operator
    whose output is no QuantizeLinear's input)."""
    if not y_scale:
        return "TL_FLOAT"
    dtype = c.val(y_zero).dtype if y_zero else x.dtype
    if dtype not in EIGHT_BIT:
        raise Unsupported(f"a quantized output of dtype {dtype} (only uint8 and int8)")
    return dtype


def qconv(c: Converter, n: Node, inputs: list[str], *, dtype: str, activation: str = "none",
          auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
          strides=None):
    """A qconv2d from the ONNX tensors `inputs`: x, x_scale, x_zero_point, w, w_scale,
    w_zero_point, y_scale, y_zero_point, B (QLinearConv's order; "" where absent)."""
    x_name, xs, xz, w_name, ws, wz, ys, yz, b_name = (inputs + [""] * 9)[:9]
    x = c.val(x_name)
    _eight_bit(x, "the quantized convolution's input")
    if x.rank not in (3, 4):
        raise Unsupported(f"{x.rank - 2}-D convolution (only 1-D and 2-D)")
    k = x.rank - 2
    weight = c.const(w_name, "w")
    strides, dilations, pads, autopad, kernel = _spatial_params(
        k, kernel_shape or weight.shape[2:], strides, dilations, pads, auto_pad)
    if k == 1:
        x = c.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
    w = _static(c, w_name, "w", weight.shape[:2] + (1,) * (k == 1) + weight.shape[2:])
    _eight_bit(w, "the quantized convolution's weight")
    ins = {"src": x, "weight": w, "bias": c.val(b_name) if b_name else None,
           "src_scale": _static(c, xs, "x_scale"), "src_zero": _zero(c, xz, "x_zero_point"),
           "weight_scale": _static(c, ws, "w_scale"),
           "weight_zero": _weight_zero(c, wz, "w_zero_point"),
           "dst_scale": _static(c, ys, "y_scale"), "dst_zero": _zero(c, yz, "y_zero_point")}
    params = {"group": group, "size": kernel, "stride": strides, "dilation": dilations,
              "padding": pads, "autopad": autopad, "dtype": dtype, "activation": activation}
    shape = c.known_shape(n)
    if shape is None:  # after an operator ONNX's shape inference does not know
        hw = x.shape[2:]
        padding = autopad_padding(hw, kernel, strides, dilations, autopad) or pads
        shape = (x.shape[0], weight.shape[0]) + tuple(
            conv2d_output_hw(hw, kernel, strides, padding, dilations)[k == 1:])
    if k == 1:
        y = c.emit("qconv2d", ins, params, dtype, shape[:2] + (1,) + shape[2:],
                   hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    else:
        c.emit("qconv2d", ins, params, dtype, shape, **n.as_output)


def _static_b(c: Converter, name: str, trans_b: bool) -> Val:
    """Constant B as a matrix or a stack of them, transposed when `trans_b`."""
    value = c.const(name, "B")
    if trans_b:
        value = np.swapaxes(value, -1, -2)
    if value.ndim == 1:
        value = value.reshape(-1, 1)
    if trans_b or value.shape != c.const(name).shape:
        array = to_tl_array(np.ascontiguousarray(value), f"constant '{name}'")
        return c.tensor_const(array, DType.from_numpy(array.dtype).name, name)
    return c.val(name)


def qmatmul(c: Converter, n: Node, inputs: list[str], *, dtype: str, trans_b=False,
            activation: str = "none", computed_b=False):
    """A qmatmul from the ONNX tensors `inputs`: a, a_scale, a_zero_point, b, b_scale,
    b_zero_point, y_scale, y_zero_point, bias ("" where absent); numpy matmul's
    shapes, B transposed first when `trans_b` (a Gemm's). B is a constant unless
    `computed_b` (a product of two activations, never transposed)."""
    a_name, as_, az, b_name, bs, bz, ys, yz, bias = (inputs + [""] * 9)[:9]
    a = c.val(a_name)
    _eight_bit(a, "the quantized product's A")
    if computed_b and not c.is_const(b_name):
        b = c.val(b_name)
        if b.rank == 1:
            b = c.reshape(b, b.shape + (1,))
    else:
        b = _static_b(c, b_name, trans_b)
    _eight_bit(b, "the quantized product's B")
    shape = None if n.op_type.startswith("com.microsoft.") else c.known_shape(n)
    if shape is None:  # an operator ONNX's inference does not know, or one after it
        shape = matmul_shape(a.shape, b.shape)
    if a.rank == 1:
        a = c.reshape(a, (1,) + a.shape)
    if b.rank == 2:
        a = c.reshape(a, (math.prod(a.shape[:-1]), a.shape[-1]))
    ins = {"src1": a, "src2": b, "bias": c.val(bias) if bias else None,
           "src1_scale": _static(c, as_, "a_scale"), "src1_zero": _zero(c, az, "a_zero_point"),
           "src2_scale": _static(c, bs, "b_scale"),
           "src2_zero": _weight_zero(c, bz, "b_zero_point"),
           "dst_scale": _static(c, ys, "y_scale"), "dst_zero": _zero(c, yz, "y_zero_point")}
    params = {"dtype": dtype, "activation": activation}
    product = matmul_shape(a.shape, b.shape)
    if product == tuple(shape):
        c.emit("qmatmul", ins, params, dtype, shape, **n.as_output)
        return
    y = c.emit("qmatmul", ins, params, dtype, product, hint=n.outputs[0])
    c.reshape(y, shape, out=n.outputs[0])


@handler("QLinearConv", 10)
def qlinear_conv(c: Converter, n: Node, *, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
    x = c.val(n.input(0))
    qconv(c, n, n.inputs, dtype=_out_dtype(c, n.input(6), n.input(7), x), auto_pad=auto_pad,
          dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
          strides=strides)


@handler("ConvInteger", 10)
def conv_integer(c: Converter, n: Node, *, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
    x, w, xz, wz = (n.inputs + [""] * 4)[:4]
    qconv(c, n, [x, "", xz, w, "", wz, "", "", ""], dtype="TL_INT32", auto_pad=auto_pad,
          dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
          strides=strides)


@handler("QLinearMatMul", 10, 21)
def qlinear_matmul(c: Converter, n: Node):
    """B a constant or computed (attention's products in ONNX Runtime's QOperator
    models)."""
    a = c.val(n.input(0))
    qmatmul(c, n, n.inputs, dtype=_out_dtype(c, n.input(6), n.input(7), a), computed_b=True)


@handler("MatMulInteger", 10)
def matmul_integer(c: Converter, n: Node):
    a, b, az, bz = (n.inputs + [""] * 4)[:4]
    qmatmul(c, n, [a, "", az, b, "", bz, "", "", ""], dtype="TL_INT32")


@handler("lightnet.QConv", 1)
def qdq_conv(c: Converter, n: Node, *, activation="none", auto_pad="NOTSET", dilations=None,
             group=1, kernel_shape=None, pads=None, strides=None):
    """QLinearConv with a float output when it has no y_scale, and a fused relu (qdq.py)."""
    x = c.val(n.input(0))
    qconv(c, n, n.inputs, dtype=_out_dtype(c, n.input(6), n.input(7), x),
          activation=activation, auto_pad=auto_pad, dilations=dilations, group=group,
          kernel_shape=kernel_shape, pads=pads, strides=strides)


@handler("com.microsoft.QGemm", 0)
def qgemm(c: Converter, n: Node, *, alpha=1.0, transA=0, transB=0):  # noqa: N803
    """ONNX Runtime's QGemm: A @ B (+ C, int32 in the accumulator's scale), quantized
    (a float output without y_scale)."""
    if transA or alpha != 1.0:
        raise Unsupported(f"transA {transA}, alpha {alpha} (only A @ B: transA 0, alpha 1)")
    a, a_scale, a_zero, b, b_scale, b_zero, bias, y_scale, y_zero = (n.inputs + [""] * 9)[:9]
    qmatmul(c, n, [a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero, bias],
            dtype=_out_dtype(c, y_scale, y_zero, c.val(a)), trans_b=bool(transB))


@handler("lightnet.QGemm", 1)
def qdq_gemm(c: Converter, n: Node, *, activation="none", transB=0):  # noqa: N803
    """QLinearMatMul with a bias (input 8), B transposed when transB, a float output
    when it has no y_scale, and a fused relu (qdq.py); B a constant or (a MatMul's) an
    activation."""
    a = c.val(n.input(0))
    qmatmul(c, n, n.inputs, dtype=_out_dtype(c, n.input(6), n.input(7), a),
            trans_b=bool(transB), activation=activation, computed_b=True)


@handler("lightnet.QLookup", 1)
def qdq_lookup(c: Converter, n: Node, *, table):
    """Element-wise float nodes of one 8-bit activation between its DequantizeLinear and a
    QuantizeLinear, as the table of their 256 results (qlookup.py) indexed by its byte;
    nothing where the table maps every code to itself."""
    x = c.val(n.input(0))
    _eight_bit(x, "the lookup's input")
    dtype = DType.from_numpy(table.dtype).name
    shape = c.known_shape(n) or x.shape
    if dtype == x.dtype and np.array_equal(table, np.arange(256, dtype=np.uint8).view(
            table.dtype)):  # every code to itself (BERT's attention scale): x as it is
        c.reshape_output(n, x, shape)
        return
    t = c.tensor_const(table, dtype, f"{n.outputs[0]}_table")
    if tuple(shape) == x.shape:
        c.emit("qlookup", {"src": x, "table": t}, {}, dtype, shape, **n.as_output)
        return
    if math.prod(shape) != math.prod(x.shape):
        raise Unsupported(f"a lookup of shape {list(x.shape)} into {list(shape)}")
    y = c.emit("qlookup", {"src": x, "table": t}, {}, dtype, x.shape, hint=n.outputs[0])
    c.reshape(y, shape, out=n.outputs[0])


@handler("lightnet.DequantizedGather", 1)
def dequantized_gather(c: Converter, n: Node, *, axis=0):
    """Gather (its `axis`) of a constant 8-bit table dequantized per tensor (qdq.py): the
    rows gathered from the integers, then dequantized."""
    from .shape import gather

    table, indices, scale, zero = n.inputs
    rows = c.fresh(f"{n.outputs[0]}_quantized")
    elem = c.onnx.helper.np_dtype_to_tensor_dtype(c.const(table, "the table").dtype)
    c.info[rows] = (elem, c.known_shape(n))  # the gathered shape, for Gather's handler
    gather(c, dataclasses.replace(n, op_type="Gather", inputs=[table, indices], outputs=[rows]),
           axis=axis)
    dequantize_linear(c, dataclasses.replace(n, op_type="DequantizeLinear",
                                             inputs=[rows, scale, zero]))
