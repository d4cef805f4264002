"""lightnet.compiler.memory_plan: the memory plan.

The plan is checked against liveness computed independently here, on a few
hundred random op DAGs, and by simulating the arena byte by byte.
"""

import random

import numpy as np
import pytest

from lightnet import Context
from lightnet.compiler import memory_plan
from lightnet.compiler.memory_plan import MemReport, align_up, plan
from lightnet.errors import LightNetError
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable
from tests.helpers import bare_op as op

def test_align_up():
    assert [align_up(n, 64) for n in (0, 1, 63, 64, 65, 128, 129)] == [0, 64, 64, 64, 128, 128, 192]
    assert [align_up(n, 16) for n in (1, 16, 17)] == [16, 16, 32]


# plan: hand-computed -------------------------------------------------------------------


def f32(name, n, creator="x", **kw):
    return TensorEntry(name, DType.TL_FLOAT, (n,), creator, **kw)


def test_plan_chain_hand_computed():
    tensors = TensorTable(A=f32("A", 25), B=f32("B", 16), C=f32("C", 16), D=f32("D", 16))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["B"]), op("o2", ["B"], ["C"]),
           op("o3", ["C"], ["D"])]
    reports = plan(ops, tensors, keep=["D"])
    # Largest first: A (100 bytes -> 128) at 0; B, live with A at o1, at 128;
    # C, live with B only, in the gap below it at 0; D, live with C, at 64.
    assert [tensors[n].offset for n in "ABCD"] == [0, 128, 0, 64]
    assert reports == {MemType.CPU: MemReport(MemType.CPU, 192, 292, 164)}


def test_plan_tries_each_order_once(monkeypatch):
    # Neither hand-computed plan reaches the lower bound: every jittered order is tried,
    # with scratch first and without it where there is scratch, once where there is none.
    placed = []
    real = memory_plan._place_in_order
    monkeypatch.setattr(memory_plan, "_place_in_order",
                        lambda blocks, align: placed.append(len(blocks)) or real(blocks, align))
    tensors = TensorTable(A=f32("A", 25), B=f32("B", 16), C=f32("C", 16), D=f32("D", 16))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["B"]), op("o2", ["B"], ["C"]),
           op("o3", ["C"], ["D"])]
    assert plan(ops, tensors, keep=["D"])[MemType.CPU].arena == 192
    assert placed == [4] * memory_plan._TRIALS
    placed.clear()
    ops[1].scratch = 100
    assert plan(ops, tensors, keep=["D"])[MemType.CPU].arena == 320
    assert placed == [5] * 2 * memory_plan._TRIALS


def test_plan_static_and_kept_survive():
    tensors = TensorTable(W=f32("W", 16, static=True), A=f32("A", 16), B=f32("B", 16),
                          C=f32("C", 16), D=f32("D", 16))
    ops = [op("o0", [], ["W"]), op("o1", ["W"], ["A"]), op("o2", ["A"], ["B"]),
           op("o3", ["B"], ["C"]), op("o4", ["C", "W"], ["D"])]
    reports = plan(ops, tensors, keep=["A", "D"])
    off = {n: tensors[n].offset for n in "WABCD"}
    # W and A are never freed; B is freed after o3 and its place reused by D.
    assert off == {"W": 0, "A": 64, "B": 128, "C": 192, "D": 128}
    assert reports[MemType.CPU] == MemReport(MemType.CPU, 256, 320, 256)


def test_plan_view_keeps_root_alive():
    tensors = TensorTable(A=f32("A", 64), V=f32("V", 64, owner="A"), W=f32("W", 32, owner="V"),
                          B=f32("B", 64), C=f32("C", 64))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["V"]), op("o2", ["V"], ["W"]),
           op("o3", ["W"], ["B"]), op("o4", ["B"], ["C"])]
    reports = plan(ops, tensors, keep=["C"])
    # A stays alive through o3 (W, a view of a view of A, is read there): B
    # cannot take its place; C can once B's producer read W for the last time.
    assert tensors["V"].offset == tensors["W"].offset == tensors["A"].offset == 0
    assert tensors["B"].offset == 256
    assert tensors["C"].offset == 0
    assert reports[MemType.CPU] == MemReport(MemType.CPU, 512, 768, 512)


