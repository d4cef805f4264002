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
resize_workspace and pass it as `ws` to avoid per-call allocation.
"""

import math

import numpy as np

__all__ = [
    "resize",
    "resize_workspace",
    "upsample",
    "upsample_shape",
    "upsample_workspace",
]

_MODES = ("TL_NEAREST", "TL_LINEAR")


def upsample_shape(shape, scales) -> tuple:
    """Output shape of upsample: floor(dim * scale) per axis (LightNet's upsample op)."""
    shape, scales = tuple(shape), tuple(scales)
    if len(scales) != len(shape):
        raise ValueError(
            f"upsample needs one scale per dimension: shape {list(shape)} has "
            f"{len(shape)} dims, scales {list(scales)} has {len(scales)}"
        )
    if any(s <= 0 for s in scales):
        raise ValueError(f"upsample scales {list(scales)} must all be > 0")
    return tuple(math.floor(d * s) for d, s in zip(shape, scales))


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"unknown resize mode {mode!r} (known: {', '.join(_MODES)})")


def _linear_table(x: np.ndarray, n_in: int):
    """(i0, i1, w1) for half-pixel source coordinates `x` on an axis of size n_in."""
    x = np.clip(x, 0, n_in - 1)
    i0 = np.floor(x).astype(np.intp)
    return i0, np.minimum(i0 + 1, n_in - 1), x - i0


def _plan(src_shape, dst_shape, dtype, mode, tables) -> list:
    """Gather stages for the non-identity axes; `tables[axis]` is (i0,) or (i0, i1, w1)."""
    dtype = np.dtype(dtype)
    if mode == "TL_LINEAR" and not np.issubdtype(dtype, np.floating):
        raise ValueError(f"TL_LINEAR resampling needs a floating dtype, not {dtype}")
    ndim = len(src_shape)
    axes = []
    for axis, table in enumerate(tables):
        identity = src_shape[axis] == dst_shape[axis] and np.array_equal(
            table[0], np.arange(dst_shape[axis])
        )
        if not (identity and (len(table) == 1 or not table[2].any())):
            axes.append(axis)
    shape = list(src_shape)
    stage_shapes = []
    for axis in axes:
        shape[axis] = dst_shape[axis]
        stage_shapes.append(tuple(shape))
    scratch = None
    if mode == "TL_LINEAR" and axes:
        scratch = np.empty(max(math.prod(s) for s in stage_shapes), dtype=dtype)
    stages = []
    for k, (axis, shape) in enumerate(zip(axes, stage_shapes)):
        table = tables[axis]
        out = None if k == len(axes) - 1 else np.empty(shape, dtype=dtype)
        if len(table) == 1:
            stages.append((axis, table[0], out, None))
            continue
        i0, i1, w1 = table
        bshape = (-1,) + (1,) * (ndim - axis - 1)
        weights = ((1 - w1).astype(dtype).reshape(bshape), w1.astype(dtype).reshape(bshape))
        tmp = scratch[: math.prod(shape)].reshape(shape)
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


def upsample_workspace(src_shape, dtype, *, mode: str, scales) -> list:
    """Precomputed tables and buffers for upsample(src of `src_shape`, dst of `dtype`)."""
    _check_mode(mode)
    dst_shape = upsample_shape(src_shape, scales)
    tables = []
    for n_in, n_out, scale in zip(src_shape, dst_shape, scales):
        i = np.arange(n_out, dtype=np.float64)
        if mode == "TL_NEAREST":
            tables.append((nearest_index(n_in, n_out),))
        else:
            tables.append(_linear_table((i + 0.5) / scale - 0.5, n_in))
    return _plan(tuple(src_shape), dst_shape, dtype, mode, tables)


def nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """The source index of each of `n_out` outputs of TensorLight's nearest
    resize of an axis of `n_in`: roundf(((float)i + 0.5) * scale - 0.5) with
    the float32 scale in / out, rounding halves away from zero."""
    scale = np.float64(np.float32(n_in) / np.float32(n_out))
    i = np.arange(n_out, dtype=np.float32).astype(np.float64)
    x = ((i + 0.5) * scale - 0.5).astype(np.float32).astype(np.float64)
    rounded = np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.clip(rounded, 0, n_in - 1).astype(np.intp)


def resize_workspace(src_shape, dtype, *, mode: str, dims) -> list:
    """Precomputed tables and buffers for resize(src of `src_shape` to `dims`, of `dtype`)."""
    _check_mode(mode)
    dims = tuple(dims)
    if len(dims) != len(src_shape) or any(d < 1 for d in dims):
        raise ValueError(
            f"resize dims {list(dims)} must be {len(src_shape)} positive sizes "
            f"(one per dimension of {list(src_shape)})"
        )
    tables = []
    for n_in, n_out in zip(src_shape, dims):
        i = np.arange(n_out)
        if mode == "TL_NEAREST":
            tables.append((i * n_in // n_out,))
        else:
            tables.append(_linear_table(((2 * i + 1) * n_in - n_out) / (2 * n_out), n_in))
    return _plan(tuple(src_shape), dims, dtype, mode, tables)


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
