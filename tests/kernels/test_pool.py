"""Pooling kernels against naive loop references."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.pool import (
    avgpool,
    avgpool_workspace,
    global_avgpool2d,
    global_maxpool2d,
    maxpool,
    maxpool2d_argmax,
    maxpool2d_argmax_workspace,
    maxpool_workspace,
)
from lightnet.ir.shapes import pool2d_output_hw
from tests.helpers import arena_view, assert_guards, rand
from tests.references import ref_pool

TOL = dict(rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- windowed pooling

POOL_CASES = [
    # (N, C, H, W), size, stride, padding, ceil_mode
    ((2, 3, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), False),
    ((1, 2, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1), False),
    ((1, 2, 7, 8), (3, 2), (1, 2), (1, 0, 2, 1), False),  # asymmetric
    ((1, 2, 5, 5), (3, 3), (1, 1), (1, 1, 1, 1), False),  # "same" 3x3
    ((2, 2, 5, 6), (2, 3), (2, 2), (0, 0, 0, 0), True),  # ceil mode, no padding
    ((1, 3, 6, 7), (3, 3), (2, 2), (1, 1, 1, 1), True),  # ceil mode with padding
    ((1, 1, 4, 4), (4, 4), (1, 1), (0, 0, 0, 0), False),  # window covers the input
    ((1, 2, 6, 5), (1, 1), (2, 2), (0, 0, 0, 0), False),  # plain subsampling
    ((1, 2, 3, 3), (2, 2), (1, 1), (0, 0, 0, 1), False),  # pad on one side only
]


@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool2d(case, use_ws):
    shape, size, stride, padding, ceil_mode = case
    x = rand(np.random.default_rng(0), *shape)
    out_hw = pool2d_output_hw(shape[2:], size, stride, padding, ceil_mode=ceil_mode)
    arena, dst = arena_view(shape[:2] + out_hw, fill=np.nan)
    params = dict(size=size, stride=stride, padding=padding)
    ws = maxpool_workspace(x.shape, dst.shape, **params) if use_ws else None
    expected = ref_pool(x, "max", size, stride, padding, out_hw)
    for _ in range(2):
        assert maxpool(x, dst, **params, ws=ws) is None
        np.testing.assert_allclose(dst, expected, **TOL)
    assert_guards(arena, np.nan)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("case", POOL_CASES)
def test_avgpool2d(case, use_ws, count_include_pad):
    shape, size, stride, padding, ceil_mode = case
    x = rand(np.random.default_rng(1), *shape)
    out_hw = pool2d_output_hw(shape[2:], size, stride, padding, ceil_mode=ceil_mode)
    arena, dst = arena_view(shape[:2] + out_hw, fill=np.nan)
    params = dict(size=size, stride=stride, padding=padding, count_include_pad=count_include_pad)
    ws = avgpool_workspace(x.shape, dst.shape, **params) if use_ws else None
    expected = ref_pool(x, "avg", size, stride, padding, out_hw, count_include_pad)
    for _ in range(2):
        assert avgpool(x, dst, **params, ws=ws) is None
        np.testing.assert_allclose(dst, expected, **TOL)
    assert_guards(arena, np.nan)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("shape, size, stride, padding, dilation, ceil_mode", [
    ((1, 2, 7, 7), (2, 2), (1, 1), (0, 0, 0, 0), (2, 2), False),
    ((1, 2, 8, 9), (3, 2), (2, 1), (1, 2, 1, 0), (2, 3), False),
    ((2, 1, 9, 8), (2, 3), (2, 2), (1, 1, 1, 1), (3, 2), True),
])
def test_pooling_with_dilation(shape, size, stride, padding, dilation, ceil_mode, use_ws,
                               count_include_pad):
    x = rand(np.random.default_rng(2), *shape)
    out_hw = pool2d_output_hw(shape[2:], size, stride, padding, ceil_mode=ceil_mode,
                              dilation=dilation)
    params = dict(size=size, stride=stride, padding=padding, dilation=dilation)
    arena, dst = arena_view(shape[:2] + out_hw, fill=np.nan)
    ws = avgpool_workspace(x.shape, dst.shape, **params,
                             count_include_pad=count_include_pad) if use_ws else None
    avgpool(x, dst, **params, count_include_pad=count_include_pad, ws=ws)
    np.testing.assert_allclose(dst, ref_pool(x, "avg", size, stride, padding, out_hw,
                                             count_include_pad, dilation), **TOL)
    assert_guards(arena, np.nan)
    arena, dst = arena_view(shape[:2] + out_hw, fill=np.nan)
    ws = maxpool_workspace(x.shape, dst.shape, **params) if use_ws else None
    maxpool(x, dst, **params, ws=ws)
    np.testing.assert_allclose(dst, ref_pool(x, "max", size, stride, padding, out_hw,
                                             dilation=dilation), **TOL)
    assert_guards(arena, np.nan)


def test_avgpool2d_default_excludes_padding():
    x = np.ones((1, 1, 2, 2), np.float32)
    dst = np.empty((1, 1, 2, 2), np.float32)
    avgpool(x, dst, size=(2, 2), stride=(1, 1), padding=(1, 1, 0, 0))
    np.testing.assert_array_equal(dst, np.ones((1, 1, 2, 2)))
    avgpool(x, dst, size=(2, 2), stride=(1, 1), padding=(1, 1, 0, 0), count_include_pad=True)
    np.testing.assert_array_equal(dst[0, 0], [[0.25, 0.5], [0.5, 1.0]])


def test_pool_hand_computed():
    x = np.array([[[[1, -2, 3], [-4, 5, -6], [7, -8, 9]]]], np.float32)
    dst = np.empty((1, 1, 2, 2), np.float32)
    maxpool(-np.abs(x), dst, size=(2, 2), stride=(2, 2), padding=(0, 0, 1, 1))
    # windows of -|x|: {-1,-2,-4,-5}, {-3,-6}, {-7,-8}, {-9}: padding never wins
    np.testing.assert_array_equal(dst[0, 0], [[-1, -3], [-7, -9]])
    avgpool(x, dst, size=(2, 2), stride=(2, 2), padding=(0, 0, 1, 1))
    np.testing.assert_array_equal(dst[0, 0], [[0, -1.5], [-0.5, 9]])


def test_pool_noncontiguous_input():
    rng = np.random.default_rng(2)
    x = rand(rng, 1, 6, 5, 2).transpose(0, 3, 2, 1)  # [1, 2, 5, 6], not contiguous
    for padding in [(0, 0, 0, 0), (1, 0, 1, 1)]:
        out_hw = pool2d_output_hw((5, 6), (2, 3), (1, 2), padding)
        dst = np.empty((1, 2) + out_hw, np.float32)
        maxpool(x, dst, size=(2, 3), stride=(1, 2), padding=padding)
        np.testing.assert_allclose(dst, ref_pool(x, "max", (2, 3), (1, 2), padding, out_hw), **TOL)
        avgpool(x, dst, size=(2, 3), stride=(1, 2), padding=padding)
        np.testing.assert_allclose(dst, ref_pool(x, "avg", (2, 3), (1, 2), padding, out_hw), **TOL)


def test_maxpool2d_integer():
    x = np.array([[[[-5, -7], [-9, -6]]]], np.int32)
    dst = np.empty((1, 1, 2, 2), np.int32)
    maxpool(x, dst, size=(2, 2), stride=(1, 1), padding=(0, 0, 1, 1))
    np.testing.assert_array_equal(dst[0, 0], [[-5, -6], [-6, -6]])


# ---------------------------------------------------------------- global pooling


def test_global_pooling():
    x = rand(np.random.default_rng(3), 2, 3, 4, 5)
    expected_avg = np.zeros((2, 3, 1, 1))
    expected_max = np.zeros((2, 3, 1, 1))
    for n in range(2):
        for c in range(3):
            cells = [float(x[n, c, i, j]) for i in range(4) for j in range(5)]
            expected_avg[n, c, 0, 0] = sum(cells) / len(cells)
            expected_max[n, c, 0, 0] = max(cells)
    arena, dst = arena_view((2, 3, 1, 1), fill=np.nan)
    assert global_avgpool2d(x, dst) is None
    np.testing.assert_allclose(dst, expected_avg, **TOL)
    assert global_maxpool2d(x, dst) is None
    np.testing.assert_allclose(dst, expected_max, **TOL)
    assert_guards(arena, np.nan)


def test_global_pooling_other_ranks():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)[..., ::2]  # non-contiguous
    dst = np.empty((1, 2, 1, 1), np.float32)
    global_avgpool2d(x, dst)
    np.testing.assert_allclose(dst.ravel(), [5.0, 17.0], **TOL)
    x3 = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    dst3 = np.empty((1, 2, 1), np.float32)
    global_maxpool2d(x3, dst3)
    np.testing.assert_array_equal(dst3.ravel(), [2, 5])


def test_separable_pooling_with_clobbered_scratch_rows():
    """The rows buffer is scratch, shared by all ops: garbage left in it by another
    op must not matter."""
    from lightnet.archs.cpu.kernels.pool import pool_scratch
    from lightnet.archs.cpu.kernels.scratch import scratch_bytes

    rng = np.random.default_rng(9)
    x = rand(rng, 1, 3, 11, 11)
    size, stride, padding = (3, 3), (2, 2), (1, 1, 1, 1)
    out_hw = pool2d_output_hw((11, 11), size, stride, padding)
    dst = np.empty((1, 3) + out_hw, np.float32)
    layout = pool_scratch(x.shape, dst.shape, size=size, stride=stride, padding=padding,
                            dtype=np.float32)
    buffer = np.empty(scratch_bytes(layout), np.uint8)
    ws = maxpool_workspace(x.shape, dst.shape, size=size, stride=stride, padding=padding,
                             scratch=buffer)
    assert "rows" in ws and ws["padded"] is not None  # the separable path, padded
    for _ in range(2):
        buffer[:] = 0xFF  # NaN everywhere, the padded input's border included
        maxpool(x, dst, size=size, stride=stride, padding=padding, ws=ws)
        np.testing.assert_allclose(dst, ref_pool(x, "max", size, stride, padding, out_hw), **TOL)
    ws = avgpool_workspace(x.shape, dst.shape, size=size, stride=stride, padding=padding,
                             count_include_pad=True, scratch=buffer)
    for _ in range(2):
        buffer[:] = 0xFF
        avgpool(x, dst, size=size, stride=stride, padding=padding, count_include_pad=True,
                  ws=ws)
        np.testing.assert_allclose(dst, ref_pool(x, "avg", size, stride, padding, out_hw, True),
                                   **TOL)


def naive_maxpool_argmax(x, size, stride, padding, dilation, out_hw, storage_order):
    """The maximum of each window and its position in x flattened (the first on ties)."""
    n_, c_, h, w = x.shape
    dst = np.empty((n_, c_) + tuple(out_hw), x.dtype)
    idx = np.empty((n_, c_) + tuple(out_hw), np.int64)
    for n in range(n_):
        for c in range(c_):
            for oy in range(out_hw[0]):
                for ox in range(out_hw[1]):
                    best = None
                    for i in range(size[0]):
                        for j in range(size[1]):
                            y = oy * stride[0] - padding[0] + i * dilation[0]
                            xx = ox * stride[1] - padding[1] + j * dilation[1]
                            if 0 <= y < h and 0 <= xx < w and (best is None
                                                               or x[n, c, y, xx] > best[0]):
                                best = (x[n, c, y, xx], y, xx)
                    value, y, xx = best
                    dst[n, c, oy, ox] = value
                    plane = xx * h + y if storage_order else y * w + xx
                    idx[n, c, oy, ox] = (n * c_ + c) * h * w + plane
    return dst, idx


@pytest.mark.parametrize("storage_order", [False, True])
@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("shape, size, stride, padding, dilation, ceil_mode, dtype", [
    ((2, 3, 6, 7), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, np.float32),
    ((1, 2, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, np.float64),
    ((1, 2, 8, 9), (2, 3), (1, 2), (1, 0, 0, 2), (2, 2), False, np.float32),
    ((1, 2, 5, 6), (2, 2), (1, 1), (0, 1, 1, 0), (1, 1), False, np.int32),
])
def test_maxpool2d_argmax(shape, size, stride, padding, dilation, ceil_mode, dtype, use_ws,
                          storage_order):
    rng = np.random.default_rng(3)
    x = (rng.integers(-9, 9, shape) if dtype == np.int32
         else rng.standard_normal(shape)).astype(dtype)
    out_hw = pool2d_output_hw(shape[2:], size, stride, padding, ceil_mode=ceil_mode,
                              dilation=dilation)
    params = dict(size=size, stride=stride, padding=padding, dilation=dilation)
    arena, dst = arena_view(shape[:2] + out_hw, dtype)
    arena_i, indices = arena_view(shape[:2] + out_hw, np.int32)
    ws = maxpool2d_argmax_workspace(x.shape, dst.shape, **params, dtype=dtype,
                                    storage_order=storage_order) if use_ws else None
    want_dst, want_idx = naive_maxpool_argmax(x, size, stride, padding, dilation, out_hw,
                                              storage_order)
    for _ in range(2):
        assert maxpool2d_argmax(x, dst, indices, **params, storage_order=storage_order,
                                ws=ws) is None
        np.testing.assert_array_equal(dst, want_dst)
        np.testing.assert_array_equal(indices, want_idx)
    assert_guards(arena)
    assert_guards(arena_i)
