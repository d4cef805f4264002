"""The context: the single point of truth for one model.

It owns the tensor table, the op list (run order), the data-flow graph, the
memory plan, the weights (the data of tensors created from the weight file)
and, once loaded, one arena per memory type with every other tensor bound as
a numpy view into it.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import math
import mmap
import threading
import time
import warnings
from operator import attrgetter
from pathlib import Path

import numpy as np

from lightnet.archs.registry import abstract_proto, archs, get_arch, get_proto, threads_set
from lightnet.compiler import memory_plan, pipeline, targets
from lightnet.errors import LightNetError, LightNetWarning
from lightnet.files import weight_file, wts_text
from lightnet.ir import json_ir, limits, symbolic
from lightnet.ir.builder import Model
from lightnet.ir.dataflow import DataFlowGraph
from lightnet.ir.op import CheckMemo, Op
from lightnet.ir.param import Param
from lightnet.ir.tensor import MemType, TensorTable
from lightnet.runtime.gc_pause import while_building


# Errors a kernel raises because of the data it is given (static_run at load,
# or run), or of a file a model names (fprint): reported as LightNetErrors
# naming the op.
_DATA_ERRORS = (ArithmeticError, IndexError, ValueError, OSError)

# Arenas of this many bytes or more are mapped with huge pages asked for (_alloc_arena).
HUGE_ARENA = 8 << 20


# What a check reading an entry reads of it (not which op made it) but its layout.
_content_fields = attrgetter("dtype", "shape", "mtype", "static", "owner", "owner_offset",
                             "from_file", "input", "offset")


def _aligned_bytes(nbytes: int) -> np.ndarray:
    """`nbytes` zeroed bytes starting 64-byte aligned (an op's scratch, see
    kernels.scratch), for an op run while compiling."""
    buffer = np.zeros(nbytes + 64, np.uint8)
    start = -buffer.ctypes.data % 64
    return buffer[start:start + nbytes]


def _same_content(a, b) -> bool:
    """Whether a check reading entry `a` or `b` reads the same: the fields of
    _content_fields, and a layout by its content (Layout.key) where it has one."""
    if _content_fields(a) != _content_fields(b):
        return False
    la, lb = a.layout, b.layout
    if la is None or lb is None:
        return la is lb
    return getattr(la, "key", la) == getattr(lb, "key", lb)


def _same_place(old: Op, new: Op) -> bool:
    """Whether `new` has `old`'s name and reads and writes its tensors, arg for arg: its
    edges in the data-flow graph would be `old`'s."""
    return (old.name == new.name
            and tuple(old.tensors_in.items()) == tuple(new.tensors_in.items())
            and tuple(old.tensors_out.items()) == tuple(new.tensors_out.items()))


