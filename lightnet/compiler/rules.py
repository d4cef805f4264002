"""Optimizer rules at run time: what their conditions see of an op, and how
they build ops.

`when` expressions in descriptions/optimizers read `op.params.group`,
`op.ins.src.shape`, `op.outs.dst.static`, `op.consumers("dst")`,
`op.producer("src")` and, when the model is compiled with its weights,
`op.value("weight")`; the generated optimizer functions build an OpView, and
make the replacement ops (and the weights a rule folds) with a Builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from lightnet.auto.registry import OP_PROTOS
from lightnet.errors import LightNetError
from lightnet.ir.op import Op, unique_name
from lightnet.ir.param import Param
from lightnet.ir.tensor import DType


@dataclass(frozen=True)
class Combiner:
    """A rule over a window of adjacent ops: `func(ctx, window)` returns the
    replacement ops, or None when the window does not match. A window entry
    `*` matches any op."""

    name: str
    window: tuple[str, ...]
    func: Callable


class _read_once:
    """functools.cached_property without the lock Python 3.11's takes on each first read
    (an OpView is made for every op an expander looks at)."""

    def __init__(self, make):
        self.make, self.name = make, make.__name__

    def __get__(self, view, owner=None):
        if view is None:
            return self
        value = view.__dict__[self.name] = self.make(view)
        return value


class OpView:
    """What a rule's condition sees of op `op`: `params`, `ins` and `outs` are made
    when first read (most windows fail on an optype)."""

    def __init__(self, ctx, op):
        self.name = op.name
        self.optype = op.proto.optype
        self._ctx = ctx
        self._op = op

    @_read_once
    def params(self) -> SimpleNamespace:
        return SimpleNamespace(**self._op.values)

    @_read_once
    def ins(self) -> SimpleNamespace:
        tensors = self._ctx.tensors
        return SimpleNamespace(**{a: tensors[n] for a, n in self._op.tensors_in.items()})

    @_read_once
    def outs(self) -> SimpleNamespace:
        tensors = self._ctx.tensors
        return SimpleNamespace(**{a: tensors[n] for a, n in self._op.tensors_out.items()})

    def as_optype(self, optype: str) -> Op:
        """The op as `optype`, its name, tensors and params unchanged: an expander's
        plain lowering (what a Builder's first op `like` it would be)."""
        return self._op.copy_as(OP_PROTOS[optype])

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

    def reader_optypes(self, arg: str) -> set[str]:
        """The optypes of the ops reading output `arg`."""
        dfg = self._ctx.dfg
        return {dfg.ops[r].optype for r in dfg.consumers.get(self._op.tensors_out[arg], ())}

    def other_arg(self, tensor) -> str:
        """Of a binary op's operands src1 and src2, the arg that does not read `tensor`
        (an entry or a name): "src2" when src1 reads it, else "src1"."""
        return "src2" if self._op.tensors_in["src1"] == _name(tensor) else "src1"

    def other(self, tensor):
        """The operand entry other_arg(tensor) names: a sum's other summand."""
        return getattr(self.ins, self.other_arg(tensor))

    def value(self, arg: str) -> np.ndarray | None:
        """The data of input `arg` at compile time: known for weights (and
        what ops compute from weights and params) when the model is compiled
        with its weights; None otherwise, and for an optional input not given."""
        name = self._op.tensors_in.get(arg)
        return None if name is None else self._ctx.value(name)

    def known(self, *args: str) -> bool:
        """Whether the data of every input in `args` is known at compile time."""
        return all(self.value(a) is not None for a in args)

    def may_overwrite(self, tensor) -> bool:
        """Whether this op may write into `tensor`'s memory (a residual added in place):
        memory the run makes (not an input's or a weight's), every reader of which but
        one (the op the rule removes) runs before this op. Every tensor held in that
        memory counts (a view of it, a residual added into it before: a chain of
        residual blocks), and none may be a model output (read by no op)."""
        name = _name(tensor)
        tensors = self._ctx.tensors
        root = tensors.root(name)
        if root.static or root.input or not root.creator:
            return False
        names = [n for n, e in tensors.items()
                 if e is root or (e.owner is not None and tensors.root(n) is root)]
        ops, dfg = self._ctx.ops, self._ctx.dfg
        if not all(dfg.consumers.get(n) for n in names):
            return False
        here = ops.index(self._op)
        readers = [ops.index(dfg.ops[r]) for n in names for r in dfg.consumers[n]]
        return sum(i >= here for i in readers) <= 1 and here not in readers

    def producer(self, arg: str) -> str | None:
        """The optype of the op that produced input `arg`."""
        prev = self._ctx.dfg.prev(self._op, self._op.tensors_in[arg])
        return None if prev is None else prev.optype

    def made_by(self, arg: str) -> OpView | None:
        """The op that produced input `arg`, as a rule sees it (None if none): its
        params and tensors, one op back along the data flow."""
        prev = self._ctx.dfg.prev(self._op, self._op.tensors_in[arg])
        return None if prev is None else OpView(self._ctx, prev)


class Builder:
    """Makes the ops a rule puts in place, with op and tensor names unique in
    the context. An op built `like` another starts from its name, tensors and
    params; the first op built like X keeps X's name, later ones get new names.
    `create_ops` holds the create ops of the weights the rule folded; they are
    the arch's create op, else its `fallback` arch's (dnnl's weights are the cpu's)."""

    def __init__(self, ctx, arch: str, fallback: str | None = None):
        self.ctx = ctx
        self.arch = arch
        self.fallback = fallback
        self.op_names: set[str] = set()
        self.tensor_names: set[str] = set()
        self.create_ops: list[Op] = []

    def _taken(self):
        return _AnyOf(self.ctx.tensors.keys(), self.ctx.dfg.producer.keys(), self.tensor_names)

    def _op_names(self):
        return _AnyOf(self.ctx.dfg.ops.keys(), self.op_names)

    def tensor(self, prefix: str) -> str:
        name = unique_name(prefix, self._taken())
        self.tensor_names.add(name)
        return name

    def constant(self, name: str, value) -> str:
        """A new weight holding `value`, static data the rule computed at
        compile time: its tensor name (`name`, or `name_N` when taken). Its
        create op (from_file: the data goes with the model's weights) is in
        `create_ops`; the compile pipeline moves it to the front."""
        if not isinstance(value, np.ndarray):
            raise LightNetError(f"a rule folding '{name}' computed a {type(value).__name__}, "
                                "not an array")
        dtype = DType.from_numpy(value.dtype)
        taken = self._taken()
        if name in taken:
            name = unique_name(f"{name}_", taken)
        self.tensor_names.add(name)
        dims = list(value.shape) or [1]
        data = np.ascontiguousarray(value).reshape(dims)
        data.flags.writeable = False
        self.ctx.add_weight(name, data)
        op_names = self._op_names()
        op_name = name if name not in op_names else unique_name(f"{name}_", op_names)
        self.create_ops.append(self.op(self._creator(), name=op_name, outs={"dst": name},
                                       params={"dtype": dtype.name, "dims": dims,
                                               "from_file": True}))
        return name

    def _creator(self) -> str:
        """The create op of the arch, else of its fallback."""
        if f"create_{self.arch}" in OP_PROTOS or self.fallback is None:
            return f"create_{self.arch}"
        return f"create_{self.fallback}"

    def constants(self, stem: str, names: tuple[str, ...], values) -> tuple[str, ...]:
        """`constant` for each of `names` (tensor `stem_name`) and the arrays
        `values` (a tuple of as many)."""
        if not isinstance(values, tuple) or len(values) != len(names):
            raise LightNetError(f"a rule folding {', '.join(names)} of '{stem}' computed "
                                f"{type(values).__name__}, not a tuple of {len(names)} arrays")
        return tuple(self.constant(f"{stem}_{n}", v) for n, v in zip(names, values))

    def op(self, optype=None, like=None, name=None, ins=None, outs=None, params=None,
           rename=None) -> Op:
        base = like._op if isinstance(like, OpView) else like
        proto = base.proto if optype is None else OP_PROTOS[optype]
        if (base is not None and name is None and not (ins or outs or params or rename)
                and base.name not in self.op_names):  # `like` as another optype (expanders)
            self.op_names.add(base.name)
            return base.copy_as(proto)
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
                name = unique_name(optype, self._op_names())
        self.op_names.add(name)
        return Op(proto, name, tensors_in, tensors_out, op_params)


class _AnyOf:
    """The names in any of several collections (a set, a dict's keys), without joining
    them into one set: each rule would otherwise copy every name of the model."""

    def __init__(self, *collections):
        self.collections = collections

    def __contains__(self, name) -> bool:
        return any(name in c for c in self.collections)


def _name(tensor) -> str:
    return tensor if isinstance(tensor, str) else tensor.name


def _assign(tensors: dict, arg: str, tensor) -> None:
    """Set arg to a tensor (an entry or a name); None leaves it out."""
    if tensor is None:
        tensors.pop(arg, None)
    else:
        tensors[arg] = _name(tensor)
