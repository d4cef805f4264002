import itertools
import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.resample import (
    resize,
    resize_workspace,
    upsample,
    upsample_workspace,
)
from lightnet.ir.shapes import upsample_shape
from tests.helpers import arena_view, assert_guards

RTOL, ATOL = 1e-5, 1e-6
NEAREST, LINEAR = "TL_NEAREST", "TL_LINEAR"


def naive_nearest(src, out_shape, src_index):
    """src_index(axis, i) gives the source index of output index i on that axis."""
    out = np.zeros(out_shape)
    for idx in itertools.product(*map(range, out_shape)):
        out[idx] = src[tuple(src_index(k, i) for k, i in enumerate(idx))]
    return out


def naive_linear(src, out_shape, coord):
    """Multilinear interpolation; coord(axis, i) is the (unclamped) source coordinate."""
    out = np.zeros(out_shape)
    for idx in itertools.product(*map(range, out_shape)):
        lows, fracs = [], []
        for k, i in enumerate(idx):
            x = min(max(coord(k, i), 0.0), src.shape[k] - 1)
            lows.append(int(math.floor(x)))
            fracs.append(x - math.floor(x))
        total = 0.0
        for corner in itertools.product((0, 1), repeat=len(idx)):
            weight, sidx = 1.0, []
            for k, c in enumerate(corner):
                weight *= fracs[k] if c else 1 - fracs[k]
                sidx.append(min(lows[k] + c, src.shape[k] - 1))
            total += weight * src[tuple(sidx)]
        out[idx] = total
    return out


def test_upsample_nearest_hand():
    src = np.array([[1, 2], [3, 4]], np.float32)
    arena, dst = arena_view((4, 4))
    assert upsample(src, dst, mode=NEAREST, scales=(2, 2)) is None
    np.testing.assert_array_equal(dst, [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])
    assert_guards(arena)


def test_upsample_nearest_fractional_scale_rounds_as_tensorlight():
    src = np.array([10, 20, 30], np.float32)
    dst = np.empty(4, np.float32)  # floor(3 * 1.5) = 4
    upsample(src, dst, mode=NEAREST, scales=[1.5])
    # round((i + 0.5) * 3 / 4 - 0.5) = round(-0.125, 0.625, 1.375, 2.125) = 0, 1, 1, 2
    np.testing.assert_array_equal(dst, [10, 20, 20, 30])


def test_upsample_nearest_nchw_against_loop():
    rng = np.random.default_rng(1)
    src = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scales = (1, 1, 2, 3)
    out_shape = upsample_shape(src.shape, scales)
    _, dst = arena_view(out_shape)
    upsample(src, dst, mode=NEAREST, scales=scales)
    expected = naive_nearest(src, out_shape, lambda k, i: int(math.floor(i / scales[k])))
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


def test_upsample_nearest_integer_dtype_and_non_contiguous_source():
    src = np.arange(12, dtype=np.int32).reshape(3, 4).T  # (4, 3) view
    dst = np.empty((8, 3), np.int32)
    upsample(src, dst, mode=NEAREST, scales=(2, 1))
    np.testing.assert_array_equal(dst, np.repeat(src, 2, axis=0))


def test_upsample_linear_1d_hand():
    src = np.array([0, 1, 2, 3], np.float32)
    dst = np.empty(8, np.float32)
    upsample(src, dst, mode=LINEAR, scales=[2])
    # x = (i + 0.5) / 2 - 0.5 clamped to [0, 3]
    np.testing.assert_allclose(
        dst, [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3], rtol=RTOL, atol=ATOL
    )


def test_upsample_linear_2d_hand():
    src = np.array([[0, 1], [2, 3]], np.float32)  # value = 2 * y + x
    dst = np.empty((4, 4), np.float32)
    upsample(src, dst, mode=LINEAR, scales=(2, 2))
    c = [0, 0.25, 0.75, 1]  # clamped half-pixel coordinates for 2 -> 4
    expected = [[2 * cy + cx for cx in c] for cy in c]
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 2, 1.5, 3), (1, 1, 0.5, 2.5)])
def test_upsample_linear_nchw_against_loop(scales):
    rng = np.random.default_rng(int(sum(scales) * 10))
    src = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    out_shape = upsample_shape(src.shape, scales)
    arena, dst = arena_view(out_shape)
    upsample(src, dst, mode=LINEAR, scales=scales)
    expected = naive_linear(src, out_shape, lambda k, i: (i + 0.5) / scales[k] - 0.5)
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)
    assert_guards(arena)


