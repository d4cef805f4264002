"""Matrix products: Gemm and MatMul (numpy semantics, batches unrolled)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node, Val

if TYPE_CHECKING:
    from ..converter import Converter

_MAX_BATCH = 256  # batched MatMul becomes this many 2-D matmuls at most


@handler("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(c: Converter, n: Node, *, alpha=1.0, beta=1.0, transA=0, transB=0,  # noqa: N803
         broadcast=0):
    # broadcast (before version 7) only allowed what numpy broadcasting of C does.
    a, b = c.val(n.input(0)), c.val(n.input(1))
    a.require_float("Gemm input")
    if a.rank != 2 or b.rank != 2:
        raise Unsupported("non 2-D operands")
    shape = c.out_shape(n)
    bias = c.val(n.input(2)) if n.has_input(2) and beta != 0 else None
    if bias is not None and bias.rank > 2:
        raise Unsupported(f"rank-{bias.rank} C")
    c.emit("matmul", {"src1": a, "src2": b, "bias": bias},
           {"transA": bool(transA), "transB": bool(transB), "alpha": alpha, "beta": beta},
           a.dtype, shape, out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("MatMul", 1, 9, 13)
def matmul(c: Converter, n: Node):
    """numpy matmul: 1-D operands gain a dim; [..., M, K] @ [K, N] is one 2-D matmul of
    the flattened rows; two stacks of matrices become one matmul per matrix, joined
    by a concat."""
    a, b = c.val(n.input(0)), c.val(n.input(1))
    a.require_float("MatMul input")
    shape = c.out_shape(n)
    if a.rank == 1:
        a = c.reshape(a, (1,) + a.shape)
    if b.rank == 1:
        b = c.reshape(b, b.shape + (1,))
    if b.rank == 2:
        m = math.prod(a.shape[:-1])
        a = c.reshape(a, (m, a.shape[-1]))
        out2d = (m, b.shape[1])
        if out2d == tuple(shape):
            c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
        else:
            y = c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, out2d, hint=n.outputs[0])
            c.reshape(y, shape, out=n.outputs[0])
        return
    from lightnet.kernels import broadcast_shape

    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    count = math.prod(batch)
    if count > _MAX_BATCH:
        raise Unsupported(f"a batch of {count} matrices (at most {_MAX_BATCH})")
    (mm, k), nn = a.shape[-2:], b.shape[-1]

    def matrices(x: Val):
        """The batch of `x` broadcast to `batch`, as a list of 2-D tensors."""
        xb = x.shape[:-2]
        full = (1,) * (len(batch) - len(xb)) + xb
        flat = c.reshape(x, (math.prod(xb),) + x.shape[-2:])
        result = []
        for index in np.ndindex(*batch):
            src = np.ravel_multi_index(tuple(i if d != 1 else 0 for i, d in zip(index, full)),
                                       full) if full else 0
            part = c.slice(flat, 0, int(src), 1, f"{n.outputs[0]}_mat")
            result.append(c.reshape(part, x.shape[-2:]))
        return result

    products = [c.emit("matmul", {"src1": x, "src2": y}, {}, a.dtype, (mm, nn),
                       hint=f"{n.outputs[0]}_product")
                for x, y in zip(matrices(a), matrices(b))]
    if len(products) == 1:
        c.reshape(products[0], shape, out=n.outputs[0])
        return
    y = c.emit("concat", {"src": products}, {"axis": 0}, a.dtype, (count * mm, nn),
               hint=f"{n.outputs[0]}_concat")
    c.reshape(y, shape, out=n.outputs[0])
