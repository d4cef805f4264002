"""Memory planning: the plan that fills one arena per memory type.

Nothing is allocated here: the plan gives every tensor that owns its memory an
offset, reusing a tensor's bytes once its last reader has run. The context then
allocates each arena once and binds numpy views at the offsets. Weights (static
tensors whose data comes from the weight file) are not in the arena: the
context binds them to the arrays it read, so they are never copied.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import re
import random
from dataclasses import dataclass

from lightnet.errors import LightNetError
from lightnet.ir.tensor import MemType, TensorTable


def align_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


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

    def describe(self) -> str:
        """The report as one line (`lightnet --mem-report`, `lightnet info`)."""
        ratio = self.arena / self.lower_bound if self.lower_bound else 1.0
        return (f"memory {self.mtype}: arena {self.arena} bytes, all tensors {self.total} "
                f"bytes, lower bound {self.lower_bound} bytes (arena / lower bound = "
                f"{ratio:.3f}); weights {self.weights} bytes")


def assemble_in_place(ops, tensors: TensorTable, keep) -> int:
    """Let producers write straight into their part of an assembled output.

    An op whose description says `assemble` (concat) builds an output from its
    variadic inputs laid end to end along an axis. When everything before that
    axis has size 1, each input is a contiguous block of the output: an input
    that owns its memory, is not static, not a model input or output, not given
    twice, becomes that block (owner + owner_offset), so no copy is made. That
    holds only when every input is in the output's layout: all plain, or, in a
    layout of its own, every input a whole block of the output's
    (Layout.is_block_of; oneDNN's: channels in blocks of 16 with a batch of 1, each
    input a multiple of 16 channels); otherwise none is placed (a plain part of a
    blocked output, or a part of a partial block, needs the op's primitive).

    An assembled output whose inputs begin another's, in order (DenseNet: each layer
    joins every earlier feature map, the next layer the same ones and one more), is
    that other output's first block, so the longest output of such a chain holds
    every part once and no op of it copies anything.
    Returns how many inputs were placed.
    """
    joins = []  # (dst entry, input names, input entries, axis) of each op that may be placed
    for op in ops:
        if op.proto.assemble is None:
            continue
        out_arg, in_arg, axis_param = op.proto.assemble
        dst = tensors[op.tensors_out[out_arg]]
        axis = op.values[axis_param]
        if math.prod(dst.shape[:axis]) != 1:
            continue
        names = [op.tensors_in[a] for a in op.variadic_in(in_arg)]
        entries = [tensors[n] for n in names]
        if all(_is_block(e, dst, axis) for e in entries):
            joins.append((dst, names, entries, axis))
        # else: the op copies the parts it was not given as bytes, which is right only
        # for parts in the output's own layout.
    by_first: dict[str, list] = {}
    for join in joins:
        by_first.setdefault(join[1][0], []).append(join)
    for dst, names, _, axis in joins:
        longer = [j for j in by_first[names[0]] if len(j[1]) > len(names)
                  and j[1][:len(names)] == names and j[3] == axis]
        if longer:
            whole = min(longer, key=lambda j: len(j[1]))[0]
            if (_placeable(dst, keep, whole) and _is_block(dst, whole, axis)
                    and tensors.root(whole.name) is not dst):
                dst.owner, dst.owner_offset = whole.name, 0
    placed = 0
    for dst, names, entries, _ in joins:
        offset = 0
        for name, entry in zip(names, entries):
            if (_placeable(entry, keep, dst) and names.count(name) == 1
                    and tensors.root(dst.name) is not entry):
                entry.owner, entry.owner_offset = dst.name, offset
                placed += 1
            offset += entry.nbytes if dst.layout is None else entry.stored_nbytes
    return placed


def _is_block(part, whole, axis: int) -> bool:
    """Whether tensor `part` can be a contiguous block of `whole` along `axis`: both
    plain, or `part`'s layout a block of `whole`'s."""
    if whole.layout is None:
        return part.layout is None
    return part.layout is not None and part.layout.is_block_of(whole.layout, axis)


def _placeable(entry, keep, whole) -> bool:
    """Whether `entry` may become a block of `whole`: it owns its memory, is not static,
    not a model input or output (`keep`), and lives in `whole`'s memory type."""
    return (entry.owner is None and not entry.static and not entry.input
            and entry.name not in keep and entry.mtype is whole.mtype)


