"""Operator descriptions: descriptions/ops/*.yaml read into OpDesc.

Arguments are written as mappings (name: spec) and read as lists; a variant
(`inherits`) is its parent plus what it adds, merged before it is read; each
op then knows which checks its own generated pre_run makes.
"""

from __future__ import annotations

import ast
import dataclasses
import keyword
import re
from contextvars import ContextVar
from pathlib import Path

from generator.archs import apply_template, read_dtypes
from generator.fields import Fields, kind
from generator.names import (BUILTINS, HIDDEN, NN_NAMES, RESERVED, bindings, check_names,
                             expression, identifier, parse, read_checks, snippet)
from generator.schema import (ABSTRACT, BOUNDS, DTYPES, MISSING, MTYPES, SCALAR_TYPES,
                              ArchDesc, Bound, Example, Family, OpDesc, OwnChecks,
                              ParamDesc, ParamGroup, TensorIn, TensorOut)
from generator.source import DescriptionError, YList, YMap, load_yaml

# The named dtype sets of descriptions/types.yaml, while descriptions load.
DTYPE_SETS: ContextVar[dict] = ContextVar("dtype_sets", default={})


_LIST_KEYS = ("tensors_in", "tensors_out", "params")


def args_as_list(value: YMap, key: str, file: str, optype: str) -> None:
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
                                   f"expected a mapping, found {kind(spec)}")
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
    f = Fields(child, file, optype, 0)
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
    for key in ("examples", "drop_checks", "template", "param_groups"):
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
    """Remove the inherited checks whose expression is `expr`; whether any was.
    The argument lists and mappings are copied first: the parent's stay whole."""
    for key in _LIST_KEYS:
        if isinstance(merged.get(key), list):
            merged[key] = _copy_args(merged[key])
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


def _copy_args(items: list) -> YList:
    copied = YList()
    copied.line, copied.lines = getattr(items, "line", 0), list(getattr(items, "lines", []))
    copied.keys = getattr(items, "keys", None)
    for item in items:
        if isinstance(item, YMap):
            new = YMap(item)
            new.line, new.lines, new.text_lines = item.line, item.lines, item.text_lines
            item = new
        copied.append(item)
    return copied


# What a variant may say of an argument its parent gives.
_ADDABLE = ("arg_name", "checks", "doc")


def _merge_args(parent: list, child: list, file: str, path: str,
                whose: str = "its parent's: a variant") -> YList:
    """`parent`'s args, those `child` names with its checks and doc added, then
    `child`'s other args."""
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
                                           f"'{name}' is {whose} adds checks to it, and "
                                           f"cannot change its '{key}'")
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


def _take_groups(value: YMap, file: str, optype: str, groups: dict[str, ParamGroup]) -> None:
    """`param_groups: [name, ...]`: the groups' params first, at the line of the
    key, then the op's own; naming a group's param adds checks to it."""
    if "param_groups" not in value:
        return
    f = Fields(value, file, optype, 0)
    names = f.get("param_groups", list)
    line = value.line_of("param_groups")
    items = YList()
    items.line, items.keys = line, []
    for name in names:
        if not isinstance(name, str) or name not in groups:
            raise f.error("param_groups", f"'{name}' is not a group of descriptions/params.yaml "
                                          f"(known: {', '.join(groups) or 'none'})")
        if "inherits" in value and groups[name].verifies:
            raise f.error("param_groups", f"group '{name}' checks the op: a variant takes it "
                                          f"from its parent, never itself")
        for written in groups[name].items:
            if written["arg_name"] in items.keys:
                raise f.error("param_groups", f"param '{written['arg_name']}' is in two of "
                                              f"its groups")
            item = YMap(written)
            item.line, item.lines = line, {key: line for key in written}
            items.append(item)
            items.lines.append(line)
            items.keys.append(written["arg_name"])
    own = value.get("params", [])
    if isinstance(own, list):  # else reported when the params are read
        value["params"] = _merge_args(items, own, file, f"{optype}.params",
                                      "a param group's: an op")


