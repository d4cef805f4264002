"""Rendering: descriptions through jinja templates, formatted by black.

The templates hold the shape of the generated code; the filters here turn
model values into Python source fragments. Output depends only on the
descriptions, the templates and the pinned black version.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import black
import jinja2

from generator.schema import (DTYPES, Descriptions, Family, OpDesc, Optimizer, ParamGroup,
                              TensorIn, is_number)

BLACK_VERSION = "26.10.1"  # the one pinned in pyproject.toml
BLACK_MODE = black.Mode(target_versions={black.TargetVersion.PY311}, line_length=88)


class RenderError(Exception):
    pass


def _tuple_of(items) -> str:
    items = list(items)
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _ptype(ptype: str) -> str:
    return ("ARRAY_" if ptype.endswith("[]") else "") + ptype.removesuffix("[]").upper()


def _literal(value) -> str:
    """A default as the Python value checked params have: arrays are tuples."""
    if isinstance(value, list):
        return repr(tuple(value))
    return repr(value)


def _dtype_expr(text: str) -> str:
    return f"DType.{text}" if text in DTYPES else text


def _dtypes_literal(t) -> str:
    if t.dtype_set:
        return t.dtype_set.upper()
    return _tuple_of(f"DType.{d}" for d in t.dtype)


def _tensor_arg(t) -> str:
    """A TensorArg with the constraints the description declares of it."""
    extra = ""
    if getattr(t, "optional", False):
        extra += ", optional=True"
    if getattr(t, "variadic", False):
        extra += f", variadic=True, min={t.min}"
    if getattr(t, "dtype", None) and not isinstance(t.dtype, str):
        extra += f", dtype={_dtypes_literal(t)}"
    for key in ("ndim", "min_ndim", "static", "sametype", "sameshape"):
        value = getattr(t, key, None) if hasattr(t, "sametype") else None
        if value is not None:
            extra += f", {key}={value!r}"
    if getattr(t, "len", None) is not None and hasattr(t, "sametype") and is_number(t.len):
        extra += f", len={t.len}"
    return f'TensorArg("{t.arg_name}"{extra})'


def _param_arg(p) -> str:
    """A ParamArg with its declared constraints: type, length, literal bounds, choices."""
    extra = "" if p.required else f", {_literal(p.default)}"
    if p.realtype:
        extra += f", realtype={p.realtype!r}"
    if p.len is not None and is_number(p.len):
        extra += f", length={p.len}"
    bounds = [f"({b.rule!r}, {b.value})" for b in p.bounds if b.literal]
    if bounds:
        extra += f", bounds={_tuple_of(bounds)}"
    if p.choices:
        extra += f", choices={_tuple_of(map(repr, p.choices))}"
    return f'ParamArg("{p.arg_name}", ParamType.{_ptype(p.ptype)}{extra})'


def _group_table(group: ParamGroup, groups) -> str:
    """A group's ParamArgs, those of the group it extends by reference (a run
    of them as one starred item)."""
    parent = next((g for g in groups if g.name == group.extends), None)
    parts, run = [], []

    def flush():
        if run:
            whole = run[0] == 0 and len(run) == len(parent.params)
            name = parent.name.upper()
            parts.append(f"*{name}" if whole else f"*{name}[{run[0]}:{run[-1] + 1}]")
            run.clear()

    for p, index in zip(group.params, group.inherited):
        if index is None or (run and index != run[-1] + 1):
            flush()
        if index is None:
            parts.append(_param_arg(p))
        else:
            run.append(index)
    flush()
    return _tuple_of(parts)


def _comment(text: str) -> str:
    return "\n".join("# " + line for line in textwrap.wrap(" ".join(text.split()), 86))


def _kept_names(op: OpDesc) -> list[str]:
    params = [p.arg_name for p in op.params]
    return params + [n for n in op.pre_run_names if n not in params]


def _verifiers(op: OpDesc) -> list[str]:
    """The shared verifiers an op's own pre_run calls: its arch's dtype check,
    its groups' param checks."""
    calls = [f"{p.group}_{p.arg_name}(ck)" for p in op.own.params if p.group_checks]
    calls += [f"{group}_checks(ck)" for group in op.own.groups]
    if op.own.dtype_checked:
        calls.append(f"{op.arch}_dtype(ck, {op.dtype_checked!r})")
    return calls


