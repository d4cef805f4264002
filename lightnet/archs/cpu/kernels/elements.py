"""Kernels that move elements by position: broadcasting (expand), running sums (cumsum),
triangles (trilu), and the element-wise gathers and scatters of computed indices
(gather_elements, scatter_nd, gather_nd, scatter_elements) and strided slices. Indices are data here: one out of range stops the run
with an IndexError naming it."""

import math

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = [
    "cumsum",
    "expand",
    "gather_elements",
    "gather_elements_fits",
    "gather_elements_scratch",
    "gather_elements_workspace",
    "gather_nd",
    "gather_nd_scratch",
    "gather_nd_workspace",
    "scatter_elements",
    "scatter_elements_scratch",
    "scatter_elements_workspace",
    "scatter_nd",
    "strided_slice",
    "trilu",
    "trilu_keep",
]


def expand(src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src broadcast to dst's shape (numpy's rules)."""
    np.copyto(dst, src)


def _along(a: np.ndarray, axis: int, index) -> np.ndarray:
    """The view of `a` taking `index` (a slice) along `axis`."""
    return a[(slice(None),) * axis + (index,)]


def cumsum(src: np.ndarray, dst: np.ndarray, *, axis: int, exclusive: bool,
           reverse: bool) -> None:
    """dst = the running sums of src along `axis`, in src's dtype (integers wrap around):
    from the end with `reverse`, each sum without its own element with `exclusive`."""
    if reverse:
        src, dst = np.flip(src, axis), np.flip(dst, axis)
    if not exclusive:
        np.cumsum(src, axis=axis, dtype=dst.dtype, out=dst)
        return
    _along(dst, axis, slice(0, 1)).fill(0)
    if src.shape[axis] > 1:
        np.cumsum(_along(src, axis, slice(0, -1)), axis=axis, dtype=dst.dtype,
                  out=_along(dst, axis, slice(1, None)))


def trilu_keep(rows: int, cols: int, upper: bool, k: int) -> np.ndarray:
    """The [rows, cols] mask of the elements trilu keeps: j - i >= k for the upper
    triangle, j - i <= k for the lower one."""
    i, j = np.indices((rows, cols))
    return (j - i >= k) if upper else (j - i <= k)


def trilu(src: np.ndarray, dst: np.ndarray, *, drop: np.ndarray) -> None:
    """dst = src with the elements of each matrix (the last two axes) where `drop`
    (trilu_keep's complement) is true set to zero."""
    np.copyto(dst, src)
    np.copyto(dst, np.zeros((), dst.dtype), where=drop)


def gather_elements_fits(src_shape, indices_shape, axis: int) -> bool:
    """Whether gather_elements' indices fit src: one rank, and on every other axis no
    more entries than src has."""
    return len(src_shape) == len(indices_shape) and all(
        i <= s for d, (i, s) in enumerate(zip(indices_shape, src_shape)) if d != axis)


def _checked(indices: np.ndarray, size: int, axis: int, out=None) -> np.ndarray:
    """`indices` into `axis`, of `size` entries, negative ones counted from the end, in
    `out` (intp, indices' shape; a new array when None); IndexError naming the first one
    outside [-size, size)."""
    if out is None:
        out = np.empty(indices.shape, np.intp)
    np.copyto(out, indices, casting="unsafe")
    low, high = (out.min(), out.max()) if out.size else (0, 0)
    if low < -size or high >= size:
        bad = (out < -size) | (out >= size)
        raise IndexError(f"index {int(out[bad].reshape(-1)[0])} on axis {axis} is out of range "
                         f"for its {size} entries (valid: {-size} to {size - 1})")
    if low < 0:
        np.mod(out, size, out=out)  # in range, the negative ones counted from the end
    return out


def gather_elements_scratch(indices_shape) -> tuple:
    """Scratch layout of `gather_elements`: the places read in src (flat), intp."""
    return (("places", tuple(indices_shape), np.intp),)


def gather_elements_workspace(src_shape, indices_shape, axis: int, *, scratch=None) -> dict:
    """Arrays for `gather_elements`: its scratch (carved from `scratch`, new when None),
    src's stride along `axis` and, for every other axis of more than one index, where
    each of its positions starts in src (flat), shaped to broadcast along the indices;
    made once (every run reads them)."""
    ws = carve(scratch, gather_elements_scratch(indices_shape))
    strides = [math.prod(src_shape[d + 1:]) for d in range(len(src_shape))]
    ndim = len(indices_shape)
    ws["stride"] = strides[axis]
    ws["starts"] = [(np.arange(n) * strides[d]).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
                    for d, n in enumerate(indices_shape) if d != axis and n > 1]
    return ws


def gather_elements(src: np.ndarray, indices: np.ndarray, dst: np.ndarray, *,
                    axis: int, ws=None) -> None:
    """dst[..., i, ...] = src[..., indices[..., i, ...], ...] along `axis`, every other
    position the same (ONNX GatherElements; numpy take_along_axis), read as one take of
    src's flat places (take_along_axis builds an index of every axis: 3x slower)."""
    if ws is None:
        ws = gather_elements_workspace(src.shape, indices.shape, axis)
    places = _checked(indices, src.shape[axis], axis, ws["places"])
    if ws["stride"] != 1:
        np.multiply(places, ws["stride"], out=places)
    for start in ws["starts"]:
        np.add(places, start, out=places)
    np.take(src.reshape(-1), places.reshape(-1), out=dst.reshape(-1))


_REDUCERS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, dst: np.ndarray, *,
               reduction: str) -> None:
    """dst = data, then for each index tuple t = indices[i..., :], dst[t] = updates[i...]
    (ONNX ScatterND), or combined with it by `reduction` (add, mul, max, min). With none,
    of two updates of one place the last stays."""
    np.copyto(dst, data)
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    places = tuple(_checked(flat[:, d], data.shape[d], d) for d in range(k))
    values = updates.reshape((flat.shape[0],) + data.shape[k:])
    if reduction == "none":
        dst[places] = values
    else:
        _REDUCERS[reduction].at(dst, places, values)


