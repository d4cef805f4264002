"""What optimizer rule conditions see of an op.

`when` expressions in descriptions/optimizers read `op.params.group`,
`op.ins.src.shape`, `op.outs.dst.static`, `op.consumers("dst")` and
`op.producer("src")`; the generated optimizer functions build an OpView, and
make the replacement ops with a Builder.
"""

from __future__ import annotations

from types import SimpleNamespace

from lightnet.arch import get_proto
from lightnet.op import Op, unique_name
from lightnet.param import Param


class OpView:
    def __init__(self, ctx, op):
        self.name = op.name
        self.optype = op.optype
        self.params = SimpleNamespace(**op.values)
        self.ins = SimpleNamespace(**{a: ctx.tensors[n] for a, n in op.tensors_in.items()})
        self.outs = SimpleNamespace(**{a: ctx.tensors[n] for a, n in op.tensors_out.items()})
        self._ctx = ctx
        self._op = op

    def given(self, arg: str) -> bool:
        """Whether input `arg` (an optional one) is given."""
        return arg in self._op.tensors_in

    def out_names(self) -> list[str]:
        """The names of every output."""
        return list(self._op.tensors_out.values())

    def readers(self, tensor) -> int:
        """How many ops read `tensor` (an entry or a name)."""
        return self._ctx.dfg.num_consumers(_name(tensor))

    def consumers(self, arg: str) -> int:
        """How many ops read output `arg`."""
        return self._ctx.dfg.num_consumers(self._op.tensors_out[arg])

    def producer(self, arg: str) -> str | None:
        """The optype of the op that produced input `arg`."""
        prev = self._ctx.dfg.prev(self._op, self._op.tensors_in[arg])
        return None if prev is None else prev.optype


class Builder:
    """Makes the ops a rule puts in place, with op and tensor names unique in
    the context. An op built `like` another starts from its name, tensors and
    params; the first op built like X keeps X's name, later ones get new names."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.op_names: set[str] = set()
        self.tensor_names: set[str] = set()

    def tensor(self, prefix: str) -> str:
        taken = self.ctx.tensors.keys() | self.ctx.dfg.producer.keys() | self.tensor_names
        name = unique_name(prefix, taken)
        self.tensor_names.add(name)
        return name

    def op(self, optype=None, like=None, name=None, ins=None, outs=None, params=None,
           rename=None) -> Op:
        base = like._op if isinstance(like, OpView) else like
        proto = base.proto if optype is None else get_proto(optype)
        optype = proto.optype
        tensors_in = dict(base.tensors_in) if base else {}
        tensors_out = dict(base.tensors_out) if base else {}
        op_params = dict(base.params) if base else {}
        for arg, tensor in (ins or {}).items():
            _assign(tensors_in, arg, tensor)
        for arg, tensor in (outs or {}).items():
            _assign(tensors_out, arg, tensor)
        for arg, value in (params or {}).items():
            op_params[arg] = Param.from_value(arg, value)
        renames = {_name(old): _name(new) for old, new in (rename or ())}
        for tensors in (tensors_in, tensors_out):
            for arg, tname in tensors.items():
                tensors[arg] = renames.get(tname, tname)
        if name is None:
            if base is not None and base.name not in self.op_names:
                name = base.name
            else:
                name = unique_name(optype, self.ctx.dfg.ops.keys() | self.op_names)
        self.op_names.add(name)
        return Op(proto, name, tensors_in, tensors_out, op_params)


def _name(tensor) -> str:
    return tensor if isinstance(tensor, str) else tensor.name


def _assign(tensors: dict, arg: str, tensor) -> None:
    """Set arg to a tensor (an entry or a name); None leaves it out."""
    if tensor is None:
        tensors.pop(arg, None)
    else:
        tensors[arg] = _name(tensor)
