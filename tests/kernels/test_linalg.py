"""matmul (Gemm) and dot_product against naive loop references."""

import itertools

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.linalg import dot_product, matmul
from lightnet.ir.shapes import matmul_shape
from tests.helpers import arena_view, assert_guards, rand

TOL = dict(rtol=1e-5, atol=1e-5)


def ref_gemm(a, b, c, trans_a, trans_b, alpha, beta):
    """Triple loop over explicitly indexed, possibly transposed operands."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    out = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for p in range(k):
                av = a[p, i] if trans_a else a[i, p]
                bv = b[j, p] if trans_b else b[p, j]
                acc += float(av) * float(bv)
            out[i, j] = alpha * acc
            if c is not None:
                out[i, j] += beta * float(np.broadcast_to(c, (m, n))[i, j])
    return out


BIAS_SHAPES = [None, (), (1,), (5,), (1, 5), (4, 1), (4, 5)]


@pytest.mark.parametrize("bias_shape", BIAS_SHAPES)
@pytest.mark.parametrize("trans_a, trans_b", list(itertools.product([False, True], repeat=2)))
def test_matmul(trans_a, trans_b, bias_shape):
    rng = np.random.default_rng(0)
    m, k, n = 4, 3, 5
    a = rand(rng, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *((n, k) if trans_b else (k, n)))
    c = None if bias_shape is None else rand(rng, *bias_shape)
    arena, dst = arena_view((m, n), fill=np.nan)
    for alpha, beta in [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0)]:
        assert matmul(a, b, c, dst, transA=trans_a, transB=trans_b, alpha=alpha, beta=beta) is None
        np.testing.assert_allclose(dst, ref_gemm(a, b, c, trans_a, trans_b, alpha, beta), **TOL)
    assert_guards(arena, np.nan)


def test_matmul_defaults_and_hand_computed():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5, 6], [7, 8]], np.float32)
    dst = np.empty((2, 2), np.float32)
    matmul(a, b, None, dst)
    np.testing.assert_array_equal(dst, [[19, 22], [43, 50]])
    matmul(a, b, np.array([1, -1], np.float32), dst, transA=True, transB=True, alpha=2.0, beta=3.0)
    # A^T B^T = [[23, 31], [34, 46]]
    np.testing.assert_array_equal(dst, [[49, 59], [71, 89]])


def test_matmul_noncontiguous_and_float64_operands():
    rng = np.random.default_rng(1)
    a = rand(rng, 6, 8)[::2, ::2]  # [3, 4] strided view
    b = rng.standard_normal((4, 2))  # float64, computed in dst's float32
    dst = np.empty((3, 2), np.float32)
    matmul(a, b, None, dst, transA=False, transB=False, alpha=1.0, beta=1.0)
    np.testing.assert_allclose(dst, ref_gemm(a, b, None, False, False, 1.0, 1.0), **TOL)


def test_matmul_batched():
    rng = np.random.default_rng(2)
    a = rand(rng, 2, 3, 4)
    b = rand(rng, 5, 4)  # broadcast over the batch, used transposed
    c = rand(rng, 5)
    dst = np.empty((2, 3, 5), np.float32)
    matmul(a, b, c, dst, transA=False, transB=True, alpha=1.0, beta=1.0)
    for i in range(2):
        np.testing.assert_allclose(dst[i], ref_gemm(a[i], b, c, False, True, 1.0, 1.0), **TOL)


def test_dot_product():
    rng = np.random.default_rng(3)
    x = rand(rng, 2, 3, 4)
    y = rand(rng, 2, 3, 4)
    expected = sum(float(x[idx]) * float(y[idx]) for idx in np.ndindex(*x.shape))
    arena, dst = arena_view((1,), fill=np.nan)
    assert dot_product(x, y, dst) is None
    np.testing.assert_allclose(dst, [expected], **TOL)
    assert_guards(arena, np.nan)
    # non-contiguous operands and a hand-computed value
    dot_product(np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::2], np.ones((2, 2), np.float32), dst)
    np.testing.assert_array_equal(dst, [0 + 2 + 4 + 6])


def test_dot_product_shape_mismatch():
    with pytest.raises(ValueError):
        dot_product(np.ones(3, np.float32), np.ones((3, 1), np.float32), np.empty(1, np.float32))


@pytest.mark.parametrize("shape_a, shape_b, trans_a, trans_b", [
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 1, 3, 4), (5, 4, 2), False, False),  # batch dims broadcast
    ((6, 3, 4), (4, 5), False, False),  # a shared B
    ((3, 4), (2, 4, 5), False, False),  # a shared A
    ((2, 4, 3), (2, 5, 4), True, True),
])
def test_batched_matmul_broadcasts_like_numpy(shape_a, shape_b, trans_a, trans_b):
    rng = np.random.default_rng(len(shape_a) * 7 + len(shape_b))
    a, b = rand(rng, *shape_a), rand(rng, *shape_b)
    shape = matmul_shape(shape_a, shape_b, transA=trans_a, transB=trans_b)
    arena, dst = arena_view(shape, fill=np.nan)
    matmul(a, b, None, dst, transA=trans_a, transB=trans_b)
    batch = shape[:-2]
    full_a = np.broadcast_to(a, batch + a.shape[-2:])
    full_b = np.broadcast_to(b, batch + b.shape[-2:])
    for index in itertools.product(*map(range, batch)):
        want = ref_gemm(full_a[index], full_b[index], None, trans_a, trans_b, 1.0, 1.0)
        np.testing.assert_allclose(dst[index], want, **TOL)
    assert_guards(arena, np.nan)

