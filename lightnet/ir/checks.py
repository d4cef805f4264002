"""Checking ops: the declared constraints of every optype, and the helpers
its generated pre_run uses for the rest.

`check_declared` enforces what descriptions declare as data in the OpProto
(args given and known, dtype sets, ndim, static, memory type, sametype,
sameshape, lengths, param types, bounds and choices); the generated pre_run
then checks only what is particular to its op (expressions) and defines the
outputs. Every failed check raises CheckError with one message format,
naming the op, its optype, the argument, the rule, what was expected and
what was found. A Checker is bound to one op and its context's tensor table.
"""

from __future__ import annotations

import math
import operator

from lightnet.errors import CheckError
from typing import TYPE_CHECKING

from lightnet.ir.param import REQUIRED, Param, ParamType
from lightnet.ir.tensor import MAX_ELEMENTS, DType, MemType, TensorEntry, TensorTable

if TYPE_CHECKING:
    from lightnet.ir.op import Op

COMPARISONS = {
    "eq": (operator.eq, "=="),
    "ne": (operator.ne, "!="),
    "gt": (operator.gt, ">"),
    "ge": (operator.ge, ">="),
    "lt": (operator.lt, "<"),
    "le": (operator.le, "<="),
}


def _arg_in(arg: str) -> str:
    return f"tensor_in '{arg}'"


def _arg_out(arg: str) -> str:
    return f"tensor_out '{arg}'"


def _arg_param(arg: str) -> str:
    return f"param '{arg}'"


def check_declared(op: Op, tensors: TensorTable) -> None:
    """Enforce the constraints the op's prototype declares, in argument order
    (inputs, then outputs, then params), and keep the typed param values in
    `op.values` for its pre_run and run code."""
    ck = Checker(op, tensors)
    proto = op.proto
    ck.no_unknown_args()
    entries = {}
    for t in proto.tensors_in:
        if t.variadic:
            entry = ck.tensors_in_variadic(t.arg_name, t.min)
        else:
            entry = ck.tensor_in(t.arg_name, optional=t.optional)
        entries[t.arg_name] = entry
        if t.dtype:
            ck.dtype(t.arg_name, entry, t.dtype)
        if t.ndim is not None:
            ck.ndim(t.arg_name, entry, t.ndim)
        if t.min_ndim is not None:
            ck.min_ndim(t.arg_name, entry, t.min_ndim)
        if t.static is not None:
            ck.static(t.arg_name, entry, t.static)
        if proto.mtype is not MemType.NONE:
            ck.mtype(t.arg_name, entry, proto.mtype)
    for t in proto.tensors_in:
        if t.sametype:
            ck.same_type(t.arg_name, entries[t.arg_name], t.sametype, entries[t.sametype])
        if t.sameshape:
            ck.same_shape(t.arg_name, entries[t.arg_name], t.sameshape, entries[t.sameshape])
    for t in proto.tensors_out:
        ck.tensor_out(t.arg_name, optional=t.optional)
    for p in proto.params:
        value = ck.param(p.arg_name, p.ptype, p.realtype, p.default)
        op.values[p.arg_name] = value
        if p.choices:
            (ck.each_one_of if p.ptype.is_array else ck.one_of)(p.arg_name, value, p.choices)
        if p.length is not None:
            ck.array_len(p.arg_name, value, p.length, str(p.length))
        for rule, bound in p.bounds:
            (ck.compare_each if p.ptype.is_array else ck.compare)(
                p.arg_name, value, rule, bound, str(bound))
    for t in proto.tensors_in:
        if t.len is not None:
            ck.len(t.arg_name, entries[t.arg_name], t.len, str(t.len))


