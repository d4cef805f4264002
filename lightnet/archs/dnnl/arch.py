"""The dnnl architecture as the core knows it (lightnet.archs.registry.Arch): oneDNN's
primitives where its library loads, with its layout pass, its bfloat16 policy and its
OpenMP threads; whatever oneDNN does not take runs on its fallback, the cpu."""

from __future__ import annotations

from lightnet.archs.dnnl import capi, layout_pass, ops, primitives
from lightnet.archs.registry import Arch
from lightnet.compiler import pipeline
from lightnet.errors import LightNetError


def _lay_out(ctx, job):
    """Insert the reorders where tensors cross between dnnl ops and the others
    (lightnet.archs.dnnl.layout_pass)."""
    layout_pass.lay_out(ctx, job.dtype)


class Dnnl(Arch):
    """oneDNN: target auto's first choice where its library loads."""

    auto_rank = 0
    passes = (pipeline.new_pass("layouts", _lay_out, requires=["fused", "no-dead-constants"],
                                provides=["laid-out", "ops-final"], targets=["dnnl"]),)
    precisions = ("f32", "bf16")
    owns_cores = True

    def unavailable(self) -> str | None:
        return capi.unavailable_reason()

    def describe(self) -> str:
        """oneDNN's version, the instruction set it detected, whether that computes
        bfloat16 natively, by emulation or not at all, and its threads."""
        lib = capi.library()
        bf16 = f"bf16 {lib.bf16}" if lib.bf16 else "no bf16"
        return (f"available (oneDNN {lib.version}, ISA {lib.cpu_isa}, {bf16}, "
                f"{lib.threads()} threads)")

    def precision(self, precision: str) -> str:
        """bfloat16 where oneDNN has it (auto: where it computes it natively)."""
        if precision == "f32":
            return precision
        lib = capi.library()
        if precision == "auto":
            return "bf16" if lib.bf16 == "native" else "f32"
        if lib.bf16 is None:
            raise LightNetError(f"precision 'bf16': oneDNN has no bfloat16 on this CPU (ISA "
                                f"{lib.cpu_isa}; it needs AVX-512); use --precision f32 "
                                "(or auto)")
        return precision

    def compiling(self):
        """Each oneDNN primitive made once per compile (ops.kernel_cache)."""
        return ops.kernel_cache()

    def loading(self):
        """One oneDNN memory object per tensor and layout while a model loads
        (primitives.memory_cache)."""
        return primitives.memory_cache()

    def slow_kernel(self, op) -> str | None:
        """oneDNN's reference implementations (`ref:...`): correct, but written for
        clarity, not speed."""
        info = getattr(op.values.get("call"), "impl_info", None)
        return info if info is not None and info.startswith("ref") else None

    def threads(self, count: int | None, beside: bool = False):
        return capi.threads(count)

    def kernel_counts(self, model_ops) -> dict[str, int]:
        return ops.kernel_counts(model_ops)

    def describe_kernels(self, model_ops) -> str | None:
        if not any(op.arch == self.name for op in model_ops):
            return None
        return ops.describe_kernels(model_ops)


ARCH = Dnnl
