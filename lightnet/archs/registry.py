"""Architectures: the ops each one can run and the optimizer functions it owns.

`none` holds the abstract ops that only describe semantics; `cpu` holds the
runnable numpy ops. Op prototypes come from the generated registry
(lightnet/auto/registry.py), optimizer functions from the generated
lightnet/auto/optimizers/ modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Callable

from lightnet.auto.optimizers import OPTIMIZERS
from lightnet.auto.registry import OP_PROTOS
from lightnet.compiler.rules import Combiner
from lightnet.errors import LightNetError
from lightnet.ir.op import OpProto


@dataclass(frozen=True)
class Arch:
    """An architecture: its ops, its expanders (abstract optype -> function
    `(ctx, op) -> list of ops | None`) and combiners, which the expand and
    combine passes apply (lightnet.compiler.pipeline: passes of its own register
    there, with `targets=[name]`). An abstract op `X` that no expander lowers
    becomes `X_<name>` when the arch has that op; failing that, what the
    `fallback` arch makes of it."""

    name: str
    ops: dict[str, OpProto]
    expanders: dict[str, Callable] = field(default_factory=dict)
    combiners: tuple[Combiner, ...] = ()
    fallback: str | None = None
    # Ops that compute in float32 in a model of a reduced precision, and element-wise
    # ops, which compute in what they read (lightnet.archs.dnnl.layout_pass).
    float32_ops: frozenset[str] = frozenset()
    elementwise_ops: frozenset[str] = frozenset()


@cache
def archs() -> dict[str, Arch]:
    by_arch: dict[str, dict[str, OpProto]] = {}
    for proto in OP_PROTOS.values():
        by_arch.setdefault(proto.arch, {})[proto.optype] = proto
    result = {}
    for name, ops in sorted(by_arch.items()):
        optimizers = OPTIMIZERS.get(name)
        if optimizers is None:
            result[name] = Arch(name, ops)
        else:
            result[name] = Arch(name, ops, optimizers.EXPANDERS, optimizers.COMBINERS,
                                fallback=optimizers.FALLBACK,
                                float32_ops=optimizers.FLOAT32_OPS,
                                elementwise_ops=optimizers.ELEMENTWISE_OPS)
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
