"""The description model: YAML parsed into frozen dataclasses, validated on load.

Everything the templates need is decided here, and every mistake an author
can make is reported here with its file and line. The format is specified in
docs/op-description.md and docs/optimizer-description.md.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import re
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from generator.source import DescriptionError, YList, YMap, load_yaml

DTYPES = ("TL_DOUBLE", "TL_FLOAT", "TL_INT32", "TL_INT16", "TL_INT8",
          "TL_UINT32", "TL_UINT16", "TL_UINT8", "TL_BOOL")
ARCHS = ("none", "cpu")
MTYPES = ("none", "cpu")
# Param types: a scalar, or an array of one (`int[]`, `int[2]`, `int[src.ndim]`);
# int, float and double are numbers typed so; a list of strings is an enum.
SCALAR_TYPES = {"int": ("number", "int"), "float": ("number", "float"),
                "double": ("number", "double"), "string": ("string", None),
                "bool": ("bool", None), "null": ("null", None)}
BOUNDS = ("eq", "ne", "gt", "ge", "lt", "le")
# Names every description expression may use besides its op's own arguments.
GLOBALS = frozenset({"kernels", "np", "math", "DType"})
BUILTINS = frozenset(dir(builtins))
# Names the generated functions use for themselves: an argument (or a name
# pre_run assigns) called like one of them would break the generated code.
RESERVED = GLOBALS | frozenset({
    "ck", "op", "tensors", "arrays", "priv", "run", "found", "scratch",
    "Checker", "OpProto", "ParamArg", "TensorArg", "ParamType", "MemType",
})
# Names the generated optimizer functions use: a rule's tensors and constants
# must be named otherwise.
RULE_RESERVED = GLOBALS | frozenset({
    "ctx", "window", "target", "op", "ops", "b", "Builder", "OpView", "Combiner",
})
# Builtins hidden in the op being validated: its own arguments and pre_run
# names are locals of the generated functions, so e.g. a param `max` makes
# `max(...)` in an earlier param's check an unbound local, not the builtin.
_HIDDEN: ContextVar[frozenset] = ContextVar("hidden_builtins", default=frozenset())
# The named dtype sets of descriptions/types.yaml, while descriptions load.
_DTYPE_SETS: ContextVar[dict] = ContextVar("dtype_sets", default={})
MISSING = object()


# The model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A condition an op's arguments must satisfy, with an optional explanation."""

    expr: str
    msg: str | None
    names: tuple[str, ...]  # the argument names it reads, shown when it fails


@dataclass(frozen=True)
class TensorIn:
    arg_name: str
    doc: str
    dtype: tuple[str, ...]  # accepted dtypes; empty: any
    dtype_set: str | None  # the name of a set of descriptions/types.yaml, when one
    ndim: int | None
    len: str | None  # a literal number is declared data; an expression is checked by code
    sametype: str | None
    sameshape: str | None
    static: bool | None
    optional: bool
    variadic: bool
    min: int
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class TensorOut:
    arg_name: str
    doc: str
    dtype: str  # a dtype name or an expression
    shape: str
    static: bool
    owner: str | None
    view: str | None
    from_file: str | None
    input: bool  # fed by the user (set_data / Session.run), kept alive the whole run
    checks: tuple[Check, ...]  # after the output is defined: may read it


@dataclass(frozen=True)
class Bound:
    rule: str  # eq, ne, gt, ge, lt, le
    value: str  # a Python expression (a literal is one too)

    @property
    def literal(self) -> bool:
        return _is_number(self.value)


def _is_number(text) -> bool:
    """Whether an expression is a number literal (declared data, not code)."""
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class ParamDesc:
    arg_name: str
    doc: str
    type: str  # as written: int, float[2], string[], ...; an enum is `string`
    ptype: str
    realtype: str | None
    default: object  # MISSING when required
    bounds: tuple[Bound, ...]
    len: str | None  # of an array: a literal is declared data, an expression code
    choices: tuple
    checks: tuple[Check, ...]

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def is_array(self) -> bool:
        return self.ptype.endswith("[]")


@dataclass(frozen=True)
class Example:
    doc: str
    inputs: dict
    params: dict
    outputs: dict
    error: str | None


@dataclass(frozen=True)
class OpDesc:
    optype: str
    arch: str
    mtype: str
    doc: str
    inherits: str | None
    base: str | None  # the op whose pre_run this one's runs first (its parent, unless it drops checks)
    tensors_in: tuple[TensorIn, ...]
    tensors_out: tuple[TensorOut, ...]
    params: tuple[ParamDesc, ...]
    checks: tuple[Check, ...]
    pre_run: str | None
    pre_run_names: tuple[str, ...]  # names the pre_run code assigns; kept for run
    static_run: str | None
    run: str | None
    post_run: str | None
    examples: tuple[Example, ...]
    assemble: tuple[str, str, str] | None  # (output, variadic input, axis param)
    scratch: str | None  # bytes of per-run scratch memory the memory plan gives the op
    own: "OwnChecks"  # what this op's generated pre_run checks (its parent's run first)

    @property
    def runnable(self) -> bool:
        return self.arch != "none"


@dataclass(frozen=True)
class OwnChecks:
    """The part of an op's checks its own pre_run makes: all of them for an
    op without a base; for a variant, the params and inputs it adds (whole)
    and the checks it adds to its parent's args, outputs and op."""

    params: tuple[ParamDesc, ...]
    tensors_in: tuple[TensorIn, ...]
    checks: tuple[Check, ...]
    out_checks: tuple[tuple[str, Check], ...]  # (output, check)


