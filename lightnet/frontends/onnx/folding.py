"""Constant folding: numpy evaluation of the ops shape computations use, and the
shape rules those ops share with their handlers.

A folder takes the node and its constant inputs (None for an omitted optional
one) and returns its outputs; its keyword-only parameters are the attributes
it accepts (see dispatch.py). A node with an attribute its folder does not
name is not folded, and left to its handler.

`fold_elements` tells, before a folder runs, how many elements its result will
have: the converter folds a node only when that result is small (FOLD_LIMIT)
and the elements read and written fit in what is left of the import's fold
limit (lightnet.ir.limits.FoldBudget), so a few nodes cannot ask for a reduction
of 10**12 elements or an Expand to terabytes.
"""

from __future__ import annotations

import math

import numpy as np

from .dtypes import NP_OF_ONNX, type_name
from .errors import Unsupported

FOLD_LIMIT = 1 << 22  # elements: larger results are left to the runtime
# Rounds of shape inference and folding: each waits for the inference of the round
# before (a deep model's shape computations, one layer a round: Swin2SR's 36 layers
# take 53), and each is an inference over every node not folded, so the rounds bound
# the import's work (a crafted chain of 10,000 Shape -> Reshape layers would take
# one a layer).
FOLD_ROUNDS = 200


# -----------------------------------------------------------------------------
# Shape rules, shared with the handlers
# -----------------------------------------------------------------------------

def normalize_axes(axes, rank) -> list[int]:
    """`axes` in [0, rank) (negative ones count from the end); ValueError for one
    outside [-rank, rank)."""
    out = []
    for a in axes:
        if not -rank <= int(a) < rank:
            raise ValueError(f"axis {int(a)} is out of range for rank {rank}")
        out.append(int(a) + rank if int(a) < 0 else int(a))
    return out


def legacy_b_shape(version: int, rank_a: int, b_shape, broadcast, axis) -> tuple[int, ...]:
    """B's shape for a binary op: before opset 7, B broadcasts only with broadcast=1,
    aligned at `axis` (trailing 1s added)."""
    if version < 7 and broadcast and axis is not None:
        axis = normalize_axes([axis], rank_a)[0]
        return tuple(b_shape) + (1,) * (rank_a - axis - len(b_shape))
    return tuple(b_shape)


def squeeze_axes(axes, shape) -> list[int]:
    """The axes a Squeeze removes: `axes` (None: every 1)."""
    if axes is None:
        return [i for i, d in enumerate(shape) if d == 1]
    return sorted(normalize_axes(np.asarray(axes).reshape(-1), len(shape)))


def unsqueeze_shape(axes, shape) -> tuple[int, ...]:
    axes = np.asarray(axes).reshape(-1)
    rank = len(shape) + len(axes)
    out = list(shape)
    for a in sorted(normalize_axes(axes, rank)):
        out.insert(a, 1)
    return tuple(out)


def reshape_target(shape, in_shape, allowzero) -> tuple[int, ...]:
    """The output shape of a Reshape of `in_shape` to `shape` (0 copies, -1 infers)."""
    shape = [int(d) for d in np.asarray(shape).reshape(-1)]
    out = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise Unsupported(f"Reshape copies dim {i} of a rank-{len(in_shape)} input")
            d = in_shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise Unsupported(f"Reshape to {shape} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        total = math.prod(in_shape)
        if known == 0 or total % known:
            raise Unsupported(f"Reshape of {list(in_shape)} to {shape}")
        out[out.index(-1)] = total // known
    if math.prod(out) != math.prod(in_shape):
        raise Unsupported(f"Reshape of {list(in_shape)} to {shape}: element counts differ")
    return tuple(out)


def flatten_shape(shape, axis) -> tuple[int, int]:
    """Flatten's axis may be the rank itself: [prod(shape), 1]."""
    axis = len(shape) if axis == len(shape) else normalize_axes([axis], len(shape))[0]
    return (math.prod(shape[:axis]), math.prod(shape[axis:]))


def slice_params(starts, ends, axes, steps, shape) -> list[tuple[int, int, int, int]]:
    """[(axis, start, stop, step)] of a Slice, with ONNX's clamping."""
    starts = [int(s) for s in np.asarray(starts).reshape(-1)]
    ends = [int(e) for e in np.asarray(ends).reshape(-1)]
    if axes is None:
        axes = list(range(len(starts)))
    else:
        axes = normalize_axes(np.asarray(axes).reshape(-1), len(shape))
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.asarray(steps).reshape(-1)]
    result = []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise Unsupported("Slice with step 0")
        start, end, step = slice(start, end, step).indices(shape[axis])
        result.append((axis, start, end, step))
    return result


