"""Shape and data movement: Concat, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
Identity, Dropout, Pad, Slice, Split, Gather, Tile, Range, and the constant ops that
reach mapping only when they could not be folded."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from lightnet.ir.shapes import gather_shape

from ..dispatch import handler
from ..dtypes import tl_dtype
from ..errors import Unsupported
from ..folding import (flatten_shape, normalize_axes, reshape_target, slice_inputs, slice_params,
                       split_sizes, squeeze_axes, unsqueeze_shape)
from ..graph import Node, Val, lnshape, pyval

if TYPE_CHECKING:
    from ..converter import Converter


@handler("Concat", 1, 4, 11, 13)
def concat(c: Converter, n: Node, *, axis=1):
    names = [x for x in n.inputs if x and not c.is_empty(x)]  # (empty ones add nothing)
    if not names:
        raise Unsupported("every input is empty")
    xs = [c.val(x) for x in names]
    axis = normalize_axes([axis], xs[0].rank)[0]
    shape = c.out_shape(n)
    if len(xs) == 1:  # the input itself, no op (DenseNet's first layers concatenate one)
        c.reshape_output(n, xs[0], shape)
        return
    if len({x.dtype for x in xs}) > 1:
        raise Unsupported("inputs of different dtypes")
    c.emit("concat", {"src": xs}, {"axis": axis}, xs[0].dtype, shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@handler("Reshape", 1, 5, 13, 14, 19, 21, 23, 24, 25)
def reshape(c: Converter, n: Node, *, shape=None, allowzero=0, consumed_inputs=None):
    x = c.val(n.input(0))
    if n.version >= 5:
        shape = c.const(n.input(1), "shape")
    c.reshape_output(n, x, reshape_target(shape, x.shape, allowzero))


@handler("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
def flatten(c: Converter, n: Node, *, axis=1):
    x = c.val(n.input(0))
    c.reshape_output(n, x, flatten_shape(x.shape, axis))


@handler("Squeeze", 1, 11, 13, 21, 23, 24, 25)
def squeeze(c: Converter, n: Node, *, axes=None):
    x = c.val(n.input(0))
    if n.version >= 13:
        axes = c.const(n.input(1), "axes") if n.has_input(1) else None
    axes = squeeze_axes(axes, x.shape)
    if any(x.shape[a] != 1 for a in axes):
        raise Unsupported(f"squeezing axes {axes} of shape {list(x.shape)}")
    c.reshape_output(n, x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@handler("Unsqueeze", 1, 11, 13, 21, 23, 24, 25)
def unsqueeze(c: Converter, n: Node, *, axes=None):
    x = c.val(n.input(0))
    if n.version >= 13:
        axes = c.const(n.input(1), "axes")
    c.reshape_output(n, x, unsqueeze_shape(axes, x.shape))


@handler("Transpose", 1, 13, 21, 23, 24, 25)
def transpose(c: Converter, n: Node, *, perm=None):
    x = c.val(n.input(0))
    perm = list(range(x.rank))[::-1] if perm is None else normalize_axes(perm, x.rank)
    if sorted(perm) != list(range(x.rank)):
        raise Unsupported(f"perm {perm} of a rank-{x.rank} input (not a permutation)")
    shape = tuple(x.shape[p] for p in perm)
    if perm == sorted(perm) or x.rank <= 1:
        c.reshape_output(n, x, shape)
        return
    c.emit("transpose", {"src": x}, {"axes": perm}, x.dtype, shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@handler("Dropout", 1, 6, 7, 10, 12, 13, 22)
def dropout(c: Converter, n: Node, *, ratio=0.5, is_test=0, seed=None, consumed_inputs=None):
    # At inference Dropout is the identity, whatever its ratio and seed; its mask keeps
    # every element (from version 12; before, the spec leaves it open and ONNX Runtime
    # gives false).
    if n.version >= 12 and n.has_input(2):
        if bool(np.asarray(c.const(n.input(2), "training_mode")).reshape(())):
            raise Unsupported("training_mode true")
    identity(c, n)
    if c.used(n, 1):
        if n.version < 12:
            raise Unsupported(f"the mask output of Dropout-{n.version}")
        x = c.val(n.input(0))
        c.result(n, c.tensor_const(np.ones(x.shape, bool), "TL_BOOL", f"{n.outputs[1]}_mask"), 1)


@handler("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def identity(c: Converter, n: Node):
    x = c.val(n.input(0))
    c.reshape_output(n, x, x.shape)


@handler("Pad", 1)
def pad_1(c: Converter, n: Node, *, paddings, mode="constant", value=0.0):
    _pad(c, n, _pad_input(c, n, mode), mode, list(paddings), value)


@handler("Pad", 2)
def pad_2(c: Converter, n: Node, *, pads, mode="constant", value=0.0):
    _pad(c, n, _pad_input(c, n, mode), mode, list(pads), value)


@handler("Pad", 11, 13, 18, 19, 21, 23, 24)
def pad(c: Converter, n: Node, *, mode="constant"):
    x = _pad_input(c, n, mode)
    pads = [int(p) for p in c.const(n.input(1), "pads").reshape(-1)]
    value = 0.0
    if n.has_input(2):
        value = float(c.const(n.input(2), "constant_value").reshape(-1)[0])
    if n.has_input(3):
        axes = normalize_axes(c.const(n.input(3), "axes").reshape(-1), x.rank)
        if len(pads) != 2 * len(axes):
            raise Unsupported(f"{len(pads)} pads for {len(axes)} axes (expected {2 * len(axes)})")
        full = [0] * (2 * x.rank)
        for k, a in enumerate(axes):
            full[a] = pads[k]
            full[a + x.rank] = pads[k + len(axes)]
        pads = full
    _pad(c, n, x, mode, pads, value)


def _pad_input(c: Converter, n: Node, mode: str) -> Val:
    x = c.val(n.input(0))
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"mode {mode}")
    return x


def _pad(c: Converter, n: Node, x: Val, mode: str, pads: list[int], value: float):
    if len(pads) != 2 * x.rank:
        raise Unsupported(f"{len(pads)} pads for a rank-{x.rank} input")
    if not math.isfinite(value):
        raise Unsupported(f"constant value {value}")
    if not any(pads):
        c.reshape_output(n, x, x.shape)
        return
    if x.dtype == "TL_BOOL":
        raise Unsupported("bool input")
    c.emit("pad", {"src": x}, {"pads": pads, "mode": mode, "value": value}, x.dtype,
           c.out_shape(n), out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("Slice", 1, 10, 11, 13)
def slice_(c: Converter, n: Node, *, starts=None, ends=None, axes=None):
    x = c.val(n.input(0))
    ins = [None] + [c.const(n.input(i), "Slice parameter") if n.has_input(i) else None
                    for i in range(1, len(n.inputs))]
    y = x
    for axis, start, end, step in slice_params(*slice_inputs(n.version, ins, starts, ends, axes),
                                               x.shape):
        length = len(range(start, end, step))
        if length == 0:
            raise Unsupported("an empty slice")
        c.limit(length, len(range(start, x.shape[axis] if step > 0 else -1, step)))
        hint = f"{n.outputs[0]}_axis{axis}"
        if step == 1 or length == 1:
            y = c.slice(y, axis, start, length, hint)
        else:
            y = c.emit("strided_slice", {"src": y},
                       {"axis": axis, "start": start, "step": step, "len": length}, y.dtype,
                       y.shape[:axis] + (length,) + y.shape[axis + 1:], hint=hint)
    c.reshape_output(n, y, y.shape)


@handler("Split", 1, 2, 11, 13, 18)
def split(c: Converter, n: Node, *, axis=0, split=None, num_outputs=None):
    x = c.val(n.input(0))
    ins = [None, c.const(n.input(1), "split") if n.has_input(1) else None]
    axis, sizes = split_sizes(n.version, ins, x.shape, len(n.outputs), axis, split, num_outputs)
    start = 0
    for o, size in zip(n.outputs, sizes):
        if o:
            if size <= 0:
                raise Unsupported("an empty split")
            c.slice(x, axis, start, size, o, out=o)
            c.vals[o] = Val(o, x.dtype, x.shape[:axis] + (size,) + x.shape[axis + 1:])
        start += size


@handler("Gather", 1, 11, 13)
def gather(c: Converter, n: Node, *, axis=0):
    x = c.val(n.input(0))
    axis = normalize_axes([axis], x.rank)[0]
    if not c.is_const(n.input(1)):
        _gather_pick(c, n, x, axis)
        return
    from lightnet.archs.cpu.kernels import gather_indices

    idx = np.asarray(c.const(n.input(1)))
    # Indices of one value (a ConstantOfShape's view, of any size): that value is checked.
    one_value = idx.size > 1 and not any(idx.strides)
    try:
        gather_indices(idx.reshape(-1)[:1] if one_value else idx, x.shape[axis])
    except ValueError as e:
        raise Unsupported(str(e)) from None
    y = c.emit("gather", {"src": x, "indices": c.val(n.input(1))}, {"axis": axis}, x.dtype,
               gather_shape(x.shape, lnshape(idx.shape), axis), hint=n.name or n.outputs[0])
    c.reshape_output(n, y, c.out_shape(n))


def _gather_pick(c: Converter, n: Node, x: Val, axis: int):
    """Gather with computed indices (an embedding lookup): pick1d of rows of `x`."""
    idx = c.val(n.input(1))
    if math.prod(x.shape[:axis]) != 1:
        raise Unsupported(f"computed indices on axis {axis} of {list(x.shape)} "
                          "(only an axis with no larger axis before it)")
    if idx.dtype != "TL_INT32":
        raise Unsupported(f"indices of dtype {idx.dtype}")
    count = math.prod(idx.shape)
    steps = _range_steps(c, n.input(1))
    if steps is not None:  # position ids: the rows of the table bound their number
        c.limit(count, len(range(steps[0], x.shape[axis], steps[1])))
    stride = math.prod(x.shape[axis + 1:])
    flat_x = c.reshape(x, (math.prod(x.shape),))
    flat_i = c.reshape(idx, (count,))
    y = c.emit("pick1d", {"src": flat_x, "src_index": flat_i}, {"len": count, "stride": stride},
               x.dtype, (count * stride,), hint=f"{n.outputs[0]}_pick")
    c.reshape_output(n, y, c.out_shape(n))


# Nodes that give their input's values, in the same number.
_SAME_VALUES = frozenset({"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Cast"})


def _range_steps(c: Converter, name: str) -> tuple[int, int] | None:
    """(start, delta) of the Range of whole numbers counting up from >= 0 whose values
    `name` holds (through reshapes and casts), or None."""
    producers = {o: node for node in c.nodes for o in node.outputs}
    node = producers.get(name)
    while node is not None and node.op_type in _SAME_VALUES:
        node = producers.get(node.input(0))
    if node is None or node.op_type != "Range" or not all(
            c.is_const(node.input(i)) for i in (0, 2)):
        return None
    start, delta = (np.asarray(c.const(node.input(i))).reshape(-1) for i in (0, 2))
    if start.size != 1 or delta.size != 1 or start.dtype.kind not in "iu":
        return None
    return (int(start[0]), int(delta[0])) if start[0] >= 0 and delta[0] > 0 else None


# Repeats a Tile makes with one concat; more are an add of zeros broadcasting, so that
# the IR of a Tile by 10**6 does not list 10**6 inputs.
TILE_CONCAT = 64


@handler("Tile", 6, 13)
def tile(c: Converter, n: Node):
    x = c.val(n.input(0))
    repeats = [int(r) for r in c.const(n.input(1), "repeats").reshape(-1)]
    if len(repeats) != x.rank or any(r < 1 for r in repeats):
        raise Unsupported(f"repeats {repeats} of a rank-{x.rank} input")
    y = x
    for axis, r in enumerate(repeats):
        shape = y.shape[:axis] + (y.shape[axis] * r,) + y.shape[axis + 1:]
        hint = f"{n.outputs[0]}_axis{axis}"
        if 1 < r <= TILE_CONCAT:
            y = c.emit("concat", {"src": [y] * r}, {"axis": axis}, x.dtype, shape, hint=hint)
        elif r > TILE_CONCAT:
            if x.dtype == "TL_BOOL":
                raise Unsupported(f"{r} repeats of a bool tensor (at most {TILE_CONCAT})")
            copies = y.shape[:axis] + (r,) + y.shape[axis:]
            one = c.reshape(y, y.shape[:axis] + (1,) + y.shape[axis:])
            y = c.emit("elew", {"src1": one, "src2": c.zeros(copies, x.dtype, hint)},
                       {"elew_op": "TL_SUM"}, x.dtype, copies, hint=hint)
            y = c.reshape(y, shape)
    c.reshape_output(n, y, y.shape)


@handler("Range", 11, 27)
def range_(c: Converter, n: Node, *, stash_type=1):
    """A Range left unfolded because its length follows a symbolic dim (position ids
    to the sequence length): an arange op, its bounds params that follow the dim.
    arange computes start + i * delta in double, as precise as Range-27's float
    `stash_type` (1) for float16 and bfloat16."""
    if stash_type != 1:
        raise Unsupported(f"stash_type {stash_type} (only 1, float)")
    start, limit, delta = (np.asarray(c.const(n.input(i), what)).reshape(-1)
                           for i, what in enumerate(("start", "limit", "delta")))
    if start.size != 1 or limit.size != 1 or delta.size != 1:
        raise Unsupported("start, limit and delta of more than one element")
    dtype = tl_dtype(c.onnx.helper.np_dtype_to_tensor_dtype(start.dtype), "start")
    if dtype == "TL_BOOL" or delta[0] == 0:
        raise Unsupported(f"a Range of {dtype} with delta {delta[0]}")
    c.emit("arange", {}, {"dtype": dtype, "start": pyval(start[0]),
                              "stop": pyval(limit[0]), "step": pyval(delta[0])},
           dtype, c.out_shape(n), out=n.outputs[0], hint=n.name or n.outputs[0])


def _not_folded(reason: str):
    """A node of an op that maps only by folding: reaching the mapping means it could not be."""
    def handle(c: Converter, n: Node, **attributes):
        raise Unsupported(reason)
    return handle


handler("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24)(_not_folded(
    "only value, value_float(s) and value_int(s) constants of numeric types"))
handler("Shape", 1, 13, 15, 19, 21, 23, 24)(_not_folded("an input of unknown shape"))
handler("Size", 1, 13, 19, 21, 23, 24)(_not_folded("an input of unknown shape"))
handler("EyeLike", 9, 22)(_not_folded("a 2-D input of known shape and a numeric dtype"))
