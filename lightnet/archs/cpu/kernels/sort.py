"""Stable 1-D sorts of keys, optionally carrying values along."""

import numpy as np

__all__ = ["sort1d", "sort1d_by_key"]

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
