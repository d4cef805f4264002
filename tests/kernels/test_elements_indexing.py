"""The indexing kernels against numpy's own indexing and hand-computed values."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.elements import gather_nd, scatter_elements, strided_slice
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
    np.testing.assert_array_equal(dst, naive_scatter(data, indices, updates, axis, reduction))
    assert_guards(arena)


def test_scatter_elements_errors():
    with pytest.raises(IndexError, match=r"index 5 on axis 1 is out of range for its 5 entries"):
        scatter_elements(np.zeros((1, 5)), np.array([[5]], np.int32), np.ones((1, 1)),
                         np.empty((1, 5)), axis=1)
    with pytest.raises(ValueError, match="unknown scatter reduction 'sub'"):
        scatter_elements(np.zeros((1, 5)), np.array([[0]], np.int32), np.ones((1, 1)),
                         np.empty((1, 5)), axis=1, reduction="sub")
