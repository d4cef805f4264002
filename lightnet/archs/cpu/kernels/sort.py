"""Stable 1-D sorts of keys, optionally carrying values along, and the k extreme
entries along an axis (TopK)."""

import numpy as np

__all__ = ["sort1d", "sort1d_by_key", "topk"]

_DIRS = ("TL_SORT_DIR_ASCENDING", "TL_SORT_DIR_DESCENDING")


def _descending(dir: str) -> bool:
    if dir not in _DIRS:
        raise ValueError(f"unknown sort dir {dir!r} (known: {', '.join(_DIRS)})")
    return dir == "TL_SORT_DIR_DESCENDING"


def sort1d(src_key: np.ndarray, dst_key: np.ndarray, *, dir: str) -> None:
    """dst_key = src_key sorted in direction `dir` (a tl_sort_dir name).

    Like tl_tensor_sort1d, which sorts in place; dst_key may be src_key. The
    sort runs in place in dst_key (through a reversed view when descending),
    so nothing is allocated.
    """
    np.copyto(dst_key, src_key)
    (dst_key[::-1] if _descending(dir) else dst_key).sort(kind="stable")


def sort1d_by_key(
    src_key: np.ndarray,
    src_val: np.ndarray,
    dst_key: np.ndarray,
    dst_val: np.ndarray,
    *,
    dir: str,
) -> None:
    """Sort keys in direction `dir` and reorder values the same way, stably.

    Like tl_tensor_sort1d_by_key (which sorts key and val in place; the dst
    arrays may be the src ones). Equal keys keep their original order in both
    directions: descending order is the stable ascending order of the reversed
    keys, read backwards. The index permutation is the only temporary.
    """
    if _descending(dir):
        n = src_key.shape[0]
        order = np.argsort(src_key[::-1], kind="stable")[::-1]
        np.subtract(n - 1, order, out=order)
    else:
        order = np.argsort(src_key, kind="stable")
    np.take(src_key, order, out=dst_key)
    np.take(src_val, order, out=dst_val)


def topk(src: np.ndarray, values: np.ndarray, indices: np.ndarray, *, axis: int, k: int,
         largest: bool = True) -> None:
    """values, indices = the `k` largest (or smallest) entries of src along `axis`, the
    most extreme first, equal ones in the order of their indices (ONNX TopK).

    A stable ascending sort gives the smallest; for the largest, src is sorted
    reversed along `axis` and the order read backwards, which keeps equal values in
    ascending index order without negating (unsigned integers would wrap)."""
    n = src.shape[axis]
    if largest:
        order = np.argsort(np.flip(src, axis), axis=axis, kind="stable")
        order = (n - 1) - np.flip(order, axis)
    else:
        order = np.argsort(src, axis=axis, kind="stable")
    first = order[(slice(None),) * axis + (slice(0, k),)]
    np.copyto(indices, first, casting="unsafe")
    np.copyto(values, np.take_along_axis(src, first, axis=axis))
