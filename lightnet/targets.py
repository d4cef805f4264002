"""Targets: what `lightnet -t`, Context.compile(target) and Session(target=) name.

`cpu` is the numpy architecture, which runs everywhere. `dnnl` is oneDNN's (with
the cpu ops for what oneDNN does not run): it needs the library
(lightnet.dnnl.capi says why it cannot load where it cannot). `auto`, the default,
is dnnl where the library loads, else cpu. Any other name is an architecture of the
registry.
"""

from __future__ import annotations

from lightnet import arch
from lightnet.dnnl import capi
from lightnet.errors import LightNetError

AUTO = "auto"
DNNL = "dnnl"


def _dnnl_problem() -> str | None:
    """Why the dnnl target cannot be used here, in one line; None when it can."""
    reason = capi.unavailable_reason()
    return None if reason is None else f"unavailable: {reason}"


def names() -> list[str]:
    """Every target name: auto, dnnl, cpu and any other architecture of the registry."""
    return [AUTO, DNNL, *(a for a in arch.archs() if a not in ("none", DNNL))]


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
    if target not in arch.archs() or target == "none":
        raise LightNetError(f"unknown target '{target}' (known: {', '.join(names())})")
    return target


def describe() -> list[str]:
    """One line per target for `lightnet --targets`: whether it can be used here, and why
    not (for dnnl, oneDNN's version, the instruction set it detected and whether
    that computes bfloat16 natively)."""
    lines = ["cpu: available (numpy kernels)"]
    problem = _dnnl_problem()
    if problem is not None:
        lines.append(f"dnnl: {problem}")
    else:
        lib = capi.library()
        bf16 = "native" if lib.native_bf16 else "not native"
        lines.append(f"dnnl: available (oneDNN {lib.version}, ISA {lib.cpu_isa}, "
                     f"bf16 {bf16}, {lib.threads()} threads)")
    lines.append(f"auto: {resolve(AUTO)} (dnnl where it can be used, else cpu)")
    others = [a for a in arch.archs() if a not in ("none", "cpu", DNNL)]
    lines += [f"{a}: available" for a in others]
    return lines
