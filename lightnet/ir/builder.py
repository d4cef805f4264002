"""Models built in Python: their tensors, the ops that make them, Model.

Every builder call (`lightnet.nn.conv2d(...)`, generated from the op's
description, or `input` / `constant` here) makes one op and checks it at
once, with the op's own pre_run against the tensors it reads: a wrong
argument fails at the user's line, with the message loading the same op from
JSON would give. A Tensor knows the op that made it and the op knows the
tensors it read, so a Model is the ops its outputs are computed from (NNVM's
Symbol), in the order they were built, which is an order they can run in.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from pathlib import Path

import numpy as np

from lightnet.archs.registry import get_proto
from lightnet.errors import LightNetError
from lightnet.files import weight_file
from lightnet.ir import json_ir
from lightnet.ir.op import Op, TensorArg
from lightnet.ir.param import Param
from lightnet.ir.tensor import DType, TensorEntry, TensorTable

_PACKAGE = str(Path(__file__).resolve().parent.parent)
_serials = itertools.count()
_taken: set[str] = set()  # names of ops (and their tensors) built in this process
_naming = threading.Lock()  # threads building models take fresh names one at a time


class Tensor:
    """A tensor of a model being built: output `arg` of an op, with the
    dtype and shape that op's checks gave it."""

    __slots__ = ("node", "arg", "entry")

    def __init__(self, node: "_Node", arg: str, entry: TensorEntry):
        self.node = node
        self.arg = arg
        self.entry = entry

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def dtype(self) -> DType:
        return self.entry.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.entry.shape

    def __repr__(self) -> str:
        return f"<Tensor '{self.name}' {self.entry.describe()}>"


class Action:
    """What a builder of an op without outputs (print, fprint) returns: give
    it to Model(outputs=...) for the model to run that op."""

    __slots__ = ("node",)

    def __init__(self, node: "_Node"):
        self.node = node

    def __repr__(self) -> str:
        return f"<Action '{self.node.op.name}' ({self.node.op.optype})>"


class _Node:
    """One op of a model being built: the checked op, the tensors it reads,
    where the user built it, and (a constant) the array it holds."""

    __slots__ = ("op", "inputs", "serial", "where", "weight", "outputs")

    def __init__(self, op: Op, inputs: list[Tensor], where: str, weight=None):
        self.op = op
        self.inputs = inputs
        self.serial = next(_serials)
        self.where = where
        self.weight = weight
        self.outputs: list[Tensor] = []


def _caller() -> str:
    """`file:line` of the innermost call from outside LightNet: the user's line."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return "<lightnet>"
    path = frame.f_code.co_filename
    if os.path.isabs(path) and path.startswith(os.getcwd() + os.sep):
        path = os.path.relpath(path)  # as the user named it, from where they are
    return f"{path}:{frame.f_lineno}"


def _fresh_name(prefix: str) -> str:
    """`prefix` with the smallest serial number no op built in this process has."""
    for n in itertools.count(1):
        name = f"{prefix}{n}"
        if name not in _taken:
            return name


def _plain(value):
    """A param value as JSON would give it: numpy scalars and arrays as Python
    numbers and lists, tuples as lists, a DType by its name."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def apply(optype: str, inputs: dict, params: dict, name: str | None = None,
          weight: np.ndarray | None = None):
    """Make and check one `optype` op reading `inputs` (arg name -> Tensor; a
    sequence of Tensors for a variadic input; None for an optional one not
    given) with `params` (arg name -> value). Returns its output Tensor, a
    tuple of them for several, an Action for none."""
    where = _caller()
    proto = get_proto(optype)
    if name is not None:
        problem = json_ir.name_problem(name)
        if problem:
            raise LightNetError(f"{where}: op name: {problem}")
    with _naming:
        return _apply(proto, inputs, params, name or _fresh_name(optype), weight, where)


def _apply(proto, inputs: dict, params: dict, name: str, weight, where: str):
    """apply(), once the op's name is chosen (holding the naming lock)."""
    optype = proto.optype
    at = f"{where}: op '{name}' ({optype})"
    tensors_in: dict[str, str] = {}
    read: list[Tensor] = []
    for arg in proto.tensors_in:
        value = inputs.get(arg.arg_name)
        for arg_name, tensor in _given(arg, value, at):
            tensors_in[arg_name] = tensor.name
            read.append(tensor)
    outs = [t.arg_name for t in proto.tensors_out]
    tensors_out = {a: name if len(outs) == 1 else f"{name}_{a}" for a in outs}
    checked = {}
    for arg, value in params.items():
        try:
            checked[arg] = Param.from_value(arg, _plain(value))
        except ValueError as e:
            raise LightNetError(f"{at}: param '{arg}': {e}") from None
    op = Op(proto, name, tensors_in, tensors_out, checked)
    table = TensorTable({t.name: t.entry for t in read})
    try:
        op.pre_run(table)
    except LightNetError as e:
        raise LightNetError(f"{where}: {e}") from e
    node = _Node(op, read, where, weight)
    _taken.add(name)
    _taken.update(tensors_out.values())
    node.outputs = [Tensor(node, a, table[n]) for a, n in tensors_out.items()]
    if not node.outputs:
        return Action(node)
    return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)


