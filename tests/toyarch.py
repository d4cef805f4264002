"""The package of `toy`, the test architecture of tests/test_toy_arch.py: what a third
architecture is besides its descriptions (docs/adding-an-architecture.md).

Its description (written by the test into a copy of the tree) names this module as its
`package`, so the registry (lightnet.archs.registry) imports it instead of
lightnet.archs.toy.arch. Its three ops (relu_toy, sigmoid_toy, elew_toy) compute with
the numpy code of their descriptions, written apart from the cpu kernels.
"""

from __future__ import annotations

from lightnet.archs.registry import Arch


class ToyArch(Arch):
    """Available everywhere, never chosen by target auto (auto_rank None), computing
    in float32 only: it overrides what `lightnet --targets` says of it."""

    def describe(self) -> str:
        return "available (the test architecture: relu, sigmoid, elew sum/mul)"


ARCH = ToyArch