@dataclass(frozen=True)
class Family:
    """One file of descriptions/ops: an abstract op and its arch variants."""

    name: str
    source: str
    ops: tuple[OpDesc, ...]


@dataclass(frozen=True)
class NewOp:
    """One op a rule puts in place: an optype, the op it starts from (`like`:
    its name, tensors and params), and expressions for what differs."""

    optype: str | None  # None: the optype of `like`
    like: str | None
    name: str | None
    ins: tuple[tuple[str, str], ...]
    outs: tuple[tuple[str, str], ...]
    params: tuple[tuple[str, str], ...]
    rename: tuple[tuple[str, str], ...]  # tensor -> tensor, in every arg of the op


@dataclass(frozen=True)
class Constant:
    """New weights a rule computes at compile time (constant folding): `expr`
    gives one array per name in `names` (a tuple when there are several)."""

    names: tuple[str, ...]
    expr: str


@dataclass(frozen=True)
class Rule:
    """`when` holds -> replace the matched op(s) by `replace` (empty: remove).
    `tensors` are fresh tensor names the new ops may create; `constants` new
    weights computed from known static data."""

    when: str | None
    tensors: tuple[str, ...]
    constants: tuple[Constant, ...]
    replace: tuple[NewOp, ...]


@dataclass(frozen=True)
class Expander:
    optype: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Combiner:
    name: str
    doc: str
    window: tuple[str, ...]
    rule: Rule


@dataclass(frozen=True)
class Optimizer:
    """One file of descriptions/optimizers: an arch's expanders and combiners."""

    arch: str
    doc: str
    source: str
    expanders: tuple[Expander, ...]
    combiners: tuple[Combiner, ...]
    fallback: str | None  # the arch that lowers what this one does not take


@dataclass(frozen=True)
class Descriptions:
    dtype_sets: dict[str, tuple[str, ...]]
    families: tuple[Family, ...]
    optimizers: tuple[Optimizer, ...]

    def ops(self):
        return [op for family in self.families for op in family.ops]


# Reading mappings with located errors ------------------------------------------------


class _Fields:
    """Typed access to a YAML mapping; reports unknown keys when done."""

    def __init__(self, value, file: str, path: str, line: int):
        if not isinstance(value, dict):
            raise DescriptionError(file, line, path, f"expected a mapping, found {_kind(value)}")
        self.map, self.file, self.path = value, file, path
        self.line = getattr(value, "line", line)
        self.used: set[str] = set()

    def where(self, key: str) -> tuple[str, int, str]:
        line = self.map.line_of(key) if isinstance(self.map, YMap) else self.line
        return self.file, line, f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> DescriptionError:
        return DescriptionError(*self.where(key), message)

    def get(self, key: str, kinds, default=MISSING):
        self.used.add(key)
        if key not in self.map:
            if default is MISSING:
                raise DescriptionError(self.file, self.line, self.path, f"'{key}' is required")
            return default
        value = self.map[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
            raise self.error(key, f"expected {_kinds(kinds)}, found {_kind(value)}")
        return value

    def items(self, key: str) -> list[tuple[object, str, int]]:
        """The elements of a list field with their paths and lines."""
        values = self.get(key, list, [])
        lines = values.lines if isinstance(values, YList) else []
        path = self.where(key)[2]
        names = getattr(values, "keys", None)  # arguments, written as a mapping
        return [(v, f"{path}.{names[i]}" if names else f"{path}[{i}]",
                 lines[i] if i < len(lines) else self.line)
                for i, v in enumerate(values)]

    def done(self) -> None:
        unknown = [k for k in self.map if k not in self.used]
        if unknown:
            raise self.error(unknown[0], f"unknown key '{unknown[0]}' (known here: "
                             f"{', '.join(sorted(self.used))})")


def _tuple(kinds):
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _kinds(kinds) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             list: "a list", dict: "a mapping", type(None): "null"}
    return " or ".join(names[k] for k in _tuple(kinds))


def _kind(value) -> str:
    if value is None:
        return "null"
    return {bool: "a bool", str: "a string", int: "an integer", float: "a number",
            list: "a list", dict: "a mapping", YList: "a list", YMap: "a mapping"}.get(
        type(value), type(value).__name__)


# Expressions and code snippets ------------------------------------------------------


def _names_read(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bindings(tree) -> tuple[list[str], set[str]]:
    """The names a snippet binds in its own scope (in order), and the names
    bound only inside its comprehensions, lambdas, functions and classes
    (which are defined there, but are not names the snippet keeps)."""
    top: list[str] = []
    inner: set[str] = set()

    def bind(name: str, nested: bool) -> None:
        if nested:
            inner.add(name)
        elif name not in top:
            top.append(name)

    def visit(node, in_func: bool, in_comp: bool) -> None:
        nested = in_func or in_comp
        if isinstance(node, ast.NamedExpr):  # binds in the enclosing function scope
            bind(node.target.id, in_func)
            visit(node.value, in_func, in_comp)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bind(node.id, nested)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, nested)
            in_func = True
        elif isinstance(node, ast.Lambda):
            in_func = True
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            in_comp = True
        elif isinstance(node, ast.arg):
            inner.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], nested)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, nested)
        for child in ast.iter_child_nodes(node):
            visit(child, in_func, in_comp)

    visit(tree, False, False)
    return top, inner


def _parse(text: str, mode: str, fields: _Fields, key: str):
    try:
        return ast.parse(text, mode=mode)
    except SyntaxError as e:
        file, line, path = fields.where(key)
        if mode == "exec" and isinstance(fields.map, YMap):
            line = fields.map.text_line(key) + (e.lineno or 1) - 1
        what = "expression" if mode == "eval" else "code"
        raise DescriptionError(file, line,
                               path, f"invalid Python {what}: {e.msg}: {text.strip()[:60]!r}") from None