def _given(arg: TensorArg, value, at: str) -> list[tuple[str, Tensor]]:
    """The (arg name, tensor) pairs input `arg` is given as: `src1`, `src2`...
    for a variadic one, none for one given None."""
    def tensor(arg_name, v):
        if not isinstance(v, Tensor):
            raise LightNetError(f"{at}: input '{arg_name}': expected a tensor of "
                                f"lightnet.nn, found {type(v).__name__}")
        return arg_name, v

    if arg.variadic:
        if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
            raise LightNetError(f"{at}: input '{arg.arg_name}': expected a list of tensors "
                                f"of lightnet.nn, found {type(value).__name__}")
        return [tensor(f"{arg.arg_name}{i}", v) for i, v in enumerate(value, 1)]
    if value is None:  # a required one is reported by the op's checks, as in JSON
        return []
    return [tensor(arg.arg_name, value)]


def input(name: str, shape, dtype="TL_FLOAT") -> Tensor:
    """A model input called `name`, fed before each run (Session.run,
    Context.set_data): `shape` a list of dims, `dtype` a LightNet dtype
    (`"TL_FLOAT"`, DType.TL_INT32) or a numpy one (np.float32)."""
    return apply("input", {}, {"dtype": _dtype(dtype), "dims": shape}, name)


def constant(array, name: str | None = None) -> Tensor:
    """A static tensor holding a copy of `array` (its dtype must be one
    LightNet has: float32, float64, int32 ...): a weight of the model, written
    to the weight file beside its IR (Model.save), and folded by the
    optimizer like any other."""
    where = _caller()
    array = np.array(array)  # a copy: later changes to the caller's array do not leak in
    try:
        dtype = DType.from_numpy(array.dtype)
    except LightNetError as e:
        raise LightNetError(f"{where}: constant: {e}") from None
    array = array.reshape(array.shape or (1,))
    array.flags.writeable = False
    return apply("create", {}, {"dtype": dtype.name, "dims": list(array.shape),
                                "from_file": True}, name or _fresh_name("constant"), array)


def _dtype(dtype) -> str:
    """The LightNet name of an input's dtype: a DType, its name (checked by the
    input op, as in JSON) or a numpy dtype."""
    if isinstance(dtype, DType):
        return dtype.name
    if isinstance(dtype, str) and dtype.startswith("TL_"):
        return dtype
    try:
        if dtype is None:
            raise TypeError
        return DType.from_numpy(dtype).name
    except TypeError:
        raise LightNetError(f"{_caller()}: input: unknown dtype {dtype!r}") from None
    except LightNetError as e:
        raise LightNetError(f"{_caller()}: input: {e}") from None


class Model:
    """The ops `outputs` (a Tensor, an Action, or a list of them) are computed
    from, in the order they were built. `Context.init(model)` and
    `Session(model)` take it directly (with its constants as the weights);
    `to_dict()` is its IR document and `save(path)` writes it, with the
    weight file beside it.

    A model's outputs are the tensors none of its ops reads: each tensor in
    `outputs` must be one, and an op's other outputs no op reads are outputs
    too (Session returns them)."""

    def __init__(self, outputs):
        where = _caller()
        given = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for item in given:
            if not isinstance(item, (Tensor, Action)):
                raise LightNetError(f"{where}: Model: outputs must be tensors of lightnet.nn, "
                                    f"found {type(item).__name__}")
        nodes: dict[int, _Node] = {}
        todo = [item.node for item in given]
        while todo:
            node = todo.pop()
            if id(node) not in nodes:
                nodes[id(node)] = node
                todo.extend(t.node for t in node.inputs)
        self._nodes = sorted(nodes.values(), key=lambda n: n.serial)
        self._check_names()
        read = {t.name: n for n in self._nodes for t in n.inputs}
        for item in given:
            if isinstance(item, Tensor) and item.name in read:
                reader = read[item.name].op
                raise LightNetError(
                    f"{where}: Model: tensor '{item.name}' is read by op '{reader.name}' "
                    f"({reader.optype}), so it is not an output: a model's outputs are the "
                    "tensors none of its ops reads")
        self.outputs = [t for n in self._nodes for t in n.outputs if t.name not in read]

    def _check_names(self) -> None:
        """Names are unique in the model: two ops given one name fail at the second."""
        seen: dict[str, _Node] = {}
        for node in self._nodes:
            for name in {node.op.name, *node.op.tensors_out.values()}:
                other = seen.setdefault(name, node)
                if other is not node:
                    raise LightNetError(
                        f"{node.where}: op '{node.op.name}' ({node.op.optype}): the name "
                        f"'{name}' is taken by op '{other.op.name}' built at {other.where}")

    @property
    def inputs(self) -> list[Tensor]:
        """The model's inputs (`input` ops), in the order they were built."""
        return [n.outputs[0] for n in self._nodes if n.op.optype == "input"]

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """The arrays of the model's constants, by tensor name."""
        return {n.outputs[0].name: n.weight for n in self._nodes if n.weight is not None}

    def to_dict(self) -> dict:
        """The model's IR document."""
        return {"ops": [n.op.to_json() for n in self._nodes]}

    def save(self, path) -> Path | None:
        """Write the IR to `path` (JSON) and the weights, if any, to `path`
        with the suffix .npz (what `lightnet -f` and Context.load read).
        Returns the weight file's path, None without constants."""
        path = Path(path)
        try:
            path.write_text(json_ir.dump([n.op for n in self._nodes]), encoding="utf-8")
        except OSError as e:
            raise LightNetError(f"{path}: cannot write the IR: {e.strerror}") from None
        if not self.weights:
            return None
        npz = path.with_suffix(".npz")
        try:
            weight_file.write_npz(npz, self.weights)
        except OSError as e:
            raise LightNetError(f"{npz}: cannot write the weights: {e.strerror}") from None
        return npz

    def __repr__(self) -> str:
        return (f"<Model: {len(self._nodes)} ops, inputs {[t.name for t in self.inputs]}, "
                f"outputs {[t.name for t in self.outputs]}>")
