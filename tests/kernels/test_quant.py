"""The cpu quantized matrix product sums exactly: in float32 while its sums stay below
2^24 (K <= 258 for 8-bit values less their zero points), in float64 beyond; B a prepared
weight or computed integers with their zero point. Against numpy's int64 matmul."""

import numpy as np
import pytest

from lightnet.archs.cpu import kernels


@pytest.mark.parametrize("depth", [7, 258, 259, 600])
@pytest.mark.parametrize("computed", [True, False], ids=["computed B", "weight B"])
def test_qmatmul_sums_exactly(depth, computed):
    rng = np.random.default_rng(depth)
    assert kernels.qmatmul_dtype(depth) == (np.float32 if depth <= 258 else np.float64)
    a_zero, b_zero = np.array([255], np.uint8), np.array([-128], np.int8)
    # The extreme products first: (0 - 255) * (127 + 128) = -65025 in every term.
    a = np.zeros((2, 3, depth), np.uint8)
    b = np.full((2, depth, 4), 127, np.int8)
    a[1] = rng.integers(0, 256, (3, depth))
    b[1] = rng.integers(-128, 128, (depth, 4))
    want = np.matmul(a.astype(np.int64) - 255, b.astype(np.int64) + 128)
    assert want[0].min() == -65025 * depth
    dst = np.zeros((2, 3, 4), np.int32)
    if computed:
        kernels.qmatmul(a, a_zero, b, None, dst, multiplier=None, dst_zero=None,
                        src2_zero=b_zero)
    else:
        weight = kernels.qweight(b, b_zero, axis=2, dtype=kernels.qmatmul_dtype(depth))
        kernels.qmatmul(a, a_zero, weight, None, dst, multiplier=None, dst_zero=None)
    np.testing.assert_array_equal(dst, want)