def slice_inputs(version, ins, starts, ends, axes):
    """(starts, ends, axes, steps) of a Slice: attributes before version 10, inputs after."""
    if version < 10:
        return starts, ends, axes, None
    return ins[1], ins[2], ins[3] if len(ins) > 3 else None, ins[4] if len(ins) > 4 else None


def split_sizes(version, ins, shape, n_out, axis, split, num_outputs) -> tuple[int, list[int]]:
    """(axis, the size of every part) of a Split of `shape` into `n_out` outputs."""
    axis = normalize_axes([axis], len(shape))[0]
    if version >= 13 or (version < 2 and len(ins) > 1):
        split = ins[1] if len(ins) > 1 and ins[1] is not None else None
    if split is None:
        dim = shape[axis]
        if version >= 18 and num_outputs is not None:
            if num_outputs != n_out:
                raise ValueError(f"num_outputs {num_outputs} for {n_out} outputs")
            size = -(-dim // num_outputs)
            split = [size] * (num_outputs - 1) + [dim - size * (num_outputs - 1)]
        else:
            if dim % n_out:
                raise Unsupported(f"Split of {dim} into {n_out} equal parts")
            split = [dim // n_out] * n_out
    return axis, [int(s) for s in np.asarray(split).reshape(-1)]


def fold_shape(shape, *, start=0, end=None) -> np.ndarray:
    """The value of Shape of a tensor of `shape` (from version 15: dims [start, end))."""
    return np.array(shape[slice(start, len(shape) if end is None else end)], np.int64)


def fold_eye_like(shape, elem: int, *, dtype=None, k=0) -> np.ndarray:
    """The value of EyeLike of a tensor of `shape` and ONNX type `elem`: ones on the
    k-th diagonal of a matrix of that shape, of type `dtype` (default `elem`)."""
    if len(shape) != 2:
        raise Unsupported(f"EyeLike of a {len(shape)}-D input (ONNX's is 2-D)")
    to = elem if dtype is None else dtype
    if to not in NP_OF_ONNX:
        raise Unsupported(f"EyeLike of {type_name(to)}")
    return np.eye(shape[0], shape[1], k=k, dtype=NP_OF_ONNX[to])


# -----------------------------------------------------------------------------
# The size of a folder's result, before it runs
# -----------------------------------------------------------------------------

def _broadcast_elements(*shapes) -> int:
    try:
        return math.prod(np.broadcast_shapes(*shapes))
    except ValueError:  # the folder fails on them too
        return 0


def _elementwise_elements(n, ins) -> int:
    shapes = [np.shape(x) for x in ins if x is not None]
    if n.version < 7 and len(shapes) == 2:  # legacy broadcast: B fits within A
        return math.prod(shapes[0])
    return _broadcast_elements(*shapes)


def _expand_elements(n, ins) -> int:
    return _broadcast_elements(np.shape(ins[0]), tuple(_ints(ins[1])))


def _tile_elements(n, ins) -> int:
    return np.size(ins[0]) * math.prod(_ints(ins[1]))


def _range_elements(n, ins) -> int:
    start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in ins)
    count = (limit - start) / delta if delta else 0.0
    return int(min(max(math.ceil(count), 0), 2.0**62)) if math.isfinite(count) else 2**62


def _gather_elements(n, ins, axis=0) -> int:
    data = np.shape(ins[0])
    if not data:
        return 0
    axis = normalize_axes([axis], len(data))[0]
    return math.prod(data[:axis]) * np.size(ins[1]) * math.prod(data[axis + 1:])


def _ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


# Folders whose result may be larger than what they read; any other gives at most
# as many elements as it reads (ConstantOfShape gives a broadcast view: none).
_RESULT_ELEMENTS = {
    "Expand": _expand_elements, "Tile": _tile_elements, "Range": _range_elements,
    "Gather": _gather_elements, "Where": _elementwise_elements,
    **{op: _elementwise_elements for op in (
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "And", "Or", "Max", "Min", "Sum")},
}


# Folders whose result is a view of their first input's data when that is contiguous.
_VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}


