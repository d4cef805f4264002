"""Kernels that pick entries by position or by index tensor: strided slices, GatherND,
ScatterElements."""

import numpy as np

__all__ = [
    "gather_nd",
    "scatter_elements",
    "strided_slice",
]


def strided_slice(src: np.ndarray, dst: np.ndarray, *, axis: int, start: int, step: int,
                  len: int) -> None:
    """dst = `len` entries of src along `axis`, `step` apart from `start` (negative
    steps go backwards; a stop before index 0 is written None, as Python's -1 would
    mean the last entry)."""
    stop = start + step * len
    index = (slice(None),) * axis + (slice(start, stop if stop >= 0 else None, step),)
    np.copyto(dst, src[index])


def _checked(indices: np.ndarray, size: int, axis: int) -> np.ndarray:
    """`indices` into an axis of `size` entries with the negative ones counted from
    its end; IndexError naming the first one outside it."""
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        raise IndexError(f"index {int(indices[bad].reshape(-1)[0])} of axis {axis} "
                         f"(of {size} entries)")
    return np.where(indices < 0, indices + size, indices)


def gather_nd(src: np.ndarray, indices: np.ndarray, dst: np.ndarray, *,
              batch_dims: int = 0) -> None:
    """dst = src at the index tuples of the last axis of `indices` (ONNX GatherND): each
    tuple addresses src's axes batch_dims to batch_dims + q within its batch."""
    b, q = batch_dims, indices.shape[-1]
    batch = int(np.prod(src.shape[:b], dtype=np.int64))
    tuples = indices.reshape(batch, -1, q)
    picks = [_checked(tuples[..., j], src.shape[b + j], b + j) for j in range(q)]
    flat = src.reshape((batch,) + src.shape[b:])
    rows = np.arange(batch).reshape(batch, 1)
    out = dst.reshape((batch, tuples.shape[1]) + src.shape[b + q:])
    out[...] = flat[(rows, *picks)]


_SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                     dst: np.ndarray, *, axis: int, reduction: str = "none") -> None:
    """dst = data with updates[p] written (or, with a reduction, combined by add, mul,
    max or min; every duplicate counted) at p with its `axis` index replaced by
    indices[p] (ONNX ScatterElements)."""
    if reduction != "none" and reduction not in _SCATTER_UFUNCS:
        raise ValueError(f"unknown scatter reduction {reduction!r} "
                         "(known: none, add, mul, max, min)")
    np.copyto(dst, data)
    # Open grids: each axis' own positions, broadcast against the others'.
    where = [np.arange(n).reshape((1,) * d + (n,) + (1,) * (indices.ndim - d - 1))
             for d, n in enumerate(indices.shape)]
    where[axis] = _checked(indices, data.shape[axis], axis)
    if reduction == "none":
        dst[tuple(where)] = updates
    else:
        _SCATTER_UFUNCS[reduction].at(dst, tuple(where), updates)
