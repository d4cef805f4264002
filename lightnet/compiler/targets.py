"""Targets and precisions: what `lightnet -t` and `--precision`, Context.compile(target,
precision) and Session(target=, precision=) name, resolved here and nowhere else.

A target is an architecture of the registry (lightnet.archs.registry) that can be used
on this machine (Arch.unavailable says why one cannot), or `auto`, the default: the
available architecture of the lowest Arch.auto_rank (dnnl where oneDNN loads, else
cpu).

A precision is what the user asks the ops to compute in: f32 (the default), bf16, or
auto, the architecture's choice on this machine (Arch.precision: bf16 where the CPU
computes it natively). It resolves to a data type, float32 or bfloat16 (numpy's names,
oneDNN's and the IR's), which is all the compiler passes on (Job.dtype).
"""

from __future__ import annotations

from lightnet.archs.registry import Arch, archs, get_arch
from lightnet.errors import LightNetError

AUTO = "auto"
# The precisions by name, each with the data type its ops compute in.
PRECISIONS = {"f32": "float32", "bf16": "bfloat16"}


def _ranked() -> list[Arch]:
    """The architectures target auto chooses from, in the order it tries them."""
    ranked = [a for a in archs().values() if a.auto_rank is not None]
    return sorted(ranked, key=lambda a: a.auto_rank)


def _problem(arch: Arch) -> str | None:
    """Why `arch` cannot be used here, in one line; None when it can."""
    reason = arch.unavailable()
    return None if reason is None else f"unavailable: {reason}"


def names() -> list[str]:
    """Every target name: auto, the architectures auto chooses from in its order, then
    any other architecture of the registry that runs ops."""
    ranked = [a.name for a in _ranked()]
    return [AUTO, *ranked, *(a for a in archs() if a != "none" and a not in ranked)]


def resolve(target: str) -> str:
    """The architecture `target` compiles for; LightNetError for a target that cannot be
    used here, saying why."""
    if target == AUTO:
        return next(a.name for a in _ranked() if _problem(a) is None)
    if target not in archs() or target == "none":
        raise LightNetError(f"unknown target '{target}' (known: {', '.join(names())})")
    problem = _problem(get_arch(target))
    if problem is not None:
        raise LightNetError(f"target '{target}': {problem}; use -t {resolve(AUTO)} (or auto)")
    return target


def resolve_precision(precision: str, arch_name: str) -> str:
    """The data type (float32, bfloat16) the ops of architecture `arch_name` compute in
    at precision `precision` (f32, bf16, auto); LightNetError for a precision that
    cannot be had here, saying why."""
    if precision != AUTO and precision not in PRECISIONS:
        raise LightNetError(f"unknown precision '{precision}' (known: "
                            f"{', '.join([*PRECISIONS, AUTO])})")
    arch = get_arch(arch_name)
    if precision != AUTO and precision not in arch.precisions:
        able = " or ".join(f"-t {a}" for a in names()[1:]
                           if precision in get_arch(a).precisions)
        only = " and ".join(PRECISIONS[p] for p in arch.precisions)
        raise LightNetError(f"precision '{precision}': target '{arch_name}' computes in "
                            f"{only} only; use {able} (or auto), or --precision f32")
    return PRECISIONS[arch.precision(precision)]


def describe() -> list[str]:
    """One line per target for `lightnet --targets`: whether it can be used here, what
    it says of itself (Arch.describe), and why not (Arch.unavailable)."""
    lines = []
    for name in (a for a in archs() if a != "none"):
        arch = get_arch(name)
        lines.append(f"{name}: {_problem(arch) or arch.describe()}")
    *first, last = [a.name for a in _ranked()]
    tried = "".join(f"{a} where it can be used, else " for a in first)
    lines.append(f"auto: {resolve(AUTO)} ({tried}{last})")
    return lines
