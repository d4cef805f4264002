"""Einsum as one batched matrix product, planned once from the equation and shapes.

Every index of a two-operand contraction is one of four kinds: in both operands
and the output (a batch index), in both operands only (contracted, K), in the
first operand and the output (M), in the second and the output (N). Such an
einsum is a numpy matmul of the first operand laid out as [batch..., M, K]
with the second as [batch..., K, N], giving [batch..., M, N], which is the
output up to a transpose. The plan picks the layouts that need no copy when
there are some (a transposed operand is given to BLAS as such; an output in
[batch, N, M] order swaps the operands) and a transpose into scratch
otherwise. A single operand whose output only reorders its indices is a
transpose.

Refused, with the reason: more than two operands, an index repeated within
one operand (a diagonal), an index summed in one operand only (it appears in
neither the other operand nor the output), a single operand that is summed,
and M, N or K indices whose sizes differ between the operands (only batch
indices broadcast, a size 1 against any).
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["EinsumPlan", "einsum", "einsum_matmul", "einsum_plan", "einsum_scratch",
           "einsum_shape"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class _Operand:
    """How one operand becomes a matmul operand: transposed by `perm` (None: no
    copy needed) and seen with `shape`; `swap` when that shape is the matrix
    transposed, which BLAS takes as is."""

    perm: tuple | None
    shape: tuple
    swap: bool


@dataclass(frozen=True)
class EinsumPlan:
    """What `einsum` does: the operands' layouts, whether they trade places, the
    product's shape, and the transpose from the product (seen as `expanded`) to
    the output. A transpose of one operand has `second` None, and its
    `expanded` is the operand's shape."""

    first: _Operand
    second: _Operand | None
    swapped: bool
    product: tuple
    expanded: tuple
    out_perm: tuple | None

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the product (0 for a transpose)."""
        if self.second is None:
            return 0
        k = self.first.shape[-2] if self.first.swap else self.first.shape[-1]
        return int(np.prod(self.product, dtype=np.int64)) * k

    def scratch(self, dtype) -> tuple:
        """Scratch layout (see kernels.scratch): the operands that need a
        transposed copy, and the product when the output is its transpose."""
        dtype = np.dtype(dtype)
        layout = []
        for name, operand in (("a", self.first), ("b", self.second)):
            if operand is not None and operand.perm is not None:
                layout.append((name, operand.shape, dtype))
        if self.second is not None and self.out_perm is not None:
            layout.append(("product", self.product, dtype))
        return tuple(layout)


def _terms(equation: str, ndims) -> tuple[list[list[str]], list[str]]:
    """The labels of each operand's dims and of the output's; an ellipsis
    becomes labels '.0', '.1', ... aligned at the right across operands."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"equation {equation!r} has {len(inputs)} operand(s), "
                         f"but {len(ndims)} are given")
    bad = sorted(set(eq) - set(_LETTERS) - set(",->."))
    if bad or any(t.replace("...", "").count(".") for t in inputs + [rhs]):
        raise ValueError(f"equation {equation!r}: indices are letters, with at most one "
                         "'...' per operand")
    width = 0
    labels = []
    for term, ndim in zip(inputs, ndims):
        head, ell, tail = term.partition("...")
        if "..." in tail:
            raise ValueError(f"equation {equation!r}: '{term}' has two ellipses")
        n = ndim - len(head) - len(tail)
        if n < 0 or (n and not ell):
            raise ValueError(f"equation {equation!r}: '{term}' names {len(head) + len(tail)} "
                             f"dimensions but its operand has {ndim}")
        width = max(width, n)
        labels.append((list(head), n, list(tail)))
    operands = [h + [f".{width - n + i}" for i in range(n)] + t for h, n, t in labels]
    dots = [f".{i}" for i in range(width)]
    if arrow:
        head, ell, tail = rhs.partition("...")
        out = list(head) + (dots if ell else []) + list(tail)
        if dots and not ell and any(d in dots for op in operands for d in op):
            raise ValueError(f"equation {equation!r}: the output drops the '...' dimensions "
                             "(a sum over them is not a matrix product)")
    else:
        counts = {}
        for op in operands:
            for label in op:
                counts[label] = counts.get(label, 0) + 1
        out = dots + sorted(x for x, c in counts.items() if c == 1 and not x.startswith("."))
    return operands, out