def test_plan_unread_output_is_freed_at_once():
    tensors = TensorTable(A=f32("A", 16), junk=f32("junk", 16), B=f32("B", 16))
    ops = [op("o0", [], ["A", "junk"]), op("o1", ["A"], ["B"])]
    plan(ops, tensors, keep=["B"])
    assert (tensors["A"].offset, tensors["junk"].offset) == (0, 64)
    assert tensors["B"].offset == 64  # junk died at o0; A is still read by o1


def test_plan_scratch_lives_while_its_op_runs():
    tensors = TensorTable(A=f32("A", 16), B=f32("B", 16), C=f32("C", 16))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["B"]), op("o2", ["B"], ["C"])]
    ops[1].scratch = 100
    reports = plan(ops, tensors, keep=["C"])
    # Scratch first: at 0 (128 bytes aligned); A and B, live with it at o1,
    # above it; C lives after it and after A: it takes offset 0.
    assert ([tensors[n].offset for n in "ABC"], ops[1].scratch_offset) == ([128, 192, 0], 0)
    assert reports[MemType.CPU] == MemReport(MemType.CPU, 256, 292, 228)


def test_plan_abstract_op_is_refused():
    tensors = TensorTable(A=f32("A", 4, mtype=MemType.NONE))
    with pytest.raises(LightNetError) as e:
        plan([op("create1", [], ["A"])], tensors, keep=["A"])
    assert str(e.value) == ("op 'create1' (t) is abstract and cannot run: "
                            "compile the model for a target first")


# plan: randomized --------------------------------------------------------------------------

DTYPES = list(DType)


def random_model(rng):
    """Random ops in run order over random tensors: some static, some views
    (of an input of their op), some never read; a random set is kept."""
    tensors = TensorTable()
    ops = []
    produced = []
    for i in range(rng.randint(1, 25)):
        ins = []
        if produced:
            k = min(len(produced), rng.choice([0, 1, 1, 1, 2, 2, 3]))
            # Mostly recent tensors, sometimes old ones (long lifetimes).
            pool = produced[-4:] if rng.random() < 0.7 else produced
            ins = rng.sample(pool, min(k, len(pool)))
        outs = []
        for j in range(rng.choice([0, 1, 1, 1, 2, 3])):
            name = f"t{i}_{j}"
            shape = tuple(rng.choice([0, 1, 2, 3, 5, 7, 16, 33]) if rng.random() < 0.05
                          else rng.choice([1, 2, 3, 5, 7, 16, 33]) for _ in range(rng.randint(1, 3)))
            r = rng.random()
            owner = rng.choice(ins) if ins and r < 0.2 else None
            static = owner is None and r > 0.85
            tensors[name] = TensorEntry(name, rng.choice(DTYPES), shape, f"op{i}",
                                        static=static, owner=owner)
            outs.append(name)
        ops.append(op(f"op{i}", ins, outs))
        ops[-1].scratch = rng.choice([0, 0, 0, 1, 64, 100, 1000])
        produced += outs
    keep = [t for t in produced if rng.random() < 0.15]
    return ops, tensors, keep


def root_of(tensors, name):
    while tensors[name].owner is not None:
        name = tensors[name].owner
    return name


def lifetimes(ops, tensors, keep):
    """(birth, death) op index of every root, from first principles."""
    birth, death = {}, {}
    for i, o in enumerate(ops):
        for t in o.tensors_out.values():
            if tensors[t].owner is None:
                birth[t] = death[t] = i
        for t in o.tensor_names():
            r = root_of(tensors, t)
            death[r] = max(death[r], i)
    for r in birth:
        if tensors[r].static or tensors[r].input:  # filled before the run starts
            birth[r], death[r] = 0, len(ops)
    for t in keep:
        death[root_of(tensors, t)] = len(ops)
    return birth, death