def _resolve_inheritance(raw: dict, file: str, archs: dict[str, ArchDesc]) -> dict:
    """Each op's mapping with its `inherits` chain (within the file) merged in,
    then the keys of its template it does not give itself."""
    resolved = {}

    def resolve(optype, chain):
        if optype in resolved:
            return resolved[optype]
        value = raw[optype]
        parent = value.get("inherits") if isinstance(value, dict) else None
        f = Fields(value, file, optype, 0)
        if parent is None:
            if "drop_checks" in value:
                raise f.error("drop_checks", "only a variant (with 'inherits') drops checks")
            merged = YMap(value)
            merged.line, merged.lines = value.line, dict(value.lines)
            merged.text_lines = dict(value.text_lines)
        else:
            if not isinstance(parent, str) or parent not in raw:
                raise f.error("inherits", f"'{parent}' is not an op described in this file")
            if parent in chain:
                raise f.error("inherits", f"inheritance cycle: {' -> '.join(chain + [parent])}")
            f.get("drop_checks", list, None)
            merged = _merge(resolve(parent, chain + [parent]), value, file, optype)
        apply_template(merged, value, file, optype, archs)
        resolved[optype] = merged
        return merged

    for optype in raw:
        resolve(optype, [optype])
    return resolved


def _tensor_in(value, file, path, line) -> TensorIn:
    f = Fields(value, file, path, line)
    arg = identifier(f, "arg_name")
    dtype, dtype_set = read_dtypes(f, "dtype", DTYPE_SETS.get(), [])
    variadic = f.get("variadic", bool, False)
    t = TensorIn(
        arg_name=arg,
        doc=f.get("doc", str, ""),
        dtype=dtype,
        dtype_set=dtype_set,
        ndim=f.get("ndim", int, None),
        min_ndim=f.get("min_ndim", int, None),
        len=None,  # expressions are read once all names are known
        sametype=f.get("sametype", str, None),
        sameshape=f.get("sameshape", str, None),
        static=f.get("static", bool, None),
        optional=f.get("optional", bool, False),
        variadic=variadic,
        min=f.get("min", int, 1),
        checks=(),
    )
    if t.ndim is not None and t.min_ndim is not None:
        raise f.error("min_ndim", "an input has an exact 'ndim' or a 'min_ndim', not both")
    if t.min_ndim is not None and t.min_ndim < 1:
        raise f.error("min_ndim", f"expected a number of dimensions >= 1, found {t.min_ndim}")
    if "min" in f.map and not variadic:
        raise f.error("min", "'min' is for variadic inputs only")
    if t.optional and t.variadic:
        raise f.error("optional", "a variadic input cannot also be optional")
    f.used.update(("len", "checks"))  # read by _tensor_in_exprs
    f.done()
    return t


def _tensor_in_exprs(t: TensorIn, value, file, path, line, known) -> TensorIn:
    f = Fields(value, file, path, line)
    f.used.update(value)  # the other keys were read by _tensor_in
    f.used.discard("len")
    f.used.discard("checks")
    length = expression(f, "len", known, None, allow_number=True)
    checks = read_checks(f, known)
    f.done()
    return TensorIn(**{**t.__dict__, "len": length, "checks": checks})


def read_param(value, file, path, line, known) -> ParamDesc:
    f = Fields(value, file, path, line)
    arg = identifier(f, "arg_name")
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
                check_names(parse(length, "eval", f, "type"), known, f, "type")
    numeric = ptype.startswith("number")
    bounds = []
    for rule in BOUNDS:
        bound = expression(f, rule, known, None, allow_number=True)
        if bound is not None:
            if not numeric:
                raise f.error(rule, f"bounds are for number params, not {type_text}")
            bounds.append(Bound(rule, str(bound)))
    default = MISSING
    if "default" in f.map:
        default = f.get("default", (str, int, float, bool, list, type(None)))
        _check_default(f, type_text, ptype, default, choices, realtype)
    p = ParamDesc(arg, f.get("doc", str, ""), type_text, ptype, realtype, default,
                  tuple(bounds), length, choices, read_checks(f, known))
    f.done()
    return p


def _check_default(f: Fields, type_text: str, ptype: str, default, choices,
                   realtype=None) -> None:
    scalar = ptype.removesuffix("[]")
    values = default if ptype.endswith("[]") else [default]
    if ptype.endswith("[]") and not isinstance(default, list):
        article = "an" if type_text[0] in "aeiou" else "a"
        raise f.error("default", f"expected a list for {article} {type_text} param, "
                                 f"found {kind(default)}")
    python = {"null": type(None), "string": str, "number": (int, float), "bool": bool}[scalar]
    for v in values:
        if not isinstance(v, python) or (isinstance(v, bool) and scalar == "number"):
            raise f.error("default", f"expected a {scalar} default, found {kind(v)}")
        if realtype == "int" and isinstance(v, float) and not v.is_integer():
            raise f.error("default", f"expected an integer default (type int), found {v!r}")
        if choices and v not in choices:
            raise f.error("default", f"default {v!r} is not one of the choices")


