"""The passes that rewrite the op list: expand, fold constants, hoist constants,
combine until stable, remove dead constants. lightnet.compiler.pipeline registers them and
orders them into a target's pipeline.

Expanders and combiners work on the linear op list (a peephole optimizer);
they may consult the data-flow graph to decide. The context is checked after
every change.
"""

from __future__ import annotations

import numpy as np

from lightnet.archs.registry import Arch, get_arch, get_proto
from lightnet.errors import LightNetError
from lightnet.ir.op import Op
from lightnet.ir.param import Param

MAX_COMBINE_ROUNDS = 100


def expand(ctx, arch: Arch, on_fallback: frozenset[str] = frozenset()) -> None:
    """Replace every op not of `arch` (or of its fallback) by what the arch
    lowers it to; the ops named in `on_fallback` by what its fallback lowers
    them to (ops the arch's library would run with a slow reference kernel)."""
    runs = {arch.name, arch.fallback}
    i = 0
    while i < len(ctx.ops):
        op = ctx.ops[i]
        if op.proto.arch in runs:
            i += 1
            continue
        new_ops = None if op.name in on_fallback else lower(ctx, arch, op)
        if new_ops is None and arch.fallback is not None:
            new_ops = lower(ctx, get_arch(arch.fallback), op)
        if new_ops is None:
            raise LightNetError(
                f"op '{op.name}' ({op.optype}) cannot be compiled for target "
                f"'{arch.name}': no expander rule matches it"
            )
        ctx.replace_ops(i, 1, new_ops)
        i += len(new_ops)


def lower(ctx, arch: Arch, op):
    """The ops `arch` puts in place of `op`: its expander's, else by default
    the arch's variant `<optype>_<arch>` with the same tensors and params;
    None when neither applies."""
    expander = arch.expanders.get(op.proto.optype)
    if expander is not None:
        return expander(ctx, op)
    variant = arch.ops.get(f"{op.optype}_{arch.name}")
    return None if variant is None else [op.copy_as(variant)]


def combine(ctx, arch: Arch, on_fallback: frozenset[str] = frozenset()) -> int:
    """Apply combiners over windows of adjacent ops until none matches; a match
    that would make an op of `arch` named in `on_fallback` (see expand) is none.

    Returns the number of rounds; gives up with an error after
    MAX_COMBINE_ROUNDS, which means two rules undo each other.
    """
    # The fallback's combiners join the ops it runs (after the arch's own).
    combiners = arch.combiners + (get_arch(arch.fallback).combiners if arch.fallback else ())
    for rounds in range(MAX_COMBINE_ROUNDS):
        changed = False
        # The optype of every op, in step with ctx.ops: a rule's window is looked for
        # with list.index (most positions fail on their optype).
        optypes = [op.proto.optype for op in ctx.ops]
        for combiner in combiners:
            size = len(combiner.window)
            # The window's first optype that is not "*": most positions fail on it.
            key = next((k for k, w in enumerate(combiner.window) if w != "*"), 0)
            wanted = combiner.window[key]
            # A rule is tried again where it replaced ops (the new ops may
            # match again); one that always matches would never move on.
            budget = MAX_COMBINE_ROUNDS * (len(ctx.ops) + 1)
            i = 0
            while i + size <= len(ctx.ops):
                if wanted != "*":
                    try:
                        i = optypes.index(wanted, i + key) - key
                    except ValueError:
                        break
                    if i + size > len(ctx.ops):
                        break
                if all(w in ("*", t) for w, t in zip(combiner.window, optypes[i : i + size])):
                    new_ops = combiner.func(ctx, ctx.ops[i : i + size])
                    if new_ops is not None and any(op.arch == arch.name and op.name in
                                                   on_fallback for op in new_ops):
                        new_ops = None
                    if new_ops is not None:
                        ctx.replace_ops(i, size, new_ops)
                        count = len(new_ops)
                        moved = _hoist_sources(ctx, i, count)
                        # What replace_ops and _hoist_sources did to ctx.ops: the sources
                        # among the new ops moved to the front, the others at i + moved.
                        kept = ctx.ops[i + moved : i + count]
                        optypes[i : i + size] = [op.optype for op in kept]
                        optypes[:0] = [op.optype for op in ctx.ops[:moved]]
                        i += moved
                        changed = True
                        budget -= 1
                        if budget < 0:
                            raise LightNetError(
                                f"combiners of target '{arch.name}' did not settle: combiner "
                                f"'{combiner.name}' keeps replacing the ops at position {i}")
                        continue
                i += 1
        if not changed:
            return rounds
    raise LightNetError(
        f"combiners of target '{arch.name}' did not settle after {MAX_COMBINE_ROUNDS} rounds"
    )


def _is_source(ctx, op) -> bool:
    """Whether `op` reads nothing and makes only static tensors or inputs."""
    return not op.tensors_in and all(
        ctx.tensors[n].static or ctx.tensors[n].input for n in op.tensors_out.values())


