import itertools

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.array import (
    concat,
    fill_arange,
    fill_zeros,
    gather,
    gather_indices,
    pick1d,
    slice,
    transpose,
)
from lightnet.ir.shapes import arange_len, gather_shape, pick1d_shape
from tests.helpers import arena_view, assert_guards

RTOL, ATOL = 1e-5, 1e-6


def naive_concat(srcs, axis):
    shape = list(srcs[0].shape)
    shape[axis] = sum(s.shape[axis] for s in srcs)
    out = np.zeros(shape, dtype=srcs[0].dtype)
    for idx in itertools.product(*map(range, shape)):
        pos = idx[axis]
        for s in srcs:
            if pos < s.shape[axis]:
                sidx = idx[:axis] + (pos,) + idx[axis + 1 :]
                out[idx] = s[sidx]
                break
            pos -= s.shape[axis]
    return out


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("n_inputs", [2, 3])
def test_concat_each_axis(axis, n_inputs):
    rng = np.random.default_rng(axis * 10 + n_inputs)
    base = [2, 3, 4]
    srcs = []
    for k in range(n_inputs):
        shape = list(base)
        shape[axis] = k + 1
        srcs.append(rng.standard_normal(shape).astype(np.float32))
    out_shape = list(base)
    out_shape[axis] = sum(s.shape[axis] for s in srcs)
    arena, dst = arena_view(out_shape)
    assert concat(srcs, dst, axis=axis) is None
    np.testing.assert_allclose(dst, naive_concat(srcs, axis), rtol=RTOL, atol=ATOL)
    assert_guards(arena)


def test_concat_hand_and_non_contiguous():
    a = np.array([[1, 2], [3, 4]], dtype=np.float32)
    b = np.array([[5, 6], [7, 8]], dtype=np.float32).T  # non-contiguous view
    _, dst = arena_view((2, 4))
    concat([a, b], dst, axis=1)
    np.testing.assert_array_equal(dst, [[1, 2, 5, 7], [3, 4, 6, 8]])


@pytest.mark.parametrize("axes", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0)])
def test_transpose_permutations(axes):
    rng = np.random.default_rng(sum(a * 3**i for i, a in enumerate(axes)))
    src = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out_shape = tuple(src.shape[a] for a in axes)
    _, dst = arena_view(out_shape)
    assert transpose(src, dst, axes=axes) is None
    expected = np.zeros(out_shape, np.float32)
    for idx in itertools.product(*map(range, out_shape)):
        sidx = [0] * 3
        for i, a in enumerate(axes):
            sidx[a] = idx[i]
        expected[idx] = src[tuple(sidx)]
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


def test_transpose_4d_hand():
    src = np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4)
    _, dst = arena_view((1, 3, 4, 2), dtype=np.int32)
    transpose(src, dst, axes=(0, 2, 3, 1))
    assert dst[0, 2, 3, 1] == src[0, 1, 2, 3] == 23
    assert dst[0, 1, 0, 0] == src[0, 0, 1, 0] == 4


def test_fill_zeros():
    arena, dst = arena_view((3, 5))
    assert fill_zeros(dst) is None
    assert (dst == 0).all()
    assert_guards(arena)


@pytest.mark.parametrize(
    "start, stop, step, dtype",
    [
        (0, 10, 1, np.float32),
        (10, 0, -2.5, np.float64),
        (-3, 4, 2, np.int32),
        (0, 1, 0.25, np.float32),
    ],
)
def test_fill_arange(start, stop, step, dtype):
    n = arange_len(start, stop, step)
    _, dst = arena_view((n,), dtype=dtype)
    assert fill_arange(dst, start, stop, step) is None
    expected = [start + step * i for i in range(n)]
    np.testing.assert_allclose(dst, np.array(expected).astype(dtype), rtol=RTOL, atol=ATOL)


