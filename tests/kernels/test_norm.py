"""batchnorm, bn2scale_wts, lrn and layernorm against naive references."""

import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.norm import (
    groupnorm,
    groupnorm_scratch,
    batchnorm,
    bn2scale_wts,
    layernorm,
    layernorm_scratch,
    lrn,
    lrn_scratch,
)
from lightnet.archs.cpu.kernels.scratch import carve, scratch_bytes
from tests.helpers import arena_view, assert_guards, rand
from tests.references import ref_lrn

TOL = dict(rtol=1e-5, atol=1e-5)


def bn_params(rng, c):
    return rand(rng, c), rand(rng, c), rand(rng, c), rng.uniform(0.1, 2.0, c).astype(np.float32)


# ---------------------------------------------------------------- batchnorm


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (1, 2, 7), (2, 3, 2, 2, 2)])
def test_batchnorm(shape):
    rng = np.random.default_rng(0)
    x = rand(rng, *shape)
    c = shape[1]
    scale, offset, mean, var = bn_params(rng, c)
    eps = 1e-3
    expected = np.empty(shape)
    for index in np.ndindex(*shape):
        ch = index[1]
        expected[index] = (x[index] - mean[ch]) / math.sqrt(var[ch] + eps) * scale[ch] + offset[ch]
    arena, dst = arena_view(shape, fill=np.nan)
    assert batchnorm(x, scale, offset, mean, var, dst, epsilon=eps) is None
    np.testing.assert_allclose(dst, expected, **TOL)
    assert_guards(arena, np.nan)


def test_batchnorm_hand_computed():
    x = np.array([[[[1.0, 3.0]], [[2.0, 6.0]]]], np.float32)  # [1, 2, 1, 2]
    dst = np.empty_like(x)
    batchnorm(x, np.array([2.0, 1.0]), np.array([0.5, -1.0]), np.array([1.0, 4.0]), np.array([4.0, 1.0]), dst,
              epsilon=0.0)
    # channel 0: (x - 1) / 2 * 2 + 0.5; channel 1: (x - 4) / 1 * 1 - 1
    np.testing.assert_allclose(dst, [[[[0.5, 2.5]], [[-3.0, 1.0]]]], **TOL)


def test_batchnorm_noncontiguous_input():
    rng = np.random.default_rng(1)
    x = rand(rng, 2, 5, 4, 3).transpose(0, 3, 1, 2)  # [2, 3, 5, 4]
    scale, offset, mean, var = bn_params(rng, 3)
    dst = np.empty(x.shape, np.float32)
    batchnorm(x, scale, offset, mean, var, dst, epsilon=1e-5)
    a = (scale / np.sqrt(var.astype(np.float64) + 1e-5)).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(dst, (x - mean.reshape(1, 3, 1, 1)) * a + offset.reshape(1, 3, 1, 1), **TOL)


# ---------------------------------------------------------------- bn2scale_wts


def test_bn2scale_wts():
    rng = np.random.default_rng(2)
    scale, offset, mean, var = bn_params(rng, 6)
    eps = 1e-5
    dst_scale, dst_shift, dst_power = (np.full(6, np.nan, np.float32) for _ in range(3))
    assert bn2scale_wts(mean, var, scale, offset, dst_scale, dst_shift, dst_power, epsilon=eps) is None
    exp_scale = [scale[c] / math.sqrt(var[c] + eps) for c in range(6)]
    exp_shift = [offset[c] - mean[c] * exp_scale[c] for c in range(6)]
    np.testing.assert_allclose(dst_scale, exp_scale, **TOL)
    np.testing.assert_allclose(dst_shift, exp_shift, **TOL)
    np.testing.assert_array_equal(dst_power, np.ones(6))
    # the scale layer reproduces batchnorm
    x = rand(rng, 2, 6, 3, 3)
    bn = np.empty_like(x)
    batchnorm(x, scale, offset, mean, var, bn, epsilon=eps)
    scaled = (x * dst_scale.reshape(1, 6, 1, 1) + dst_shift.reshape(1, 6, 1, 1)) ** dst_power.reshape(1, 6, 1, 1)
    np.testing.assert_allclose(scaled, bn, **TOL)


def test_bn2scale_wts_hand_computed():
    dst_scale, dst_shift, dst_power = np.empty(1), np.empty(1), np.empty(1)
    bn2scale_wts(np.array([2.0]), np.array([3.0]), np.array([4.0]), np.array([1.0]), dst_scale, dst_shift,
                 dst_power, epsilon=1.0)
    np.testing.assert_allclose([dst_scale[0], dst_shift[0], dst_power[0]], [2.0, -3.0, 1.0])


# ---------------------------------------------------------------- lrn