def _own_exprs(op: OpDesc) -> list[str]:
    """The expressions and code an op's own pre_run holds (besides verifiers)."""
    own = op.own
    texts = [c.expr for c in own.checks] + [c.expr for _, c in own.out_checks]
    for p in own.params:
        texts += [c.expr for c in p.checks[p.group_checks:]]
        texts += [f"{p.arg_name}, {b.value}" for b in p.bounds if not b.literal]
        texts += [f"{p.arg_name}, {p.len}"] if p.len is not None and not is_number(p.len) else []
    for t in own.tensors_in:
        texts += [c.expr for c in t.checks[t.group_checks:]]
        texts += [f"{t.arg_name}, {t.len}"] if t.len is not None and not is_number(t.len) else []
    texts += [_output_code(t) for t in own.tensors_out]
    return texts


def _satisfied(op: OpDesc) -> list:
    """The checks an op's own pre_run makes with ck.satisfy (reading `found`)."""
    own = op.own
    return [*(c for p in own.params for c in p.checks[p.group_checks:]),
            *(c for t in own.tensors_in for c in t.checks[t.group_checks:]), *own.checks,
            *(c for _, c in own.out_checks)]


def _has_pre_run(op: OpDesc) -> bool:
    return op.base is None or bool(_own_exprs(op)) or bool(_verifiers(op))


def _pre_run_checks(op: OpDesc) -> bool:
    """Whether the op's own pre_run uses a Checker (to check, define or read)."""
    return (bool(_own_exprs(op)) or (op.base is None and bool(op.tensors_out))
            or bool(_pre_run_reads(op)) or bool(_verifiers(op)))


def _fitting(items: list, statement) -> list[str]:
    """`statement(chunk)` for consecutive chunks of `items`, each chunk as long
    as fits a line of a function body (88 columns, indented by 4): black would
    give an item a line."""
    lines, chunk = [], []
    for item in items:
        if chunk and len(statement([*chunk, item])) > 84:
            lines.append(statement(chunk))
            chunk = []
        chunk.append(item)
    return lines + ([statement(chunk)] if chunk else [])


def _get_lines(names: list[str], call: str, *lead: str) -> list[str]:
    """`a, b = ck.get("a", "b")`: statements binding `names` to what `call` gives (its
    arguments `lead`, then the names)."""
    def statement(chunk):
        targets = ", ".join(chunk) + ("," if len(chunk) == 1 else "")
        return f"{targets} = {call}({', '.join([*lead, *(f'{n!r}' for n in chunk)])})"

    return _fitting(names, statement)


def _parent(op: OpDesc, family: Family) -> OpDesc | None:
    return next((o for o in family.ops if o.optype == op.inherits), None)


def _definition_order(family: Family) -> list[OpDesc]:
    """The ops of a family, each after the op it inherits, whose tables it reads."""
    order: list[OpDesc] = []

    def visit(op):
        if op not in order:
            parent = _parent(op, family)
            if parent is not None:
                visit(parent)
            order.append(op)

    for op in family.ops:
        visit(op)
    return order


def _table_parts(op: OpDesc, family: Family, groups, kind: str) -> tuple[list[str], list]:
    """An op's args of `kind` (tensors_in, tensors_out, params) as items of a
    tuple: its parent's by reference, then (params) its groups' by reference,
    then its own; and its own."""
    parent = _parent(op, family)
    items = list(getattr(op, kind))
    parts, start = [], 0
    if parent is not None and getattr(parent, kind):
        parts.append(f"*{parent.optype.upper()}.{kind}")
        start = len(getattr(parent, kind))
    if kind == "params":
        for name in op.param_groups:
            parts.append(f"*{name.upper()}")
            start += len(groups[name].params)
    return parts, items[start:]


def _adds(op: OpDesc, family: Family, groups, kind: str) -> bool:
    """Whether a variant takes args of `kind` its parent does not."""
    return bool(_table_parts(op, family, groups, kind)[1]) or (
        kind == "params" and bool(op.param_groups))