def _tensor_out(value, file, path, line, known, ins) -> TensorOut:
    f = Fields(value, file, path, line)
    arg = identifier(f, "arg_name")
    dtype = f.get("dtype", str)
    if dtype not in DTYPES:
        check_names(parse(dtype, "eval", f, "dtype"), known, f, "dtype")
    owner = f.get("owner", str, None)
    if owner is not None and owner not in ins:
        raise f.error("owner", f"'{owner}' is not an input of this op")
    view = expression(f, "view", known, None)
    if view is not None and owner is None:
        raise f.error("view", "a view needs an 'owner' input whose memory it shares")
    is_input = f.get("input", bool, False)
    if is_input and ins:
        # The runtime finds a model's inputs among the ops that read nothing.
        raise f.error("input", f"a model input is made by an op that reads nothing; "
                               f"this op reads {', '.join(ins)}")
    t = TensorOut(arg, f.get("doc", str, ""), dtype, expression(f, "shape", known),
                  f.get("static", bool, False), owner, view,
                  expression(f, "from_file", known, None), is_input,
                  read_checks(f, [*known, arg]))
    f.done()
    return t


def _example(value, file, path, line, op_ins, op_outs, op_params) -> Example:
    f = Fields(value, file, path, line)
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
    ex = Example(f.get("doc", str, ""), plain(inputs), plain(params), plain(outputs), error)
    f.done()
    return ex