def _locked(method):
    """`method` run holding the context's lock (see Context)."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)
    return locked


class Context:
    """`memory_limit`: the most bytes of cpu memory the planned model may need
    (an int, or a string like `512M`); None (the default) is the memory the
    machine has available when the model is planned. A model needing more is
    refused by plan(), before anything is allocated.

    `threads`: how many threads every architecture's kernels run while this context
    runs (Arch.threads: numpy's BLAS, oneDNN's OpenMP; set at the start of run() and
    profile(), put back at their end: the count is the process's); None (the default)
    leaves them as the environment set them. A model with ops of an architecture whose
    threads own the cores (Arch.owns_cores: oneDNN's) runs the others' kernels on one
    thread whatever `threads` says: OpenBLAS threads waiting beside oneDNN's for the
    next product took the cores from them (docs/performance.md, "One thread pool").

    `lock`: the context's tensors are one set of buffers, so one run at a time:
    run, profile, set_data, get_data, load and unload each hold this
    (reentrant) lock; a thread feeding inputs, running and reading outputs
    holds it around the three (`with ctx.lock:`), as Session.run does.

    `seed`: the seed of the random values ops make (a `create` with a range),
    with each tensor's name, so that runs are reproducible.

    `fold_limit`: the elements computing static data while compiling with weights
    (value(), which rules fold constants with) may touch in one compile (an int, or
    a string like `64M`); None is lightnet.ir.limits.DEFAULT_FOLD_LIMIT. What is past
    it is not folded: its ops stay in the model and compute when it runs."""

    def __init__(self, memory_limit=None, threads=None, seed=0, fold_limit=None):
        if memory_limit is not None:
            try:
                memory_limit = memory_plan.parse_size(memory_limit)
            except ValueError as e:
                raise LightNetError(f"memory limit: {e}") from None
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise LightNetError(f"threads: expected a whole number >= 1, found {threads!r}")
            for arch in archs().values():  # threads that cannot be set fail here, not in run()
                arch.check_threads()
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise LightNetError(f"seed: expected a whole number >= 0, found {seed!r}")
        self.memory_limit: int | None = memory_limit
        self.fold_limit: int | None = limits.parse_fold_limit(fold_limit)
        self._fold_budget = limits.FoldBudget(self.fold_limit)
        self.threads: int | None = threads
        self.seed: int = seed
        self.lock = threading.RLock()
        self.label = "<model>"
        self.dims: dict[str, int] = {}  # the values init gave the symbolic dims
        self.interface: json_ir.Interface | None = None  # dtypes and shapes the producer declares
        self.tensors = TensorTable()
        self.ops: list[Op] = []
        self.dfg = DataFlowGraph()
        self.mem: dict[MemType, memory_plan.MemReport] | None = None
        self.arenas: dict[MemType, np.ndarray] = {}
        self.arrays: dict[str, np.ndarray] = {}
        # The data of the tensors created from the weight file, by name: read by
        # compile(weights=...) or load(datafile), plus what rules folded.
        self.weights: dict[str, np.ndarray] | None = None
        self.compiled_with_weights = False
        # The weights a lightnet.nn Model brings (its constants), used when compile()
        # is given none.
        self.model_weights: dict[str, np.ndarray] | None = None
        self._values: dict[str, np.ndarray] = {}  # static data computed while compiling
        self._values_nbytes = 0  # the bytes of _values' arrays
        self._computable: frozenset[str] = frozenset()  # see values_through
        self._checks: CheckMemo | None = None  # the checks of ops while building
        # Ops that read a tensor a pass made anew, with other contents, since they were
        # checked (replace_ops): the next rewrite checks them again.
        self._stale: set[str] = set()
        # The ops compile() lowered for the fallback architecture because the target's
        # library had only its reference kernel for them: name -> (optype, kernel).
        self.refused: dict[str, tuple[str, str]] = {}
        self._runs: tuple = ()
        self._run_ops: tuple = ()
        # The architectures whose kernels run beside another's threads that own the
        # cores (see threads), by name.
        self._beside: frozenset[str] = frozenset()

    # Building and checking ------------------------------------------------------

    @_locked
    @while_building
    def init(self, source, dims: dict | None = None, label: str | None = None) -> None:
        """Create and check the ops of a model: a path, `-` for stdin, a dict, or
        a lightnet.nn Model, whose constants compile() then takes as the weights.

        `dims` gives the model's symbolic dims (`"N"` in an input's dims) their
        values, {name: whole number >= 1}: every one must be given (Session
        binds them from what it is fed). `label` names the model in messages
        (default: its path, `<stdin>` or `<model>`)."""
        self.cleanup()
        if isinstance(source, Model):
            self.model_weights = source.weights
            source = source.to_dict()
        doc, self.label = json_ir.load(source)
        if label is not None:
            self.label = label
        doc = symbolic.bind(doc, dims, self.label)
        self.dims = dict(dims or {})
        foreign, unknown = [], []

        def make(name, optype, tensors_in, tensors_out, params):
            """The op the IR states, made as the parse reads it; None for an unknown
            optype, reported once the whole IR is read (its errors come first)."""
            proto = get_proto(optype)
            if proto is None:
                proto = abstract_proto(optype)
                if proto is None:
                    unknown.append(f"('{name}'): unknown optype '{optype}'")
                    return None
                foreign.append(f"'{name}' ({optype})")
            return Op(proto, name, tensors_in, tensors_out, params)

        ops = json_ir.parse(doc, self.label, make)
        self.interface = json_ir.parse_interface(doc, self.label)
        if unknown:
            raise LightNetError(f"{self.label}: op {ops.index(None)} {unknown[0]}")
        if foreign:
            warnings.warn(f"{self.label}: ops for another architecture run as their abstract "
                          f"ops, compiled for the target: {', '.join(foreign)}",
                          LightNetWarning, stacklevel=2)
        # Checked in order (no order check after: an op's check finds each tensor it
        # reads defined by an earlier op, or fails).
        self._checks = CheckMemo(records=False)  # ops of one signature checked once
        try:
            self.add_ops(0, ops)
        finally:
            self._checks = None

    def add_ops(self, position: int, ops: list[Op]) -> None:
        """Insert `ops` at `position`, checking each (pre_run) in order; those
        checked before one fails are inserted."""
        self._put(position, 0, ops)

    def _put(self, position: int, count: int, ops: list[Op]) -> None:
        """Check `ops` in order and put those checked in place of the `count` ops
        (already taken out of the graph) at `position`: one slice assignment, so
        that replacing one op by one moves no other (expand replaces every op)."""
        checked = []
        try:
            for op in ops:
                op.seed = self.seed
                try:
                    if self._checks is None:
                        op.pre_run(self.tensors)
                    else:
                        self._checks.pre_run(op, self.tensors)
                    self.dfg.add(op)
                except LightNetError as e:
                    self._forget_outputs(op)
                    raise LightNetError(f"{self.label}: {e}") from e
                checked.append(op)
        finally:
            self.ops[position : position + count] = checked
            self.mem = None

    def _swap(self, position: int, new: Op) -> None:
        """Replace the op at `position` by `new`, of its name and tensors (an op lowered
        to the target's variant): what taking it out and putting `new` in its place
        does, but its edges in the data-flow graph stay (they are the same)."""
        tensors = self.tensors
        self.ops[position].post_run(tensors)
        new.seed = self.seed
        self.mem = None
        try:
            if self._checks is None:
                new.pre_run(tensors)
            else:
                self._checks.pre_run(new, tensors)
        except LightNetError as e:
            self._forget_outputs(new)
            self.dfg.remove(self.ops.pop(position))
            raise LightNetError(f"{self.label}: {e}") from e
        self.dfg.ops[new.name] = new
        self.ops[position] = new

    def _forget_outputs(self, op: Op) -> None:
        for name in op.tensors_out.values():
            entry = self.tensors.get(name)
            if entry is not None and entry.creator == op.name:
                del self.tensors[name]

    def remove_ops(self, position: int, count: int) -> list[Op]:
        """Take `count` ops out at `position` (post_run each, last first)."""
        if self._checks is not None:
            for op in self.ops[position : position + count]:
                self._checks.take_out(op, self.tensors)
        removed = self._take_out(position, count)
        del self.ops[position : position + count]
        self.mem = None
        return removed

    def _take_out(self, position: int, count: int) -> list[Op]:
        """post_run the `count` ops at `position`, last first, and take them out of
        the graph (not out of the op list)."""
        removed = self.ops[position : position + count]
        every = len(removed) == len(self.ops) == len(self.dfg.ops)  # a pass rewriting all
        for op in reversed(removed):
            op.post_run(self.tensors)
            if not every:
                self.dfg.remove(op)
        if every:
            self.dfg.clear()
        return removed

    def rewrite(self, ops: list[Op], changed=None) -> None:
        """Make `ops` the model's op list: ops of the model in their order, some reading
        or writing other tensors or with other params than when they were checked (those
        of `changed`), and new ones among them; the ops left out are taken out. What it
        leaves is what taking every op out and adding `ops` would, but while a CheckMemo
        is held an op that reads what its check read, with the outputs its check made, is
        left as it is: a pass inserting a few ops into a large model checks a few ops
        again (the dnnl layout pass, which inserts reorders). Given `changed`, only the
        new and changed ops and those reading what an op checked again made are looked
        at (every other op is as its check left it, but for the readers of a tensor
        replace_ops made anew with other contents); otherwise every op is compared with
        what its check read.

        Only what changed is touched: the tensor table and the data-flow graph's dicts
        are left in no particular order (the entries and ops made anew go last), as
        nothing asks them for op order (the op list has it: `outputs`, to_dot); each
        list of a tensor's readers and each op's edges stay in op order
        (DataFlowGraph.update)."""
        memo = self._checks
        old = set(map(id, self.ops))
        kept = set(map(id, ops))
        # An op's check defines its outputs only: what an op of the model made are the
        # outputs it had when the data-flow graph was told of it, after its check.
        added = self.dfg.names

        def made_by(op: Op) -> tuple[str, ...]:
            """The tensors `op` made (whatever it now names its outputs)."""
            return added[op.name][1] if op.name in added else ()

        position = {op.name: i for i, op in enumerate(ops)}
        todo: list[int] = []  # positions in `ops` to look at (a heap)
        if changed is None or memo is None:
            todo = list(range(len(ops)))
        else:
            todo = [i for i, op in enumerate(ops) if id(op) not in old]
            todo += [position[op.name] for op in changed]
            todo += [position[name] for name in self._stale if name in position]
            # Ops whose entries a reader's check changed (a weight whose layout its
            # reader chose), and those readers, are checked anew every time.
            todo += [position[name] for name in memo.never if name in position]
            todo = sorted(set(todo))  # a heap
        # The ops that may read or write other tensors than the data-flow graph has.
        suspects = None if changed is None or memo is None else [ops[i] for i in todo]
        self._stale.clear()
        seen = set(todo)

        def look_at(names) -> None:
            for name in names:
                for reader in self.dfg.consumers.get(name, ()):
                    at = position.get(reader)
                    if at is not None and at not in seen:
                        seen.add(at)
                        heapq.heappush(todo, at)

        gone = [op for op in self.ops if id(op) not in kept]
        for op in gone:
            names = made_by(op)
            self._unmake(op, names)
            look_at(names)
        at = len(ops)  # where a check failed
        try:
            while todo:
                op = ops[heapq.heappop(todo)]
                at = position[op.name]
                before = ()
                if id(op) in old:
                    if memo is not None and memo.current(op, self.tensors):
                        continue
                    before = made_by(op)
                    self._unmake(op, before)
                op.seed = self.seed
                try:
                    if memo is None:
                        op.pre_run(self.tensors)
                    else:
                        memo.pre_run(op, self.tensors)
                except LightNetError as e:
                    self._forget_outputs(op)
                    raise LightNetError(f"{self.label}: {e}") from e
                look_at(before)
                look_at(op.tensors_out.values())
            at = len(ops)
        finally:
            # As adding `ops` would leave it: those before the one that failed.
            for op in ops[at:]:
                self._unmake(op, made_by(op))
            self.ops = ops[:at]
            self.mem = None
            if at < len(ops) or suspects is None:
                self.dfg.rebuild(self.ops)
            else:  # only the ops new, gone or given other tensors are taken out and added
                self.dfg.update(position, gone, suspects)

    def _unmake(self, op: Op, names) -> None:
        """post_run `op` for rewrite: the tensors it made (`names`) go, whatever it now
        names its outputs."""
        if op.proto.post_run is not None:
            op.proto.post_run(op)
        op.priv.clear()
        for name in names:
            entry = self.tensors.get(name)
            if entry is not None and entry.creator == op.name:
                del self.tensors[name]

    def replace_ops(self, position: int, count: int, new_ops: list[Op]) -> None:
        """Replace `count` ops at `position` by `new_ops`. A tensor the old ops
        produced and later ops still read must keep its dtype and shape; the ops
        reading one whose entry changed otherwise (a dnnl layout) are checked again
        by the next rewrite."""
        tensors = self.tensors
        replaced = self.ops[position : position + count]
        old = [tensors[n] for op in replaced for n in op.tensors_out.values()]
        if count == 1 and len(new_ops) == 1 and _same_place(replaced[0], new_ops[0]):
            self._swap(position, new_ops[0])
        else:
            self._take_out(position, count)
            self._put(position, count, new_ops)
        stale = self._stale
        if stale:
            stale.difference_update([op.name for op in new_ops])
        consumers = self.dfg.consumers
        for entry in old:
            readers = consumers.get(entry.name)
            if readers:
                new = tensors.get(entry.name)
                if new is None:
                    raise LightNetError(f"{self.label}: a pass removed tensor "
                                        f"'{entry.name}', which op '{readers[0]}' still reads")
                if new.dtype is not entry.dtype or new.shape != entry.shape:
                    raise LightNetError(f"{self.label}: a pass changed tensor '{entry.name}' "
                                        f"from {entry.describe()} to {new.describe()}")
                # Its readers were checked with the old entry: the next rewrite checks
                # them again (the dnnl layout pass's; an op replaced meanwhile is
                # checked anew).
                if not _same_content(new, entry):
                    stale.update(readers)

    def check(self) -> None:
        """Every op reads only tensors created by an earlier op. Then every edge of the
        data-flow graph goes from an op to a later one, so it has no cycle, and nothing
        it reads lacks a producer (DataFlowGraph.check would find nothing: each tensor
        has one producer, as pre_run refuses to define one twice)."""
        defined = set()
        for op in self.ops:
            if not defined.issuperset(op.tensors_in.values()):
                arg, name = next((a, n) for a, n in op.tensors_in.items() if n not in defined)
                raise LightNetError(f"{self.label}: op '{op.name}' ({op.optype}): "
                                    f"input '{arg}' reads tensor '{name}' before any op creates it")
            defined.update(op.tensors_out.values())

    @property
    def outputs(self) -> list[str]:
        """The model's outputs: tensors no op reads, in creation order (the op list's:
        the data-flow graph's dicts are in no particular order after a rewrite)."""
        unread = set(self.dfg.dangling_outs)
        found: list[str] = []  # looked for from the last op back: outputs come late
        for op in reversed(self.ops):
            if len(found) == len(unread):
                break
            found.extend(n for n in reversed(op.tensors_out.values()) if n in unread)
        return found[::-1]

    @property
    def inputs(self) -> list[str]:
        """The model's inputs: tensors the user feeds (`input` ops), in order."""
        tensors = self.tensors  # an input op reads nothing (the generator sees to it)
        return [n for op in self.ops if not op.tensors_in for n in op.tensors_out.values()
                if tensors[n].input]

    # Compiling --------------------------------------------------------------------

    @_locked
    @while_building
    def compile(self, target: str = "auto", combine: bool = True, weights=None,
                precision: str = "f32", fold: bool = True) -> None:
        """Lower to `target`'s ops (lightnet.compiler.targets: auto, dnnl, cpu),
        optimize (combine=False: no fusions, no constant folding), and plan memory.

        `precision` (f32, bf16, auto; resolved by lightnet.compiler.targets) is what the
        target's ops compute in: bf16 on dnnl holds the tensors between dnnl ops and
        their weights in bfloat16; model inputs, outputs and cpu ops stay float32.

        `weights` (a weight file, or a mapping of tensor name to array) loads
        the weights before optimizing: rules may then compute new static data
        from them (constant folding, e.g. a batchnorm folded into the conv's
        weights), weights nothing reads any more are dropped, and load() takes
        no weight file. `save_weights` writes the compiled model's weights.
        A lightnet.nn Model compiles with its constants unless `weights` is given.
        With the weights, what ops compute from weights alone becomes weights too
        (the fold-constants pass), unless `fold` is False.

        An op the target's library would run with its reference kernel (Arch.slow_kernel:
        oneDNN's `ref:`, written for clarity, many times slower) makes the model compile
        again with that op lowered for the fallback architecture (docs/runtime.md,
        "Never a reference kernel"); `refused` names those ops, with the optype and
        kernel each would have had.
        """
        target = targets.resolve(target)
        dtype = targets.resolve_precision(precision, target)
        if weights is None:
            weights = self.model_weights
        self.unload()
        self.weights = None if weights is None else self._read_weights(weights)
        self.compiled_with_weights = weights is not None
        # Each compile starts from the model's own ops and weights (passes fold and drop).
        # An abstract op is its own original: expand puts new ops in its place and no
        # pass sees it again; an op already of an architecture may be changed in place.
        originals = [op if op.proto.arch == "none" else op.copy_as(op.proto) for op in self.ops]
        lowered = {op.name for op in originals if op.proto.arch == "none"}
        given = None if self.weights is None else dict(self.weights)
        self.refused = {}
        with contextlib.ExitStack() as caches:
            for arch in archs().values():  # e.g. each oneDNN primitive made once
                caches.enter_context(arch.compiling())
            try:
                while True:
                    self._values, self._values_nbytes = {}, 0
                    self._checks = CheckMemo()
                    self._fold_budget = limits.FoldBudget(self.fold_limit)
                    self.weights = None if given is None else dict(given)
                    pipeline.compile(self, target, combine, dtype, frozenset(self.refused),
                                     fold=fold)
                    used = {name: get_arch(name) for name in {op.proto.arch for op in self.ops}}
                    slow = {op.name: (op.optype, kernel) for op in self.ops
                            if op.name in lowered
                            and (kernel := used[op.proto.arch].slow_kernel(op)) is not None}
                    if slow.keys() <= self.refused.keys():
                        break
                    self.refused.update(slow)
                    self.replace_ops(0, len(self.ops), [op.copy_as(op.proto) for op in originals])
            finally:
                self._values, self._values_nbytes = {}, 0
                self._checks = None

    def value(self, name: str) -> np.ndarray | None:
        """The data of static tensor `name` while compiling with weights: a
        weight, or what the ops making it compute from weights and params.
        None when it is not known before the run (compiling without weights, or
        past the fold limit)."""
        if not self.compiled_with_weights:
            return None
        # _value_of, each value it needs computed in turn on a stack of its own, not
        # on Python's (a chain of thousands of static ops would exceed its limit).
        stack = [self._value_of(name)]
        result = None
        while stack:
            try:
                needed = stack[-1].send(result)
            except StopIteration as done:
                stack.pop()
                result = done.value
                continue
            stack.append(self._value_of(needed))
            result = None
        return result

    def _value_of(self, name: str):
        """value(name), as a generator: it yields the name of each tensor whose value it
        needs, is sent that value, and returns its own."""
        if name in self.weights:
            return self.weights[name]
        if name in self._values:
            return self._values[name]
        entry = self.tensors.get(name)
        known = self._computable
        op = (None if entry is None or not (entry.static or name in known)
              else self.dfg.ops.get(entry.creator))
        outs = [self.tensors[n] for n in op.tensors_out.values()] if op is not None else []
        if op is None or not all(e.static or e.name in known for e in outs) or (
                op.proto.load is None and not all(e.views_owner for e in outs)):
            return None
        arrays = {}
        for n in op.tensors_in.values():
            arrays[n] = yield n
        if any(a is None for a in arrays.values()):
            return None
        touched = sum(a.size for a in arrays.values()) + sum(e.len for e in outs)
        if op.proto.load is not None and not self._fold_budget.take(touched):  # a view: free
            return None
        limit = memory_plan.memory_limit(self.memory_limit)
        needed = self._values_nbytes + sum(e.nbytes for e in outs)
        if limit is not None and needed > limit:
            raise LightNetError(f"{self.label}: op '{op.name}' ({op.optype}): computing its "
                                f"output at compile time needs {needed} bytes, more than the "
                                f"limit of {limit} bytes (--memory-limit)")
        for e in outs:
            if not e.views_owner:
                arrays[e.name] = np.zeros(e.shape, e.dtype.np)
        arrays[op.scratch_key] = _aligned_bytes(op.scratch)
        views = op.proto.views(op, arrays) if op.proto.views is not None else {}
        for arg, e in zip(op.tensors_out, outs):  # views bound as load binds them
            if e.views_owner:
                arrays[e.name] = views[arg] if arg in views else arrays[e.owner].reshape(e.shape)
        try:
            run = op.proto.load(op, arrays) if op.proto.load is not None else None
            if run is not None:
                run()
        except (*_DATA_ERRORS, MemoryError) as e:
            raise self._op_error(op, "compile-time evaluation", e) from e
        for n in op.tensors_out.values():
            if n in self._values:
                self._values_nbytes -= self._values[n].nbytes
            self._values[n] = arrays[n]
            self._values_nbytes += arrays[n].nbytes
        return self._values[name]

    def values_through(self, names, computable) -> dict[str, np.ndarray | None]:
        """value() of each of `names`, computing through the ops that make the tensors
        in `computable` too (which are not static: what the fold-constants pass folds)."""
        self._computable = frozenset(computable)
        try:
            return {name: self.value(name) for name in names}
        finally:
            self._computable = frozenset()

    def add_weight(self, name: str, data: np.ndarray) -> None:
        """Record the data of a tensor a rule creates from folded weights."""
        self.weights[name] = data

    def save_weights(self, path) -> None:
        """Write the weights of the (compiled) model, which load() / `lightnet
        -r -f` read back: LightNet's weight format for a `.wts` path, else .npz."""
        names = sorted(n for n, e in self.tensors.items() if e.from_file)
        missing = [n for n in names if self.weights is None or n not in self.weights]
        if missing:
            raise LightNetError(f"{self.label}: the weights of {missing} are not known: "
                                "compile or load the model with its weight file first")
        write = wts_text.write if str(path).endswith(".wts") else weight_file.write_npz
        try:
            write(path, {n: self.weights[n] for n in names})
        except OSError as e:
            raise LightNetError(f"{path}: cannot write the weights: {e.strerror}") from None

    @_locked
    def plan(self) -> None:
        """Plan memory: one arena per memory type. A plan needing more than
        `memory_limit` is refused here, before anything is allocated."""
        keep = {*self.dfg.dangling_outs, *self.inputs}  # (the outputs in any order)
        self.mem = None  # until the new plan is within the limit
        memory_plan.assemble_in_place(self.ops, self.tensors, keep)
        reports = memory_plan.plan(self.ops, self.tensors, keep)
        memory_plan.check_limit(reports, self.memory_limit, self.label)
        self.mem = reports

    def print(self, outfile=None) -> str:
        """The IR of the current op list; written to `outfile` when given."""
        text = json_ir.dump(self.ops, self.interface)
        if outfile is not None:
            try:
                Path(outfile).write_text(text, encoding="utf-8")
            except OSError as e:
                raise LightNetError(f"{outfile}: cannot write the IR: {e.strerror}") from None
        return text

    # Loading and running -------------------------------------------------------------

    @_locked
    @while_building
    def load(self, datafile=None) -> None:
        """Allocate the arenas, bind every tensor (weights to the arrays read
        from `datafile`), run static_run. A model compiled with its weights
        takes no datafile."""
        self.unload()
        if self.mem is None:
            self.plan()
        else:  # the limit may have changed since the plan
            memory_plan.check_limit(self.mem, self.memory_limit, self.label)
        if datafile is not None and self.compiled_with_weights:
            raise LightNetError(f"{self.label}: the model was compiled with its weights; "
                                f"load() takes no weight file (given {datafile})")
        if datafile is not None or self.weights is None:
            # Checked before anything is allocated.
            self.weights = self._read_weights(datafile)
        self._check_weights_known()
        self.arenas = {m: self._alloc_arena(r) for m, r in self.mem.items()}
        arrays = self.arrays
        for name, entry in self.tensors.items():
            if entry.from_file:
                arrays[name] = self.weights[name]
            elif entry.layout is not None:  # its bytes, for the library that lays them out
                arrays[name] = self.arenas[entry.mtype][entry.offset : entry.offset
                                                        + entry.stored_nbytes]
            elif entry.owner is None or entry.owner_offset is not None:
                arrays[name] = np.ndarray(entry.shape, entry.dtype.np, self.arenas[entry.mtype],
                                          entry.offset)
        tensors, arenas = self.tensors, self.arenas
        no_scratch = np.empty(0, np.uint8)
        for op in self.ops:
            if op.scratch:
                start = op.scratch_offset
                arrays[op.scratch_key] = arenas[op.proto.mtype][start : start + op.scratch]
            else:  # what an op asking for 0 bytes (this time) gets
                arrays[op.scratch_key] = no_scratch
            views = op.proto.views(op, arrays) if op.proto.views is not None else {}
            for arg, name in op.tensors_out.items():
                entry = tensors[name]
                # A tensor in a layout of its own sharing its owner's memory (a residual
                # a dnnl op adds in place) is bound as bytes above.
                if entry.views_owner:
                    owner = arrays[entry.owner]
                    view = views[arg] if arg in views else owner.reshape(entry.shape)
                    if not np.shares_memory(view, owner) or view.shape != entry.shape:
                        raise LightNetError(
                            f"op '{op.name}' ({op.optype}): output '{arg}' must be a "
                            f"{entry.describe()} view of '{entry.owner}'s memory; its "
                            "description's view is wrong"
                        )
                    arrays[name] = view
        runs = []
        with contextlib.ExitStack() as caches:
            for arch in archs().values():  # e.g. a oneDNN memory object per tensor
                caches.enter_context(arch.loading())
            for op in self.ops:
                if op.proto.load is not None:
                    try:
                        run = op.proto.load(op, arrays)
                    except (*_DATA_ERRORS, MemoryError) as e:  # MemoryError: a workspace
                        raise self._op_error(op, "load", e) from e
                    if run is not None:
                        runs.append((op, run))
        self._run_ops = tuple(runs)
        self._runs = tuple(run for _, run in runs)
        owned = any(get_arch(name).owns_cores for name in {op.arch for op in self.ops})
        self._beside = frozenset(name for name, arch in archs().items()
                                 if owned and not arch.owns_cores)

    def _alloc_arena(self, report: memory_plan.MemReport) -> np.ndarray:
        """A zeroed arena; one of HUGE_ARENA bytes or more is mapped with transparent huge
        pages asked for (Linux's MADV_HUGEPAGE), where the kernel grants them on request
        only: a transformer streams its weights (held in the arena on dnnl) through every
        run, through fewer TLB entries in 2 MB pages (docs/performance.md: on 2 AVX2 Zen 3
        cores BERT-base and GPT-2 gained nothing the machine's noise lets show)."""
        try:
            if report.arena >= HUGE_ARENA and hasattr(mmap, "MADV_HUGEPAGE"):
                # Private: a shared anonymous mapping is shmem, whose huge pages
                # shmem_enabled (commonly "never") rules, not MADV_HUGEPAGE.
                pages = mmap.mmap(-1, report.arena,  # anonymous: zeroed, like np.zeros
                                  flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                pages.madvise(mmap.MADV_HUGEPAGE)
                return np.frombuffer(pages, dtype=np.uint8)  # which keeps the mapping
            return np.zeros(report.arena, dtype=np.uint8)
        # ValueError, OverflowError: beyond numpy's largest array, or mmap's
        except (MemoryError, ValueError, OverflowError, OSError):
            raise LightNetError(f"{self.label}: cannot allocate the {report.mtype} arena of "
                                f"{report.arena} bytes") from None

    def _check_weights_known(self) -> None:
        """Every weight the model reads has data of its dtype and shape (a
        model compiled with its weights, then changed by set_param, may not)."""
        missing = sorted(n for n, e in self.tensors.items() if e.from_file and (
            n not in self.weights or self.weights[n].dtype != e.dtype.np
            or self.weights[n].shape != e.shape))
        if missing:
            raise LightNetError(f"{self.label}: tensors {missing} are created from a file, "
                                "but the weights the model was compiled with do not give them")

    def _read_weights(self, datafile) -> dict[str, np.ndarray]:
        """The weights from `datafile` (a path or a name -> array mapping),
        each checked against the model's entry (an .npz array before its data
        is read) and made a read-only array of the entry's shape."""
        wanted = sorted(n for n, e in self.tensors.items() if e.from_file)

        def expect(name, dtype, shape):  # before the data is read, when it can be
            entry = self.tensors.get(name)
            if entry is None or not entry.from_file:
                raise LightNetError(f"{datafile}: tensor '{name}' is not a tensor the model "
                                    "creates from a file")
            if dtype != entry.dtype.np:
                raise LightNetError(f"{datafile}: tensor '{name}': expected dtype "
                                    f"{entry.dtype.np}, found {dtype}")
            if math.prod(shape) != entry.len or (len(shape) > 1 and tuple(shape) != entry.shape):
                raise LightNetError(f"{datafile}: tensor '{name}': expected shape "
                                    f"{entry.shape}, found {tuple(shape)}")

        def expect_names(names):
            names = set(names)
            missing = [n for n in wanted if n not in names]
            if missing:
                where = f"weight file {datafile}" if datafile else "no weight file (-f)"
                raise LightNetError(f"{self.label}: tensors {missing} are created from a "
                                    f"file, but {where} gives them")

        if datafile is None:
            expect_names([])
            return {}
        if isinstance(datafile, dict):
            given = {n: np.array(a) for n, a in datafile.items()}  # copies: ours alone
            datafile = "<weights>" if given else None  # how messages name a mapping
            expect_names(list(given))
            for name, array in given.items():
                expect(name, array.dtype, array.shape)
        else:
            def known(name):
                entry = self.tensors.get(name)
                return entry is not None and entry.from_file

            def warn(message):
                warnings.warn(message, LightNetWarning, stacklevel=2)

            given = weight_file.read(datafile, expect_names, expect, known, warn)
        arrays = {}
        for name, array in given.items():
            array = np.ascontiguousarray(array).reshape(self.tensors[name].shape)
            array.flags.writeable = False
            arrays[name] = array
        return arrays

    @_locked
    def run(self) -> None:
        i = 0
        try:
            with threads_set(self.threads, self._beside):
                for i, run in enumerate(self._runs):
                    run()
        except _DATA_ERRORS as e:
            # What the data makes a kernel refuse (an index out of range, say):
            # a user error, named after the op that met it.
            raise self._op_error(self._run_ops[i][0], "run", e) from e

    def _op_error(self, op: Op, phase: str, e: Exception) -> LightNetError:
        return LightNetError(f"{self.label}: op '{op.name}' ({op.optype}): {phase}: "
                             f"{type(e).__name__}: {e}")

    @_locked
    def profile(self, repeat: int = 1) -> list[tuple[Op, float]]:
        """Run `repeat` times, timing each op: (op, seconds per run), run order."""
        times = [0.0] * len(self._run_ops)
        clock = time.perf_counter
        with threads_set(self.threads, self._beside):
            for _ in range(repeat):
                for i, (_, run) in enumerate(self._run_ops):
                    start = clock()
                    run()
                    times[i] += clock() - start
        return [(op, t / repeat) for (op, _), t in zip(self._run_ops, times)]

    def _array(self, name: str) -> np.ndarray:
        if not self.arrays:
            raise LightNetError("the model is not loaded: call load() first")
        if name not in self.arrays:
            raise LightNetError(f"no tensor named '{name}' in the model")
        return self.arrays[name]

    @_locked
    def set_data(self, name: str, data) -> None:
        """Copy `data` into tensor `name` (same shape, or same element count)."""
        dst = self._array(name)
        if not dst.flags.writeable:
            raise LightNetError(f"tensor '{name}' is a weight from the weight file and cannot "
                                "be set: load the model with other weights instead")
        data = np.asarray(data)
        if data.size != dst.size:
            raise LightNetError(f"tensor '{name}': expected {dst.size} elements "
                                f"{dst.shape}, found {data.size} {data.shape}")
        if not np.can_cast(data.dtype, dst.dtype, casting="same_kind"):
            raise LightNetError(f"tensor '{name}': expected dtype {dst.dtype}, found {data.dtype}")
        dst[...] = data.reshape(dst.shape)

    @_locked
    def get_data(self, name: str) -> np.ndarray:
        """A copy of tensor `name`'s data."""
        return self._array(name).copy()

    def data_size(self, name: str) -> int:
        return self.tensors.entry(name).nbytes

    @_locked
    def set_param(self, opname: str, pname: str, value) -> None:
        """Change a param of op `opname` and check the model again.

        Only before load: a new param may change shapes and memory.
        """
        if self.arrays:
            raise LightNetError("set_param needs an unloaded model: call unload() first")
        op = self.dfg.ops.get(opname)
        if op is None:
            raise LightNetError(f"no op named '{opname}' in the model")
        try:
            new = Param.from_value(pname, value)
        except ValueError as e:
            raise LightNetError(f"op '{opname}': param '{pname}': {e}") from None
        position = self.ops.index(op)
        tail = self.remove_ops(position, len(self.ops) - position)
        old_params = op.params
        op.params = {**old_params, pname: new}
        try:
            self.add_ops(position, tail)
        except LightNetError:
            op.params = old_params
            self.remove_ops(position, len(self.ops) - position)
            self.add_ops(position, tail)
            raise

    @_locked
    def unload(self) -> None:
        """Free the arenas and private state; the model stays checked."""
        self._runs = ()
        self._run_ops = ()
        self.arrays = {}
        self.arenas = {}
        for op in self.ops:
            op.priv.clear()

    @_locked
    def cleanup(self) -> None:
        """Release everything init acquired."""
        self.unload()
        self.remove_ops(0, len(self.ops))
        self.tensors.clear()
        self._stale.clear()
        self.dfg = DataFlowGraph()
        self.mem = None
        self.weights = None
        self.model_weights = None
        self.compiled_with_weights = False
