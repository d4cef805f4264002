"""Memory planning: a virtual pool of offsets, and the plan that fills one arena
per memory type.

Nothing is allocated here: the plan gives every tensor that owns its memory an
offset, reusing a tensor's bytes once its last reader has run. The context then
allocates each arena once and binds numpy views at the offsets. Weights (static
tensors whose data comes from the weight file) are not in the arena: the
context binds them to the arrays it read, so they are never copied.
"""

from __future__ import annotations

import bisect
import math
import os
import re
from dataclasses import dataclass

from lightnet.errors import LightNetError
from lightnet.tensor import MemType, TensorTable


def align_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


class MemoryPool:
    """Hands out offsets of aligned blocks and takes them back (best fit,
    freed neighbours coalesced). `size` is the high-water mark."""

    def __init__(self, align: int = 64):
        self.align = align
        self.size = 0
        self._used: dict[int, int] = {}  # offset -> size
        self._holes: list[tuple[int, int]] = []  # sorted (offset, size) free blocks

    def alloc(self, nbytes: int) -> int:
        size = align_up(max(nbytes, 1), self.align)
        best = None
        for i, (off, hole) in enumerate(self._holes):
            if hole >= size and (best is None or hole < self._holes[best][1]):
                best = i
        if best is not None:
            off, hole = self._holes.pop(best)
            if hole > size:
                bisect.insort(self._holes, (off + size, hole - size))
        elif self._holes and sum(self._holes[-1]) == self.size:
            off, _ = self._holes.pop()  # the hole at the end grows
            self.size = off + size
        else:
            off = self.size
            self.size += size
        self._used[off] = size
        return off

    def free(self, offset: int) -> None:
        size = self._used.pop(offset)
        i = bisect.bisect(self._holes, (offset, size))
        if i < len(self._holes) and offset + size == self._holes[i][0]:
            size += self._holes.pop(i)[1]
        if i > 0 and sum(self._holes[i - 1]) == offset:
            offset, prev = self._holes.pop(i - 1)
            size += prev
            i -= 1
        self._holes.insert(i, (offset, size))

    def exists(self, offset: int) -> bool:
        return offset in self._used

    def dump(self) -> str:
        used = [(o, s, "used") for o, s in self._used.items()]
        holes = [(o, s, "free") for o, s in self._holes]
        return "\n".join(f"{o:>12} {s:>12} {k}" for o, s, k in sorted(used + holes))


@dataclass(frozen=True)
class MemReport:
    """Per memory type: bytes of the planned arena, of every arena tensor without
    reuse, the lower bound (the largest total of simultaneously live arena
    tensors), and of the weights kept outside the arena."""

    mtype: MemType
    arena: int
    total: int
    lower_bound: int
    weights: int = 0

    @property
    def needed(self) -> int:
        """Every byte the loaded model holds in this memory type."""
        return self.arena + self.weights


def assemble_in_place(ops, tensors: TensorTable, keep) -> int:
    """Let producers write straight into their part of an assembled output.

    An op whose description says `assemble` (concat) builds an output from its
    variadic inputs laid end to end along an axis. When everything before that
    axis has size 1, each input is a contiguous block of the output: an input
    that owns its memory, is not static, not a model input or output, and not
    given twice, becomes that block (owner + owner_offset), so no copy is made.
    Returns how many inputs were placed.
    """
    placed = 0
    for op in ops:
        if op.proto.assemble is None:
            continue
        out_arg, in_arg, axis_param = op.proto.assemble
        dst = tensors[op.tensors_out[out_arg]]
        if math.prod(dst.shape[: op.values[axis_param]]) != 1:
            continue
        names = [op.tensors_in[a] for a in op.variadic_in(in_arg)]
        offset = 0
        for name in names:
            entry = tensors[name]
            if (entry.owner is None and not entry.static and not entry.input
                    and name not in keep and names.count(name) == 1
                    and entry.mtype is dst.mtype and tensors.root(dst.name) is not entry):
                entry.owner, entry.owner_offset = dst.name, offset
                placed += 1
            offset += entry.nbytes
    return placed


