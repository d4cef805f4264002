"""Reductions: softmax, max and argmax along one axis, and mean, sum, max or min
over any axes."""

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = [
    "REDUCE_FUNCS",
    "log_softmax",
    "log_softmax_scratch",
    "log_softmax_workspace",
    "maxreduce",
    "maxreduce_arg",
    "reduce",
    "reduce_axes_shape",
    "reduce_shape",
    "softmax",
    "softmax_scratch",
    "softmax_workspace",
]


def reduce_shape(shape, axis: int) -> tuple:
    """Shape after reducing `axis` of `shape`, keeping it with size 1.

    TensorLight's tl_tensor_maxreduce (and LightNet's maxreduce op) keeps the
    reduced dim: [N, C, H, W] reduced on axis 1 gives [N, 1, H, W].
    """
    shape = tuple(shape)
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for a {len(shape)}-D shape {list(shape)}")
    return shape[:axis] + (1,) + shape[axis + 1 :]


def softmax_scratch(shape, dtype, *, axis: int) -> tuple:
    """Scratch layout of softmax (see kernels.scratch): one value per reduced row
    (its max, then its sum)."""
    return (("rows", reduce_shape(shape, axis), dtype),)


def softmax_workspace(shape, dtype, *, axis: int, scratch=None) -> np.ndarray:
    """softmax's `ws`, carved from `scratch` (new when None)."""
    return carve(scratch, softmax_scratch(shape, dtype, axis=axis))["rows"]


def softmax(src: np.ndarray, dst: np.ndarray, *, axis: int, ws: np.ndarray | None = None) -> None:
    """dst = exp(src - max) / sum(exp(src - max)) along `axis`, in dst's dtype.

    Subtracting the row max first keeps exp from overflowing. `ws` (from
    softmax_workspace) avoids allocating the per-row buffer on each call.
    """
    if ws is None:
        ws = softmax_workspace(dst.shape, dst.dtype, axis=axis)
    np.maximum.reduce(src, axis=axis, keepdims=True, out=ws)
    np.subtract(src, ws, out=dst)
    np.exp(dst, out=dst)
    np.add.reduce(dst, axis=axis, keepdims=True, out=ws)
    np.divide(dst, ws, out=dst)


def log_softmax_scratch(shape, dtype, *, axis: int) -> tuple:
    """Scratch layout of log_softmax: two values per reduced row (its max, its sum)."""
    rows = reduce_shape(shape, axis)
    return (("max", rows, dtype), ("sum", rows, dtype))


def log_softmax_workspace(shape, dtype, *, axis: int, scratch=None) -> dict:
    """log_softmax's `ws`, carved from `scratch` (new when None)."""
    return carve(scratch, log_softmax_scratch(shape, dtype, axis=axis))


def log_softmax(src: np.ndarray, dst: np.ndarray, *, axis: int, ws: dict | None = None) -> None:
    """dst = src - max - log(sum(exp(src - max))) along `axis`, in dst's dtype: the log of
    softmax without taking the log of an exp that underflowed (finite where softmax is 0).
    dst is not src."""
    if ws is None:
        ws = log_softmax_workspace(dst.shape, dst.dtype, axis=axis)
    top, total = ws["max"], ws["sum"]
    np.maximum.reduce(src, axis=axis, keepdims=True, out=top)
    np.subtract(src, top, out=dst)
    np.exp(dst, out=dst)
    np.add.reduce(dst, axis=axis, keepdims=True, out=total)
    np.log(total, out=total)
    np.subtract(src, top, out=dst)  # shifted first: exact where src is near max
    np.subtract(dst, total, out=dst)


def maxreduce(src: np.ndarray, dst: np.ndarray, *, axis: int) -> None:
    """dst = max of src along `axis`; dst keeps the axis with size 1 (reduce_shape)."""
    np.maximum.reduce(src, axis=axis, keepdims=True, out=dst)


def maxreduce_arg(src: np.ndarray, dst: np.ndarray, arg: np.ndarray, *, axis: int) -> None:
    """maxreduce plus `arg`: int32 index along `axis` of the max, first one on ties.

    Both dst and arg have reduce_shape(src.shape, axis), as in tl_tensor_maxreduce.
    """
    np.maximum.reduce(src, axis=axis, keepdims=True, out=dst)
    np.copyto(arg, np.argmax(src, axis=axis, keepdims=True), casting="same_kind")


REDUCE_FUNCS = ("mean", "sum", "max", "min")

_REDUCE_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def reduce_axes_shape(shape, axes, keepdims: bool) -> tuple:
    """Shape after reducing `axes` of `shape`: each kept with size 1 when
    `keepdims`, else dropped (all dropped: [1], a tensor has a dimension)."""
    shape, axes = tuple(shape), tuple(axes)
    bad = [a for a in axes if not 0 <= a < len(shape)]
    if bad:
        raise ValueError(f"axis {bad[0]} is out of range for a {len(shape)}-D shape {list(shape)}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {list(axes)} name an axis twice")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)


def reduce(src: np.ndarray, dst: np.ndarray, *, func: str, axes, keepdims: bool) -> None:
    """dst = the mean, sum, max or min (`func`) of src over `axes`, in dst's dtype
    (ONNX ReduceMean / ReduceSum / ReduceMax / ReduceMin). dst has
    reduce_axes_shape(src.shape, axes, keepdims); whatever keepdims, it is
    reduced into as the kept-dims view of its memory, which has the same order."""
    axes = tuple(axes)
    out = dst.reshape(reduce_axes_shape(src.shape, axes, True))
    if func == "mean":
        np.mean(src, axis=axes, keepdims=True, out=out)
        return
    try:
        ufunc = _REDUCE_UFUNCS[func]
    except KeyError:
        raise ValueError(f"unknown reduction {func!r} (known: {', '.join(REDUCE_FUNCS)})") from None
    ufunc.reduce(src, axis=axes, keepdims=True, out=out)
