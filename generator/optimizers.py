"""Optimizer descriptions: descriptions/optimizers/<arch>.yaml read into
Optimizer (expander rules and combiners of an arch of descriptions/archs)."""

from __future__ import annotations

import keyword
from pathlib import Path

from generator.fields import Fields
from generator.names import RULE_OP_LISTS, RULE_RESERVED, check_names, expression, parse
from generator.ops import plain
from generator.schema import (ArchDesc, Combiner, Constant, Expander, NewOp, OpDesc, Optimizer,
                              Rule)
from generator.source import DescriptionError, load_yaml


def _new_op(value, file, path, line, arch, ops, known, likes) -> NewOp:
    f = Fields(value, file, path, line)
    like = f.get("like", str, None)
    if like is not None and like not in likes:
        raise f.error("like", f"expected one of {', '.join(likes)}, found '{like}'")
    optype = f.get("optype", str, None)
    if optype is None and like is None:
        raise DescriptionError(file, line, path, "a new op needs 'optype', 'like' or both")
    if optype is not None and (optype not in ops or ops[optype].arch != arch):
        raise f.error("optype", f"'{optype}' is not an op of arch '{arch}'")
    name = expression(f, "name", known, None)
    mapped = {}
    for key in ("ins", "outs", "params", "rename"):
        items = []
        for arg, expr in f.get(key, dict, {}).items():
            if optype is not None and key != "rename":
                _check_arg(f, key, arg, ops[optype])
            text = expr if isinstance(expr, str) else repr(plain(expr))
            check_names(parse(text, "eval", f, key), known, f, key)
            if key == "rename":
                check_names(parse(arg, "eval", f, key), known, f, key)
            items.append((arg, text))
        mapped[key] = tuple(items)
    f.done()
    return NewOp(optype, like, name, mapped["ins"], mapped["outs"], mapped["params"],
                 mapped["rename"])


def _check_arg(f: Fields, key: str, arg: str, op: OpDesc) -> None:
    names = {"ins": [t.arg_name for t in op.tensors_in],
             "outs": [t.arg_name for t in op.tensors_out],
             "params": [p.arg_name for p in op.params]}[key]
    variadic = [t.arg_name for t in op.tensors_in if t.variadic] if key == "ins" else []
    if arg not in names and not any(arg.startswith(v) and arg[len(v):].isdigit()
                                    for v in variadic):
        raise f.error(key, f"'{arg}' is not one of {', '.join(names) or 'none'} of {op.optype}")


def _constants(f: Fields, arch: str, ops, known, fallback) -> tuple[Constant, ...]:
    """The `constants` key: `name: expr` or `name1, name2: expr` (a tuple)."""
    value = f.get("constants", dict, {})
    if not value:
        return ()
    file, line, path = f.where("constants")
    g = Fields(value, file, path, line)
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
        constants.append(Constant(names, expression(g, key, known)))
    g.done()
    if f"create_{arch}" not in ops and f"create_{fallback}" not in ops:
        raise f.error("constants", f"folded constants need the op create_{arch}"
                                   + (f" or create_{fallback}" if fallback else ""))
    return tuple(constants)


def _rule(f: Fields, arch: str, ops, subject: str, likes, fallback) -> Rule:
    """The when / tensors / constants / replace keys shared by expander and
    combiner rules."""
    tensors = tuple(f.get("tensors", list, []))
    for t in tensors:
        if not isinstance(t, str) or not t.isidentifier():
            raise f.error("tensors", f"tensor names must be identifiers, found {t!r}")
        if t in RULE_RESERVED:
            raise f.error("tensors", f"'{t}' is reserved: the generated code uses that name")
    constants = _constants(f, arch, ops, [subject, *tensors], fallback)
    known = [subject, *tensors, *(n for c in constants for n in c.names)]
    when = expression(f, "when", [subject, *RULE_OP_LISTS], None)
    replace = f.get("replace", (str, list))
    if isinstance(replace, str):  # shorthand: the op under another optype
        if replace not in ops or ops[replace].arch != arch:
            raise f.error("replace", f"'{replace}' is not an op of arch '{arch}'")
        new_ops = (NewOp(replace, likes[0], None, (), (), (), ()),)
    else:
        new_ops = tuple(_new_op(v, f.file, p, l, arch, ops, known, likes)
                        for v, p, l in f.items("replace"))
    return Rule(when, tensors, constants, new_ops)