class Checker:
    def __init__(self, op: Op, tensors: TensorTable):
        self.op = op
        self.tensors = tensors

    def fail(self, arg: str, rule: str, expected, found):
        raise CheckError(self.op.name, self.op.optype, arg, rule, expected, found)

    def get(self, *names: str) -> tuple:
        """The values checked code reads, by name: the entry of an input (a
        list for a variadic one, None for an absent optional one) or of a
        defined output, else a param value or a name pre_run kept."""
        op, values = self.op, []
        variadic = {t.arg_name for t in op.proto.tensors_in if t.variadic}
        for name in names:
            if name in variadic:
                values.append([self.tensors[op.tensors_in[a]] for a in op.variadic_in(name)])
            elif name in op.tensors_in or name in op.tensors_out:
                values.append(self.tensors[op.tensors_in.get(name) or op.tensors_out[name]])
            elif name in op.values:
                values.append(op.values[name])
            else:  # an optional input that is not given
                values.append(None)
        return tuple(values)

    # Tensor lists ---------------------------------------------------------

    def tensor_in(self, arg: str, optional: bool = False) -> TensorEntry | None:
        """The entry of input `arg`: it must be given and defined by an earlier op."""
        name = self.op.tensors_in.get(arg)
        if name is None:
            if optional:
                return None
            self.fail(_arg_in(arg), "exists", "the input to be given", "no such input")
        return self._defined(_arg_in(arg), name)

    def tensors_in_variadic(self, arg: str, min: int) -> list[TensorEntry]:
        """The entries of `arg1`, `arg2`, ...: at least `min` of them, numbered from 1."""
        args = self.op.variadic_in(arg)
        if len(args) < min:
            self.fail(_arg_in(f"{arg}1.."), "len_ge", f"at least {min} inputs", len(args))
        return [self._defined(_arg_in(a), self.op.tensors_in[a]) for a in args]

    def _defined(self, arg: str, name: str) -> TensorEntry:
        entry = self.tensors.get(name)
        if entry is None:
            self.fail(arg, "defined", f"tensor '{name}' defined by an earlier op",
                      "no such tensor")
        return entry

    def tensor_out(self, arg: str, optional: bool = False) -> str | None:
        """The name of output `arg`: it must be given and not yet defined."""
        name = self.op.tensors_out.get(arg)
        if name is None:
            if optional:
                return None
            self.fail(_arg_out(arg), "exists", "the output to be given", "no such output")
        entry = self.tensors.get(name)
        if entry is not None:
            self.fail(_arg_out(arg), "not_defined", f"tensor '{name}' to be new",
                      f"it is already defined by op '{entry.creator}'")
        return name

    def no_unknown_args(self) -> None:
        """Every arg the op is given must be one its optype takes."""
        proto = self.op.proto
        ins = {t.arg_name for t in proto.tensors_in if not t.variadic}
        variadic = [t.arg_name for t in proto.tensors_in if t.variadic]
        for arg in self.op.tensors_in:
            if arg not in ins and not any(arg in self.op.variadic_in(v) for v in variadic):
                self.fail(_arg_in(arg), "known", _names(proto.tensors_in),
                          "an unknown input")
        outs = {t.arg_name for t in proto.tensors_out}
        for arg in self.op.tensors_out:
            if arg not in outs:
                self.fail(_arg_out(arg), "known", _names(proto.tensors_out), "an unknown output")
        params = {p.arg_name for p in proto.params}
        for arg in self.op.params:
            if arg not in params:
                self.fail(_arg_param(arg), "known", _names(proto.params), "an unknown param")

    # Tensor properties ----------------------------------------------------
    # Each takes an entry, None (an absent optional input: nothing to check)
    # or a list of entries (a variadic input `src`: checked as src1, src2, ...).

    def ndim(self, arg: str, entry, expected: int) -> None:
        for arg, entry in _each(arg, entry):
            self._ndim(arg, entry, expected)

    def _ndim(self, arg: str, entry: TensorEntry, expected: int) -> None:
        if entry.ndim != expected:
            self.fail(_arg_in(arg), "ndim", f"{expected} dimensions",
                      f"{entry.ndim} ({entry.describe()})")

    def min_ndim(self, arg: str, entry, least: int) -> None:
        for arg, entry in _each(arg, entry):
            if entry.ndim < least:
                self.fail(_arg_in(arg), "ndim", f"at least {least} dimensions",
                          f"{entry.ndim} ({entry.describe()})")

    def len(self, arg: str, entry, expected: int, text: str) -> None:
        for arg, entry in _each(arg, entry):
            self._len(arg, entry, expected, text)

    def _len(self, arg: str, entry: TensorEntry, expected: int, text: str) -> None:
        if entry.len != expected:
            self.fail(_arg_in(arg), "len", _with_value(text, expected) + " elements",
                      f"{entry.len} ({entry.describe()})")

    def dtype(self, arg: str, entry, allowed: tuple[DType, ...]) -> None:
        for arg, entry in _each(arg, entry):
            self._dtype(arg, entry, allowed)

    def _dtype(self, arg: str, entry: TensorEntry, allowed: tuple[DType, ...]) -> None:
        if entry.dtype not in allowed:
            self.fail(_arg_in(arg), "dtype", " or ".join(d.name for d in allowed),
                      f"{entry.dtype.name} ({entry.describe()})")

    def mtype(self, arg: str, entry, expected: MemType) -> None:
        for arg, entry in _each(arg, entry):
            if entry.mtype is not expected:
                self.fail(_arg_in(arg), "mtype", f"memory type {expected}", entry.mtype)

    def same_shape(self, arg: str, entry, other_arg: str, other: TensorEntry) -> None:
        if other is None:
            return
        for arg, entry in _each(arg, entry):
            if entry.shape != other.shape:
                self.fail(_arg_in(arg), "sameshape", f"the shape of '{other_arg}' {other.shape}",
                          entry.shape)

    def same_type(self, arg: str, entry, other_arg: str, other: TensorEntry) -> None:
        if other is None:
            return
        for arg, entry in _each(arg, entry):
            if entry.dtype is not other.dtype:
                self.fail(_arg_in(arg), "sametype",
                          f"the dtype of '{other_arg}' ({other.dtype})", entry.dtype)

    def static(self, arg: str, entry, expected: bool) -> None:
        for arg, entry in _each(arg, entry):
            self._static(arg, entry, expected)

    def _static(self, arg: str, entry: TensorEntry, expected: bool) -> None:
        if entry.static != expected:
            want = "a static tensor (weights or a constant)" if expected else "a non-static tensor"
            self.fail(_arg_in(arg), "static", want,
                      f"'{entry.name}' {'is' if entry.static else 'is not'} static")

    # Params ---------------------------------------------------------------

    def param(self, arg: str, ptype: ParamType, realtype: str | None = None,
              default=REQUIRED):
        """The value of param `arg`, of type `ptype` (numbers as `realtype`:
        int, float or double); `default` when absent, if it has one."""
        param = self.op.params.get(arg)
        if param is None:
            if default is REQUIRED:
                self.fail(_arg_param(arg), "exists", f"a {ptype} param", "none given")
            # A default gets the same typing (and saturation) as a given value.
            return _typed_default(arg, default, realtype)
        if not param.matches(ptype):
            self.fail(_arg_param(arg), "type", f"a {ptype}", f"a {param.ptype} {param}")
        return param.typed(realtype)

    def compare(self, arg: str, value, rule: str, bound, text: str) -> None:
        """`value <rule> bound`, e.g. axis >= 0; `text` is the bound as written."""
        test, symbol = COMPARISONS[rule]
        if not test(value, bound):
            self.fail(_arg_param(arg), rule, f"{arg} {symbol} {_with_value(text, bound)}", value)

    def compare_each(self, arg: str, values, rule: str, bound, text: str) -> None:
        """The same comparison for every element of an array param."""
        test, symbol = COMPARISONS[rule]
        for i, value in enumerate(values):
            if not test(value, bound):
                self.fail(_arg_param(arg), rule,
                          f"every {arg}[i] {symbol} {_with_value(text, bound)}",
                          f"{arg}[{i}] = {value}")

    def array_len(self, arg: str, values, expected: int, text: str) -> None:
        if len(values) != expected:
            self.fail(_arg_param(arg), "len", f"{_with_value(text, expected)} elements",
                      f"{len(values)} ({list(values)})")

    def one_of(self, arg: str, value, choices: tuple) -> None:
        if value not in choices:
            self.fail(_arg_param(arg), "choices", "one of " + ", ".join(map(str, choices)),
                      repr(value))

    def each_one_of(self, arg: str, values, choices: tuple) -> None:
        for i, value in enumerate(values):
            if value not in choices:
                self.fail(_arg_param(arg), "choices",
                          "every element one of " + ", ".join(map(str, choices)),
                          f"{arg}[{i}] = {value!r}")

    # Free-form ------------------------------------------------------------

    def satisfy(self, arg: str, ok: bool, expr: str, msg: str | None, found) -> None:
        """A check written as an expression; `found` renders the values it used."""
        if not ok:
            expected = expr if msg is None else f"{expr} ({msg})"
            self.fail(arg, "check", expected, found() if callable(found) else found)

    # Outputs ----------------------------------------------------------------

    def scratch(self, nbytes) -> None:
        """Ask for `nbytes` of scratch memory while the op runs (0: none)."""
        try:
            n = None if isinstance(nbytes, bool) else operator.index(nbytes)
        except TypeError:
            n = None
        if n is None or not 0 <= n <= MAX_ELEMENTS * 8:
            self.fail("op", "scratch", f"a number of bytes in [0, {MAX_ELEMENTS * 8}]",
                      repr(nbytes))
        self.op.scratch = n

    def define(self, arg: str, dtype, shape, *, static: bool = False,
               owner: str | None = None, from_file: bool = False,
               input: bool = False) -> TensorEntry:
        """Register output `arg` with its inferred dtype and shape."""
        name = self.op.tensors_out[arg]
        if isinstance(dtype, str):
            dtype = DType.from_name(dtype)
        if not isinstance(dtype, DType):
            self.fail(_arg_out(arg), "dtype", "a dtype", repr(dtype))
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            self.fail(_arg_out(arg), "shape", "a sequence of integers", repr(shape))
        if any(d < 0 for d in shape):
            self.fail(_arg_out(arg), "shape", "dimensions >= 0", shape)
        size = math.prod(shape)
        if size > MAX_ELEMENTS or any(d > MAX_ELEMENTS for d in shape):
            self.fail(_arg_out(arg), "size", f"at most 2**40 elements ({MAX_ELEMENTS})",
                      f"{size} elements {list(shape)}")
        owner_name = None if owner is None else self.op.tensors_in[owner]
        entry = TensorEntry(name, dtype, shape, self.op.name, self.op.proto.mtype,
                            static=static, owner=owner_name, from_file=from_file,
                            input=input)
        self.tensors[name] = entry
        return entry


