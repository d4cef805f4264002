"""Architecture descriptions: descriptions/archs/<arch>.yaml read into ArchDesc.

An architecture is described once: the memory type of its ops, the dtypes
they compute in (from which each of its ops checks its first input's dtype
and each of its expanders guards its rules), the arch that lowers what it
does not take, the op lists its passes read and the snippets its op variants
share (`template`). The op lists name ops, so they are checked once the ops
are loaded (check_op_lists).
"""

from __future__ import annotations

from pathlib import Path

from generator.fields import Fields
from generator.names import parse
from generator.schema import ABSTRACT, DTYPES, MISSING, MTYPES, ArchDesc, OpDesc
from generator.source import YMap, load_yaml

# What a template may give an op: its doc and code, never its arguments.
TEMPLATE_KEYS = ("doc", "scratch", "static_run", "run", "post_run")
_OP_LISTS = ("float32_ops", "elementwise_ops")


def read_dtypes(f: Fields, key: str, sets: dict,
                default=MISSING) -> tuple[tuple[str, ...], str | None]:
    """A `dtype`-like field: a dtype set's name, a dtype, or a list of both;
    the dtypes it names (in order, once each) and the set's name when it is one."""
    written = f.get(key, (str, list), default)
    dtypes = []
    for d in [written] if isinstance(written, str) else written or []:
        if not isinstance(d, str) or (d not in DTYPES and d not in sets):
            raise f.error(key, f"unknown dtype '{d}' (dtype sets of descriptions/types.yaml: "
                               f"{', '.join(sets) or 'none'}; dtypes: {', '.join(DTYPES)})")
        dtypes += [x for x in sets.get(d, [d]) if x not in dtypes]
    return tuple(dtypes), written if isinstance(written, str) and written in sets else None


def _templates(f: Fields) -> dict[str, dict]:
    value = f.get("templates", dict, {})
    file, line, path = f.where("templates")
    g = Fields(value, file, path, line)
    templates = {}
    for name in g.map:
        if not name.isidentifier():
            raise g.error(name, f"a template name is an identifier, found '{name}'")
        t = Fields(g.get(name, dict), file, f"{path}.{name}", g.where(name)[1])
        for key in TEMPLATE_KEYS:
            text = t.get(key, str, None)
            if text is not None and key != "doc":
                parse(text, "eval" if key == "scratch" else "exec", t, key)
        t.done()
        if not t.map:
            raise g.error(name, "expected a mapping of " + ", ".join(TEMPLATE_KEYS))
        templates[name] = t.map
    g.done()
    return templates


def _package(f: Fields) -> str | None:
    """The `package` field: a dotted module name (the module defining ARCH)."""
    package = f.get("package", str, None)
    if package is not None and not all(p.isidentifier() for p in package.split(".")):
        raise f.error("package", f"expected a dotted module name (the module defining "
                                 f"ARCH), found '{package}'")
    return package


def read_arch(doc, label: str, stem: str, sets: dict) -> ArchDesc:
    """One arch file, but for its op lists' ops (check_op_lists) and its
    fallback (load_archs: it names another arch)."""
    f = Fields(doc, label, "", 1)
    name = f.get("arch", str)
    if not name.isidentifier() or name == ABSTRACT:
        raise f.error("arch", f"an arch name is an identifier other than '{ABSTRACT}' "
                              f"(abstract ops), found '{name}'")
    if stem != name:
        raise f.error("arch", f"the file of arch '{name}' must be named {name}.yaml")
    mtype = f.get("mtype", str)
    if mtype not in MTYPES or mtype == ABSTRACT:
        raise f.error("mtype", f"expected a memory type ({', '.join(MTYPES[1:])}), found '{mtype}'")
    dtypes, dtype_set = read_dtypes(f, "dtypes", sets)
    if not dtypes:
        raise f.error("dtypes", "expected the dtypes its ops compute in, found none")
    lists = {}
    for key in _OP_LISTS:
        names = f.get(key, list, [])
        if any(not isinstance(n, str) for n in names):
            raise f.error(key, f"expected a list of ops of arch '{name}', found {names}")
        lists[key] = tuple(names)
    arch = ArchDesc(name, f.get("doc", str, ""), label, f.get("library", str, name), mtype,
                    dtypes, dtype_set, f.get("fallback", str, None), lists["float32_ops"],
                    lists["elementwise_ops"], _templates(f), _package(f))
    f.done()
    return arch


def load_archs(root: Path, sets: dict) -> tuple[dict[str, ArchDesc], dict[str, tuple[YMap, str]]]:
    """Every arch of `root`/descriptions/archs, by name, and each one's YAML
    and file (for check_op_lists)."""
    archs, docs = {}, {}
    for path in sorted((root / "descriptions" / "archs").glob("*.yaml")):
        label = path.relative_to(root).as_posix()
        doc = load_yaml(path, label)
        arch = read_arch(doc, label, path.stem, sets)
        archs[arch.name], docs[arch.name] = arch, (doc, label)
    for arch in archs.values():
        f = Fields(*docs[arch.name], "", 1)
        if arch.fallback is not None and (arch.fallback not in archs or arch.fallback == arch.name):
            others = [a for a in archs if a != arch.name]
            raise f.error("fallback", f"expected another arch of descriptions/archs "
                                      f"({', '.join(others) or 'none'}), found '{arch.fallback}'")
        chain = [arch.name]
        while archs[chain[-1]].fallback not in (None, *chain):
            chain.append(archs[chain[-1]].fallback)
        if archs[chain[-1]].fallback == arch.name:
            raise f.error("fallback", "fallback cycle: " + " -> ".join([*chain, arch.name]))
    return archs, docs


def check_op_lists(doc, label: str, arch: ArchDesc, ops: dict[str, OpDesc]) -> None:
    """An arch's op lists name ops of that arch."""
    f = Fields(doc, label, "", 1)
    for key in _OP_LISTS:
        names = getattr(arch, key)
        if any(n not in ops or ops[n].arch != arch.name for n in names):
            raise f.error(key, f"expected a list of ops of arch '{arch.name}', found {list(names)}")


def apply_template(value: YMap, own: YMap, file: str, optype: str,
                   archs: dict[str, ArchDesc]) -> None:
    """Give an op (`value`, its parent merged in) the keys of its `template`, a
    snippet set of its arch, that its own description (`own`) does not give,
    at the line of its `template` key."""
    name = own.get("template")
    if name is None:
        return
    arch = value.get("arch")
    templates = archs[arch].templates if isinstance(arch, str) and arch in archs else {}
    if not isinstance(name, str) or name not in templates:
        raise Fields(own, file, optype, 0).error(
            "template", f"'{name}' is not a template of arch '{arch}' "
                        f"(known: {', '.join(templates) or 'none'})")
    line = own.line_of("template")
    for key, text in templates[name].items():
        if key not in own:
            value[key] = text
            value.lines[key] = line
            value.text_lines.pop(key, None)
