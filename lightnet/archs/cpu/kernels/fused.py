"""What the optimizer fuses into a producing op (conv2d, matmul).

A batchnorm that follows is folded into the weights once, at load (so is a
multiply or add by a constant of one value per channel); a residual
add and an activation are applied to the destination in place, so the fused
op makes no intermediate tensor and no extra pass over memory per fused op.
"""

import math

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = [
    "ACTIVATIONS",
    "activate",
    "activate_scratch",
    "activate_workspace",
    "channel_operand",
    "fold_batchnorm_conv",
    "fold_batchnorm_gemm",
    "fold_channel_operand_conv",
    "merge_conv_groups",
]

ACTIVATIONS = ("none", "relu", "lrelu", "sigmoid", "tanh", "clip")


def _bn_scale_shift(scale, offset, mean, var, epsilon):
    """Per-channel s, t with batchnorm(x) = x * s + t, in float64."""
    s = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + epsilon)
    return s, np.asarray(offset, np.float64) - np.asarray(mean, np.float64) * s


def fold_batchnorm_conv(weight, bias, scale, offset, mean, var, epsilon, dtype):
    """(weight', bias') such that conv(x, weight', bias') == batchnorm(conv(x, weight, bias))
    (a weight [O, C / group, *kernel] of any number of kernel dims)."""
    s, t = _bn_scale_shift(scale, offset, mean, var, epsilon)
    w = np.asarray(weight, np.float64)
    folded_weight = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(dtype)
    b = 0.0 if bias is None else np.asarray(bias, np.float64)
    return folded_weight, (b * s + t).astype(dtype)


def channel_operand(shape, dst_shape) -> bool:
    """Whether an operand of `shape` holds one value per channel (axis 1) of `dst_shape`,
    or one value: [C, 1, 1] or [1, C, 1, 1] beside [N, C, H, W] (and so in 3-D), as
    Caffe2-converted models scale and shift a convolution's output."""
    shape = (1,) * (len(dst_shape) - len(shape)) + tuple(shape)
    return len(shape) == len(dst_shape) >= 2 and shape[0] == 1 and shape[1] in (
        1, dst_shape[1]) and all(d == 1 for d in shape[2:])


def fold_channel_operand_conv(weight, bias, operand, elew_op, dtype):
    """(weight', bias') such that conv(x, weight', bias') == conv(x, weight, bias) <elew_op>
    operand (TL_MUL, TL_DIV, TL_SUM or TL_SUB), the operand one value per output channel
    (channel_operand)."""
    w, b = np.asarray(weight, np.float64), np.asarray(bias, np.float64)
    v = np.broadcast_to(np.asarray(operand, np.float64).reshape(-1), b.shape)
    if elew_op in ("TL_MUL", "TL_DIV"):
        s = v if elew_op == "TL_MUL" else 1.0 / v
        return ((w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(dtype),
                (b * s).astype(dtype))
    return w.astype(dtype), (b + (v if elew_op == "TL_SUM" else -v)).astype(dtype)


def merge_conv_groups(weight, group: int, merge: int):
    """The weight [O, k * C/group, kh, kw] of the same convolution in group / k groups (k =
    `merge`): each merged group's weight is block-diagonal, the k original groups' weights
    on its diagonal and zeros between, so every output channel still reads only its own
    group's input channels."""
    w = np.asarray(weight)
    out, per_group = w.shape[0], w.shape[1]
    out_per_group = out // group
    merged = np.zeros((out, per_group * merge) + w.shape[2:], w.dtype)
    for g in range(group):
        at = (g % merge) * per_group
        rows = slice(g * out_per_group, (g + 1) * out_per_group)
        merged[rows, at:at + per_group] = w[rows]
    return merged


def fold_batchnorm_gemm(src2, bias, scale, offset, mean, var, epsilon, *, transB, beta, dtype):
    """(src2', bias') such that matmul(A, src2', bias', alpha, beta=1) is the
    batchnorm (over output columns) of matmul(A, src2, bias, alpha, beta)."""
    s, t = _bn_scale_shift(scale, offset, mean, var, epsilon)
    b = np.asarray(src2, np.float64)
    folded_b = b * (s[:, None] if transB else s[None, :])
    c = 0.0 if bias is None else beta * np.asarray(bias, np.float64)
    return folded_b.astype(dtype), ((c * s) + t).astype(dtype)


# lrelu's products are made this many elements at a time, into scratch of that
# size (not of the whole destination): the block stays in cache between the
# multiply and the maximum.
_ACT_BLOCK = 16384


def activate_scratch(shape, activation, dtype) -> tuple:
    """Scratch layout of `activate` (see kernels.scratch): a block of products for
    lrelu, nothing for the others."""
    if activation != "lrelu":
        return ()
    return (("act", (min(math.prod(shape), _ACT_BLOCK),), dtype),)


def activate_workspace(shape, activation, dtype, scratch=None):
    """`activate`'s ws: its scratch carved from `scratch` (new when None), or None."""
    return carve(scratch, activate_scratch(shape, activation, dtype)).get("act")


def activate(dst, activation, *, negslope=0.0, clip_min=0.0, clip_max=0.0, ws=None):
    """Apply `activation` to dst in place (same semantics as the relu, lrelu,
    sigmoid, tanh and clip ops)."""
    if activation == "none":
        return
    if activation == "relu":
        if dst.dtype.kind == "f" and dst.size >= 8192:
            np.clip(dst, 0, np.inf, out=dst)  # 3x faster than np.maximum(dst, 0): see relu
        else:
            np.maximum(dst, 0, out=dst)
    elif activation == "lrelu":
        if ws is None:
            ws = activate_workspace(dst.shape, activation, dst.dtype)
        flat = np.reshape(dst, -1, copy=False)
        slope = dst.dtype.type(negslope)
        # x * a is above x for x < 0 exactly when a <= 1; below it when a > 1.
        pick = np.maximum if negslope <= 1 else np.minimum
        for start in range(0, flat.size, ws.size):
            part = flat[start:start + ws.size]
            products = ws[:part.size]
            np.multiply(part, slope, out=products)
            pick(part, products, out=part)
    elif activation == "sigmoid":
        np.negative(dst, out=dst)
        np.exp(dst, out=dst)
        np.add(dst, 1, out=dst)
        np.reciprocal(dst, out=dst)
    elif activation == "tanh":
        np.tanh(dst, out=dst)
    elif activation == "clip":
        np.clip(dst, clip_min, clip_max, out=dst)
    else:
        raise ValueError(f"unknown activation '{activation}' (known: {', '.join(ACTIVATIONS)})")
