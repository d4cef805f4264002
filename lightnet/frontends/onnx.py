"""ONNX importer: turn an ONNX model into LightNet's JSON IR and an .npz of weights.

    ir, weights = convert("model.onnx")          # or a ModelProto
    import_model("model.onnx", "model.json")     # writes model.json and model.npz
    onnx2ln model.onnx -o model.json             # the same from the shell

How a model is imported:

1. Graph inputs get fixed dims: a symbolic or unknown dim takes the value given
   by `dims` (``--dim NAME=VALUE``, NAME the dim's symbolic name); an unnamed
   or ungiven batch dim (axis 0) becomes 1; any other unknown dim is an error.
2. Constants are folded: initializers, Constant nodes, and every node of a
   small set of shape-computing ops (Shape, Gather, Concat, Unsqueeze, Squeeze,
   Cast, Slice, Reshape, arithmetic, ...) whose inputs are all constant (Shape:
   whose input shape is known) are evaluated with numpy, alternating with
   ONNX shape inference until nothing more folds. That resolves the
   Shape -> Gather -> Concat -> Reshape chains exporters write.
3. Every remaining node (only those the graph outputs depend on) is mapped to
   LightNet ops; a constant one of them reads becomes a `create` op (with
   `from_file: true` and its data in the weights, or small ones with `data`).
   Ops a node cannot be mapped to are collected, and one error lists them all.
4. The result is checked by LightNet (every op's pre_run), and every tensor's
   shape is compared with the shape ONNX infers.

Only numpy is needed at import time of this module; the `onnx` package is
imported when a model is converted (``pip install -e '.[onnx]'``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lightnet.command import report_errors
from lightnet.weights import write_npz
from lightnet.errors import LightNetError

__all__ = ["SUPPORTED_OPS", "UnsupportedModelError", "convert", "import_model", "main",
           "save_weights"]


class UnsupportedModelError(LightNetError):
    """The model uses ONNX operators (or attribute values) the importer cannot map.

    `problems` lists every one, as (op_type, op version, detail), detail '' when
    the op type itself is unsupported (op_type 'graph input' for an input whose
    element type LightNet lacks).
    """

    def __init__(self, problems, opset):
        self.problems = list(problems)
        self.opset = opset
        grouped: dict[tuple[str, int], list[str]] = {}
        inputs = []
        for op_type, version, detail in self.problems:
            if op_type == _GRAPH_INPUT:
                inputs.append(detail)
                continue
            details = grouped.setdefault((op_type, version), [])
            if detail and detail not in details:
                details.append(detail)
        parts = []
        for (op_type, version), details in sorted(grouped.items()):
            text = f"{op_type} (opset {opset}" + (f", {op_type}-{version})" if version else ")")
            if details:
                text += ": " + "; ".join(details)
            parts.append(text)
        message = "unsupported ONNX model: "
        if grouped:
            message += f"{len(grouped)} operator(s) cannot be imported: " + " | ".join(parts)
        if inputs:
            message += ("; " if grouped else "") + "graph inputs: " + "; ".join(inputs)
        super().__init__(message)


_GRAPH_INPUT = "graph input"


class _Unsupported(Exception):
    """A node cannot be mapped; the message says why (an attribute value, a rank...)."""


def _onnx():
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
        import onnx.shape_inference  # noqa: F401
    except ImportError:
        raise LightNetError("importing ONNX models needs the onnx package: "
                            "pip install -e '.[onnx]'") from None
    return onnx


# ONNX TensorProto element types -> (LightNet dtype, numpy dtype of the data we write)
_FLOAT, _UINT8, _INT8, _UINT16, _INT16, _INT32, _INT64 = 1, 2, 3, 4, 5, 6, 7
_STRING, _BOOL, _FLOAT16, _DOUBLE, _UINT32, _UINT64, _BFLOAT16 = 8, 9, 10, 11, 12, 13, 16
_TL_OF = {
    _FLOAT: "TL_FLOAT", _FLOAT16: "TL_FLOAT", _BFLOAT16: "TL_FLOAT", _DOUBLE: "TL_DOUBLE",
    _INT8: "TL_INT8", _INT16: "TL_INT16", _INT32: "TL_INT32", _INT64: "TL_INT32",
    _UINT8: "TL_UINT8", _UINT16: "TL_UINT16", _UINT32: "TL_UINT32", _UINT64: "TL_UINT32",
    _BOOL: "TL_BOOL",
}
_NP_OF_TL = {
    "TL_DOUBLE": np.float64, "TL_FLOAT": np.float32, "TL_INT32": np.int32, "TL_INT16": np.int16,
    "TL_INT8": np.int8, "TL_UINT32": np.uint32, "TL_UINT16": np.uint16, "TL_UINT8": np.uint8,
    "TL_BOOL": np.bool_,
}
_FLOAT_TL = ("TL_FLOAT", "TL_DOUBLE")
_FLT_MAX = float(np.finfo(np.float32).max)


def _type_name(elem_type: int) -> str:
    onnx = _onnx()
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def tl_dtype(elem_type: int, what: str) -> str:
    """The LightNet dtype holding ONNX `elem_type` (float16 -> TL_FLOAT, int64 -> TL_INT32)."""
    if elem_type not in _TL_OF:
        raise _Unsupported(f"{what} has element type {_type_name(elem_type)}, "
                           "which LightNet has no dtype for")
    return _TL_OF[elem_type]


def to_tl_array(array: np.ndarray, what: str) -> np.ndarray:
    """`array` converted to its LightNet dtype; 64-bit integers are range checked."""
    array = np.asarray(array)
    kind = array.dtype
    if kind == np.float16 or kind.name == "bfloat16" or kind == np.float32:
        return np.ascontiguousarray(array, dtype=np.float32)
    if kind == np.float64:
        return np.ascontiguousarray(array)
    if kind == np.bool_:
        return np.ascontiguousarray(array)
    if kind in (np.int64, np.uint64):
        target = np.int32 if kind == np.int64 else np.uint32
        info = np.iinfo(target)
        if array.size and (array.min() < info.min or array.max() > info.max):
            bad = array[(array < info.min) | (array > info.max)].reshape(-1)[0]
            raise LightNetError(
                f"{what} is {kind.name} and holds {int(bad)}, which does not fit in "
                f"{'TL_INT32' if target is np.int32 else 'TL_UINT32'} "
                f"[{info.min}, {info.max}] (LightNet has no 64-bit integers)")
        return np.ascontiguousarray(array, dtype=target)
    if kind in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32):
        return np.ascontiguousarray(array)
    raise _Unsupported(f"{what} has numpy dtype {kind}, which LightNet has no dtype for")


def _lnshape(shape) -> tuple[int, ...]:
    """LightNet tensors have at least one dim: an ONNX scalar is [1]."""
    return tuple(int(d) for d in shape) or (1,)


def _pyval(v):
    """A JSON-clean Python value of a param."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_pyval(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


@dataclass
class Val:
    """An ONNX tensor as a LightNet tensor: its IR name, LightNet dtype and ONNX shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Node:
    """One ONNX node, with its attributes decoded and its op version resolved."""

    index: int
    name: str
    op_type: str
    version: int
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""

    def has_input(self, i: int) -> bool:
        return bool(self.input(i))


def _attr_value(onnx, attr):
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


# -----------------------------------------------------------------------------
# Constant folding: numpy evaluation of the ops shape computations use
# -----------------------------------------------------------------------------

_NP_OF_ONNX = {
    _FLOAT: np.float32, _UINT8: np.uint8, _INT8: np.int8, _UINT16: np.uint16, _INT16: np.int16,
    _INT32: np.int32, _INT64: np.int64, _BOOL: np.bool_, _FLOAT16: np.float16,
    _DOUBLE: np.float64, _UINT32: np.uint32, _UINT64: np.uint64,
}


def _axes(axes, rank):
    return [int(a) + rank if int(a) < 0 else int(a) for a in axes]


def _legacy_broadcast(node: Node, a, b):
    """Opset < 7 binary ops broadcast B only with broadcast=1, aligned at `axis`."""
    if node.version < 7 and node.attrs.get("broadcast", 0) and "axis" in node.attrs:
        rank_a, rank_b = np.ndim(a), np.ndim(b)
        axis = _axes([node.attrs["axis"]], rank_a)[0]
        b = np.reshape(b, np.shape(b) + (1,) * (rank_a - axis - rank_b))
    return a, b


def _int_div(a, b):
    """C integer division (truncation toward zero), as ONNX Runtime does."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


def _binary(func):
    def fold(node, ins):
        a, b = _legacy_broadcast(node, ins[0], ins[1])
        out = func(a, b)
        return [np.asarray(out).astype(np.result_type(ins[0]), copy=False)
                if func not in (np.equal, np.less, np.greater, np.less_equal, np.greater_equal,
                                np.logical_and, np.logical_or, np.logical_xor)
                else np.asarray(out)]
    return fold


def _fold_div(node, ins):
    a, b = _legacy_broadcast(node, ins[0], ins[1])
    if np.issubdtype(np.asarray(a).dtype, np.integer):
        return [_int_div(np.asarray(a), np.asarray(b))]
    return [np.asarray(np.divide(a, b)).astype(np.asarray(ins[0]).dtype, copy=False)]


def _fold_pow(node, ins):
    a, b = _legacy_broadcast(node, ins[0], ins[1])
    a = np.asarray(a)
    return [np.asarray(np.power(a.astype(np.float64), np.asarray(b, np.float64))).astype(a.dtype)]


def _variadic(func):
    def fold(node, ins):
        out = ins[0]
        for x in ins[1:]:
            out = func(out, x)
        return [np.asarray(out).astype(np.asarray(ins[0]).dtype, copy=False)]
    return fold


def _fold_constant(node, ins):
    a = node.attrs
    if "value" in a:
        return [np.asarray(a["value"])]
    if "value_float" in a:
        return [np.array(a["value_float"], np.float32)]
    if "value_floats" in a:
        return [np.array(a["value_floats"], np.float32)]
    if "value_int" in a:
        return [np.array(a["value_int"], np.int64)]
    if "value_ints" in a:
        return [np.array(a["value_ints"], np.int64)]
    raise _Unsupported("only value, value_float(s) and value_int(s) constants (no sparse or "
                       "string ones)")


def _fold_constant_of_shape(node, ins):
    value = node.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    # A read-only broadcast view: no memory, however large the shape.
    return [np.broadcast_to(value[:1].reshape(()), tuple(int(d) for d in ins[0]))]


def _uniform_value(array: np.ndarray):
    """The one value every element of `array` has, or None."""
    if array.size == 0:
        return None
    first = array.reshape(-1)[0] if array.flags.c_contiguous else array.flat[0]
    if all(s == 0 for s in array.strides) or (array.size <= 1 << 24 and np.all(array == first)):
        return first.item()
    return None