def _check_names(tree, known, fields: _Fields, key: str, local=()) -> tuple[str, ...]:
    """The argument names `tree` reads; error on a name that is nowhere defined."""
    read = _names_read(tree)
    top, inner = _bindings(tree)
    hidden = _HIDDEN.get()
    unknown = sorted(read - set(known) - set(local) - set(top) - inner - GLOBALS
                     - (BUILTINS - hidden))
    if unknown:
        name = unknown[0]
        why = (f"; this op's own '{name}' hides the builtin, and is not defined here"
               if name in hidden else "")
        raise fields.error(key, f"unknown name '{name}' (known here: "
                           f"{', '.join(sorted(known)) or 'none'}, and {', '.join(sorted(GLOBALS))}"
                           f"{why})")
    return tuple(n for n in known if n in read)


def _expr(fields: _Fields, key: str, known, default=MISSING, allow_number=False):
    """An expression field: a Python expression string (or a number literal)."""
    kinds = (str, int, float) if allow_number else str
    value = fields.get(key, kinds, default)
    if value is default and default is not MISSING:
        return value
    text = str(value)
    _check_names(_parse(text, "eval", fields, key), known, fields, key)
    return text


def _code(fields: _Fields, key: str, known) -> tuple[str | None, list[str]]:
    """A code snippet and the names it assigns."""
    text = fields.get(key, str, None)
    if text is None:
        return None, []
    tree = _parse(text, "exec", fields, key)
    if not tree.body:  # empty, or only comments: no code (it would render no statement)
        return None, []
    stored, _ = _bindings(tree)
    _check_names(tree, known, fields, key)
    return text.rstrip() + "\n", stored


def _checks(fields: _Fields, known) -> tuple[Check, ...]:
    checks = []
    for value, path, line in fields.items("checks"):
        f = _Fields(value, fields.file, path, line)
        expr = f.get("expr", str)
        names = _check_names(_parse(expr, "eval", f, "expr"), known, f, "expr")
        checks.append(Check(expr, f.get("msg", str, None), names))
        f.done()
    return tuple(checks)


def _identifier(fields: _Fields, key: str) -> str:
    name = fields.get(key, str)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise fields.error(key, f"'{name}' is not a valid Python identifier")
    if name in RESERVED:
        raise fields.error(key, f"'{name}' is reserved: the generated code uses that name")
    return name


# Operator descriptions -------------------------------------------------------------------


_LIST_KEYS = ("tensors_in", "tensors_out", "params")


def _args_as_list(value: YMap, key: str, file: str, optype: str) -> None:
    """`tensors_in: {src: {...}, ...}` as the list of argument mappings the
    readers take, each with its `arg_name` (at the line of its key)."""
    args = value.get(key)
    if args is None or not isinstance(args, dict):
        return  # absent, or reported by the reader
    items = YList()
    items.line, items.keys = getattr(args, "line", 0), []
    for name, spec in args.items():
        line = args.line_of(name)
        if spec is None:
            spec = YMap()
            spec.line = line
        if not isinstance(spec, YMap):
            raise DescriptionError(file, line, f"{optype}.{key}.{name}",
                                   f"expected a mapping, found {_kind(spec)}")
        if "arg_name" in spec:
            raise DescriptionError(file, spec.line_of("arg_name"), f"{optype}.{key}.{name}",
                                   "the argument's name is its key: no 'arg_name'")
        item = YMap({"arg_name": name, **spec})
        item.line, item.lines = line, {"arg_name": line, **spec.lines}
        item.text_lines = spec.text_lines
        items.append(item)
        items.lines.append(line)
        items.keys.append(name)
    value[key] = items


def _merge(parent: YMap, child: YMap, file: str, optype: str) -> YMap:
    """A variant: its parent with what it adds. Arguments it names anew are
    added; naming an inherited one adds checks to it (and may say it in its
    own words, `doc`); op `checks` add to the parent's; `drop_checks` lists
    inherited checks (by expression) it does not make. Other keys (arch,
    doc, scratch, run code...) are its own."""
    f = _Fields(child, file, optype, 0)
    merged = YMap(parent)
    merged.line, merged.lines = child.line, {**parent.lines, **child.lines}
    merged.text_lines = {**parent.text_lines, **child.text_lines}
    for key, value in child.items():
        if key in _LIST_KEYS and isinstance(parent.get(key), list) and isinstance(value, list):
            merged[key] = _merge_args(parent[key], value, file, f"{optype}.{key}")
        elif key == "checks" and isinstance(parent.get(key), list) and isinstance(value, list):
            merged[key] = _concat(parent[key], value)
        elif key == "pre_run" and parent.get("pre_run") is not None:
            raise f.error(key, "a variant's parent has the pre_run: a variant adds checks, "
                               "and computes what its run needs in static_run")
        else:
            merged[key] = value  # including the child's own examples and inherits
    for key in ("examples", "drop_checks"):
        if key not in child:
            merged.pop(key, None)
    drops = child.get("drop_checks")
    if isinstance(drops, list):
        for i, expr in enumerate(drops):
            if not _drop_check(merged, expr):
                raise DescriptionError(file, drops.line_of(i), f"{optype}.drop_checks[{i}]",
                                       f"no inherited check is {expr!r}")
    return merged


def _concat(first: list, second: list) -> YList:
    result = YList([*first, *second])
    result.line = getattr(second, "line", 0)
    result.lines = [*getattr(first, "lines", []), *getattr(second, "lines", [])]
    return result