def plain(value):
    """YMap/YList trees as plain dicts and lists (for rendering as literals)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
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
            names.update(bindings(ast.parse(value["pre_run"]))[0])
        except SyntaxError:
            pass  # reported with its line when pre_run is read
    return frozenset(names)


def _op(optype: str, value, file: str, archs: dict[str, ArchDesc],
        groups: dict[str, ParamGroup], chain: tuple[str, ...]) -> OpDesc:
    token = HIDDEN.set(_own_names(value) & BUILTINS)
    try:
        return _op_checked(optype, value, file, archs, groups, chain)
    finally:
        HIDDEN.reset(token)


def _op_checked(optype: str, value, file: str, archs: dict[str, ArchDesc],
                groups: dict[str, ParamGroup], chain: tuple[str, ...]) -> OpDesc:
    """An op; `chain` names the param groups of it and its parents, whose checks it has."""
    f = Fields(value, file, optype, 0)
    if not optype.isidentifier() or keyword.iskeyword(optype):
        raise DescriptionError(file, f.line, optype, "an optype must be a Python identifier")
    if optype in NN_NAMES:
        raise DescriptionError(file, f.line, optype,
                               f"'{optype}' is reserved: the generated code uses that name")
    f.used.update(("inherits", "drop_checks", "template"))  # read when the op was merged
    param_groups = tuple(f.get("param_groups", list, []))  # taken when the op was merged
    arch = f.get("arch", str)
    if arch != ABSTRACT and arch not in archs:
        raise f.error("arch", f"unknown arch '{arch}' (known: {', '.join([ABSTRACT, *archs])})")
    mtype = f.get("mtype", str, archs[arch].mtype if arch in archs else ABSTRACT)
    if mtype not in MTYPES:
        raise f.error("mtype", f"unknown mtype '{mtype}' (known: {', '.join(MTYPES)})")

    raw_ins = f.items("tensors_in")
    ins = [_tensor_in(v, file, p, l) for v, p, l in raw_ins]
    in_names = [t.arg_name for t in ins]
    _unique(file, [], raw_ins, in_names)
    for t, (v, p, l) in zip(ins, raw_ins):
        g = Fields(v, file, p, l)
        for key in ("sametype", "sameshape"):
            other = getattr(t, key)
            if other is not None and (other not in in_names or other == t.arg_name):
                raise g.error(key, f"'{other}' is not another input of this op")

    params = []
    raw_params = f.items("params")
    for v, p, l in raw_params:
        params.append(read_param(v, file, p, l, [*in_names, *(q.arg_name for q in params)]))
    param_names = [p.arg_name for p in params]
    _unique(file, in_names, raw_params, param_names)
    for group in param_groups:
        missing = [arg for arg in groups[group].reads if arg not in in_names]
        if missing:
            raise f.error("param_groups", f"group '{group}' reads input '{missing[0]}', "
                                          f"which this op does not take")
    known = [*in_names, *param_names]
    ins = [_tensor_in_exprs(t, v, file, p, l, known) for t, (v, p, l) in zip(ins, raw_ins)]
    taken = [c for g in chain for c in _group_checks(groups[g], groups)]
    ins = [dataclasses.replace(t, checks=(*added, *t.checks), group_checks=len(added))
           if (added := [c for label, c in taken if label == f"tensor_in '{t.arg_name}'"])
           else t for t in ins]
    # The op's and its params' (which read other args too) are listed with the op's.
    group_checks = tuple(c for label, c in taken if not label.startswith("tensor_in"))
    checks = (*group_checks, *read_checks(f, known))
    pre_run, pre_run_names = snippet(f, "pre_run", [*known, "op"])
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

    scratch = expression(f, "scratch", [*known, *out_names, "op"], None, allow_number=True)
    if scratch is not None and arch == "none":
        raise f.error("scratch", "an abstract op (arch none) has no scratch memory")
    run_known = [*known, *out_names, "priv", "op", *(["scratch"] if scratch else [])]
    static_run, static_names = snippet(f, "static_run", run_known)
    run, run_names = snippet(f, "run", [*run_known, *static_names])  # closes over static_run's
    # The arrays are bound before static_run, and run is a closure: assigning
    # one of the names it closes over makes it a local of run (unbound).
    for key, names, outer in (("static_run", static_names, [*in_names, *out_names]),
                              ("run", run_names, [*run_known, *static_names])):
        rebound = [n for n in names if n in outer]
        if rebound:
            raise f.error(key, f"{key} assigns '{rebound[0]}', a name it is given: write "
                               f"into arrays ({rebound[0]}[...] = ..., out=), never rebind them")
    post_run, _ = snippet(f, "post_run", ["priv", "op", *param_names])
    if arch == "none" and (static_run or run):
        raise f.error("static_run" if static_run else "run",
                      "an abstract op (arch none) has no run code")
    examples = tuple(_example(v, file, p, l, in_names, out_names, param_names)
                     for v, p, l in f.items("examples"))
    inherits = value.get("inherits")
    # An op converting between dtypes (cast) says with its checks which it takes; its
    # arch's rule that ops compute in their first input's dtype does not apply to it.
    converts = f.get("converts", bool, False)
    first = archs[arch].checked_input(tuple(ins)) if arch in archs and not converts else None
    params = [_in_group(p, param_groups, groups) for p in params]
    op = OpDesc(optype, arch, mtype, f.get("doc", str, ""), param_groups, inherits,
                None if "drop_checks" in value else inherits,
                tuple(ins), tuple(outs), tuple(params), checks,
                first.arg_name if first else None, pre_run,
                tuple(pre_run_names), static_run, run, post_run, examples,
                _assemble(f, ins, outs, params), scratch,
                OwnChecks(tuple(params), tuple(ins), first is not None,
                          checks[len(group_checks):],
                          tuple((t.arg_name, c) for t in outs for c in t.checks)),
                converts, len(group_checks), _template(value, archs.get(arch)))
    f.done()
    return op


# The keys of an op a template gives: its hooks (a template's doc is the op's own).
TEMPLATE_HOOKS = ("scratch", "static_run", "run")


def _template(value, arch: ArchDesc | None) -> str | None:
    """The template of the op described by `value` (inheritance and template merged in)
    when every hook it has is the template's, as the template gives it."""
    name = value.get("template")
    template = arch.templates.get(name) if arch is not None and name else None
    if template is None or any(value.get(k) != template.get(k) for k in TEMPLATE_HOOKS):
        return None
    return name


def _group_checks(group: ParamGroup, groups: dict[str, ParamGroup]):
    """A group's checks of the op, after those of the groups it extends."""
    inherited = _group_checks(groups[group.extends], groups) if group.extends else ()
    return (*inherited, *group.checks)