def strided_slice(src: np.ndarray, dst: np.ndarray, *, axis: int, start: int, step: int,
                  len: int) -> None:
    """dst = `len` entries of src along `axis`, `step` apart from `start` (negative
    steps go backwards; a stop before index 0 is written None, as Python's -1 would
    mean the last entry)."""
    stop = start + step * len
    index = (slice(None),) * axis + (slice(start, stop if stop >= 0 else None, step),)
    np.copyto(dst, src[index])


def gather_nd_scratch(src_shape, indices_shape, *, batch_dims: int = 0) -> tuple:
    """Scratch layout of `gather_nd`: the checked indices of each addressed axis, [batch,
    tuples] intp."""
    batch = math.prod(src_shape[:batch_dims])
    tuples = math.prod(indices_shape) // (batch * indices_shape[-1])
    return tuple((f"axis{j}", (batch, tuples), np.intp) for j in range(indices_shape[-1]))


def gather_nd_workspace(src_shape, indices_shape, *, batch_dims: int = 0,
                        scratch=None) -> dict:
    """Arrays for `gather_nd`: its scratch (carved from `scratch`, new when None) and
    each batch's row number [batch, 1], made once (every run reads it)."""
    ws = carve(scratch, gather_nd_scratch(src_shape, indices_shape, batch_dims=batch_dims))
    ws["rows"] = np.arange(math.prod(src_shape[:batch_dims])).reshape(-1, 1)
    return ws


def gather_nd(src: np.ndarray, indices: np.ndarray, dst: np.ndarray, *,
              batch_dims: int = 0, ws=None) -> None:
    """dst = src at the index tuples of the last axis of `indices` (ONNX GatherND): each
    tuple addresses src's axes batch_dims to batch_dims + q within its batch."""
    if ws is None:
        ws = gather_nd_workspace(src.shape, indices.shape, batch_dims=batch_dims)
    b, q = batch_dims, indices.shape[-1]
    rows = ws["rows"]
    batch = rows.shape[0]
    tuples = indices.reshape(batch, -1, q)
    picks = [_checked(tuples[..., j], src.shape[b + j], b + j, ws[f"axis{j}"])
             for j in range(q)]
    flat = src.reshape((batch,) + src.shape[b:])
    out = dst.reshape((batch, tuples.shape[1]) + src.shape[b + q:])
    out[...] = flat[(rows, *picks)]


def scatter_elements_scratch(indices_shape) -> tuple:
    """Scratch layout of `scatter_elements`: the checked indices, intp."""
    return (("places", tuple(indices_shape), np.intp),)


def scatter_elements_workspace(indices_shape, *, scratch=None) -> dict:
    """Arrays for `scatter_elements`: its scratch (carved from `scratch`, new when None)
    and the open grids of the indices' positions, one per axis, made once (every run
    reads them)."""
    ws = carve(scratch, scatter_elements_scratch(indices_shape))
    ndim = len(indices_shape)
    ws["grids"] = [np.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
                   for d, n in enumerate(indices_shape)]
    return ws


def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                     dst: np.ndarray, *, axis: int, reduction: str = "none", ws=None) -> None:
    """dst = data with updates[p] written (or, with a reduction, combined by add, mul,
    max or min; every duplicate counted) at p with its `axis` index replaced by
    indices[p] (ONNX ScatterElements)."""
    if reduction != "none" and reduction not in _REDUCERS:
        raise ValueError(f"unknown scatter reduction {reduction!r} "
                         "(known: none, add, mul, max, min)")
    if ws is None:
        ws = scatter_elements_workspace(indices.shape)
    np.copyto(dst, data)
    # Open grids: each axis' own positions, broadcast against the others'.
    where = list(ws["grids"])
    where[axis] = _checked(indices, data.shape[axis], axis, ws["places"])
    if reduction == "none":
        dst[tuple(where)] = updates
    else:
        _REDUCERS[reduction].at(dst, tuple(where), updates)