def hoist_constants(ctx) -> None:
    """Move ops that read nothing and make only static tensors or inputs
    (create, input, arange) to the front, in their order. They may run
    anywhere before their readers; at the front they no longer sit between
    two ops a combiner could join."""
    sources, others = [], []
    for op in ctx.ops:
        (sources if _is_source(ctx, op) else others).append(op)
    ctx.ops[:] = sources + others


def _hoist_sources(ctx, start: int, count: int) -> int:
    """Move the source ops among ops[start:start + count] (the create ops of
    weights a rule folded) to the front; returns how many moved."""
    new = ctx.ops[start : start + count]
    sources = [op for op in new if _is_source(ctx, op)]
    if sources:
        ctx.ops[start : start + count] = [op for op in new if not _is_source(ctx, op)]
        ctx.ops[:0] = sources
    return len(sources)


def remove_dead_constants(ctx, outputs_before) -> None:
    """Remove ops that make only static tensors nobody reads any more (the
    weights a rule folded into new ones), unless a tensor of theirs was a
    model output before compiling; their weights are forgotten. Repeats, as
    an op removed may have been the last reader of another's output."""
    keep = set(outputs_before)
    while True:
        tensors, dfg = ctx.tensors, ctx.dfg
        # The makers of the static tensors nothing reads (a model's few), of which
        # those making nothing else.
        makers = {dfg.producer[n] for n in dfg.dangling_outs
                  if n not in keep and tensors[n].static}
        if not makers:
            return
        dead = [i for i, op in enumerate(ctx.ops) if op.name in makers and all(
            tensors[n].static and n not in dfg.consumers and n not in keep
            for n in op.tensors_out.values())]
        if not dead:
            return
        for i in reversed(dead):
            names = list(ctx.ops[i].tensors_out.values())
            ctx.remove_ops(i, 1)
            for n in names:
                if ctx.weights is not None:
                    ctx.weights.pop(n, None)


def computed_from_constants(ctx, arch: str | None = None) -> dict[str, Op]:
    """The tensors ops compute from static tensors (weights, constants) alone, and what
    such ops compute, by their makers: ops of `arch` (None: any) of one output, no
    larger than their inputs together (an expand of a constant stays a run-time op,
    not a weight as large as its result)."""
    constant = {name for name, entry in ctx.tensors.items() if entry.static}
    made = {}
    for op in ctx.ops:
        ins = list(op.tensors_in.values())
        if (not ins or len(op.tensors_out) != 1 or (arch is not None and op.arch != arch)
                or not all(name in constant for name in ins)):
            continue
        (out,) = op.tensors_out.values()
        if ctx.tensors[out].len <= sum(ctx.tensors[name].len for name in ins):
            made[out] = op
            constant.add(out)
    return made


def fold_constants(ctx, arch: str, keep) -> None:
    """Compute, while compiling with the weights, what ops of `arch` compute from
    weights and constants alone (computed_from_constants), and put weights holding it
    in place of those ops: ONNX Runtime's constant folding. Only the tensors other ops
    read become weights (a create op each, of the same name); the ops making them go,
    and the weights only they read go in remove-dead-constants. A tensor past the fold
    limit (Context.value) stays computed at run time; so do model outputs (`keep`)."""
    if not ctx.compiled_with_weights:
        return
    made = computed_from_constants(ctx, arch)
    readers = ctx.dfg.consumers
    wanted = set()
    for name in made:
        if name in keep or all(made.get(out) is not None for reader in readers.get(name, ())
                               for out in ctx.dfg.ops[reader].tensors_out.values()):
            continue
        # A view costs nothing at run time: what it views is folded (if it is computed).
        while name in made and ctx.tensors[name].views_owner:
            name = ctx.tensors[name].owner
        if name in made:
            wanted.add(name)
    values = ctx.values_through(sorted(wanted), made)
    for name, value in values.items():
        if value is None:
            continue
        entry = ctx.tensors[name]
        data = np.ascontiguousarray(value).reshape(entry.shape)
        data.flags.writeable = False
        ctx.add_weight(name, data)
        create = Op(get_proto(f"create_{arch}"), made[name].name, {}, {"dst": name},
                    {"dtype": Param.from_value("dtype", entry.dtype.name),
                     "dims": Param.from_value("dims", list(entry.shape)),
                     "from_file": Param.from_value("from_file", True)})
        ctx.replace_ops(ctx.ops.index(made[name]), 1, [create])
    # The ops whose results only the ops folded read.
    while True:
        dead = [i for i, op in enumerate(ctx.ops) if any(
            made.get(n) is op and n not in keep and not readers.get(n)
            for n in op.tensors_out.values())]
        if not dead:
            return
        for i in reversed(dead):
            ctx.remove_ops(i, 1)