def _table(op: OpDesc, family: Family, groups, kind: str) -> str:
    parts, own = _table_parts(op, family, groups, kind)
    parts += map(_param_arg if kind == "params" else _tensor_arg, own)
    return parts[0][1:] if len(parts) == 1 and parts[0].startswith("*") else _tuple_of(parts)


_TABLES = ("tensors_in", "tensors_out", "params")


def _proto_fields(op: OpDesc, family: Family, groups) -> dict[str, str]:
    """The OpProto fields of `op` as Python expressions (those that are set)."""
    fields = {"optype": repr(op.optype), "arch": repr(op.arch),
              "mtype": f"MemType.{op.mtype.upper()}",
              **{kind: _table(op, family, groups, kind) for kind in _TABLES},
              "pre_run": f"{_pre_run_of(op, family)}_pre_run", "source": repr(family.source)}
    if op.scratch:
        fields["scratch"] = f"{_hooks_of(_scratch_op(op, family))}_scratch"
    if any(t.view for t in op.tensors_out):
        fields["views"] = f"{_views_of(op, family)}_views"
    if op.static_run or op.run:
        fields["load"] = f"{_hooks_of(op)}_load"
    if op.post_run:
        fields["post_run"] = f"{op.optype}_post_run"
    if op.assemble:
        fields["assemble"] = _tuple_of(map(repr, op.assemble))
    return fields


def _proto(op: OpDesc, family: Family, groups) -> str:
    """`OP = OpProto(...)`; for a variant, `OP = replace(PARENT, ...)` with
    what differs from its parent (the args it adds to the parent's)."""
    fields = _proto_fields(op, family, groups)
    parent = _parent(op, family)
    if parent is None:
        args = [f"{k}={v}" for k, v in fields.items()]
        return f"{op.optype.upper()} = OpProto({', '.join(args)})"
    inherited = _proto_fields(parent, family, groups)
    args = [f"{k}={v}" for k, v in fields.items()
            if (_adds(op, family, groups, k) if k in _TABLES else v != inherited.get(k))]
    args += [f"{k}=None" for k in inherited if k not in fields]
    return f"{op.optype.upper()} = replace({parent.optype.upper()}, {', '.join(args)})"


def _pre_run_reads(op: OpDesc) -> list[str]:
    """The names the op's own pre_run reads of its inputs, params, outputs
    (defined by its base) and the names its base's pre_run kept."""
    texts = _own_exprs(op)
    if op.base is None:
        texts += [op.pre_run or ""]
        texts += [_output_code(t) for t in op.tensors_out]
    return _names_in(op, "\n".join(texts), outputs=op.base is not None)


def _names_in(op: OpDesc, code: str, outputs: bool = True) -> list[str]:
    """The names `code` reads that a Checker gets, in argument order."""
    read = _names_read(code) if code.strip() else set()
    names = [t.arg_name for t in op.tensors_in]
    names += [t.arg_name for t in op.tensors_out] if outputs else []
    names += _kept_names(op) if outputs else [p.arg_name for p in op.params]
    return [n for n in dict.fromkeys(names) if n in read]


def _dtype_code(text: str) -> str:
    return "" if text in DTYPES else text


def _output_code(t) -> str:
    """The expressions that define output `t` (its shape, dtype, file name)."""
    return t.shape + "\n" + _dtype_code(t.dtype) + "\n" + (t.from_file or "")


def _chain(op: OpDesc, family: Family):
    """`op` and the ops it inherits from, nearest first."""
    by_optype = {o.optype: o for o in family.ops}
    while op is not None:
        yield op
        op = by_optype.get(op.inherits) if op.inherits else None


def _pre_run_of(op: OpDesc, family: Family) -> str:
    """The op whose generated pre_run this op uses: itself, or its nearest
    base that has one."""
    by_optype = {o.optype: o for o in family.ops}
    while not _has_pre_run(op):
        op = by_optype[op.base]
    return op.optype


