"""The indexing kernels against numpy's own indexing and hand-computed values."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.indexing import strided_slice
from tests.helpers import arena_view, assert_guards


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("start,stop,step", [(0, None, 2), (1, 6, 3), (5, None, -1),
                                             (4, 0, -2), (6, None, -7), (2, 3, 5)])
def test_strided_slice_matches_numpy(axis, start, stop, step):
    src = np.arange(7 * 7 * 7, dtype=np.float32).reshape(7, 7, 7)
    index = (slice(None),) * axis + (slice(start, stop, step),)
    want = src[index]
    arena, dst = arena_view(want.shape)
    strided_slice(src, dst, axis=axis, start=start, step=step, len=want.shape[axis])
    np.testing.assert_array_equal(dst, want)
    assert_guards(arena)


def test_strided_slice_backwards_to_the_first_entry():
    dst = np.empty(3, np.int32)
    strided_slice(np.array([1, 2, 3], np.int32), dst, axis=0, start=2, step=-1, len=3)
    assert dst.tolist() == [3, 2, 1]
