"""Symbolic dims: a dim an IR gives by name (`"N"`, or a whole multiple of a
product of them, `"4*N"`, `"N*S"`) instead of a number, so that one model
takes any batch size.

A symbolic dim may stand wherever an op's number or number-array param holds a
dim (an `input` op's `dims`, a `reshape`'s `dims`, ...) and in the shapes of
the model's `interface`. `bind` gives every name a value, making the plain IR
that Context checks and compiles; `generalize` goes the other way: from the
IRs built with the dims at different values it writes the one IR that says
which numbers are which dims (how the ONNX importer and `lightnet -c` keep a
symbolic dim symbolic).

A dim may have an upper bound (the `interface`'s `dims`: a sequence length no
longer than the position table it is sliced from); `bind` and `match` refuse
a value above it before anything is checked or bound.
"""

from __future__ import annotations

import copy
import functools
import math
import re

import numpy as np

from lightnet.errors import LightNetError

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DIM = re.compile(rf"(?:([1-9][0-9]*)\*)?({_NAME}(?:\*{_NAME})*)")

# The values the dims take in the IRs `generalize` compares: primes that no
# fixed dim of a model is likely to be a multiple of in the same place.
PROBES = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43)


def parse(text) -> tuple[int, tuple[str, ...]] | None:
    """(factor, names) of a symbolic dim (`"N"`: 1, ("N",); `"4*N*S"`: 4, ("N",
    "S")); None for anything else."""
    if not isinstance(text, str):
        return None
    m = _DIM.fullmatch(text)
    return None if m is None else (int(m.group(1) or 1), tuple(m.group(2).split("*")))


def expression(factor: int, names) -> str:
    """How the IR writes `factor` times the product of dims `names`."""
    return "*".join(([str(factor)] if factor != 1 else []) + sorted(names))


