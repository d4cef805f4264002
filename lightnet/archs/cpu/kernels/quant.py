"""Quantized kernels: quantize, dequantize, and the convolution and matrix product of
8-bit integers, computing what ONNX's reference does (QuantizeLinear, DequantizeLinear,
QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger).

The integer products accumulate in float64, which holds every sum of products of
8-bit values exactly (|sum| < 2^53), so the result is the int32 accumulation ONNX
specifies while numpy's BLAS does the work (numpy's integer matmul has none); a
matrix product short enough that its sums stay below 2^24 accumulates in float32.
Requantization is ONNX's: the accumulator times the float32 multiplier
src_scale * weight_scale / dst_scale in float64, plus the output zero point, rounded
half to even and saturated.
"""

import numpy as np

from lightnet.archs.cpu.kernels.conv import conv2d, conv2d_scratch
from lightnet.archs.cpu.kernels.scratch import carve

__all__ = ["qlookup", "qlookup_pairs", "quantize", "quantize_scratch", "dequantize", "per_axis", "qconv2d_scratch",
           "qconv2d_workspace", "qweight", "qmultiplier", "qconv2d", "qmatmul_dtype",
           "qmatmul_scratch",
           "qmatmul", "requantize", "qbias", "zero_point_int32", "dynamic_quantize",
           "qelew_factors", "qelew_scratch", "qelew", "qglobal_avgpool2d_scratch",
           "qglobal_avgpool2d"]


def per_axis(values, shape, axis: int):
    """`values` (one value, or one per index of `axis`) shaped to broadcast against a
    tensor of `shape`; None stays None."""
    if values is None:
        return None
    values = np.reshape(values, -1)
    if values.size == 1:
        return values.reshape(())
    view = [1] * len(shape)
    view[axis] = values.size
    return values.reshape(view)


