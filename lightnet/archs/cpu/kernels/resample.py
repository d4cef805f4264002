"""Nearest and linear resampling of n-D tensors (upsample with scales, resize to dims).

Coordinate rules (per axis, `i` an output index, `in`/`out` the axis sizes):

* TL_NEAREST, upsample: TensorLight's tl_tensor_resize, which LightNet's
  upsample runs: source index round((i + 0.5) * in / out - 0.5) in float32,
  halves away from zero (`nearest_index`).
* TL_NEAREST, resize: ONNX Upsample semantics, source index floor(i * in / out)
  (computed exactly). The two agree for every integer upscale factor, the
  usual case.
* TL_LINEAR (not implemented in TensorLight): ONNX Resize's default
  `half_pixel` transform, x = (i + 0.5) / scale - 0.5, clamped to [0, in - 1],
  then linear interpolation between floor(x) and floor(x) + 1 (the last index
  repeats at the edge). n-D linear is separable: axes are interpolated one
  after the other.

Axes whose mapping is the identity are skipped. The other axes are gathered
one at a time (np.take), so a workspace holds the index tables, the weights and
the intermediate buffers; build it once with upsample_workspace /
resize_workspace and pass it as `ws` to avoid per-call allocation. The buffers
(an intermediate per gathered axis but the last, and linear's products) are
the op's planned scratch (upsample_scratch / resize_scratch: see
kernels.scratch); the tables, O(sum of dst's dims), are made at load.
"""

import math

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve
from lightnet.ir.shapes import upsample_shape

__all__ = [
    "resize",
    "resize_scratch",
    "resize_workspace",
    "upsample",
    "upsample_scratch",
    "upsample_workspace",
]

_MODES = ("TL_NEAREST", "TL_LINEAR")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"unknown resize mode {mode!r} (known: {', '.join(_MODES)})")


def _linear_table(x: np.ndarray, n_in: int):
    """(i0, i1, w1) for half-pixel source coordinates `x` on an axis of size n_in."""
    x = np.clip(x, 0, n_in - 1)
    i0 = np.floor(x).astype(np.intp)
    return i0, np.minimum(i0 + 1, n_in - 1), x - i0


def _identity_axes(src_shape, dst_shape, tables) -> list:
    """Whether each axis's mapping (`tables[axis]`: (i0,) or (i0, i1, w1)) is the identity."""
    return [
        n_in == n_out
        and np.array_equal(table[0], np.arange(n_out))
        and (len(table) == 1 or not table[2].any())
        for n_in, n_out, table in zip(src_shape, dst_shape, tables)
    ]


def _stage_shapes(src_shape, dst_shape, identity) -> list:
    """(axis, shape after gathering it) for each axis not marked `identity`, in order."""
    stages, shape = [], list(src_shape)
    for axis, same in enumerate(identity):
        if not same:
            shape[axis] = dst_shape[axis]
            stages.append((axis, tuple(shape)))
    return stages


def _layout(src_shape, dst_shape, dtype, mode, identity) -> tuple:
    """Scratch layout (see kernels.scratch): the output of every stage but the
    last (which writes dst), and for TL_LINEAR the second gather of the largest."""
    stages = _stage_shapes(src_shape, dst_shape, identity)
    layout = tuple((f"stage{k}", shape, dtype) for k, (_, shape) in enumerate(stages[:-1]))
    if mode == "TL_LINEAR" and stages:
        layout += (("products", (max(math.prod(shape) for _, shape in stages),), dtype),)
    return layout


def _plan(src_shape, dst_shape, dtype, mode, tables, scratch) -> list:
    """Gather stages for the non-identity axes, their buffers carved from `scratch`
    (new when None)."""
    dtype = np.dtype(dtype)
    if mode == "TL_LINEAR" and not np.issubdtype(dtype, np.floating):
        raise ValueError(f"TL_LINEAR resampling needs a floating dtype, not {dtype}")
    ndim = len(src_shape)
    identity = _identity_axes(src_shape, dst_shape, tables)
    buffers = carve(scratch, _layout(src_shape, dst_shape, dtype, mode, identity))
    stages = []
    for k, (axis, shape) in enumerate(_stage_shapes(src_shape, dst_shape, identity)):
        table = tables[axis]
        out = buffers.get(f"stage{k}")
        if len(table) == 1:
            stages.append((axis, table[0], out, None))
            continue
        i0, i1, w1 = table
        bshape = (-1,) + (1,) * (ndim - axis - 1)
        weights = ((1 - w1).astype(dtype).reshape(bshape), w1.astype(dtype).reshape(bshape))
        tmp = buffers["products"][: math.prod(shape)].reshape(shape)
        stages.append((axis, i0, out, (i1, weights, tmp)))
    return stages


def _run(src: np.ndarray, dst: np.ndarray, stages: list) -> None:
    if not stages:
        np.copyto(dst, src)
        return
    cur = src
    for axis, i0, out, linear in stages:
        out = dst if out is None else out
        np.take(cur, i0, axis=axis, out=out, mode="clip")
        if linear is not None:
            i1, (w0, w1), tmp = linear
            np.take(cur, i1, axis=axis, out=tmp, mode="clip")
            np.multiply(out, w0, out=out)
            np.multiply(tmp, w1, out=tmp)
            np.add(out, tmp, out=out)
        cur = out


