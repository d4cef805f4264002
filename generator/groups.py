"""Named parameter groups: descriptions/params.yaml read into ParamGroup.

A group declares params once (a 2-D window's size, stride, padding, autopad;
a fused activation's params and their check) for every op taking it with
`param_groups: [name]`. A group may extend an earlier one: that group's
params, those it names given anew, then its own. Its params' checks read
only the group's params; its own `checks` may also read the inputs it
declares it `reads` (a convolution's weight against its src), which every op
taking it must have. One verifier per group makes them for all its ops.
"""

from __future__ import annotations

from pathlib import Path

from generator.fields import Fields, kind
from generator.names import check_names, parse
from generator.ops import args_as_list, read_param
from generator.schema import Check, ParamGroup
from generator.source import DescriptionError, load_yaml


def load_groups(path: Path, label: str) -> dict[str, ParamGroup]:
    """The groups of descriptions/params.yaml, by name, in order."""
    if not path.exists():
        return {}
    doc = load_yaml(path, label)
    if not isinstance(doc, dict):
        raise DescriptionError(label, 1, "", f"expected a mapping of group name to group, "
                                             f"found {kind(doc)}")
    groups: dict[str, ParamGroup] = {}
    for name, value in doc.items():
        line = doc.line_of(name)
        if not name.isidentifier():
            raise DescriptionError(label, line, name, "a group name must be an identifier")
        f = Fields(value, label, name, line)
        extends = f.get("extends", str, None)
        if extends is not None and extends not in groups:
            raise f.error("extends", f"'{extends}' is not a group described before it "
                                     f"(known: {', '.join(groups) or 'none'})")
        f.get("params", dict)
        args_as_list(value, "params", label, name)
        own = f.items("params")
        if not own:
            raise f.error("params", "expected a mapping of param name to param, found none")
        items = list(groups[extends].items) if extends else []
        inherited: list[int | None] = list(range(len(items)))
        for v, _, _ in own:
            names = [i.get("arg_name") for i in items]
            if v.get("arg_name") in names:  # given anew: replaces its namesake, in place
                inherited[names.index(v["arg_name"])] = None
                items[names.index(v["arg_name"])] = v
            else:
                items.append(v)
                inherited.append(None)
        params = []
        for v in items:
            params.append(read_param(v, label, f"{name}.params.{v.get('arg_name')}", v.line,
                                     [p.arg_name for p in params]))
        origins = tuple(name if i is None else groups[extends].origins[i] for i in inherited)
        parent = groups.get(extends)
        reads = _reads(f, parent.reads if parent else (), [p.arg_name for p in params])
        checks = _checks(f, reads, [p.arg_name for p in params])
        groups[name] = ParamGroup(name, f.get("doc", str, ""), extends, tuple(params),
                                  tuple(inherited), origins, tuple(items), reads, checks,
                                  bool(checks) or bool(parent and parent.verifies))
        f.done()
    return groups


def _reads(f: Fields, inherited: tuple[str, ...], params: list[str]) -> tuple[str, ...]:
    """`reads: [input, ...]`: the inputs its checks read, after its extended group's."""
    reads = list(inherited)
    for arg in f.get("reads", list, []):
        if not isinstance(arg, str) or not arg.isidentifier():
            raise f.error("reads", f"expected input names, found {arg!r}")
        if arg in reads or arg in params:
            raise f.error("reads", f"'{arg}' is named twice (an input it reads, or a param)")
        reads.append(arg)
    return tuple(reads)


def _checks(f: Fields, reads: tuple[str, ...], params: list[str]) -> tuple[tuple[str, Check], ...]:
    """`checks: [{expr, msg, arg}]`: checks of the op, or of `arg`, an input it reads or
    one of its params."""
    checks = []
    for value, path, line in f.items("checks"):
        g = Fields(value, f.file, path, line)
        expr = g.get("expr", str)
        names = check_names(parse(expr, "eval", g, "expr"), [*reads, *params], g, "expr")
        arg = g.get("arg", str, None)
        if arg is not None and arg not in reads and arg not in params:
            raise g.error("arg", f"'{arg}' is neither an input the group reads "
                                 f"(reads: {', '.join(reads) or 'none'}) nor its param")
        label = ("op" if arg is None else
                 f"param '{arg}'" if arg in params else f"tensor_in '{arg}'")
        checks.append((label, Check(expr, g.get("msg", str, None), names)))
        g.done()
    return tuple(checks)