def _scratch_op(op: OpDesc, family: Family) -> OpDesc:
    """The op whose scratch function this op uses (the same expression)."""
    owner = op
    for o in _chain(op, family):
        if o.scratch != op.scratch:
            break
        owner = o
    return owner


def _scratch_of(op: OpDesc, family: Family) -> str:
    return _scratch_op(op, family).optype


def _hooks_of(op: OpDesc) -> str:
    """The prefix of the names of `op`'s hook functions: its template's (written once,
    in lightnet/auto/templates.py), else its own optype."""
    return f"{op.arch}_{op.template}" if op.template else op.optype


def _template_hooks(op: OpDesc, family: Family) -> list[str]:
    """The template hook functions `op` uses (its scratch may be its parent's)."""
    owner = _scratch_op(op, family)
    names = [f"{_hooks_of(owner)}_scratch"] if op.scratch and owner.template else []
    return names + ([f"{_hooks_of(op)}_load"] if op.template else [])


def _views_of(op: OpDesc, family: Family) -> str:
    return list(_chain(op, family))[-1].optype  # outputs are the root's


def _names_read(code: str) -> set[str]:
    tree = ast.parse(code)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _run_function(code: str | None) -> str | None:
    """The run function of run code that is one expression (without comments, which a
    lambda would drop): a lambda of it, or the function it calls without arguments (a
    call less per run); None for other code."""
    body = ast.parse(code).body if code else []
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    if any(t.type == tokenize.COMMENT for t in tokens):
        return None
    expr = body[0].value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not (
            expr.args or expr.keywords):
        return expr.func.id  # `execute()`: the run function is `execute` itself
    return f"lambda: {ast.get_source_segment(code, body[0])}"


def _bind_lines(op: OpDesc, code: str) -> list[str]:
    """Statements binding the names `code` reads: arrays, checked values, priv
    (as few as fit on a line each)."""
    used = _names_read(code) if code else set()
    tensors = [t for t in (*op.tensors_in, *op.tensors_out) if t.arg_name in used]
    lines = _get_lines([t.arg_name for t in tensors if not getattr(t, "variadic", False)],
                       "op.arrays", "arrays")
    binds = [(t.arg_name, f'op.arrays_in(arrays, "{t.arg_name}")')
             for t in tensors if getattr(t, "variadic", False)]
    binds += [(name, f'op.values["{name}"]') for name in _kept_names(op) if name in used]
    lines += _fitting(binds, lambda chunk: f"{', '.join(n for n, _ in chunk)} = "
                                           f"{', '.join(v for _, v in chunk)}")
    if "priv" in used:
        lines.append("priv = op.priv")
    if op.scratch and "scratch" in used:
        lines.append("scratch = arrays[op.scratch_key]")
    return lines


def _satisfy(arg: str, check) -> str:
    values = ", ".join(f"{n}={n}" for n in check.names)
    return (f"ck.satisfy({arg!r}, {check.expr}, {check.expr!r}, {check.msg!r}, "
            f"lambda: found({values}))")


def _rule_texts(optimizer: Optimizer) -> list[str]:
    rules = [r for e in optimizer.expanders for r in e.rules]
    rules += [c.rule for c in optimizer.combiners]
    texts = [r.when or "" for r in rules] + [e.guard or "" for e in optimizer.expanders]
    for rule in rules:
        texts += [c.expr for c in rule.constants]
        for n in rule.replace:
            texts += [n.name or ""] + [expr for _, expr in n.ins + n.outs + n.params]
            texts += [old for old, _ in n.rename]
    return texts


def _globals_used(texts) -> dict[str, bool]:
    joined = "\n".join(texts)
    return {name.lower(): bool(re.search(rf"\b{name}\b", joined))
            for name in ("shapes", "kernels", "dnnl", "np", "math", "DType", "FLOAT32_OPS",
                         "ELEMENTWISE_OPS")}


