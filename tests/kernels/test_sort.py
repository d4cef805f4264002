import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.sort import sort1d, sort1d_by_key, topk
from tests.helpers import arena_view, assert_guards

ASC, DESC = "TL_SORT_DIR_ASCENDING", "TL_SORT_DIR_DESCENDING"


def reference_order(keys, descending):
    """Indices of a stable sort (Python's sorted is stable, also with reverse=True)."""
    return sorted(range(len(keys)), key=lambda i: keys[i], reverse=descending)


@pytest.mark.parametrize("dir", [ASC, DESC])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sort1d(dir, dtype):
    rng = np.random.default_rng(1 + (dir == DESC))
    src = rng.integers(-20, 20, 100).astype(dtype)
    arena, dst = arena_view(100, dtype)
    assert sort1d(src, dst, dir=dir) is None
    np.testing.assert_array_equal(dst, sorted(src.tolist(), reverse=dir == DESC))
    assert_guards(arena)


def test_sort1d_hand_and_in_place():
    key = np.array([2.5, -1.0, 7.0, 2.5, 0.0], np.float32)
    sort1d(key, key, dir=DESC)
    np.testing.assert_array_equal(key, [7.0, 2.5, 2.5, 0.0, -1.0])
    sort1d(key, key, dir=ASC)
    np.testing.assert_array_equal(key, [-1.0, 0.0, 2.5, 2.5, 7.0])


def test_sort1d_descending_keeps_equal_keys_in_order():
    key = np.array([0.0, -0.0, 1.0, -0.0, 0.0], np.float64)  # 0.0 == -0.0
    dst = np.empty(5)
    sort1d(key, dst, dir=DESC)
    np.testing.assert_array_equal(np.signbit(dst), [False, False, True, True, False])
    sort1d(key, dst, dir=ASC)
    np.testing.assert_array_equal(np.signbit(dst), [False, True, True, False, False])


def test_sort1d_non_contiguous_source():
    src = np.arange(20, dtype=np.float32)[::-2]
    dst = np.empty(10, np.float32)
    sort1d(src, dst, dir=ASC)
    np.testing.assert_array_equal(dst, np.arange(1, 20, 2))


@pytest.mark.parametrize("dir", [ASC, DESC])
def test_sort1d_by_key_stable_with_duplicates(dir):
    rng = np.random.default_rng(3 + (dir == DESC))
    n = 200
    key = rng.integers(0, 8, n).astype(np.float32)  # lots of duplicates
    val = np.arange(n, dtype=np.int32)
    key_arena, dst_key = arena_view(n, np.float32)
    val_arena, dst_val = arena_view(n, np.int32)
    assert sort1d_by_key(key, val, dst_key, dst_val, dir=dir) is None
    order = reference_order(key.tolist(), dir == DESC)
    np.testing.assert_array_equal(dst_val, order)
    np.testing.assert_array_equal(dst_key, key[order])
    assert_guards(key_arena)
    assert_guards(val_arena)


def test_sort1d_by_key_hand():
    key = np.array([3, 1, 2, 1, 3, 2], np.int32)
    val = np.array([10, 11, 12, 13, 14, 15], np.int32)
    dk, dv = np.empty(6, np.int32), np.empty(6, np.int32)
    sort1d_by_key(key, val, dk, dv, dir=ASC)
    np.testing.assert_array_equal(dk, [1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(dv, [11, 13, 12, 15, 10, 14])
    sort1d_by_key(key, val, dk, dv, dir=DESC)
    np.testing.assert_array_equal(dk, [3, 3, 2, 2, 1, 1])
    np.testing.assert_array_equal(dv, [10, 14, 12, 15, 11, 13])


@pytest.mark.parametrize("dir", [ASC, DESC])
def test_sort1d_by_key_in_place(dir):
    rng = np.random.default_rng(9)
    key = rng.integers(0, 5, 50).astype(np.float32)
    val = rng.integers(0, 1000, 50).astype(np.int32)
    order = reference_order(key.tolist(), dir == DESC)
    want_key, want_val = key[order], val[order]
    sort1d_by_key(key, val, key, val, dir=dir)
    np.testing.assert_array_equal(key, want_key)
    np.testing.assert_array_equal(val, want_val)


def test_sort1d_by_key_float_values_and_unsigned_keys():
    key = np.array([5, 0, 5, 255, 0], np.uint8)
    val = np.array([0.5, 1.5, 2.5, 3.5, 4.5], np.float32)
    dk, dv = np.empty(5, np.uint8), np.empty(5, np.float32)
    sort1d_by_key(key, val, dk, dv, dir=DESC)
    np.testing.assert_array_equal(dk, [255, 5, 5, 0, 0])
    np.testing.assert_array_equal(dv, [3.5, 0.5, 2.5, 1.5, 4.5])


def test_unknown_dir():
    key = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="unknown sort dir 'up'"):
        sort1d(key, key.copy(), dir="up")
    with pytest.raises(ValueError, match="TL_SORT_DIR_ASCENDING"):
        sort1d_by_key(key, key, key.copy(), key.copy(), dir="down")


def test_sort_empty_and_single():
    for n in (0, 1):
        key = np.arange(n, dtype=np.float32)
        val = np.arange(n, dtype=np.int32)
        dk, dv = np.empty(n, np.float32), np.empty(n, np.int32)
        sort1d_by_key(key, val, dk, dv, dir=DESC)
        np.testing.assert_array_equal(dv, val)
        sort1d(key, dk, dir=DESC)
        assert math.prod(dk.shape) == n


# --- topk ---------------------------------------------------------------------------------

def naive_topk(src, axis, k, largest):
    """TopK line by line: (value, index) pairs ordered by value, then index."""
    moved = np.moveaxis(src, axis, -1)
    values = np.empty(moved.shape[:-1] + (k,), src.dtype)
    indices = np.empty(moved.shape[:-1] + (k,), np.int64)
    for idx in np.ndindex(*moved.shape[:-1]):
        pairs = sorted(enumerate(moved[idx].tolist()),
                       key=lambda p: ((-p[1] if largest else p[1]), p[0]))[:k]
        indices[idx] = [i for i, _ in pairs]
        values[idx] = [v for _, v in pairs]
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int32])
def test_topk_matches_a_sort_by_value_then_index(axis, largest, dtype):
    src = np.random.default_rng(axis).integers(0, 4, (4, 5, 6)).astype(dtype)  # ties
    k = src.shape[axis] - 1
    want_values, want_indices = naive_topk(src, axis, k, largest)
    shape = want_values.shape
    arena_v, values = arena_view(shape, dtype, fill=99)
    arena_i, indices = arena_view(shape, np.int32)
    topk(src, values, indices, axis=axis, k=k, largest=largest)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)
    assert_guards(arena_v, fill=99)
    assert_guards(arena_i)
