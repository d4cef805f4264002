"""Kernels that reduce along one axis: softmax, max and argmax."""

import numpy as np

from lightnet.kernels.scratch import carve

__all__ = [
    "maxreduce",
    "maxreduce_arg",
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


def maxreduce(src: np.ndarray, dst: np.ndarray, *, axis: int) -> None:
    """dst = max of src along `axis`; dst keeps the axis with size 1 (reduce_shape)."""
    np.maximum.reduce(src, axis=axis, keepdims=True, out=dst)


def maxreduce_arg(src: np.ndarray, dst: np.ndarray, arg: np.ndarray, *, axis: int) -> None:
    """maxreduce plus `arg`: int32 index along `axis` of the max, first one on ties.

    Both dst and arg have reduce_shape(src.shape, axis), as in tl_tensor_maxreduce.
    """
    np.maximum.reduce(src, axis=axis, keepdims=True, out=dst)
    np.copyto(arg, np.argmax(src, axis=axis, keepdims=True), casting="same_kind")
