"""Per-thread shared scratch buffers (lightnet.kernels.reuse)."""

import threading

import numpy as np

from lightnet.kernels import reuse


def test_scratch_shape_dtype_alignment():
    a = reuse.scratch("test_reuse_a", (3, 5), np.float32)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    assert a.ctypes.data % 64 == 0
    b = reuse.scratch("test_reuse_a", (2, 7), np.float64)
    assert b.shape == (2, 7) and b.dtype == np.float64 and b.ctypes.data % 64 == 0


def test_same_name_shares_memory_and_views_are_kept():
    a = reuse.scratch("test_reuse_b", (4, 4), np.float32)
    b = reuse.scratch("test_reuse_b", (16,), np.float32)
    assert np.shares_memory(a, b)
    assert reuse.scratch("test_reuse_b", (4, 4), np.float32) is a
    assert not np.shares_memory(a, reuse.scratch("test_reuse_other", (4, 4), np.float32))


def test_growing_replaces_the_buffer_and_its_views():
    small = reuse.scratch("test_reuse_c", (8,), np.float32)
    big = reuse.scratch("test_reuse_c", (1 << 16,), np.float32)
    assert big.size == 1 << 16
    again = reuse.scratch("test_reuse_c", (8,), np.float32)
    assert again is not small and np.shares_memory(again, big)


def test_reserve_sizes_ahead():
    reuse.reserve("test_reuse_d", 4000)
    before = reuse.held_bytes()
    reuse.scratch("test_reuse_d", (1000,), np.float32)  # fits: nothing allocated
    assert reuse.held_bytes() == before


def test_threads_get_their_own_buffers():
    mine = reuse.scratch("test_reuse_e", (10,), np.float32)
    theirs = []
    t = threading.Thread(target=lambda: theirs.append(reuse.scratch("test_reuse_e", (10,),
                                                                     np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(mine, theirs[0])