def _range(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def quantize_scratch(shape) -> tuple:
    """Scratch layout of `quantize`: the float32 quotient before rounding."""
    return (("q", tuple(shape), np.float32),)


def quantize(src, scale, zero, dst, *, axis: int, ws=None) -> None:
    """dst = saturate(round_half_even(src / scale) + zero) (ONNX QuantizeLinear): `scale`
    and `zero` (None: 0) one value, or one per index of `axis`."""
    q = carve(None, quantize_scratch(src.shape))["q"] if ws is None else ws["q"]
    np.divide(src, per_axis(scale, src.shape, axis), out=q)
    np.rint(q, out=q)
    if zero is not None:
        np.add(q, per_axis(zero, src.shape, axis), out=q)
    lo, hi = _range(dst.dtype)
    np.clip(q, lo, hi, out=q)
    np.copyto(dst, q, casting="unsafe")


def dynamic_quantize(src, dst, scale, zero, *, ws) -> None:
    """dst, scale and zero of ONNX DynamicQuantizeLinear, in float32 as its reference
    computes them: the range [min(0, min src), max(0, max src)] over 0..255 (a scale of
    1 / 255 for an empty one), the zero point -min / scale saturated and rounded half to
    even, then quantize."""
    lo = np.float32(min(0.0, np.min(src)))
    hi = np.float32(max(0.0, np.max(src)))
    step = np.float32(1.0 if hi == lo else hi - lo) / np.float32(255)
    point = np.rint(np.clip(np.float32(0) - lo / step, 0, 255))
    scale[...] = step
    zero[...] = point
    quantize(src, scale, zero, dst, axis=0, ws=ws)


def dequantize(src, scale, zero, dst, *, axis: int) -> None:
    """dst = (src - zero) * scale in float32 (ONNX DequantizeLinear); `scale` and
    `zero` (None: 0) one value, or one per index of `axis`."""
    if zero is None:
        np.copyto(dst, src, casting="unsafe")
    else:
        np.subtract(src, per_axis(zero, src.shape, axis), out=dst, dtype=dst.dtype,
                    casting="unsafe")
    np.multiply(dst, per_axis(scale, src.shape, axis), out=dst)


def qweight(weight, zero, axis: int, dtype=np.float64) -> np.ndarray:
    """weight - zero (per index of `axis` or one value) in `dtype` (qmatmul_dtype's for a
    product): what the products read, prepared once at load."""
    w = np.asarray(weight, dtype=np.float64)
    if zero is not None:
        w = w - per_axis(np.asarray(zero, dtype=np.float64), w.shape, axis)
    return np.ascontiguousarray(w, dtype=dtype)


def qmultiplier(src_scale, weight_scale, dst_scale):
    """The float32 factor taking an accumulator to the output: src_scale * weight_scale
    / dst_scale (without dst_scale: to a float output), as ONNX's reference computes it;
    None for an int32 output (no scales)."""
    if src_scale is None:
        return None
    m = np.multiply(np.reshape(src_scale, -1), np.reshape(weight_scale, -1),
                    dtype=np.float32)
    if dst_scale is not None:
        m = np.divide(m, np.reshape(dst_scale, -1), dtype=np.float32)
    return m


def requantize(acc, dst, multiplier, zero, *, axis: int, activation: str = "none") -> None:
    """dst from the accumulator `acc` (float64, exact integers; overwritten): acc itself
    for an int32 dst; acc * multiplier for a float dst; else saturate(round_half_even(
    acc * multiplier) + zero). `multiplier` is one value or one per index of `axis`; a
    relu `activation` clamps the scaled value at 0 before the zero point is added."""
    if multiplier is not None:
        np.multiply(acc, per_axis(multiplier, acc.shape, axis), out=acc)
    if activation == "relu":
        np.maximum(acc, 0, out=acc)
    if dst.dtype.kind == "f" or dst.dtype == np.int32:
        np.copyto(dst, acc, casting="unsafe")
        return
    if zero is not None:
        np.add(acc, np.reshape(zero, ()), out=acc)
    lo, hi = _range(dst.dtype)
    np.clip(acc, lo, hi, out=acc)
    np.rint(acc, out=acc)
    np.copyto(dst, acc, casting="unsafe")


def qconv2d_scratch(src_shape, weight_shape, dst_shape, *, stride, padding) -> tuple:
    """Scratch layout of `qconv2d`: the source minus its zero point and the
    accumulator (float64), then conv2d's im2col buffers in float64."""
    return ((("x", tuple(src_shape), np.float64), ("acc", tuple(dst_shape), np.float64))
            + conv2d_scratch(src_shape, weight_shape, dst_shape, stride=stride,
                             padding=padding, dtype=np.float64))


def qconv2d_workspace(src_shape, weight_shape, dst_shape, *, stride, padding,
                      scratch=None) -> dict:
    return carve(scratch, qconv2d_scratch(src_shape, weight_shape, dst_shape, stride=stride,
                                          padding=padding))


def qconv2d(src, src_zero, weight, bias, dst, *, multiplier, dst_zero, group, stride,
            padding, dilation, activation="none", ws=None) -> None:
    """Quantized 2-D convolution (ONNX QLinearConv / ConvInteger): acc = conv(src -
    src_zero, weight) + bias, the padding reading 0 after the zero point is taken off;
    `weight` is qweight's (its zero point taken off, float64); then requantize."""
    if ws is None:
        ws = qconv2d_workspace(src.shape, weight.shape, dst.shape, stride=stride,
                               padding=padding)
    x, acc = ws["x"], ws["acc"]
    if src_zero is None:
        np.copyto(x, src)
    else:
        np.subtract(src, np.reshape(src_zero, ()), out=x, dtype=np.float64)
    conv2d(x, weight, None, acc, group=group, stride=stride, padding=padding,
           dilation=dilation, ws=ws)
    if bias is not None:
        np.add(acc, np.reshape(bias, (1, -1, 1, 1)), out=acc)
    requantize(acc, dst, multiplier, dst_zero, axis=1, activation=activation)


def qmatmul_dtype(depth: int):
    """The float dtype a product of 8-bit values less their zero points (each within
    +-255) over `depth` terms is summed in exactly: float32 while every partial sum stays
    below 2^24 (depth <= 258: attention's products, twice as fast), else float64."""
    return np.float32 if depth * 255 * 255 < 1 << 24 else np.float64


def qmatmul_scratch(a_shape, dst_shape, computed_b=None) -> tuple:
    """Scratch layout of `qmatmul`: A minus its zero point (in qmatmul_dtype's), the
    accumulator (float64; and in float32 first when the sums are), and B minus its zero
    point when B is computed (`computed_b` its shape)."""
    dtype = qmatmul_dtype(a_shape[-1])
    layout = (("a", tuple(a_shape), dtype), ("acc", tuple(dst_shape), np.float64))
    if dtype == np.float32:
        layout += (("acc32", tuple(dst_shape), np.float32),)
    return layout + ((("b", tuple(computed_b), dtype),) if computed_b else ())


def qmatmul(src1, src1_zero, src2, bias, dst, *, multiplier, dst_zero, activation="none",
            ws=None, src2_zero=None) -> None:
    """Quantized matrix product (ONNX QLinearMatMul / MatMulInteger, and a quantized
    Gemm): acc = (A - src1_zero) @ (B - src2_zero) + bias, stacks of matrices
    broadcasting as numpy's matmul; then requantize, per column. `src2` is qweight's
    (a weight, its zero point taken off at load, in qmatmul_dtype's), or the 8-bit
    integers of a computed B, whose zero point (per column or one) is taken off here."""
    if ws is None:
        computed = None if src2.dtype.kind == "f" else src2.shape
        ws = carve(None, qmatmul_scratch(src1.shape, dst.shape, computed))
    a, acc = ws["a"], ws["acc"]
    if src1_zero is None:
        np.copyto(a, src1)
    else:
        np.subtract(src1, np.reshape(src1_zero, ()), out=a, dtype=a.dtype)
    if src2.dtype.kind != "f":
        b = ws["b"]
        np.subtract(src2, 0 if src2_zero is None else per_axis(src2_zero, src2.shape,
                                                               src2.ndim - 1),
                    out=b, dtype=b.dtype)
        src2 = b
    if "acc32" in ws:
        np.matmul(a, src2, out=ws["acc32"])
        np.copyto(acc, ws["acc32"])
    else:
        np.matmul(a, src2, out=acc)
    if bias is not None:
        np.add(acc, bias, out=acc)
    requantize(acc, dst, multiplier, dst_zero, axis=acc.ndim - 1, activation=activation)


def qbias(bias, src_scale, weight_scale):
    """An int32 bias in float32, times src_scale * weight_scale (per output channel):
    what oneDNN adds after scaling the accumulator; None for None."""
    if bias is None:
        return None
    if src_scale is None:
        return np.asarray(bias, dtype=np.float32)
    scale = np.multiply(np.reshape(src_scale, -1), np.reshape(weight_scale, -1),
                        dtype=np.float32)
    return np.multiply(bias, scale, dtype=np.float32)


def zero_point_int32(zero):
    """An 8-bit zero point as int32 (how oneDNN takes it); None for None."""
    return None if zero is None else np.asarray(zero, dtype=np.int32).reshape(-1)


def qelew_factors(scale1, zero1, scale2, zero2, dst_scale, dst_zero, elew_op) -> tuple:
    """What oneDNN's binary computes `qelew` with (static scales and zero points; the
    zero points of a product's inputs absent): dst = f1 * src1 + f2 * src2 + shift
    (TL_SUM) or f1 * src1 * f2 * src2 + shift (TL_MUL), rounded and saturated: float32
    arrays [1] (computed in float64) by name, scale1 (f1), scale2 (f2) and shift."""
    sa, sb, sc = (float(np.reshape(s, ())) for s in (scale1, scale2, dst_scale))
    za, zb, zc = (0.0 if z is None else float(np.reshape(z, ())) for z in (zero1, zero2,
                                                                          dst_zero))
    if elew_op == "TL_SUM":
        factors = (sa / sc, sb / sc, zc - (sa * za + sb * zb) / sc)
    else:
        factors = (sa / sc, sb, zc)
    return {name: np.array([f], dtype=np.float32)
            for name, f in zip(("scale1", "scale2", "shift"), factors)}


def qelew_scratch(shape, src2_shape=None) -> tuple:
    """Scratch layout of `qelew`: the first input dequantized (float32) in the output's
    shape, the second in its own (`src2_shape`; the output's when None), broadcast as
    the two combine."""
    return (("a", tuple(shape), np.float32),
            ("b", tuple(shape if src2_shape is None else src2_shape), np.float32))


def qelew(src1, scale1, zero1, src2, scale2, zero2, dst_scale, dst_zero, dst, *, elew_op,
          ws) -> None:
    """ONNX Runtime's QLinearAdd (TL_SUM) or QLinearMul (TL_MUL): both inputs dequantized
    in float32, broadcast to dst's shape, added or multiplied, then quantized to dst."""
    a, b = ws["a"], ws["b"]
    for src, zero, scale, out in ((src1, zero1, scale1, a), (src2, zero2, scale2, b)):
        np.subtract(src, 0 if zero is None else np.reshape(zero, ()), out=out,
                    dtype=np.float32)
        np.multiply(out, np.reshape(scale, ()), out=out)
    (np.add if elew_op == "TL_SUM" else np.multiply)(a, b, out=a)
    quantize(a, dst_scale, dst_zero, dst, axis=0, ws={"q": a})


def qglobal_avgpool2d_scratch(shape) -> tuple:
    """Scratch layout of `qglobal_avgpool2d`: the sums (float64, exact) and the scaled
    sums (float32), [N, C]."""
    return (("sum", tuple(shape[:2]), np.float64), ("q", tuple(shape[:2]), np.float32))


def qglobal_avgpool2d(src, src_scale, src_zero, dst_scale, dst_zero, dst, *, ws) -> None:
    """ONNX Runtime's QLinearGlobalAveragePool of NCHW `src`: (sum - src_zero * H * W)
    times the float32 factor src_scale / (dst_scale * H * W), rounded half to even, plus
    dst_zero, saturated."""
    total, q = ws["sum"], ws["q"]
    size = src.shape[2] * src.shape[3]
    np.sum(src, axis=(2, 3), dtype=np.float64, out=total)
    if src_zero is not None:
        np.subtract(total, float(np.reshape(src_zero, ())) * size, out=total)
    factor = np.float32(np.reshape(src_scale, ())[()]) / (
        np.float32(np.reshape(dst_scale, ())[()]) * np.float32(size))
    np.multiply(total, factor, out=q, dtype=np.float32, casting="unsafe")
    np.rint(q, out=q)
    if dst_zero is not None:
        np.add(q, np.reshape(dst_zero, ()), out=q)
    lo, hi = _range(dst.dtype)
    np.clip(q, lo, hi, out=q)
    np.copyto(dst.reshape(q.shape), q, casting="unsafe")


def qlookup_pairs(table) -> np.ndarray:
    """The table of two adjacent codes at once (65,536 uint16 entries, 128 KiB): a
    lookup of the pair's two bytes gives both results, half as many numpy steps."""
    pairs = np.arange(1 << 16, dtype=np.uint16).view(np.uint8)
    return np.asarray(table).view(np.uint8)[pairs].view(np.uint16)


def qlookup(src, table, pairs, dst) -> None:
    """dst = table[byte of src]: an 8-bit tensor through the table of its 256 codes (an
    int8 source read as its bytes, so -1 is entry 255), two bytes at a time through
    `pairs` (qlookup_pairs of the table)."""
    s, d = src.reshape(-1).view(np.uint8), dst.reshape(-1).view(np.uint8)
    even = s.size & ~1
    np.take(pairs, s[:even].view(np.uint16), out=d[:even].view(np.uint16), mode="clip")
    if even < s.size:
        d[-1] = np.asarray(table).view(np.uint8)[s[-1]]