def _uses(family: Family, groups) -> dict[str, bool]:
    text = []
    for op in family.ops:
        # (a template's hooks are written, and import what they read, once)
        hooks = [] if op.template else [op.static_run or "", op.run or "", op.scratch or ""]
        text += [op.pre_run or "", op.post_run or "", *hooks]
        text += [t.len or "" for t in op.tensors_in]
        text += [t.shape + (t.view or "") + t.dtype + (t.from_file or "") for t in op.tensors_out]
        text += [b.value for p in op.params for b in p.bounds] + [p.len or "" for p in op.params]
        text += [c.expr for c in _all_checks(op)]
    joined = "\n".join(text)
    return {
        "shapes": bool(re.search(r"\bshapes\b", joined)),
        "kernels": bool(re.search(r"\bkernels\b", joined)),
        "dnnl": bool(re.search(r"\bdnnl\b", joined)),
        "np": bool(re.search(r"\bnp\b", joined)),
        "math": bool(re.search(r"\bmath\b", joined)),
        "found": any(_satisfied(op) for op in family.ops),
        "checker": any(_has_pre_run(op) or op.scratch and not op.template
                       for op in family.ops),
        "templates": sorted({n for op in family.ops for n in _template_hooks(op, family)}),
        "params": any(_table_parts(op, family, groups, "params")[1] for op in family.ops),
        "tensor_args": any(_table_parts(op, family, groups, kind)[1] for op in family.ops
                           for kind in ("tensors_in", "tensors_out")),
        "replace": any(op.inherits for op in family.ops),
        # The groups' tables and param verifiers, the archs' dtype verifiers it uses.
        "param_groups": sorted({g.upper() for op in family.ops for g in op.param_groups}
                               | {f"{p.group}_{p.arg_name}" for op in family.ops
                                  for p in op.own.params if p.group_checks}
                               | {f"{g}_checks" for op in family.ops for g in op.own.groups}),
        "arch_verifiers": sorted({f"{op.arch}_dtype" for op in family.ops
                                  if op.own.dtype_checked}),
        "dtype_sets": sorted({t.dtype_set.upper() for op in family.ops for t in op.tensors_in
                              if t.dtype_set}),
        "dtype": bool(re.search(r"\bDType\b", joined))
        or any(t.dtype and not t.dtype_set for op in family.ops for t in op.tensors_in)
        or any(t.dtype in DTYPES for op in family.ops for t in op.tensors_out),
    }


def _all_checks(op: OpDesc):
    return [*op.checks[op.group_checks:],
            *(c for p in op.params for c in p.checks[p.group_checks:]),
            *(c for t in op.tensors_in for c in t.checks[t.group_checks:]),
            *(c for t in op.tensors_out for c in t.checks)]


def _tensor_rules(t) -> str:
    rules = []
    if t.ndim is not None:
        rules.append(f"ndim {t.ndim}")
    if t.min_ndim is not None:
        rules.append(f"ndim >= {t.min_ndim}")
    if t.len is not None:
        rules.append(f"len `{t.len}`")
    if t.sametype:
        rules.append(f"dtype of `{t.sametype}`")
    if t.sameshape:
        rules.append(f"shape of `{t.sameshape}`")
    if t.static is not None:
        rules.append("static" if t.static else "not static")
    if t.optional:
        rules.append("optional")
    if t.variadic:
        rules.append(f"at least {t.min}")
    rules += [f"`{c.expr}`" for c in t.checks]
    return ", ".join(rules)


