"""ONNX Resize in full (the `interpolate` op): nearest, linear and cubic
interpolation under every coordinate transformation mode, antialiasing,
exclude_outside and tf_crop_and_resize's extrapolation.

Interpolation is separable: each axis whose mapping is not the identity is
resampled in turn. An axis's table gives, for every output index, the source
indices it reads (`taps` of them, clamped to the axis as ONNX's edge padding
does) and their weights; nearest reads one index, unweighted, so it is exact in
every dtype. The tables are built once at load (interpolate_workspace); the
intermediate of every stage but the last, and one buffer of products, are the
op's planned scratch (interpolate_scratch).
"""

import math

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = [
    "COORDINATE_MODES",
    "INTERPOLATE_MODES",
    "NEAREST_MODES",
    "interpolate",
    "interpolate_scratch",
    "interpolate_table",
    "interpolate_workspace",
]

INTERPOLATE_MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coordinates(n_in: int, n_out: int, scale: float, coordinate_mode: str, roi):
    """The source coordinate of every output index: ONNX's formulas in float64, the
    output's length in them scale * n_in (fractional when a scale gives it, as in ONNX's
    reference; ONNX Runtime takes n_out, its floor, in align_corners and
    tf_crop_and_resize: they differ only there)."""
    i = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if coordinate_mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if coordinate_mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (i + 0.5) / scale - 0.5
    if coordinate_mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if length != 1 else np.full(n_out, -0.5)
    if coordinate_mode == "align_corners":
        return i * (n_in - 1) / (length - 1) if length != 1 else np.zeros(n_out)
    if coordinate_mode == "asymmetric":
        return i / scale
    if coordinate_mode == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    if coordinate_mode == "tf_crop_and_resize":
        start, end = roi
        if length != 1:
            return i * (end - start) * (n_in - 1) / (length - 1) + start * (n_in - 1)
        return np.full(n_out, (end - start) * (n_in - 1) / 2 + start * (n_in - 1))
    raise ValueError(f"unknown coordinate mode {coordinate_mode!r} "
                     f"(known: {', '.join(COORDINATE_MODES)})")


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient `a`."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def interpolate_table(n_in: int, n_out: int, scale: float, *, mode: str, coordinate_mode: str,
                      nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
                      exclude_outside: bool = False, antialias: bool = False, roi=(0.0, 1.0)):
    """(indices [n_out, taps], weights [n_out, taps] or None for nearest, the output
    indices extrapolated or None) of one axis."""
    x = _source_coordinates(n_in, n_out, scale, coordinate_mode, roi)
    outside = None
    if coordinate_mode == "tf_crop_and_resize":
        outside = (x < 0) | (x > n_in - 1)
        outside = outside if outside.any() else None
    if mode == "nearest":
        rounding = {"round_prefer_floor": lambda v: np.ceil(v - 0.5),
                    "round_prefer_ceil": lambda v: np.floor(v + 0.5),
                    "floor": np.floor, "ceil": np.ceil}
        if nearest_mode not in rounding:
            raise ValueError(f"unknown nearest mode {nearest_mode!r} "
                             f"(known: {', '.join(NEAREST_MODES)})")
        index = np.clip(rounding[nearest_mode](x), 0, n_in - 1).astype(np.intp)
        return index[:, None], None, outside
    if mode not in INTERPOLATE_MODES:
        raise ValueError(f"unknown interpolation mode {mode!r} "
                         f"(known: {', '.join(INTERPOLATE_MODES)})")
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0  # the filter widens by 1 / scale
    reach = math.ceil(support / stretch)
    offsets = np.arange(-reach, reach + 2)
    base = np.floor(x)
    source = base[:, None] + offsets[None, :]
    d = (source - x[:, None]) * stretch
    if mode == "linear":
        weights = np.clip(1 - np.abs(d), 0, None)
    else:
        weights = _cubic(d, cubic_coeff_a)
    if exclude_outside:
        weights[(source < 0) | (source > n_in - 1)] = 0
    total = weights.sum(axis=1, keepdims=True)
    weights = weights / np.where(total == 0, 1, total)
    used = np.flatnonzero(np.any(weights != 0, axis=0))
    if used.size:
        weights = weights[:, used[0]:used[-1] + 1]
        source = source[:, used[0]:used[-1] + 1]
    index = np.clip(source, 0, n_in - 1).astype(np.intp)
    return index, weights, outside