def plan(ops, tensors: TensorTable, keep) -> dict[MemType, MemReport]:
    """Give every tensor owning its memory an offset in its memory type's arena.

    `ops` is the run order; `keep` names tensors that must survive the run
    (model outputs). Static tensors are never freed; views (tensors with an
    owner) share their root's memory and keep it alive while they are read.
    Weights from the weight file get no offset (see the module docstring).
    An op's scratch (`op.scratch` bytes) is allocated with its outputs and
    freed as soon as it has run; its offset goes to `op.scratch_offset`.
    """
    roots = {}
    last_use = {}
    for i, op in enumerate(ops):
        for name in op.tensors_out.values():
            entry = tensors[name]
            if entry.mtype is MemType.NONE:
                raise LightNetError(
                    f"op '{op.name}' ({op.optype}) is abstract and cannot run: "
                    "compile the model for a target first"
                )
            roots[name] = tensors.root(name).name
            last_use.setdefault(roots[name], i)
        for name in op.tensors_in.values():
            last_use[roots[name]] = i
    for name in keep:
        last_use[roots[name]] = len(ops)

    pools: dict[MemType, MemoryPool] = {}
    live: dict[MemType, int] = {}
    total: dict[MemType, int] = {}
    bound: dict[MemType, int] = {}
    weights: dict[MemType, int] = {}
    allocated = set()
    for root in dict.fromkeys(roots.values()):
        entry = tensors[root]
        if entry.from_file:
            entry.offset = None
            allocated.add(root)
            weights[entry.mtype] = weights.get(entry.mtype, 0) + entry.nbytes

    def take(mtype: MemType, nbytes: int) -> int:
        pool = pools.setdefault(mtype, MemoryPool(mtype.align))
        live[mtype] = live.get(mtype, 0) + nbytes
        total[mtype] = total.get(mtype, 0) + nbytes
        bound[mtype] = max(bound.get(mtype, 0), live[mtype])
        return pool.alloc(nbytes)

    def give_back(mtype: MemType, offset: int, nbytes: int) -> None:
        pools[mtype].free(offset)
        live[mtype] -= nbytes

    def allocate(root: str) -> None:
        entry = tensors[root]
        allocated.add(root)
        entry.offset = take(entry.mtype, entry.nbytes)

    # Static tensors and inputs are filled before the run starts, so they live
    # from the start. Any other root is allocated when it or any view of it is
    # first written (a view may come before its root: a part of a concat).
    for root in dict.fromkeys(roots.values()):
        if root not in allocated and (tensors[root].static or tensors[root].input):
            allocate(root)
    for i, op in enumerate(ops):
        for name in op.tensors_out.values():
            if roots[name] not in allocated:
                allocate(roots[name])
        op.scratch_offset = take(op.proto.mtype, op.scratch) if op.scratch else None
        for name in dict.fromkeys(roots[n] for n in op.tensor_names()):
            entry = tensors[name]
            if last_use[name] == i and not entry.static and not entry.input:
                give_back(entry.mtype, entry.offset, entry.nbytes)
        if op.scratch:
            give_back(op.proto.mtype, op.scratch_offset, op.scratch)
    for name, root in roots.items():
        if root != name:
            base = tensors[root].offset
            tensors[name].offset = None if base is None else tensors.offset_in_root(name) + base
    return {m: MemReport(m, pools[m].size if m in pools else 0, total.get(m, 0),
                         bound.get(m, 0), weights.get(m, 0))
            for m in dict.fromkeys([*pools, *weights])}


# Memory limits ---------------------------------------------------------------------------

_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*\Z", re.I)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text) -> int:
    """A number of bytes: an int, or a string like `4096`, `512K`, `64M`, `2G`
    (binary units: K = 1024). ValueError saying why not."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"expected a number of bytes >= 0, found {text}")
        return text
    m = _SIZE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"expected a number of bytes, optionally with a suffix K, M or G "
                         f"(e.g. 512M), found {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def available_memory() -> int | None:
    """The bytes of memory the machine can still give: MemAvailable of
    /proc/meminfo, else the free physical pages; None when neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the unit is kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def memory_limit(limit: int | None) -> int | None:
    """The limit in force: `limit`, or (None) the machine's available memory
    (None when that is not known either)."""
    return available_memory() if limit is None else limit


def check_limit(reports: dict[MemType, MemReport], limit: int | None, label: str) -> None:
    """Refuse a plan whose arena and weights of host memory exceed `limit`
    bytes (None: the machine's available memory), before anything is allocated."""
    limit = memory_limit(limit)
    if limit is None:
        return
    for report in reports.values():
        if report.needed > limit:
            raise LightNetError(f"{label}: the model needs {report.needed} bytes of "
                                f"{report.mtype} memory, more than the limit of {limit} "
                                "bytes (--memory-limit)")