def _drop_check(merged: YMap, expr) -> bool:
    """Remove the inherited checks whose expression is `expr`; whether any was."""
    owners = [merged, *(a for key in _LIST_KEYS if isinstance(merged.get(key), list)
                        for a in merged[key] if isinstance(a, dict))]
    dropped = False
    for owner in owners:
        checks = owner.get("checks")
        if not isinstance(checks, list):
            continue
        keep = [i for i, c in enumerate(checks) if not (isinstance(c, dict) and c.get("expr") == expr)]
        if len(keep) < len(checks):
            kept = YList(checks[i] for i in keep)
            kept.line = checks.line
            kept.lines = [checks.line_of(i) for i in keep]
            owner["checks"] = kept
            dropped = True
    return dropped


# What a variant may say of an argument its parent gives.
_ADDABLE = ("arg_name", "checks", "doc")


def _merge_args(parent: list, child: list, file: str, path: str) -> YList:
    result = YList()
    result.line = getattr(child, "line", 0)
    result.keys = []
    by_name = {}
    for item in parent:
        by_name.setdefault(_arg_key(item), item)
    inherited, in_child = set(by_name), set()
    for item in child:
        name = _arg_key(item)
        if name in in_child:  # given twice by the child: keep both, for _unique to report
            name = id(item)
        in_child.add(name)
        old = by_name.get(name) if name in inherited else None
        if isinstance(old, YMap) and isinstance(item, YMap):
            for key in item:
                if key not in _ADDABLE:
                    raise DescriptionError(file, item.line_of(key), f"{path}.{name}.{key}",
                                           f"'{name}' is its parent's: a variant adds checks "
                                           f"to it, and cannot change its '{key}'")
            merged = YMap({**old, **item})
            merged.line, merged.lines = item.line, {**old.lines, **item.lines}
            merged.text_lines = {**old.text_lines, **item.text_lines}
            if isinstance(old.get("checks"), list) and isinstance(item.get("checks"), list):
                merged["checks"] = _concat(old["checks"], item["checks"])
            by_name[name] = merged
        else:
            by_name[name] = item
    for item in by_name.values():
        result.append(item)
        result.lines.append(getattr(item, "line", result.line))
        result.keys.append(item.get("arg_name") if isinstance(item, dict) else None)
    if not (getattr(parent, "keys", None) or getattr(child, "keys", None)) or None in result.keys:
        result.keys = None  # written as lists: paths by index
    return result


def _arg_key(item):
    """What list items merge by: the arg_name, when it is a string; else the
    item itself (its errors are reported when it is read)."""
    name = item.get("arg_name") if isinstance(item, dict) else None
    return name if isinstance(name, str) else id(item)


def _resolve_inheritance(raw: dict, file: str) -> dict:
    """Each op's mapping with its `inherits` chain (within the file) merged in."""
    resolved = {}

    def resolve(optype, chain):
        if optype in resolved:
            return resolved[optype]
        value = raw[optype]
        parent = value.get("inherits") if isinstance(value, dict) else None
        if parent is None:
            f = _Fields(value, file, optype, 0)
            if "drop_checks" in value:
                raise f.error("drop_checks", "only a variant (with 'inherits') drops checks")
            resolved[optype] = value
            return value
        f = _Fields(value, file, optype, 0)
        if not isinstance(parent, str) or parent not in raw:
            raise f.error("inherits", f"'{parent}' is not an op described in this file")
        if parent in chain:
            raise f.error("inherits", f"inheritance cycle: {' -> '.join(chain + [parent])}")
        f.get("drop_checks", list, None)
        resolved[optype] = _merge(resolve(parent, chain + [parent]), value, file, optype)
        return resolved[optype]

    for optype in raw:
        resolve(optype, [optype])
    return resolved


def _tensor_in(value, file, path, line) -> TensorIn:
    f = _Fields(value, file, path, line)
    arg = _identifier(f, "arg_name")
    written = f.get("dtype", (str, list), [])
    sets = _DTYPE_SETS.get()
    dtype = []
    for d in [written] if isinstance(written, str) else written:
        if d not in DTYPES and d not in sets:
            raise f.error("dtype", f"unknown dtype '{d}' (dtype sets of descriptions/types.yaml: "
                                   f"{', '.join(sets) or 'none'}; dtypes: {', '.join(DTYPES)})")
        dtype += [x for x in sets.get(d, [d]) if x not in dtype]
    variadic = f.get("variadic", bool, False)
    t = TensorIn(
        arg_name=arg,
        doc=f.get("doc", str, ""),
        dtype=tuple(dtype),
        dtype_set=written if isinstance(written, str) and written in sets else None,
        ndim=f.get("ndim", int, None),
        len=None,  # expressions are read once all names are known
        sametype=f.get("sametype", str, None),
        sameshape=f.get("sameshape", str, None),
        static=f.get("static", bool, None),
        optional=f.get("optional", bool, False),
        variadic=variadic,
        min=f.get("min", int, 1),
        checks=(),
    )
    if "min" in f.map and not variadic:
        raise f.error("min", "'min' is for variadic inputs only")
    if t.optional and t.variadic:
        raise f.error("optional", "a variadic input cannot also be optional")
    f.used.update(("len", "checks"))  # read by _tensor_in_exprs
    f.done()
    return t


def _tensor_in_exprs(t: TensorIn, value, file, path, line, known) -> TensorIn:
    f = _Fields(value, file, path, line)
    f.used.update(value)  # the other keys were read by _tensor_in
    f.used.discard("len")
    f.used.discard("checks")
    length = _expr(f, "len", known, None, allow_number=True)
    checks = _checks(f, known)
    f.done()
    return TensorIn(**{**t.__dict__, "len": length, "checks": checks})


