"""Fused activations (kernels.fused.activate) against a direct formula."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.fused import activate, activate_scratch, activate_workspace
from lightnet.archs.cpu.kernels.scratch import scratch_bytes


@pytest.mark.parametrize("size", [1, 100, 16384, 16385, 50000])
@pytest.mark.parametrize("negslope", [0.1, 0.0, 1.0, 2.5, -0.5])
def test_lrelu_in_blocks_of_scratch(size, negslope):
    """lrelu goes through a block of scratch (at most 16384 elements), in as
    many blocks as it takes; the scratch starts as garbage (NaN)."""
    rng = np.random.default_rng(size)
    x = rng.standard_normal((2, size)).astype(np.float32)
    expected = np.where(x >= 0, x, x * np.float32(negslope))
    layout = activate_scratch(x.shape, "lrelu", x.dtype)
    assert layout[0][1] == (min(x.size, 16384),)
    buffer = np.full(scratch_bytes(layout), 0xFF, np.uint8)
    dst = x.copy()
    activate(dst, "lrelu", negslope=negslope,
             ws=activate_workspace(x.shape, "lrelu", x.dtype, buffer))
    np.testing.assert_array_equal(dst, expected)
    dst = x.copy()
    activate(dst, "lrelu", negslope=negslope)  # no ws: its own
    np.testing.assert_array_equal(dst, expected)


@pytest.mark.parametrize("activation", ["none", "relu", "sigmoid", "tanh", "clip"])
def test_only_lrelu_takes_scratch(activation):
    assert activate_scratch((4, 5), activation, np.float32) == ()
    assert activate_workspace((4, 5), activation, np.float32) is None
