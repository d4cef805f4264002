"""Normalization: BatchNormalization (inference), InstanceNormalization, LRN,
LayerNormalization, GroupNormalization."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import Node
from .elementwise import elew

if TYPE_CHECKING:
    from ..converter import Converter


@handler("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batchnorm(c: Converter, n: Node, *, epsilon=1e-5, training_mode=0, momentum=0.9,
              spatial=1, is_test=0, consumed_inputs=None):
    # momentum and is_test only concern training; spatial 0 shows in the statistics' rank.
    if training_mode:
        raise Unsupported("training_mode 1")
    if any(c.used(n, i) for i in range(1, len(n.outputs))):
        raise Unsupported("training outputs (mean, var, saved_mean, saved_var)")
    x = c.val(n.input(0))
    x.require_float("BatchNormalization input")
    args = [c.val(n.input(i)) for i in range(1, 5)]
    if any(a.rank != 1 for a in args):
        raise Unsupported("spatial 0 (per-activation statistics)")
    scale, offset, mean, var = args
    c.emit("batchnorm", {"src": x, "scale": scale, "offset": offset, "mean": mean, "var": var},
           {"epsilon": epsilon}, x.dtype, x.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@handler("InstanceNormalization", 1, 6, 22)
def instance_norm(c: Converter, n: Node, *, epsilon=1e-5, consumed_inputs=None):
    """(x - mean) / sqrt(var + epsilon) * scale + B over each [n, c] plane, from mean
    reductions and element-wise ops (not oneDNN's average pooling, which sums a plane
    in one float32 accumulator: BiT's 25088-value GroupNorm planes came out 5.8e-6 off)."""
    x = c.val(n.input(0))
    x.require_float("InstanceNormalization input")
    if x.rank < 3:
        raise Unsupported(f"rank-{x.rank} input")
    nn, ch = x.shape[:2]
    s = math.prod(x.shape[2:])
    x4 = c.reshape(x, (nn, ch, s, 1))
    stat = (nn, ch, 1, 1)
    mean = c.emit("reduce", {"src": x4}, {"func": "mean", "axes": [2, 3], "keepdims": True},
                  x.dtype, stat, hint=f"{n.outputs[0]}_mean")
    d = elew(c, n, x4, mean, "TL_SUB", out=False)
    sq = elew(c, n, d, d, "TL_MUL", out=False)
    var = c.emit("reduce", {"src": sq}, {"func": "mean", "axes": [2, 3], "keepdims": True},
                 x.dtype, stat, hint=f"{n.outputs[0]}_var")
    eps = c.scalar(epsilon, x.dtype, f"{n.outputs[0]}_eps")
    inv = elew(c, n, elew(c, n, var, eps, "TL_SUM", out=False),
               c.scalar(-0.5, x.dtype, f"{n.outputs[0]}_rsqrt"), "TL_POW", out=False)
    scale = c.reshape(c.val(n.input(1)), (ch, 1, 1))
    bias = c.reshape(c.val(n.input(2)), (ch, 1, 1))
    y = elew(c, n, d, elew(c, n, inv, scale, "TL_MUL", out=False), "TL_MUL", out=False)
    y = elew(c, n, y, bias, "TL_SUM", out=False)
    c.reshape(y, x.shape, out=n.outputs[0])


@handler("LRN", 1, 13)
def lrn(c: Converter, n: Node, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    x = c.val(n.input(0))
    x.require_float("LRN input")
    c.emit("lrn", {"src": x}, {"size": size, "alpha": alpha, "beta": beta, "bias": bias},
           x.dtype, x.shape, out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("LayerNormalization", 17)
def layer_norm(c: Converter, n: Node, *, axis=-1, epsilon=1e-5, stash_type=1):
    # stash_type only names the type of the statistics; layernorm keeps the input's.
    if c.used(n, 1) or c.used(n, 2):
        raise Unsupported("the Mean and InvStdDev outputs")
    x = c.val(n.input(0))
    x.require_float("LayerNormalization input")
    axis = normalize_axes([axis], x.rank)[0]
    scale = c.val(n.input(1))
    bias = c.val(n.input(2)) if n.has_input(2) else None
    for t in (scale, bias):
        if t is not None and (t.rank > x.rank - axis or any(
                s not in (1, d) for s, d in zip(t.shape[::-1], x.shape[::-1]))):
            raise Unsupported(f"a Scale or B of shape {list(t.shape)} for the normalized "
                              f"axes {list(x.shape[axis:])}")
    c.emit("layernorm", {"src": x, "scale": scale, "bias": bias},
           {"axis": axis, "epsilon": epsilon}, x.dtype, x.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@handler("GroupNormalization", 18, 21)
def group_norm(c: Converter, n: Node, *, num_groups, epsilon=1e-5, stash_type=1):
    """One groupnorm op. Version 18 scales and shifts per group: constant scale and bias
    are repeated to one per channel (computed ones are unsupported); from 21, per channel.
    stash_type only names the type of the statistics, which are in the input's."""
    x = c.val(n.input(0))
    x.require_float("GroupNormalization input")
    if x.rank < 2 or num_groups < 1 or x.shape[1] % num_groups:
        raise Unsupported(f"{num_groups} groups of the channels of {list(x.shape)} "
                          "(expected a number of groups dividing the channels)")
    ch = x.shape[1]
    args = []
    for i, what in ((1, "scale"), (2, "bias")):
        if n.version < 21:
            value = np.asarray(c.const(n.input(i), what)).reshape(-1)
            if value.size != num_groups:
                raise Unsupported(f"{what} of {value.size} values for {num_groups} groups")
            args.append(c.tensor_const(np.repeat(value, ch // num_groups), x.dtype,
                                       f"{n.outputs[0]}_{what}"))
        else:
            v = c.val(n.input(i))
            if v.shape != (ch,):
                raise Unsupported(f"{what} of shape {list(v.shape)} (expected [{ch}])")
            args.append(v)
    c.emit("groupnorm", {"src": x, "scale": args[0], "bias": args[1]},
           {"groups": num_groups, "epsilon": epsilon}, x.dtype, x.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])
