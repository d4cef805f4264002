"""Kernels that pick entries by position or by index tensor: strided slices, GatherND,
ScatterElements."""

import numpy as np

__all__ = [
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
