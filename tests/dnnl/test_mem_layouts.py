"""The memory plan with tensors in oneDNN's blocked layouts (their storage larger
than their elements) and oneDNN scratchpads as op scratch: no two live blocks share
a byte, checked by simulating the arena byte by byte; the sizes come from oneDNN."""

import dataclasses
import random
import re
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context
from lightnet.archs.dnnl import capi
from lightnet.compiler.memory_plan import align_up, assemble_in_place, plan
from lightnet.ir.op import Op
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable
from tests.helpers import bare_op

op = partial(bare_op, arch="dnnl")  # the ops of these plans are dnnl's


@dataclasses.dataclass
class Blocked:
    """A layout of its own as the core sees one (lightnet.ir.tensor.Layout): its format
    and the bytes it takes; never a block of another."""

    format: str
    nbytes: int

    def is_block_of(self, whole, axis: int) -> bool:
        return False


def blocked(channels: int, block: int) -> int:
    """Bytes of float32 [1, channels, 3, 3] with channels in blocks of `block`."""
    return -(-channels // block) * block * 9 * 4


def random_model(rng):
    """A chain with branches of [1, C, 3, 3] float32 tensors, C not a multiple of
    8 or 16; about half in a blocked layout (storage padded to the block), static
    reordered weights among them; every op may ask for a scratchpad."""
    tensors, ops, produced = TensorTable(), [], []
    for i in range(rng.randint(1, 30)):
        ins = rng.sample(produced[-3:], min(len(produced[-3:]), rng.choice([0, 1, 1, 2])))
        name = f"t{i}"
        c = rng.choice([1, 3, 17, 33, 45])
        layout = rng.choice([None, "aBcd8b", "aBcd16b"])
        entry = TensorEntry(name, DType.TL_FLOAT, (1, c, 3, 3), f"op{i}",
                            static=rng.random() < 0.15)
        if layout is not None:
            entry.layout = Blocked(layout, blocked(c, int(layout[4:-1])))
        tensors[name] = entry
        ops.append(op(f"op{i}", ins, [name]))
        ops[-1].scratch = rng.choice([0, 0, 96, 4160, 12288])
        produced.append(name)
    keep = [t for t in produced if rng.random() < 0.1] or produced[-1:]
    return ops, tensors, keep


def check(ops, tensors, keep, reports):
    """Liveness from first principles, then the arena simulated byte by byte."""
    birth, death, size = {}, {}, {}
    for i, o in enumerate(ops):
        for t in o.tensors_out.values():
            birth[t] = death[t] = i
            size[t] = tensors[t].stored_nbytes
        for t in o.tensors_in.values():
            death[t] = i
    for t in birth:
        if tensors[t].static:
            birth[t], death[t] = 0, len(ops)
    for t in keep:
        death[t] = len(ops)
    arena = reports[MemType.CPU].arena
    writer = np.full(arena, -1, np.int64)
    ids = {name: k for k, name in enumerate(tensors)}

    def span(t):
        e = tensors[t]
        assert e.offset % 64 == 0 and e.offset + e.stored_nbytes <= arena
        return slice(e.offset, e.offset + e.stored_nbytes)

    for t in birth:
        if tensors[t].static:
            writer[span(t)] = ids[t]
    for i, o in enumerate(ops):
        if o.scratch:
            assert o.scratch_offset % 64 == 0 and o.scratch_offset + o.scratch <= arena
            writer[o.scratch_offset:o.scratch_offset + o.scratch] = -2
        for t in o.tensors_in.values():
            assert (writer[span(t)] == ids[t]).all(), f"{o.name} reads clobbered {t}"
        for t in o.tensors_out.values():
            if not tensors[t].static:
                writer[span(t)] = ids[t]
    for t in keep:
        assert (writer[span(t)] == ids[t]).all()
    live = [sum(size[t] for t in birth if birth[t] <= i <= death[t])
            + (ops[i].scratch if i < len(ops) else 0) for i in range(len(ops) + 1)]
    assert reports[MemType.CPU].lower_bound == max(live)
    assert reports[MemType.CPU].total == sum(size.values()) + sum(o.scratch for o in ops)


def test_plan_with_blocked_tensors_and_scratchpads():
    rng = random.Random(16)
    padded = 0
    for _ in range(200):
        ops, tensors, keep = random_model(rng)
        check(ops, tensors, keep, plan(ops, tensors, keep))
        padded += sum(e.stored_nbytes > e.nbytes for e in tensors.values())
    assert padded > 1000


def test_check_catches_a_plan_sized_by_logical_bytes():
    # Two live blocked tensors placed by their element bytes overlap in storage.
    tensors = TensorTable(
        A=TensorEntry("A", DType.TL_FLOAT, (1, 17, 3, 3), "o0",
                      layout=Blocked("aBcd16b", blocked(17, 16))),
        B=TensorEntry("B", DType.TL_FLOAT, (1, 17, 3, 3), "o1"))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["B"]), op("o2", ["A", "B"], [])]
    reports = plan(ops, tensors, keep=["B"])
    check(ops, tensors, ["B"], reports)
    assert reports[MemType.CPU].arena >= align_up(blocked(17, 16), 64) + 17 * 9 * 4
    tensors["B"].offset = tensors["A"].offset + 17 * 9 * 4 // 64 * 64
    with pytest.raises(AssertionError):
        check(ops, tensors, ["B"], reports)


