"""The indexing kernels against numpy's own indexing and hand-computed values."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.elements import (
    gather_nd,
    gather_nd_scratch,
    gather_nd_workspace,
    scatter_elements,
    scatter_elements_scratch,
    scatter_elements_workspace,
    strided_slice,
)
from lightnet.archs.cpu.kernels.scratch import scratch_bytes
from tests.helpers import arena_view, assert_guards


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("start,stop,step", [(0, None, 2), (1, 6, 3), (5, None, -1),
                                             (4, 0, -2), (6, None, -7), (2, 3, 5)])
def test_strided_slice_matches_numpy(axis, start, stop, step):
    src = np.arange(7 * 7 * 7, dtype=np.float32).reshape(7, 7, 7)
    index = (slice(None),) * axis + (slice(start, stop, step),)
    want = src[index]
    arena, dst = arena_view(want.shape)
    strided_slice(src, dst, axis=axis, start=start, step=step, len=want.shape[axis])
    np.testing.assert_array_equal(dst, want)
    assert_guards(arena)


def test_strided_slice_backwards_to_the_first_entry():
    dst = np.empty(3, np.int32)
    strided_slice(np.array([1, 2, 3], np.int32), dst, axis=0, start=2, step=-1, len=3)
    assert dst.tolist() == [3, 2, 1]


def garbage_scratch(layout):
    """A planned scratch buffer holding what other ops left in it (every kernel's
    scratch is shared and never kept between runs)."""
    return np.random.default_rng(9).integers(0, 256, scratch_bytes(layout)).astype(np.uint8)


def naive_gather_nd(src, indices, b):
    """GatherND by a loop over the index tuples (negative ones counted from the end)."""
    out = []
    lead = indices.shape[:-1]
    for p in np.ndindex(*lead):
        tup = tuple(int(i) % src.shape[b + k] for k, i in enumerate(indices[p]))
        out.append(src[p[:b] + tup])
    return np.array(out).reshape(lead + src.shape[b + indices.shape[-1]:])


@pytest.mark.parametrize("b,q", [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (2, 1)])
def test_gather_nd_matches_a_loop(b, q):
    rng = np.random.default_rng(b * 3 + q)
    src = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    dims = src.shape[b:b + q]
    indices = np.stack([rng.integers(-d, d, src.shape[:b] + (2, 3)) for d in dims], -1)
    indices = indices.astype(np.int32)
    want = naive_gather_nd(src, indices, b)
    arena, dst = arena_view(want.shape)
    gather_nd(src, indices, dst, batch_dims=b)
    np.testing.assert_array_equal(dst, want)
    assert_guards(arena)
    # The index arrays preplanned: carved from a scratch buffer at load, every run after.
    scratch = garbage_scratch(gather_nd_scratch(src.shape, indices.shape, batch_dims=b))
    ws = gather_nd_workspace(src.shape, indices.shape, batch_dims=b, scratch=scratch)
    for _ in range(2):
        dst[...] = np.nan
        gather_nd(src, indices, dst, batch_dims=b, ws=ws)
        np.testing.assert_array_equal(dst, want)
        scratch[:] = 255


def test_gather_nd_index_outside_its_axis():
    with pytest.raises(IndexError, match=r"index -4 on axis 1 is out of range for its 3 entries"):
        gather_nd(np.zeros((2, 3)), np.array([[0, -4]], np.int32), np.empty(1))


def naive_scatter(data, indices, updates, axis, reduction):
    out = data.copy()
    for p in np.ndindex(*indices.shape):
        q = list(p)
        q[axis] = int(indices[p]) % data.shape[axis]
        q = tuple(q)
        u = updates[p]
        out[q] = {"none": lambda: u, "add": lambda: out[q] + u, "mul": lambda: out[q] * u,
                  "max": lambda: max(out[q], u), "min": lambda: min(out[q], u)}[reduction]()
    return out


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_a_loop(axis, reduction):
    rng = np.random.default_rng(axis)
    data = rng.integers(-5, 5, (3, 4, 5)).astype(np.float32)
    shape = (2, 3, 4)
    if reduction == "none":  # distinct targets: which duplicate wins is not defined
        perm = np.argsort(rng.random((3, 4, 5)), axis=axis)
        indices = np.take(perm, np.arange(shape[axis]), axis=axis)[:2, :3, :4]
    else:
        indices = rng.integers(-data.shape[axis], data.shape[axis], shape)
    indices = indices.astype(np.int32)
    updates = rng.integers(-3, 4, shape).astype(np.float32)
    arena, dst = arena_view(data.shape)
    scatter_elements(data, indices, updates, dst, axis=axis, reduction=reduction)
    want = naive_scatter(data, indices, updates, axis, reduction)
    np.testing.assert_array_equal(dst, want)
    assert_guards(arena)
    scratch = garbage_scratch(scatter_elements_scratch(indices.shape))
    ws = scatter_elements_workspace(indices.shape, scratch=scratch)
    for _ in range(2):
        scatter_elements(data, indices, updates, dst, axis=axis, reduction=reduction, ws=ws)
        np.testing.assert_array_equal(dst, want)
        scratch[:] = 255


def test_scatter_elements_errors():
    with pytest.raises(IndexError, match=r"index 5 on axis 1 is out of range for its 5 entries"):
        scatter_elements(np.zeros((1, 5)), np.array([[5]], np.int32), np.ones((1, 1)),
                         np.empty((1, 5)), axis=1)
    with pytest.raises(ValueError, match="unknown scatter reduction 'sub'"):
        scatter_elements(np.zeros((1, 5)), np.array([[0]], np.int32), np.ones((1, 1)),
                         np.empty((1, 5)), axis=1, reduction="sub")
