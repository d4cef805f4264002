"""Rendering: descriptions through jinja templates, formatted by black.

The templates hold the shape of the generated code; the filters here turn
model values into Python source fragments. Output depends only on the
descriptions, the templates and the pinned black version.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import black
import jinja2

from generator.model import DTYPES, Descriptions, Family, OpDesc, Optimizer

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


def _tensor_arg(t) -> str:
    extra = ""
    if getattr(t, "optional", False):
        extra += ", optional=True"
    if getattr(t, "variadic", False):
        extra += f", variadic=True, min={t.min}"
    return f'TensorArg("{t.arg_name}"{extra})'


def _param_arg(p) -> str:
    default = "" if p.required else f", {_literal(p.default)}"
    return f'ParamArg("{p.arg_name}", ParamType.{_ptype(p.ptype)}{default})'


def _kept_names(op: OpDesc) -> list[str]:
    return [p.arg_name for p in op.params] + list(op.pre_run_names)


def _names_read(code: str) -> set[str]:
    tree = ast.parse(code)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _bind_lines(op: OpDesc, code: str) -> list[str]:
    """Statements binding the names `code` reads: arrays, checked values, priv."""
    used = _names_read(code) if code else set()
    lines = []
    for t in op.tensors_in:
        if t.arg_name in used:
            how = "arrays_in" if t.variadic else "array"
            lines.append(f'{t.arg_name} = op.{how}(arrays, "{t.arg_name}")')
    for t in op.tensors_out:
        if t.arg_name in used:
            lines.append(f'{t.arg_name} = op.array(arrays, "{t.arg_name}")')
    for name in _kept_names(op):
        if name in used:
            lines.append(f'{name} = op.values["{name}"]')
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
    texts = [r.when or "" for r in rules]
    for rule in rules:
        texts += [c.expr for c in rule.constants]
        for n in rule.replace:
            texts += [n.name or ""] + [expr for _, expr in n.ins + n.outs + n.params]
            texts += [old for old, _ in n.rename]
    return texts


def _globals_used(texts) -> dict[str, bool]:
    joined = "\n".join(texts)
    return {name.lower(): bool(re.search(rf"\b{name}\b", joined))
            for name in ("kernels", "np", "math", "DType")}


def _uses(family: Family) -> dict[str, bool]:
    text = []
    for op in family.ops:
        text += [op.pre_run or "", op.static_run or "", op.run or "", op.post_run or "",
                 op.scratch or ""]
        text += [t.len or "" for t in op.tensors_in]
        text += [t.shape + (t.view or "") + t.dtype + (t.from_file or "") for t in op.tensors_out]
        text += [b.value for p in op.params for b in p.bounds] + [p.len or "" for p in op.params]
        text += [c.expr for c in _all_checks(op)]
    joined = "\n".join(text)
    return {
        "kernels": bool(re.search(r"\bkernels\b", joined)),
        "np": bool(re.search(r"\bnp\b", joined)),
        "math": bool(re.search(r"\bmath\b", joined)),
        "found": any(_all_checks(op) for op in family.ops),
        "dtype": bool(re.search(r"\bDType\b", joined))
        or any(t.dtype for op in family.ops for t in op.tensors_in)
        or any(t.dtype in DTYPES for op in family.ops for t in op.tensors_out),
    }


def _all_checks(op: OpDesc):
    return [*op.checks, *(c for p in op.params for c in p.checks),
            *(c for t in op.tensors_in for c in t.checks),
            *(c for t in op.tensors_out for c in t.checks)]


def _tensor_rules(t) -> str:
    rules = []
    if t.ndim is not None:
        rules.append(f"ndim {t.ndim}")
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
    if p.len is not None:
        rules.insert(0, f"len `{p.len}`")
    if p.choices:
        rules.append("one of " + ", ".join(f"`{c}`" for c in p.choices))
    rules += [f"`{c.expr}`" + (f" ({c.msg})" if c.msg else "") for c in p.checks]
    return ", ".join(rules)


def _variants(family: Family, op: OpDesc) -> list[tuple[OpDesc, list, list]]:
    """The runnable ops of `family` that descend from abstract `op` (through
    `inherits`), each with the inputs and params it adds to `op`'s."""
    by_optype = {o.optype: o for o in family.ops}

    def descends(o: OpDesc) -> bool:
        seen = set()
        while o.inherits and o.inherits not in seen:
            if o.inherits == op.optype:
                return True
            seen.add(o.inherits)
            o = by_optype.get(o.inherits, o)
        return False

    ins = {t.arg_name for t in op.tensors_in}
    params = {p.arg_name for p in op.params}
    return [(v, [t for t in v.tensors_in if t.arg_name not in ins],
             [p for p in v.params if p.arg_name not in params])
            for v in family.ops if v.runnable and descends(v)]


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
        ptype=_ptype,
        default_literal=_literal,
        pyrepr=repr,
        dtype_expr=_dtype_expr,
        tensor_arg=_tensor_arg,
        param_arg=_param_arg,
        kwarg=lambda n: f"{n}={n}",
        kept_names=_kept_names,
        names_read_by_outputs=lambda op: _names_read(
            "\n".join(t.shape + "\n" + t.dtype + "\n" + "\n".join(c.expr for c in t.checks)
                      for t in op.tensors_out) + "\n" + (op.scratch or "")
        ),
        has_views=lambda op: any(t.view for t in op.tensors_out),
        views_text=lambda op: "\n".join(t.view for t in op.tensors_out if t.view),
        bind_lines=_bind_lines,
        indent_code=lambda code, n: textwrap.indent(code.rstrip("\n"), " " * n),
        tensor_rules=_tensor_rules,
        param_rules=_param_rules,
        examples_literal=lambda examples: repr(tuple(e.__dict__ for e in examples)),
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


def render_all(root: Path, descriptions: Descriptions) -> dict[str, str]:
    """Every generated file, as {path relative to root: text}."""
    if black.__version__ != BLACK_VERSION:
        raise RenderError(f"black {BLACK_VERSION} is required for byte-identical output, "
                          f"found {black.__version__}: pip install black=={BLACK_VERSION}")
    env = environment(root / "templates")
    files = {}
    for family in descriptions.families:
        text = env.get_template("op.py.j2").render(family=family, uses=_uses(family))
        files[f"lightnet/auto/ops/{family.name}.py"] = format_python(text, family.source)
    for optimizer in descriptions.optimizers:
        text = env.get_template("optimizer.py.j2").render(
            optimizer=optimizer, uses=_globals_used(_rule_texts(optimizer))
        )
        files[f"lightnet/auto/optimizers/{optimizer.arch}.py"] = format_python(text, optimizer.source)
    for package, doc in (("ops", "Generated op modules, one per descriptions/ops/*.yaml."),
                         ("optimizers", "Generated optimizer modules, one per arch."),
                         ("", "Code generated from descriptions/ by `python -m generator`.")):
        path = f"lightnet/auto/{package}/__init__.py".replace("//", "/")
        files[path] = format_python(f'# Generated by `python -m generator`. Do not edit.\n"""{doc}"""\n', path)
    text = env.get_template("registry.py.j2").render(descriptions=descriptions)
    files["lightnet/auto/registry.py"] = format_python(text, "registry")
    files["docs/ops.md"] = env.get_template("ops.md.j2").render(descriptions=descriptions)
    return files
