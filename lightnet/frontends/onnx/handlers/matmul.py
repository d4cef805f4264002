"""Matrix products: Gemm, MatMul (numpy semantics, batched) and Einsum."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lightnet.ir.shapes import matmul_shape

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter

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
    the flattened rows; stacks of matrices are one batched matmul."""

    a, b = c.val(n.input(0)), c.val(n.input(1))
    a.require_float("MatMul input")
    shape = c.out_shape(n)
    if a.rank == 1:
        a = c.reshape(a, (1,) + a.shape)
    if b.rank == 1:
        b = c.reshape(b, b.shape + (1,))
    if b.rank == 2:
        a = c.reshape(a, (math.prod(a.shape[:-1]), a.shape[-1]))
    product = matmul_shape(a.shape, b.shape)
    if product == tuple(shape):
        c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, shape, out=n.outputs[0],
               hint=n.name or n.outputs[0])
        return
    y = c.emit("matmul", {"src1": a, "src2": b}, {}, a.dtype, product, hint=n.outputs[0])
    c.reshape(y, shape, out=n.outputs[0])


@handler("Einsum", 12, 28)  # 28: bfloat16 too (LightNet has none)
def einsum(c: Converter, n: Node, *, equation):
    """Einsums that are batched matrix products or transposes (kernels.einsum_plan): a
    product becomes the transposes and reshapes that lay its operands out as [batch...,
    M, K] and [batch..., K, N] (or their transposes, which the product takes as they
    are), one matmul, and the reshape and transpose of its result into the output, so
    that every target runs it as its other products (a weight read as a linear layer's,
    the transposes of attention heads read in place); a transpose is a transpose."""
    from lightnet.archs.cpu.kernels import einsum_plan

    xs = [c.val(x) for x in n.inputs]
    for x in xs:
        x.require_float("Einsum operand")
    try:
        plan = einsum_plan(equation, *[x.shape for x in xs])
    except ValueError as e:
        raise Unsupported(str(e)) from None
    shape = c.out_shape(n)
    if plan.second is None and plan.out_perm is None:  # the operand as it is
        c.reshape_output(n, xs[0], shape)
        return
    if plan.second is None:
        c.emit("transpose", {"src": xs[0]}, {"axes": list(plan.out_perm)}, xs[0].dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])
        return
    a, b = reversed(xs) if plan.swapped else xs
    a, b = _matrices(c, a, plan.first), _matrices(c, b, plan.second)
    product = c.emit("matmul", {"src1": a, "src2": b},
                     {"transA": plan.first.swap, "transB": plan.second.swap}, a.dtype,
                     plan.product, hint=n.outputs[0])
    if plan.out_perm is None:
        c.reshape_output(n, product, shape)
        return
    expanded = c.reshape(product, plan.expanded)
    c.emit("transpose", {"src": expanded}, {"axes": list(plan.out_perm)}, a.dtype, shape,
           out=n.outputs[0], hint=n.name or n.outputs[0])


def _matrices(c: Converter, x, operand):
    """Einsum operand `x` laid out as the product reads it (kernels.einsum_plan)."""
    if operand.perm is not None:
        x = c.emit("transpose", {"src": x}, {"axes": list(operand.perm)}, x.dtype,
                   tuple(x.shape[p] for p in operand.perm), hint=f"{x.name}_transpose")
    return c.reshape(x, operand.shape)
