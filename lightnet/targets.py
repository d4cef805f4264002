"""Targets: what `lightnet -t`, Context.compile(target) and Session(target=) name.

`cpu` is the numpy architecture, which runs everywhere. `dnnl` is oneDNN's: it
needs the library (lightnet.dnnl.capi says why it cannot load where it cannot) and
op descriptions of the dnnl architecture. `auto`, the default, is dnnl where both
are there, else cpu. Any other name is an architecture of the registry.
"""

from __future__ import annotations

from lightnet import arch
from lightnet.dnnl import capi
from lightnet.errors import LightNetError

AUTO = "auto"
DNNL = "dnnl"


def _dnnl_problem(library_first: bool = True) -> str | None:
    """Why the dnnl target cannot be used here, in one line; None when it can.
    `library_first=False` asks the registry first, which loads nothing."""
    checks = [_library_problem, _ops_problem]
    for check in checks if library_first else reversed(checks):
        problem = check()
        if problem is not None:
            return problem
    return None


def _library_problem() -> str | None:
    reason = capi.unavailable_reason()
    return None if reason is None else f"unavailable: {reason}"


def _ops_problem() -> str | None:
    if DNNL not in arch.archs():
        return "the dnnl architecture has no ops yet (its op descriptions are not written)"
    return None


def names() -> list[str]:
    """Every target name: auto, dnnl, cpu and any other architecture of the registry."""
    return [AUTO, DNNL, *(a for a in arch.archs() if a not in ("none", DNNL))]


def resolve(target: str) -> str:
    """The architecture `target` compiles for; LightNetError for a target that cannot be
    used here, saying why."""
    if target == AUTO:
        return DNNL if _dnnl_problem(library_first=False) is None else "cpu"
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
    not (for dnnl, oneDNN's version and the instruction set it detected)."""
    lines = ["cpu: available (numpy kernels)"]
    reason = capi.unavailable_reason()
    if reason is not None:
        lines.append(f"dnnl: unavailable: {reason}")
    else:
        lib = capi.library()
        found = f"oneDNN {lib.version}, ISA {lib.cpu_isa}, {lib.threads()} threads"
        problem = _dnnl_problem()
        lines.append(f"dnnl: available ({found})" if problem is None
                     else f"dnnl: not usable: {problem} ({found})")
    lines.append(f"auto: {resolve(AUTO)} (dnnl where it can be used, else cpu)")
    others = [a for a in arch.archs() if a not in ("none", "cpu", DNNL)]
    lines += [f"{a}: available" for a in others]
    return lines
