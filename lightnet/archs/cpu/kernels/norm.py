"""Normalization kernels: inference batch normalization, its folding into scale-layer
weights, local response normalization across channels, layer normalization and group
normalization."""

import math

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = ["batchnorm", "bn2scale_wts", "groupnorm", "groupnorm_scratch", "layernorm",
           "layernorm_scratch", "lrn_scratch", "lrn"]


def _coefficient(v):
    """[C]-sized parameter math runs in float64; only the result is cast to dst's dtype."""
    return np.asarray(v, dtype=np.float64)


def _per_channel(v, ndim, dtype):
    """A [C] vector shaped to broadcast along axis 1 of an ndim-D tensor."""
    return np.asarray(v, dtype=dtype).reshape((-1,) + (1,) * (ndim - 2))


def batchnorm(src, scale, offset, mean, var, dst, *, epsilon) -> None:
    """Inference batch normalization over axis 1 of src [N, C, ...]:
    dst = (src - mean) / sqrt(var + epsilon) * scale + offset.

    Folded into one multiply and one add per element: a = scale / sqrt(var + eps),
    b = offset - mean * a (only [C]-sized temporaries)."""
    a = _coefficient(scale) / np.sqrt(_coefficient(var) + epsilon)
    b = _coefficient(offset) - _coefficient(mean) * a
    np.multiply(src, _per_channel(a, src.ndim, dst.dtype), out=dst)
    np.add(dst, _per_channel(b, src.ndim, dst.dtype), out=dst)


def bn2scale_wts(src_mean, src_var, src_scale, src_offset, dst_scale, dst_shift, dst_power, *,
                 epsilon) -> None:
    """TensorRT-style scale layer weights equivalent to a batch normalization, so that
    y = (x * dst_scale + dst_shift) ** dst_power reproduces it:
    dst_scale = scale / sqrt(var + eps), dst_shift = offset - mean * dst_scale, dst_power = 1."""
    a = _coefficient(src_scale) / np.sqrt(_coefficient(src_var) + epsilon)
    np.copyto(dst_scale, a, casting="same_kind")
    np.copyto(dst_shift, _coefficient(src_offset) - _coefficient(src_mean) * a, casting="same_kind")
    dst_power.fill(1)


def _lrn_reach(channels: int, size: int) -> tuple[int, int]:
    """Channels the window reaches before and after c, capped at the tensor's
    channels: a wider window only adds zeros, so huge sizes cost nothing."""
    before = (size - 1) // 2
    return min(before, channels - 1), min(size - 1 - before, channels - 1)


def lrn_scratch(src_shape, size, dtype) -> tuple:
    """Scratch layout of `lrn` (see kernels.scratch): squares of src with the
    window's reach of zero channels around them."""
    before, after = _lrn_reach(src_shape[1], size)
    return (("sq", (src_shape[0], src_shape[1] + before + after) + tuple(src_shape[2:]), dtype),)


def lrn(src, dst, *, size, alpha, beta, bias, ws=None) -> None:
    """Local response normalization across channels (ONNX LRN) of src [N, C, ...]:
    dst = src / (bias + alpha / size * square_sum) ** beta, square_sum[c] summing src^2
    over channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2) that exist.

    The squares sit in a zero-bordered channel buffer, so the window sum is `size`
    shifted whole-tensor adds (at most 2C - 1, whatever `size` is). `ws` is
    lrn_scratch's arrays (what they hold on entry does not matter)."""
    if ws is None:
        ws = {"sq": np.empty(*lrn_scratch(src.shape, size, dst.dtype)[0][1:])}
    c = src.shape[1]
    sq = ws["sq"]
    before, after = _lrn_reach(c, size)
    sq[:, :before] = 0
    sq[:, before + c:] = 0
    np.square(src, out=sq[:, before:before + c])
    np.copyto(dst, sq[:, :c])
    for k in range(1, before + after + 1):
        np.add(dst, sq[:, k:k + c], out=dst)
    np.multiply(dst, alpha / size, out=dst)
    np.add(dst, bias, out=dst)
    np.power(dst, -beta, out=dst)
    np.multiply(dst, src, out=dst)


def layernorm_scratch(shape, axis: int, dtype) -> tuple:
    """Scratch layout (see kernels.scratch) of `layernorm`: one statistic per
    normalized row."""
    return (("stat", (math.prod(shape[:axis]), 1), np.dtype(dtype)),)


def layernorm(src, scale, bias, dst, *, axis, epsilon, ws=None) -> None:
    """Layer normalization (ONNX LayerNormalization) over the axes `axis`.. of src:
    dst = (src - mean) / sqrt(var + epsilon) * scale + bias, mean and (biased)
    variance taken over those axes for each index of the ones before. `scale`
    and `bias` (None: 0) broadcast against the normalized axes.

    Two passes over the row (mean, then the squares of the differences) rather
    than E[x^2] - mean^2, which cancels badly when the mean is large. `ws` is
    carve(scratch, layernorm_scratch(src.shape, axis, dst.dtype))."""
    if ws is None:
        ws = {"stat": np.empty(*layernorm_scratch(src.shape, axis, dst.dtype)[0][1:])}
    stat = ws["stat"]
    rows, width = stat.shape[0], math.prod(src.shape[axis:])
    x = src.reshape(rows, width)
    d = dst.reshape(rows, width)
    np.add.reduce(x, axis=1, keepdims=True, out=stat)
    np.multiply(stat, 1 / width, out=stat)
    np.subtract(x, stat, out=d)
    np.einsum("ij,ij->i", d, d, out=stat[:, 0])  # sums of squares, no temporary
    np.multiply(stat, 1 / width, out=stat)
    np.add(stat, epsilon, out=stat)
    np.sqrt(stat, out=stat)
    np.divide(d, stat, out=d)
    np.multiply(dst, scale, out=dst)
    if bias is not None:
        np.add(dst, bias, out=dst)


def groupnorm_scratch(shape, groups: int, dtype) -> tuple:
    """Scratch layout of groupnorm (see kernels.scratch): each sample's and group's mean
    and variance."""
    stats = (shape[0], groups, 1)
    return (("mean", stats, dtype), ("var", stats, dtype))


def groupnorm(src, scale, bias, dst, *, groups: int, epsilon: float, ws=None) -> None:
    """dst = (src - mean) / sqrt(var + epsilon) per sample and group of consecutive
    channels (axis 1), then * scale + bias per channel (ONNX GroupNormalization).

    The variance is the mean of the squared deviations, which dst holds for a while:
    nothing but the statistics is kept besides dst."""
    if ws is None:
        ws = carve(None, groupnorm_scratch(src.shape, groups, dst.dtype))
    mean, var = ws["mean"], ws["var"]
    n, c = src.shape[:2]
    grouped = src.reshape(n, groups, -1)
    out = dst.reshape(n, groups, -1)
    np.mean(grouped, axis=2, keepdims=True, out=mean)
    np.subtract(grouped, mean, out=out)
    np.multiply(out, out, out=out)
    np.mean(out, axis=2, keepdims=True, out=var)
    np.add(var, epsilon, out=var)
    np.sqrt(var, out=var)
    np.subtract(grouped, mean, out=out)
    np.divide(out, var, out=out)
    channels = dst.reshape(n, c, -1)
    np.multiply(channels, scale.reshape(c, 1), out=channels)
    np.add(channels, bias.reshape(c, 1), out=channels)
