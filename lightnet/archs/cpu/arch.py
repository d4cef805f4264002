"""The cpu architecture as the core knows it (lightnet.archs.registry.Arch): numpy's
kernels run everywhere, in float32, on the threads of numpy's BLAS."""

from __future__ import annotations

from lightnet.archs.cpu import blas
from lightnet.archs.registry import Arch


class Cpu(Arch):
    """numpy's kernels: always available, so target auto's last resort."""

    auto_rank = 1

    def describe(self) -> str:
        return "available (numpy kernels)"

    def check_threads(self) -> None:
        blas.thread_control()

    def threads(self, count: int | None, beside: bool = False):
        # Beside another library's threads, OpenBLAS's waiting for the next product
        # would take the cores from them (docs/performance.md, "One thread pool").
        return blas.threads(1 if beside and blas.controllable() else count)

    def thread_count(self):
        return blas.info()["threads"]

    def describe_kernels(self, ops) -> str:
        return blas.describe()


ARCH = Cpu
