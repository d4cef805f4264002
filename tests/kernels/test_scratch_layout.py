"""kernels.scratch: layouts carved out of one byte buffer."""

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve, scratch_bytes


def test_arrays_are_aligned_and_do_not_overlap():
    layout = (("a", (3, 5), np.float32), ("b", (7,), np.float64), ("c", (2, 2), np.int8))
    assert scratch_bytes(layout) == 64 + 64 + 64  # 60, 56 and 4 bytes, each 64-aligned
    raw = np.zeros(scratch_bytes(layout) + 64, np.uint8)
    start = -raw.ctypes.data % 64  # as the arena gives it: 64-byte aligned
    buffer = raw[start:start + scratch_bytes(layout)]
    arrays = carve(buffer, layout)
    assert [arrays[k].shape for k in "abc"] == [(3, 5), (7,), (2, 2)]
    assert all(arrays[k].ctypes.data % 64 == 0 for k in "abc")
    arrays["a"][...] = 1
    arrays["b"][...] = 2
    arrays["c"][...] = 3
    assert (arrays["a"] == 1).all() and (arrays["b"] == 2).all() and (arrays["c"] == 3).all()
    assert all(np.shares_memory(arrays[k], buffer) for k in "abc")


def test_without_a_buffer_arrays_are_new():
    arrays = carve(None, (("x", (4,), np.float32),))
    assert arrays["x"].shape == (4,) and arrays["x"].dtype == np.float32
    assert scratch_bytes(()) == 0 and carve(None, ()) == {}