def check_plan(ops, tensors, keep, reports):
    birth, death = lifetimes(ops, tensors, keep)
    size = {r: tensors[r].nbytes for r in birth}
    offset = {r: tensors[r].offset for r in birth}
    for i, o in enumerate(ops):  # an op's scratch lives while the op runs
        if o.scratch:
            birth[o.scratch_key] = death[o.scratch_key] = i
            size[o.scratch_key], offset[o.scratch_key] = o.scratch, o.scratch_offset
    roots = sorted(birth, key=str)
    if not roots:
        assert reports == {}
        return
    report = reports[MemType.CPU]
    for r in roots:
        assert offset[r] is not None and offset[r] % 64 == 0
        assert offset[r] + size[r] <= report.arena
    # No two simultaneously live roots (or scratch buffers) share a byte.
    for x in range(len(roots)):
        for y in range(x + 1, len(roots)):
            a, b = roots[x], roots[y]
            if not size[a] or not size[b]:
                continue
            if birth[a] <= death[b] and birth[b] <= death[a]:
                oa, ob = offset[a], offset[b]
                assert oa + size[a] <= ob or ob + size[b] <= oa, (a, b)
    # Views share their root's offset.
    for name, e in tensors.items():
        if e.owner is not None:
            assert e.offset == tensors[root_of(tensors, name)].offset
    # The report.
    total = sum(size.values())
    live = [sum(size[r] for r in roots if birth[r] <= i <= death[r]) for i in range(len(ops))]
    assert report.mtype is MemType.CPU
    assert report.total == total
    assert report.lower_bound == max(live)
    assert max(live) <= report.arena <= sum(align_up(max(size[r], 1), 64) for r in roots)
    simulate(ops, tensors, keep, report.arena)


def simulate(ops, tensors, keep, arena):
    """Run the ops on an arena that remembers which tensor wrote each byte."""
    writer = np.full(arena, -1, dtype=np.int64)
    ids = {name: k for k, name in enumerate(tensors)}

    def span(name):
        r = tensors[root_of(tensors, name)]
        return slice(r.offset, r.offset + r.nbytes)

    for o in ops:
        if o.scratch:  # the op fills its scratch while it reads its inputs
            writer[o.scratch_offset:o.scratch_offset + o.scratch] = -2
        for t in o.tensors_in.values():
            r = root_of(tensors, t)
            assert (writer[span(t)] == ids[r]).all(), f"{o.name} reads clobbered {t}"
        for t in o.tensors_out.values():
            if tensors[t].owner is None:
                writer[span(t)] = ids[t]
    for t in list(keep) + [n for n, e in tensors.items() if e.static]:
        assert (writer[span(t)] == ids[root_of(tensors, t)]).all(), f"{t} was overwritten"


def test_plan_random_dags():
    rng = random.Random(20240601)
    views = statics = reuse = scratch = 0
    for _ in range(300):
        ops, tensors, keep = random_model(rng)
        reports = plan(ops, tensors, keep)
        check_plan(ops, tensors, keep, reports)
        views += sum(e.owner is not None for e in tensors.values())
        statics += sum(e.static for e in tensors.values())
        scratch += sum(o.scratch > 0 for o in ops)
        if reports and reports[MemType.CPU].arena < reports[MemType.CPU].total:
            reuse += 1
    # The generator did exercise what it was meant to.
    assert views > 100 and statics > 100 and reuse > 50 and scratch > 500


def test_check_plan_catches_a_bad_plan():
    """The checker itself fails when two live tensors share memory."""
    tensors = TensorTable(A=f32("A", 16), B=f32("B", 16))
    ops = [op("o0", [], ["A"]), op("o1", ["A"], ["B"])]
    reports = plan(ops, tensors, keep=["B"])
    tensors["B"].offset = tensors["A"].offset
    with pytest.raises(AssertionError):
        check_plan(ops, tensors, ["B"], reports)


# plan: real models -----------------------------------------------------------------------


