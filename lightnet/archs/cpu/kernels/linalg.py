"""Linear algebra kernels: general matrix multiply (ONNX Gemm, and batched like numpy
matmul) and tensor dot product."""

import numpy as np


__all__ = ["matmul", "dot_product"]


def matmul(src1, src2, bias, dst, *, transA=False, transB=False, alpha=1.0, beta=1.0) -> None:
    """dst = alpha * op(A) @ op(B) + beta * bias (ONNX Gemm), A = src1, B = src2.

    op transposes the last two axes when transA / transB is set, so besides the 2-D
    Gemm case, stacked operands broadcast over leading axes like `np.matmul`.
    `bias` may be None and broadcasts numpy-style against dst. The product goes
    straight into dst through BLAS; scaling and bias are applied in place."""
    a = np.asarray(src1, dtype=dst.dtype)
    b = np.asarray(src2, dtype=dst.dtype)
    if transA:
        a = np.swapaxes(a, -1, -2)
    if transB:
        b = np.swapaxes(b, -1, -2)
    np.matmul(a, b, out=dst)
    if alpha != 1:
        np.multiply(dst, alpha, out=dst)
    if bias is not None and beta != 0:
        np.add(dst, bias if beta == 1 else np.multiply(bias, beta, dtype=dst.dtype), out=dst)


def dot_product(src1, src2, dst) -> None:
    """dst[0] = sum(src1 * src2) over all elements of two same-shape tensors
    (TensorLight tl_tensor_dot_product), accumulated in dst's dtype."""
    if src1.shape != src2.shape:
        raise ValueError(f"dot_product needs same shapes, got {src1.shape} and {src2.shape}")
    np.copyto(dst, np.vdot(np.asarray(src1, dtype=dst.dtype), np.asarray(src2, dtype=dst.dtype)))
