"""The boolean and element-position kernels against naive loops and hand-computed values:
cast (C's conversions), compare / where broadcasting, cumsum, trilu, gather_elements
and scatter_nd (indices out of range)."""

import itertools

import numpy as np
import pytest

from lightnet.archs.cpu import kernels as K


def test_cast_converts_as_c():
    dst = np.empty(5, np.int32)
    K.cast(np.array([2.9, -2.9, 0.4, -0.4, 7.0], np.float32), dst)
    assert dst.tolist() == [2, -2, 0, 0, 7]
    dst = np.empty(3, np.int8)
    K.cast(np.array([127, 128, -129], np.int32), dst)
    assert dst.tolist() == [127, -128, 127]
    dst = np.empty(4, np.bool_)
    K.cast(np.array([0.0, -0.0, 1e-30, np.nan], np.float32), dst)
    assert dst.tolist() == [False, False, True, True]


def test_compare_and_where_broadcast():
    a = np.array([[1], [5]], np.int32)
    b = np.array([0, 5, 9], np.int32)
    dst = np.empty((2, 3), np.bool_)
    K.compare(a, b, dst, cmp_op="TL_LE")
    want = [[a[i, 0] <= b[j] for j in range(3)] for i in range(2)]
    assert dst.tolist() == want
    out = np.empty((2, 3), np.int32)
    K.where(dst, a, np.array([-1], np.int32), out)
    assert out.tolist() == [[a[i, 0] if want[i][j] else -1 for j in range(3)] for i in range(2)]


@pytest.mark.parametrize("exclusive, reverse", itertools.product([False, True], repeat=2))
def test_cumsum_against_a_loop(exclusive, reverse):
    x = np.random.default_rng(0).integers(-9, 9, (3, 5, 2)).astype(np.int32)
    dst = np.empty_like(x)
    K.cumsum(x, dst, axis=1, exclusive=exclusive, reverse=reverse)
    want = np.zeros_like(x)
    for i, k in itertools.product(range(3), range(2)):
        for j in range(5):
            terms = range(j + 1, 5) if reverse else range(j)
            terms = [*terms] if exclusive else ([*terms, j])
            want[i, j, k] = sum(x[i, t, k] for t in terms)
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("upper, k", [(True, 0), (True, -2), (False, 1), (False, -4)])
def test_trilu_against_numpy(upper, k):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) + 1
    dst = np.empty_like(x)
    K.trilu(x, dst, drop=~K.trilu_keep(3, 4, upper, k))
    np.testing.assert_array_equal(dst, np.triu(x, k) if upper else np.tril(x, k))


def test_gather_elements_against_a_loop():
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[3, -1], [0, 2]], np.int32)  # 2 rows of 3, 2 columns of 4
    dst = np.empty((2, 2), np.float32)
    K.gather_elements(src, idx, dst, axis=1)
    assert dst.tolist() == [[src[i, idx[i, j] % 4] for j in range(2)] for i in range(2)]
    with pytest.raises(IndexError, match=r"index 4 on axis 1 is out of range for its 4 entries"):
        K.gather_elements(src, np.array([[4]], np.int32), np.empty((1, 1), np.float32), axis=1)


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_gather_elements_4d_against_a_loop(axis):
    """Every axis of a 4-D source, the indices fewer than src's entries on the other axes
    (each axis's start in src then differs from the indices' own strides)."""
    rng = np.random.default_rng(axis)
    src = rng.standard_normal((2, 3, 4, 5))
    shape = [1, 3, 2, 4]
    shape[axis] = 6  # any number of picks along the axis
    idx = rng.integers(-src.shape[axis], src.shape[axis], shape)
    dst = np.empty(shape)
    K.gather_elements(src, idx, dst, axis=axis)
    for p in np.ndindex(*shape):
        q = list(p)
        q[axis] = idx[p] % src.shape[axis]
        assert dst[p] == src[tuple(q)]


def test_scatter_nd_against_a_loop():
    data = np.zeros((3, 2), np.int32)
    idx = np.array([[0, 1], [2, 0], [0, 1]], np.int32)
    upd = np.array([5, 6, 7], np.int32)
    for reduction in ("none", "add", "mul", "max", "min"):
        dst = np.empty_like(data)
        K.scatter_nd(data + 1, idx, upd, dst, reduction=reduction)
        want = data + 1
        for (i, j), u in zip(idx, upd):
            want[i, j] = {"none": u, "add": want[i, j] + u, "mul": want[i, j] * u,
                          "max": max(want[i, j], u), "min": min(want[i, j], u)}[reduction]
        np.testing.assert_array_equal(dst, want)
    with pytest.raises(IndexError, match=r"index -4 on axis 0 is out of range"):
        K.scatter_nd(data, np.array([[-4, 0]], np.int32), upd[:1], np.empty_like(data),
                     reduction="none")
