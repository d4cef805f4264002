"""Reductions: softmax, max and argmax along one axis, and the reductions of ONNX
(mean, sum, max, min, prod, sum of squares, L1 and L2 norms, log-sum, log-sum-exp)
over any axes."""

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve
from lightnet.ir.shapes import reduce_axes_shape, reduce_shape

__all__ = [
    "REDUCE_FUNCS",
    "arg_reduce",
    "log_softmax",
    "log_softmax_scratch",
    "log_softmax_workspace",
    "maxreduce",
    "maxreduce_arg",
    "reduce",
    "reduce_scratch",
    "softmax",
    "softmax_scratch",
    "softmax_workspace",
]


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


REDUCE_FUNCS = ("mean", "sum", "max", "min", "prod", "sum_square", "l1", "l2", "log_sum",
                "log_sum_exp")

# Reductions of floating-point values only (a root, a log or an exp of the result).
FLOAT_REDUCE_FUNCS = ("mean", "l2", "log_sum", "log_sum_exp")

_REDUCE_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def reduce_scratch(shape, axes, func: str, dtype) -> tuple:
    """Scratch layout of reduce (see kernels.scratch): the element-wise term
    (|x|, x * x, exp(x - max)) of the reductions that sum one, and log_sum_exp's
    maxima; none for the others."""
    if func in ("sum_square", "l1", "l2"):
        return (("terms", tuple(shape), dtype),)
    if func == "log_sum_exp":
        return (("terms", tuple(shape), dtype),
                ("maxima", reduce_axes_shape(shape, axes, True), dtype))
    return ()


def reduce(src: np.ndarray, dst: np.ndarray, *, func: str, axes, keepdims: bool,
           ws: dict | None = None) -> None:
    """dst = the `func` reduction of src over `axes`, in dst's dtype (ONNX ReduceMean,
    ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2,
    ReduceLogSum, ReduceLogSumExp). dst has reduce_axes_shape(src.shape, axes,
    keepdims); whatever keepdims, it is reduced into as the kept-dims view of its
    memory, which has the same order. `ws` is carved from reduce_scratch (new when None).
    log_sum_exp subtracts the maxima before exp, so large inputs do not overflow."""
    if func not in REDUCE_FUNCS:
        raise ValueError(f"unknown reduction {func!r} (known: {', '.join(REDUCE_FUNCS)})")
    axes = tuple(axes)
    out = dst.reshape(reduce_axes_shape(src.shape, axes, True))
    if func == "mean":
        np.mean(src, axis=axes, keepdims=True, out=out)
        return
    if func in _REDUCE_UFUNCS:
        _REDUCE_UFUNCS[func].reduce(src, axis=axes, keepdims=True, out=out)
        return
    if func == "log_sum":
        np.add.reduce(src, axis=axes, keepdims=True, out=out)
        np.log(out, out=out)
        return
    if ws is None:
        ws = carve(None, reduce_scratch(src.shape, axes, func, dst.dtype))
    terms = ws["terms"]
    if func == "log_sum_exp":
        maxima = ws["maxima"]
        np.maximum.reduce(src, axis=axes, keepdims=True, out=maxima)
        # An all -inf (or inf) row: exp(x - max) would be NaN; its sum is exp(max).
        np.copyto(maxima, 0, where=~np.isfinite(maxima))
        np.subtract(src, maxima, out=terms)
        np.exp(terms, out=terms)
        np.add.reduce(terms, axis=axes, keepdims=True, out=out)
        np.log(out, out=out)
        np.add(out, maxima, out=out)
        return
    if func == "sum_square":
        np.multiply(src, src, out=terms)
    else:
        np.abs(src, out=terms)
        if func == "l2":
            np.multiply(terms, terms, out=terms)
    np.add.reduce(terms, axis=axes, keepdims=True, out=out)
    if func == "l2":
        np.sqrt(out, out=out)


def arg_reduce(src: np.ndarray, dst: np.ndarray, *, func: str, axis: int, keepdims: bool,
               select_last_index: bool = False) -> None:
    """dst = the int32 index along `axis` of each maximum or minimum (`func`) of src, the
    first one on ties or, with `select_last_index`, the last (ONNX ArgMax / ArgMin);
    dst has reduce_axes_shape(src.shape, [axis], keepdims) and is written through its
    kept-dims view. The last index is the first one in src reversed along `axis`."""
    search = {"max": np.argmax, "min": np.argmin}.get(func)
    if search is None:
        raise ValueError(f"unknown arg reduction {func!r} (known: max, min)")
    out = dst.reshape(reduce_shape(src.shape, axis))
    if select_last_index:
        found = search(np.flip(src, axis), axis=axis, keepdims=True)
        np.subtract(src.shape[axis] - 1, found, out=out, casting="unsafe")
    else:
        np.copyto(out, search(src, axis=axis, keepdims=True), casting="unsafe")