def _param(value, file, path, line, known) -> ParamDesc:
    f = _Fields(value, file, path, line)
    arg = _identifier(f, "arg_name")
    known = [*known, arg]
    written = f.get("type", (str, list))
    length = None
    if isinstance(written, list):  # an enum: a string, one of these
        if not written or any(not isinstance(c, str) for c in written):
            raise f.error("type", "an enum type is a non-empty list of strings")
        ptype, realtype, choices, type_text = "string", None, tuple(written), "string"
    else:
        m = re.fullmatch(r"\s*(\w+)\s*(?:\[(.*)\])?\s*", written)
        if m is None or m.group(1) not in SCALAR_TYPES or (m.group(1) == "null" and m.group(2) is not None):
            raise f.error("type", f"unknown type '{written}' (known: {', '.join(SCALAR_TYPES)}, "
                                  "an array of one: int[], int[2], int[src.ndim]; or a list of "
                                  "choices: [A, B])")
        ptype, realtype = SCALAR_TYPES[m.group(1)]
        choices, type_text = (), written.strip()
        if m.group(2) is not None:
            ptype += "[]"
            length = m.group(2).strip() or None
            if length is not None:
                _check_names(_parse(length, "eval", f, "type"), known, f, "type")
    numeric = ptype.startswith("number")
    bounds = []
    for rule in BOUNDS:
        bound = _expr(f, rule, known, None, allow_number=True)
        if bound is not None:
            if not numeric:
                raise f.error(rule, f"bounds are for number params, not {type_text}")
            bounds.append(Bound(rule, str(bound)))
    default = MISSING
    if "default" in f.map:
        default = f.get("default", (str, int, float, bool, list, type(None)))
        _check_default(f, type_text, ptype, default, choices, realtype)
    p = ParamDesc(arg, f.get("doc", str, ""), type_text, ptype, realtype, default,
                  tuple(bounds), length, choices, _checks(f, known))
    f.done()
    return p


def _check_default(f: _Fields, type_text: str, ptype: str, default, choices,
                   realtype=None) -> None:
    scalar = ptype.removesuffix("[]")
    values = default if ptype.endswith("[]") else [default]
    if ptype.endswith("[]") and not isinstance(default, list):
        article = "an" if type_text[0] in "aeiou" else "a"
        raise f.error("default", f"expected a list for {article} {type_text} param, "
                                 f"found {_kind(default)}")
    python = {"null": type(None), "string": str, "number": (int, float), "bool": bool}[scalar]
    for v in values:
        if not isinstance(v, python) or (isinstance(v, bool) and scalar == "number"):
            raise f.error("default", f"expected a {scalar} default, found {_kind(v)}")
        if realtype == "int" and isinstance(v, float) and not v.is_integer():
            raise f.error("default", f"expected an integer default (type int), found {v!r}")
        if choices and v not in choices:
            raise f.error("default", f"default {v!r} is not one of the choices")


def _tensor_out(value, file, path, line, known, ins) -> TensorOut:
    f = _Fields(value, file, path, line)
    arg = _identifier(f, "arg_name")
    dtype = f.get("dtype", str)
    if dtype not in DTYPES:
        _check_names(_parse(dtype, "eval", f, "dtype"), known, f, "dtype")
    owner = f.get("owner", str, None)
    if owner is not None and owner not in ins:
        raise f.error("owner", f"'{owner}' is not an input of this op")
    view = _expr(f, "view", known, None)
    if view is not None and owner is None:
        raise f.error("view", "a view needs an 'owner' input whose memory it shares")
    t = TensorOut(arg, f.get("doc", str, ""), dtype, _expr(f, "shape", known),
                  f.get("static", bool, False), owner, view,
                  _expr(f, "from_file", known, None), f.get("input", bool, False),
                  _checks(f, [*known, arg]))
    f.done()
    return t


def _example(value, file, path, line, op_ins, op_outs, op_params) -> Example:
    f = _Fields(value, file, path, line)
    inputs = f.get("inputs", dict, {})
    params = f.get("params", dict, {})
    outputs = f.get("outputs", dict, {})
    error = f.get("error", str, None)
    if (error is None) == (not outputs):
        raise DescriptionError(file, line, path, "an example gives either 'outputs' or 'error'")
    for key, names, given in (("inputs", op_ins, inputs), ("outputs", op_outs, outputs),
                              ("params", op_params, params)):
        for name in given:
            if name not in names and not any(name.startswith(v) and name[len(v):].isdigit()
                                             for v in names):
                raise f.error(key, f"'{name}' is not one of {', '.join(names) or 'none'}")
    ex = Example(f.get("doc", str, ""), _plain(inputs), _plain(params), _plain(outputs), error)
    f.done()
    return ex