def _name(label: str) -> str:
    return "'...'" if label.startswith(".") else f"'{label}'"


def _layout(labels, sizes, groups, allow_swap=True) -> _Operand:
    """The operand with dims `labels` as [batch..., rows, cols] for groups
    (batch, rows, cols) of labels: no copy if its dims are already in either
    [batch, rows, cols] or [batch, cols, rows] order."""
    batch, rows, cols = groups
    size = dict(zip(labels, sizes))
    prod = lambda ls: int(np.prod([size[x] for x in ls], dtype=np.int64))  # noqa: E731
    batch_shape = tuple(size[x] for x in batch)
    straight = batch + rows + cols
    if straight == labels:
        return _Operand(None, batch_shape + (prod(rows), prod(cols)), False)
    if allow_swap and batch + cols + rows == labels:
        return _Operand(None, batch_shape + (prod(cols), prod(rows)), True)
    perm = tuple(labels.index(x) for x in straight)
    return _Operand(perm, batch_shape + (prod(rows), prod(cols)), False)


def einsum_plan(equation: str, *shapes) -> EinsumPlan:
    """Plan `einsum` of operands with `shapes` (one or two). ValueError saying
    what the equation asks that is not a batched matrix product."""
    shapes = [tuple(int(d) for d in s) for s in shapes]
    if not 1 <= len(shapes) <= 2:
        raise ValueError(f"einsum of {len(shapes)} operands: only one or two are supported")
    operands, out = _terms(equation, [len(s) for s in shapes])
    for term in operands + [out]:
        repeated = sorted({x for x in term if term.count(x) > 1})
        if repeated:
            where = "the output" if term is out else "an operand"
            raise ValueError(f"equation {equation!r}: index {_name(repeated[0])} appears twice "
                             f"in {where} (a diagonal is not a matrix product)")
    seen = set().union(*operands)
    missing = [x for x in out if x not in seen]
    if missing:
        raise ValueError(f"equation {equation!r}: output index {_name(missing[0])} is in no "
                         "operand")
    if len(operands) == 1:
        (labels,), (shape,) = operands, shapes
        if sorted(labels) != sorted(out):
            summed = [x for x in labels if x not in out]
            raise ValueError(f"equation {equation!r}: one operand summed over "
                             f"{_name(summed[0])} (only a transpose of one operand is "
                             "supported)")
        perm = tuple(labels.index(x) for x in out)
        out_perm = None if perm == tuple(range(len(perm))) else perm
        return EinsumPlan(_Operand(None, shape, False), None, False, shape, shape, out_perm)
    (a, b), (sa, sb) = operands, shapes
    size_a, size_b = dict(zip(a, sa)), dict(zip(b, sb))
    for x in a + b:
        if (x in a) != (x in b) and x not in out:
            raise ValueError(f"equation {equation!r}: index {_name(x)} is summed in one "
                             "operand only (not a matrix product)")
    batch = [x for x in out if x in a and x in b]
    contracted = [x for x in a if x in b and x not in out]
    rows = [x for x in out if x in a and x not in b]
    cols = [x for x in out if x in b and x not in a]
    for x in contracted + rows + cols:
        if x in size_a and x in size_b and size_a[x] != size_b[x]:
            raise ValueError(f"equation {equation!r}: index {_name(x)} has size {size_a[x]} "
                             f"in one operand and {size_b[x]} in the other")
    for x in batch:
        if 1 not in (size_a[x], size_b[x]) and size_a[x] != size_b[x]:
            raise ValueError(f"equation {equation!r}: index {_name(x)} has sizes {size_a[x]} "
                             f"and {size_b[x]}, which do not broadcast")
    # An output ordered [batch, N, M] is the product of the operands swapped.
    swapped = out != batch + rows + cols and out == batch + cols + rows
    if swapped:
        (a, sa, size_a), (b, sb, size_b) = (b, sb, size_b), (a, sa, size_a)
        rows, cols = cols, rows
    first = _layout(a, sa, (batch, rows, contracted))
    second = _layout(b, sb, (batch, contracted, cols))
    batch_sizes = tuple(max(size_a[x], size_b[x]) for x in batch)
    product = batch_sizes + (first.shape[-1] if first.swap else first.shape[-2],
                             second.shape[-2] if second.swap else second.shape[-1])
    expanded_labels = batch + rows + cols
    expanded = batch_sizes + tuple(size_a[x] for x in rows) + tuple(size_b[x] for x in cols)
    perm = tuple(expanded_labels.index(x) for x in out)
    out_perm = None if perm == tuple(range(len(perm))) else perm
    return EinsumPlan(first, second, swapped, product, expanded, out_perm)