@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize(
    "shape, size, alpha, beta, bias",
    [
        ((2, 7, 3, 4), 5, 1e-4, 0.75, 1.0),  # AlexNet style, odd size
        ((1, 6, 2, 3), 4, 0.5, 0.75, 2.0),  # even size: one more channel after than before
        ((1, 5, 3, 3), 2, 1.0, 0.5, 1.0),
        ((2, 3, 2, 2), 1, 0.3, 1.0, 1.5),  # size 1: only the channel itself
        ((1, 3, 2, 2), 7, 0.2, 0.6, 1.0),  # window wider than the channel count
        ((2, 4, 5), 3, 0.1, 0.75, 1.0),  # 1-D spatial
    ],
)
def test_lrn(shape, size, alpha, beta, bias, use_ws):
    x = rand(np.random.default_rng(3), *shape)
    arena, dst = arena_view(shape, fill=np.nan)
    params = dict(size=size, alpha=alpha, beta=beta, bias=bias)
    layout = lrn_scratch(x.shape, size, dst.dtype)
    garbage = np.full(scratch_bytes(layout), 0xFF, np.uint8)  # NaNs: nothing is kept
    ws = carve(garbage, layout) if use_ws else None
    expected = ref_lrn(x, size, alpha, beta, bias)
    for _ in range(2):
        assert lrn(x, dst, **params, ws=ws) is None
        np.testing.assert_allclose(dst, expected, **TOL)
    assert_guards(arena, np.nan)


def test_lrn_even_size_window_hand_computed():
    # size 2: window {c, c + 1}; x = [1, 2, 3] over channels, alpha / size = 0.5, beta 1, bias 1
    x = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1, 1)
    dst = np.empty_like(x)
    lrn(x, dst, size=2, alpha=1.0, beta=1.0, bias=1.0)
    expected = [1 / (1 + 0.5 * 5), 2 / (1 + 0.5 * 13), 3 / (1 + 0.5 * 9)]
    np.testing.assert_allclose(dst.ravel(), expected, **TOL)


def naive_layernorm(x, scale, bias, axis, epsilon):
    """Row by row in float64 with Python sums."""
    rows = int(np.prod(x.shape[:axis]))
    flat = x.reshape(rows, -1).astype(np.float64)
    s = np.broadcast_to(scale, x.shape[axis:]).reshape(-1)
    b = np.zeros_like(s) if bias is None else np.broadcast_to(bias, x.shape[axis:]).reshape(-1)
    out = np.empty_like(flat)
    for r in range(rows):
        row = [float(v) for v in flat[r]]
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        for i, v in enumerate(row):
            out[r, i] = (v - mean) / math.sqrt(var + epsilon) * float(s[i]) + float(b[i])
    return out.reshape(x.shape)


@pytest.mark.parametrize("shape, axis, scale_shape, with_bias", [
    ((2, 5, 8), 2, (8,), True),
    ((2, 5, 8), 1, (5, 8), True),
    ((3, 4, 4, 6), 3, (6,), False),
    ((3, 4, 4, 6), 2, (1, 6), True),  # a scale that broadcasts over the normalized axes
    ((7, 16), 0, (7, 16), True),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layernorm(shape, axis, scale_shape, with_bias, dtype):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x = (rng.standard_normal(shape) * 3 + 50).astype(dtype)  # a large mean: no cancellation
    scale = rng.standard_normal(scale_shape).astype(dtype)
    bias = rng.standard_normal(scale_shape).astype(dtype) if with_bias else None
    dst = np.full(shape, np.nan, dtype)
    ws = {"stat": np.full(layernorm_scratch(shape, axis, dtype)[0][1], np.nan, dtype)}
    layernorm(x, scale, bias, dst, axis=axis, epsilon=1e-5, ws=ws)
    want = naive_layernorm(x, scale, bias, axis, 1e-5)
    np.testing.assert_allclose(dst, want, rtol=1e-5 if dtype == np.float32 else 1e-10,
                                atol=1e-5 if dtype == np.float32 else 1e-10)


def test_layernorm_hand_computed():
    dst = np.empty((2, 2))
    layernorm(np.array([[1.0, 3.0], [5.0, 5.0]]), np.array([2.0, 1.0]), np.array([0.0, 10.0]),
              dst, axis=1, epsilon=0.0 + 1e-12)
    np.testing.assert_allclose(dst, [[-2, 11], [0, 10]], atol=1e-5)


# --- groupnorm --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 5), 3), ((1, 4, 7), 4), ((3, 8), 1)])
def test_groupnorm_matches_float64_statistics(shape, groups):
    rng = np.random.default_rng(groups)
    src = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    scale = rng.standard_normal(shape[1]).astype(np.float32)
    bias = rng.standard_normal(shape[1]).astype(np.float32)
    g = src.astype(np.float64).reshape(shape[0], groups, -1)
    want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-3))
    want = (want.reshape(shape[0], shape[1], -1) * scale[:, None] + bias[:, None]).reshape(shape)
    arena, dst = arena_view(shape)
    ws = carve(None, groupnorm_scratch(shape, groups, np.float32))
    groupnorm(src, scale, bias, dst, groups=groups, epsilon=1e-3, ws=ws)
    np.testing.assert_allclose(dst, want, rtol=1e-4, atol=1e-5)
    assert_guards(arena)