def _plain(value):
    """YMap/YList trees as plain dicts and lists (for rendering as literals)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _own_names(value) -> frozenset:
    """The argument names an op mapping gives and the names its pre_run assigns."""
    names = set()
    for key in _LIST_KEYS:
        items = value.get(key)
        if isinstance(items, list):
            names.update(i["arg_name"] for i in items
                         if isinstance(i, dict) and isinstance(i.get("arg_name"), str))
    if isinstance(value.get("pre_run"), str):
        try:
            names.update(_bindings(ast.parse(value["pre_run"]))[0])
        except SyntaxError:
            pass  # reported with its line when pre_run is read
    return frozenset(names)


def _op(optype: str, value, file: str) -> OpDesc:
    token = _HIDDEN.set(_own_names(value) & BUILTINS)
    try:
        return _op_checked(optype, value, file)
    finally:
        _HIDDEN.reset(token)


def _op_checked(optype: str, value, file: str) -> OpDesc:
    f = _Fields(value, file, optype, 0)
    if not optype.isidentifier() or keyword.iskeyword(optype):
        raise DescriptionError(file, f.line, optype, "an optype must be a Python identifier")
    f.used.update(("inherits", "drop_checks"))  # read when the variant was merged
    arch = f.get("arch", str)
    if arch not in ARCHS:
        raise f.error("arch", f"unknown arch '{arch}' (known: {', '.join(ARCHS)})")
    mtype = f.get("mtype", str, "none" if arch == "none" else arch)
    if mtype not in MTYPES:
        raise f.error("mtype", f"unknown mtype '{mtype}' (known: {', '.join(MTYPES)})")

    raw_ins = f.items("tensors_in")
    ins = [_tensor_in(v, file, p, l) for v, p, l in raw_ins]
    in_names = [t.arg_name for t in ins]
    _unique(file, [], raw_ins, in_names)
    for t, (v, p, l) in zip(ins, raw_ins):
        g = _Fields(v, file, p, l)
        for key in ("sametype", "sameshape"):
            other = getattr(t, key)
            if other is not None and (other not in in_names or other == t.arg_name):
                raise g.error(key, f"'{other}' is not another input of this op")

    params = []
    raw_params = f.items("params")
    for v, p, l in raw_params:
        params.append(_param(v, file, p, l, [*in_names, *(q.arg_name for q in params)]))
    param_names = [p.arg_name for p in params]
    _unique(file, in_names, raw_params, param_names)
    known = [*in_names, *param_names]
    ins = [_tensor_in_exprs(t, v, file, p, l, known) for t, (v, p, l) in zip(ins, raw_ins)]
    checks = _checks(f, known)
    pre_run, pre_run_names = _code(f, "pre_run", [*known, "op"])
    for name in pre_run_names:
        if name in RESERVED:
            raise f.error("pre_run", f"pre_run assigns '{name}', a name the generated code uses")
    known = [*known, *(n for n in pre_run_names if n not in known)]

    outs = []
    raw_outs = f.items("tensors_out")
    for v, p, l in raw_outs:
        outs.append(_tensor_out(v, file, p, l, [*known, *(o.arg_name for o in outs)], in_names))
    out_names = [o.arg_name for o in outs]
    _unique(file, known, raw_outs, out_names)

    scratch = _expr(f, "scratch", [*known, *out_names], None, allow_number=True)
    if scratch is not None and arch == "none":
        raise f.error("scratch", "an abstract op (arch none) has no scratch memory")
    run_known = [*known, *out_names, "priv", "op", *(["scratch"] if scratch else [])]
    static_run, static_names = _code(f, "static_run", run_known)
    run, run_names = _code(f, "run", [*run_known, *static_names])  # closes over static_run's
    # The arrays are bound before static_run, and run is a closure: assigning
    # one of the names it closes over makes it a local of run (unbound).
    for key, names, outer in (("static_run", static_names, [*in_names, *out_names]),
                              ("run", run_names, [*run_known, *static_names])):
        rebound = [n for n in names if n in outer]
        if rebound:
            raise f.error(key, f"{key} assigns '{rebound[0]}', a name it is given: write "
                               f"into arrays ({rebound[0]}[...] = ..., out=), never rebind them")
    post_run, _ = _code(f, "post_run", ["priv", "op", *param_names])
    if arch == "none" and (static_run or run):
        raise f.error("static_run" if static_run else "run",
                      "an abstract op (arch none) has no run code")
    examples = tuple(_example(v, file, p, l, in_names, out_names, param_names)
                     for v, p, l in f.items("examples"))
    inherits = value.get("inherits")
    op = OpDesc(optype, arch, mtype, f.get("doc", str, ""), inherits,
                None if "drop_checks" in value else inherits,
                tuple(ins), tuple(outs), tuple(params), checks, pre_run,
                tuple(pre_run_names), static_run, run, post_run, examples,
                _assemble(f, ins, outs, params), scratch,
                OwnChecks(tuple(params), tuple(ins), checks,
                          tuple((t.arg_name, c) for t in outs for c in t.checks)))
    f.done()
    return op


def _assemble(f: _Fields, ins, outs, params) -> tuple[str, str, str] | None:
    """`assemble: {output: dst, inputs: src, axis: axis}`: the output is the
    variadic inputs laid end to end along the axis param (concat)."""
    value = f.get("assemble", dict, None)
    if value is None:
        return None
    g = _Fields(value, f.file, f.where("assemble")[2], f.where("assemble")[1])
    output, inputs, axis = g.get("output", str), g.get("inputs", str), g.get("axis", str)
    if output not in [t.arg_name for t in outs]:
        raise g.error("output", f"'{output}' is not an output of this op")
    if inputs not in [t.arg_name for t in ins if t.variadic]:
        raise g.error("inputs", f"'{inputs}' is not a variadic input of this op")
    if axis not in [p.arg_name for p in params if p.realtype == "int" and p.ptype == "number"]:
        raise g.error("axis", f"'{axis}' is not an int number param of this op")
    g.done()
    return output, inputs, axis


def _unique(file: str, earlier, items, names) -> None:
    """Error at the arg_name of the first item whose name is taken: by `earlier`
    names or an earlier item. `items` are the (value, path, line) of `names`."""
    seen = set(earlier)
    for name, (value, path, line) in zip(names, items):
        if name in seen:
            line = value.line_of("arg_name") if isinstance(value, YMap) else line
            raise DescriptionError(file, line, f"{path}.arg_name",
                                   f"name '{name}' is used twice in this op")
        seen.add(name)


def load_family(path: Path, label: str, taken: dict[str, str] | None = None) -> Family:
    """The ops of one file; `taken` maps optypes of other files to their file."""
    doc = load_yaml(path, label)
    if not isinstance(doc, dict) or not doc:
        raise DescriptionError(label, 1, "", "expected a mapping of optype to description")
    for optype, value in doc.items():
        if not isinstance(value, dict):
            raise DescriptionError(label, doc.line_of(optype), optype,
                                   f"expected a mapping, found {_kind(value)}")
        if taken and optype in taken:
            raise DescriptionError(label, doc.line_of(optype), optype,
                                   f"optype also described in {taken[optype]}")
        value.line = doc.line_of(optype)  # an op's own errors point at its name
        for key in _LIST_KEYS:
            _args_as_list(value, key, label, optype)
    resolved = _resolve_inheritance(doc, label)
    ops = {optype: _op(optype, resolved[optype], label) for optype in doc}
    return Family(path.stem, label, tuple(_own_checks(op, ops) for op in ops.values()))


def _own_checks(op: OpDesc, ops: dict[str, OpDesc]) -> OpDesc:
    """`op` with the checks its own pre_run makes: what it adds to its base's."""
    if op.base is None:
        return op
    base = ops[op.base]
    params = {p.arg_name: p for p in base.params}
    ins = {t.arg_name: t for t in base.tensors_in}
    outs = {t.arg_name: t for t in base.tensors_out}
    own_params = tuple(
        p if p.arg_name not in params else dataclasses.replace(
            p, bounds=(), len=None, checks=p.checks[len(params[p.arg_name].checks):])
        for p in op.params)
    own_ins = tuple(
        t if t.arg_name not in ins else dataclasses.replace(
            t, len=None, checks=t.checks[len(ins[t.arg_name].checks):])
        for t in op.tensors_in)
    own_outs = tuple((t.arg_name, c) for t in op.tensors_out
                     for c in t.checks[len(outs[t.arg_name].checks):])
    own = OwnChecks(own_params, own_ins, op.checks[len(base.checks):], own_outs)
    return dataclasses.replace(op, own=own)