def _upsample_tables(src_shape, mode: str, scales):
    _check_mode(mode)
    dst_shape = upsample_shape(src_shape, scales)
    tables = []
    for n_in, n_out, scale in zip(src_shape, dst_shape, scales):
        if mode == "TL_NEAREST":
            tables.append((nearest_index(n_in, n_out),))
        else:
            i = np.arange(n_out, dtype=np.float64)
            tables.append(_linear_table((i + 0.5) / scale - 0.5, n_in))
    return dst_shape, tables


def upsample_scratch(src_shape, dtype, *, mode: str, scales) -> tuple:
    """Scratch layout of upsample (see kernels.scratch), found without building
    the tables (it runs at check time, before the memory limit is applied): an
    axis of unchanged size is the identity unless it is a linear one of more
    than one cell with a scale other than 1."""
    _check_mode(mode)
    dst_shape = upsample_shape(src_shape, scales)
    identity = [
        n_in == n_out and (mode == "TL_NEAREST" or n_in == 1 or scale == 1)
        for n_in, n_out, scale in zip(src_shape, dst_shape, scales)
    ]
    return _layout(tuple(src_shape), dst_shape, np.dtype(dtype), mode, identity)


def upsample_workspace(src_shape, dtype, *, mode: str, scales, scratch=None) -> list:
    """Precomputed tables and buffers (carved from `scratch`, new when None) for
    upsample(src of `src_shape`, dst of `dtype`)."""
    dst_shape, tables = _upsample_tables(src_shape, mode, scales)
    return _plan(tuple(src_shape), dst_shape, dtype, mode, tables, scratch)


def nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """The source index of each of `n_out` outputs of TensorLight's nearest
    resize of an axis of `n_in`: roundf(((float)i + 0.5) * scale - 0.5) with
    the float32 scale in / out, rounding halves away from zero."""
    scale = np.float64(np.float32(n_in) / np.float32(n_out))
    i = np.arange(n_out, dtype=np.float32).astype(np.float64)
    x = ((i + 0.5) * scale - 0.5).astype(np.float32).astype(np.float64)
    rounded = np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.clip(rounded, 0, n_in - 1).astype(np.intp)


def _checked_dims(src_shape, dims) -> tuple:
    dims = tuple(dims)
    if len(dims) != len(src_shape) or any(d < 1 for d in dims):
        raise ValueError(
            f"resize dims {list(dims)} must be {len(src_shape)} positive sizes "
            f"(one per dimension of {list(src_shape)})"
        )
    return dims


def _resize_tables(src_shape, mode: str, dims):
    _check_mode(mode)
    dims = _checked_dims(src_shape, dims)
    tables = []
    for n_in, n_out in zip(src_shape, dims):
        i = np.arange(n_out)
        if mode == "TL_NEAREST":
            tables.append((i * n_in // n_out,))
        else:
            tables.append(_linear_table(((2 * i + 1) * n_in - n_out) / (2 * n_out), n_in))
    return dims, tables


def resize_scratch(src_shape, dtype, *, mode: str, dims) -> tuple:
    """Scratch layout of resize (see kernels.scratch), found without building
    the tables: an axis keeps its identity mapping exactly when its size is unchanged."""
    _check_mode(mode)
    dims = _checked_dims(src_shape, dims)
    identity = [n_in == n_out for n_in, n_out in zip(src_shape, dims)]
    return _layout(tuple(src_shape), dims, np.dtype(dtype), mode, identity)


def resize_workspace(src_shape, dtype, *, mode: str, dims, scratch=None) -> list:
    """Precomputed tables and buffers (carved from `scratch`, new when None) for
    resize(src of `src_shape` to `dims`, of `dtype`)."""
    dims, tables = _resize_tables(src_shape, mode, dims)
    return _plan(tuple(src_shape), dims, dtype, mode, tables, scratch)


def upsample(
    src: np.ndarray, dst: np.ndarray, *, mode: str, scales, ws: list | None = None
) -> None:
    """Resample `src` by per-axis `scales` into dst of upsample_shape(src.shape, scales).

    `mode` is TL_NEAREST or TL_LINEAR; see the module docstring for the
    coordinate rules. Works for any rank (scales has one entry per axis).
    """
    if ws is None:
        ws = upsample_workspace(src.shape, dst.dtype, mode=mode, scales=scales)
    _run(src, dst, ws)


def resize(src: np.ndarray, dst: np.ndarray, *, mode: str, dims, ws: list | None = None) -> None:
    """Resample `src` to shape `dims` (== dst.shape), like tl_tensor_resize.

    `mode` is TL_NEAREST or TL_LINEAR; see the module docstring for the
    coordinate rules.
    """
    if ws is None:
        ws = resize_workspace(src.shape, dst.dtype, mode=mode, dims=dims)
    _run(src, dst, ws)