def _resampled(src_shape, dims, scales, coordinate_mode) -> list:
    """Whether each axis is resampled: all but those of unchanged size and scale 1 under
    a rule that then maps i to i (every rule but tf_half_pixel_for_nn and
    tf_crop_and_resize; nearest, linear and cubic all read the source at an integer x)."""
    return [not (n_in == n_out and scale == 1) or coordinate_mode in (
        "tf_half_pixel_for_nn", "tf_crop_and_resize")
        for n_in, n_out, scale in zip(src_shape, dims, scales)]


def _stages(src_shape, dims, resampled):
    """(axis, shape after it) of every resampled axis, in order."""
    shape, stages = list(src_shape), []
    for axis, changed in enumerate(resampled):
        if changed:
            shape[axis] = dims[axis]
            stages.append((axis, tuple(shape)))
    return stages


def _check(src_shape, dims, scales, mode, dtype):
    if not (len(dims) == len(scales) == len(src_shape)):
        raise ValueError(f"{len(dims)} dims and {len(scales)} scales for a "
                         f"{len(src_shape)}-D source")
    if mode != "nearest" and not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError(f"{mode} interpolation needs a floating dtype, not {np.dtype(dtype)}")


def interpolate_scratch(src_shape, dtype, *, dims, scales, mode: str,
                        coordinate_mode: str) -> tuple:
    """Scratch layout (see kernels.scratch) of interpolate: the output of every stage but
    the last (which writes dst), and for linear and cubic one buffer of products."""
    _check(src_shape, dims, scales, mode, dtype)
    stages = _stages(src_shape, dims, _resampled(src_shape, dims, scales, coordinate_mode))
    layout = tuple((f"stage{k}", shape, dtype) for k, (_, shape) in enumerate(stages[:-1]))
    if mode != "nearest" and stages:
        layout += (("products", (max(math.prod(s) for _, s in stages),), dtype),)
    return layout


def interpolate_workspace(src_shape, dtype, *, dims, scales, roi=(), scratch=None,
                          **params) -> list:
    """The stages (axis, taps: (indices, weights or None), extrapolated mask, output
    buffer, products buffer) of interpolate, the buffers carved from `scratch` (new when
    None); params are interpolate_table's."""
    dtype = np.dtype(dtype)
    src_shape, dims = tuple(src_shape), tuple(dims)
    mode, coordinate_mode = params["mode"], params["coordinate_mode"]
    if roi and len(roi) != 2 * len(src_shape):
        raise ValueError(f"roi has {len(roi)} values, expected {2 * len(src_shape)}")
    buffers = carve(scratch, interpolate_scratch(src_shape, dtype, dims=dims, scales=scales,
                                                 mode=mode, coordinate_mode=coordinate_mode))
    ndim = len(src_shape)
    resampled = _resampled(src_shape, dims, scales, coordinate_mode)
    stages = []
    for k, (axis, shape) in enumerate(_stages(src_shape, dims, resampled)):
        axis_roi = (roi[axis], roi[axis + ndim]) if roi else (0.0, 1.0)
        index, weights, outside = interpolate_table(src_shape[axis], dims[axis], scales[axis],
                                                    roi=axis_roi, **params)
        bshape = (-1,) + (1,) * (ndim - axis - 1)
        taps = [(index[:, j], None if weights is None else
                 weights[:, j].astype(dtype).reshape(bshape)) for j in range(index.shape[1])]
        products = buffers["products"][:math.prod(shape)].reshape(shape) \
            if "products" in buffers else None
        mask = None if outside is None else outside.reshape(bshape)
        stages.append((axis, taps, mask, buffers.get(f"stage{k}"), products))
    return stages


def interpolate(src: np.ndarray, dst: np.ndarray, *, ws: list,
                extrapolation_value: float = 0.0) -> None:
    """dst = src resampled by the stages of `ws` (interpolate_workspace)."""
    if not ws:
        np.copyto(dst, src)
        return
    cur = src
    for axis, taps, mask, out, products in ws:
        out = dst if out is None else out
        first, weight = taps[0]
        np.take(cur, first, axis=axis, out=out, mode="clip")
        if weight is not None:
            np.multiply(out, weight, out=out)
            for index, weight in taps[1:]:
                np.take(cur, index, axis=axis, out=products, mode="clip")
                np.multiply(products, weight, out=products)
                np.add(out, products, out=out)
        if mask is not None:
            np.copyto(out, np.asarray(extrapolation_value, out.dtype),
                      where=np.broadcast_to(mask, out.shape))
        cur = out