# Optimizer descriptions ----------------------------------------------------------------


def _new_op(value, file, path, line, arch, ops, known, likes) -> NewOp:
    f = _Fields(value, file, path, line)
    like = f.get("like", str, None)
    if like is not None and like not in likes:
        raise f.error("like", f"expected one of {', '.join(likes)}, found '{like}'")
    optype = f.get("optype", str, None)
    if optype is None and like is None:
        raise DescriptionError(file, line, path, "a new op needs 'optype', 'like' or both")
    if optype is not None and (optype not in ops or ops[optype].arch != arch):
        raise f.error("optype", f"'{optype}' is not an op of arch '{arch}'")
    name = _expr(f, "name", known, None)
    mapped = {}
    for key in ("ins", "outs", "params", "rename"):
        items = []
        for arg, expr in f.get(key, dict, {}).items():
            if optype is not None and key != "rename":
                _check_arg(f, key, arg, ops[optype])
            text = expr if isinstance(expr, str) else repr(_plain(expr))
            _check_names(_parse(text, "eval", f, key), known, f, key)
            if key == "rename":
                _check_names(_parse(arg, "eval", f, key), known, f, key)
            items.append((arg, text))
        mapped[key] = tuple(items)
    f.done()
    return NewOp(optype, like, name, mapped["ins"], mapped["outs"], mapped["params"],
                 mapped["rename"])


def _check_arg(f: _Fields, key: str, arg: str, op: OpDesc) -> None:
    names = {"ins": [t.arg_name for t in op.tensors_in],
             "outs": [t.arg_name for t in op.tensors_out],
             "params": [p.arg_name for p in op.params]}[key]
    variadic = [t.arg_name for t in op.tensors_in if t.variadic] if key == "ins" else []
    if arg not in names and not any(arg.startswith(v) and arg[len(v):].isdigit()
                                    for v in variadic):
        raise f.error(key, f"'{arg}' is not one of {', '.join(names) or 'none'} of {op.optype}")


def _constants(f: _Fields, arch: str, ops, known) -> tuple[Constant, ...]:
    """The `constants` key: `name: expr` or `name1, name2: expr` (a tuple)."""
    value = f.get("constants", dict, {})
    if not value:
        return ()
    file, line, path = f.where("constants")
    g = _Fields(value, file, path, line)
    constants, seen = [], set(known)
    for key in g.map:
        names = tuple(n.strip() for n in str(key).split(","))
        for n in names:
            if not n.isidentifier() or keyword.iskeyword(n):
                raise g.error(key, f"expected names separated by commas, found '{key}'")
            if n in seen:
                raise g.error(key, f"'{n}' is already a name of this rule")
            if n in RULE_RESERVED:
                raise g.error(key, f"'{n}' is reserved: the generated code uses that name")
            seen.add(n)
        constants.append(Constant(names, _expr(g, key, known)))
    g.done()
    if f"create_{arch}" not in ops:
        raise f.error("constants", f"folded constants need the op create_{arch}")
    return tuple(constants)


