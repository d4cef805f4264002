"""Scratch memory: ops whose description has `scratch` get that many bytes of
the arena while they run, planned like a tensor that lives during the op only,
so ops share one region instead of each keeping its own buffers."""

import numpy as np

from lightnet import Context
from tests.irbuild import ModelBuilder
from tests.references import ref_lrn


def lrn_chain():
    m = ModelBuilder()
    x = m.input("x", (1, 6, 4, 4))
    a = m.op("lrn", {"src": x}, size=3, alpha=0.5, beta=0.75, bias=1.0)
    b = m.op("lrn", {"src": m.relu(a)}, size=5, alpha=0.2, beta=0.5, bias=2.0)
    return m.to_dict(), x, a, b


def test_scratch_is_planned_in_the_arena_and_shared():
    model, x, a, b = lrn_chain()
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu")
    lrns = [op for op in ctx.ops if op.optype == "lrn_cpu"]
    # [1, 6 + 2, 4, 4] and [1, 6 + 4, 4, 4] float32 squares
    assert [op.scratch for op in lrns] == [512, 640]
    (report,) = ctx.mem.values()
    tensors = sum(e.nbytes for e in ctx.tensors.values() if e.owner is None)
    assert report.total == tensors + 512 + 640
    assert report.lower_bound < report.total and report.arena < report.total  # reused
    ctx.load()
    for op in lrns:
        scratch = ctx.arrays[op.scratch_key]
        assert scratch.nbytes == op.scratch
        assert np.shares_memory(scratch, ctx.arenas[report.mtype])


def test_ops_sharing_scratch_compute_right_results_run_after_run():
    model, x, a, b = lrn_chain()
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu")
    ctx.load()
    rng = np.random.default_rng(2)
    for _ in range(3):  # the scratch holds the other op's garbage each time
        data = rng.standard_normal((1, 6, 4, 4)).astype(np.float32)
        ctx.set_data(x, data)
        ctx.run()
        first = ref_lrn(data, 3, 0.5, 0.75, 1.0)
        np.testing.assert_allclose(ctx.get_data(b), ref_lrn(np.maximum(first, 0), 5, 0.2, 0.5,
                                                            2.0), rtol=1e-5)


def test_scratch_counts_against_the_memory_limit():
    model, *_ = lrn_chain()
    plain = Context()
    plain.init(model)
    plain.compile("cpu")
    (report,) = plain.mem.values()
    tight = Context(memory_limit=report.arena - 64)
    tight.init(model)
    try:
        tight.compile("cpu")
    except Exception as e:  # noqa: BLE001 - the message is the point
        assert "more than the limit" in str(e)
    else:
        raise AssertionError("a plan over the limit was accepted")


def test_every_op_gets_its_scratch_at_the_same_offset():
    """Scratch is placed first: ops never hold it together, so all of it shares one
    region, which stays in cache from one op to the next."""
    m = ModelBuilder()
    y = m.input("x", (1, 3, 16, 16))
    for cin, cout, stride in ((3, 8, 1), (8, 8, 2), (8, 16, 1), (16, 16, 1)):
        y = m.relu(m.conv(y, cin, cout, 3, stride=stride, pad=1))
    m.maxpool(y, 3, 1, pad=1)
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu")
    offsets = {op.scratch_offset for op in ctx.ops if op.scratch}
    assert len([op for op in ctx.ops if op.scratch]) == 5 and offsets == {0}
    (report,) = ctx.mem.values()
    assert report.arena <= 1.10 * report.lower_bound