def _param_rules(p) -> str:
    symbols = {"eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    each = "each " if p.is_array else ""
    rules = [f"{each}{symbols[b.rule]} `{b.value}`" for b in p.bounds]
    if p.choices:
        rules.append("one of " + ", ".join(f"`{c}`" for c in p.choices))
    rules += [f"`{c.expr}`" + (f" ({c.msg})" if c.msg else "") for c in p.checks]
    return ", ".join(rules)


def _variants(family: Family, op: OpDesc) -> list[tuple[OpDesc, list, list]]:
    """The runnable ops of `family` that descend from abstract `op` (through
    `inherits`, not through another abstract op: maxpool2d_argmax's variants are
    its own), each with the inputs and params it adds to `op`'s."""
    by_optype = {o.optype: o for o in family.ops}

    def descends(o: OpDesc) -> bool:
        seen = set()
        while o.inherits and o.inherits not in seen:
            if o.inherits == op.optype:
                return True
            seen.add(o.inherits)
            o = by_optype.get(o.inherits, o)
            if o.arch == "none":
                return False
        return False

    ins = {t.arg_name for t in op.tensors_in}
    params = {p.arg_name for p in op.params}
    return [(v, [t for t in v.tensors_in if t.arg_name not in ins],
             [p for p in v.params if p.arg_name not in params])
            for v in family.ops if v.runnable and descends(v)]


# The builder functions of lightnet.nn (templates/nn.py.j2) -------------------------------

# Abstract ops whose builder lightnet.ir.builder writes by hand: an input is named by the
# user, nn.input(name, shape, dtype).
HAND_WRITTEN_BUILDERS = ("input",)
_HINTS = {"int": "int", "float": "float", "double": "float", "string": "str", "bool": "bool",
          "null": "None"}
_DOC_WIDTH = 84  # docstring lines: 88 columns less the function body's indent


def _builder_input(t, op: OpDesc) -> str:
    """An input of a builder function: a list of tensors for a variadic one;
    an optional one defaults to None when every input after it is optional."""
    if t.variadic:
        return f"{t.arg_name}: Sequence[Tensor]"
    if not t.optional:
        return f"{t.arg_name}: Tensor"
    later = op.tensors_in[op.tensors_in.index(t) + 1:]
    return f"{t.arg_name}: Tensor | None" + (" = None" if all(u.optional for u in later) else "")


def _param_hint(p) -> str:
    hint = (f"Literal[{', '.join(map(repr, p.choices))}]" if p.choices
            else _HINTS[p.type.split("[")[0]])
    return f"Sequence[{hint}]" if p.is_array else hint


def _builder_param(p) -> str:
    """A keyword-only param of a builder function, typed, with its default."""
    default = "" if p.required else f" = {_literal(p.default)}"
    return f"{p.arg_name}: {_param_hint(p)}{default}"


def _builder_signature(op: OpDesc) -> str:
    """A builder function's parameters: the op's inputs, then its params and
    the op's name, keyword-only."""
    return ", ".join([*(_builder_input(t, op) for t in op.tensors_in), "*",
                      *map(_builder_param, op.params), "name: str | None = None"])


def _arg_dict(args) -> str:
    """`{"src": src, ...}`: the builder function's args of these names, by name."""
    return "{" + ", ".join(f'"{a.arg_name}": {a.arg_name}' for a in args) + "}"


def _builder_returns(op: OpDesc) -> str:
    count = len(op.tensors_out)
    if count == 0:
        return "Action"
    return "Tensor" if count == 1 else f"tuple[{', '.join(['Tensor'] * count)}]"


def _paragraphs(text: str) -> str:
    return "\n\n".join(textwrap.fill(" ".join(p.split()), _DOC_WIDTH)
                       for p in text.strip().split("\n\n") if p.strip())


def _builder_rules(arg) -> str:
    """What an input or param must be, in words, for its docstring entry (a
    param's choices are in its type)."""
    symbols = {"eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    rules = []
    if isinstance(arg, TensorIn):
        if arg.dtype:
            rules.append(f"dtype {arg.dtype_set or ', '.join(arg.dtype)}")
        rules += [f"ndim {arg.ndim}"] if arg.ndim is not None else []
        rules += [f"at least {arg.min_ndim} dims"] if arg.min_ndim is not None else []
        rules += [f"len {arg.len}"] if arg.len is not None else []
        rules += [f"dtype of {arg.sametype}"] if arg.sametype else []
        rules += [f"shape of {arg.sameshape}"] if arg.sameshape else []
        rules += [] if arg.static is None else ["static" if arg.static else "not static"]
        rules += [f"at least {arg.min}"] if arg.variadic else []
    else:
        each = "each " if arg.is_array else ""
        rules += [f"length {arg.len}"] if arg.len is not None else []
        rules += [f"{each}{symbols[b.rule]} {b.value}" for b in arg.bounds]
    rules += [c.msg or c.expr for c in arg.checks]
    return "; ".join(rules)


def _item(name: str, doc: str, rules: str = "") -> str:
    text = " ".join(f"{doc} ({rules})".split()) if rules else " ".join(doc.split())
    return textwrap.fill(f"{name}: {text}", _DOC_WIDTH, initial_indent="    ",
                         subsequent_indent="        ")


def _builder_doc(op: OpDesc) -> str:
    """The docstring of `op`'s builder function: the op's doc, its args and
    outputs with their docs and rules, as a literal indented for a function body."""
    args = [_item(a.arg_name, a.doc, _builder_rules(a)) for a in (*op.tensors_in, *op.params)]
    names = {0: "The op's name", 1: "The op's name, and its output's"}.get(
        len(op.tensors_out), "The op's name (its outputs are `<name>_<output>`)")
    args.append(_item("name", f"{names}; None: `{op.optype}` and a number not taken."))
    if not op.tensors_out:
        returns = ["    An Action: give it to Model(outputs=...) for the model to run the op."]
    elif len(op.tensors_out) == 1:
        returns = [_item(op.tensors_out[0].arg_name, op.tensors_out[0].doc)]
    else:
        returns = ["    The tuple of its outputs:"]
        returns += [_item(t.arg_name, t.doc) for t in op.tensors_out]
    text = "\n\n".join([_paragraphs(op.doc), "Args:\n" + "\n".join(args),
                        "Returns:\n" + "\n".join(returns)])
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + textwrap.indent(text, "    ").lstrip() + '\n    """'


def environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        tuple_of=_tuple_of,
        proto=_proto,
        definition_order=_definition_order,
        get_lines=_get_lines,
        group_table=_group_table,
        comment=_comment,
        ptype=_ptype,
        default_literal=_literal,
        pyrepr=repr,
        dtype_expr=_dtype_expr,
        tensor_arg=_tensor_arg,
        param_arg=_param_arg,
        kwarg=lambda n: f"{n}={n}",
        kept_names=_kept_names,
        has_pre_run=_has_pre_run,
        pre_run_checks=_pre_run_checks,
        pre_run_reads=_pre_run_reads,
        names_in=_names_in,
        is_number=is_number,
        pre_run_of=_pre_run_of,
        scratch_of=_scratch_of,
        own_scratch=lambda op, family: _scratch_of(op, family) == op.optype and not op.template,
        views_of=_views_of,
        own_views=lambda op, family: _views_of(op, family) == op.optype,
        names_read_by_outputs=lambda op: _names_read(
            "\n".join(_output_code(t) + "\n" + "\n".join(c.expr for c in t.checks)
                      for t in op.tensors_out)
        ),
        has_views=lambda op: any(t.view for t in op.tensors_out),
        views_text=lambda op: "\n".join(t.view for t in op.tensors_out if t.view),
        bind_lines=_bind_lines,
        run_function=_run_function,
        indent_code=lambda code, n: textwrap.indent(code.rstrip("\n"), " " * n),
        tensor_rules=_tensor_rules,
        param_rules=_param_rules,
        builder_signature=_builder_signature,
        arg_dict=_arg_dict,
        builder_returns=_builder_returns,
        builder_doc=_builder_doc,
    )
    env.globals["satisfy"] = _satisfy
    env.globals["variants"] = _variants
    return env


def format_python(source: str, name: str) -> str:
    try:
        return black.format_str(source, mode=BLACK_MODE)
    except black.InvalidInput as e:
        reason = str(e).splitlines()[0] if str(e) else "black cannot parse it"
        raise RenderError(f"{name}: the rendered code is not valid Python ({reason}); "
                          "a template or a snippet is broken") from None


def _templates_module(env: jinja2.Environment, descriptions: Descriptions) -> str:
    """lightnet/auto/templates.py: the hooks of each arch template some op uses, written
    once. Every op of a template must bind the same names in them (its args of the
    template's names are the same kind: inputs, outputs or params)."""
    hooks = env.get_template("hooks.j2").module
    shared: dict[str, tuple[OpDesc, str]] = {}
    for family in descriptions.families:
        for op in family.ops:
            if not op.template:
                continue
            name = _hooks_of(op)
            text = (hooks.scratch(op, name) if op.scratch else "") + hooks.load(op, name)
            first = shared.setdefault(name, (op, text))
            if first[1] != text:
                raise RenderError(
                    f"{family.source}: {op.optype} and {first[0].optype} bind the names of "
                    f"arch template '{op.template}' differently (inputs, outputs or params "
                    "of theirs): give one its own hooks")
    texts = [text for _, text in shared.values()]
    joined = "\n".join(t for op, _ in shared.values()
                       for t in (op.scratch or "", op.static_run or "", op.run or ""))
    text = env.get_template("templates.py.j2").render(
        hooks=texts, uses={m: bool(re.search(rf"\b{m}\b", joined))
                           for m in ("np", "math", "kernels", "dnnl", "shapes")},
        checker=any(op.scratch for op, _ in shared.values()))
    return format_python(text, "lightnet/auto/templates.py")


def render_all(root: Path, descriptions: Descriptions) -> dict[str, str]:
    """Every generated file, as {path relative to root: text}."""
    if black.__version__ != BLACK_VERSION:
        raise RenderError(f"black {BLACK_VERSION} is required for byte-identical output, "
                          f"found {black.__version__}: pip install black=={BLACK_VERSION}")
    env = environment(root / "templates")
    files = {}
    groups = {g.name: g for g in descriptions.param_groups}
    for family in descriptions.families:
        text = env.get_template("op.py.j2").render(family=family, groups=groups,
                                                   uses=_uses(family, groups))
        files[f"lightnet/auto/ops/{family.name}.py"] = format_python(text, family.source)
    for optimizer in descriptions.optimizers:
        text = env.get_template("optimizer.py.j2").render(
            optimizer=optimizer, uses=_globals_used(_rule_texts(optimizer))
        )
        files[f"lightnet/auto/optimizers/{optimizer.arch.name}.py"] = format_python(
            text, optimizer.source)
    for package, doc in (("ops", "Generated op modules, one per descriptions/ops/*.yaml."),
                         ("", "Code generated from descriptions/ by `python -m generator`.")):
        path = f"lightnet/auto/{package}/__init__.py".replace("//", "/")
        files[path] = format_python(f'# Generated by `python -m generator`. Do not edit.\n"""{doc}"""\n', path)
    # The verifier of each group param with checks of its own: the names they read.
    verifiers = [(g, p, list(dict.fromkeys(n for c in p.checks for n in c.names)))
                 for g in descriptions.param_groups
                 for p, i in zip(g.params, g.inherited) if i is None and p.checks]
    # The verifier of each group with checks of the op: the names they read.
    groups = {g.name: g for g in descriptions.param_groups}
    group_verifiers = [(g, list(dict.fromkeys(n for _, c in g.checks for n in c.names)),
                        g.extends if g.extends and groups[g.extends].verifies else None)
                       for g in descriptions.param_groups if g.verifies]
    for template, path in (("registry.py.j2", "lightnet/auto/registry.py"),
                           ("optimizers.py.j2", "lightnet/auto/optimizers/__init__.py"),
                           ("dtypes.py.j2", "lightnet/auto/dtypes.py"),
                           ("archs.py.j2", "lightnet/auto/archs.py"),
                           ("params.py.j2", "lightnet/auto/params.py")):
        text = env.get_template(template).render(
            descriptions=descriptions, verifiers=verifiers, group_verifiers=group_verifiers,
            uses=_globals_used(c.expr for g in descriptions.param_groups
                               for c in (*(c for _, c in g.checks),
                                         *(c for p in g.params for c in p.checks))))
        files[path] = format_python(text, path)
    files["lightnet/auto/templates.py"] = _templates_module(env, descriptions)
    builders = [op for op in descriptions.ops()
                if not op.runnable and op.optype not in HAND_WRITTEN_BUILDERS]
    text = env.get_template("nn.py.j2").render(ops=builders)
    files["lightnet/auto/nn.py"] = format_python(text, "lightnet/auto/nn.py")
    files["docs/ops.md"] = env.get_template("ops.md.j2").render(descriptions=descriptions)
    return files