def _guard(arch: ArchDesc, op: OpDesc) -> str | None:
    """What every expander rule of `arch` needs of `op` first: a dtype the arch
    computes in (the condition an op of the arch checks, over the OpView)."""
    first = None if op.converts else arch.checked_input(op.tensors_in)
    if first is None:
        return None
    return arch.dtype_check(f"op.ins.{first.arg_name}{'1' if first.variadic else ''}")[0]


def derived_expanders(arch: ArchDesc, ops: dict[str, OpDesc],
                      explicit=()) -> tuple[Expander, ...]:
    """The default lowering of abstract `X` to `X_<arch>`, guarded, for each op
    of an arch computing in fewer dtypes than X accepts that no rule lowers
    (`explicit`): the expand pass's own default lowering reads no dtype."""
    expanders = []
    for optype, op in ops.items():
        variant = ops.get(f"{optype}_{arch.name}")
        guard = _guard(arch, op)
        if (op.arch == "none" and optype not in explicit and guard is not None
                and variant is not None and variant.arch == arch.name):
            new_op = NewOp(variant.optype, "op", None, (), (), (), ())
            expanders.append(Expander(optype, guard, (Rule(None, (), (), (new_op,)),)))
    return tuple(expanders)


def load_optimizer(path: Path, label: str, ops: dict[str, OpDesc],
                   archs: dict[str, ArchDesc]) -> Optimizer:
    doc = load_yaml(path, label)
    f = Fields(doc, label, "", 1)
    name = f.get("arch", str)
    if name not in archs:
        raise f.error("arch", f"expected an arch of descriptions/archs ({', '.join(archs) or 'none'}), "
                              f"found '{name}'")
    if path.stem != name:
        raise f.error("arch", f"the file of arch '{name}' must be named {name}.yaml")
    arch = archs[name]
    fallback = arch.fallback
    expanders = []
    g = Fields(f.get("expanders", dict, {}), label, "expanders", f.line)
    for optype in g.map:
        if optype not in ops or ops[optype].arch != "none":
            raise g.error(optype, f"'{optype}' is not an abstract op (arch none)")
        items = g.items(optype)
        if not items:
            raise g.error(optype, "expected a non-empty list of rules")
        rules = []
        for i, (value, path_i, line) in enumerate(items):
            r = Fields(value, label, path_i, line)
            rule = _rule(r, name, ops, "op", ["op"], fallback)
            if rule.when is None and i != len(items) - 1:
                raise r.error("when", "only the last rule may omit 'when' (it always matches)")
            rules.append(rule)
            r.done()
        expanders.append(Expander(optype, _guard(arch, ops[optype]), tuple(rules)))
    combiners = []
    c = Fields(f.get("combiners", dict, {}), label, "combiners", f.line)
    for combiner in c.map:
        if not combiner.isidentifier():
            raise c.error(combiner, f"a combiner name must be an identifier, found '{combiner}'")
        r = Fields(c.get(combiner, dict), label, f"combiners.{combiner}", c.where(combiner)[1])
        window = r.get("window", list)
        window_archs = (name,) if fallback is None else (name, fallback)
        if len(window) < 1 or any(w != "*" and (w not in ops or ops[w].arch not in window_archs)
                                  for w in window):
            raise r.error("window", "expected a list of ops of arch "
                                    f"{' or '.join(repr(a) for a in window_archs)} "
                                    f"(or *), found {window}")
        likes = [f"ops[{i}]" for i in range(len(window))]
        combiners.append(Combiner(combiner, r.get("doc", str, ""), tuple(window),
                                  _rule(r, name, ops, "ops", likes, fallback)))
        r.done()
    expanders += derived_expanders(arch, ops, [e.optype for e in expanders])
    opt = Optimizer(arch, f.get("doc", str, ""), label, tuple(expanders), tuple(combiners))
    f.done()
    return opt
