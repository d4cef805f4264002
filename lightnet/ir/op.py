"""Operators: prototypes (what an optype is) and ops (one use of it in a model).

An op's lifecycle: `pre_run` checks its inputs and params and registers its
outputs in the tensor table (init -> checked); `load` runs its static_run once
against the bound arena arrays and returns its run function (checked -> ready);
that function runs many times; `post_run` frees private state and unregisters
the outputs (-> end). Prototypes are generated from descriptions/ops/*.yaml.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from lightnet.errors import CheckError
from lightnet.ir.checks import check_declared
from lightnet.ir.param import REQUIRED, Param, ParamType
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable



@dataclass(frozen=True)
class TensorArg:
    """A tensor argument an optype takes or gives, with the constraints its
    description declares (checked by lightnet.ir.checks.check_declared).

    A variadic input `src` is given as `src1`, `src2`, ... (at least `min`).
    `dtype` is the accepted dtypes (empty: any); `len` a number of elements;
    `sametype` / `sameshape` name another input; `static` None means either.
    """

    arg_name: str
    optional: bool = False
    variadic: bool = False
    min: int = 1
    dtype: tuple[DType, ...] = ()
    ndim: int | None = None
    min_ndim: int | None = None  # at least this many dimensions
    len: int | None = None
    static: bool | None = None
    sametype: str | None = None
    sameshape: str | None = None


@dataclass(frozen=True)
class ParamArg:
    """A param an optype takes, with its declared constraints: numbers (and
    number arrays) typed as `realtype` (int, float or double); `length` of an
    array; `bounds` as (rule, value) pairs, rule one of eq ne gt ge lt le
    (each element of an array); `choices` of a string (or of each element)."""

    arg_name: str
    ptype: ParamType
    default: object = REQUIRED
    realtype: str | None = None
    length: int | None = None
    bounds: tuple[tuple[str, object], ...] = ()
    choices: tuple = ()


@dataclass(frozen=True)
class OpProto:
    """Everything the runtime knows of an optype, built by its generated module.

    The declared constraints of the args are checked first (the same for
    every op); then pre_run(op, tensors) makes the op's own checks and defines
    its outputs; scratch(op, tensors) gives the bytes of scratch memory it
    needs while it runs; views(op, arrays) returns the arrays of outputs that
    share an input's memory; load(op, arrays) runs static_run and returns the
    run function; post_run(op) frees private state. `assemble` lets the
    memory planner place the inputs inside the output.
    """

    optype: str
    arch: str
    mtype: MemType
    tensors_in: tuple[TensorArg, ...]
    tensors_out: tuple[TensorArg, ...]
    params: tuple[ParamArg, ...]
    pre_run: Callable
    source: str
    scratch: Callable | None = None
    views: Callable | None = None
    load: Callable | None = None
    post_run: Callable | None = None
    assemble: tuple[str, str, str] | None = None  # (output, variadic input, axis param)


@dataclass
class Op:
    """One operator of a model: a prototype applied to named tensors and params.

    `tensors_in` / `tensors_out` map arg names to tensor names, in IR order.
    `values` holds the checked param values (defaults applied, typed as the
    description says), set by pre_run and read by load. `priv` is the op's
    private state between static_run and run. `scratch` is the bytes of
    scratch memory it needs while it runs (set by pre_run), planned in the
    arena like a tensor that lives during this op only.
    """

    proto: OpProto
    name: str
    tensors_in: dict[str, str]
    tensors_out: dict[str, str]
    params: dict[str, Param]
    values: dict = field(default_factory=dict)
    priv: dict = field(default_factory=dict)
    scratch: int = 0
    scratch_offset: int | None = None  # in the arena, once planned
    seed: int = 0  # of the random values static_run makes (the context's seed)

    @property
    def optype(self) -> str:
        return self.proto.optype

    @property
    def arch(self) -> str:
        return self.proto.arch

    @property
    def scratch_key(self) -> tuple[str, str]:
        """Where the loaded context binds the op's scratch in `arrays` (not a
        string, so no tensor name can take it)."""
        return ("scratch", self.name)

    def tensor_names(self):
        """Every tensor this op reads or writes."""
        return [*self.tensors_in.values(), *self.tensors_out.values()]

    def variadic_in(self, arg_name: str) -> list[str]:
        """Arg names `arg_name1`, `arg_name2`, ... this op is given, in order."""
        names = []
        while f"{arg_name}{len(names) + 1}" in self.tensors_in:
            names.append(f"{arg_name}{len(names) + 1}")
        return names

    def arrays_in(self, arrays: dict, arg_name: str) -> list[np.ndarray]:
        return [arrays[self.tensors_in[a]] for a in self.variadic_in(arg_name)]

    def arrays(self, arrays: dict, *arg_names: str) -> tuple[np.ndarray | None, ...]:
        """The bound arrays of input or output args (None: optional, absent)."""
        ins, outs, bound = self.tensors_in, self.tensors_out, []
        for arg_name in arg_names:
            name = ins.get(arg_name) or outs.get(arg_name)
            bound.append(None if name is None else arrays[name])
        return tuple(bound)

    def pre_run(self, tensors: TensorTable) -> None:
        """Check the op and register its outputs. A helper that rejects the
        arguments (a shape function raising ValueError, say) is reported as a
        failed check of this op, like every other."""
        self.values = {}
        self.scratch = 0
        try:
            check_declared(self, tensors)
            self.proto.pre_run(self, tensors)
            if self.proto.scratch is not None:
                self.proto.scratch(self, tensors)
        except (ValueError, ArithmeticError, IndexError, TypeError) as e:
            raise CheckError(self.name, self.optype, "op", "infer",
                             "arguments its shapes can be computed from", str(e)) from e

    def post_run(self, tensors: TensorTable) -> None:
        """Free private state and unregister the outputs."""
        if self.proto.post_run is not None:
            self.proto.post_run(self)
        self.priv.clear()
        for name in self.tensors_out.values():
            tensors.pop(name, None)

    def copy_as(self, proto: OpProto, name: str | None = None) -> "Op":
        """This op's tensors and params under another optype (e.g. slice -> slice_cpu)."""
        return Op(proto, name or self.name, dict(self.tensors_in),
                  dict(self.tensors_out), dict(self.params))

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "optype": self.optype,
            "tensors_in": [{"arg_name": a, "name": n} for a, n in self.tensors_in.items()],
            "tensors_out": [{"arg_name": a, "name": n} for a, n in self.tensors_out.items()],
            "params": [{"arg_name": a, "value": p.to_json()} for a, p in self.params.items()],
        }