def _follows(value, changed: dict, base: dict, others: dict) -> str | None:
    """The expression of `value` (a number at the dims `base`) that becomes
    changed[s] when dim s alone is others[s] instead, or None when it is no
    whole multiple of the product of those dims."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    product = math.prod(base[s] for s in changed)
    factor = value // product
    if factor < 1 or value != factor * product:
        return None
    for s, v in changed.items():
        if v != factor * product // base[s] * others[s]:
            return None
    return expression(factor, changed)


@functools.lru_cache(maxsize=None)
def _number_params(optype) -> frozenset[str]:
    """The number and number-array params of `optype` (none when it is unknown)."""
    from lightnet.archs.registry import abstract_proto, get_proto
    from lightnet.ir.param import ParamType

    proto = (get_proto(optype) or abstract_proto(optype)) if isinstance(optype, str) else None
    if proto is None:
        return frozenset()
    return frozenset(p.arg_name for p in proto.params
                     if p.ptype in (ParamType.NUMBER, ParamType.ARRAY_NUMBER))


def _places(doc):
    """Every (container, key, where) holding a dim that may be symbolic; what is
    malformed is skipped (ir.parse reports it)."""
    if not isinstance(doc, dict):
        return
    ops = doc.get("ops")
    for index, op in enumerate(ops if isinstance(ops, list) else []):
        if not isinstance(op, dict) or not isinstance(op.get("params"), list) \
                or not op["params"]:
            continue
        optype = op.get("optype")
        numbers = _number_params(optype) if isinstance(optype, str) else frozenset()
        for item in op["params"]:
            if not isinstance(item, dict) or not isinstance(item.get("arg_name"), str) \
                    or item["arg_name"] not in numbers:
                continue
            name = op.get("name") if isinstance(op.get("name"), str) else ""
            where = f"op {index} ('{name}')" if name else f"op {index}"
            where = f"{where}: param '{item['arg_name']}'"
            value = item.get("value")
            if isinstance(value, list):
                yield from ((value, i, where) for i in range(len(value)))
            elif "value" in item:
                yield item, "value", where
    interface = doc.get("interface")
    if isinstance(interface, dict):
        for kind in ("inputs", "outputs"):
            ports = interface.get(kind)
            for index, port in enumerate(ports if isinstance(ports, list) else []):
                if isinstance(port, dict) and isinstance(port.get("shape"), list):
                    where = f"'interface' {kind}[{index}] field 'shape'"
                    yield from ((port["shape"], i, where) for i in range(len(port["shape"])))


def names(doc) -> list[str]:
    """The names of the symbolic dims of an IR document, sorted."""
    found = {parse(c[k]) for c, k, _ in _places(doc)}
    return sorted({n for p in found if p is not None for n in p[1]})


def upper_bounds(doc, label: str) -> dict[str, int]:
    """{name: the largest value the model allows it} of the symbolic dims the
    `interface` field `dims` bounds ([{"name": "S", "max": 512}]), validated:
    each a symbolic dim of the model, bounded once, by a whole number >= 1."""
    interface = doc.get("interface") if isinstance(doc, dict) else None
    if not isinstance(interface, dict) or "dims" not in interface:
        return {}
    entries = interface["dims"]
    if not isinstance(entries, list):
        raise LightNetError(f"{label}: 'interface' dims: expected an array, found "
                            f"{type(entries).__name__}")
    known = names(doc)
    bounds: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"{label}: 'interface' dims[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "max"}:
            raise LightNetError(f"{where}: expected an object {{\"name\": ..., \"max\": ...}}, "
                                f"found {entry!r}")
        name, bound = entry["name"], entry["max"]
        if name not in known:
            raise LightNetError(f"{where}: '{name}' is not a symbolic dim of the model "
                                f"(symbolic dims: {', '.join(known) or 'none'})")
        if name in bounds:
            raise LightNetError(f"{where}: '{name}' is bounded twice")
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise LightNetError(f"{where} field 'max': expected a whole number >= 1, "
                                f"found {bound!r}")
        bounds[name] = bound
    return bounds


def bind(doc, dims: dict | None, label: str):
    """The IR document with every symbolic dim replaced by its value in `dims`
    (the document itself when it has none), and without the bounds of the dims
    (its interface's `dims`). Every name must be given a whole number >= 1, no
    more than its bound, and every name given must be a dim of the model."""
    dims = dict(dims or {})
    known = names(doc)
    bounds = upper_bounds(doc, label)
    for name, value in dims.items():
        if name not in known:
            raise LightNetError(f"{label}: dims: the model has no symbolic dim '{name}' "
                                f"(symbolic dims: {', '.join(known) or 'none'})")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < 1:
            raise LightNetError(f"{label}: dims: '{name}' must be a whole number >= 1, "
                                f"found {value!r}")
        if value > bounds.get(name, value):
            raise LightNetError(f"{label}: dims: '{name}' is {value}, more than the model "
                                f"allows: at most {bounds[name]}")
    if not known:
        return doc
    doc = copy.deepcopy(doc)
    doc.get("interface", {}).pop("dims", None)
    for container, key, where in _places(doc):
        dim = parse(container[key])
        if dim is None:
            continue
        factor, dim_names = dim
        for name in dim_names:
            if name not in dims:
                raise LightNetError(
                    f"{label}: {where}: dim '{container[key]}' is symbolic and no value is "
                    f"given for '{name}': give it, e.g. Context.init(model, dims={{'{name}': "
                    "1}); Session binds it from the arrays it is fed")
        container[key] = factor * math.prod(int(dims[n]) for n in dim_names)
    return doc


def describe(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def match(pattern, shape, dims: dict, bounds: dict | None = None) -> str | None:
    """Bind the names of `pattern` (a shape whose dims may be names) from `shape`
    into `dims`; what does not fit (a dim above its bound in `bounds`, see
    upper_bounds), or None."""
    if len(pattern) != len(shape):
        return f"expected {len(pattern)} dims {describe(pattern)}, found {describe(shape)}"
    new = {}
    products = []
    for axis, (want, got) in enumerate(zip(pattern, shape)):
        dim = parse(want)
        if dim is None:
            if want != got:
                return f"expected shape {describe(pattern)}, found {describe(shape)}"
            continue
        factor, dim_names = dim
        if len(dim_names) > 1:
            products.append((axis, want, got, factor, dim_names))
            continue
        name = dim_names[0]
        value = got // factor
        if got < 1 or got % factor:
            return (f"dim {axis} is '{want}': expected a positive multiple of {factor}, "
                    f"found {got}")
        bound = dims.get(name, new.get(name))
        if bound is not None and bound != value:
            return (f"dim {axis} is '{want}' with {name} = {value}, but {name} = {bound} "
                    "elsewhere in the same run")
        most = (bounds or {}).get(name)
        if most is not None and value > most:
            return (f"dim {axis} is '{want}' with {name} = {value}, more than the model "
                    f"allows: at most {most}")
        new[name] = value
    for axis, want, got, factor, dim_names in products:  # given by the other dims
        known = {**dims, **new}
        if any(n not in known for n in dim_names):
            return (f"dim {axis} is '{want}', a product of dims that no other dim of the "
                    "input gives alone")
        if got != factor * math.prod(known[n] for n in dim_names):
            return (f"dim {axis} is '{want}': expected "
                    f"{factor * math.prod(known[n] for n in dim_names)}, found {got}")
    dims.update(new)
    return None


def probe_dims(symbols: list[str]) -> list[dict[str, int]]:
    """The values of `symbols` generalize builds with: every symbol at its probe
    value, then each one in turn at another."""
    base = {s: PROBES[i] for i, s in enumerate(symbols)}
    return [base] + [{**base, s: PROBES[len(symbols) + i]} for i, s in enumerate(symbols)]


def generalize(build, symbols: list[str], fixed: dict, label: str):
    """The IR (and weights) `build(dims)` makes, with the symbolic dims `symbols`
    written as names: `build` runs once with every symbol at a probe value and
    once more per symbol with that one at another; a number that follows some
    as a whole multiple of their product becomes that product ("4*N"). `fixed` are dims given
    values that stay numbers. `build` returns (IR document, {name: array} or None)."""
    base_dims = {**fixed, **{s: PROBES[i] for i, s in enumerate(symbols)}}
    base_doc, base_weights = build(base_dims)
    others = {s: PROBES[len(symbols) + i] for i, s in enumerate(symbols)}
    variants = []
    for s in symbols:
        doc, weights = build({**base_dims, s: others[s]})
        variants.append((s, doc))
        _same_weights(base_weights, weights, s, label)
    result = copy.deepcopy(base_doc)

    def refuse(where, what):
        raise LightNetError(
            f"{label}: {where}: {what}; the model is not the same for every value of "
            f"its symbolic dims ({', '.join(symbols)}) in a way LightNet's IR can say: "
            "fix them (onnx2ln --shape NAME=D1,D2,... or --dim NAME=VALUE)")

    def walk(base, values, where, out, key):
        if isinstance(base, dict):
            if any(not isinstance(v, dict) or v.keys() != base.keys() for v in values):
                refuse(where, "its fields change")
            for k in base:
                walk(base[k], [v[k] for v in values], where, out[key], k)
        elif isinstance(base, list):
            if any(not isinstance(v, list) or len(v) != len(base) for v in values):
                refuse(where, "its length changes")
            for k, item in enumerate(base):
                walk(item, [v[k] for v in values], where, out[key], k)
        elif all(type(v) is type(base) and v == base for v in values):
            return
        else:
            changed = {s: value for (s, _), value in zip(variants, values)
                       if not (type(value) is type(base) and value == base)}
            dim = _follows(base, changed, base_dims, others)
            if dim is None:
                refuse(where, f"{base!r} changes with {' and '.join(changed)}, not as a whole "
                              f"multiple of {'it' if len(changed) == 1 else 'their product'}")
            out[key] = dim

    ops = base_doc.get("ops", [])
    if any(len(doc["ops"]) != len(ops) for _, doc in variants):
        refuse("ops", "their number changes")
    for index, op in enumerate(ops):
        walk(op, [doc["ops"][index] for _, doc in variants], f"op {index} ('{op.get('name')}')",
             result["ops"], index)
    if "interface" in base_doc:
        walk(base_doc["interface"], [doc.get("interface") for _, doc in variants],
             "'interface'", result, "interface")
    # Every name stands where bind() gives it its value back.
    present = names(result)
    for s, doc in [(None, base_doc)] + variants:
        dims = {**base_dims, s: others[s]} if s is not None else base_dims
        if bind(result, {n: dims[n] for n in present}, label) != doc:
            refuse("the IR", "a dim that follows a symbolic dim is not a param's dim")
    return result, base_weights


def implied_bounds(limits: list[list[tuple[int, int]]], symbols: list[str],
                   fixed: dict) -> list[dict]:
    """The `interface` `dims` entries ({"name", "max"}) that bound the symbolic dims
    `symbols`, from the builds generalize made (the base first, then one per
    symbol): each build's list of (value, room) pairs where value <= room must
    hold (a slice's length and what its table has from its start). A value that
    follows one dim alone as k times it, its room the same in every build, bounds
    that dim by room // k; each dim keeps its least bound."""
    base_dims = {**fixed, **{s: PROBES[i] for i, s in enumerate(symbols)}}
    others = {s: PROBES[len(symbols) + i] for i, s in enumerate(symbols)}
    if any(len(pairs) != len(limits[0]) for pairs in limits):
        return []
    bounds: dict[str, int] = {}
    for index, (value, room) in enumerate(limits[0]):
        variants = [pairs[index] for pairs in limits[1:]]
        if any(r != room for _, r in variants):
            continue
        changed = {s: v for s, (v, _) in zip(symbols, variants) if v != value}
        dim = parse(_follows(value, changed, base_dims, others)) if changed else None
        if dim is not None and len(dim[1]) == 1 and room >= dim[0]:
            name = dim[1][0]
            bounds[name] = min(bounds.get(name, room // dim[0]), room // dim[0])
    return [{"name": n, "max": b} for n, b in sorted(bounds.items())]


def _same_weights(base, other, symbol: str, label: str) -> None:
    if base is None and other is None:
        return
    for name in sorted(set(base) | set(other)):
        a, b = base.get(name), other.get(name)
        if a is None or b is None or a.shape != b.shape or not np.array_equal(a, b):
            raise LightNetError(
                f"{label}: weight '{name}' depends on the symbolic dim {symbol}, which a "
                "weight file cannot say: fix the dim (onnx2ln --shape NAME=D1,D2,... or "
                "--dim NAME=VALUE)")


def shapes(check, symbols: list[str]) -> dict[str, tuple]:
    """The shape of every tensor of a model with symbolic dims `symbols`, a dim
    that follows them as a whole multiple of their product written as it ("N",
    "4*N", "N*S"), one that follows them otherwise as None. `check(dims)` is the model checked
    (a Context initialized) with the dims at those values."""
    base_dims = {s: PROBES[i] for i, s in enumerate(symbols)}
    others = {s: PROBES[len(symbols) + i] for i, s in enumerate(symbols)}
    base = check(base_dims)
    variants = [(s, check({**base_dims, s: others[s]})) for s in symbols]
    result = {}
    for name, entry in base.tensors.items():
        dims = []
        for axis, d in enumerate(entry.shape):
            changed = {s: ctx.tensors[name].shape[axis] for s, ctx in variants
                       if ctx.tensors[name].shape[axis] != d}
            dims.append(_follows(d, changed, base_dims, others) if changed else d)
        result[name] = tuple(dims)
    for _, ctx in variants:
        ctx.cleanup()
    base.cleanup()
    return result
