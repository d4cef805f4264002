"""Which function maps a node, and the attributes it accepts, declared once.

A handler (and a constant folder) is a plain function whose keyword-only
parameters are the ONNX attributes it accepts, their defaults the spec's:

    @handler("LeakyRelu", 1, 6, 16)
    def leaky_relu(c, n, *, alpha=0.01, consumed_inputs=None): ...

`attribute_arguments` checks a node against that signature: an attribute the
function does not name is unsupported (the node cannot be mapped), a
parameter without a default is a required attribute, and missing it is an
invalid model. A handler that takes `**attributes` accepts any. Attributes
that no longer mean anything at inference (opset 1's `consumed_inputs`) are
named and ignored.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

from lightnet.errors import LightNetError

from .errors import Unsupported
from .graph import Node

# op type -> [(the op versions a function supports, the function)]
HANDLERS: dict[str, list[tuple[frozenset[int], Callable]]] = {}


def handler(op_type: str, *versions: int):
    """Register a mapping for `op_type`, supporting exactly the op versions listed."""
    def register(func):
        entries = HANDLERS.setdefault(op_type, [])
        taken = set().union(*(v for v, _ in entries))
        if taken & set(versions):
            raise ValueError(f"{op_type}: versions {sorted(taken & set(versions))} "
                             "have two handlers")
        entries.append((frozenset(versions), func))
        return func
    return register


def find_handler(op_type: str, version: int) -> Callable | None:
    """The function mapping `op_type` at `version`, None if there is none."""
    for versions, func in HANDLERS.get(op_type, ()):
        if version in versions:
            return func
    return None


def supported_versions(op_type: str) -> list[int]:
    return sorted(set().union(*(v for v, _ in HANDLERS.get(op_type, ()))))


@functools.cache
def accepted_attributes(func: Callable) -> tuple[tuple[str, ...], frozenset[str], bool]:
    """(the attribute names `func` accepts, those it requires, whether it takes any)."""
    params = inspect.signature(func).parameters.values()
    names = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
    required = frozenset(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
                         and p.default is inspect.Parameter.empty)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return names, required, takes_any


def attribute_arguments(func: Callable, n: Node) -> dict:
    """The node's attributes as keyword arguments of `func`, checked against its signature."""
    names, required, takes_any = accepted_attributes(func)
    if not n.attrs and not required:
        return {}
    if not takes_any:
        unknown = sorted(set(n.attrs) - set(names))
        if unknown:
            listed = ", ".join(f"'{a}'" for a in unknown)
            raise Unsupported(
                f"node {n.label} has attribute{'s' if len(unknown) > 1 else ''} {listed}, "
                f"which the importer does not take for {n.op_type}-{n.version} "
                f"(it takes: {', '.join(sorted(names)) or 'none'})")
    missing = sorted(required - set(n.attrs))
    if missing:
        raise LightNetError(f"node {n.label} ({n.op_type}-{n.version}): required attribute "
                            f"'{missing[0]}' is missing (an invalid ONNX model)")
    return dict(n.attrs)
