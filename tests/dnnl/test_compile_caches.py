"""What makes compiling linear in the model (issue #26) changes nothing it makes: the
primitive cache (lightnet.archs.dnnl.ops.kernel_cache: each oneDNN primitive created once per
compile, shared by the ops it defines), the memo of op checks (lightnet.ir.op.CheckMemo:
an op a pass takes out and puts back unchanged, or of the signature of an op checked
before, is not checked anew) and the memory objects shared while a model loads
(lightnet.archs.dnnl.primitives.memory_cache). A model compiled and loaded with them and
without them has the same ops, kernels, tensors, layouts, memory plan, refused ops and
outputs, bit for bit."""

import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context
from lightnet.runtime import context as context_module
from lightnet.archs.dnnl import capi, primitives
from lightnet.archs.dnnl import ops as dnnl_ops
from lightnet.ir import op as op_module
from lightnet.ir.op import CheckMemo, Op
from lightnet.archs.registry import get_proto
from lightnet.ir.param import Param
from tests.helpers import assert_outputs_close, random_inputs, run_model
from tests.irbuild import ModelBuilder

pytestmark = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")

BENCH = Path(__file__).resolve().parents[2] / "bench"
UNARY = ("relu", "sigmoid", "tanh")


@contextlib.contextmanager
def no_caches():
    """Context.compile and load as before the caches: every check runs, every primitive
    and every memory object is made."""
    saved = dnnl_ops.kernel_cache, context_module.CheckMemo, primitives.memory_cache
    dnnl_ops.kernel_cache = contextlib.nullcontext  # what Dnnl.compiling() returns
    primitives.memory_cache = contextlib.nullcontext  # what Dnnl.loading() returns
    context_module.CheckMemo = lambda records=True: None
    try:
        yield
    finally:
        dnnl_ops.kernel_cache, context_module.CheckMemo, primitives.memory_cache = saved


def chain(n, shape=(1, 64)):
    m = ModelBuilder()
    x = m.input("x", list(shape))
    for i in range(n):
        x = m.op(UNARY[i % len(UNARY)], {"src": x})
    return m.to_dict()


