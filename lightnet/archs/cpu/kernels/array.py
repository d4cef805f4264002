"""Kernels that move data without arithmetic: slicing, copying, layout changes."""

import numpy as np

from lightnet.ir.shapes import arange_len

__all__ = [
    "channel_shuffle",
    "channel_shuffle_groups",
    "concat",
    "fill_arange",
    "fill_zeros",
    "gather",
    "gather_indices",
    "pick1d",
    "slice",
    "transpose",
]


def slice(src: np.ndarray, dst: np.ndarray, axis: int, start: int, len: int) -> None:
    """Copy `len` entries of `src` along `axis`, from `start`, into `dst`."""
    index = (np.s_[:],) * axis + (np.s_[start : start + len],)
    np.copyto(dst, src[index])


def concat(srcs: list, dst: np.ndarray, *, axis: int) -> None:
    """Join `srcs` along `axis` into `dst`.

    tl_tensor_concat joins two tensors; this takes any number (>= 1), which is
    the same as chaining the two-input version. All other dims must agree.
    """
    np.concatenate(srcs, axis=axis, out=dst)


def transpose(src: np.ndarray, dst: np.ndarray, *, axes) -> None:
    """Permute `src`'s axes into `dst`: dst.shape[i] == src.shape[axes[i]].

    Same as tl_tensor_transpose (and numpy's transpose); no workspace needed.
    """
    np.copyto(dst, src.transpose(axes))


def channel_shuffle(src: np.ndarray, dst: np.ndarray, *, group: int) -> None:
    """dst[:, j * group + i] = src[:, i * (C / group) + j]: the channels as `group` rows,
    read column by column (ShuffleNet's shuffle)."""
    n, c = src.shape[:2]
    rows = src.reshape(n, group, c // group, *src.shape[2:])
    np.copyto(dst.reshape(n, c // group, group, *src.shape[2:]), rows.swapaxes(1, 2))


def channel_shuffle_groups(src_shape, grouped_shape, axes, dst_shape) -> int:
    """The groups of a channel shuffle written as a reshape of `src_shape` to
    `grouped_shape`, a transpose by `axes` and a reshape to `dst_shape`: [N, C, H, W] to
    [N, g, C / g, H, W], axes (0, 2, 1, 3, 4), back to [N, C, H, W]; 0 when they are not
    one."""
    if (len(src_shape) != 4 or len(grouped_shape) != 5 or tuple(axes) != (0, 2, 1, 3, 4)
            or tuple(dst_shape) != tuple(src_shape)
            or grouped_shape[0] != src_shape[0] or tuple(grouped_shape[3:]) != tuple(src_shape[2:])
            or grouped_shape[1] * grouped_shape[2] != src_shape[1]):
        return 0
    return grouped_shape[1]


def fill_zeros(dst: np.ndarray) -> None:
    """Set every element of `dst` to zero (the `zeros` op)."""
    dst.fill(0)


def fill_arange(dst: np.ndarray, start: float, stop: float, step: float) -> None:
    """Fill 1-D `dst` with start + step * i, computed in double, cast to dst's dtype.

    Like LightNet's arange static_run (and tl_tensor_rearange). `dst` must hold
    exactly arange_len(start, stop, step) elements.
    """
    n = arange_len(start, stop, step)
    if dst.size != n:
        raise ValueError(
            f"arange({start}, {stop}, {step}) has {n} elements, but dst has {dst.size}"
        )
    values = start + step * np.arange(n, dtype=np.float64)
    np.copyto(dst.reshape(-1), values, casting="unsafe")


def pick1d(
    src: np.ndarray, src_index: np.ndarray, dst: np.ndarray, *, len: int, stride: int
) -> None:
    """Gather `len` chunks of `stride` elements of 1-D `src` into `dst`.

    TensorLight's tl_tensor_pick1d semantics (read from its source): for each
    i < len, dst[i*stride : (i+1)*stride] = src[k*stride : (k+1)*stride] with
    k = src_index[i]. So `stride` is the chunk width, `len` the number of chunks
    picked (the first `len` entries of `src_index`), and dst has len*stride
    elements. An index outside [-chunks, chunks) is an error naming it (the
    indices are data: token ids beyond an embedding table, say).
    """
    chunks = src[: src.shape[0] // stride * stride].reshape(-1, stride)
    index = src_index[:len]
    count = chunks.shape[0]
    low, high = int(index.min()), int(index.max())
    if low < -count or high >= count:
        bad = low if low < -count else high
        raise ValueError(f"src_index holds {bad}: expected a chunk number in [{-count}, "
                         f"{count - 1}] (src has {count} chunks of {stride})")
    # In range, "wrap" is "raise" without its copy of the result (negatives count back).
    np.take(chunks, index, axis=0, out=dst.reshape(len, stride), mode="wrap")


def gather_indices(indices: np.ndarray, size: int) -> np.ndarray:
    """`indices` into an axis of `size` entries as non-negative intp (a negative
    index counts from the end, as in ONNX); ValueError naming the first one
    outside [-size, size)."""
    idx = np.asarray(indices).astype(np.intp)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise ValueError(f"index {int(idx[bad].reshape(-1)[0])} is out of range for an axis "
                         f"of {size} entries (valid: {-size} to {size - 1})")
    return np.where(idx < 0, idx + size, idx)


def gather(src: np.ndarray, indices: np.ndarray, dst: np.ndarray, *, axis: int) -> None:
    """dst = the entries of src along `axis` at `indices` (ONNX Gather; numpy take).

    `indices` are gather_indices' checked ones (prepared once, at load), so the
    take needs no bounds check and no buffering ("clip" never clips them)."""
    np.take(src, indices, axis=axis, out=dst, mode="clip")