def _state(entry: TensorEntry) -> tuple:
    """Everything `entry` says (its fields, in order), to compare with what it said."""
    return tuple(entry.__dict__.values())


class CheckMemo:
    """What the ops of a model read and made when they were checked (pre_run), while it
    compiles: an op a pass takes out (Context.remove_ops) and puts back reading what
    its check read is not checked anew (the dnnl layout pass takes every op out and
    puts them back, twice, to insert a few reorders).

    An op's check depends on its optype, name, params, tensor names and seed and on
    the entries of the tensors it reads. The memo keeps them as they were when the op
    was checked, with the entries the check defined. When the op is put back with all
    of them as they were then, checking it would define the same outputs again:
    pre_run puts back the entries it had (and the values and scratch it had made).
    What the op reads when it is taken out does not count: a pass that replaces an
    op's producer (a combiner fusing a channel shuffle) changes the entry the op reads
    without checking the op again, and the op's outputs, made from the old entry, are
    then not what its check makes of the new one. An op is remembered only while its
    outputs are the entries its check defined, unchanged. Checked anew every time are
    an op whose check changed an entry it read (a dnnl op choosing the layout of a
    tensor the layout pass left to it), the op that made that entry (its entry is no
    longer what the op made), an op keeping a value marked `keeps_entries` (one that
    reads entries again at load) and an op of several outputs (its check defines them
    in its own order, which the tensor table keeps).

    An op of the same signature as one checked before (its prototype, seed, args and
    their pattern of tensor names, params by value, and the entries it reads by their
    content: dtype, shape, layout, ...) is not checked either: a check reads nothing
    else (the generated pre_run reads the op through a Checker), so it would pass again
    and define the same outputs, which the memo defines under the op's own names,
    with a copy of the values and the scratch the first op made (a chain of thousands
    of relus is checked once per shape). An op whose check changed an entry it read,
    or keeps entries, or did not define exactly its outputs, gives no signature.
    Context.init and Context.compile hold one while they run; init's keeps no
    `records` of ops (nothing is taken out and put back while it runs), only the
    signatures."""

    def __init__(self, records: bool = True):
        self._records = records
        self._checked: dict[str, tuple] = {}  # op name -> what its check read and made
        self._taken: dict[str, tuple] = {}  # ... of an op taken out, with its values
        self._never: set[str] = set()  # the ops checked anew every time
        self._made: dict[tuple, tuple] = {}  # a signature -> what its check made

    def take_out(self, op: Op, tensors: TensorTable) -> None:
        """Remember what `op`, about to be taken out of the model, read and made when it
        was checked, if its outputs are still what its check made."""
        checked = self._checked.pop(op.name, None)
        if checked is None or checked[0] is not op or op.name in self._never:
            return
        entry = checked[7]
        if tensors.get(entry.name) is not entry or checked[8] != _state(entry):
            return
        self._taken[op.name] = (*checked, op.values, op.scratch)

    def pre_run(self, op: Op, tensors: TensorTable) -> None:
        """`op.pre_run(tensors)`, or what it would do again (see the class)."""
        taken = self._taken.pop(op.name, None)
        if taken is not None and self._same(taken, op, tensors):
            entry = taken[7]
            tensors[entry.name] = entry
            op.values, op.scratch = taken[9], taken[10]
            self._checked[op.name] = taken[:9]
            return
        ins = list(map(tensors.get, op.tensors_in.values()))
        key = None if None in ins else _signature(op, ins)
        if key is not None:
            made = self._made.get(key)
            if made is not None and _define_again(made, op, tensors):
                if self._records:
                    self._remember(op, ins, list(map(_state, ins)), tensors)
                return
        read = [None if e is None else _state(e) for e in ins]
        op.pre_run(tensors)  # raises when an input is missing
        if any(getattr(v, "keeps_entries", False) for v in op.values.values()):
            self._never.add(op.name)
            key = None
        for was, entry in zip(read, ins):
            if was != _state(entry):  # it changed what it read
                self._never.update((op.name, entry.creator))
                key = None
        if key is not None:
            made = _made(op, tensors)
            if made is not None:
                self._made[key] = made
        if self._records and op.name not in self._never:
            self._remember(op, ins, read, tensors)

    def _remember(self, op: Op, ins: list[TensorEntry], read: list[tuple],
                  tensors: TensorTable) -> None:
        """Keep what `op`'s check (just made) read (`ins`, their states `read`) and
        made (its outputs, one: several are put back in the order their check defines
        them)."""
        outs = op.tensors_out
        if len(outs) != 1:
            return
        (name,) = outs.values()
        entry = tensors.get(name)
        if entry is None or entry.creator != op.name:
            return
        # What the op read is, mostly, what its producer made: the producer's record
        # of it is kept once (a record per op of a model of thousands).
        checked = self._checked
        for i, e in enumerate(ins):
            producer = checked.get(e.creator)
            if producer is not None and producer[8] == read[i]:
                read[i] = producer[8]
        ins = op.tensors_in
        checked[op.name] = (op, op.proto, op.seed, (*ins, *ins.values()), (*outs, name),
                            tuple(op.params.items()) if op.params else (), read, entry,
                            _state(entry))

    @property
    def never(self) -> set[str]:
        """The names of the ops checked anew every time (see the class)."""
        return self._never

    def current(self, op: Op, tensors: TensorTable) -> bool:
        """Whether `op`, in the model, reads what it read when it was checked and its
        outputs are the entries its check made, unchanged: checking it again would
        make them again (Context.rewrite leaves such an op as it is)."""
        checked = self._checked.get(op.name)
        if checked is None or not self._reads_same(checked, op, tensors):
            return False
        entry = checked[7]
        return tensors.get(entry.name) is entry and checked[8] == _state(entry)

    def _same(self, taken: tuple, op: Op, tensors: TensorTable) -> bool:
        """Whether `op`, put back, reads what it read when it was checked (`taken`),
        and may define its outputs again."""
        return self._reads_same(taken, op, tensors) and taken[4][1] not in tensors

    def _reads_same(self, checked: tuple, op: Op, tensors: TensorTable) -> bool:
        """Whether `op` reads now what it read when it was checked (`checked`): its
        params the same objects (a param equal to another may still differ: -0.0 and
        0.0)."""
        was_op, proto, seed, tensors_in, tensors_out, params, read = checked[:7]
        ins, outs = op.tensors_in, op.tensors_out
        if (was_op is not op or proto is not op.proto or seed != op.seed
                or op.name in self._never
                or tensors_in != (*ins, *ins.values())
                or tensors_out != (*outs, *outs.values())
                or len(params) != len(op.params)):
            return False
        for (arg, value), (was_arg, was) in zip(op.params.items(), params):
            if arg != was_arg or value is not was:
                return False
        for was, n in zip(read, tensors_in[len(ins):]):
            entry = tensors.get(n)
            if entry is None or was != tuple(entry.__dict__.values()):
                return False
        return True