def convs():
    """Convolutions choosing blocked layouts, a residual add, a pool and a shuffle; the
    same sigmoid of the same shape on a blocked tensor and on a plain one (ops whose
    primitives differ in their layouts only)."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 3, 12, 12]), 3, 16, 3, pad=1)
    y = m.op("relu", {"src": x})
    y = m.conv(y, 16, 16, 3, pad=1)
    y = m.op("elew", {"src1": y, "src2": x}, elew_op="TL_SUM")
    y = m.op("maxpool2d", {"src": y}, size=[2, 2], stride=[2, 2])
    y = m.op("channel_shuffle", {"src": y}, group=4)
    m.conv(y, 16, 5, 1)
    m.op("sigmoid", {"src": m.conv(m.input("more", [1, 3, 6, 6]), 3, 16, 1)})
    m.op("sigmoid", {"src": m.input("plain", [1, 16, 6, 6])})
    return m.to_dict()


def two_outputs():
    """An op of two outputs the IR lists in the other order than its check defines
    them (the tensor table keeps the check's), between dnnl ops."""
    m = ModelBuilder()
    x = m.op("relu", {"src": m.conv(m.input("data", [1, 3, 6, 6]), 3, 8, 3)})
    m.op("maxreduce_arg", {"src": x}, outs=("arg", "dst"), axis=1)
    m.op("sigmoid", {"src": "maxreduce_arg1_dst"})
    return m.to_dict()


def shuffle_units(units=3, half=12, size=8):
    """ShuffleNet v2's units: a channel split into halves of 12 channels (not whole
    blocks of 8 or 16), convolutions on one half, a concat and a written-out channel
    shuffle (which a combiner fuses after the ops reading it were checked), repeated
    so that the ops' signatures repeat."""
    m = ModelBuilder()
    c = 2 * half
    x = m.op("relu", {"src": m.conv(m.input("data", [1, 3, size, size]), 3, c, 3, pad=1)})
    for _ in range(units):
        a = m.op("slice", {"src": x}, axis=1, start=0, len=half)
        b = m.op("slice", {"src": x}, axis=1, start=half, len=half)
        b = m.op("relu", {"src": m.conv(b, half, half, 1)})
        b = m.conv(b, half, half, 3, pad=1, group=half)
        b = m.op("relu", {"src": m.conv(b, half, half, 1)})
        r = m.op("reshape", {"src": m.concat([a, b])}, dims=[1, 2, half, size, size])
        t = m.op("transpose", {"src": r}, axes=[0, 2, 1, 3, 4])
        x = m.op("reshape", {"src": t}, dims=[1, c, size, size])
    m.conv(x, c, 5, 1)
    return m.to_dict()


def refused(small, elew_op):
    """An elew oneDNN has only its reference kernel for (on an AVX2 machine): the model
    compiles again with it on the cpu (Context.refused)."""
    m = ModelBuilder()
    a = m.conv(m.input("data", [2, 3, 5, 6]), 3, 19, 3, pad=1)
    n, c, h, w = small
    b = m.conv(m.input("gate", [n, 3, h, w]), 3, c, 3, pad=1)
    if elew_op == "TL_DIV":
        b = m.op("sigmoid", {"src": b})
    m.op("elew", {"src1": a, "src2": b}, elew_op=elew_op)
    return m.to_dict()


def bench_model(name, **kwargs):
    from lightnet.frontends.onnx import convert

    sys.path.insert(0, str(BENCH))
    try:
        import models
    finally:
        sys.path.remove(str(BENCH))
    return convert(models.MODELS[name](np.random.default_rng(7), **kwargs))


def desc_state(desc):
    return None if desc is None else (desc.format, desc.key)


def entry_state(entry):
    """Everything a tensor entry says, a oneDNN layout by its content."""
    return tuple((v.format, desc_state(v.desc), desc_state(v.source), v.dtype)
                 if isinstance(v, dnnl_ops.Layout) else v for v in entry.__dict__.values())


def snapshot(ctx):
    ops = [(op.name, op.optype, op.tensors_in, op.tensors_out, op.scratch, op.scratch_offset,
            getattr(op.values.get("call"), "impl_info", None),
            {k: v for k, v in op.values.items() if k != "call"}) for op in ctx.ops]
    # The tensor table by content: a rewrite leaves it in no particular order.
    return {"ops": ops, "tensors": {n: entry_state(e) for n, e in ctx.tensors.items()},
            "memory": repr(ctx.mem), "ir": ctx.print(), "refused": ctx.refused,
            "outputs": ctx.outputs, "inputs": ctx.inputs}


def compile_and_run(doc, target, weights=None, combine=True, datafile=None):
    ctx = Context()
    ctx.init(doc)
    ctx.compile(target, weights=weights, combine=combine)
    ctx.load(datafile)
    rng = np.random.default_rng(1)
    for name in ctx.inputs:
        entry = ctx.tensors[name]
        ctx.set_data(name, rng.standard_normal(entry.shape).astype(entry.dtype.np))
    ctx.run()
    return snapshot(ctx), [ctx.get_data(n) for n in ctx.outputs]


def assert_same_without_caches(doc, target, weights=None, combine=True, datafile=None):
    cached, outputs = compile_and_run(doc, target, weights, combine, datafile)
    with no_caches():
        plain, plain_outputs = compile_and_run(doc, target, weights, combine, datafile)
    for key in plain:
        assert cached[key] == plain[key], key
    for a, b in zip(outputs, plain_outputs, strict=True):
        np.testing.assert_array_equal(a, b)
    return cached


@pytest.mark.parametrize("model,target", [
    (model, target) for model in ("chain", "convs", "two_outputs", "shuffle_units",
                                  "squeezenet1.1", "vit_s16")
    for target in ("dnnl", "cpu")] + [("mobilenetv3", "dnnl")])
def test_a_model_compiles_the_same_with_and_without_the_caches(model, target):
    if model == "chain":
        assert_same_without_caches(chain(40), target)
    elif model == "two_outputs":
        assert_same_without_caches(two_outputs(), target)
    elif model == "shuffle_units":
        assert_same_without_caches(shuffle_units(), target)
    elif model == "convs":
        assert_same_without_caches(convs(), target)
        assert_same_without_caches(convs(), target, combine=False)
    else:
        doc, weights = bench_model(model, **({"depth": 2} if model == "vit_s16" else {}))
        assert_same_without_caches(doc, target, weights)  # folded, fused
        assert_same_without_caches(doc, target, datafile=weights)  # weights read at load


def test_shufflenet_units_on_dnnl_compute_what_the_cpu_computes():
    """A reader of a tensor whose producer a combiner replaced (the channel shuffle
    fused after the split's slices were checked) is checked again when the layout pass
    puts it back: its output was made from the entry the old producer made."""
    doc = shuffle_units()
    feeds = random_inputs(doc, seed=1)
    want, _ = run_model(doc, feeds, "cpu")
    got, ctx = run_model(doc, feeds, "dnnl")
    assert "channel_shuffle_dnnl" in [op.optype for op in ctx.ops]
    assert_outputs_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("small,elew_op", [([2, 19, 5, 1], "TL_DIV"), ([2, 19, 5, 1], "TL_MUL"),
                                           ([1, 1, 1, 6], "TL_DIV")])
def test_a_model_compiled_again_for_a_refused_op_is_the_same_with_the_caches(small, elew_op):
    """The second compile (an op oneDNN would run with its reference kernel lowered for the
    cpu) starts from the model's ops anew: no primitive made for the first compile's
    layouts is given to an op whose inputs' layouts changed."""
    result = assert_same_without_caches(refused(small, elew_op), "dnnl", combine=False)
    if not result["refused"]:
        pytest.skip("oneDNN has a fast kernel for this elew on this machine")
    assert "elew1" in result["refused"]


def counting(monkeypatch):
    """Count the primitives made, by constructor and arguments (as the cache keys them)."""
    made = {}
    for name in ("eltwise", "conv2d", "binary", "pool", "shuffle", "reorder", "matmul",
                 "concat", "softmax", "layernorm", "reduction", "batchnorm"):
        real = getattr(primitives, name)

        def wrapper(*args, real=real, **kwargs):
            key = (real.__name__, dnnl_ops._key(args), dnnl_ops._key(tuple(kwargs.items())))
            made[key] = made.get(key, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(primitives, name, wrapper)
    return made


def test_each_primitive_is_made_once_per_compile(monkeypatch):
    made = counting(monkeypatch)
    ctx = Context()
    ctx.init(chain(300))
    ctx.compile("dnnl")
    # One eltwise primitive per function of the chain, shared by its 300 ops, each
    # checked three times (lowered, and twice by the layout pass).
    assert sorted(k[0] for k in made) == ["eltwise"] * 3
    assert set(made.values()) == {1}
    assert len({id(op.values["call"].kernel) for op in ctx.ops if op.optype.endswith("_dnnl")
                and op.optype != "reorder_dnnl"}) == 3
    made.clear()
    ctx = Context()
    ctx.init(convs())
    ctx.compile("dnnl")
    assert made and set(made.values()) == {1}
    # Without the cache the same compile makes each primitive several times.
    made.clear()
    with no_caches():
        ctx = Context()
        ctx.init(chain(30))
        ctx.compile("dnnl")
    assert sum(made.values()) >= 3 * 30


def test_the_cache_lives_while_a_model_compiles():
    ctx = Context()
    ctx.init(chain(3))
    assert dnnl_ops._cache.get() is None
    ctx.compile("dnnl")
    assert dnnl_ops._cache.get() is None
    with dnnl_ops.kernel_cache():
        outer = dnnl_ops._cache.get()
        with dnnl_ops.kernel_cache():
            assert dnnl_ops._cache.get() is outer  # an inner block shares the outer cache
    assert dnnl_ops._cache.get() is None


def test_a_layout_differing_in_content_is_another_key():
    plain = primitives.plain_desc((1, 8, 4, 4))
    blocked = primitives.MemoryDesc.with_tag((1, 8, 4, 4), "float32",
                                             primitives.TAGS_4D["aBcd8b"])
    assert plain.key == primitives.plain_desc((1, 8, 4, 4)).key
    assert plain.key != blocked.key
    assert plain.key != primitives.plain_desc((1, 8, 4, 4), "bfloat16").key
    whole = primitives.plain_desc((1, 8, 4, 4))
    assert whole.submemory((1, 4, 4, 4), (0, 0, 0, 0)).key != whole.submemory(
        (1, 4, 4, 4), (0, 4, 0, 0)).key
    assert dnnl_ops._key(-0.0) != dnnl_ops._key(0.0)
    assert dnnl_ops._key(np.float32(0.5)) == dnnl_ops._key(0.5)


def test_an_op_put_back_unchanged_is_not_checked_again(monkeypatch):
    checked = []
    real = Op.pre_run

    def pre_run(op, tensors):
        checked.append(op.name)
        real(op, tensors)
    monkeypatch.setattr(Op, "pre_run", pre_run)
    ctx = Context()
    ctx.init(chain(200))
    checked.clear()
    ctx.compile("dnnl")
    # 201 ops lowered, then taken out and put back twice by the layout pass, with a
    # reorder at either end: checked are one op of each signature (the input, each
    # function of the chain, the first op reading the reordered input) and the reorders.
    assert len(checked) <= 10
    assert {"relu1", "sigmoid1", "tanh1"} <= set(checked)
    # By hand: ops put back as they were are not checked; one whose tensors changed is,
    # and so is an op reading a tensor whose entry differs (no signatures: an op of a
    # signature checked before is not checked either).
    monkeypatch.setattr(op_module, "_signature", lambda op, ins: None)
    ctx = Context()
    ctx.init(chain(3))
    ctx._checks = CheckMemo()
    ops = list(ctx.ops)
    ctx.remove_ops(0, len(ops))
    checked.clear()
    ctx.add_ops(0, ops)  # checked under another memo (init's): checked here
    assert checked == [op.name for op in ops]
    ctx.remove_ops(0, len(ops))
    checked.clear()
    ctx.add_ops(0, ops)
    assert checked == []
    ctx.remove_ops(0, len(ops))
    ops[2].params = dict(ops[2].params)  # the same params: the same check
    ctx.add_ops(0, ops)
    assert checked == []
    ctx.remove_ops(0, len(ops))
    ops[0].tensors_out["dst"] = "y"
    ops[1].tensors_in["src"] = "y"
    ctx.add_ops(0, ops)
    assert checked == [ops[0].name, ops[1].name]
    ctx.remove_ops(0, len(ops))
    ops[0].params["dims"] = Param.from_value("dims", [1, 32])
    ctx.add_ops(0, ops)  # x is [1, 32] now: every op reads another entry
    assert checked[2:] == [op.name for op in ops]
    assert ctx.tensors[ops[-1].tensors_out["dst"]].shape == (1, 32)
    # A pass replacing an op's producer (the op not checked again) changes what the op
    # reads: taken out and put back, it is checked, though it reads what it read when
    # it was taken out.
    ops[1] = ops[1].copy_as(get_proto("sigmoid"), "other")
    ctx.replace_ops(1, 1, [ops[1]])
    ctx.remove_ops(0, len(ops))
    checked.clear()
    ctx.add_ops(0, ops)
    assert checked == [ops[2].name]


def memories(ctx):
    """The distinct oneDNN memory objects the loaded ops of `ctx` run over."""
    found = {}
    for _, run in ctx._run_ops:  # each a capi.Execute, or a function calling some
        calls = [run] if isinstance(run, capi.Execute) else [
            cell.cell_contents for cell in getattr(run, "__closure__", None) or ()]
        for call in calls:
            keep = getattr(call, "_keep", None)
            if keep is not None:
                found.update((id(m), m) for m in keep[1].values())
    return found


def test_a_tensor_s_producer_and_readers_share_its_memory_object():
    ctx = Context()
    ctx.init(chain(30))
    ctx.compile("dnnl")
    ctx.load()
    # 30 ops over 31 tensors of one layout, which the memory plan puts at a few
    # addresses: one memory object per address (60 without the cache).
    addresses = {ctx.arrays[n].__array_interface__["data"][0] for n in ctx.tensors}
    assert len(addresses) < 31
    assert len(memories(ctx)) == len(addresses)
    assert primitives._memories.get() is None  # dropped once the model is loaded
    with no_caches():
        plain = Context()
        plain.init(chain(30))
        plain.compile("dnnl")
        plain.load()
    assert len(memories(plain)) == 60


def test_ops_sharing_a_primitive_each_write_their_own_output():
    """Two relus of one shape share a primitive (it holds no memory: each op binds its
    own), and each writes the relu of its own source to its own output."""
    m = ModelBuilder()
    one = m.op("relu", {"src": m.input("a", [2, 8])})
    two = m.op("relu", {"src": m.input("b", [2, 8])})
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("dnnl")
    relus = [op for op in ctx.ops if op.optype == "relu_dnnl"]
    assert len(relus) == 2 and relus[0].values["call"].kernel is relus[1].values["call"].kernel
    ctx.load()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 8), np.float32), rng.standard_normal((2, 8), np.float32)
    ctx.set_data("a", a)
    ctx.set_data("b", b)
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data(one), np.maximum(a, 0))
    np.testing.assert_array_equal(ctx.get_data(two), np.maximum(b, 0))