def test_fill_arange_keywords_and_length_mismatch():
    _, dst = arena_view((4,))
    fill_arange(dst, start=1, stop=2, step=0.25)
    np.testing.assert_allclose(dst, [1, 1.25, 1.5, 1.75])
    with pytest.raises(ValueError, match="has 5 elements, but dst has 4"):
        fill_arange(dst, 0, 5, 1)


def test_pick1d_hand():
    src = np.arange(12, dtype=np.float32)  # chunks of 3: [0 1 2] [3 4 5] [6 7 8] [9 10 11]
    index = np.array([3, 0, 2, 1], dtype=np.int32)
    arena, dst = arena_view(pick1d_shape(3, 3))
    assert pick1d(src, index, dst, len=3, stride=3) is None
    np.testing.assert_array_equal(dst, [9, 10, 11, 0, 1, 2, 6, 7, 8])
    assert (arena[-8:] == -777).all()


def test_pick1d_random_against_loop():
    rng = np.random.default_rng(7)
    stride, n_chunks, length = 4, 10, 6
    src = rng.standard_normal(n_chunks * stride + 3)  # a partial chunk at the end
    index = rng.integers(0, n_chunks, size=8).astype(np.int32)
    _, dst = arena_view((length * stride,), dtype=np.float64)
    pick1d(src, index, dst, len=length, stride=stride)
    expected = np.zeros(length * stride)
    for di in range(length):
        for i in range(stride):
            expected[di * stride + i] = src[index[di] * stride + i]
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


def test_pick1d_negative_and_out_of_range():
    src = np.arange(6, dtype=np.float32)  # chunks of 2: [0 1] [2 3] [4 5]
    _, dst = arena_view((4,))
    pick1d(src, np.array([-1, -3], np.int32), dst, len=2, stride=2)
    np.testing.assert_array_equal(dst, [4, 5, 0, 1])  # counted from the end
    for bad in (3, -4):
        with pytest.raises(ValueError, match=rf"src_index holds {bad}: expected a chunk "
                                             r"number in \[-3, 2\] \(src has 3 chunks of 2\)"):
            pick1d(src, np.array([0, bad], np.int32), dst, len=2, stride=2)


def test_slice_still_works():
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _, dst = arena_view((2, 2, 4))
    assert slice(src, dst, 1, 1, 2) is None
    np.testing.assert_array_equal(dst, src[:, 1:3])


# --- gather with constant indices -------------------------------------------------------

@pytest.mark.parametrize("shape, axis, indices", [
    ((5, 3), 0, [4, 0, -1, 2, 2]),
    ((2, 6, 3), 1, [[0, 5], [-6, 3], [1, 1]]),
    ((2, 3, 4), 2, [3]),
    ((169, 3), 0, np.arange(49 * 49) % 169),  # a relative-position bias table lookup
])
def test_gather(shape, axis, indices):
    rng = np.random.default_rng(len(shape))
    src = rng.standard_normal(shape).astype(np.float32)
    indices = np.asarray(indices, np.int32)
    out_shape = gather_shape(src.shape, indices.shape, axis)
    dst = np.full(out_shape, np.nan, np.float32)
    gather(src, gather_indices(indices, shape[axis]), dst, axis=axis)
    for out_index in itertools.product(*map(range, out_shape)):
        k = indices[out_index[axis:axis + indices.ndim]]
        k = k + shape[axis] if k < 0 else k
        src_index = out_index[:axis] + (k,) + out_index[axis + indices.ndim:]
        assert dst[out_index] == src[src_index]


def test_gather_errors():
    with pytest.raises(ValueError, match=r"index 5 is out of range for an axis of 5 entries "
                                         r"\(valid: -5 to 4\)"):
        gather_indices(np.array([0, 5, -9]), 5)
    with pytest.raises(ValueError, match="index -6 is out of range"):
        gather_indices(np.array([[0], [-6]]), 5)
    with pytest.raises(ValueError, match="axis 2 is out of range for a 2-D shape"):
        gather_shape((2, 3), (4,), 2)
    assert gather_shape((2, 3, 4), (5, 6), 1) == (2, 5, 6, 4)