# What a check reads of an entry but its layout (context._content_fields).
_keyed_fields = operator.attrgetter("dtype", "shape", "mtype", "static", "owner",
                                    "owner_offset", "from_file", "input", "offset")


def _signature(op: Op, ins: list[TensorEntry]) -> tuple | None:
    """What `op`'s check depends on (see CheckMemo), as a hashable key: None when an
    entry it reads has a layout the memo cannot key by content."""
    entries = []
    for e in ins:
        layout = e.layout
        if layout is None:
            entries.append(_keyed_fields(e))
        else:
            layout = getattr(layout, "key", None)
            if layout is None:
                return None
            entries.append((*_keyed_fields(e), layout))
    names = [*op.tensors_in.values(), *op.tensors_out.values()]
    # Which args name the same tensor (an op reading one tensor twice).
    pattern = None if len(set(names)) == len(names) else tuple(map(names.index, names))
    # The prototype by identity (a frozen dataclass hashes all its fields); the memo
    # keeps it alive (see _made), so no other object takes its id.
    params = op.params
    return (id(op.proto), op.seed, tuple(op.tensors_in), tuple(op.tensors_out), pattern,
            tuple([(arg, p.key) for arg, p in params.items()]) if params else (),
            tuple(entries))


# A TensorEntry's fields in their order (name first), and where creator and owner are.
_FIELDS = [f.name for f in fields(TensorEntry)]
_fields_of = operator.attrgetter(*_FIELDS)
_CREATOR, _OWNER = _FIELDS.index("creator"), _FIELDS.index("owner")


