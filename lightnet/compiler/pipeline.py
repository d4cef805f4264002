"""The pass registry, and the compile pipeline of each target derived from it.

A pass is a function `run(ctx, job)` registered with a name, the properties
of the model it requires and the properties it provides (NNVM's pass
registry: the graph attributes a pass depends on and those it makes). No
pipeline is written down: a target's pipeline is the order those
declarations force, ties broken by registration order (the built-in passes
first, then each architecture's own, Arch.passes), so a pass a user registers runs
where its declarations put it.

A property holds once every pass of the pipeline that provides it has run,
and a pass runs once everything it requires holds. Several passes may
provide one property: every pass that rewrites the op list provides
`ops-final`, so the check and the memory plan, which require it, run after
all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lightnet.archs.registry import Arch, archs, get_arch
from lightnet.compiler import rewrites
from lightnet.errors import LightNetError

# The passes `Context.compile(combine=False)` (`--no-combine`) leaves out.
FUSION_PASSES = ("fold-constants", "combine", "remove-dead-constants")


@dataclass(frozen=True)
class Job:
    """What a pass is given besides the context: the architecture compiled
    for, the model's outputs before compiling (tensors no op read), the data type
    its ops compute in (float32 or bfloat16: the precision asked for, resolved by
    lightnet.compiler.targets), the ops the expand pass lowers with the
    architecture's fallback (Context.compile), and whether fold-constants runs."""

    arch: Arch
    outputs: tuple[str, ...]
    dtype: str = "float32"
    on_fallback: frozenset[str] = frozenset()
    folds: bool = True


@dataclass(frozen=True)
class Pass:
    """A registered pass. `targets`: the architectures whose pipeline it is
    part of; None, every one."""

    name: str
    run: Callable[..., None]
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    targets: tuple[str, ...] | None = None
    doc: str = ""

    def describe(self) -> str:
        requires = ", ".join(self.requires) or "nothing"
        provides = ", ".join(self.provides) or "nothing"
        return f"{self.name}: requires {requires}; provides {provides}"


_registry: dict[str, Pass] = {}
# How many of the registered passes are the built-in ones (set below them).
_built_in: int | None = None


def register(name: str, requires=(), provides=(), targets=None):
    """Register the decorated function `run(ctx, job)` as pass `name`.

        @pipeline.register("drop-prints", requires=["fused"], provides=["ops-final"])
        def drop_prints(ctx, job): ...

    Returns the function unchanged. `targets` (architecture names) limits the
    pass to their pipelines."""
    declared = _declared(name, requires, provides, targets)

    def add(run):
        new = _pass(declared, run)
        if name in _registry or (_built_in is not None and name in _own_passes()):
            raise LightNetError(f"a pass named '{name}' is already registered")
        _registry[name] = new
        return run

    return add


def new_pass(name: str, run, requires=(), provides=(), targets=None) -> Pass:
    """Pass `name` running `run(ctx, job)`, checked but not registered: what an
    architecture lists as its own (Arch.passes)."""
    return _pass(_declared(name, requires, provides, targets), run)


def _declared(name, requires, provides, targets) -> tuple:
    """A pass's name and declarations, checked: (name, requires, provides, targets)."""
    if not isinstance(name, str) or not name:
        raise LightNetError(f"a pass name must be a non-empty string, found {name!r}")
    requires = _names(name, "requires", requires)
    provides = _names(name, "provides", provides)
    if targets is not None:
        targets = _names(name, "targets", targets)
    return name, requires, provides, targets


def _pass(declared: tuple, run) -> Pass:
    name, requires, provides, targets = declared
    if not callable(run):
        raise LightNetError(f"pass '{name}': expected a function run(ctx, job), "
                            f"found {type(run).__name__}")
    doc = (run.__doc__ or "").strip().split("\n\n")[0]
    return Pass(name, run, requires, provides, targets, " ".join(doc.split()))


def _own_passes() -> dict[str, Pass]:
    """The architectures' own passes (Arch.passes) by name."""
    return {p.name: p for arch in archs().values() for p in arch.passes}


def _names(pass_name: str, field: str, value) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise LightNetError(f"pass '{pass_name}': {field} must be a list of names, "
                            f"found {value!r}")
    return tuple(value)


def unregister(name: str) -> None:
    """Remove pass `name` from the registry."""
    if _registry.pop(name, None) is None:
        raise LightNetError(f"no pass named '{name}' is registered")


def registered() -> list[Pass]:
    """Every pass, in registration order: the built-in ones, the architectures' own
    (Arch.passes), then those registered since."""
    passes = list(_registry.values())
    return [*passes[:_built_in], *_own_passes().values(), *passes[_built_in:]]


