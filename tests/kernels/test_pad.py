"""pad against a naive index-mapping reference."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.pad import pad
from lightnet.ir.shapes import pad_output_shape
from tests.helpers import arena_view, assert_guards
from tests.references import ref_pad


CASES = [
    ((3, 4), [1, 2, 2, 1]),
    ((2, 3, 4), [0, 1, 2, 1, 2, 0]),
    ((1, 2, 4, 5), [0, 0, 3, 1, 0, 0, 2, 4]),  # NCHW spatial padding
    ((5,), [4, 3]),
    ((3, 3), [0, 0, 0, 0]),
    ((4, 4), [2, 0, 0, 2]),  # one side per axis
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape, pads", CASES)
def test_pad(shape, pads, mode):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_shape = pad_output_shape(shape, pads)
    arena, dst = arena_view(out_shape, fill=np.nan)
    assert pad(x, dst, pads=pads, mode=mode, value=2.5) is None
    np.testing.assert_allclose(dst, ref_pad(x, pads, mode, 2.5), rtol=1e-5, atol=1e-5)
    assert_guards(arena, np.nan)


def test_pad_hand_computed():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    dst = np.empty((2, 7), np.float32)
    pad(x, dst, pads=[0, 2, 0, 2], mode="reflect")
    np.testing.assert_array_equal(dst, [[3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4]])
    pad(x, dst, pads=[0, 2, 0, 2], mode="edge")
    np.testing.assert_array_equal(dst, [[1, 1, 1, 2, 3, 3, 3], [4, 4, 4, 5, 6, 6, 6]])
    pad(x, dst, pads=[0, 2, 0, 2], mode="constant")
    np.testing.assert_array_equal(dst, [[0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0]])
    dst = np.empty((4, 3), np.float32)
    pad(x, dst, pads=[1, 0, 1, 0], mode="constant", value=-1.0)
    np.testing.assert_array_equal(dst, [[-1, -1, -1], [1, 2, 3], [4, 5, 6], [-1, -1, -1]])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_negative_crops(mode):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    pads = [-1, 2, 1, -2]
    dst = np.empty(pad_output_shape(x.shape, pads), np.float32)
    pad(x, dst, pads=pads, mode=mode)
    np.testing.assert_array_equal(dst, ref_pad(x[1:, :3], [0, 2, 1, 0], mode, 0.0))


def test_pad_noncontiguous_source_and_int_dtype():
    x = np.arange(24, dtype=np.int64).reshape(4, 6)[::2, 1::2]  # [[1, 3, 5], [13, 15, 17]]
    dst = np.empty((4, 5), np.int64)
    pad(x, dst, pads=[1, 1, 1, 1], mode="edge")
    np.testing.assert_array_equal(dst, ref_pad(x, [1, 1, 1, 1], "edge", 0))


def test_pad_rejects_bad_input():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError):
        pad(x, np.empty((2, 7), np.float32), pads=[0, 3, 0, 1], mode="reflect")  # 3 > 3 - 1
    with pytest.raises(ValueError):
        pad(x, np.empty((2, 3), np.float32), pads=[0, 0, 0, 0], mode="mirror")
