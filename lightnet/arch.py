"""Architectures: the ops each one can run and the optimizer functions it owns.

`none` holds the abstract ops that only describe semantics; `cpu` holds the
runnable numpy ops. Op prototypes and optimizer functions come from the
generated registry (lightnet/auto/registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Callable

from lightnet.errors import LightNetError
from lightnet.op import OpProto


@dataclass(frozen=True)
class Combiner:
    """A rule over a window of adjacent ops: `func(ctx, window)` returns the
    replacement ops, or None when the window does not match."""

    name: str
    window: tuple[str, ...]
    func: Callable


@dataclass(frozen=True)
class Arch:
    """An architecture: its ops, and expanders (abstract optype -> function
    `(ctx, op) -> list of ops | None`), combiners, subgraph and schedule
    functions, applied in that order by `compile`."""

    name: str
    ops: dict[str, OpProto]
    expanders: dict[str, Callable] = field(default_factory=dict)
    combiners: tuple[Combiner, ...] = ()
    subgraphs: tuple[Callable, ...] = ()
    schedules: tuple[Callable, ...] = ()


@cache
def archs() -> dict[str, Arch]:
    from lightnet.auto import registry

    by_arch: dict[str, dict[str, OpProto]] = {}
    for proto in registry.OP_PROTOS:
        by_arch.setdefault(proto.arch, {})[proto.optype] = proto
    result = {}
    for name, ops in sorted(by_arch.items()):
        optimizers = registry.OPTIMIZERS.get(name)
        if optimizers is None:
            result[name] = Arch(name, ops)
        else:
            result[name] = Arch(name, ops, optimizers.EXPANDERS, optimizers.COMBINERS)
    return result


@cache
def op_protos() -> dict[str, OpProto]:
    return {optype: proto for arch in archs().values() for optype, proto in arch.ops.items()}


def get_arch(name: str) -> Arch:
    try:
        return archs()[name]
    except KeyError:
        known = ", ".join(a for a in archs() if a != "none")
        raise LightNetError(f"unknown target '{name}' (known: {known})") from None


def get_proto(optype: str) -> OpProto | None:
    return op_protos().get(optype)


# The suffixes of LightNet's ops for architectures LightNet has and this
# implementation does not: CUDA, TensorRT (conv2d_trt...) and the DPU.
FOREIGN_ARCH_SUFFIXES = ("_cuda", "_trt", "_dpu")


def abstract_proto(optype: str) -> OpProto | None:
    """The abstract op of an optype named for a foreign architecture
    (`create_cuda` -> create), so that a model written for LightNet's cuda or
    tensorrt targets runs on ours; None when there is none."""
    for suffix in FOREIGN_ARCH_SUFFIXES:
        if optype.endswith(suffix):
            proto = get_proto(optype[: -len(suffix)])
            if proto is not None and proto.arch == "none":
                return proto
    return None