@dataclass
class _Block:
    """Something the plan places: a root tensor or an op's scratch, with the
    first and last op index at which it is live (inclusive)."""

    mtype: MemType
    nbytes: int
    first: int
    last: int
    scratch: bool = False
    offset: int = 0


class _Lifetimes:
    """The placed blocks not live through the whole plan, found by lifetime. Level
    `width` (8, 64, 512, ... ops) cuts the ops into buckets of that many; a block is
    indexed at the narrowest level whose width exceeds its lifetime's span, so it is
    in one bucket or two. The blocks live with another are in the buckets its
    lifetime covers at each level: a query looks at the blocks live near it, not at
    every block placed (a chain of 50,000 ops has 50,000 blocks, each live with two
    others)."""

    WIDTH = 8  # of the narrowest level; each next one is this many times wider

    def __init__(self):
        self.levels: dict[int, dict[int, list[tuple]]] = {}  # width -> bucket -> blocks

    def add(self, first: int, last: int, start: int, stop: int) -> None:
        """A block live from op `first` to op `last` (inclusive), at [start, stop)."""
        width = self.WIDTH
        while last - first >= width:
            width *= self.WIDTH
        buckets = self.levels.setdefault(width, {})
        placed = (first, last, start, stop)
        for k in range(first // width, last // width + 1):
            buckets.setdefault(k, []).append(placed)

    def live_with(self, first: int, last: int) -> list[tuple[int, int]]:
        """(start, stop) of each block placed whose lifetime meets [first, last]."""
        live = []
        for width, buckets in self.levels.items():
            low = first // width
            for k in range(low, last // width + 1):
                for f, l, start, stop in buckets.get(k, ()):
                    # in the first bucket of both lifetimes' only: not found twice
                    if f <= last and first <= l and max(f // width, low) == k:
                        live.append((start, stop))
        return live


def _place_in_order(blocks: list[_Block], align: int) -> int:
    """Put each block, in order, at the tightest aligned gap left by the blocks
    already placed that are live at the same time, else above them; returns
    the arena size.

    The blocks live through the whole plan (constants, inputs, weights reordered
    into the arena) overlap every other: one goes above all placed before it, and
    what is kept of them is the free intervals between them (and below the first),
    by start and by (size, start), and where the last one stops (`top`). The others
    are indexed by lifetime (_Lifetimes). A block's gaps are the free intervals the
    blocks live with it do not reach (the tightest by size, then the lowest), and
    what is left of those they cut, and of the space between `top` and the highest
    of them: found without going over every block live through the plan (thousands,
    in a model of thousands of reordered weights)."""
    if not blocks:
        return 0
    lo, hi = min(b.first for b in blocks), max(b.last for b in blocks)
    free: list[tuple[int, int]] = []  # [start, stop) between the blocks always live
    fitting: list[tuple[int, int]] = []  # the same as (size, start)
    top = 0
    placed = _Lifetimes()
    end = 0
    for block in blocks:
        size = align_up(max(block.nbytes, 1), align)
        if block.first <= lo and block.last >= hi:
            # Live with every block placed, whose memory is one run from 0 to `end`:
            # each starts at 0 or where one placed before stops, so no gap is left
            # below `end` that no block covers. The block goes at `end`.
            block.offset = end
            _cover(free, fitting, top, end, end + size)
            top = end + size
        else:
            live = placed.live_with(block.first, block.last)
            block.offset = _tightest(live, size, free, fitting, top)
            placed.add(block.first, block.last, block.offset, block.offset + size)
        end = max(end, block.offset + size)
    return end


def _tightest(live: list[tuple[int, int]], size: int, free, fitting, top: int) -> int:
    """The offset of a block of `size` bytes (not always live; see _place_in_order)
    that the placed blocks `live` ((start, stop) each) are live with."""
    live.sort()
    highest = max(top, max((stop for _, stop in live), default=0))
    cut = set()  # the starts of the free intervals the live blocks reach
    parts = [(top, highest)]
    for start, stop in live:
        i = bisect.bisect_right(free, (start, math.inf)) - 1
        if i < 0 or free[i][1] <= start:
            i += 1
        while i < len(free) and free[i][0] < stop:
            if free[i][0] not in cut:
                cut.add(free[i][0])
                parts.append(free[i])
            i += 1
    best = None  # (size, start) of the tightest gap that fits
    for a, b in parts:  # what the live blocks leave of each
        at = a
        for start, stop in live:
            if start >= b:
                break
            if stop <= at:
                continue
            if start - at >= size and (best is None or (start - at, at) < best):
                best = (start - at, at)
            at = max(at, stop)
            if at >= b:
                break
        if b - at >= size and (best is None or (b - at, at) < best):
            best = (b - at, at)
    i = bisect.bisect_left(fitting, (size, -1))
    while i < len(fitting) and fitting[i][1] in cut:
        i += 1
    if i < len(fitting) and (best is None or fitting[i] < best):
        best = fitting[i]
    return highest if best is None else best[1]


def _cover(free: list[tuple[int, int]], fitting: list[tuple[int, int]], top: int,
           start: int, stop: int) -> None:
    """One more block always live, at [start, stop) (at or above `top`, where the
    last one stops): the space from `top` up to it becomes a free interval."""
    if start > top:
        free.append((top, start))
        bisect.insort(fitting, (start - top, top))


# Placing offline is NP-hard, and greedy by size can be unlucky: ResNet-50's
# blocks in that order need 1.3x the lower bound, the same order with the sizes
# jittered by up to 30 % reaches it. So the plan tries the plain order and up
# to _TRIALS - 1 jittered ones (seeded: plans are deterministic), keeping the
# smallest arena and stopping once it is within 1 % of the lower bound. A trial
# costs O(blocks^2): models with more than _TRIAL_BLOCKS blocks get the plain
# order only (compiling stays under a second or so).
_TRIALS = 16
_TRIAL_BLOCKS = 1000
# Keeping every op's scratch at offset 0 keeps it warm (MobileNet v2's
# depthwise layers ran 1.5-1.9x slower on cold scratch); it is given up only
# when it would cost more than this much memory over the lower bound.
_WARM_SCRATCH_SLACK = 1.10


def _place(blocks: list[_Block], align: int, lower_bound: int) -> int:
    """Offsets for `blocks` so that no two with overlapping lifetimes share a
    byte; returns the arena size.

    Greedy by size (as TFLite's arena planner), scratch first if that keeps
    the arena within _WARM_SCRATCH_SLACK of the lower bound: no two ops'
    scratch are live together, so then all of it lands at offset 0."""
    best = None
    # Without scratch both orders are one: it is placed once.
    for scratch_first in (True, False) if any(b.scratch for b in blocks) else (False,):
        rng = random.Random(0)
        for trial in range(_TRIALS if len(blocks) <= _TRIAL_BLOCKS else 1):
            jitter = [1.0 if trial == 0 else rng.uniform(0.7, 1.3) for _ in blocks]
            order = sorted(range(len(blocks)), key=lambda i: (
                scratch_first and not blocks[i].scratch, -blocks[i].nbytes * jitter[i]))
            arena = _place_in_order([blocks[i] for i in order], align)
            if best is None or arena < best[0]:
                best = (arena, [b.offset for b in blocks])
            if best[0] <= 1.01 * lower_bound:
                break
        if best[0] <= _WARM_SCRATCH_SLACK * lower_bound:
            break
    for block, offset in zip(blocks, best[1]):
        block.offset = offset
    return best[0]


def plan(ops, tensors: TensorTable, keep) -> dict[MemType, MemReport]:
    """Give every tensor owning its memory an offset in its memory type's arena.

    `ops` is the run order; `keep` names tensors that must survive the run
    (model outputs). A tensor is live from the op that first writes it (or a
    view of it: a part of a concat) to its last reader; static tensors and
    inputs, filled before the run, from the start to the end, as are kept
    ones. Views (tensors with an owner) share their root's memory and keep it
    alive while they are read. Weights from the weight file get no offset (see
    the module docstring). An op's scratch (`op.scratch` bytes) is live while
    the op runs; its offset goes to `op.scratch_offset`. A tensor in a layout of
    its own (a oneDNN blocked one) takes its layout's bytes, padding included.
    """
    roots, first, last = {}, {}, {}
    abstract = MemType.NONE  # (an Enum member looked up once, not per tensor)
    for i, op in enumerate(ops):
        for name in op.tensors_out.values():
            entry = tensors[name]
            if entry.mtype is abstract:
                raise LightNetError(
                    f"op '{op.name}' ({op.optype}) is abstract and cannot run: "
                    "compile the model for a target first"
                )
            root = roots[name] = name if entry.owner is None else tensors.root(name).name
            first.setdefault(root, i)
            last.setdefault(root, i)
        for name in op.tensors_in.values():
            last[roots[name]] = i
    for name in keep:
        last[roots[name]] = len(ops)

    blocks: dict[object, _Block] = {}
    weights: dict[MemType, int] = {}
    for root in first:
        entry = tensors[root]
        if entry.from_file:
            entry.offset = None
            weights[entry.mtype] = weights.get(entry.mtype, 0) + entry.stored_nbytes
        elif entry.static or entry.input:
            blocks[root] = _Block(entry.mtype, entry.stored_nbytes, 0, len(ops))
        else:
            blocks[root] = _Block(entry.mtype, entry.stored_nbytes, first[root], last[root])
    for i, op in enumerate(ops):
        op.scratch_offset = None
        if op.scratch:
            blocks[op.scratch_key] = _Block(op.proto.mtype, op.scratch, i, i, scratch=True)

    reports = {}
    for mtype in dict.fromkeys([*(b.mtype for b in blocks.values()), *weights]):
        mine = [b for b in blocks.values() if b.mtype is mtype]
        change = [0] * (len(ops) + 2)  # bytes becoming live at each op (negative: freed)
        for b in mine:
            change[b.first] += b.nbytes
            change[b.last + 1] -= b.nbytes
        lower_bound = max(itertools.accumulate(change), default=0)
        arena = _place(mine, mtype.align, lower_bound)
        reports[mtype] = MemReport(mtype, arena, sum(b.nbytes for b in mine), lower_bound,
                                   weights.get(mtype, 0))
    for key, block in blocks.items():
        if isinstance(key, str):
            tensors[key].offset = block.offset
    for op in ops:
        if op.scratch:
            op.scratch_offset = blocks[op.scratch_key].offset
    for name, root in roots.items():
        if root != name:
            base = tensors[root].offset
            tensors[name].offset = None if base is None else tensors.offset_in_root(name) + base
    return reports


# Memory limits ---------------------------------------------------------------------------

_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*\Z", re.I)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text, unit: str = "bytes") -> int:
    """A number of bytes (or other `unit`s): an int, or a string like `4096`,
    `512K`, `64M`, `2G` (binary units: K = 1024). ValueError saying why not."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"expected a number of {unit} >= 0, found {text}")
        return text
    m = _SIZE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"expected a number of {unit}, optionally with a suffix K, M or G "
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
