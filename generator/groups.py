"""Named parameter groups: descriptions/params.yaml read into ParamGroup.

A group declares params once (a 2-D window's size, stride, padding, autopad;
a fused activation's params and their check) for every op taking it with
`param_groups: [name]`. A group may extend an earlier one: that group's
params, those it names given anew, then its own. Its params' checks read
only the group's params.
"""

from __future__ import annotations

from pathlib import Path

from generator.fields import Fields, kind
from generator.ops import args_as_list, read_param
from generator.schema import ParamGroup
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
        groups[name] = ParamGroup(name, f.get("doc", str, ""), extends, tuple(params),
                                  tuple(inherited), origins, tuple(items))
        f.done()
    return groups