def _fold_cast(node, ins):
    to = node.attrs["to"]
    if to not in _NP_OF_ONNX:
        raise _Unsupported(f"Cast to {_type_name(to)}")
    return [np.asarray(ins[0]).astype(_NP_OF_ONNX[to])]


def _fold_gather(node, ins):
    data, indices = np.asarray(ins[0]), np.asarray(ins[1])
    axis = _axes([node.attrs.get("axis", 0)], data.ndim)[0]
    return [np.take(data, indices.astype(np.int64), axis=axis)]


def _squeeze_axes(node, ins, rank, shape):
    axes = node.attrs.get("axes") if node.version < 13 else (
        None if len(ins) < 2 or ins[1] is None else ins[1])
    if axes is None:
        return [i for i, d in enumerate(shape) if d == 1]
    return sorted(_axes(np.asarray(axes).reshape(-1), rank))


def _unsqueeze_shape(node, ins, shape):
    axes = node.attrs.get("axes") if node.version < 13 else ins[1]
    rank = len(shape) + len(np.asarray(axes).reshape(-1))
    axes = sorted(_axes(np.asarray(axes).reshape(-1), rank))
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


def _fold_squeeze(node, ins):
    x = np.asarray(ins[0])
    return [np.squeeze(x, axis=tuple(_squeeze_axes(node, ins, x.ndim, x.shape)))]


def _fold_unsqueeze(node, ins):
    x = np.asarray(ins[0])
    return [x.reshape(_unsqueeze_shape(node, ins, x.shape))]


def _reshape_target(node, ins, in_shape):
    shape = node.attrs.get("shape") if node.version < 5 else ins[1]
    shape = [int(d) for d in np.asarray(shape).reshape(-1)]
    allowzero = node.attrs.get("allowzero", 0)
    out = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise _Unsupported(f"Reshape copies dim {i} of a rank-{len(in_shape)} input")
            d = in_shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise _Unsupported(f"Reshape to {shape} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        total = math.prod(in_shape)
        if known == 0 or total % known:
            raise _Unsupported(f"Reshape of {list(in_shape)} to {shape}")
        out[out.index(-1)] = total // known
    if math.prod(out) != math.prod(in_shape):
        raise _Unsupported(f"Reshape of {list(in_shape)} to {shape}: element counts differ")
    return tuple(out)


def _fold_reshape(node, ins):
    x = np.asarray(ins[0])
    return [x.reshape(_reshape_target(node, ins, x.shape))]


def _flatten_shape(node, shape):
    axis = _axes([node.attrs.get("axis", 1)], len(shape))[0]
    return (math.prod(shape[:axis]), math.prod(shape[axis:]))


def _fold_flatten(node, ins):
    x = np.asarray(ins[0])
    return [x.reshape(_flatten_shape(node, x.shape))]


def _fold_concat(node, ins):
    arrays = [np.asarray(x) for x in ins if x is not None]
    axis = _axes([node.attrs.get("axis", 1)], arrays[0].ndim)[0]
    return [np.concatenate(arrays, axis=axis)]


def _slice_params(node, ins, shape):
    """[(axis, start, stop, step)] of a Slice, with ONNX's clamping."""
    if node.version < 10:
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes = node.attrs.get("axes")
        steps = None
    else:
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 else None
        steps = ins[4] if len(ins) > 4 else None
    starts = [int(s) for s in np.asarray(starts).reshape(-1)]
    ends = [int(e) for e in np.asarray(ends).reshape(-1)]
    if axes is None:
        axes = list(range(len(starts)))
    else:
        axes = _axes(np.asarray(axes).reshape(-1), len(shape))
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.asarray(steps).reshape(-1)]
    result = []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise _Unsupported("Slice with step 0")
        start, end, step = slice(start, end, step).indices(shape[axis])
        result.append((axis, start, end, step))
    return result


def _fold_slice(node, ins):
    x = np.asarray(ins[0])
    index = [slice(None)] * x.ndim
    for axis, start, end, step in _slice_params(node, ins, x.shape):
        index[axis] = slice(start, end if end >= 0 else None, step)
    return [x[tuple(index)]]


