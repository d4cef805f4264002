"""What optimizer rule conditions see of an op.

`when` expressions in descriptions/optimizers read `op.params.group`,
`op.ins.src.shape`, `op.outs.dst.static`, `op.consumers("dst")` and
`op.producer("src")`; the generated optimizer functions build an OpView.
"""

from __future__ import annotations

from types import SimpleNamespace


class OpView:
    def __init__(self, ctx, op):
        self.name = op.name
        self.optype = op.optype
        self.params = SimpleNamespace(**op.values)
        self.ins = SimpleNamespace(**{a: ctx.tensors[n] for a, n in op.tensors_in.items()})
        self.outs = SimpleNamespace(**{a: ctx.tensors[n] for a, n in op.tensors_out.items()})
        self._ctx = ctx
        self._op = op

    def consumers(self, arg: str) -> int:
        """How many ops read output `arg`."""
        return self._ctx.dfg.num_consumers(self._op.tensors_out[arg])

    def producer(self, arg: str) -> str | None:
        """The optype of the op that produced input `arg`."""
        prev = self._ctx.dfg.prev(self._op, self._op.tensors_in[arg])
        return None if prev is None else prev.optype