def pipeline(target: str) -> list[Pass]:
    """The passes of architecture `target`, in the order they run.

    LightNetError when a pass requires a property no pass of the target
    provides, or when passes require each other in a circle."""
    members = [p for p in registered() if p.targets is None or target in p.targets]
    providers: dict[str, list[Pass]] = {}
    for p in members:
        for prop in p.provides:
            providers.setdefault(prop, []).append(p)
    for p in members:
        for prop in p.requires:
            if prop not in providers:
                raise LightNetError(f"pass '{p.name}' requires '{prop}', which no pass of "
                                    f"target '{target}' provides")
    after = {p.name: {q.name for prop in p.requires for q in providers[prop]} for p in members}
    order: list[Pass] = []
    done: set[str] = set()
    pending = members
    while pending:
        ready = next((p for p in pending if after[p.name] <= done), None)
        if ready is None:
            raise LightNetError(_circle(pending, after, target))
        order.append(ready)
        done.add(ready.name)
        pending = [p for p in pending if p is not ready]
    return order


def _circle(pending: list[Pass], after: dict[str, set[str]], target: str) -> str:
    """The message naming one circle among passes none of which can run."""
    by_name = {p.name: p for p in pending}
    path = [pending[0]]
    while True:
        p = path[-1]
        q = by_name[min(n for n in after[p.name] if n in by_name)]  # each one is waiting
        if q in path:
            path = path[path.index(q):] + [q]
            break
        path.append(q)
    steps = ", ".join(
        f"'{a.name}' requires '{next(x for x in a.requires if x in b.provides)}' "
        f"(provided by '{b.name}')" for a, b in zip(path, path[1:]))
    return f"passes of target '{target}' require each other in a circle: {steps}"


def compile(ctx, target: str, combine: bool = True, dtype: str = "float32",
            on_fallback: frozenset[str] = frozenset(), fold: bool = True) -> None:
    """Run the pipeline of architecture `target` on `ctx`; `combine=False`
    leaves out FUSION_PASSES (to compare an optimized model with its plain
    lowering), `fold=False` fold-constants alone; `dtype`: the data type its ops
    compute in (float32, bfloat16); `on_fallback`: the ops to lower with the
    architecture's fallback."""
    left_out = set() if combine else set(FUSION_PASSES)
    if not fold:
        left_out.add("fold-constants")
    job = Job(get_arch(target), tuple(ctx.outputs), dtype, on_fallback,
              folds="fold-constants" not in left_out)
    for p in pipeline(target):
        if p.name not in left_out:
            p.run(ctx, job)


def describe(target: str) -> list[str]:
    """One line per pass of `target`'s pipeline, for `lightnet --passes`."""
    return [f"{i}. {p.describe()}" for i, p in enumerate(pipeline(target), 1)]


# The built-in passes -------------------------------------------------------------------


@register("expand", provides=["lowered", "ops-final"])
def _expand(ctx, job):
    """Replace every op not of the target by what the target's expanders make of it;
    compiling with the weights, what ops compute from constants alone by what the
    fallback architecture makes of it (fold-constants evaluates them)."""
    folded = ()
    if job.folds and ctx.compiled_with_weights and job.arch.fallback is not None:
        folded = {op.name for op in rewrites.computed_from_constants(ctx).values()}
    rewrites.expand(ctx, job.arch, job.on_fallback.union(folded))


@register("fold-constants", requires=["lowered"], provides=["folded", "ops-final"])
def _fold_constants(ctx, job):
    """Compiling with the weights, replace what ops compute from weights and constants
    alone by new weights holding it."""
    rewrites.fold_constants(ctx, job.arch.fallback or job.arch.name, job.outputs)


@register("hoist-constants", requires=["lowered", "folded"],
          provides=["sources-first", "ops-final"])
def _hoist_constants(ctx, job):
    """Move ops that read nothing and make only constants or inputs to the front."""
    rewrites.hoist_constants(ctx)


@register("combine", requires=["lowered", "sources-first"], provides=["fused", "ops-final"])
def _combine(ctx, job):
    """Apply the target's combiners over windows of adjacent ops until none matches."""
    rewrites.combine(ctx, job.arch, job.on_fallback)


@register("remove-dead-constants", requires=["fused"],
          provides=["no-dead-constants", "ops-final"])
def _remove_dead_constants(ctx, job):
    """Remove ops making only static tensors nothing reads any more (weights a
    rule folded), unless they were model outputs before compiling."""
    rewrites.remove_dead_constants(ctx, job.outputs)


@register("check", requires=["ops-final"], provides=["checked"])
def _check(ctx, job):
    """Every op reads only tensors an earlier op creates; the data-flow graph is acyclic."""
    ctx.check()


@register("plan-memory", requires=["checked"], provides=["memory-plan"])
def _plan_memory(ctx, job):
    """Place every tensor in one arena per memory type."""
    ctx.plan()


_built_in = len(_registry)