def _in_group(p: ParamDesc, taken: tuple[str, ...], groups: dict[str, ParamGroup]) -> ParamDesc:
    """`p` with the group declaring it, when one of the groups `taken` has it."""
    for group in taken:
        names = [q.arg_name for q in groups[group].params]
        if p.arg_name in names:
            i = names.index(p.arg_name)
            return dataclasses.replace(p, group=groups[group].origins[i],
                                       group_checks=len(groups[group].params[i].checks))
    return p


def _assemble(f: Fields, ins, outs, params) -> tuple[str, str, str] | None:
    """`assemble: {output: dst, inputs: src, axis: axis}`: the output is the
    variadic inputs laid end to end along the axis param (concat)."""
    value = f.get("assemble", dict, None)
    if value is None:
        return None
    g = Fields(value, f.file, f.where("assemble")[2], f.where("assemble")[1])
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


def load_family(path: Path, label: str, taken: dict[str, str], archs: dict[str, ArchDesc],
                groups: dict[str, ParamGroup]) -> Family:
    """The ops of one file; `taken` maps optypes of other files to their file."""
    doc = load_yaml(path, label)
    if not isinstance(doc, dict) or not doc:
        raise DescriptionError(label, 1, "", "expected a mapping of optype to description")
    for optype, value in doc.items():
        if not isinstance(value, dict):
            raise DescriptionError(label, doc.line_of(optype), optype,
                                   f"expected a mapping, found {kind(value)}")
        if optype in taken:
            raise DescriptionError(label, doc.line_of(optype), optype,
                                   f"optype also described in {taken[optype]}")
        value.line = doc.line_of(optype)  # an op's own errors point at its name
        for key in _LIST_KEYS:
            args_as_list(value, key, label, optype)
        _take_groups(value, label, optype, groups)
    resolved = _resolve_inheritance(doc, label, archs)
    ops = {optype: _op(optype, resolved[optype], label, archs, groups, _group_chain(doc, optype))
           for optype in doc}
    return Family(path.stem, label, tuple(_own_checks(op, ops, groups) for op in ops.values()))


def _group_chain(doc: dict, optype: str) -> tuple[str, ...]:
    """The param groups `optype` and its parents take, the eldest's first."""
    value = doc[optype]
    parent = value.get("inherits")
    # A valid chain (cycles and unknown parents were reported when it was merged).
    own = tuple(g for g in value.get("param_groups", []) if isinstance(g, str))
    return (*(_group_chain(doc, parent) if isinstance(parent, str) else ()), *own)


def _own_checks(op: OpDesc, ops: dict[str, OpDesc], groups: dict[str, ParamGroup]) -> OpDesc:
    """`op` with the checks its own pre_run makes: what it adds to its base's."""
    if op.base is None:  # the verifiers of its groups, and its parents' when it drops checks
        chain, parent = [op], op.inherits
        while parent is not None:
            chain.append(ops[parent])
            parent = ops[parent].inherits
        verified = tuple(g for o in reversed(chain) for g in o.param_groups if groups[g].verifies)
        return dataclasses.replace(op, own=dataclasses.replace(op.own, groups=verified))
    base = ops[op.base]
    params = {p.arg_name: p for p in base.params}
    ins = {t.arg_name: t for t in base.tensors_in}
    outs = {t.arg_name: t for t in base.tensors_out}
    own_params = tuple(
        p if p.arg_name not in params else dataclasses.replace(
            p, bounds=(), len=None, checks=p.checks[len(params[p.arg_name].checks):],
            group=None, group_checks=0)
        for p in op.params)
    own_ins = tuple(
        t if t.arg_name not in ins else dataclasses.replace(
            t, len=None, checks=t.checks[len(ins[t.arg_name].checks):], group_checks=0)
        for t in op.tensors_in)
    new_outs = tuple(t for t in op.tensors_out if t.arg_name not in outs)
    own_outs = tuple((t.arg_name, c) for t in op.tensors_out
                     for c in t.checks[len(outs[t.arg_name].checks) if t.arg_name in outs
                                       else 0:])
    checked = op.dtype_checked is not None and (
        (op.arch, op.dtype_checked) != (base.arch, base.dtype_checked))
    own = OwnChecks(own_params, own_ins, checked, op.checks[len(base.checks):], own_outs,
                    new_outs)  # its base's pre_run calls the group verifiers
    return dataclasses.replace(op, own=own)