def _made(op: Op, tensors: TensorTable) -> tuple | None:
    """What `op`'s check (just run) made, with no tensor name of its own: its values,
    scratch and the fields of the entries it defined, in the order it defined them
    (each by the position of its output, its owner by the position of the input),
    None when it did not define exactly its outputs."""
    outs = list(op.tensors_out.values())
    defined = []
    for name in reversed(tensors):
        if len(defined) == len(outs):
            break
        defined.append(name)
    defined.reverse()
    if sorted(defined) != sorted(outs) or len(set(outs)) != len(outs):
        return None
    ins = list(op.tensors_in.values())
    entries = []
    for name in defined:
        values = _fields_of(tensors[name])
        owner = values[_OWNER]
        if values[_CREATOR] != op.name or owner not in (None, *ins):
            return None
        entries.append((outs.index(name), None if owner is None else ins.index(owner),
                        values[1:_CREATOR], values[_CREATOR + 1:_OWNER], values[_OWNER + 1:]))
    return op.proto, dict(op.values), op.scratch, entries


def _define_again(made: tuple, op: Op, tensors: TensorTable) -> bool:
    """Define `op`'s outputs as the check of its signature did (`made`, see _made);
    False, defining nothing, when one of them is defined already (its check fails)."""
    proto, values, scratch, entries = made
    outs = list(op.tensors_out.values())
    if proto is not op.proto or not tensors.keys().isdisjoint(outs):
        return False
    ins = list(op.tensors_in.values())
    for out, owner, before, between, after in entries:
        name = outs[out]
        tensors[name] = TensorEntry(name, *before, op.name, *between,
                                    None if owner is None else ins[owner], *after)
    op.values, op.scratch = dict(values), scratch
    return True


def unique_name(prefix: str, taken) -> str:
    """`prefix` followed by the smallest serial number not in `taken`."""
    n = 1
    while f"{prefix}{n}" in taken:
        n += 1
    return f"{prefix}{n}"
