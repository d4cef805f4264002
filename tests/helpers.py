"""Helpers the test files share, each written once here instead of once per file.

    from tests.helpers import arena_view, assert_guards, rand

Builders of IR documents live in tests/irbuild.py, the op descriptions' examples
in tests/opexamples.py, numpy references of the ops in tests/references.py.
"""

from __future__ import annotations

import numpy as np

# Kernel outputs ---------------------------------------------------------------------------

GUARD = 8  # cells on each side of the view arena_view hands out
SENTINEL = -777  # what arena_view fills its arena with unless told otherwise


def arena_view(shape, dtype=np.float32, fill=SENTINEL):
    """(arena, view): a C-contiguous view in the middle of a bigger buffer filled with
    `fill`, the way the runtime hands a kernel its output. An element the kernel leaves
    unwritten still holds `fill`; a write past either end shows in assert_guards. The
    float tests that pass `fill=np.nan` also catch a kernel reading its output before
    writing it (a max that starts from what is there)."""
    size = int(np.prod(shape))
    arena = np.full(size + 2 * GUARD, fill, dtype)
    return arena, arena[GUARD:GUARD + size].reshape(shape)


def assert_guards(arena, fill=SENTINEL):
    """The cells around the view of `arena` (from arena_view) still hold `fill`: the
    kernel wrote nothing outside its output."""
    want = np.full(GUARD, fill, arena.dtype)
    for side, cells in (("before", arena[:GUARD]), ("after", arena[-GUARD:])):
        assert np.array_equal(cells, want, equal_nan=True), f"written {side} the view: {cells}"


def rand(rng, *shape, dtype=np.float32):
    """Standard-normal values of `shape` from `rng`, as `dtype` (the kernels' float32)."""
    return rng.standard_normal(shape).astype(dtype)