def _rule(f: _Fields, arch: str, ops, subject: str, likes) -> Rule:
    """The when / tensors / constants / replace keys shared by expander and
    combiner rules."""
    tensors = tuple(f.get("tensors", list, []))
    for t in tensors:
        if not isinstance(t, str) or not t.isidentifier():
            raise f.error("tensors", f"tensor names must be identifiers, found {t!r}")
        if t in RULE_RESERVED:
            raise f.error("tensors", f"'{t}' is reserved: the generated code uses that name")
    constants = _constants(f, arch, ops, [subject, *tensors])
    known = [subject, *tensors, *(n for c in constants for n in c.names)]
    when = _expr(f, "when", [subject], None)
    replace = f.get("replace", (str, list))
    if isinstance(replace, str):  # shorthand: the op under another optype
        if replace not in ops or ops[replace].arch != arch:
            raise f.error("replace", f"'{replace}' is not an op of arch '{arch}'")
        new_ops = (NewOp(replace, likes[0], None, (), (), (), ()),)
    else:
        new_ops = tuple(_new_op(v, f.file, p, l, arch, ops, known, likes)
                        for v, p, l in f.items("replace"))
    return Rule(when, tensors, constants, new_ops)


def load_optimizer(path: Path, label: str, ops: dict[str, OpDesc]) -> Optimizer:
    doc = load_yaml(path, label)
    f = _Fields(doc, label, "", 1)
    arch = f.get("arch", str)
    if arch not in ARCHS or arch == "none":
        raise f.error("arch", f"expected a runnable arch ({', '.join(ARCHS[1:])}), found '{arch}'")
    if path.stem != arch:
        raise f.error("arch", f"the file of arch '{arch}' must be named {arch}.yaml")
    expanders = []
    g = _Fields(f.get("expanders", dict, {}), label, "expanders", f.line)
    for optype in g.map:
        if optype not in ops or ops[optype].arch != "none":
            raise g.error(optype, f"'{optype}' is not an abstract op (arch none)")
        items = g.items(optype)
        if not items:
            raise g.error(optype, "expected a non-empty list of rules")
        rules = []
        for i, (value, path_i, line) in enumerate(items):
            r = _Fields(value, label, path_i, line)
            rule = _rule(r, arch, ops, "op", ["op"])
            if rule.when is None and i != len(items) - 1:
                raise r.error("when", "only the last rule may omit 'when' (it always matches)")
            rules.append(rule)
            r.done()
        expanders.append(Expander(optype, tuple(rules)))
    combiners = []
    c = _Fields(f.get("combiners", dict, {}), label, "combiners", f.line)
    for name in c.map:
        if not name.isidentifier():
            raise c.error(name, f"a combiner name must be an identifier, found '{name}'")
        r = _Fields(c.get(name, dict), label, f"combiners.{name}", c.where(name)[1])
        window = r.get("window", list)
        if len(window) < 1 or any(w != "*" and (w not in ops or ops[w].arch != arch)
                                  for w in window):
            raise r.error("window", f"expected a list of ops of arch '{arch}' (or *), "
                                    f"found {window}")
        likes = [f"ops[{i}]" for i in range(len(window))]
        combiners.append(Combiner(name, r.get("doc", str, ""), tuple(window),
                                  _rule(r, arch, ops, "ops", likes)))
        r.done()
    fallback = f.get("fallback", str, None)
    runnable = sorted({op.arch for op in ops.values()} - {"none", arch})
    if fallback is not None and fallback not in runnable:
        raise f.error("fallback", f"expected another runnable arch ({', '.join(runnable) or 'none'}), "
                                  f"found '{fallback}'")
    opt = Optimizer(arch, f.get("doc", str, ""), label, tuple(expanders), tuple(combiners),
                    fallback)
    f.done()
    return opt


def load_types(path: Path, label: str) -> dict[str, tuple[str, ...]]:
    """The named dtype sets of descriptions/types.yaml."""
    if not path.exists():
        return {}
    doc = load_yaml(path, label)
    f = _Fields(doc, label, "", 1)
    g = _Fields(f.get("dtypes", dict), label, "dtypes", f.where("dtypes")[1])
    sets = {}
    for name in g.map:
        if not name.isidentifier() or name in DTYPES:
            raise g.error(name, f"a dtype set name is an identifier other than a dtype, found '{name}'")
        members = g.get(name, list)
        if not members or any(d not in DTYPES for d in members) or len(set(members)) < len(members):
            raise g.error(name, f"expected a list of distinct dtypes ({', '.join(DTYPES)})")
        sets[name] = tuple(members)
    g.done()
    f.done()
    return sets


def load(root: Path) -> Descriptions:
    """Every description under `root`/descriptions, validated."""
    sets = load_types(root / "descriptions" / "types.yaml", "descriptions/types.yaml")
    token = _DTYPE_SETS.set(sets)
    try:
        return _load(root, sets)
    finally:
        _DTYPE_SETS.reset(token)


def _load(root: Path, sets) -> Descriptions:
    families = []
    ops: dict[str, tuple[OpDesc, str]] = {}
    for path in sorted((root / "descriptions" / "ops").glob("*.yaml")):
        label = path.relative_to(root).as_posix()
        family = load_family(path, label, {optype: file for optype, (_, file) in ops.items()})
        for op in family.ops:
            ops[op.optype] = (op, label)
        families.append(family)
    by_optype = {optype: op for optype, (op, _) in ops.items()}
    optimizers = {}
    for path in sorted((root / "descriptions" / "optimizers").glob("*.yaml")):
        optimizer = load_optimizer(path, path.relative_to(root).as_posix(), by_optype)
        optimizers[optimizer.arch] = optimizer
    archs = sorted({op.arch for op in by_optype.values() if op.runnable})
    return Descriptions(
        sets,
        tuple(families),
        tuple(optimizers[arch] for arch in archs if arch in optimizers),
    )