def test_ops_of_one_primitive_over_the_same_memories_share_their_run_call():
    """The 60 ops of a chain of 3 kinds reuse a few arena places: ops of one kernel
    over the same memories share one run call (what the call's argument array
    holds: the kernel's arguments in order, each the handle of its memory), and the
    chain computes what it computes without the caches, bit for bit."""
    ctx = Context()
    ctx.init(chain(60))
    ctx.compile("dnnl")
    ctx.load()
    runs = [run for _, run in ctx._run_ops]
    assert len(runs) == 60 and all(isinstance(run, capi.Execute) for run in runs)
    distinct = {id(run): run for run in runs}
    assert len(distinct) < 60
    for op, run in ctx._run_ops:
        kernel = op.values["call"].kernel
        primitive, memories, args = run._keep
        assert primitive is kernel.primitive
        assert [(a.arg, a.memory) for a in args] == [(arg, m.handle.value)
                                                    for arg, m in memories.items()]
        assert list(memories) == [arg for _, arg, _ in kernel.bindings]
        for name, arg, _ in kernel.bindings:
            tensor = ctx.arrays[(op.tensors_in | op.tensors_out)[name]]
            assert memories[arg].owner.__array_interface__["data"][0] == \
                tensor.__array_interface__["data"][0]
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    ctx.set_data("x", x)
    ctx.run()
    with no_caches():
        plain = Context()
        plain.init(chain(60))
        plain.compile("dnnl")
        plain.load()
    assert len({id(run) for _, run in plain._run_ops}) == 60
    plain.set_data("x", x)
    plain.run()
    for name in ctx.outputs:
        np.testing.assert_array_equal(ctx.get_data(name), plain.get_data(name))