def test_blocked_tensors_are_never_parts_of_an_assembled_output():
    concat = dataclasses.replace(op("c").proto, optype="concat", assemble=("dst", "src", "axis"))

    def model(layouts):
        tensors = TensorTable({n: TensorEntry(n, DType.TL_FLOAT, (1, 16), "o") for n in "xyz"})
        for name, layout in layouts.items():
            tensors[name].layout = Blocked(layout, 64)
        ops = [op("o0", [], ["x"]), op("o1", [], ["y"]),
               Op(concat, "c", {"src1": "x", "src2": "y"}, {"dst": "z"}, {}, values={"axis": 1})]
        return ops, tensors

    ops, tensors = model({})
    assert assemble_in_place(ops, tensors, ["z"]) == 2  # both plain: parts of z
    ops, tensors = model({"x": "aBcd8b"})
    # None: the concat would copy x as bytes into a plain part.
    assert assemble_in_place(ops, tensors, ["z"]) == 0
    assert tensors["x"].owner is None and tensors["y"].owner is None
    ops, tensors = model({"z": "aBcd8b"})
    assert assemble_in_place(ops, tensors, ["z"]) == 0


@pytest.mark.skipif(capi.unavailable_reason() is not None, reason="oneDNN is unavailable")
def test_sizes_come_from_onednn_and_bind_as_bytes():
    from lightnet.archs.dnnl import primitives as P

    k = P.conv2d((1, 17, 3, 3), (33, 17, 3, 3), bias=False, padding=(1, 1, 1, 1))
    for name in ("src", "weights", "dst"):
        assert k.nbytes(name) >= k.plain[name].nbytes
    for name, channels in (("src", 17), ("dst", 33)):
        block = re.fullmatch(r"aBcd(\d+)b", k.format(name))
        assert k.nbytes(name) == (blocked(channels, int(block.group(1))) if block
                                  else channels * 9 * 4)
    # A context binds a tensor with a layout of its own as its stored bytes.
    ctx = Context()
    ctx.init(str(Path(__file__).parents[2] / "examples" / "example.json"))
    ctx.compile("cpu")
    name = next(n for n, e in ctx.tensors.items() if not e.static and e.owner is None
                and not e.from_file)
    entry = ctx.tensors[name]
    entry.layout = Blocked(k.descs["dst"].format, entry.nbytes + 192)
    ctx.plan()
    ctx.load()
    array = ctx.arrays[name]
    assert array.dtype == np.uint8 and array.shape == (entry.nbytes + 192,)