# The typed value of each param default met, by (arg, realtype, default as JSON text):
# every op of an optype checks the same defaults.
_DEFAULTS: dict[tuple, object] = {}


def _typed_default(arg: str, default, realtype: str | None):
    """Param.from_value(arg, default).typed(realtype), computed once per default."""
    try:
        key = (arg, realtype, type(default), repr(default))
    except Exception:  # noqa: BLE001 - a default without a repr: not kept
        return Param.from_value(arg, default).typed(realtype)
    value = _DEFAULTS.get(key, _DEFAULTS)
    if value is _DEFAULTS:
        value = _DEFAULTS[key] = Param.from_value(arg, default).typed(realtype)
    return value


def _each(arg: str, entry):
    """(arg, entry) pairs to check: none, one, or one per variadic input."""
    if entry is None:
        return []
    if isinstance(entry, list):
        return [(f"{arg}{i}", e) for i, e in enumerate(entry, 1)]
    return [(arg, entry)]


def found(**values) -> str:
    """`start=1, src=float32[2, 4]`: the values a failed check read."""
    return ", ".join(f"{name}={_show(value)}" for name, value in values.items())


def _show(value) -> str:
    if isinstance(value, TensorEntry):
        return value.describe()
    if isinstance(value, list) and value and isinstance(value[0], TensorEntry):
        return "[" + ", ".join(v.describe() for v in value) + "]"
    if isinstance(value, tuple) and len(value) > 8:
        return f"({', '.join(map(repr, value[:8]))}, ... {len(value)} elements)"
    return repr(value)


def _with_value(text: str, value) -> str:
    """`src.ndim (2)`: an expression with its value, or just a literal."""
    return text if text == str(value) else f"{text} ({value})"


def _names(args) -> str:
    names = [f"{a.arg_name}1..{a.arg_name}N" if getattr(a, "variadic", False) else a.arg_name
             for a in args]
    return "one of " + ", ".join(names) if names else "none"
