"""Architectures as the core knows them, and every op prototype by optype.

An architecture is what its descriptions say, generated into lightnet/auto (its ops
from descriptions/ops, its expanders and combiners from descriptions/optimizers, its
fallback and the op lists its passes read from descriptions/archs), and what its
package says: lightnet/archs/<name>/arch.py (or the module its description's
`package` names) names, as ARCH, a subclass of Arch that
overrides the defaults below where the architecture has something to say (`none`,
which only describes, has no package). The core reads an architecture only through
Arch, never by name: a new one is a package and its descriptions.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Callable, ClassVar

from lightnet.auto.archs import ARCHS
from lightnet.auto.optimizers import OPTIMIZERS
from lightnet.auto.registry import OP_PROTOS
from lightnet.compiler.rules import Combiner
from lightnet.errors import LightNetError
from lightnet.ir.op import OpProto

_UNCHANGED = contextlib.nullcontext()


@dataclass(frozen=True)
class Arch:
    """An architecture: its ops, its expanders (abstract optype -> function
    `(ctx, op) -> list of ops | None`) and combiners, which the expand and
    combine passes apply (lightnet.compiler.pipeline). An abstract op `X` that no
    expander lowers becomes `X_<name>` when the arch has that op; failing that, what
    the `fallback` arch makes of it.

    What its package overrides, by when the core asks:
    - choosing a target (lightnet.compiler.targets): unavailable(), describe(),
      auto_rank;
    - compiling (Context.compile): passes, precisions and precision(), compiling(),
      slow_kernel();
    - loading (Context.load): loading();
    - running (Context.run): owns_cores, check_threads(), threads();
    - reporting (`lightnet info`, `bench`, `--profile`): library, kernel_counts(),
      describe_kernels(), thread_count().
    """

    name: str
    ops: dict[str, OpProto]
    expanders: dict[str, Callable] = field(default_factory=dict)
    combiners: tuple[Combiner, ...] = ()
    fallback: str | None = None
    # Ops that compute in float32 in a model of a reduced precision, and element-wise
    # ops, which compute in what they read (lightnet.archs.dnnl.layout_pass).
    float32_ops: frozenset[str] = frozenset()
    elementwise_ops: frozenset[str] = frozenset()
    # The library whose kernels kernel_counts() names (`lightnet info`).
    library: str | None = None

    # Where target auto tries it: the available architecture of the lowest rank is
    # chosen; None: never.
    auto_rank: ClassVar[int | None] = None
    # Passes of its own (lightnet.compiler.pipeline.new_pass), in its pipeline only.
    passes: ClassVar[tuple] = ()
    # The precisions its ops can compute in (lightnet.compiler.targets.PRECISIONS)
    # where the machine lets them.
    precisions: ClassVar[tuple[str, ...]] = ("f32",)
    # Whether its library's threads own the cores while a model with its ops runs
    # (OpenMP's, waiting for the next op): the other architectures' kernels then run
    # one thread beside them.
    owns_cores: ClassVar[bool] = False

    def unavailable(self) -> str | None:
        """Why it cannot be used on this machine, in one line; None when it can."""
        return None

    def describe(self) -> str:
        """What `lightnet --targets` says of it where it can be used."""
        return "available"

    def precision(self, precision: str) -> str:
        """The precision its ops compute in when asked for `precision` (auto, or one of
        `precisions`); LightNetError where this machine cannot give it, saying why."""
        return self.precisions[0] if precision == "auto" else precision

    def compiling(self):
        """A context manager Context.compile holds while it compiles (every pass, every
        compile again for a refused op): where the architecture keeps what a compile
        makes more than once (dnnl: each oneDNN primitive)."""
        return _UNCHANGED

    def loading(self):
        """A context manager Context.load holds while it binds the ops: where the
        architecture keeps what the ops' loads make more than once (dnnl: a oneDNN
        memory object over each tensor, which its reader and its producer share)."""
        return _UNCHANGED

    def slow_kernel(self, op) -> str | None:
        """The name of the slow reference kernel its checked op `op` would run (which
        Context.compile avoids by lowering the op for the fallback instead); None."""
        return None

    def check_threads(self) -> None:
        """Raise LightNetError when its threads cannot be set from here:
        Context(threads=N) asks at once, so that run() does not fail."""

    def threads(self, count: int | None, beside: bool = False):
        """A context in which its kernels run `count` threads (None: as the environment
        set them), and as before after it; `beside`: the model runs another
        architecture's ops, whose threads own the cores. Context.run asks on every run:
        where it changes nothing, a contextlib.nullcontext, which costs nothing."""
        return _UNCHANGED

    def thread_count(self) -> int | str | None:
        """How many threads its kernels run now (`lightnet bench`); None: no say."""
        return None

    def kernel_counts(self, ops) -> dict[str, int]:
        """How many of `ops` (compiled, checked) run each of its library's kernels."""
        return {}

    def describe_kernels(self, ops) -> str | None:
        """One line on the kernels it runs `ops` with (`lightnet bench`,
        `--profile`); None when it has nothing to say."""
        return None