def _split_sizes(node, ins, shape, n_out):
    axis = _axes([node.attrs.get("axis", 0)], len(shape))[0]
    split = node.attrs.get("split")
    if node.version >= 13 or (node.version < 2 and len(ins) > 1):
        split = ins[1] if len(ins) > 1 and ins[1] is not None else None
    if split is None:
        dim = shape[axis]
        if node.version >= 18 and "num_outputs" in node.attrs:
            n = node.attrs["num_outputs"]
            size = -(-dim // n)
            split = [size] * (n - 1) + [dim - size * (n - 1)]
        else:
            if dim % n_out:
                raise _Unsupported(f"Split of {dim} into {n_out} equal parts")
            split = [dim // n_out] * n_out
    return axis, [int(s) for s in np.asarray(split).reshape(-1)]


def _fold_split(node, ins):
    x = np.asarray(ins[0])
    axis, sizes = _split_sizes(node, ins, x.shape, len(node.outputs))
    return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _fold_transpose(node, ins):
    x = np.asarray(ins[0])
    perm = node.attrs.get("perm")
    return [np.transpose(x, perm if perm is not None else None)]


def _fold_range(node, ins):
    start, limit, delta = (np.asarray(x).reshape(()) for x in ins)
    return [np.arange(start, limit, delta).astype(np.asarray(ins[0]).dtype)]


def _fold_expand(node, ins):
    x = np.asarray(ins[0])
    shape = tuple(int(d) for d in np.asarray(ins[1]).reshape(-1))
    return [x * np.ones(shape, dtype=x.dtype)]


def _fold_where(node, ins):
    return [np.where(np.asarray(ins[0]), ins[1], ins[2])]


def _fold_tile(node, ins):
    return [np.tile(np.asarray(ins[0]), [int(r) for r in np.asarray(ins[1]).reshape(-1)])]


def _reduce(func):
    def fold(node, ins):
        x = np.asarray(ins[0])
        axes = node.attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = ins[1]
        keep = bool(node.attrs.get("keepdims", 1))
        if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
            if node.attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = range(x.ndim)
        axes = tuple(_axes(np.asarray(list(axes)).reshape(-1), x.ndim))
        return [np.asarray(func(x, axis=axes, keepdims=keep)).astype(x.dtype)]
    return fold


def _unary(func):
    def fold(node, ins):
        x = np.asarray(ins[0])
        return [np.asarray(func(x)).astype(x.dtype)]
    return fold


_FOLDERS = {
    "Constant": _fold_constant,
    "ConstantOfShape": _fold_constant_of_shape,
    "Identity": lambda node, ins: [np.asarray(ins[0])],
    "Dropout": lambda node, ins: [np.asarray(ins[0]), np.ones(np.shape(ins[0]), np.bool_)],
    "Cast": _fold_cast,
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
    "Mod": lambda node, ins: _binary(np.fmod if node.attrs.get("fmod", 0) else np.mod)(node, ins),
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
    "Max": _variadic(np.maximum),
    "Min": _variadic(np.minimum),
    "Sum": _variadic(np.add),
    "Range": _fold_range,
    "Expand": _fold_expand,
    "Where": _fold_where,
    "Tile": _fold_tile,
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
}
_FOLD_LIMIT = 1 << 22  # elements: larger results are left to the runtime


# -----------------------------------------------------------------------------
# ONNX Resize / Upsample coordinate rules, to match them against LightNet's
# -----------------------------------------------------------------------------

def _onnx_resample_1d(x, n_out, scale, mode, ctm, nearest_mode):
    """ONNX Resize along one axis of 1-D `x` (float64), by the spec's formulas."""
    n_in = len(x)
    i = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        xo = (i + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        xo = n_in / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
    elif ctm == "pytorch_half_pixel":
        xo = (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    elif ctm == "align_corners":
        xo = i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    elif ctm == "asymmetric":
        xo = i / scale
    elif ctm == "tf_half_pixel_for_nn":
        xo = (i + 0.5) / scale
    else:
        raise _Unsupported(f"coordinate_transformation_mode {ctm}")
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            idx = np.ceil(xo - 0.5)
        elif nearest_mode == "round_prefer_ceil":
            idx = np.floor(xo + 0.5)
        elif nearest_mode == "floor":
            idx = np.floor(xo)
        elif nearest_mode == "ceil":
            idx = np.ceil(xo)
        elif nearest_mode == "simple":  # Upsample and Resize-10 (ONNX Runtime)
            idx = np.ceil(xo) if scale < 1 else np.trunc(xo)
        else:
            raise _Unsupported(f"nearest_mode {nearest_mode}")
        return x[np.clip(idx, 0, n_in - 1).astype(np.intp)]
    xo = np.clip(xo, 0, n_in - 1)
    i0 = np.floor(xo).astype(np.intp)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = xo - i0
    return x[i0] * (1 - w) + x[i1] * w


# -----------------------------------------------------------------------------
# The converter
# -----------------------------------------------------------------------------

_HANDLERS: dict[str, tuple] = {}


def _handler(op_type: str, *versions: int):
    """Register a mapping for `op_type`, supporting exactly the op versions listed."""
    def register(func):
        _HANDLERS[op_type] = (func, frozenset(versions))
        return func
    return register


class _Converter:
    def __init__(self, model, dims: dict | None):
        self.onnx = _onnx()
        self.model = model
        self.dims = dict(dims or {})
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = imp.version
        self.graph = model.graph
        self.ops: list[dict] = []
        self.weights: dict[str, np.ndarray] = {}
        self.consts: dict[str, np.ndarray] = {}  # ONNX name -> value (folded or given)
        self.initializers: set[str] = set()
        self.vals: dict[str, Val] = {}  # ONNX name -> LightNet tensor
        self.materialized: dict[str, Val] = {}
        self.info: dict[str, tuple[int, tuple | None]] = {}  # ONNX name -> (elem type, shape)
        self.used_tensor_names: set[str] = set()
        self.op_names: set[str] = set()
        self.problems: list[tuple[str, int, str]] = []
        self.poisoned: set[str] = set()
        self.graph_output_names = {o.name for o in model.graph.output}

    # Names ---------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        base = hint or "t"
        name, k = base, 1
        while name in self.used_tensor_names:
            name = f"{base}_{k}"
            k += 1
        self.used_tensor_names.add(name)
        return name

    def op_name(self, hint: str) -> str:
        base = hint or "op"
        name, k = base, 1
        while name in self.op_names:
            name = f"{base}_{k}"
            k += 1
        self.op_names.add(name)
        return name

    # Graph preparation -----------------------------------------------------------

    def run(self):
        onnx = self.onnx
        g = self.graph
        for t in g.initializer:
            self.consts[t.name] = onnx.numpy_helper.to_array(t)
            self.initializers.add(t.name)
        for t in getattr(g, "sparse_initializer", []):
            raise LightNetError(f"sparse initializer '{t.values.name}' is not supported")
        self.used_tensor_names.update(self.consts)
        for n in g.node:
            self.used_tensor_names.update(x for x in n.output if x)
            self.used_tensor_names.update(x for x in n.input if x)
        self.inputs = [i for i in g.input if i.name not in self.consts]
        self.used_tensor_names.update(i.name for i in g.input)
        self.used_tensor_names.update(o.name for o in g.output)
        self.nodes = [self._node(i, n) for i, n in enumerate(g.node)]
        self.consumed = {x for n in g.node for x in n.input if x} | self.graph_output_names
        self._fix_inputs()
        self._fold()
        self._map()
        self._finish()
        return {"ops": self.ops}, self.weights

    def _node(self, index, n) -> Node:
        domain = n.domain if n.domain not in ("ai.onnx",) else ""
        version = 0
        if domain == "":
            try:
                version = self.onnx.defs.get_schema(n.op_type, self.opset, "").since_version
            except Exception:
                version = 0
        attrs = {a.name: _attr_value(self.onnx, a) for a in n.attribute}
        op_type = n.op_type if domain == "" else f"{domain}.{n.op_type}"
        return Node(index, n.name, op_type, version, list(n.input), list(n.output), attrs)

    def _fix_inputs(self):
        errors = []
        self.input_shapes = {}
        for inp in self.inputs:
            t = inp.type.tensor_type
            if not inp.type.HasField("tensor_type"):
                errors.append(f"input '{inp.name}' is not a tensor")
                continue
            if not t.HasField("shape"):
                errors.append(f"input '{inp.name}' has no shape")
                continue
            shape = []
            for axis, d in enumerate(t.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(d.dim_value)
                elif d.HasField("dim_param") and d.dim_param in self.dims:
                    shape.append(int(self.dims[d.dim_param]))
                elif axis == 0:
                    shape.append(1)
                elif d.HasField("dim_value"):
                    errors.append(f"input '{inp.name}' dim {axis} is 0 "
                                  "(empty tensors are not supported)")
                else:
                    label = f"'{d.dim_param}'" if d.dim_param else "unnamed"
                    hint = (f"--dim {d.dim_param}=VALUE" if d.dim_param
                            else "a model with that dim fixed")
                    errors.append(f"input '{inp.name}' dim {axis} is symbolic ({label}): "
                                  f"give {hint}")
            self.input_shapes[inp.name] = tuple(shape)
            self.info[inp.name] = (t.elem_type, tuple(shape))
        named = {d.dim_param for i in self.inputs if i.type.HasField("tensor_type")
                 for d in i.type.tensor_type.shape.dim if d.dim_param}
        for name in sorted(set(self.dims) - named):
            errors.append(f"--dim {name}: no input dim is named '{name}' (symbolic dims: "
                          f"{', '.join(sorted(named)) or 'none'})")
        if errors:
            raise LightNetError("; ".join(errors))

    def _infer(self, nodes):
        """ONNX shape inference over the unfolded nodes, constants given as initializers
        (small ones, which shape computations read) or typed inputs (weights)."""
        onnx = self.onnx
        helper = onnx.helper
        inputs = [helper.make_tensor_value_info(i.name, i.type.tensor_type.elem_type,
                                                self.input_shapes[i.name]) for i in self.inputs]
        inits = []
        needed = {x for n in nodes for x in n.inputs if x in self.consts}
        for name in sorted(needed):
            value = self.consts[name]
            if value.size <= 4096 or value.dtype.kind in "iub":
                try:
                    inits.append(onnx.numpy_helper.from_array(value, name))
                    continue
                except Exception:
                    pass
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        outputs = [helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
                   for o in self.graph.output]
        protos = [self.graph.node[n.index] for n in nodes]
        graph = helper.make_graph(protos, "g", inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=list(self.model.opset_import))
        model.ir_version = max(self.model.ir_version, 4)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=False,
                                                         strict_mode=False, data_prop=True)
        except Exception:
            inferred = model
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            t = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            shape = None
            if t.HasField("shape"):
                dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
                shape = None if None in dims else tuple(dims)
            old = self.info.get(vi.name)
            if old is None or old[1] is None or t.elem_type:
                self.info[vi.name] = (t.elem_type or (old[0] if old else 0),
                                      shape if shape is not None else (old[1] if old else None))

    def _fold(self):
        self.folded = set()
        for _ in range(50):
            pending = [n for n in self.nodes if n.index not in self.folded]
            self._infer(pending)
            changed = False
            for n in pending:
                if self._try_fold(n):
                    self.folded.add(n.index)
                    changed = True
            if not changed:
                break

    def _try_fold(self, n: Node) -> bool:
        if n.op_type in ("Shape", "Size"):
            info = self.info.get(n.input(0))
            shape = info[1] if info else None
            if n.input(0) in self.consts:
                shape = self.consts[n.input(0)].shape
            if shape is None:
                return False
            if n.op_type == "Size":
                value = np.array(math.prod(shape), np.int64)
            else:
                start = n.attrs.get("start", 0)
                end = n.attrs.get("end", len(shape))
                value = np.array(shape[slice(start, end)], np.int64)
            self._set_const(n.outputs[0], value)
            return True
        folder = _FOLDERS.get(n.op_type)
        if folder is None:
            return False
        if n.op_type == "Dropout" and len(n.outputs) > 1 and n.outputs[1] in self.consumed:
            return False
        if not all(x in self.consts for x in n.inputs if x):
            return False
        ins = [self.consts[x] if x else None for x in n.inputs]
        try:
            with np.errstate(all="ignore"):
                outs = folder(n, ins)
        except _Unsupported:
            return False
        except Exception:
            return False
        if any(np.asarray(o).size > _FOLD_LIMIT and any(np.asarray(o).strides) for o in outs):
            return False
        for name, value in zip(n.outputs, outs):
            if name:
                self._set_const(name, np.asarray(value))
        return True

    def _set_const(self, name, value):
        self.consts[name] = value
        try:
            elem = self.onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        except Exception:
            elem = 0
        self.info[name] = (elem, tuple(value.shape))

    # Mapping ---------------------------------------------------------------------

    def _map(self):
        # Graph inputs become input ops.
        for inp in self.inputs:
            elem = inp.type.tensor_type.elem_type
            shape = self.input_shapes[inp.name]
            try:
                dtype = tl_dtype(elem, f"'{inp.name}'")
            except _Unsupported as e:
                self.problems.append((_GRAPH_INPUT, 0, str(e)))
                self.poisoned.add(inp.name)
                continue
            self.emit("input", {}, {"dtype": dtype, "dims": list(_lnshape(shape))},
                      dtype, shape, out=inp.name, hint=inp.name)
        # Only the nodes the outputs need, and only those not folded.
        producers = {}
        for n in self.nodes:
            for o in n.outputs:
                if o:
                    producers[o] = n
        needed, stack = set(), [o.name for o in self.graph.output]
        seen = set()
        while stack:
            t = stack.pop()
            if t in seen or t in self.consts:
                continue
            seen.add(t)
            n = producers.get(t)
            if n is None or n.index in needed:
                continue
            needed.add(n.index)
            stack.extend(x for x in n.inputs if x)
        for n in self.nodes:
            if n.index in self.folded or n.index not in needed:
                continue
            self._map_node(n)
        if self.problems:
            raise UnsupportedModelError(self.problems, self.opset)

    def _map_node(self, n: Node):
        entry = _HANDLERS.get(n.op_type)
        problem = None
        if entry is None:
            problem = ""
        elif n.version not in entry[1]:
            problem = (f"version {n.version} is not supported "
                       f"(supported: {', '.join(map(str, sorted(entry[1])))})")
        else:
            try:
                entry[0](self, n)
            except _Unsupported as e:
                problem = str(e)
            except _Poisoned:
                problem = None
                self._poison(n)
                return
            except LightNetError:
                raise
            except Exception as e:  # noqa: BLE001 - a mapping that fails on odd input
                if any(x in self.poisoned for x in n.inputs):
                    self._poison(n)
                    return
                raise LightNetError(f"node '{n.name or n.index}' ({n.op_type}): cannot be "
                                    f"imported: {type(e).__name__}: {e}") from e
        if problem is not None:
            self.problems.append((n.op_type, n.version, problem))
            self._poison(n)

    def _poison(self, n: Node):
        for o in n.outputs:
            if o:
                self.poisoned.add(o)

    # Values ------------------------------------------------------------------------

    def used(self, n: Node, i: int) -> bool:
        """Output `i` of `n` is read by a node or is a graph output."""
        name = n.outputs[i] if i < len(n.outputs) else ""
        return bool(name) and name in self.consumed

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def const(self, name: str, what: str = "") -> np.ndarray:
        """The constant value of ONNX tensor `name`; unsupported if it is computed."""
        if name not in self.consts:
            raise _Unsupported(f"{what or 'input'} '{name}' must be a constant")
        return self.consts[name]

    def val(self, name: str) -> Val:
        """ONNX tensor `name` as a LightNet tensor (constants become create ops)."""
        if name in self.poisoned:
            raise _Poisoned()
        if name in self.vals:
            return self.vals[name]
        if name in self.consts:
            return self.materialize(name)
        raise LightNetError(f"tensor '{name}' is read before any node computes it")

    def materialize(self, name: str, out: str | None = None) -> Val:
        if name in self.materialized and out is None:
            return self.materialized[name]
        value = self.consts[name]
        if value.size == 0:
            raise _Unsupported(f"constant '{name}' is empty (shape {list(value.shape)})")
        what = f"{'initializer' if name in self.initializers else 'constant'} '{name}'"
        uniform = _uniform_value(value) if name not in self.initializers else None
        array = (to_tl_array(np.asarray(uniform, value.dtype).reshape(1), what)
                 if uniform is not None else to_tl_array(value, what))
        if uniform is not None and value.size > 1:
            array = np.broadcast_to(array.reshape(()), value.shape)
        dtype = tl_dtype(self.onnx.helper.np_dtype_to_tensor_dtype(value.dtype), what)
        target = out or (name if name not in self.vals else self.fresh(name))
        self.used_tensor_names.add(target)
        shape = tuple(value.shape)
        params = self._create_params(array, dtype, target, from_file=name in self.initializers)
        v = self.emit("create", {}, params, dtype, shape, out=target, hint=name, bind=False)
        if out is None:
            self.materialized[name] = v
        return v

    def scalar(self, value, dtype: str, hint: str) -> Val:
        """A [1] constant of `dtype` (for elew with a number)."""
        name = self.fresh(hint)
        params = {"dtype": dtype, "dims": [1]}
        if value:
            params["data"] = [_pyval(value)]
        return self.emit("create", {}, params, dtype, (), out=name, hint=hint, bind=False)

    def tensor_const(self, array: np.ndarray, dtype: str, hint: str) -> Val:
        """A constant made by the importer (a zero bias, say)."""
        name = self.fresh(hint)
        array = np.asarray(array, dtype=_NP_OF_TL[dtype])
        params = self._create_params(array, dtype, name)
        return self.emit("create", {}, params, dtype, array.shape, out=name, hint=hint, bind=False)

    def _create_params(self, array: np.ndarray, dtype: str, name: str, from_file=False) -> dict:
        """Params of the create op of constant `array`: from the weight file (always for
        initializers), or with its `data` (small ones), or a uniform value as ran
        [v, v] (zeros need nothing)."""
        params = {"dtype": dtype, "dims": list(_lnshape(array.shape))}
        finite = array.dtype.kind != "f" or bool(np.isfinite(array).all())
        uniform = None if from_file or array.dtype == np.bool_ else _uniform_value(array)
        if from_file or not finite:
            pass
        elif uniform is not None and array.size > 1:
            if uniform:
                params["ran"] = [uniform, uniform]
            return params
        elif array.size <= 16:
            if array.any():
                params["data"] = [int(v) if isinstance(v, bool) else v
                                  for v in array.reshape(-1).tolist()]
            return params
        params["from_file"] = True
        self.weights[name] = np.ascontiguousarray(array).reshape(_lnshape(array.shape))
        return params

    def out_shape(self, n: Node, i: int = 0) -> tuple[int, ...]:
        info = self.info.get(n.outputs[i])
        if info is None or info[1] is None:
            raise _Unsupported(f"the shape of output '{n.outputs[i]}' is unknown")
        return info[1]

    # Emitting ----------------------------------------------------------------------

    def require(self, optype: str):
        from lightnet.arch import get_proto

        proto = get_proto(optype)
        if proto is None:
            raise _Unsupported(f"needs LightNet op '{optype}', which this build lacks")
        return proto

    def has_param(self, optype: str, param: str) -> bool:
        return any(p.arg_name == param for p in self.require(optype).params)

    def emit(self, optype: str, ins: dict, params: dict, dtype: str, shape, *,
             out: str | None = None, hint: str = "", bind: bool = True) -> Val:
        """Append an op; its output is ONNX tensor `out` when given (bound to it)."""
        self.require(optype)
        name = out if out is not None else self.fresh(hint or optype)
        self.used_tensor_names.add(name)
        tensors_in = []
        for arg, v in ins.items():
            if v is None:
                continue
            if isinstance(v, list):
                tensors_in.extend({"arg_name": f"{arg}{k + 1}", "name": x.name}
                                  for k, x in enumerate(v))
            else:
                tensors_in.append({"arg_name": arg, "name": v.name})
        self.ops.append({
            "name": self.op_name(hint or name),
            "optype": optype,
            "tensors_in": tensors_in,
            "tensors_out": [{"arg_name": "dst", "name": name}],
            "params": [{"arg_name": k, "value": _pyval(v)} for k, v in params.items()],
        })
        v = Val(name, dtype, tuple(int(d) for d in shape))
        if out is not None and bind:
            self.vals[out] = v
        return v

    def bind(self, onnx_name: str, v: Val):
        """ONNX tensor `onnx_name` is LightNet tensor `v` (no op needed)."""
        self.vals[onnx_name] = v

    def result(self, n: Node, v: Val, i: int = 0):
        self.bind(n.outputs[i], v)

    def reshape(self, x: Val, shape, *, out: str | None = None, hint: str = "") -> Val:
        shape = tuple(int(d) for d in shape)
        if out is None and _lnshape(shape) == _lnshape(x.shape):
            return Val(x.name, x.dtype, shape)
        return self.emit("reshape", {"src": x}, {"dims": list(_lnshape(shape))}, x.dtype, shape,
                         out=out, hint=hint or f"{x.name}_reshape")

    # Finishing -----------------------------------------------------------------------

    def _finish(self):
        readers: dict[str, list[dict]] = {}
        for op in self.ops:
            for t in op["tensors_in"]:
                readers.setdefault(t["name"], []).append(op)
        for o in self.graph.output:
            name = o.name
            if name in self.vals:
                v = self.vals[name]
            elif name in self.materialized:
                v = self.materialized[name]
            elif name in self.consts:
                self.materialize(name)
                continue
            else:
                raise LightNetError(f"graph output '{name}' is not computed by any node")
            if v.name == name and name not in readers:
                continue
            if v.name == name:
                producer = next(op for op in self.ops
                                if any(t["name"] == name for t in op["tensors_out"]))
                if producer["optype"] == "input":
                    continue  # an input that is also an output: it stays an input
                inner = self.fresh(f"{name}_inner")
                for t in producer["tensors_out"]:
                    if t["name"] == name:
                        t["name"] = inner
                for op in readers[name]:
                    for t in op["tensors_in"]:
                        if t["name"] == name:
                            t["name"] = inner
                if name in self.weights:
                    self.weights[inner] = self.weights.pop(name)
                v = Val(inner, v.dtype, v.shape)
            self.emit("forward", {"src": v}, {}, v.dtype, v.shape, out=name, hint=name)
            readers.setdefault(v.name, []).append(self.ops[-1])
        # Inputs, then every constant, then the computation in node order.
        rank = {"input": 0, "create": 1}
        self.ops.sort(key=lambda op: rank.get(op["optype"], 2))

    def check(self, ir):
        """Run LightNet's checks on the IR, and compare its shapes with ONNX's."""
        from lightnet.context import Context

        ctx = Context()
        try:
            ctx.init(ir)
        except LightNetError as e:
            raise LightNetError(f"the imported model fails LightNet's checks (an invalid "
                                f"ONNX model, or an importer bug): {e}") from None
        for onnx_name, v in self.vals.items():
            entry = ctx.tensors.get(v.name) if v.name in ctx.tensors else None
            info = self.info.get(onnx_name)
            if entry is None or info is None or info[1] is None:
                continue
            if tuple(entry.shape) != _lnshape(info[1]):
                raise LightNetError(
                    f"importer bug: tensor '{onnx_name}' has shape {list(entry.shape)} in "
                    f"LightNet but {list(info[1])} in ONNX")
        ctx.cleanup()


class _Poisoned(Exception):
    """A node reads the output of a node that could not be mapped."""


# -----------------------------------------------------------------------------
# Op mappings
# -----------------------------------------------------------------------------

def _check_attrs(n: Node, known: set[str]):
    extra = sorted(set(n.attrs) - known)
    if extra:
        raise _Unsupported(f"attribute{'s' if len(extra) > 1 else ''} {', '.join(extra)}")


def _float_input(x: Val, what: str):
    if x.dtype not in _FLOAT_TL:
        raise _Unsupported(f"{what} of dtype {x.dtype} (only float and double)")


def _spatial_params(c: _Converter, n: Node, k: int, kernel):
    """strides, dilations, pads ([top, left, bottom, right] for 2-D) and autopad of a
    conv / pool node with `k` spatial dims."""
    a = n.attrs
    strides = list(a.get("strides") or [1] * k)
    dilations = list(a.get("dilations") or [1] * k)
    pads = list(a.get("pads") or [0] * (2 * k))
    autopad = a.get("auto_pad", "NOTSET") or "NOTSET"
    if autopad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise _Unsupported(f"auto_pad {autopad}")
    if autopad != "NOTSET":
        pads = [0] * (2 * k)
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k or len(kernel) != k:
        raise _Unsupported("attribute lengths do not match the spatial rank")
    if k == 1:  # lift 1-D to 2-D with H = 1
        return [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]], autopad, [1] + list(kernel)
    return strides, dilations, pads, autopad, list(kernel)


def _lift(c: _Converter, x: Val) -> Val:
    """[N, C, L] -> [N, C, 1, L]."""
    return c.reshape(x, x.shape[:2] + (1,) + x.shape[2:])


@_handler("Conv", 1, 11, 22)
def _conv(c: _Converter, n: Node):
    _check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
    x = c.val(n.input(0))
    _float_input(x, "Conv input")
    if x.rank not in (3, 4):
        raise _Unsupported(f"{x.rank - 2}-D convolution (only 1-D and 2-D)")
    k = x.rank - 2
    w = c.val(n.input(1))
    kernel = n.attrs.get("kernel_shape") or w.shape[2:]
    strides, dilations, pads, autopad, kernel = _spatial_params(c, n, k, kernel)
    if n.has_input(2):
        b = c.val(n.input(2))
    else:
        b = c.tensor_const(np.zeros(w.shape[0]), w.dtype, f"{n.outputs[0]}_bias")
    if k == 1:
        x, w = _lift(c, x), _lift(c, w)
    params = {"group": n.attrs.get("group", 1), "size": kernel, "stride": strides,
              "dilation": dilations, "padding": pads, "autopad": autopad}
    shape = c.out_shape(n)
    if k == 1:
        y = c.emit("conv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype,
                   shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    else:
        c.emit("conv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("ConvTranspose", 1, 11, 22)
def _conv_transpose(c: _Converter, n: Node):
    _check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                     "output_shape", "pads", "strides"})
    x = c.val(n.input(0))
    _float_input(x, "ConvTranspose input")
    if x.rank not in (3, 4):
        raise _Unsupported(f"{x.rank - 2}-D transposed convolution (only 1-D and 2-D)")
    k = x.rank - 2
    w = c.val(n.input(1))
    group = n.attrs.get("group", 1)
    kernel = n.attrs.get("kernel_shape") or w.shape[2:]
    strides, dilations, pads, autopad, kernel = _spatial_params(c, n, k, kernel)
    output_padding = list(n.attrs.get("output_padding") or [0] * k)
    output_shape = list(n.attrs.get("output_shape") or [])[-k:]
    in_hw = list(x.shape[2:])
    if k == 1:
        output_padding = [0] + output_padding
        output_shape = [1] + output_shape if output_shape else []
        in_hw = [1] + in_hw
    natural = [s * (i - 1) + p + (kk - 1) * d + 1 for i, s, p, kk, d in
               zip(in_hw, strides, output_padding, kernel, dilations)]
    if output_shape:
        # The padding comes from output_shape, cropping the uncropped output as the
        # spec splits it; a larger output_shape extends the end, as output_padding
        # does (ONNX Runtime's behaviour).
        pads = [0] * 4
        output_padding = [p + max(0, o - full)
                          for p, o, full in zip(output_padding, output_shape, natural)]
    elif autopad in ("SAME_UPPER", "SAME_LOWER") and any(
            full < i * s for full, i, s in zip(natural, in_hw, strides)):
        # SAME aims at in * stride by cropping; an axis that is shorter keeps its
        # natural size (the padding clamps at 0, as ONNX inference and Runtime do).
        begin, end = [], []
        for full, i, s in zip(natural, in_hw, strides):
            total = max(0, full - i * s)
            small = total // 2
            begin.append(small if autopad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        pads, autopad = begin + end, "NOTSET"
    if n.has_input(2):
        b = c.val(n.input(2))
    else:
        b = c.tensor_const(np.zeros(w.shape[1] * group), w.dtype, f"{n.outputs[0]}_bias")
    if k == 1:
        x, w = _lift(c, x), _lift(c, w)
    params = {"group": group, "size": kernel, "stride": strides, "dilation": dilations,
              "padding": pads, "output_padding": output_padding, "autopad": autopad}
    if output_shape:
        params["output_dims"] = output_shape
    shape = c.out_shape(n)
    if k == 1:
        y = c.emit("deconv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype,
                   shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    else:
        c.emit("deconv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("BatchNormalization", 1, 6, 7, 9, 14, 15)
def _batchnorm(c: _Converter, n: Node):
    _check_attrs(n, {"epsilon", "momentum", "spatial", "is_test", "consumed_inputs",
                     "training_mode"})
    if n.attrs.get("training_mode", 0):
        raise _Unsupported("training_mode 1")
    if any(c.used(n, i) for i in range(1, len(n.outputs))):
        raise _Unsupported("training outputs (mean, var, saved_mean, saved_var)")
    x = c.val(n.input(0))
    _float_input(x, "BatchNormalization input")
    args = [c.val(n.input(i)) for i in range(1, 5)]
    if any(a.rank != 1 for a in args):
        raise _Unsupported("spatial 0 (per-activation statistics)")
    scale, offset, mean, var = args
    c.emit("batchnorm", {"src": x, "scale": scale, "offset": offset, "mean": mean, "var": var},
           {"epsilon": n.attrs.get("epsilon", 1e-5)}, x.dtype, x.shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


def _unary_op(optype, float_only=False):
    def handle(c: _Converter, n: Node):
        _check_attrs(n, {"consumed_inputs"})
        x = c.val(n.input(0))
        if float_only:
            _float_input(x, f"{n.op_type} input")
        c.emit(optype, {"src": x}, {}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
    return handle


_handler("Relu", 1, 6, 13, 14)(_unary_op("relu"))
_handler("Sigmoid", 1, 6, 13)(_unary_op("sigmoid", True))
_handler("Tanh", 1, 6, 13)(_unary_op("tanh", True))


@_handler("LeakyRelu", 1, 6, 16)
def _leaky_relu(c: _Converter, n: Node):
    _check_attrs(n, {"alpha", "consumed_inputs"})
    x = c.val(n.input(0))
    c.emit("lrelu", {"src": x}, {"negslope": n.attrs.get("alpha", 0.01)}, x.dtype, x.shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("PRelu", 1, 6, 7, 9, 16)
def _prelu(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
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


@_handler("Clip", 1, 6, 11, 12, 13)
def _clip(c: _Converter, n: Node):
    x = c.val(n.input(0))
    if x.dtype == "TL_BOOL":
        raise _Unsupported("bool input")
    if n.version < 11:
        # Attribute form: the bounds default to float's lowest and largest values.
        _check_attrs(n, {"min", "max", "consumed_inputs"})
        lo, hi = n.attrs.get("min", -_FLT_MAX), n.attrs.get("max", _FLT_MAX)
    else:
        # Input form: a missing bound is no bound (infinities pass through).
        _check_attrs(n, set())
        lo = float(c.const(n.input(1), "min").reshape(())) if n.has_input(1) else None
        hi = float(c.const(n.input(2), "max").reshape(())) if n.has_input(2) else None
    if lo is not None and hi is not None:
        c.emit("clip", {"src": x}, {"min": lo, "max": hi}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
    elif lo is not None:
        _elew(c, n, x, c.scalar(lo, x.dtype, f"{n.outputs[0]}_min"), "TL_MAX")
    elif hi is not None:
        _elew(c, n, x, c.scalar(hi, x.dtype, f"{n.outputs[0]}_max"), "TL_MIN")
    else:
        _reshape_to(c, n, x, x.shape)


def _pool(optype):
    def handle(c: _Converter, n: Node):
        _check_attrs(n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                         "kernel_shape", "pads", "strides", "storage_order"})
        if c.used(n, 1):
            raise _Unsupported("the Indices output")
        x = c.val(n.input(0))
        if x.rank not in (3, 4):
            raise _Unsupported(f"{x.rank - 2}-D pooling (only 1-D and 2-D)")
        if optype == "avgpool2d":
            _float_input(x, "AveragePool input")
        k = x.rank - 2
        kernel = n.attrs.get("kernel_shape")
        strides, dilations, pads, autopad, kernel = _spatial_params(c, n, k, kernel)
        params = {"size": kernel, "stride": strides, "padding": pads, "autopad": autopad}
        if any(d != 1 for d in dilations):
            if not c.has_param(optype, "dilation"):
                raise _Unsupported(f"dilations {n.attrs['dilations']}")
            params["dilation"] = dilations
        if n.attrs.get("count_include_pad", 0):
            if c.has_param(optype, "count_include_pad"):
                params["count_include_pad"] = True
            elif any(pads) or autopad in ("SAME_UPPER", "SAME_LOWER"):
                raise _Unsupported("count_include_pad 1 with padding")
        shape = c.out_shape(n)
        if n.attrs.get("ceil_mode", 0):
            if c.has_param(optype, "ceil_mode"):
                params["ceil_mode"] = True
            else:
                from lightnet.kernels import autopad_padding, pool2d_output_hw

                in_hw = x.shape[2:] if k == 2 else (1,) + x.shape[2:]
                padding = autopad_padding(in_hw, kernel, strides, [1, 1], autopad) or pads
                if tuple(pool2d_output_hw(in_hw, kernel, strides, padding)) != tuple(
                        pool2d_output_hw(in_hw, kernel, strides, padding, ceil_mode=True)):
                    raise _Unsupported("ceil_mode 1 where it changes the output size")
        if k == 1:
            y = c.emit(optype, {"src": _lift(c, x)}, params, x.dtype,
                       shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
            c.reshape(y, shape, out=n.outputs[0])
        else:
            c.emit(optype, {"src": x}, params, x.dtype, shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
    return handle


_handler("MaxPool", 1, 8, 10, 11, 12, 22)(_pool("maxpool2d"))
_handler("AveragePool", 1, 7, 10, 11, 19, 22)(_pool("avgpool2d"))


def _global_pool(optype):
    def handle(c: _Converter, n: Node):
        _check_attrs(n, set())
        x = c.val(n.input(0))
        if x.rank < 3:
            raise _Unsupported(f"rank-{x.rank} input")
        if optype == "global_avgpool2d":
            _float_input(x, "GlobalAveragePool input")
        shape = x.shape[:2] + (1,) * (x.rank - 2)
        if x.rank == 4:
            c.emit(optype, {"src": x}, {}, x.dtype, shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
            return
        flat = c.reshape(x, x.shape[:2] + (math.prod(x.shape[2:]), 1))
        y = c.emit(optype, {"src": flat}, {}, x.dtype, x.shape[:2] + (1, 1), hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    return handle


_handler("GlobalAveragePool", 1, 22)(_global_pool("global_avgpool2d"))
_handler("GlobalMaxPool", 1, 22)(_global_pool("global_maxpool2d"))


@_handler("LRN", 1, 13)
def _lrn(c: _Converter, n: Node):
    _check_attrs(n, {"alpha", "beta", "bias", "size"})
    x = c.val(n.input(0))
    _float_input(x, "LRN input")
    a = n.attrs
    c.emit("lrn", {"src": x}, {"size": a["size"], "alpha": a.get("alpha", 1e-4),
                               "beta": a.get("beta", 0.75), "bias": a.get("bias", 1.0)},
           x.dtype, x.shape, out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("Gemm", 1, 6, 7, 9, 11, 13)
def _gemm(c: _Converter, n: Node):
    _check_attrs(n, {"alpha", "beta", "transA", "transB", "broadcast"})
    a, b = c.val(n.input(0)), c.val(n.input(1))
    _float_input(a, "Gemm input")
    if a.rank != 2 or b.rank != 2:
        raise _Unsupported("non 2-D operands")
    shape = c.out_shape(n)
    beta = n.attrs.get("beta", 1.0)
    bias = c.val(n.input(2)) if n.has_input(2) and beta != 0 else None
    if bias is not None and bias.rank > 2:
        raise _Unsupported(f"rank-{bias.rank} C")
    c.emit("matmul", {"src1": a, "src2": b, "bias": bias},
           {"transA": bool(n.attrs.get("transA", 0)), "transB": bool(n.attrs.get("transB", 0)),
            "alpha": n.attrs.get("alpha", 1.0), "beta": beta},
           a.dtype, shape, out=n.outputs[0], hint=n.name or n.outputs[0])


_MAX_BATCH = 256  # batched MatMul becomes this many 2-D matmuls at most


@_handler("MatMul", 1, 9, 13)
def _matmul(c: _Converter, n: Node):
    """numpy matmul: 1-D operands gain a dim; [..., M, K] @ [K, N] is one 2-D matmul of
    the flattened rows; two stacks of matrices become one matmul per matrix, joined
    by a concat."""
    _check_attrs(n, set())
    a, b = c.val(n.input(0)), c.val(n.input(1))
    _float_input(a, "MatMul input")
    shape = c.out_shape(n)
    if a.rank == 1:
        a = c.reshape(a, (1,) + a.shape)
    if b.rank == 1:
        b = c.reshape(b, b.shape + (1,))
    if b.rank == 2:
        m = math.prod(a.shape[:-1])
        a = c.reshape(a, (m, a.shape[-1]))
        out2d = (m, b.shape[1])
        if out2d == tuple(shape):
            c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
        else:
            y = c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, out2d, hint=n.outputs[0])
            c.reshape(y, shape, out=n.outputs[0])
        return
    from lightnet.kernels import broadcast_shape

    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    count = math.prod(batch)
    if count > _MAX_BATCH:
        raise _Unsupported(f"a batch of {count} matrices (at most {_MAX_BATCH})")
    (mm, k), nn = a.shape[-2:], b.shape[-1]

    def matrices(x: Val):
        """The batch of `x` broadcast to `batch`, as a list of 2-D tensors."""
        xb = x.shape[:-2]
        full = (1,) * (len(batch) - len(xb)) + xb
        flat = c.reshape(x, (math.prod(xb),) + x.shape[-2:])
        result = []
        for index in np.ndindex(*batch):
            src = np.ravel_multi_index(tuple(i if d != 1 else 0 for i, d in zip(index, full)),
                                       full) if full else 0
            part = _slice_val(c, flat, 0, int(src), 1, f"{n.outputs[0]}_mat")
            result.append(c.reshape(part, x.shape[-2:]))
        return result

    products = [c.emit("matmul", {"src1": x, "src2": y}, {}, a.dtype, (mm, nn),
                       hint=f"{n.outputs[0]}_product")
                for x, y in zip(matrices(a), matrices(b))]
    if len(products) == 1:
        c.reshape(products[0], shape, out=n.outputs[0])
        return
    y = c.emit("concat", {"src": products}, {"axis": 0}, a.dtype, (count * mm, nn),
               hint=f"{n.outputs[0]}_concat")
    c.reshape(y, shape, out=n.outputs[0])


_ELEW = {"Add": "TL_SUM", "Sub": "TL_SUB", "Mul": "TL_MUL", "Div": "TL_DIV", "Pow": "TL_POW",
         "Max": "TL_MAX", "Min": "TL_MIN", "Sum": "TL_SUM", "Mean": "TL_SUM"}


def _legacy_b(c: _Converter, n: Node, a: Val, b: Val) -> Val:
    if n.version < 7 and n.attrs.get("broadcast", 0) and "axis" in n.attrs:
        axis = _axes([n.attrs["axis"]], a.rank)[0]
        b = c.reshape(b, b.shape + (1,) * (a.rank - axis - b.rank))
    return b


def _elew(c: _Converter, n: Node, a: Val, b: Val, op: str, *, out=True) -> Val:
    if a.dtype != b.dtype:
        raise _Unsupported(f"operands of dtypes {a.dtype} and {b.dtype}")
    if a.dtype == "TL_BOOL":
        raise _Unsupported("bool operands")
    from lightnet.kernels import broadcast_shape

    shape = broadcast_shape(a.shape, b.shape) if a.shape and b.shape else (a.shape or b.shape)
    kwargs = {"out": n.outputs[0], "hint": n.name or n.outputs[0]} if out else {
        "hint": f"{n.outputs[0]}_part"}
    return c.emit("elew", {"src1": a, "src2": b}, {"elew_op": op}, a.dtype, shape, **kwargs)


def _binary_handler(c: _Converter, n: Node):
    _check_attrs(n, {"broadcast", "axis", "consumed_inputs"})
    a = c.val(n.input(0))
    if n.op_type == "Pow" and c.is_const(n.input(1)):
        e = c.const(n.input(1))
        if a.dtype not in _FLOAT_TL and np.any(e != np.trunc(e)):
            raise _Unsupported(f"a fractional exponent for a {a.dtype} base")
        if e.dtype != _NP_OF_TL[a.dtype]:
            name = c.fresh(f"{n.input(1)}_as_{a.dtype}")
            c.consts[name] = e.astype(_NP_OF_TL[a.dtype])
            b = c.materialize(name)
        else:
            b = c.val(n.input(1))
    else:
        b = c.val(n.input(1))
    b = _legacy_b(c, n, a, b)
    _elew(c, n, a, b, _ELEW[n.op_type])


for _op, _versions in {"Add": (1, 6, 7, 13, 14), "Sub": (1, 6, 7, 13, 14),
                       "Mul": (1, 6, 7, 13, 14), "Div": (1, 6, 7, 13, 14),
                       "Pow": (1, 7, 12, 13, 15)}.items():
    _handler(_op, *_versions)(_binary_handler)


def _variadic_handler(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    xs = [c.val(x) for x in n.inputs if x]
    op = _ELEW[n.op_type]
    if len(xs) == 1:
        _reshape_to(c, n, xs[0], xs[0].shape)
        return
    acc = xs[0]
    for i, x in enumerate(xs[1:]):
        last = i == len(xs) - 2 and n.op_type != "Mean"
        acc = _elew(c, n, acc, x, op, out=last)
    if n.op_type == "Mean":
        if acc.dtype not in _FLOAT_TL:
            raise _Unsupported("Mean of integers")
        k = c.scalar(1.0 / len(xs), acc.dtype, f"{n.outputs[0]}_recip")
        _elew(c, n, acc, k, "TL_MUL")


for _op, _versions in {"Sum": (1, 6, 8, 13), "Max": (1, 6, 8, 12, 13),
                       "Min": (1, 6, 8, 12, 13), "Mean": (1, 6, 8, 13)}.items():
    _handler(_op, *_versions)(_variadic_handler)


@_handler("Neg", 1, 6, 13)
def _neg(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    x = c.val(n.input(0))
    if x.dtype.startswith("TL_UINT"):
        raise _Unsupported("unsigned input")
    _elew(c, n, x, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL")


@_handler("Reciprocal", 1, 6, 13)
def _reciprocal(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    x = c.val(n.input(0))
    _float_input(x, "Reciprocal input")
    _elew(c, n, c.scalar(1, x.dtype, f"{n.outputs[0]}_one"), x, "TL_DIV")


@_handler("Sqrt", 1, 6, 13)
def _sqrt(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    x = c.val(n.input(0))
    _float_input(x, "Sqrt input")
    _elew(c, n, x, c.scalar(0.5, x.dtype, f"{n.outputs[0]}_half"), "TL_POW")


@_handler("Concat", 1, 4, 11, 13)
def _concat(c: _Converter, n: Node):
    _check_attrs(n, {"axis"})
    names = [x for x in n.inputs if x and not (c.is_const(x) and c.const(x).size == 0)]
    xs = [c.val(x) for x in names]
    axis = _axes([n.attrs.get("axis", 1)], xs[0].rank)[0]
    shape = c.out_shape(n)
    if len(xs) == 1:
        c.emit("forward", {"src": xs[0]}, {}, xs[0].dtype, shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
        return
    if len({x.dtype for x in xs}) > 1:
        raise _Unsupported("inputs of different dtypes")
    c.emit("concat", {"src": xs}, {"axis": axis}, xs[0].dtype, shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


def _reshape_to(c: _Converter, n: Node, x: Val, shape):
    if tuple(shape) == x.shape:
        c.result(n, Val(x.name, x.dtype, tuple(shape)))
        return
    if any(d <= 0 for d in shape):
        raise _Unsupported(f"empty result shape {list(shape)}")
    c.reshape(x, shape, out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("Reshape", 1, 5, 13, 14, 19, 21, 23, 24)
def _reshape(c: _Converter, n: Node):
    _check_attrs(n, {"shape", "allowzero", "consumed_inputs"})
    x = c.val(n.input(0))
    if n.version >= 5:
        c.const(n.input(1), "shape")
    ins = [None, c.consts.get(n.input(1))]
    _reshape_to(c, n, x, _reshape_target(n, ins, x.shape))


@_handler("Flatten", 1, 9, 11, 13, 21, 23, 24)
def _flatten(c: _Converter, n: Node):
    _check_attrs(n, {"axis"})
    x = c.val(n.input(0))
    _reshape_to(c, n, x, _flatten_shape(n, x.shape))


@_handler("Squeeze", 1, 11, 13, 21, 23, 24)
def _squeeze(c: _Converter, n: Node):
    _check_attrs(n, {"axes"})
    x = c.val(n.input(0))
    ins = [None, c.const(n.input(1), "axes") if n.version >= 13 and n.has_input(1) else None]
    axes = _squeeze_axes(n, ins, x.rank, x.shape)
    if any(x.shape[a] != 1 for a in axes):
        raise _Unsupported(f"squeezing axes {axes} of shape {list(x.shape)}")
    _reshape_to(c, n, x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@_handler("Unsqueeze", 1, 11, 13, 21, 23, 24)
def _unsqueeze(c: _Converter, n: Node):
    _check_attrs(n, {"axes"})
    x = c.val(n.input(0))
    ins = [None, c.const(n.input(1), "axes") if n.version >= 13 else None]
    _reshape_to(c, n, x, _unsqueeze_shape(n, ins, x.shape))


@_handler("Transpose", 1, 13, 21, 23, 24)
def _transpose(c: _Converter, n: Node):
    _check_attrs(n, {"perm"})
    x = c.val(n.input(0))
    perm = n.attrs.get("perm")
    perm = list(range(x.rank))[::-1] if perm is None else _axes(perm, x.rank)
    shape = tuple(x.shape[p] for p in perm)
    if perm == sorted(perm) or x.rank <= 1:
        _reshape_to(c, n, x, shape)
        return
    c.emit("transpose", {"src": x}, {"axes": perm}, x.dtype, shape, out=n.outputs[0],
           hint=n.name or n.outputs[0])


@_handler("Softmax", 1, 11, 13)
def _softmax(c: _Converter, n: Node):
    _check_attrs(n, {"axis"})
    x = c.val(n.input(0))
    _float_input(x, "Softmax input")
    rank = max(x.rank, 1)
    axis = _axes([n.attrs.get("axis", 1 if n.version < 13 else -1)], rank)[0]
    c.require("softmax")
    if n.version >= 13 or axis == rank - 1:
        c.emit("softmax", {"src": x}, {"axis": axis}, x.dtype, x.shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
        return
    # Opset < 13: softmax over the input flattened to [prod(d[:axis]), prod(d[axis:])].
    flat = c.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    y = c.emit("softmax", {"src": flat}, {"axis": 1}, x.dtype, flat.shape, hint=n.outputs[0])
    c.reshape(y, x.shape, out=n.outputs[0])


@_handler("Dropout", 1, 6, 7, 10, 12, 13, 22)
def _dropout(c: _Converter, n: Node):
    _check_attrs(n, {"ratio", "is_test", "seed", "consumed_inputs"})
    if c.used(n, 1):
        raise _Unsupported("the mask output")
    if n.version >= 12 and n.has_input(2):
        if bool(np.asarray(c.const(n.input(2), "training_mode")).reshape(())):
            raise _Unsupported("training_mode true")
    _identity(c, n)


@_handler("Identity", 1, 13, 14, 16, 19, 21, 23, 24)
def _identity(c: _Converter, n: Node):
    x = c.val(n.input(0))
    _reshape_to(c, n, x, x.shape)


@_handler("Cast", 1, 6, 9, 13, 19, 21, 23, 24)
def _cast(c: _Converter, n: Node):
    x = c.val(n.input(0))
    to = tl_dtype(n.attrs["to"], "Cast target")
    if to != x.dtype:
        raise _Unsupported(f"a Cast from {x.dtype} to {to} of a computed tensor")
    _reshape_to(c, n, x, x.shape)


@_handler("Pad", 1, 2, 11, 13, 18, 19, 21, 23, 24)
def _pad(c: _Converter, n: Node):
    _check_attrs(n, {"mode", "pads", "paddings", "value"})
    x = c.val(n.input(0))
    mode = n.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise _Unsupported(f"mode {mode}")
    if n.version < 11:
        pads = list(n.attrs.get("pads") if n.version >= 2 else n.attrs.get("paddings"))
        value = n.attrs.get("value", 0.0)
    else:
        pads = [int(p) for p in c.const(n.input(1), "pads").reshape(-1)]
        value = 0.0
        if n.has_input(2):
            value = float(c.const(n.input(2), "constant_value").reshape(-1)[0])
        if n.has_input(3):
            axes = _axes(c.const(n.input(3), "axes").reshape(-1), x.rank)
            full = [0] * (2 * x.rank)
            for k, a in enumerate(axes):
                full[a] = pads[k]
                full[a + x.rank] = pads[k + len(axes)]
            pads = full
    if len(pads) != 2 * x.rank:
        raise _Unsupported(f"{len(pads)} pads for a rank-{x.rank} input")
    if not math.isfinite(value):
        raise _Unsupported(f"constant value {value}")
    if not any(pads):
        _reshape_to(c, n, x, x.shape)
        return
    if x.dtype == "TL_BOOL":
        raise _Unsupported("bool input")
    c.emit("pad", {"src": x}, {"pads": pads, "mode": mode, "value": value}, x.dtype,
           c.out_shape(n), out=n.outputs[0], hint=n.name or n.outputs[0])


def _resample(c: _Converter, n: Node, x: Val, scales, sizes, mode, ctm, nearest_mode):
    """Map an ONNX resize of `x` to LightNet's upsample (by scales) or resize (to dims),
    whichever computes exactly the same along every axis."""
    if mode not in ("nearest", "linear"):
        raise _Unsupported(f"mode {mode}")
    from lightnet import kernels

    if sizes is not None:
        out = [int(s) for s in sizes]
        scales = [o / i for o, i in zip(out, x.shape)]
    else:
        scales = [float(s) for s in scales]
        out = [int(math.floor(i * s)) for i, s in zip(x.shape, scales)]
    if len(scales) != x.rank:
        raise _Unsupported(f"{len(scales)} scales for a rank-{x.rank} input")
    if any(o < 1 for o in out):
        raise _Unsupported(f"empty output {out}")
    if x.dtype not in _FLOAT_TL and mode == "linear":
        raise _Unsupported(f"linear mode on {x.dtype}")
    tl_mode = "TL_NEAREST" if mode == "nearest" else "TL_LINEAR"
    # upsample's scales are float32 params: match with the rounded values.
    scales32 = [float(np.float32(s)) for s in scales]
    rng = np.random.default_rng(0)
    ok_up, ok_resize = True, True
    for n_in, n_out, s, s32 in zip(x.shape, out, scales, scales32):
        if n_in == n_out and s == 1:
            continue
        src = rng.random(n_in)
        want = _onnx_resample_1d(src, n_out, s, mode, ctm, nearest_mode)
        got = np.empty(n_out)
        if ok_up and math.floor(n_in * s32) == n_out:
            kernels.upsample(src, got, mode=tl_mode, scales=(s32,))
            ok_up = np.allclose(got, want, rtol=1e-9, atol=1e-12)
        else:
            ok_up = False
        if ok_resize:
            kernels.resize(src, got, mode=tl_mode, dims=(n_out,))
            ok_resize = np.allclose(got, want, rtol=1e-9, atol=1e-12)
    shape = tuple(out)
    if not (ok_up or ok_resize):
        detail = f"mode {mode}, coordinate_transformation_mode {ctm}"
        if mode == "nearest":
            detail += f", nearest_mode {nearest_mode}"
        raise _Unsupported(f"{detail} with scales {[round(s, 4) for s in scales]} "
                           "(LightNet's upsample / resize compute other coordinates)")
    # Sizes given: resize to them; scales given: upsample by them (either when equal).
    if ok_resize and (sizes is not None or not ok_up):
        c.emit("resize", {"src": x}, {"mode": tl_mode, "dims": list(shape)}, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])
    else:
        c.emit("upsample", {"src": x}, {"mode": tl_mode, "scales": scales32}, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


@_handler("Upsample", 7, 9, 10)
def _upsample(c: _Converter, n: Node):
    _check_attrs(n, {"mode", "scales"})
    x = c.val(n.input(0))
    scales = n.attrs.get("scales") if n.version < 9 else c.const(n.input(1), "scales").reshape(-1)
    mode = n.attrs.get("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    _resample(c, n, x, scales, None, mode, "asymmetric", "simple")


@_handler("Resize", 10, 11, 13, 18, 19)
def _resize(c: _Converter, n: Node):
    _check_attrs(n, {"mode", "coordinate_transformation_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value", "nearest_mode", "antialias",
                     "axes", "keep_aspect_ratio_policy"})
    x = c.val(n.input(0))
    mode = n.attrs.get("mode", "nearest")
    if n.version == 10:
        scales = c.const(n.input(1), "scales").reshape(-1)
        _resample(c, n, x, scales, None, mode, "asymmetric", "simple")
        return
    ctm = n.attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest_mode = n.attrs.get("nearest_mode", "round_prefer_floor")
    if ctm == "tf_crop_and_resize":
        raise _Unsupported("coordinate_transformation_mode tf_crop_and_resize")
    scales = sizes = None
    if n.has_input(3):
        sizes = [int(s) for s in c.const(n.input(3), "sizes").reshape(-1)]
    elif n.has_input(2) and c.const(n.input(2), "scales").size:
        scales = [float(s) for s in c.const(n.input(2), "scales").reshape(-1)]
    else:
        raise _Unsupported("neither scales nor sizes")
    axes = n.attrs.get("axes")
    if axes is not None:
        axes = _axes(axes, x.rank)
        full = [1.0] * x.rank if scales is not None else list(x.shape)
        for k, a in enumerate(axes):
            full[a] = (scales or sizes)[k]
        if scales is not None:
            scales = full
        else:
            sizes = full
    policy = n.attrs.get("keep_aspect_ratio_policy", "stretch")
    if sizes is not None and policy != "stretch":
        sel = axes if axes is not None else range(x.rank)
        ratios = [sizes[a] / x.shape[a] for a in sel]
        r = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = list(x.shape)
        for a in sel:
            sizes[a] = int(round(r * x.shape[a]))
        scales, sizes = [r if a in sel else 1.0 for a in range(x.rank)], None
        sizes_after = [int(round(s * d)) for s, d in zip(scales, x.shape)]
        if sizes_after != [int(math.floor(s * d)) for s, d in zip(scales, x.shape)]:
            raise _Unsupported(f"keep_aspect_ratio_policy {policy}")
    if n.attrs.get("antialias", 0):
        check = scales if scales is not None else [o / i for o, i in zip(sizes, x.shape)]
        if any(s < 1 for s in check) and mode != "nearest":
            raise _Unsupported("antialias with downsampling")
    _resample(c, n, x, scales, sizes, mode, ctm, nearest_mode)


def _slice_val(c: _Converter, x: Val, axis: int, start: int, length: int, hint: str,
               out: str | None = None) -> Val:
    shape = x.shape[:axis] + (length,) + x.shape[axis + 1:]
    if length == x.shape[axis] and out is None:
        return x
    return c.emit("slice", {"src": x}, {"axis": axis, "start": start, "len": length}, x.dtype,
                  shape, out=out, hint=hint)


@_handler("Slice", 1, 10, 11, 13)
def _slice(c: _Converter, n: Node):
    _check_attrs(n, {"starts", "ends", "axes"})
    x = c.val(n.input(0))
    ins = [None] + [c.const(n.input(i), "Slice parameter") if n.has_input(i) else None
                    for i in range(1, len(n.inputs))]
    params = _slice_params(n, ins, x.shape)
    y = x
    for axis, start, end, step in params:
        if step != 1:
            raise _Unsupported(f"step {step} on a computed tensor")
        length = max(0, end - start)
        if length == 0:
            raise _Unsupported("an empty slice")
        y = _slice_val(c, y, axis, start, length, f"{n.outputs[0]}_axis{axis}")
    _reshape_to(c, n, y, y.shape)


@_handler("Split", 1, 2, 11, 13, 18)
def _split(c: _Converter, n: Node):
    _check_attrs(n, {"axis", "split", "num_outputs"})
    x = c.val(n.input(0))
    ins = [None, c.const(n.input(1), "split") if n.has_input(1) else None]
    axis, sizes = _split_sizes(n, ins, x.shape, len(n.outputs))
    start = 0
    for i, (o, size) in enumerate(zip(n.outputs, sizes)):
        if o:
            if size <= 0:
                raise _Unsupported("an empty split")
            _slice_val(c, x, axis, start, size, o, out=o)
            c.vals[o] = Val(o, x.dtype, x.shape[:axis] + (size,) + x.shape[axis + 1:])
        start += size


@_handler("Gather", 1, 11, 13)
def _gather(c: _Converter, n: Node):
    _check_attrs(n, {"axis"})
    x = c.val(n.input(0))
    axis = _axes([n.attrs.get("axis", 0)], x.rank)[0]
    if not c.is_const(n.input(1)):
        _gather_pick(c, n, x, axis)
        return
    idx = np.asarray(c.const(n.input(1))).astype(np.int64)
    if idx.ndim > 1:
        raise _Unsupported(f"rank-{idx.ndim} indices")
    flat = [int(i) + x.shape[axis] if i < 0 else int(i) for i in idx.reshape(-1)]
    if any(not 0 <= i < x.shape[axis] for i in flat):
        raise _Unsupported("indices out of range")
    shape = c.out_shape(n)
    runs = []  # (start, len) of consecutive indices
    for i in flat:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    parts = [_slice_val(c, x, axis, s, ln, f"{n.outputs[0]}_part") for s, ln in runs]
    if len(parts) == 1:
        _reshape_to(c, n, parts[0], shape)
        return
    cat_shape = x.shape[:axis] + (len(flat),) + x.shape[axis + 1:]
    y = c.emit("concat", {"src": parts}, {"axis": axis}, x.dtype, cat_shape,
               hint=f"{n.outputs[0]}_concat")
    _reshape_to(c, n, y, shape)


def _gather_pick(c: _Converter, n: Node, x: Val, axis: int):
    """Gather with computed indices (an embedding lookup): pick1d of rows of `x`."""
    idx = c.val(n.input(1))
    if math.prod(x.shape[:axis]) != 1:
        raise _Unsupported(f"computed indices on axis {axis} of {list(x.shape)} "
                           "(only an axis with no larger axis before it)")
    if idx.dtype != "TL_INT32":
        raise _Unsupported(f"indices of dtype {idx.dtype}")
    count = math.prod(idx.shape)
    stride = math.prod(x.shape[axis + 1:])
    flat_x = c.reshape(x, (math.prod(x.shape),))
    flat_i = c.reshape(idx, (count,))
    y = c.emit("pick1d", {"src": flat_x, "src_index": flat_i}, {"len": count, "stride": stride},
               x.dtype, (count * stride,), hint=f"{n.outputs[0]}_pick")
    _reshape_to(c, n, y, c.out_shape(n))


@_handler("Expand", 8, 13)
def _expand(c: _Converter, n: Node):
    x = c.val(n.input(0))
    c.const(n.input(1), "shape")
    shape = c.out_shape(n)
    if tuple(shape) == x.shape:
        _reshape_to(c, n, x, shape)
        return
    zeros = c.tensor_const(np.zeros(shape), x.dtype, f"{n.outputs[0]}_zeros")
    _elew(c, n, x, zeros, "TL_SUM")


@_handler("Abs", 1, 6, 13)
def _abs(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    x = c.val(n.input(0))
    if x.dtype.startswith("TL_UINT"):
        _reshape_to(c, n, x, x.shape)
        return
    neg = _elew(c, n, x, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL", out=False)
    _elew(c, n, x, neg, "TL_MAX")


def _exp(c: _Converter, n: Node, x: Val, *, out: bool) -> Val:
    """exp(x) as e ** x (elew TL_POW with a float e)."""
    e = c.scalar(math.e, x.dtype, f"{n.outputs[0]}_e")
    return _elew(c, n, e, x, "TL_POW", out=out)


@_handler("Exp", 1, 6, 13)
def _exp_handler(c: _Converter, n: Node):
    _check_attrs(n, {"consumed_inputs"})
    x = c.val(n.input(0))
    _float_input(x, "Exp input")
    _exp(c, n, x, out=True)


def _elu_like(c: _Converter, n: Node, alpha: float, gamma: float):
    """gamma * (max(x, 0) + alpha * (exp(min(x, 0)) - 1))."""
    x = c.val(n.input(0))
    _float_input(x, f"{n.op_type} input")
    zero = c.scalar(0, x.dtype, f"{n.outputs[0]}_zero")
    pos = _elew(c, n, x, zero, "TL_MAX", out=False)
    neg = _elew(c, n, x, zero, "TL_MIN", out=False)
    expm1 = _elew(c, n, _exp(c, n, neg, out=False), c.scalar(1, x.dtype, f"{n.outputs[0]}_one"),
                  "TL_SUB", out=False)
    scaled = _elew(c, n, expm1, c.scalar(alpha, x.dtype, f"{n.outputs[0]}_alpha"), "TL_MUL",
                   out=False)
    if gamma == 1:
        _elew(c, n, pos, scaled, "TL_SUM")
        return
    y = _elew(c, n, pos, scaled, "TL_SUM", out=False)
    _elew(c, n, y, c.scalar(gamma, x.dtype, f"{n.outputs[0]}_gamma"), "TL_MUL")


@_handler("Elu", 1, 6, 22)
def _elu(c: _Converter, n: Node):
    _check_attrs(n, {"alpha", "consumed_inputs"})
    _elu_like(c, n, n.attrs.get("alpha", 1.0), 1.0)


@_handler("Selu", 1, 6, 22)
def _selu(c: _Converter, n: Node):
    _check_attrs(n, {"alpha", "gamma", "consumed_inputs"})
    _elu_like(c, n, n.attrs.get("alpha", 1.67326319217681884765625),
              n.attrs.get("gamma", 1.05070102214813232421875))


@_handler("InstanceNormalization", 1, 6, 22)
def _instance_norm(c: _Converter, n: Node):
    """(x - mean) / sqrt(var + epsilon) * scale + B over each [n, c] plane, from
    global average pools and element-wise ops."""
    _check_attrs(n, {"epsilon", "consumed_inputs"})
    x = c.val(n.input(0))
    _float_input(x, "InstanceNormalization input")
    if x.rank < 3:
        raise _Unsupported(f"rank-{x.rank} input")
    nn, ch = x.shape[:2]
    s = math.prod(x.shape[2:])
    x4 = c.reshape(x, (nn, ch, s, 1))
    stat = (nn, ch, 1, 1)
    mean = c.emit("global_avgpool2d", {"src": x4}, {}, x.dtype, stat, hint=f"{n.outputs[0]}_mean")
    d = _elew(c, n, x4, mean, "TL_SUB", out=False)
    sq = _elew(c, n, d, d, "TL_MUL", out=False)
    var = c.emit("global_avgpool2d", {"src": sq}, {}, x.dtype, stat, hint=f"{n.outputs[0]}_var")
    eps = c.scalar(n.attrs.get("epsilon", 1e-5), x.dtype, f"{n.outputs[0]}_eps")
    inv = _elew(c, n, _elew(c, n, var, eps, "TL_SUM", out=False),
                c.scalar(-0.5, x.dtype, f"{n.outputs[0]}_rsqrt"), "TL_POW", out=False)
    scale = c.reshape(c.val(n.input(1)), (ch, 1, 1))
    bias = c.reshape(c.val(n.input(2)), (ch, 1, 1))
    y = _elew(c, n, d, _elew(c, n, inv, scale, "TL_MUL", out=False), "TL_MUL", out=False)
    y = _elew(c, n, y, bias, "TL_SUM", out=False)
    c.reshape(y, x.shape, out=n.outputs[0])


def _reduce_handler(c: _Converter, n: Node):
    """ReduceMean / ReduceSum / ReduceMax / ReduceMin over any axes: the kept axes are
    moved first and the reduced ones last, flattened to [1, kept, reduced, 1] and
    reduced by global average / max pooling."""
    _check_attrs(n, {"axes", "keepdims", "noop_with_empty_axes"})
    x = c.val(n.input(0))
    axes_input = (n.op_type == "ReduceSum" and n.version >= 13) or n.version >= 18
    axes = n.attrs.get("axes")
    if axes_input and n.has_input(1):
        axes = c.const(n.input(1), "axes").reshape(-1).tolist()
    if not axes:
        if n.attrs.get("noop_with_empty_axes", 0):
            _reshape_to(c, n, x, x.shape)
            return
        axes = list(range(x.rank))
    axes = sorted(set(_axes(axes, x.rank)))
    kind = n.op_type[6:].lower()
    if kind in ("mean", "sum"):
        _float_input(x, f"{n.op_type} input")
    if kind == "min" and x.dtype.startswith("TL_UINT"):
        raise _Unsupported(f"unsigned input {x.dtype}")
    kept = [i for i in range(x.rank) if i not in axes]
    perm = kept + axes
    y = x
    if perm != sorted(perm):
        y = c.emit("transpose", {"src": x}, {"axes": perm}, x.dtype,
                   tuple(x.shape[p] for p in perm), hint=f"{n.outputs[0]}_transpose")
    k = math.prod(x.shape[i] for i in kept)
    r = math.prod(x.shape[i] for i in axes)
    y = c.reshape(y, (1, k, r, 1))
    if kind == "min":
        y = _elew(c, n, y, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL", out=False)
    optype = "global_avgpool2d" if kind in ("mean", "sum") else "global_maxpool2d"
    y = c.emit(optype, {"src": y}, {}, x.dtype, (1, k, 1, 1), hint=f"{n.outputs[0]}_pool")
    if kind == "sum" and r != 1:
        y = _elew(c, n, y, c.scalar(r, x.dtype, f"{n.outputs[0]}_count"), "TL_MUL", out=False)
    if kind == "min":
        y = _elew(c, n, y, c.scalar(-1, x.dtype, f"{n.outputs[0]}_minus1"), "TL_MUL", out=False)
    keep = n.attrs.get("keepdims", 1)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else tuple(
        d for i, d in enumerate(x.shape) if i not in axes)
    c.reshape(y, shape, out=n.outputs[0], hint=n.name or n.outputs[0])


_handler("ReduceMean", 1, 11, 13, 18)(_reduce_handler)
_handler("ReduceSum", 1, 11, 13)(_reduce_handler)
_handler("ReduceMax", 1, 11, 12, 13, 18, 20)(_reduce_handler)
_handler("ReduceMin", 1, 11, 12, 13, 18, 20)(_reduce_handler)


@_handler("Tile", 6, 13)
def _tile(c: _Converter, n: Node):
    _check_attrs(n, set())
    x = c.val(n.input(0))
    repeats = [int(r) for r in c.const(n.input(1), "repeats").reshape(-1)]
    if len(repeats) != x.rank or any(r < 1 for r in repeats):
        raise _Unsupported(f"repeats {repeats} of a rank-{x.rank} input")
    y = x
    for axis, r in enumerate(repeats):
        if r > 1:
            shape = y.shape[:axis] + (y.shape[axis] * r,) + y.shape[axis + 1:]
            y = c.emit("concat", {"src": [y] * r}, {"axis": axis}, x.dtype, shape,
                       hint=f"{n.outputs[0]}_axis{axis}")
    _reshape_to(c, n, y, y.shape)


def _not_folded(reason):
    def handle(c: _Converter, n: Node):
        raise _Unsupported(reason)
    return handle


_handler("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24)(_not_folded(
    "only value, value_float(s) and value_int(s) constants of numeric types"))
_handler("ConstantOfShape", 9, 20, 21, 23, 24)(_not_folded(
    "a shape computed from data (only shapes known at import time)"))
_handler("Shape", 1, 13, 15, 19, 21, 23, 24)(_not_folded("an input of unknown shape"))
_handler("Size", 1, 13, 19, 21, 23, 24)(_not_folded("an input of unknown shape"))


SUPPORTED_OPS = sorted(_HANDLERS)


# -----------------------------------------------------------------------------
# Public API
# -----------------------------------------------------------------------------

def _load(model):
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise LightNetError(f"{path}: no such ONNX model")
    try:
        return onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise LightNetError(f"{path}: not a valid ONNX model: {type(e).__name__}: {e}") from None


def convert(model, dims: dict | None = None, check: bool = True):
    """Convert an ONNX model (a path or a ModelProto) to (IR dict, weights dict).

    `dims` gives values to symbolic input dims by name. The weights map the
    name of every `create` op with `from_file: true` to its array. Raises
    UnsupportedModelError listing every operator that cannot be mapped.
    """
    proto = _load(model)
    c = _Converter(proto, dims)
    ir, weights = c.run()
    if check:
        c.check(ir)
    return ir, weights


def save_weights(path, weights: dict[str, np.ndarray]) -> None:
    """Write `weights` as an .npz LightNet reads (`lightnet.weights.write_npz`)."""
    write_npz(path, weights)


def import_model(path, out_json, dims: dict | None = None):
    """Convert the ONNX model at `path`; write the IR to `out_json` and the weights to
    the .npz beside it with the same stem. Returns (IR path, weights path)."""
    ir, weights = convert(path, dims)
    out_json = Path(out_json)
    out_npz = out_json.with_suffix(".npz")
    try:
        out_json.write_text(json.dumps(ir, indent=1) + "\n", encoding="utf-8")
        save_weights(out_npz, weights)
    except OSError as e:
        raise LightNetError(f"cannot write {e.filename}: {e.strerror}") from None
    return out_json, out_npz


def _parse_dim(text: str):
    name, sep, value = text.partition("=")
    if not sep or not name or not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with VALUE >= 1, found {text!r}")
    return name, int(value)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onnx2ln",
        description="Convert an ONNX model to LightNet's JSON IR and an .npz weight file "
                    "(beside the IR, same stem). Run it with: lightnet OUT.json -f OUT.npz")
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--outfile", metavar="OUT.json",
                   help="the IR to write (default: MODEL.json beside MODEL.onnx)")
    p.add_argument("--dim", metavar="NAME=VALUE", action="append", type=_parse_dim, default=[],
                   help="value of a symbolic input dim (repeatable); unnamed or ungiven "
                        "batch dims become 1")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.outfile) if args.outfile else Path(args.model).with_suffix(".json")

    def convert():
        ir_path, npz_path = import_model(args.model, out, dict(args.dim))
        doc = json.loads(ir_path.read_text(encoding="utf-8"))
        with np.load(npz_path) as npz:
            count = len(npz.files)
        print(f"onnx2ln: wrote {ir_path} ({len(doc['ops'])} ops) and {npz_path} "
              f"({count} tensors)")

    return report_errors("onnx2ln", args.debug, convert)


if __name__ == "__main__":
    sys.exit(main())