def fold_elements(n, ins) -> tuple[int, int]:
    """(the elements folding `n` on `ins` reads and writes, those of its result),
    without running it. Inputs count as many elements as they stand for (a
    broadcast view of a ConstantOfShape too); a node whose constant inputs do not
    say (a bad Range, say) counts as too large."""
    read = sum(int(np.size(x)) for x in ins if x is not None)
    if n.op_type == "ConstantOfShape":
        return read, 0
    if (n.op_type in _VIEWS and ins and isinstance(ins[0], np.ndarray)
            and ins[0].flags.c_contiguous):
        return read - ins[0].size, ins[0].size  # a view of its data: no element touched
    predict = _RESULT_ELEMENTS.get(n.op_type)
    if predict is None:
        return 2 * read, read
    axis = n.attrs.get("axis", 0) if n.op_type == "Gather" else None
    try:
        result = predict(n, ins) if axis is None else predict(n, ins, axis)
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError):
        return 2**62, 2**62
    return read + result, result


# -----------------------------------------------------------------------------
# Folders
# -----------------------------------------------------------------------------

def _int_div(a, b):
    """C integer division (truncation toward zero), as ONNX Runtime does."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


def _legacy_b(n, a, b, broadcast, axis):
    return np.reshape(b, legacy_b_shape(n.version, np.ndim(a), np.shape(b), broadcast, axis))


_PREDICATES = (np.equal, np.less, np.greater, np.less_equal, np.greater_equal, np.logical_and,
               np.logical_or, np.logical_xor)


def _binary(func):
    def fold(n, ins, *, broadcast=0, axis=None, consumed_inputs=None):
        a, b = ins[0], _legacy_b(n, ins[0], ins[1], broadcast, axis)
        out = np.asarray(func(a, b))
        return [out if func in _PREDICATES else out.astype(np.result_type(ins[0]), copy=False)]
    return fold


def _fold_div(n, ins, *, broadcast=0, axis=None, consumed_inputs=None):
    a, b = np.asarray(ins[0]), np.asarray(_legacy_b(n, ins[0], ins[1], broadcast, axis))
    if np.issubdtype(a.dtype, np.integer):
        return [_int_div(a, b)]
    return [np.asarray(np.divide(a, b)).astype(a.dtype, copy=False)]


def _fold_pow(n, ins, *, broadcast=0, axis=None):
    a, b = np.asarray(ins[0]), _legacy_b(n, ins[0], ins[1], broadcast, axis)
    return [np.asarray(np.power(a.astype(np.float64), np.asarray(b, np.float64))).astype(a.dtype)]


def _fold_mod(n, ins, *, fmod=0):
    return _binary(np.fmod if fmod else np.mod)(n, ins)


def _variadic(func):
    def fold(n, ins, *, consumed_inputs=None):
        out = ins[0]
        for x in ins[1:]:
            out = func(out, x)
        return [np.asarray(out).astype(np.asarray(ins[0]).dtype, copy=False)]
    return fold


def _unary(func):
    def fold(n, ins, *, consumed_inputs=None):
        x = np.asarray(ins[0])
        return [np.asarray(func(x)).astype(x.dtype)]
    return fold


def _fold_constant(n, ins, *, value=None, value_float=None, value_floats=None, value_int=None,
                   value_ints=None, sparse_value=None, value_string=None, value_strings=None):
    if value is not None:
        return [np.asarray(value)]
    if value_float is not None:
        return [np.array(value_float, np.float32)]
    if value_floats is not None:
        return [np.array(value_floats, np.float32)]
    if value_int is not None:
        return [np.array(value_int, np.int64)]
    if value_ints is not None:
        return [np.array(value_ints, np.int64)]
    raise Unsupported("only value, value_float(s) and value_int(s) constants (no sparse or "
                      "string ones)")


def _fold_constant_of_shape(n, ins, *, value=None):
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    # A read-only broadcast view: no memory, however large the shape.
    return [np.broadcast_to(value[:1].reshape(()), tuple(int(d) for d in ins[0]))]


def _fold_identity(n, ins):
    return [np.asarray(ins[0])]


def _fold_dropout(n, ins, *, ratio=0.5, is_test=0, seed=None, consumed_inputs=None):
    return [np.asarray(ins[0]), np.ones(np.shape(ins[0]), np.bool_)]


def _fold_cast_like(n, ins, *, saturate=1, round_mode="up"):
    return [np.asarray(ins[0]).astype(np.asarray(ins[1]).dtype)]


def _fold_cast(n, ins, *, to, saturate=1, round_mode="up"):
    # saturate and round_mode only concern 8- and 4-bit float targets, which are unsupported.
    if to not in NP_OF_ONNX:
        raise Unsupported(f"Cast to {type_name(to)}")
    return [np.asarray(ins[0]).astype(NP_OF_ONNX[to])]


def _fold_gather(n, ins, *, axis=0):
    data, indices = np.asarray(ins[0]), np.asarray(ins[1])
    return [np.take(data, indices.astype(np.int64), axis=normalize_axes([axis], data.ndim)[0])]


def _fold_squeeze(n, ins, *, axes=None):
    x = np.asarray(ins[0])
    if n.version >= 13:
        axes = None if len(ins) < 2 or ins[1] is None else ins[1]
    return [np.squeeze(x, axis=tuple(squeeze_axes(axes, x.shape)))]


def _fold_unsqueeze(n, ins, *, axes=None):
    x = np.asarray(ins[0])
    return [x.reshape(unsqueeze_shape(axes if n.version < 13 else ins[1], x.shape))]


def _fold_reshape(n, ins, *, shape=None, allowzero=0, consumed_inputs=None):
    x = np.asarray(ins[0])
    return [x.reshape(reshape_target(shape if n.version < 5 else ins[1], x.shape, allowzero))]


def _fold_flatten(n, ins, *, axis=1):
    x = np.asarray(ins[0])
    return [x.reshape(flatten_shape(x.shape, axis))]


def _fold_concat(n, ins, *, axis=1):
    arrays = [np.asarray(x) for x in ins if x is not None]
    return [np.concatenate(arrays, axis=normalize_axes([axis], arrays[0].ndim)[0])]


def _fold_slice(n, ins, *, starts=None, ends=None, axes=None):
    x = np.asarray(ins[0])
    index = [slice(None)] * x.ndim
    for axis, start, end, step in slice_params(*slice_inputs(n.version, ins, starts, ends, axes),
                                               x.shape):
        index[axis] = slice(start, end if end >= 0 else None, step)
    return [x[tuple(index)]]


def _fold_split(n, ins, *, axis=0, split=None, num_outputs=None):
    x = np.asarray(ins[0])
    axis, sizes = split_sizes(n.version, ins, x.shape, len(n.outputs), axis, split, num_outputs)
    return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _fold_transpose(n, ins, *, perm=None):
    return [np.transpose(np.asarray(ins[0]), perm)]


def _fold_range(n, ins, *, stash_type=1):
    # numpy computes in the inputs' dtype (stash_type asks for at least float32 precision).
    start, limit, delta = (np.asarray(x).reshape(()) for x in ins)
    return [np.arange(start, limit, delta).astype(np.asarray(ins[0]).dtype)]


def _fold_expand(n, ins):
    x = np.asarray(ins[0])
    shape = tuple(int(d) for d in np.asarray(ins[1]).reshape(-1))
    return [x * np.ones(shape, dtype=x.dtype)]


def _fold_where(n, ins):
    return [np.where(np.asarray(ins[0]), ins[1], ins[2])]


def _fold_gather_elements(n, ins, *, axis=0):
    from lightnet.archs.cpu.kernels import gather_elements

    data, indices = np.asarray(ins[0]), np.asarray(ins[1])
    out = np.empty(indices.shape, data.dtype)
    gather_elements(data, indices, out, axis=normalize_axes([axis], data.ndim)[0])
    return [out]


def _fold_scatter_nd(n, ins, *, reduction="none"):
    from lightnet.archs.cpu.kernels import scatter_nd

    data = np.asarray(ins[0])
    out = np.empty(data.shape, data.dtype)
    scatter_nd(data, np.asarray(ins[1]), np.asarray(ins[2], data.dtype), out, reduction=reduction)
    return [out]


def _fold_cumsum(n, ins, *, exclusive=0, reverse=0):
    from lightnet.archs.cpu.kernels import cumsum

    x = np.asarray(ins[0])
    out = np.empty(x.shape, x.dtype)
    axis = normalize_axes([int(np.asarray(ins[1]).reshape(-1)[0])], x.ndim)[0]
    cumsum(x, out, axis=axis, exclusive=bool(exclusive), reverse=bool(reverse))
    return [out]


def _fold_trilu(n, ins, *, upper=1):
    x = np.asarray(ins[0])
    k = int(np.asarray(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    return [np.triu(x, k) if upper else np.tril(x, k)]


def _fold_isnan(n, ins):
    return [np.isnan(np.asarray(ins[0]))]


def _fold_isinf(n, ins, *, detect_positive=1, detect_negative=1):
    x = np.asarray(ins[0])
    return [(np.isposinf(x) & bool(detect_positive)) | (np.isneginf(x) & bool(detect_negative))]


def _fold_tile(n, ins):
    return [np.tile(np.asarray(ins[0]), [int(r) for r in np.asarray(ins[1]).reshape(-1)])]


def _reduce(func):
    def fold(n, ins, *, axes=None, keepdims=1, noop_with_empty_axes=0):
        x = np.asarray(ins[0])
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = ins[1]
        if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
            if noop_with_empty_axes:
                return [x]
            axes = range(x.ndim)
        axes = tuple(normalize_axes(np.asarray(list(axes)).reshape(-1), x.ndim))
        return [np.asarray(func(x, axis=axes, keepdims=bool(keepdims))).astype(x.dtype)]
    return fold


def _fold_reduce_mean(n, ins, **attrs):
    if np.asarray(ins[0]).dtype.kind != "f":
        raise TypeError("an integer mean: left to the handler")
    return _reduce(np.mean)(n, ins, **attrs)


def _fold_batch_normalization(n, ins, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    """BatchNormalization-9 on (inference), and -14/-15's training mode: the statistics
    of X itself over every axis but 1 (population variance), which a weight-standardized
    convolution (BiT's) writes for its constant weight; then the running mean and
    variance outputs, input * momentum + current * (1 - momentum), unless mean and var
    are not given (the converter leaves them out when those outputs are not read). In
    float64."""
    if n.version < 9:
        raise TypeError("BatchNormalization before 9: left to the handler")
    x, scale, bias, mean, var = (None if v is None else np.asarray(v, np.float64)
                                 for v in (list(ins) + [None] * 5)[:5])
    view = (-1,) + (1,) * (x.ndim - 2)
    if training_mode:
        axes = tuple(a for a in range(x.ndim) if a != 1)
        current_mean, current_var = x.mean(axis=axes), x.var(axis=axes)
    else:
        current_mean, current_var = mean, var
    y = ((x - current_mean.reshape(view)) / np.sqrt(current_var.reshape(view) + epsilon)
         * scale.reshape(view) + bias.reshape(view))
    outs = [y.astype(ins[0].dtype)]
    if training_mode and mean is not None and var is not None:
        outs += [(mean * momentum + current_mean * (1 - momentum)).astype(ins[3].dtype),
                 (var * momentum + current_var * (1 - momentum)).astype(ins[4].dtype)]
    return outs


FOLDERS = {
    "Constant": _fold_constant,
    "ConstantOfShape": _fold_constant_of_shape,
    "Identity": _fold_identity,
    "Dropout": _fold_dropout,
    "Cast": _fold_cast,
    "CastLike": _fold_cast_like,
    "Gather": _fold_gather,
    "Unsqueeze": _fold_unsqueeze,
    "Squeeze": _fold_squeeze,
    "Concat": _fold_concat,
    "Slice": _fold_slice,
    "Split": _fold_split,
    "Reshape": _fold_reshape,
    "Flatten": _fold_flatten,
    "Transpose": _fold_transpose,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _fold_div,
    "Pow": _fold_pow,
    "Mod": _fold_mod,
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "LessOrEqual": _binary(np.less_equal),
    "GreaterOrEqual": _binary(np.greater_equal),
    "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or),
    "Not": _unary(np.logical_not),
    "Neg": _unary(np.negative),
    "Abs": _unary(np.abs),
    "Floor": _unary(np.floor),
    "Ceil": _unary(np.ceil),
    "Sqrt": _unary(np.sqrt),
    "Log": _unary(np.log),
    "Exp": _unary(np.exp),
    "Max": _variadic(np.maximum),
    "Min": _variadic(np.minimum),
    "Sum": _variadic(np.add),
    "Range": _fold_range,
    "Expand": _fold_expand,
    "Where": _fold_where,
    "Tile": _fold_tile,
    "GatherElements": _fold_gather_elements,
    "ScatterND": _fold_scatter_nd,
    "CumSum": _fold_cumsum,
    "Trilu": _fold_trilu,
    "Xor": _binary(np.logical_xor),
    "IsNaN": _fold_isnan,
    "IsInf": _fold_isinf,
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
    "ReduceMean": _fold_reduce_mean,
    "BatchNormalization": _fold_batch_normalization,
}