def _arch_class(name: str) -> type[Arch]:
    """The Arch subclass of architecture `name`'s package (its description's
    `package`, else lightnet.archs.<name>.arch); Arch for one without."""
    described = ARCHS.get(name)
    if described is not None and described.package is not None:
        return _described_package(name, described.package)
    try:
        module = importlib.import_module(f"lightnet.archs.{name}.arch")
    except ModuleNotFoundError as e:
        if e.name not in (f"lightnet.archs.{name}", f"lightnet.archs.{name}.arch"):
            raise
        return Arch
    return module.ARCH


def _described_package(name: str, package: str) -> type[Arch]:
    """The ARCH of the module an arch description names as its `package`."""
    where = f"descriptions/archs/{name}.yaml: package '{package}'"
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError as e:
        raise LightNetError(f"{where}: cannot be imported ({e})") from None
    arch = getattr(module, "ARCH", None)
    if not (isinstance(arch, type) and issubclass(arch, Arch)):
        raise LightNetError(f"{where}: expected ARCH, a subclass of "
                            f"lightnet.archs.registry.Arch, found {arch!r}")
    return arch


@cache
def archs() -> dict[str, Arch]:
    """Every architecture by name, in order of name."""
    by_arch: dict[str, dict[str, OpProto]] = {}
    for proto in OP_PROTOS.values():
        by_arch.setdefault(proto.arch, {})[proto.optype] = proto
    result = {}
    for name, ops in sorted(by_arch.items()):
        arch = _arch_class(name)(name, ops)
        described = ARCHS.get(name)  # none, the abstract ops' arch, is not described
        if described is not None:
            arch = replace(arch, fallback=described.fallback,
                           float32_ops=described.float32_ops,
                           elementwise_ops=described.elementwise_ops,
                           library=described.library)
        optimizers = OPTIMIZERS.get(name)
        if optimizers is not None:
            arch = replace(arch, expanders=optimizers.EXPANDERS, combiners=optimizers.COMBINERS)
        result[name] = arch
    return result


def threads_set(count: int | None, beside: frozenset[str] = frozenset()):
    """A context in which every architecture's kernels run `count` threads
    (Arch.threads), those named in `beside` beside another's that own the cores, and
    as before after it. Context.run enters it on every run: where no architecture
    changes anything it is a shared no-op."""
    setters = []
    for arch in archs().values():
        setter = arch.threads(count, arch.name in beside)
        if not isinstance(setter, contextlib.nullcontext):
            setters.append(setter)
    if len(setters) < 2:
        return setters[0] if setters else _UNCHANGED
    return _all_set(setters)


@contextlib.contextmanager
def _all_set(setters):
    with contextlib.ExitStack() as stack:
        for setter in setters:
            stack.enter_context(setter)
        yield


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