def einsum_matmul(equation: str, shape1, shape2) -> tuple[bool, bool, bool] | None:
    """(swapped, transA, transB) where einsum `equation` of two operands of these shapes
    is one matrix product of them as they are, each [batch..., rows, cols] or its last
    two axes transposed (attention's 'bhid,bhjd->bhij'), the operands swapped when the
    output is the product's transpose; None where a copy, a reshape or a transpose of the
    output is needed, or the equation is no product."""
    try:
        plan = einsum_plan(equation, shape1, shape2)
    except ValueError:
        return None
    if plan.second is None or plan.out_perm is not None or plan.product != plan.expanded:
        return None
    a, b = (shape2, shape1) if plan.swapped else (shape1, shape2)
    first, second = plan.first, plan.second
    if first.perm is not None or second.perm is not None:
        return None
    if tuple(a) != first.shape or tuple(b) != second.shape:
        return None
    return plan.swapped, first.swap, second.swap


def einsum_scratch(plan: EinsumPlan, dtype) -> tuple:
    """Scratch layout (see kernels.scratch) of `einsum` with `plan`."""
    return plan.scratch(dtype)


def einsum_shape(plan: EinsumPlan) -> tuple:
    """The output shape of `plan` (the expanded product, transposed; [1] for a
    scalar, as a tensor has a dimension)."""
    if plan.out_perm is None:
        return plan.expanded or (1,)
    return tuple(plan.expanded[p] for p in plan.out_perm)


def _matrix(src, operand: _Operand, buffer):
    if operand.perm is None:
        m = src.reshape(operand.shape)
    else:
        m = buffer.reshape(operand.shape)
        np.copyto(buffer.reshape([src.shape[p] for p in operand.perm]),
                  src.transpose(operand.perm))
    return np.swapaxes(m, -1, -2) if operand.swap else m


def einsum(src1, src2, dst, *, plan: EinsumPlan, ws: dict | None = None) -> None:
    """dst = numpy.einsum(equation, src1, src2) for the equation `plan` was made
    from (src2 None for one operand). `ws` is carve(scratch, plan.scratch(dtype))."""
    if ws is None:
        ws = {name: np.empty(shape, dtype) for name, shape, dtype in plan.scratch(dst.dtype)}
    if plan.second is None:
        np.copyto(dst, src1 if plan.out_perm is None else src1.transpose(plan.out_perm))
        return
    if plan.swapped:
        src1, src2 = src2, src1
    a = _matrix(src1, plan.first, ws.get("a"))
    b = _matrix(src2, plan.second, ws.get("b"))
    if plan.out_perm is None:
        np.matmul(a, b, out=dst.reshape(plan.product))
        return
    product = ws["product"]
    np.matmul(a, b, out=product)
    np.copyto(dst, product.reshape(plan.expanded).transpose(plan.out_perm))
