"""Architectures: the ops each one can run and the optimizer functions it owns.

`none` holds the abstract ops that only describe semantics; `cpu` holds the
runnable numpy ops. Op prototypes come from the generated registry
(lightnet/auto/registry.py), optimizer functions from the generated
lightnet/auto/optimizers/ modules, and what an arch's description says of it
(its fallback, its op lists) from lightnet/auto/archs.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from typing import Callable

from lightnet.auto.archs import ARCHS
from lightnet.auto.optimizers import OPTIMIZERS
from lightnet.auto.registry import OP_PROTOS
from lightnet.errors import LightNetError
from lightnet.op import OpProto
from lightnet.rules import Combiner


@dataclass(frozen=True)
class Arch:
    """An architecture: its ops, its expanders (abstract optype -> function
    `(ctx, op) -> list of ops | None`) and combiners, which the expand and
    combine passes apply (lightnet.pipeline: passes of its own register
    there, with `targets=[name]`). An abstract op `X` that no expander lowers
    becomes `X_<name>` when the arch has that op; failing that, what the
    `fallback` arch makes of it."""

    name: str
    ops: dict[str, OpProto]
    expanders: dict[str, Callable] = field(default_factory=dict)
    combiners: tuple[Combiner, ...] = ()
    fallback: str | None = None
    # Ops that compute in float32 in a model of a reduced precision, and element-wise
    # ops, which compute in what they read (lightnet.layouts).
    float32_ops: frozenset[str] = frozenset()
    elementwise_ops: frozenset[str] = frozenset()


@cache
def archs() -> dict[str, Arch]:
    by_arch: dict[str, dict[str, OpProto]] = {}
    for proto in OP_PROTOS.values():
        by_arch.setdefault(proto.arch, {})[proto.optype] = proto
    result = {}
    for name, ops in sorted(by_arch.items()):
        arch = Arch(name, ops)
        described = ARCHS.get(name)  # none, the abstract ops' arch, is not described
        if described is not None:
            arch = replace(arch, fallback=described.fallback,
                           float32_ops=described.float32_ops,
                           elementwise_ops=described.elementwise_ops)
        optimizers = OPTIMIZERS.get(name)
        if optimizers is not None:
            arch = replace(arch, expanders=optimizers.EXPANDERS, combiners=optimizers.COMBINERS)
        result[name] = arch
    return result


def op_protos() -> dict[str, OpProto]:
    return OP_PROTOS


def get_arch(name: str) -> Arch:
    try:
        return archs()[name]
    except KeyError:
        known = ", ".join(a for a in archs() if a != "none")
        raise LightNetError(f"unknown target '{name}' (known: {known})") from None


def get_proto(optype: str) -> OpProto | None:
    return OP_PROTOS.get(optype)


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
