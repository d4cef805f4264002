"""erf against math.erf, element by element: the error bounds the module states."""

import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels import carve, scratch_bytes
from lightnet.archs.cpu.kernels.special import erf, erf_scratch


def reference(x):
    return np.array([math.erf(float(v)) for v in x.reshape(-1)]).reshape(x.shape)


def run(x, dtype):
    """erf of x in dtype, through scratch carved from a garbage-filled buffer."""
    x = np.asarray(x, dtype)
    layout = erf_scratch(x.shape, dtype)
    buffer = np.full(scratch_bytes(layout) + 64, 0xAB, np.uint8)
    offset = -buffer.ctypes.data % 64
    dst = np.full(x.shape, np.nan, dtype)
    assert erf(x, dst, carve(buffer[offset:offset + scratch_bytes(layout)], layout)) is None
    return dst


def test_float64_within_4_ulp_everywhere():
    x = np.concatenate([np.linspace(-7, 7, 140001), [0.46875, -0.46875, 4.0, -4.0, 26.5, -30.0,
                                                      1e-300, 5e-324, 1e-8, 6.0, 5.9]])
    got, want = run(x, np.float64), reference(x)
    ulps = np.abs(got - want) / np.spacing(np.abs(want))
    assert ulps.max() <= 4
    assert np.abs(got - want).max() <= 2.3e-16


def test_float32_error_bounds():
    x = np.linspace(-7, 7, 140001, dtype=np.float32)
    got, want = run(x, np.float32).astype(np.float64), reference(x)
    assert np.abs(got - want).max() <= 4.3e-7
    small = (np.abs(x) < 0.5) & (np.abs(x) > 1e-30)
    assert (np.abs(got - want)[small] / np.abs(want[small])).max() <= 2.5e-7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    got = run([np.inf, -np.inf, np.nan, 0.0, -0.0, 40.0, -40.0], dtype)
    np.testing.assert_array_equal(got[[0, 1, 3, 4, 5, 6]], [1, -1, 0, 0, 1, -1])
    assert np.isnan(got[2])
    assert not np.signbit(got[3]) and np.signbit(got[4])  # erf(-0) is -0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_odd_and_shaped(dtype):
    x = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(dtype) * 2
    got = run(x, dtype)
    np.testing.assert_array_equal(run(-x, dtype), -got)
    np.testing.assert_allclose(got, reference(x), rtol=5e-7 if dtype == np.float32 else 1e-15,
                               atol=5e-7 if dtype == np.float32 else 0)


def test_without_scratch():
    x = np.linspace(-3, 3, 11)
    dst = np.empty_like(x)
    erf(x, dst)
    np.testing.assert_allclose(dst, reference(x), rtol=1e-15)