def random_slice_model(rng):
    """creates with data, then a random DAG of slices; returns the model and
    the value every tensor must have, computed with numpy."""
    ops, values = [], {}
    for i in range(rng.randint(1, 3)):
        shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
        data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * (i + 1)
        name = f"c{i}"
        values[name] = data
        ops.append({"name": f"create{i}", "optype": "create",
                    "tensors_out": [{"arg_name": "dst", "name": name}],
                    "params": [{"arg_name": "dtype", "value": "TL_FLOAT"},
                               {"arg_name": "dims", "value": shape},
                               {"arg_name": "data", "value": data.reshape(-1).tolist()}]})
    for i in range(rng.randint(1, 12)):
        src = rng.choice(list(values)[-4:])
        x = values[src]
        axis = rng.randrange(x.ndim)
        start = rng.randrange(x.shape[axis])
        length = rng.randint(1, x.shape[axis] - start)
        name = f"s{i}"
        values[name] = np.take(x, range(start, start + length), axis=axis)
        ops.append({"name": f"slice{i}", "optype": "slice",
                    "tensors_in": [{"arg_name": "src", "name": src}],
                    "tensors_out": [{"arg_name": "dst", "name": name}],
                    "params": [{"arg_name": "axis", "value": axis},
                               {"arg_name": "start", "value": start},
                               {"arg_name": "len", "value": length}]})
    return {"ops": ops}, values


def test_plan_random_real_models():
    rng = random.Random(7)
    for _ in range(60):
        model, values = random_slice_model(rng)
        ctx = Context()
        ctx.init(model)
        ctx.compile("cpu")
        check_plan(ctx.ops, ctx.tensors, ctx.outputs, ctx.mem)
        ctx.load()
        ctx.run()
        for name in ctx.outputs:
            np.testing.assert_array_equal(ctx.get_data(name), values[name])
        for name, e in ctx.tensors.items():
            if e.static:
                np.testing.assert_array_equal(ctx.get_data(name), values[name])


# The placement: the same offsets as the plain algorithm it speeds up ----------------


def reference_place_in_order(blocks, align):
    """What lightnet.compiler.memory_plan._place_in_order computes, written plainly:
    each block, in order, at the tightest aligned gap (the lowest of equal ones) among
    the placed blocks live at the same time, else above all of them."""
    placed, end = [], 0
    for block in blocks:
        size = align_up(max(block.nbytes, 1), align)
        spans = sorted((b.offset, b.offset + align_up(max(b.nbytes, 1), align))
                       for b in placed if b.first <= block.last and block.first <= b.last)
        best, gap_start = None, 0
        for start, stop in spans:
            gap = start - gap_start
            if gap >= size and (best is None or gap < best[0]):
                best = (gap, gap_start)
            gap_start = max(gap_start, stop)
        block.offset = gap_start if best is None else best[1]
        placed.append(block)
        end = max(end, block.offset + size)
    return end


@pytest.mark.parametrize("seed", range(2))
def test_placement_matches_the_plain_algorithm(seed):
    """Random blocks: many live through the whole plan (as the weights a dnnl model
    reorders into the arena), others briefly or long, of sizes equal and not."""
    import dataclasses

    from lightnet.compiler import memory_plan as mem

    rng = random.Random(seed)
    for _ in range(200):
        ops = rng.choice([1, 3, 10, 50, 500])
        blocks = []
        for _ in range(rng.choice([1, 2, 5, 30, 100, 250])):
            if rng.random() < 0.3:
                first, last = 0, ops
            else:
                first = rng.randrange(ops + 1)
                last = min(ops, first + rng.choice([0, 1, 2, 5, 40, 300]))
            nbytes = rng.choice([0, 1, 64, 100, 512, 513, 4096, rng.randrange(1, 10000)])
            blocks.append(mem._Block(MemType.CPU, nbytes, first, last))
        align = rng.choice([1, 8, 64])
        ours = [dataclasses.replace(b) for b in blocks]
        plain = [dataclasses.replace(b) for b in blocks]
        assert mem._place_in_order(ours, align) == reference_place_in_order(plain, align)
        assert [b.offset for b in ours] == [b.offset for b in plain]
