"""Targets: what `lightnet -t`, Context.compile(target) and Session(target=) name.

`cpu` is the numpy architecture, which runs everywhere. `dnnl` is oneDNN's (with
the cpu ops for what oneDNN does not run): it needs the library
(lightnet.archs.dnnl.capi says why it cannot load where it cannot). `auto`, the default,
is dnnl where the library loads, else cpu. Any other name is an architecture of the
registry.
"""

from __future__ import annotations

from lightnet.archs import registry
from lightnet.archs.dnnl import capi
from lightnet.errors import LightNetError

AUTO = "auto"
DNNL = "dnnl"
# Precisions by name: the data type the dnnl ops compute in.
PRECISIONS = {"f32": "float32", "bf16": "bfloat16", AUTO: None}


def _dnnl_problem() -> str | None:
    """Why the dnnl target cannot be used here, in one line; None when it can."""
    reason = capi.unavailable_reason()
    return None if reason is None else f"unavailable: {reason}"


def names() -> list[str]:
    """Every target name: auto, dnnl, cpu and any other architecture of the registry."""
    return [AUTO, DNNL, *(a for a in registry.archs() if a not in ("none", DNNL))]


def resolve(target: str) -> str:
    """The architecture `target` compiles for; LightNetError for a target that cannot be
    used here, saying why."""
    if target == AUTO:
        return DNNL if _dnnl_problem() is None else "cpu"
    if target == DNNL:
        problem = _dnnl_problem()
        if problem is not None:
            raise LightNetError(f"target 'dnnl': {problem}; use -t cpu (or auto)")
        return DNNL
    if target not in registry.archs() or target == "none":
        raise LightNetError(f"unknown target '{target}' (known: {', '.join(names())})")
    return target


def resolve_precision(precision: str, arch_name: str) -> str:
    """The data type (float32, bfloat16) precision `precision` (f32, bf16, auto)
    has the dnnl ops of architecture `arch_name` compute in; LightNetError for a
    precision that cannot be had here, saying why. auto: bfloat16 where oneDNN
    computes it natively, else float32."""
    if precision not in PRECISIONS:
        raise LightNetError(f"unknown precision '{precision}' (known: "
                            f"{', '.join(PRECISIONS)})")
    if precision == "f32":
        return "float32"
    bf16 = capi.library().bf16 if arch_name == DNNL else None
    if precision == AUTO:
        return "bfloat16" if bf16 == "native" else "float32"
    if arch_name != DNNL:
        raise LightNetError(f"precision 'bf16': target '{arch_name}' computes in float32 "
                            "only; use -t dnnl (or auto), or --precision f32")
    if bf16 is None:
        raise LightNetError(f"precision 'bf16': oneDNN has no bfloat16 on this CPU (ISA "
                            f"{capi.library().cpu_isa}; it needs AVX-512); use "
                            "--precision f32 (or auto)")
    return "bfloat16"


def describe() -> list[str]:
    """One line per target for `lightnet --targets`: whether it can be used here, and why
    not (for dnnl, oneDNN's version, the instruction set it detected and whether
    that computes bfloat16 natively, by emulation, or not at all)."""
    lines = ["cpu: available (numpy kernels)"]
    problem = _dnnl_problem()
    if problem is not None:
        lines.append(f"dnnl: {problem}")
    else:
        lib = capi.library()
        bf16 = f"bf16 {lib.bf16}" if lib.bf16 else "no bf16"
        lines.append(f"dnnl: available (oneDNN {lib.version}, ISA {lib.cpu_isa}, "
                     f"{bf16}, {lib.threads()} threads)")
    lines.append(f"auto: {resolve(AUTO)} (dnnl where it can be used, else cpu)")
    others = [a for a in registry.archs() if a not in ("none", "cpu", DNNL)]
    lines += [f"{a}: available" for a in others]
    return lines