@pytest.mark.parametrize("mode", [NEAREST, LINEAR])
def test_upsample_workspace_reuse_and_identity(mode):
    rng = np.random.default_rng(2)
    src = rng.standard_normal((2, 3, 3)).astype(np.float32)
    ws = upsample_workspace(src.shape, np.float32, mode=mode, scales=(1, 2, 2))
    first = np.empty((2, 6, 6), np.float32)
    upsample(src, first, mode=mode, scales=(1, 2, 2), ws=ws)
    src2 = src * 2
    second = np.empty((2, 6, 6), np.float32)
    upsample(src2, second, mode=mode, scales=(1, 2, 2), ws=ws)
    np.testing.assert_allclose(second, first * 2, rtol=RTOL, atol=ATOL)
    same = np.empty_like(src)
    upsample(src, same, mode=mode, scales=(1, 1, 1))
    np.testing.assert_array_equal(same, src)


def test_resize_nearest_hand():
    src = np.array([0, 1, 2, 3, 4, 5], np.float32)
    dst = np.empty(14, np.float32)
    resize(src, dst, mode=NEAREST, dims=(14,))
    # floor(i * 6 / 14), exact: i = 7 maps to 3, not 2
    np.testing.assert_array_equal(dst, [(i * 6) // 14 for i in range(14)])
    assert dst[7] == 3
    small = np.empty(2, np.float32)
    resize(np.array([0, 1, 2, 3, 4], np.float32), small, mode=NEAREST, dims=[2])
    np.testing.assert_array_equal(small, [0, 2])


def test_resize_nearest_2d_against_loop():
    rng = np.random.default_rng(3)
    src = rng.standard_normal((3, 5)).astype(np.float32)
    dims = (7, 4)
    arena, dst = arena_view(dims)
    assert resize(src, dst, mode=NEAREST, dims=dims) is None
    expected = naive_nearest(src, dims, lambda k, i: (i * src.shape[k]) // dims[k])
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)
    assert_guards(arena)


def test_resize_linear_downsample_hand():
    src = np.array([1, 3, 5, 9], np.float32)
    dst = np.empty(2, np.float32)
    resize(src, dst, mode=LINEAR, dims=[2])
    # x = (i + 0.5) * 2 - 0.5 = 0.5, 2.5
    np.testing.assert_allclose(dst, [2, 7], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("dims", [(1, 3, 8, 10), (1, 2, 7, 3), (2, 3, 4, 5)])
def test_resize_linear_against_loop(dims):
    rng = np.random.default_rng(sum(dims))
    src = rng.standard_normal((1, 3, 4, 5)).astype(np.float64)
    ws = resize_workspace(src.shape, np.float64, mode=LINEAR, dims=dims)
    dst = np.empty(dims, np.float64)
    resize(src, dst, mode=LINEAR, dims=dims, ws=ws)
    expected = naive_linear(src, dims, lambda k, i: (i + 0.5) * src.shape[k] / dims[k] - 0.5)
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


def test_bad_arguments():
    src = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match="unknown resize mode 'TL_CUBIC'"):
        upsample(src, np.zeros((4, 4), np.float32), mode="TL_CUBIC", scales=(2, 2))
    with pytest.raises(ValueError, match="needs a floating dtype"):
        upsample(src.astype(np.int32), np.zeros((4, 4), np.int32), mode=LINEAR, scales=(2, 2))
    with pytest.raises(ValueError, match="resize dims"):
        resize_workspace((2, 2), np.float32, mode=NEAREST, dims=(4,))


@pytest.mark.parametrize("mode", ["TL_NEAREST", "TL_LINEAR"])
def test_scratch_layout_without_tables_matches_the_tables(mode):
    """The scratch layouts, found at check time without building index tables,
    are the ones the workspaces (built from the tables) carve."""
    from lightnet.archs.cpu.kernels import resample

    rng = np.random.default_rng(7)
    for _ in range(300):
        shape = tuple(int(d) for d in rng.integers(1, 6, size=rng.integers(1, 4)))
        scales = [float(rng.choice([1.0, 0.5, 1.25, 1.4, 2.0, 3.0, 0.75])) for _ in shape]
        if any(int(d * s) < 1 for d, s in zip(shape, scales)):
            continue
        dst, tables = resample._upsample_tables(shape, mode, scales)
        expected = resample._layout(shape, dst, np.dtype(np.float32), mode,
                                    resample._identity_axes(shape, dst, tables))
        assert resample.upsample_scratch(shape, np.float32, mode=mode, scales=scales) == expected
        dims = tuple(int(d) for d in rng.integers(1, 7, size=len(shape)))
        dims, tables = resample._resize_tables(shape, mode, dims)
        expected = resample._layout(shape, dims, np.dtype(np.float32), mode,
                                    resample._identity_axes(shape, dims, tables))
        assert resample.resize_scratch(shape, np.float32, mode=mode, dims=dims) == expected


def test_scratch_of_a_huge_upsample_is_found_without_tables():
    """Scratch is computed at check time, before the memory limit: it must not
    build per-output tables (a fuzzed scale of 1e9 once hung here)."""
    from lightnet.archs.cpu.kernels import resample

    layout = resample.upsample_scratch((1, 2, 4, 4), np.float32, mode="TL_NEAREST",
                                       scales=[1, 1, 1e9, 1e9])
    assert layout[0][1] == (1, 2, 4_000_000_000, 4)
