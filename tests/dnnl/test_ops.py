"""The dnnl architecture: every dnnl op against its cpu variant (float32, rel 1e-4) over
random geometries, each fusion on and off, the layout pass's reorders at the borders of
a model mixing dnnl and cpu ops, the memory plan of blocked tensors, scratchpads and
reordered weights, and a compiled IR (-c / -r) round trip."""

import json
import math

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.archs.cpu import kernels as K
from lightnet.archs.dnnl import capi, primitives
from lightnet.archs.dnnl import ops as dnnl_ops
from lightnet.compiler import pipeline
from tests.helpers import compiled, random_inputs, rel_error, run
from tests.irbuild import ModelBuilder

pytestmark = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")

RTOL = 1e-4


def uses_reference(ctx) -> bool:
    return any(str(getattr(op.values.get("call"), "impl_info", "")).startswith("ref")
               for op in ctx.ops)


def intended(ctx, op) -> str:
    """The optype `op` had before the compile moved it to the cpu because oneDNN has only
    its reference kernel for it on this machine (Context.refused), else its own."""
    return ctx.refused.get(op.name, (op.optype,))[0]


def check_against_cpu(doc, combine=True, optypes=(), weights=None):
    """Run `doc` on dnnl and on cpu; the outputs agree to RTOL; returns the dnnl context.
    `optypes`: dnnl ops the model must have, unless oneDNN has only its reference
    kernel for one on this machine: then it must have that op's cpu variant. No op
    runs a reference kernel."""
    inputs = random_inputs(doc)
    ref = run(compiled(doc, load=True, combine=combine, weights=weights), inputs)
    ctx = compiled(doc, "dnnl", combine=combine, weights=weights)
    have = [op.optype for op in ctx.ops]
    slow = {optype for optype, _ in ctx.refused.values()}
    for optype in optypes:
        if optype in slow:
            assert optype.removesuffix("_dnnl") + "_cpu" in have, have
        else:
            assert optype in have, have
    assert not uses_reference(ctx)
    for op in ctx.ops:  # the layout pass's invariant: other ops read plain tensors only
        if op.arch != "dnnl":
            assert all(ctx.tensors[n].layout is None for n in op.tensors_in.values()), op.name
    ctx.load()
    ours = run(ctx, inputs)
    assert ours.keys() == ref.keys()
    for name in ref:
        assert ours[name].shape == ref[name].shape
        assert rel_error(ours[name], ref[name]) <= RTOL, name
    return ctx


def conv_model(n, c, h, w, o, k, group, stride, dilation, padding, autopad, residual=False,
               activation=None):
    m = ModelBuilder()
    x = m.input("data", [n, c, h, w])
    wt = m.weight("w", [o, c // group, k[0], k[1]], -0.5, 0.5)
    b = m.weight("b", [o], -0.1, 0.1)
    y = m.op("conv2d", {"src": x, "weight": wt, "bias": b}, group=group, size=list(k),
             stride=list(stride), dilation=list(dilation), padding=list(padding),
             autopad=autopad)
    return m, y


def conv_geometries(count, seed):
    rng = np.random.default_rng(seed)
    autopads = ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]
    for i in range(count):
        kind = ("dense", "grouped", "depthwise")[i % 3]
        c = int(rng.choice([3, 5, 12, 17, 24]))
        group = {"dense": 1, "grouped": int(rng.choice([2, 3])), "depthwise": c}[kind]
        c = c if kind != "grouped" else group * int(rng.choice([3, 5, 8]))
        o = c if kind == "depthwise" else group * int(rng.choice([1, 3, 7, 11]))
        k = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        autopad = autopads[i % 4]
        padding = ([int(v) for v in rng.integers(0, 3, 4)] if autopad == "NOTSET"
                   else [0, 0, 0, 0])
        h, w = int(rng.integers(9, 20)), int(rng.integers(9, 20))
        yield (int(rng.integers(1, 3)), c, h, w, o, k, group, stride, dilation, padding,
               autopad)


@pytest.mark.parametrize("geometry", list(conv_geometries(24, 16)), ids=str)
def test_conv2d_matches_cpu(geometry):
    m, _ = conv_model(*geometry)
    ctx = check_against_cpu(m.to_dict(), optypes=["conv2d_dnnl", "weights_dnnl"])
    # Reorders at the borders: the input in (its layout the convolution's choice), the
    # output out where the convolution's is not the plain one; nothing between.
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    dst = ctx.tensors[conv.tensors_out["dst"]]
    reorders = [op for op in ctx.ops if op.optype == "reorder_dnnl"]
    assert [op.values["to"] for op in reorders] == ["dnnl"] + ["plain"] * (dst.layout is not None)


@pytest.mark.parametrize("kind,size,stride,padding,dilation,ceil_mode,extra", [
    ("maxpool2d", [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False, {}),
    ("maxpool2d", [2, 3], [2, 1], [0, 1, 1, 0], [2, 1], True, {}),
    ("maxpool2d", [3, 2], [3, 2], [2, 0, 0, 1], [1, 1], True, {}),
    ("avgpool2d", [3, 3], [2, 2], [1, 1, 1, 1], None, False, {}),
    ("avgpool2d", [3, 3], [2, 2], [1, 1, 1, 1], None, False, {"count_include_pad": True}),
    ("avgpool2d", [2, 3], [2, 2], [0, 1, 1, 0], None, True, {}),
    ("avgpool2d", [2, 3], [1, 2], [1, 1, 1, 0], [2, 3], False, {}),
    ("avgpool2d", [3, 2], [2, 1], [1, 0, 1, 1], [2, 2], False, {"count_include_pad": True}),
    ("avgpool2d", [2, 2], [2, 2], [0, 0, 0, 0], [3, 2], True, {}),
])
def test_pooling_matches_cpu(kind, size, stride, padding, dilation, ceil_mode, extra):
    m = ModelBuilder()
    x = m.input("data", [2, 19, 13, 11])
    params = dict(size=size, stride=stride, padding=padding, ceil_mode=ceil_mode, **extra)
    if dilation is not None:
        params["dilation"] = dilation
    m.op(kind, {"src": x}, **params)
    check_against_cpu(m.to_dict(), optypes=[f"{kind}_dnnl"])


def test_pooling_autopad_matches_cpu():
    for autopad in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        for kind in ("maxpool2d", "avgpool2d"):
            m = ModelBuilder()
            x = m.input("data", [1, 6, 10, 9])
            m.op(kind, {"src": x}, size=[3, 2], stride=[2, 2], autopad=autopad)
            check_against_cpu(m.to_dict(), optypes=[f"{kind}_dnnl"])


def test_average_pooling_oneDNN_would_count_otherwise_stays_on_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 3, 7, 7])
    m.op("avgpool2d", {"src": x}, size=[2, 2], stride=[2, 2], ceil_mode=True,
         count_include_pad=True)
    ctx = check_against_cpu(m.to_dict())
    assert [op.optype for op in ctx.ops] == ["input_cpu", "avgpool2d_cpu"]


def test_global_avgpool_matches_cpu():
    m = ModelBuilder()
    m.op("global_avgpool2d", {"src": m.input("data", [2, 21, 7, 5])})
    check_against_cpu(m.to_dict(), optypes=["global_avgpool2d_dnnl"])


@pytest.mark.parametrize("optype,params", [
    ("relu", {}), ("sigmoid", {}), ("tanh", {}), ("lrelu", {"negslope": 0.2}),
    ("clip", {"min": -0.5, "max": 0.7}),
])
def test_eltwise_matches_cpu(optype, params):
    m = ModelBuilder()
    m.op(optype, {"src": m.input("data", [2, 17, 5, 3])}, **params)
    check_against_cpu(m.to_dict(), optypes=[f"{optype}_dnnl"])


# hard_swish, hard_sigmoid, gelu and swish: oneDNN's eltwise, each with its params.
ACTIVATIONS = [
    ("hard_swish", {}), ("hard_swish", {"alpha": 0.3, "beta": 0.2}),
    ("hard_sigmoid", {}), ("hard_sigmoid", {"alpha": 1 / 6, "beta": 0.5}),
    ("gelu", {}), ("gelu", {"approximate": "tanh"}),
    ("swish", {}), ("swish", {"alpha": 1.702}),
]


def activation_shapes(count, seed):
    """Random shapes, 2-D to 4-D, channel counts mostly not multiples of 8 or 16."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        c = int(rng.choice([1, 3, 7, 13, 17, 24, 33]))
        yield [int(rng.integers(1, 3)), c] + [int(rng.integers(1, 9)) for _ in range(i % 3)]


@pytest.mark.parametrize("optype,params", ACTIVATIONS, ids=str)
@pytest.mark.parametrize("shape", list(activation_shapes(4, 21)), ids=str)
def test_activation_matches_cpu(optype, params, shape):
    m = ModelBuilder()
    m.op(optype, {"src": m.input("data", shape)}, **params)
    check_against_cpu(m.to_dict(), optypes=[f"{optype}_dnnl"])


@pytest.mark.parametrize("optype,params", ACTIVATIONS, ids=str)
def test_activation_in_a_blocked_layout_matches_cpu(optype, params):
    """Unfused after a convolution (its output blocked), over values well past the
    hard ops' knees at -3 and 3 (weights of scale 1)."""
    m = ModelBuilder()
    y = m.conv(m.input("data", [2, 5, 9, 7]), 5, 19, 3, pad=1, scale=1.0)
    m.op(optype, {"src": y}, **params)
    ctx = check_against_cpu(m.to_dict(), combine=False, optypes=[f"{optype}_dnnl"])
    (act,) = [op for op in ctx.ops if op.optype == f"{optype}_dnnl"]
    assert ctx.tensors[act.tensors_in["src"]].layout is not None  # read in the conv's layout


def test_activation_values_are_the_formulas():
    """oneDNN's alpha and beta are the ops' own: against numpy written out."""
    x = np.linspace(-6, 6, 97, dtype=np.float32).reshape(1, 97)
    want = {
        "hard_swish": x * np.clip(0.3 * x + 0.2, 0, 1),
        "hard_sigmoid": np.clip(0.3 * x + 0.2, 0, 1),
        "swish": x / (1 + np.exp(-1.702 * x)),
        "gelu": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
        "gelu_erf": 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2))),
    }
    params = {"hard_swish": {"alpha": 0.3, "beta": 0.2}, "hard_sigmoid": {"alpha": 0.3,
              "beta": 0.2}, "swish": {"alpha": 1.702}, "gelu": {"approximate": "tanh"},
              "gelu_erf": {}}
    for form, ref in want.items():
        optype = form.removesuffix("_erf")
        m = ModelBuilder()
        m.op(optype, {"src": m.input("data", [1, 97])}, **params[form])
        ctx = compiled(m.to_dict(), "dnnl")
        assert f"{optype}_dnnl" in [op.optype for op in ctx.ops]
        ctx.load()
        (out,) = run(ctx, {"data": x}).values()
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6, err_msg=form)


def test_tanh_gelu_of_a_plain_source_is_x_times_a_sigmoid():
    """A plain source's tanh GELU runs as one binary primitive, x * sigmoid(2u) (not
    oneDNN's gelu_tanh eltwise): against the formula in float64 from -30 to 30, where
    the sigmoid saturates at both ends, and against the cpu kernel."""
    x = np.concatenate([np.linspace(-30, 30, 601), [-1e-30, 0.0, 1e-30]])
    x = x.astype(np.float32).reshape(1, -1)
    m = ModelBuilder()
    m.op("gelu", {"src": m.input("data", list(x.shape))}, approximate="tanh")
    ctx = compiled(m.to_dict(), "dnnl")
    (op,) = [op for op in ctx.ops if op.optype == "gelu_dnnl"]
    assert op.values["call"].kernel.what == "mul"  # the binary primitive
    ctx.load()
    (out,) = run(ctx, {"data": x}).values()
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert out[0, 0] == 0 and out[0, 300] == 0 and out[0, -1] == np.float32(5e-31)
    (cpu,) = run(compiled(m.to_dict(), load=True), {"data": x}).values()
    np.testing.assert_allclose(out, cpu, rtol=1e-5, atol=1e-6)


def test_activation_of_float64_stays_on_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 3, 4, 4], dtype="TL_DOUBLE")
    for optype, params in ACTIVATIONS[::2]:
        x = m.op(optype, {"src": x}, **params)
    ctx = compiled(m.to_dict(), "dnnl")
    assert [op.optype for op in ctx.ops] == [
        "input_cpu", "hard_swish_cpu", "hard_sigmoid_cpu", "gelu_cpu", "swish_cpu"]


def test_an_activation_dnnl_op_refuses_float64():
    m = ModelBuilder()
    m.op("hard_swish_dnnl", {"src": m.input("data", [1, 3], dtype="TL_DOUBLE")})
    doc = m.to_dict()
    doc["ops"][0]["optype"] = "input_cpu"  # as in a compiled IR
    ctx = Context()
    with pytest.raises(LightNetError, match="oneDNN runs TL_FLOAT"):
        ctx.init(doc)


@pytest.mark.parametrize("elew_op", ["TL_SUM", "TL_SUB", "TL_MUL", "TL_DIV", "TL_MAX",
                                     "TL_MIN"])
def test_elew_matches_cpu(elew_op):
    m = ModelBuilder()
    a = m.conv(m.input("data", [1, 3, 9, 9]), 3, 17, 3, pad=1)
    b = m.conv(m.input("more", [1, 3, 9, 9]), 3, 17, 3, pad=1)
    m.op("elew", {"src1": a, "src2": b}, elew_op=elew_op)
    check_against_cpu(m.to_dict(), combine=False, optypes=["elew_dnnl"])


BIG = [2, 19, 5, 6]
BROADCASTS = [[2, 19, 1, 1], [1, 19, 1, 1], [2, 1, 5, 6], [1, 1, 1, 6], [1, 1, 1, 1],
              [2, 19, 5, 1], [1, 19, 5, 6]]
# The broadcasts oneDNN 3.2's binary has a fast kernel for (the others run its
# reference one, computing the same): all but [2, 19, 5, 1].
FAST = [b for b in BROADCASTS if b != [2, 19, 5, 1]]


def operand(m, shape, source, name):
    """A tensor of `shape`: a model input (plain), a weight, or the output of a conv
    (oneDNN's blocked layout; through a global average pool when it is [N, C, 1, 1])."""
    if source == "input":
        return m.input(name, shape)
    if source == "weight":
        return m.weight(name, shape, 0.5, 1.5)
    n, c, h, w = shape
    if (h, w) == (1, 1) and c > 1:
        g = m.op("global_avgpool2d", {"src": m.conv(m.input(name, [n, 3, 4, 4]), 3, 8, 1)})
        return m.conv(g, 8, c, 1)
    return m.conv(m.input(name, [n, 3, h, w]), 3, c, 3, pad=1)


@pytest.mark.parametrize("small", BROADCASTS, ids=str)
@pytest.mark.parametrize("elew_op", ["TL_MUL", "TL_SUM", "TL_SUB", "TL_DIV", "TL_MAX", "TL_MIN"])
def test_broadcast_elew_matches_cpu(small, elew_op):
    """The broadcast operand second: dnnl for every op; first: dnnl, its operands
    swapped, for the commutative ones, else the cpu's."""
    for big_first in (True, False):
        m = ModelBuilder()
        a = operand(m, BIG, "conv", "data")
        b = operand(m, small, "conv", "gate")
        src1, src2 = (a, b) if big_first else (b, a)
        if elew_op == "TL_DIV":  # a divisor in (0, 1): a quotient no bigger than 1e2 x
            src2 = m.op("sigmoid", {"src": src2})
        m.op("elew", {"src1": src1, "src2": src2}, elew_op=elew_op)
        ctx = check_against_cpu(m.to_dict(), combine=False)
        elews = [op for op in ctx.ops if op.optype.startswith("elew")]
        if big_first or elew_op in ("TL_MUL", "TL_SUM", "TL_MAX", "TL_MIN"):
            (op,) = elews
            assert intended(ctx, op) == "elew_dnnl"
            if op.name in ctx.refused:
                # oneDNN has only its reference kernel (a division of blocked tensors
                # whose blocks are padded: 0 / 0 in the padding; other broadcasts on
                # some machines): the cpu's, with the operands as given.
                assert op.optype == "elew_cpu" and small not in FAST or elew_op == "TL_DIV"
                continue
            assert list(ctx.tensors[op.tensors_in["src1"]].shape) == BIG
            assert list(ctx.tensors[op.tensors_in["src2"]].shape) == small
        else:
            assert [op.optype for op in elews] == ["elew_cpu"]


@pytest.mark.parametrize("big,small", [("conv", "input"), ("conv", "weight"),
                                       ("input", "conv"), ("input", "input"),
                                       ("input", "weight")])
@pytest.mark.parametrize("shape", [[2, 19, 1, 1], [1, 1, 5, 6], [2, 1, 1, 6]], ids=str)
def test_broadcast_operand_in_any_layout_matches_cpu(big, small, shape):
    """The broadcast operand plain, a weight, or blocked, beside a plain or blocked
    one: read in the big operand's layout (a reorder into the op's scratch where it is
    in another), never by oneDNN's reference kernel."""
    for order in ((0, 1), (1, 0)):
        m = ModelBuilder()
        ins = [operand(m, BIG, big, "data"), operand(m, shape, small, "gate")]
        m.op("elew", {"src1": ins[order[0]], "src2": ins[order[1]]}, elew_op="TL_MUL")
        ctx = check_against_cpu(m.to_dict(), combine=False, optypes=["elew_dnnl"])
        (op,) = [op for op in ctx.ops if op.optype == "elew_dnnl"]
        call = op.values["call"]
        assert not call.impl_info.startswith("ref"), call.impl_info
        src1 = ctx.tensors[op.tensors_in["src1"]]
        src2 = ctx.tensors[op.tensors_in["src2"]]
        # A blocked operand beside a plain one is reordered per run into the scratch; a
        # plain input or weight beside a blocked one is copied once into its layout. (A
        # convolution may write a gate [N, C, 1, 1] plain: oneDNN's choice on AVX2.)
        assert bool(call.before) == ((big, small) == ("input", "conv")
                                     and src2.layout is not None)
        if big == "conv":
            assert src2.layout is not None
        assert (src1.layout is not None) == (big == "conv")


def test_squeeze_excite_stays_in_one_dnnl_region():
    """MobileNetV3's block: hard_swish, the gate hard_sigmoid(conv(relu(conv(gap(y)))))
    scaling y: the activations fuse into the convolutions, the multiply is a broadcast
    binary, nothing leaves oneDNN's layouts."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 3, 12, 12]), 3, 40, 3, pad=1)
    y = m.op("hard_swish", {"src": m.conv(x, 40, 40, 3, pad=1, group=40)})
    s = m.relu(m.conv(m.op("global_avgpool2d", {"src": y}), 40, 16, 1))
    gate = m.op("hard_sigmoid", {"src": m.conv(s, 16, 40, 1)}, alpha=1 / 6, beta=0.5)
    m.conv(m.op("elew", {"src1": y, "src2": gate}, elew_op="TL_MUL"), 40, 24, 1)
    ctx = check_against_cpu(m.to_dict())
    assert [op.optype for op in ctx.ops if op.arch == "cpu"] == ["input_cpu"] + ["create_cpu"] * 10
    assert [op.values["to"] for op in ctx.ops if op.optype == "reorder_dnnl"] == [
        "dnnl", "plain"]
    assert [op.values["activation"] for op in ctx.ops if op.optype == "conv2d_dnnl"] == [
        "none", "hard_swish", "relu", "hard_sigmoid", "none"]


@pytest.mark.parametrize("shape", [[13, 1, 1], [1, 13, 1, 1]], ids=str)
@pytest.mark.parametrize("elew_op", ["TL_MUL", "TL_SUM"])
def test_a_per_channel_constant_after_a_convolution_runs_on_onednn(shape, elew_op):
    """A constant of one value per channel ([C, 1, 1], as Caffe2-converted models scale
    and shift) is reordered once into the layout of the convolution's output (13
    channels: a partial last block), where oneDNN's jit binary reads it."""
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 3, 9, 9]), 3, 13, 3, pad=1)
    m.op("elew", {"src1": y, "src2": m.weight("s", shape)}, elew_op=elew_op)
    ctx = check_against_cpu(m.to_dict(), combine=False, optypes=["elew_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "elew_dnnl"]
    assert not op.values["call"].impl_info.startswith("ref"), op.values["call"].impl_info


@pytest.mark.parametrize("elew_op", ["TL_MUL", "TL_DIV", "TL_SUM", "TL_SUB"])
def test_a_per_channel_constant_folds_into_the_convolution(elew_op):
    """Compiled with its weights, a scale and a shift of one value per channel after a
    convolution become its weights and bias (conv_channel_fold); the relu then fuses."""
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 3, 9, 9]), 3, 13, 3, pad=1)
    y = m.op("elew", {"src1": y, "src2": m.weight("s", [13, 1, 1], 0.5, 2)}, elew_op=elew_op)
    y = m.op("elew", {"src1": y, "src2": m.weight("t", [1, 13, 1, 1])}, elew_op="TL_SUM")
    m.relu(y)
    ctx = check_against_cpu(m.to_dict(), weights={})
    assert [op.optype for op in ctx.ops if op.arch == "dnnl" and "weights" not in op.optype
            and "reorder" not in op.optype] == ["conv2d_dnnl"]
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert conv.values["activation"] == "relu"


@pytest.mark.parametrize("reshaped", [False, True])
def test_a_batchnorm_after_a_matmul_folds_into_it(reshaped):
    """Compiled with its weights, a batchnorm over a matmul's output columns (oneDNN's
    batchnorm takes 4-D and 5-D tensors only) becomes the matmul's weights and bias, also
    across a reshape (LeViT's linear layers flatten [B, T, C] to [B * T, C] for it)."""
    m = ModelBuilder()
    x = m.op("reshape", {"src": m.input("data", [2, 5, 16])}, dims=[10, 16])
    y = m.op("matmul", {"src1": x, "src2": m.weight("w", [16, 24]), "bias": m.weight("b", [24])})
    if reshaped:
        y = m.op("reshape", {"src": m.op("reshape", {"src": y}, dims=[2, 5, 24])},
                 dims=[10, 24])
    m.relu(m.batchnorm(y, 24))
    ctx = check_against_cpu(m.to_dict(), weights={}, optypes=["matmul_dnnl"])
    assert not any(op.optype.startswith("batchnorm") for op in ctx.ops)


@pytest.mark.parametrize("cin,cout,group,stride", [(128, 128, 32, 1),  # ResNeXt's 4 per group
                                                   (24, 36, 6, 2), (40, 40, 10, 1)])
def test_groups_too_narrow_for_a_direct_kernel_run_merged(cin, cout, group, stride):
    """Compiled with its weights, a grouped convolution whose groups oneDNN would run
    by im2col and a GEMM runs as fewer groups of block-diagonal weights, directly."""
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, cin, 12, 10]), cin, cin, 1)
    m.relu(m.conv(y, cin, cout, 3, stride=stride, pad=1, group=group))
    ctx = check_against_cpu(m.to_dict(), weights={})
    (grouped,) = [op for op in ctx.ops if op.optype == "conv2d_dnnl" and op.values["group"] > 1]
    assert grouped.values["group"] < group
    assert "gemm" not in grouped.values["call"].impl_info


def test_groups_merged_only_up_to_four_times_the_products():
    """5 groups of 4 channels merge into no fewer groups (a dense convolution would do 5x
    the products): they stay as they are, on whichever kernel oneDNN has."""
    m = ModelBuilder()
    m.conv(m.input("data", [1, 20, 12, 10]), 20, 10, 3, pad=1, group=5)
    ctx = check_against_cpu(m.to_dict(), weights={})
    assert [op.values["group"] for op in ctx.ops if op.optype.startswith("conv2d")] == [5]


def test_merged_groups_are_block_diagonal():
    """merge_conv_groups against a naive grouped convolution: same outputs."""
    rng = np.random.default_rng(3)
    group, per_group, out_per_group = 6, 3, 2
    x = rng.standard_normal((group * per_group, 5, 4))
    w = rng.standard_normal((group * out_per_group, per_group, 1, 1))

    def naive(weight, groups):
        cin, cout = weight.shape[1], weight.shape[0] // groups
        return np.concatenate([
            np.einsum("oc,chw->ohw", weight[g * cout:(g + 1) * cout, :, 0, 0],
                      x[g * cin:(g + 1) * cin]) for g in range(groups)])

    for merge in (2, 3, 6):
        merged = K.merge_conv_groups(w, group, merge)
        assert merged.shape == (group * out_per_group, per_group * merge, 1, 1)
        np.testing.assert_allclose(naive(merged, group // merge), naive(w, group), rtol=1e-12)


def test_folding_a_per_channel_operand_is_the_operation_after_the_convolution():
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s) for s in ((2, 5, 6, 7), (4, 5, 3, 3), (4,)))
    v = rng.uniform(0.5, 2, (4, 1, 1))
    conv = np.zeros((2, 4, 4, 5))
    K.conv2d(x, w, b, conv, group=1, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1))
    for elew_op, want in (("TL_MUL", conv * v), ("TL_DIV", conv / v), ("TL_SUM", conv + v),
                          ("TL_SUB", conv - v)):
        w2, b2 = K.fold_channel_operand_conv(w, b, v, elew_op, np.float64)
        got = np.zeros_like(conv)
        K.conv2d(x, w2, b2, got, group=1, stride=(1, 1), padding=(0, 0, 0, 0),
                 dilation=(1, 1))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert K.channel_operand((4, 1, 1), (2, 4, 6, 7)) and K.channel_operand((1,), (2, 4, 6, 7))
    assert not K.channel_operand((4, 1, 7), (2, 4, 6, 7))
    assert not K.channel_operand((2, 4, 1, 1), (2, 4, 6, 7))  # one value per image


def test_an_op_onednn_runs_only_by_its_reference_kernel_is_compiled_for_the_cpu():
    """A multiply by an operand broadcasting along the width only ([1, C, H, 1]) beside a
    blocked convolution output: oneDNN has only its reference binary for it, so the
    compile lowers that op with the fallback (cpu) instead; the model has no `ref:`."""
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 3, 7, 7]), 3, 24, 3, pad=1)
    stats = {p: m.weight(p, [24], from_file=True) for p in ("scale", "offset", "mean", "var")}
    y = m.op("batchnorm", {"src": y, **stats})
    m.op("elew", {"src1": y, "src2": m.input("gate", [1, 24, 7, 1])}, elew_op="TL_MUL")
    doc = m.to_dict()
    rng = np.random.default_rng(5)
    weights = {name: rng.uniform(0.5, 1.5, 24).astype(np.float32) for name in stats.values()}
    # With a weight file: the second compile folds the batchnorm again from the file's
    # weights, not from what the first one left (it drops the weights it folded).
    ctx = check_against_cpu(doc, weights=weights)
    assert "batchnorm_dnnl" not in [op.optype for op in ctx.ops]
    assert not any(op.values.get("call") is not None
                   and str(op.values["call"].impl_info).startswith("ref") for op in ctx.ops)
    first = Context()
    first.init(doc)
    pipeline.compile(first, "dnnl")  # one pass, no second compile
    if any(op.optype == "elew_dnnl" and op.values["call"].impl_info.startswith("ref")
           for op in first.ops):
        assert "elew_cpu" in [op.optype for op in ctx.ops]


def test_elew_whose_operands_broadcast_each_other_stays_on_cpu():
    m = ModelBuilder()
    a = m.conv(m.input("data", [1, 3, 5, 1]), 3, 7, 1)
    b = m.input("more", [1, 1, 1, 6])
    m.op("elew", {"src1": a, "src2": b}, elew_op="TL_MUL")  # [1, 7, 5, 6]
    ctx = check_against_cpu(m.to_dict(), optypes=["conv2d_dnnl"])
    assert [op.optype for op in ctx.ops if op.optype.startswith("elew")] == ["elew_cpu"]


def test_an_elew_dnnl_op_whose_first_operand_broadcasts_is_refused():
    m = ModelBuilder()
    m.op("elew_dnnl", {"src1": m.input("a", [1, 4, 1, 1]), "src2": m.input("b", [1, 4, 3, 3])},
         elew_op="TL_MUL")
    doc = m.to_dict()
    for op in doc["ops"]:
        if op["optype"] == "input":
            op["optype"] = "input_cpu"  # as in a compiled IR
    with pytest.raises(LightNetError, match="src2 broadcasts to src1's shape"):
        Context().init(doc)


def test_elew_of_other_shapes_or_power_stays_on_cpu():
    """Shapes that broadcast each other (neither is the result's) and a power stay on
    the cpu; a lower-ranked operand broadcasting to the other runs on dnnl."""
    m = ModelBuilder()
    x = m.op("sigmoid", {"src": m.input("data", [1, 4, 3, 1])})
    y = m.op("elew", {"src1": x, "src2": m.weight("s", [1, 1, 1, 5], 0.5, 1)},
             elew_op="TL_MUL")
    y = m.op("elew", {"src1": y, "src2": y}, elew_op="TL_POW")
    m.op("elew", {"src1": y, "src2": m.weight("t", [3, 1], 0.5, 1)}, elew_op="TL_SUB")
    ctx = check_against_cpu(m.to_dict())
    assert [intended(ctx, op) for op in ctx.ops if op.optype.startswith("elew")] == [
        "elew_cpu", "elew_cpu", "elew_dnnl"]
    assert "sigmoid_dnnl" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("bias_shape", [[384], [1, 384], [197, 1]])
@pytest.mark.parametrize("order", ["sum", "swapped", "sub"])
def test_a_lower_ranked_operand_broadcasts_on_dnnl(bias_shape, order):
    """A transformer's bias [C] added to a [N, T, C] activation (either order), or
    subtracted from it."""
    m = ModelBuilder()
    x = m.op("gelu", {"src": m.input("data", [1, 197, 384])})
    b = m.weight("b", bias_shape, -1, 1)
    ins = {"src1": b, "src2": x} if order == "swapped" else {"src1": x, "src2": b}
    m.op("elew", ins, elew_op="TL_SUB" if order == "sub" else "TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["elew_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "elew_dnnl"]
    assert ctx.tensors[op.tensors_in["src2"]].shape == tuple(bias_shape)


def test_concat_of_blocked_tensors_matches_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 3, 8, 8])
    parts = [m.conv(x, 3, c, 3, pad=1) for c in (5, 17, 16)]
    y = m.op("concat", {f"src{i + 1}": p for i, p in enumerate(parts)}, axis=1)
    m.relu(y)
    check_against_cpu(m.to_dict(), optypes=["concat_dnnl"])


@pytest.mark.parametrize("func", ["exp", "sqrt", "neg", "reciprocal"])
def test_unary_matches_numpy(func):
    """After a convolution (so in oneDNN's layout), on positive and negative values
    (sqrt of a negative is NaN), against numpy on the convolution's own output."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 5, 6, 7]), 5, 19, 3, pad=1)
    m.op("forward", {"src": x})  # the convolution's output is a model output too
    y = m.op("unary", {"src": x}, func=func)
    doc = m.to_dict()
    ctx = compiled(doc, "dnnl")
    assert "unary_dnnl" in [op.optype for op in ctx.ops]
    ctx.load()
    ours = run(ctx, random_inputs(doc))
    conv = next(v for k, v in ours.items() if k != y)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = {"exp": np.exp, "sqrt": np.sqrt, "neg": np.negative,
                "reciprocal": np.reciprocal}[func](conv.astype(np.float64))
    np.testing.assert_allclose(ours[y], want, rtol=1e-5, atol=0)
    assert np.array_equal(np.isnan(ours[y]), np.isnan(want))


@pytest.mark.parametrize("func,alpha", [("abs", 1.0), ("log", 1.0), ("mish", 1.0),
                                        ("softplus", 1.0), ("elu", 0.6)])
def test_eltwise_unary_matches_cpu(func, alpha):
    """The unary functions oneDNN's eltwise has, after a convolution (in its layout), on
    values scaled by 4 (log reads their absolute values plus one)."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 5, 6, 7]), 5, 19, 3, pad=1)
    x = m.op("elew", {"src1": x, "src2": m.weight("four", [1], 4.0, 4.0)}, elew_op="TL_MUL")
    if func == "log":
        x = m.op("elew", {"src1": m.op("unary", {"src": x}, func="abs"),
                          "src2": m.weight("one", [1], 1.0, 1.0)}, elew_op="TL_SUM")
    m.op("unary", {"src": x}, func=func, **({"alpha": alpha} if func == "elu" else {}))
    ctx = check_against_cpu(m.to_dict(), optypes=["unary_dnnl"])
    assert [op.optype for op in ctx.ops].count("unary_dnnl") == 1 + (func == "log")


def test_round_halves_to_even_on_onednn():
    m = ModelBuilder()
    y = m.op("unary", {"src": m.input("data", [1, 8])}, func="round")
    doc = m.to_dict()
    ctx = compiled(doc, "dnnl")
    assert "unary_dnnl" in [op.optype for op in ctx.ops]
    ctx.load()
    data = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 3.6]], np.float32)
    np.testing.assert_array_equal(run(ctx, {"data": data})[y], [[0, 2, 2, -0, -2, -2, 2, 4]])


@pytest.mark.parametrize("func", ["sign", "floor", "sin", "softsign", "shrink"])
def test_unary_functions_onednn_lacks_run_on_the_cpu(func):
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 5, 6, 7]), 5, 19, 3, pad=1)
    m.op("unary", {"src": x}, func=func)
    ctx = check_against_cpu(m.to_dict())
    assert "unary_cpu" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("func", ["mean", "sum", "prod", "sum_square", "l1", "l2"])
@pytest.mark.parametrize("shape,axes", [((1, 19, 6, 7), [2, 3]), ((2, 19, 6, 7), [1]),
                                        ((3, 10, 33), [2]), ((3, 10, 33), [0, 2])])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce_matches_cpu(func, shape, axes, keepdims):
    m = ModelBuilder()
    x = m.input("data", list(shape))
    if len(shape) == 4:
        x = m.conv(x, shape[1], shape[1], 3, pad=1)
    m.op("reduce", {"src": x}, func=func, axes=axes, keepdims=keepdims)
    check_against_cpu(m.to_dict(), optypes=["reduce_dnnl"])


@pytest.mark.parametrize("func", ["mean", "sum"])
def test_a_spatial_reduce_of_a_blocked_tensor_runs_on_onednn(func):
    """oneDNN reduces a blocked source by its reference kernel only: the op reads it
    reordered plain instead, and is not sent to the cpu."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 19, 6, 7]), 19, 24, 3, pad=1)
    m.op("reduce", {"src": x}, func=func, axes=[2, 3], keepdims=True)
    ctx = check_against_cpu(m.to_dict())
    assert not ctx.refused
    (reduce,) = [op for op in ctx.ops if op.optype == "reduce_dnnl"]
    assert ctx.tensors[reduce.tensors_in["src"]].layout is not None  # blocked, read plain


@pytest.mark.parametrize("group", [2, 4])
@pytest.mark.parametrize("source", ["input", "concat"])
def test_a_shuffle_of_a_plain_or_channels_last_tensor_is_one_reorder(source, group):
    """ShuffleNet v2's unit: a concat of two 58-channel halves (written channels-last)
    shuffled; a model's input (plain) too. Each is one reorder between two strided views
    in the source's layout, not oneDNN's shuffle (its reference kernel on those)."""
    m = ModelBuilder()
    x = m.input("data", [1, 116, 9, 7])
    if source == "concat":
        x = m.concat([m.conv(x, 116, 58, 1), m.conv(x, 116, 58, 1)])
    y = m.op("channel_shuffle", {"src": x}, group=group)
    m.conv(y, 116, 16, 1)
    ctx = check_against_cpu(m.to_dict(), optypes=["channel_shuffle_dnnl"])
    (shuffle,) = [op for op in ctx.ops if op.optype == "channel_shuffle_dnnl"]
    assert not shuffle.values["call"].impl_info.startswith("ref")
    layout = ctx.tensors[shuffle.tensors_in["src"]].layout
    shown = None if layout is None else layout.format
    dst = ctx.tensors[shuffle.tensors_out["dst"]].layout
    assert shown in (None, "acdb") and (None if dst is None else dst.format) == shown


@pytest.mark.parametrize("axes", [(0, 2, 3, 1), (0, 3, 1, 2), (1, 0, 2, 3), (3, 2, 1, 0)])
def test_a_transpose_reads_a_blocked_tensor_where_it_is(axes):
    """ConvNeXt's permutes: the convolution's output, blocked, is read by the transpose
    with its axes permuted: no reorder to plain before it."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [2, 19, 6, 7]), 19, 21, 3, pad=1)
    m.op("transpose", {"src": x}, axes=list(axes))
    ctx = check_against_cpu(m.to_dict(), optypes=["transpose_dnnl"])
    assert [op.optype for op in ctx.ops if op.optype.startswith("reorder")] == ["reorder_dnnl"]


@pytest.mark.parametrize("shape,axes", [((5, 3), (1, 0)), ((2, 5, 3), (0, 2, 1)),
                                        ((2, 5, 3), (2, 0, 1)), ((2, 3, 4, 5, 6), (0, 4, 2, 1, 3))])
def test_a_transpose_of_a_plain_tensor_matches_cpu(shape, axes):
    m = ModelBuilder()
    m.op("transpose", {"src": m.input("data", list(shape))}, axes=list(axes))
    check_against_cpu(m.to_dict(), optypes=["transpose_dnnl"])


def test_a_channels_last_transpose_feeds_a_direct_convolution():
    """YOLO12's area attention: [N, H, W, C] transposed to [N, C, H, W] is written
    channels-last (its bytes' order), so the 7x7 depthwise convolution adding into it
    runs a direct kernel, not im2col on a plain tensor."""
    m = ModelBuilder()
    x = m.op("transpose", {"src": m.input("data", [1, 20, 20, 64])}, axes=[0, 3, 1, 2])
    y = m.conv(x, 64, 64, 7, pad=3, group=64)
    m.op("elew", {"src1": x, "src2": y}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict())
    (transpose,) = [op for op in ctx.ops if op.optype == "transpose_dnnl"]
    assert ctx.tensors[transpose.tensors_out["dst"]].layout.format == "acdb"
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert "gemm" not in conv.values["call"].impl_info


@pytest.mark.parametrize("dtype", ["TL_INT32", "TL_DOUBLE"])
def test_a_transpose_of_other_dtypes_stays_on_cpu(dtype):
    m = ModelBuilder()
    m.op("transpose", {"src": m.input("data", [2, 3, 4], dtype=dtype)}, axes=[2, 0, 1])
    ctx = compiled(m.to_dict(), "dnnl")
    assert [op.optype for op in ctx.ops if op.optype.startswith("transpose")] == ["transpose_cpu"]


def test_two_transposes_in_a_row_are_one_on_dnnl():
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 8, 5, 6]), 8, 8, 1)
    y = m.op("transpose", {"src": x}, axes=[0, 2, 3, 1])
    m.op("transpose", {"src": y}, axes=[0, 3, 1, 2])
    ctx = check_against_cpu(m.to_dict())
    assert [op.optype for op in ctx.ops].count("transpose_dnnl") <= 1


@pytest.mark.parametrize("equation,a,b", [
    ("B G H I D, B G H J D -> B G H I J", (1, 4, 3, 7, 5), (1, 4, 3, 9, 5)),  # MaxViT's
    ("B G H I J, B G H J D -> B G H I D", (1, 4, 3, 7, 9), (1, 4, 3, 9, 5)),
    ("bij,bjk->bki", (2, 3, 4), (2, 4, 5)),  # the product's transpose: operands swapped
    ("ji,jk->ik", (3, 2), (3, 4)), ("bij,bjk->bik", (2, 3, 4), (1, 4, 5))])
def test_an_einsum_that_is_a_matmul_runs_on_onednn(equation, a, b):
    m = ModelBuilder()
    m.op("einsum", {"src1": m.input("a", list(a)), "src2": m.input("b", list(b))},
         equation=equation)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    assert "einsum_cpu" not in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("equation,a,b", [
    ("bhqd,hkd->bhqk", (2, 3, 4, 5), (3, 6, 5)),  # b's batch axis is missing
    ("bij,bjk->ikb", (2, 3, 4), (2, 4, 5)),  # the output transposed
    ("bixj,bjk->bixk", (2, 3, 2, 4), (2, 4, 5))])  # rows of two axes: a reshape
def test_other_einsums_stay_on_cpu(equation, a, b):
    m = ModelBuilder()
    m.op("einsum", {"src1": m.input("a", list(a)), "src2": m.input("b", list(b))},
         equation=equation)
    ctx = check_against_cpu(m.to_dict())
    assert "einsum_cpu" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("shape,axis", [((1, 16, 4, 35), 1), ((2, 6, 5), 0), ((2, 6, 5), 1),
                                        ((3, 7), 1)])
def test_a_softmax_over_any_axis_of_a_plain_tensor_runs_on_onednn(shape, axis):
    """YOLO's box head takes the softmax over 16 bins of axis 1 of a plain tensor, which
    oneDNN computes by its reference kernel: read with that axis innermost it does not."""
    m = ModelBuilder()
    m.op("softmax", {"src": m.input("data", list(shape))}, axis=axis)
    ctx = check_against_cpu(m.to_dict())
    assert not ctx.refused
    assert "softmax_dnnl" in [op.optype for op in ctx.ops]


def test_a_mean_without_keepdims_feeds_a_matmul_on_dnnl():
    """ShuffleNet's and MnasNet's head: x.mean([2, 3]) (keepdims 0) into the classifier."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 19, 6, 7]), 19, 24, 3, pad=1)
    pooled = m.op("reduce", {"src": x}, func="mean", axes=[2, 3], keepdims=False)
    m.op("matmul", {"src1": pooled, "src2": m.weight("fc", [24, 10])})
    ctx = check_against_cpu(m.to_dict(), optypes=["reduce_dnnl", "matmul_dnnl"])
    assert ctx.tensors[pooled].shape == (1, 24)


@pytest.mark.parametrize("shape,axes", [([1, 3], [0]),  # a copy: one element
                                        ([2, 1, 1], [1, 2])])
def test_other_reduces_stay_on_cpu(shape, axes):
    """A copy (nothing reduced), and every max and min (below)."""
    m = ModelBuilder()
    m.op("reduce", {"src": m.input("data", shape)}, func="max", axes=axes, keepdims=True)
    ctx = check_against_cpu(m.to_dict())
    assert "reduce_cpu" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("shape,axes,merged", [
    ((2, 5, 7, 1), [2, 3], ((10, 7), [1])),
    ((1, 3, 4, 1), [2, 3], ((3, 4), [1])),
    ((2, 1, 5, 7), [1, 2], ((2, 5, 7), [1])),
    ((2, 3, 4, 5), [0, 2], ((2, 3, 4, 5), [0, 2])),
    ((1, 6, 1), [1], ((6,), [0]))])
def test_merged_reduction_drops_size_one_dims_and_merges_neighbours(shape, axes, merged):
    assert primitives.merged_reduction(shape, axes) == merged


@pytest.mark.parametrize("keepdims", [1, 0])
@pytest.mark.parametrize("shape,axes,optype", [
    ([2, 5, 7, 1], [2, 3], "reduce_dnnl"),  # a size-1 dim after the reduced one
    ([1, 3, 4, 1], [2, 3], "reduce_dnnl"),
    ([2, 5, 7, 1], [1, 2, 3], "reduce_dnnl"),
    ([2, 3, 4, 5], [2, 3], "reduce_dnnl"),
    ([1], [0], "reduce_cpu")])  # a copy: nothing reduced (the dnnl expander's rule)
def test_an_onnx_reduce_mean_over_trailing_axes_runs_on_onednn(shape, axes, keepdims, optype):
    """ONNX ReduceMean imported and run on dnnl, against numpy and ONNX Runtime. [N, C,
    S, 1] over [2, 3] is oneDNN's reference kernel as given (a size-1 dim after the reduced
    axis), which sent the op to the cpu; read as [N * C, S] over [1] it is a jit one."""
    pytest.importorskip("onnxruntime")
    from onnx import helper

    from lightnet.frontends.onnx import convert
    from tests.frontends.onnxutil import init, model, run_ort

    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=keepdims)
    onnx_model = model([node], [("x", shape)], [("y", None)],
                       [init("axes", np.array(axes, np.int64))], opset=18)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    want = x.astype(np.float64).mean(axis=tuple(axes), keepdims=bool(keepdims))
    theirs = run_ort(onnx_model, {"x": x})["y"]
    ir, weights = convert(onnx_model)
    ctx = compiled(ir, "dnnl", weights=weights, load=True)
    assert optype in [op.optype for op in ctx.ops] and not ctx.refused
    assert not uses_reference(ctx)
    (ours,) = run(ctx, {"x": x}).values()
    assert ours.size == want.size == theirs.size
    assert ours.shape == want.shape or want.ndim == 0  # a scalar is [1] inside
    assert rel_error(ours.reshape(want.shape), want) <= 1e-6
    assert rel_error(ours.reshape(want.shape), theirs) <= 1e-6


@pytest.mark.parametrize("func", ["mean", "sum", "prod"])
@pytest.mark.parametrize("shape,axes,conv", [((2, 5, 7, 1), [2, 3], False),
                                             ((2, 5, 7, 1), [2, 3], True),
                                             ((3, 1, 6, 1), [2], True),
                                             ((2, 4, 1, 6, 1), [1, 2, 3, 4], False)])
def test_a_reduce_with_size_one_dims_after_its_axes_runs_on_onednn(func, shape, axes, conv):
    """Of a plain source, or of one a convolution writes in blocks (reordered plain)."""
    m = ModelBuilder()
    x = m.input("data", list(shape))
    if conv:
        x = m.conv(x, shape[1], shape[1], 1)
    m.op("reduce", {"src": x}, func=func, axes=axes, keepdims=True)
    ctx = check_against_cpu(m.to_dict())
    assert "reduce_dnnl" in [op.optype for op in ctx.ops] and not ctx.refused


@pytest.mark.parametrize("func", ["sum", "mean"])
@pytest.mark.parametrize("shape,axes", [((8, 32, 30, 16), [3]),  # many short rows
                                        ((2, 1, 5, 7), [1, 2]),  # [2, 5, 7] over [1]
                                        ((2, 19, 6, 7), [1]),
                                        ((2, 3, 4, 5), [0, 1]),  # [6, 20] over [0]
                                        ((2, 64, 7, 7), [2, 3])])
def test_a_sum_or_mean_over_one_run_of_axes_is_a_product_on_onednn(func, shape, axes):
    """A plain source's sum or mean over one run of axes, trailing or not, is a matmul
    by a vector of ones (primitives._reduction_by_product): oneDNN's jit reduction
    reads trailing axes only, and many short rows slowly. Against numpy in float64."""
    m = ModelBuilder()
    m.op("reduce", {"src": m.input("data", list(shape))}, func=func, axes=axes,
         keepdims=True)
    ctx = check_against_cpu(m.to_dict())
    (reduce,) = [op for op in ctx.ops if op.optype.startswith("reduce")]
    assert reduce.optype == "reduce_dnnl" and not ctx.refused
    assert reduce.values["call"].impl_info.startswith("gemm")
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    (ours,) = run(ctx, {"data": x}).values()
    want = getattr(x.astype(np.float64), func)(axis=tuple(axes), keepdims=True)
    assert rel_error(ours, want) <= 1e-6


@pytest.mark.parametrize("func,shape,axes", [("prod", (2, 1, 5, 7), [1, 2]),  # [2, 5, 7], [1]
                                             ("sum_square", (2, 19, 6, 7), [1]),
                                             ("mean", (5, 3), [0])])  # 3 kept: not a product
def test_a_reduce_of_other_than_trailing_axes_runs_on_the_cpu(func, shape, axes):
    """oneDNN's jit reduction of a plain source takes its trailing axes only (after
    merged_reduction), else its reference kernel (docs/runtime.md "Never a reference
    kernel"): refused, the op runs on the cpu, unless it is a sum or mean that is a
    product (above)."""
    m = ModelBuilder()
    m.op("reduce", {"src": m.input("data", list(shape))}, func=func, axes=axes,
         keepdims=True)
    ctx = check_against_cpu(m.to_dict())
    (reduce,) = [op for op in ctx.ops if op.optype.startswith("reduce")]
    assert reduce.optype == "reduce_cpu" and intended(ctx, reduce) == "reduce_dnnl"
    assert ctx.refused[reduce.name][1].startswith("ref:")


@pytest.mark.parametrize("func, fill", [("max", -np.inf), ("min", np.inf)])
def test_max_and_min_of_infinities_stay_on_cpu(func, fill):
    """oneDNN's max starts from float's lowest (its max of a row of -inf, a fully masked
    attention row, is -3.4e38), its min from the largest: both run on the cpu."""
    m = ModelBuilder()
    m.op("reduce", {"src": m.input("data", [2, 3])}, func=func, axes=[1], keepdims=True)
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("dnnl")
    ctx.load()
    assert "reduce_cpu" in [op.optype for op in ctx.ops]
    ctx.set_data("data", np.array([[fill] * 3, [1, fill, 2]], np.float32))
    ctx.run()
    got = ctx.get_data(ctx.ops[-1].tensors_out["dst"])
    np.testing.assert_array_equal(got, [[fill], [2 if func == "max" else 1]])


@pytest.mark.parametrize("mode", ["TL_LINEAR", "TL_NEAREST"])
@pytest.mark.parametrize("src,dims", [((1, 16, 5, 7), (1, 16, 10, 21)),
                                      ((2, 13, 7, 9), (2, 13, 28, 18)),
                                      ((1, 3, 20, 20), (1, 3, 20, 20))])
def test_resize_of_integer_upscales_matches_cpu(mode, src, dims):
    """Both modes: nearest for integer upscales, where every nearest rule agrees."""
    m = ModelBuilder()
    x = m.conv(m.input("data", list(src)), src[1], src[1], 3, pad=1)
    m.op("resize", {"src": x}, mode=mode, dims=list(dims))
    check_against_cpu(m.to_dict(), optypes=["resize_dnnl"])


@pytest.mark.parametrize("src,dims", [((1, 16, 5, 7), (1, 16, 8, 13)),
                                      ((2, 5, 10, 6), (2, 5, 7, 4)), ((1, 8, 9), (1, 8, 31))])
def test_linear_resize_of_any_size_matches_cpu(src, dims):
    m = ModelBuilder()
    m.op("resize", {"src": m.input("data", list(src))}, mode="TL_LINEAR", dims=list(dims))
    check_against_cpu(m.to_dict(), optypes=["resize_dnnl"])


@pytest.mark.parametrize("mode,src,dims", [
    ("TL_NEAREST", (1, 16, 5, 7), (1, 16, 8, 13)),  # floor(i * in / out): not oneDNN's rule
    ("TL_NEAREST", (2, 5, 10, 6), (2, 5, 5, 3)),  # a downscale
    ("TL_LINEAR", (2, 4, 6), (4, 4, 12)),  # the batch axis changes
    ("TL_LINEAR", (12,), (30,))])  # no spatial axis
def test_other_resizes_stay_on_cpu(mode, src, dims):
    m = ModelBuilder()
    m.op("resize", {"src": m.input("data", list(src))}, mode=mode, dims=list(dims))
    ctx = check_against_cpu(m.to_dict())
    assert "resize_cpu" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("mode,scales", [("TL_NEAREST", [1, 1, 2, 2]),
                                         ("TL_NEAREST", [1, 1, 3, 1]),
                                         ("TL_LINEAR", [1, 1, 2, 2]),
                                         ("TL_LINEAR", [1, 1, 0.5, 1.5])])
def test_upsample_matches_cpu(mode, scales):
    """YOLO's nearest x2 and a segmentation head's bilinear, in a blocked layout."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 19, 6, 8]), 19, 20, 3, pad=1)
    m.op("upsample", {"src": x}, mode=mode, scales=scales)
    check_against_cpu(m.to_dict(), optypes=["upsample_dnnl"])


@pytest.mark.parametrize("mode,scales", [("TL_NEAREST", [1, 1, 1.5, 2]),  # not integer
                                         ("TL_LINEAR", [1, 1, 1.3, 1]),  # 6 * 1.3 not whole
                                         ("TL_NEAREST", [2, 1, 2, 2])])  # the batch axis
def test_other_upsamples_stay_on_cpu(mode, scales):
    m = ModelBuilder()
    m.op("upsample", {"src": m.input("data", [1, 19, 6, 8])}, mode=mode, scales=scales)
    ctx = check_against_cpu(m.to_dict())
    assert "upsample_cpu" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("n,c,parts", [(1, 116, (58, 58)), (2, 64, (32, 32)),
                                       (1, 48, (13, 35)), (2, 17, (1, 16)), (1, 3, (2, 1))])
def test_channel_splits_of_a_convolution_output_run_on_dnnl(n, c, parts):
    """YOLO's C2f and ShuffleNet v2 split a convolution's output along its channels: each
    part a slice_dnnl reading the convolution's layout (a part cutting channel blocks
    from a channels-last copy), feeding convolutions and a concat."""
    m = ModelBuilder()
    y = m.relu(m.conv(m.input("data", [n, 3, 9, 7]), 3, c, 3, pad=1))
    start, outs = 0, []
    for size in parts:
        part = m.op("slice", {"src": y}, axis=1, start=start, len=size)
        outs.append(m.conv(part, size, 8, 3, pad=1) if size % 2 else part)
        start += size
    m.op("concat", {f"src{i + 1}": p for i, p in enumerate(outs)}, axis=1)
    ctx = check_against_cpu(m.to_dict(), optypes=["slice_dnnl"])
    assert "slice_cpu" not in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("shape,axis,start,length", [((1, 84, 35), 1, 4, 80),  # YOLO's head
                                                     ((6, 9), 0, 1, 3), ((2, 3, 4, 5, 6), 3, 2, 2)])
def test_slices_of_any_rank_run_on_dnnl(shape, axis, start, length):
    m = ModelBuilder()
    x = m.op("sigmoid", {"src": m.input("data", list(shape))})
    m.op("slice", {"src": x}, axis=axis, start=start, len=length)
    ctx = check_against_cpu(m.to_dict(), optypes=["slice_dnnl"])
    assert "slice_cpu" not in [op.optype for op in ctx.ops]


def test_a_slice_cutting_the_blocks_of_a_3d_tensor_reads_it_plain_first():
    """A 3-D tensor a dnnl op holds in channel blocks, split inside a block."""
    m = ModelBuilder()
    x = m.op("reshape", {"src": m.input("data", [1, 21, 35])}, dims=[1, 21, 5, 7])
    y = m.op("reshape", {"src": m.conv(x, 21, 19, 1)}, dims=[1, 19, 35])
    m.op("slice", {"src": y}, axis=1, start=3, len=10)
    check_against_cpu(m.to_dict(), optypes=["slice_dnnl"])


def test_a_slice_of_the_models_input_reads_it_plain():
    m = ModelBuilder()
    m.relu(m.op("slice", {"src": m.input("data", [2, 5, 4, 3])}, axis=2, start=1, len=2))
    ctx = check_against_cpu(m.to_dict(), optypes=["slice_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "slice_dnnl"]
    assert ctx.tensors[op.tensors_in["src"]].layout is None


def concat_parts(ctx, op):
    return [ctx.tensors[op.tensors_in[a]] for a in op.variadic_in("src")]


@pytest.mark.parametrize("channels", [(16, 32, 16), (64, 128)])
def test_a_concat_of_whole_channel_blocks_is_written_in_place(channels):
    """Parts of 16 channels each (batch 1) in a blocked layout are contiguous blocks
    of the output: the convolutions write there and the concat copies nothing."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 9, 9])
    parts = [m.conv(x, 3, c, 3, pad=1) for c in channels]
    y = m.op("concat", {f"src{i + 1}": p for i, p in enumerate(parts)}, axis=1)
    m.relu(m.conv(y, sum(channels), 16, 1))  # (a 3x3 one here runs channels-last)
    ctx = check_against_cpu(m.to_dict(), optypes=["concat_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "concat_dnnl"]
    dst = ctx.tensors[op.tensors_out["dst"]]
    assert dst.layout is not None and dst.layout.format != "acdb", dst.layout
    offset = 0
    for part in concat_parts(ctx, op):
        assert (part.owner, part.owner_offset) == (dst.name, offset)
        offset += part.stored_nbytes
    assert offset == dst.stored_nbytes
    assert op.values["call"].impl_info == "concat in place"  # no primitive runs


def test_a_concat_with_a_part_of_a_partial_block_copies():
    """Channel blocks cut by the joint (17 channels): oneDNN's concat reads the parts
    channels-last (reordered first), never with its reference kernel."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 9, 9])
    parts = [m.conv(x, 3, c, 3, pad=1) for c in (16, 17, 16)]
    y = m.op("concat", {f"src{i + 1}": p for i, p in enumerate(parts)}, axis=1)
    m.relu(m.conv(y, 49, 16, 3, pad=1))
    ctx = check_against_cpu(m.to_dict(), optypes=["concat_dnnl"])
    assert not ctx.refused
    (op,) = [op for op in ctx.ops if op.optype == "concat_dnnl"]
    assert all(part.owner is None for part in concat_parts(ctx, op))


def test_a_concat_of_a_plain_part_and_a_partial_block_uses_its_primitive():
    """ERFNet's downsampler: a max pool of the 3-channel input (plain) beside a
    13-channel convolution (blocked, its last block partial). No part is placed: a
    part the concat would copy as bytes must be in the output's layout."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 12, 12])
    pool = m.op("maxpool2d", {"src": x}, size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0])
    y = m.op("concat", {"src1": pool, "src2": m.conv(x, 3, 13, 3, stride=2, pad=1)}, axis=1)
    m.relu(m.batchnorm(y, 16))
    ctx = check_against_cpu(m.to_dict(), optypes=["concat_dnnl"])
    assert not ctx.refused
    (op,) = [op for op in ctx.ops if op.optype == "concat_dnnl"]
    assert all(part.owner is None for part in concat_parts(ctx, op))
    assert op.values["call"].impl_info != "concat in place"


def test_a_concat_copies_the_parts_it_cannot_place():
    """A part whose memory is another tensor's (a convolution adding a residual in
    place writes into the residual) stays there and is copied; the other part is
    placed, and the concat primitive is not run."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 9, 9])
    summed = m.add(m.conv(x, 3, 16, 3, pad=1), m.conv(x, 3, 16, 1))
    y = m.op("concat", {"src1": summed, "src2": m.conv(x, 3, 32, 3, pad=1)}, axis=1)
    m.conv(y, 48, 16, 3, pad=1)
    ctx = check_against_cpu(m.to_dict(), optypes=["concat_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "concat_dnnl"]
    first, second = concat_parts(ctx, op)
    assert first.owner is not None and first.owner_offset is None  # the residual's memory
    assert (second.owner, second.owner_offset) == (op.tensors_out["dst"], first.stored_nbytes)


@pytest.mark.parametrize("transB,bias,static", [
    (False, None, True), (True, [13], True), (False, [1, 13], True), (True, [6, 13], False),
    (False, [6, 1], False), (True, None, False)])
def test_matmul_matches_cpu(transB, bias, static):
    m = ModelBuilder()
    a = m.input("a", [6, 21])
    if static:
        b = m.weight("b", [13, 21] if transB else [21, 13])
    else:
        b = m.input("b", [13, 21] if transB else [21, 13])
    ins = {"src1": a, "src2": b}
    if bias is not None:
        ins["bias"] = m.weight("c", bias) if static else m.input("c", bias)
    y = m.op("matmul", ins, transB=transB)
    m.relu(y)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    if not ctx.refused:
        assert [op.values["activation"] for op in ctx.ops
                if op.optype == "matmul_dnnl"] == ["relu"]


@pytest.mark.parametrize("rows,transB,bias,relu", [
    (9, False, True, True), (8, True, False, False), (130, False, True, False),
    (9, True, True, True)])
def test_a_linear_layer_runs_as_a_blocked_1x1_convolution(rows, transB, bias, relu):
    """A float32 [M, K] @ static B with M >= 8 and K, N >= 768 below AVX-512
    (primitives.linear): a 1x1 convolution in channel blocks of 8, K = 770 and N = 777
    not multiples of 8, its operand reordered in and its product out, a relu applied
    inside; against the cpu."""
    m = ModelBuilder()
    ins = {"src1": m.input("a", [rows, 770]),
           "src2": m.weight("b", [777, 770] if transB else [770, 777], -0.05, 0.05)}
    if bias:
        ins["bias"] = m.weight("c", [777])
    y = m.op("matmul", ins, transB=transB)
    if relu:
        m.relu(y)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (op,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    kernel = op.values["call"].kernel
    assert op.values["activation"] == ("relu" if relu else "none")
    if dnnl_ops.matmul_post_ops_cheap():  # AVX-512: oneDNN's brgemm matmul
        assert kernel.what == "matmul"
    else:
        assert kernel.what == "linear" and "1x1" in kernel.impl_info, kernel
        assert kernel.format("weights") != "ab"  # reordered at load into the conv's blocks


@pytest.mark.parametrize("source", ["layernorm", "input"])
def test_linears_reading_one_matrix_share_its_blocked_copy(source):
    """BERT's Q, K and V projections of one layernorm (each through a reshape of its
    own): one reorder_dnnl (to: linear) copies it into the linears' blocked layout, and
    the three read that copy, reordering nothing themselves; a fourth product of it
    that is not a linear (3 columns) reads it plain. Against the cpu."""
    m = ModelBuilder()
    x = m.input("x", [1, 9, 776])
    if source == "layernorm":
        x = m.op("layernorm", {"src": x, "scale": m.weight("g", [776]),
                               "bias": m.weight("h", [776])}, axis=2)
    for i in range(3):
        y = m.op("reshape", {"src": x}, dims=[9, 776])
        m.op("matmul", {"src1": y, "src2": m.weight(f"w{i}", [776, 784], -0.05, 0.05),
                        "bias": m.weight(f"b{i}", [784])})
    m.op("matmul", {"src1": m.op("reshape", {"src": x}, dims=[9, 776]),
                    "src2": m.weight("w3", [776, 3])})
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    if dnnl_ops.matmul_post_ops_cheap():  # AVX-512: no linears
        return
    (copy,) = [op for op in ctx.ops if op.optype == "reorder_dnnl"]
    assert copy.values["to"] == "linear"
    blocked = copy.tensors_out["dst"]
    mms = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert [op.tensors_in["src1"] == blocked for op in mms] == [True, True, True, False]
    for op in mms[:3]:
        kernel = op.values["call"].kernel
        assert kernel.what == "linear" and kernel.reorder_in is None


def test_a_weight_of_a_linear_layer_and_of_a_matmul_is_reordered_for_each():
    """One weight read by a product of 9 rows (a linear layer below AVX-512: its
    convolution's blocks) and one of 3 (a matmul: B^T): each reader has its own copy in
    the layout it reads."""
    m = ModelBuilder()
    w = m.weight("b", [768, 770], -0.05, 0.05)
    m.op("matmul", {"src1": m.input("a", [9, 768]), "src2": w})
    m.op("matmul", {"src1": m.input("c", [3, 768]), "src2": w})
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    kinds = [op.values["call"].kernel.what for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert kinds == ["matmul" if dnnl_ops.matmul_post_ops_cheap() else "linear", "matmul"]
    assert [op.optype for op in ctx.ops].count("weights_dnnl") == 2


@pytest.mark.parametrize("rows,k,n,cheap", [(7, 768, 768, False), (8, 767, 768, False),
                                            (8, 768, 767, False), (128, 768, 768, True)])
def test_other_products_stay_matmuls(rows, k, n, cheap, monkeypatch):
    """Fewer than 8 rows, K or N below 768 (the reorders weigh more), or AVX-512
    (where the matmul is brgemm): oneDNN's matmul."""
    monkeypatch.setattr(dnnl_ops, "matmul_post_ops_cheap", lambda: cheap)
    m = ModelBuilder()
    m.op("matmul", {"src1": m.input("a", [rows, k]), "src2": m.weight("b", [k, n])})
    ctx = compiled(m.to_dict(), "dnnl")
    (op,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert op.values["call"].kernel.what == "matmul"


@pytest.mark.parametrize("approximate,cout", [("none", 780), ("tanh", 784), ("tanh", 780)])
def test_a_feed_forward_product_stays_blocked_between_its_linears(approximate, cout):
    """A transformer's feed-forward block as exporters write it: [1, T, C] flattened,
    a linear to `cout` (780: blocks padded), a bias add, a GELU, a linear back.
    Below AVX-512 (linear_blocked_product) the first linear writes the product in its
    channel blocks (Ba8b), the GELU runs on it so and the second linear reads it
    as it is: no reorder op, no reorder in either call; against the cpu."""
    m = ModelBuilder()
    y = linear_layer(m, m.input("x", [1, 9, 768]), 9, 768, cout)
    y = m.op("gelu", {"src": y}, approximate=approximate)
    flat = m.op("reshape", {"src": y}, dims=[9, cout])
    m.op("matmul", {"src1": flat, "src2": m.weight("w2", [cout, 770], -0.05, 0.05)})
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    first, second = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    (act,) = [op for op in ctx.ops if op.optype == "gelu_dnnl"]
    if dnnl_ops.matmul_post_ops_cheap():  # AVX-512: the matmul's own, plain
        assert not first.values["blocked"]
        return
    assert first.values["blocked"] and not second.values["blocked"]
    product = ctx.tensors[first.tensors_out["dst"]]
    assert product.layout.format == "Ba8b" and act.tensors_in["src"] == product.name
    assert ctx.tensors[act.tensors_out["dst"]].layout.format == "Ba8b"
    assert second.tensors_in["src1"] == act.tensors_out["dst"]
    assert "reorder_dnnl" not in [op.optype for op in ctx.ops]
    assert not first.values["call"].before and not second.values["call"].before
    if approximate == "tanh":  # x * sigmoid(2u) in whole blocks, else oneDNN's gelu_tanh
        assert act.values["call"].kernel.what == ("mul" if cout % 8 == 0 else "gelu_tanh")
    assert first.values["call"].kernel.reorder_out is None
    assert second.values["call"].kernel.reorder_in is None


@pytest.mark.parametrize("cin,linear", [(768, True), (12, False)])
def test_a_residual_add_after_a_linear_layer_is_made_in_place(cin, linear, monkeypatch):
    """A transformer's residual add after its output projection ([T, C] product,
    reshaped to [1, T, C], its bias, then + the residual, either operand order):
    matmul_sum adds it in the matmul, into the residual's memory (dst's owner), in a
    linear's output reorder (768 channels below AVX-512) or as the GEMM's sum post-op
    (12), and no add runs; the residual's other reader (a tanh, which the product
    reads) runs first. Against the cpu."""
    if linear:  # a linear below AVX-512 either way
        monkeypatch.setattr(dnnl_ops, "matmul_post_ops_cheap", lambda: False)
    for order in (0, 1):
        m = ModelBuilder()
        x = m.input("x", [1, 9, cin])
        r = m.op("layernorm", {"src": x, "scale": m.weight("g", [cin]),
                               "bias": m.weight("h", [cin])}, axis=2)
        y = linear_layer(m, m.op("tanh", {"src": r}), 9, cin, cin)
        pair = [y, r] if order == 0 else [r, y]
        m.op("elew", {"src1": pair[0], "src2": pair[1]}, elew_op="TL_SUM")
        ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
        assert "elew_dnnl" not in [op.optype for op in ctx.ops]
        (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
        (ln,) = [op for op in ctx.ops if op.optype == "layernorm_dnnl"]
        assert mm.tensors_in["residual"] == ln.tensors_out["dst"]
        assert ctx.tensors[mm.tensors_out["dst"]].owner == ln.tensors_out["dst"]
        kernel = mm.values["call"].kernel
        assert kernel.what == ("linear" if linear else "matmul")
        if linear:
            assert kernel.reorder_out.pd.impl_info.startswith("jit")


def test_a_residual_held_in_a_layout_of_its_own_is_read_as_an_addend():
    """A residual a convolution holds channels-last ([1, 16, 6, 6], the product's 36 x
    16 elements reshaped): the matmul cannot write into it in place, so it reads it as
    its addend (a binary post-op, the residual reordered plain first) and owns its
    output; against the cpu."""
    m = ModelBuilder()
    r = m.op("conv2d", {"src": m.input("x", [1, 16, 6, 6]),
                        "weight": m.weight("cw", [16, 16, 3, 3], -0.1, 0.1),
                        "bias": m.weight("cb", [16])},
             size=[3, 3], group=1, stride=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1])
    flat = m.op("reshape", {"src": m.op("tanh", {"src": r})}, dims=[36, 16])
    y = m.op("matmul", {"src1": flat, "src2": m.weight("w", [16, 16], -0.3, 0.3)})
    y = m.op("reshape", {"src": y}, dims=[1, 16, 6, 6])
    m.op("elew", {"src1": y, "src2": r}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    residual = ctx.tensors[mm.tensors_in["residual"]]
    assert residual.layout is not None and residual.layout.format != "abcd"
    assert ctx.tensors[mm.tensors_out["dst"]].owner is None
    call = mm.values["call"]
    assert "post_op_0" in call.kernel.args and call.args["post_op_0"] == "residual"


def test_a_residual_read_after_the_product_is_not_added_in_place():
    """The residual is read again after the product (a second add), or the product
    reads it itself: matmul_sum leaves it, the matmul's own addend (matmul_addend needs
    the product 2-D) does not apply either, and the adds run; against the cpu."""
    m = ModelBuilder()
    x = m.input("x", [1, 9, 12])
    r = m.op("relu", {"src": x})
    y = linear_layer(m, m.op("tanh", {"src": r}), 9, 12, 12)
    s = m.op("elew", {"src1": y, "src2": r}, elew_op="TL_SUM")
    m.op("elew", {"src1": s, "src2": r}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert "residual" not in mm.tensors_in
    assert [op.optype for op in ctx.ops].count("elew_dnnl") == 2
    m = ModelBuilder()
    r = m.op("relu", {"src": m.input("x", [1, 9, 12])})
    m.op("elew", {"src1": linear_layer(m, r, 9, 12, 12), "src2": r}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert "residual" not in mm.tensors_in and "elew_dnnl" in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("tanh", [False, True])
def test_an_onnx_feed_forward_block_matches_onnx_runtime(tanh):
    """BERT's (erf GELU) and GPT-2's (tanh GELU) feed-forward block as the exporters
    write it in ONNX ([1, 16, 768] -> 800 -> 768, MatMul, Add, the GELU's arithmetic),
    imported: on dnnl (the product between the linears in blocks below AVX-512) and on
    the cpu, against ONNX Runtime."""
    pytest.importorskip("onnxruntime")
    from onnx import helper

    from lightnet.frontends.onnx import convert
    from tests.frontends.onnxutil import init, model, run_ort

    rng = np.random.default_rng(3)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    inits = [init("w1", w(768, 800)), init("b1", w(800)), init("w2", w(800, 768)),
             init("b2", w(768)), init("half", np.float32(0.5)), init("one", np.float32(1))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h"])]
    if tanh:  # 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3)))
        inits += [init("three", np.float32(3)), init("c", np.float32(0.044715)),
                  init("k", np.float32(math.sqrt(2 / math.pi)))]
        nodes += [helper.make_node("Pow", ["h", "three"], ["p"]),
                  helper.make_node("Mul", ["p", "c"], ["pc"]),
                  helper.make_node("Add", ["h", "pc"], ["u0"]),
                  helper.make_node("Mul", ["u0", "k"], ["u"]),
                  helper.make_node("Tanh", ["u"], ["t"])]
    else:  # 0.5 h (1 + erf(h / sqrt(2)))
        inits.append(init("root2", np.float32(math.sqrt(2))))
        nodes += [helper.make_node("Div", ["h", "root2"], ["d"]),
                  helper.make_node("Erf", ["d"], ["t"])]
    nodes += [helper.make_node("Add", ["t", "one"], ["t1"]),
              helper.make_node("Mul", ["h", "t1"], ["g0"]),
              helper.make_node("Mul", ["g0", "half"], ["g"]),
              helper.make_node("MatMul", ["g", "w2"], ["y0"]),
              helper.make_node("Add", ["y0", "b2"], ["y"])]
    onnx_model = model(nodes, [("x", [1, 16, 768])], [("y", [1, 16, 768])], inits)
    x = rng.standard_normal((1, 16, 768)).astype(np.float32)
    want = run_ort(onnx_model, {"x": x})["y"]
    ir, weights = convert(onnx_model)
    for target in ("dnnl", "cpu"):
        ctx = compiled(ir, target, weights=weights, load=True)
        (got,) = run(ctx, {"x": x}).values()
        assert rel_error(got, want) <= 1e-5, target
        if target == "dnnl":
            assert not uses_reference(ctx)
            assert "reorder_dnnl" not in [op.optype for op in ctx.ops]
        if target == "dnnl" and not dnnl_ops.matmul_post_ops_cheap():
            (gelu,) = [op for op in ctx.ops if op.optype == "gelu_dnnl"]
            assert ctx.tensors[gelu.tensors_in["src"]].layout.format == "Ba8b"


def test_a_product_read_otherwise_is_not_blocked():
    """The activation's output read by a second reader too, or a product too small for
    a linear (N = 700): the products stay plain."""
    for second_reader in (True, False):
        m = ModelBuilder()
        cout = 780 if second_reader else 700
        y = linear_layer(m, m.input("x", [1, 9, 768]), 9, 768, cout, activation="gelu")
        flat = m.op("reshape", {"src": y}, dims=[9, cout])
        m.op("matmul", {"src1": flat, "src2": m.weight("w2", [cout, 770], -0.05, 0.05)})
        if second_reader:
            m.op("sigmoid", {"src": flat})
        ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
        assert not any(op.values["blocked"] for op in ctx.ops if op.optype == "matmul_dnnl")
        assert all(ctx.tensors[n].layout is None for op in ctx.ops
                   if op.optype == "matmul_dnnl" for n in op.tensors_out.values())


@pytest.mark.parametrize("transB", [True, False])
def test_a_square_weight_read_transposed_is_reordered(transB):
    """A Gemm's weight [7, 7] with transB: the matmul's weights layout is the
    transpose's, of the same shape as the plain weight, so it is a layout of its own
    (reordered at load), not LightNet's plain one (once refused at load)."""
    m = ModelBuilder()
    m.op("matmul", {"src1": m.input("a", [1, 7]), "src2": m.weight("b", [7, 7]),
                    "bias": m.weight("c", [7])}, transB=transB)
    check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])


def test_matmul_oneDNN_computes_otherwise_stays_on_cpu():
    """alpha or beta with a bias (oneDNN scales the sum, not the product alone), and
    TL_DOUBLE, run as on the cpu."""
    m = ModelBuilder()
    a, b = m.input("a", [3, 4]), m.weight("b", [4, 2])
    m.op("matmul", {"src1": a, "src2": b, "bias": m.weight("c", [2])}, alpha=0.5)
    m.op("matmul", {"src1": m.input("t", [2, 4, 3]), "src2": b, "bias": m.weight("d", [3, 2])},
         transA=True, beta=2.0)
    ctx = check_against_cpu(m.to_dict())
    assert [op.optype for op in ctx.ops if op.optype.startswith("matmul")] == ["matmul_cpu"] * 2
    m = ModelBuilder()
    m.op("matmul", {"src1": m.input("a", [2, 3, 4], dtype="TL_DOUBLE"),
                    "src2": m.input("b", [2, 4, 5], dtype="TL_DOUBLE")})
    ctx = compiled(m.to_dict(), "dnnl")
    assert [op.optype for op in ctx.ops] == ["input_cpu", "input_cpu", "matmul_cpu"]


def batched_matmul_cases(count, seed):
    """(A shape, B shape, transA, transB, B static, alpha, bias shape, activation):
    3-D and 4-D stacks (and 2-D against them), batch dims of 1 broadcasting, every
    transpose combination."""
    rng = np.random.default_rng(seed)
    ranks = [(3, 3), (4, 4), (2, 4), (4, 3), (3, 2), (4, 2), (2, 3), (4, 4)]
    for i in range(count):
        m, k, n = (int(v) for v in rng.integers(1, 24, 3))
        batch = [int(v) for v in rng.integers(2, 5, 2)]
        rank_a, rank_b = ranks[i % len(ranks)]

        def stack(rank):
            return [1 if rng.random() < 0.3 else d for d in batch[len(batch) - (rank - 2):]]
        trans_a, trans_b = bool(i % 2), bool(i // 2 % 2)
        a = stack(rank_a) + ([k, m] if trans_a else [m, k])
        b = stack(rank_b) + ([n, k] if trans_b else [k, n])
        static = i % 3 == 0
        alpha = 1.0 if i % 4 == 1 else float(np.round(rng.uniform(0.1, 2), 3))
        bias = [[n], [m, 1], [1, n]][i % 3] if alpha == 1.0 else None
        yield a, b, trans_a, trans_b, static, alpha, bias, ("relu" if i % 5 == 0 else None)


@pytest.mark.parametrize("case", list(batched_matmul_cases(24, 17)), ids=str)
def test_batched_matmul_matches_cpu(case):
    a_shape, b_shape, trans_a, trans_b, static, alpha, bias, activation = case
    m = ModelBuilder()
    ins = {"src1": m.input("a", a_shape),
           "src2": m.weight("b", b_shape) if static else m.input("b", b_shape)}
    if bias is not None:
        ins["bias"] = m.weight("c", bias)
    y = m.op("matmul", ins, transA=trans_a, transB=trans_b, alpha=alpha)
    if activation:
        m.relu(y)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    if ctx.refused:  # oneDNN's reference kernel (a bias broadcasting over columns)
        return
    assert "matmul_cpu" not in [op.optype for op in ctx.ops]
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert mm.values["activation"] == (activation or "none")
    # Both operands computed per run are read plain, where they are: no reorder, and no
    # weights reorder of what is not a weight.
    assert "reorder_dnnl" not in [op.optype for op in ctx.ops]
    reordered = [op.tensors_in["src"] for op in ctx.ops if op.optype == "weights_dnnl"]
    assert (ins["src2"] in reordered) == static


def test_attention_products_of_two_activations_match_cpu():
    """softmax(Q @ K^T * alpha) @ V per head, Q, K and V made per run by cpu ops (a
    transpose, a gather): both products on dnnl, B read plain, transB as strides."""
    m = ModelBuilder()
    qkv = m.op("transpose", {"src": m.input("x", [1, 9, 3, 2, 8])}, axes=[2, 0, 3, 1, 4])
    q, k, v = (m.op("slice", {"src": qkv}, axis=0, start=i, len=1) for i in range(3))
    s = m.op("matmul", {"src1": q, "src2": k}, transB=True, alpha=8 ** -0.5)
    p = m.op("softmax", {"src": s}, axis=4)
    m.op("matmul", {"src1": p, "src2": v})
    ctx = check_against_cpu(m.to_dict())
    mms = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert len(mms) == 2 and all(not ctx.tensors[op.tensors_in["src2"]].static for op in mms)
    assert "weights_dnnl" not in [op.optype for op in ctx.ops]


@pytest.mark.parametrize("k_axes,trans_b", [((0, 2, 3, 1), False), ((0, 2, 1, 3), True)])
def test_heads_split_by_a_transpose_are_views_the_matmuls_read(k_axes, trans_b):
    """Q, K and V projected ([B, T, H * D]), reshaped to [B, T, H, D] and transposed to
    heads: the transposes only matmuls read are views (no copy, no reorder), which
    the batched products read by strides; the context's transpose back, which the
    model outputs, is a view of the product written into it (matmul_transposed_output).
    A transpose another op reads too stays a copy."""
    m = ModelBuilder()
    x = m.input("x", [2, 7, 24])
    heads = []
    for name, axes in (("q", (0, 2, 1, 3)), ("k", k_axes), ("v", (0, 2, 1, 3))):
        y = m.op("matmul", {"src1": x, "src2": m.weight(f"w{name}", [24, 24])})
        y = m.op("reshape", {"src": y}, dims=[2, 7, 3, 8])
        heads.append(m.op("transpose", {"src": y}, axes=list(axes)))
    q, k, v = heads
    s = m.op("matmul", {"src1": q, "src2": k}, transB=trans_b)
    p = m.op("softmax", {"src": s}, axis=3)
    c = m.op("matmul", {"src1": p, "src2": v})
    m.op("transpose", {"src": c}, axes=[0, 2, 1, 3])
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "transpose_dnnl"])
    transposes = [op for op in ctx.ops if op.optype == "transpose_dnnl"]
    assert [op.values["view"] for op in transposes] == [True, True, True, True]
    assert [op.values["call"].impl_info for op in transposes] == ["view"] * 4
    assert "reorder_dnnl" not in [op.optype for op in ctx.ops]
    for op in transposes[:3]:  # the bytes of its source, seen permuted
        dst = ctx.tensors[op.tensors_out["dst"]]
        assert ctx.tensors.root(dst.name) is ctx.tensors.root(op.tensors_in["src"])
    m.op("relu", {"src": q})  # Q read by another op too: copied
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "transpose_dnnl"])
    views = [op.values["view"] for op in ctx.ops if op.optype == "transpose_dnnl"]
    assert views == [False, True, True, True]


def fused_qkv_attention(tokens: int, heads: int, depth: int, extra_reader: str = ""):
    """GPT-2's attention as exporters write it: one [C, 3C] projection (a bias), its
    Split into Q, K and V along the channels, each reshaped to [1, T, H, D] and
    transposed to heads (K to [1, H, D, T]), softmax(Q K^T / sqrt(D)) V, the context
    transposed back to [1, T, H, D], reshaped to [T, C] and projected. `extra_reader`
    ("k": K's slice, "context": the context) gives that tensor a relu reader besides."""
    c = heads * depth
    m = ModelBuilder()
    x = m.input("x", [tokens, c])
    qkv = m.op("matmul", {"src1": x, "src2": m.weight("w", [c, 3 * c], -0.2, 0.2),
                          "bias": m.weight("b", [3 * c], -0.1, 0.1)})
    qkv = m.op("reshape", {"src": qkv}, dims=[1, tokens, 3 * c])
    parts = [m.op("slice", {"src": qkv}, axis=2, start=i * c, len=c) for i in range(3)]
    if extra_reader == "k":
        m.op("relu", {"src": parts[1]})
    q, k, v = (m.op("transpose", {"src": m.op("reshape", {"src": p},
                                              dims=[1, tokens, heads, depth])}, axes=axes)
               for p, axes in zip(parts, ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])))
    s = m.op("matmul", {"src1": q, "src2": k}, alpha=depth ** -0.5)
    p = m.op("softmax", {"src": s}, axis=3)
    context = m.op("matmul", {"src1": p, "src2": v})
    if extra_reader == "context":
        m.op("relu", {"src": context})
    y = m.op("reshape", {"src": m.op("transpose", {"src": context}, axes=[0, 2, 1, 3])},
             dims=[tokens, c])
    m.op("matmul", {"src1": y, "src2": m.weight("wo", [c, c], -0.2, 0.2)})
    return m


@pytest.mark.parametrize("tokens,heads,depth", [(7, 3, 8), (16, 12, 64)])
def test_fused_qkv_slices_and_context_transpose_are_views(tokens, heads, depth):
    """The Split of a fused Q, K, V product, the reshapes to heads and the transposes
    are views of the product (slice_view, reshape_view, transpose_view: sub-memories
    read by strides, nothing copied), and the context's product is written straight
    into its transpose back (matmul_transposed_output): no slice, transpose or reorder
    runs, and every output matches the cpu. (16 tokens of 12 heads of 64: the
    projections run as linears, GPT-2's widths.)"""
    m = fused_qkv_attention(tokens, heads, depth)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "slice_dnnl",
                                                  "reshape_strided_dnnl", "transpose_dnnl"])
    kinds = [op.optype for op in ctx.ops]
    assert kinds.count("reshape_strided_dnnl") == 3 and "reorder_dnnl" not in kinds
    views = [op for op in ctx.ops if op.optype in ("slice_dnnl", "reshape_strided_dnnl",
                                                   "transpose_dnnl")]
    assert len(views) == 10
    assert all(op.values["call"].impl_info == "view" for op in views)
    ran = {op.name for op, _ in ctx._run_ops}
    assert not ran & {op.name for op in views}
    product = ctx.tensors.root(views[0].tensors_in["src"])
    for op in views:  # the bytes of the fused product, or the context's
        assert ctx.tensors.root(op.tensors_out["dst"]).name in (
            product.name, ctx.tensors.root(views[-1].tensors_out["dst"]).name)
    (context,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"
                  and op.values["dst_axes"]]
    assert list(context.values["dst_axes"]) == [0, 2, 1, 3]
    assert ctx.tensors[views[-1].tensors_out["dst"]].owner == context.tensors_out["dst"]


@pytest.mark.parametrize("extra_reader", ["k", "context"])
def test_fused_qkv_parts_other_ops_read_are_copied(extra_reader):
    """A part of the fused product another op reads too (a relu of K's slice) stays a
    copy (plain: its reshape to heads a plain view of it); a context another op reads
    is written plain and transposed by a copy. Both match the cpu."""
    m = fused_qkv_attention(7, 3, 8, extra_reader)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "slice_dnnl"])
    slices = [op.values["view"] for op in ctx.ops if op.optype == "slice_dnnl"]
    transposes = [op.values["view"] for op in ctx.ops if op.optype == "transpose_dnnl"]
    dst_axes = [list(op.values["dst_axes"]) for op in ctx.ops if op.optype == "matmul_dnnl"]
    if extra_reader == "k":
        assert slices == [True, False, True]
        (k_slice,) = [op for op in ctx.ops
                      if op.optype == "slice_dnnl" and not op.values["view"]]
        (k_heads,) = [op for op in ctx.ops if op.optype == "reshape_strided_dnnl"
                      and op.tensors_in["src"] == k_slice.tensors_out["dst"]]
        assert ctx.tensors[k_heads.tensors_out["dst"]].layout is None
        assert k_slice.values["call"].impl_info != "view"
    else:
        assert slices == [True] * 3 and transposes[-1] is False
        assert all(not axes for axes in dst_axes)


@pytest.mark.parametrize("cheap", [True, False])
def test_attention_scale_and_mask_add_fuse_into_the_scores_matmul(cheap, monkeypatch):
    """softmax(Q @ K^T / sqrt(D) + mask), BERT's scores: the division becomes the
    matmul's alpha (oneDNN's weights scale) and the mask [N, 1, 1, S] a binary add
    post-op where oneDNN applies a batched product's post-ops cheaply
    (matmul_post_ops_cheap, patched both ways); elsewhere the add stays an elew op.
    Both match the cpu."""
    monkeypatch.setattr(dnnl_ops, "matmul_post_ops_cheap", lambda: cheap)
    m = ModelBuilder()
    q, k = m.input("q", [2, 3, 9, 4]), m.input("k", [2, 3, 4, 9])
    s = m.op("matmul", {"src1": q, "src2": k})
    sqrt_d = m.op("create", {}, dtype="TL_FLOAT", dims=[1], data=[2.0])
    s = m.op("elew", {"src1": s, "src2": sqrt_d}, elew_op="TL_DIV")
    s = m.op("elew", {"src1": s, "src2": m.input("mask", [2, 1, 1, 9])}, elew_op="TL_SUM")
    m.op("softmax", {"src": s}, axis=3)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "softmax_dnnl"],
                            weights={})  # with its weights: the scale is known
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    if cheap:
        assert mm.tensors_in["addend"] == "mask" and mm.values["alpha"] == 0.5
        assert "elew_dnnl" not in [op.optype for op in ctx.ops]
    else:
        assert "addend" not in mm.tensors_in and mm.values["alpha"] == 0.5
        assert [op.values["elew_op"] for op in ctx.ops if op.optype == "elew_dnnl"] == [
            "TL_SUM"]
        kernel = mm.values["call"].kernel
        assert kernel.what == "matmul" and kernel.constants["alpha"][0] == 0.5


def test_a_mask_add_after_a_2d_matmul_fuses_and_a_read_product_does_not():
    m = ModelBuilder()
    y = m.op("matmul", {"src1": m.input("x", [6, 8]), "src2": m.weight("w", [8, 5])})
    m.op("elew", {"src1": m.input("r", [6, 5]), "src2": y}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert mm.tensors_in["addend"] == "r"  # the add's first operand: either order
    m.op("relu", {"src": y})  # the product is read twice: the add stays
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    assert [op for op in ctx.ops if op.optype == "matmul_dnnl"][0].tensors_in.get(
        "addend") is None


@pytest.mark.parametrize("operand,trans", [("src2", False), ("src2", True), ("src1", False),
                                           ("src1", True)])
def test_a_transpose_of_the_last_two_axes_becomes_the_matmuls_trans(operand, trans):
    """transpose(x) read only by a matmul: the matmul reads x, its flag toggled."""
    m = ModelBuilder()
    x = m.op("sigmoid", {"src": m.input("x", [2, 3, 7, 5])})
    t = m.op("transpose", {"src": x}, axes=[0, 1, 3, 2])  # [2, 3, 5, 7]
    k = 7 if trans else 5  # the inner dim: t's last unless the matmul transposes it back
    if operand == "src2":
        m.op("matmul", {"src1": m.input("a", [3, 4, k]), "src2": t}, transB=trans)
    else:
        k = 5 if trans else 7
        m.op("matmul", {"src1": t, "src2": m.input("b", [3, k, 4])}, transA=trans)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    assert "transpose_cpu" not in [op.optype for op in ctx.ops]
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    (sig,) = [op for op in ctx.ops if op.optype == "sigmoid_dnnl"]
    assert mm.tensors_in[operand] == sig.tensors_out["dst"]
    assert mm.values["transB" if operand == "src2" else "transA"] == (not trans)
    plain = compiled(m.to_dict(), "dnnl", combine=False)
    assert "transpose_dnnl" in [op.optype for op in plain.ops]


def test_a_transpose_read_by_another_op_is_kept():
    m = ModelBuilder()
    t = m.op("transpose", {"src": m.input("x", [2, 7, 5])}, axes=[0, 2, 1])
    m.op("matmul", {"src1": m.input("a", [2, 3, 5]), "src2": t})
    m.op("relu", {"src": t})
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "transpose_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert not mm.values["transB"]


@pytest.mark.parametrize("operand,scalar_first", [("src1", False), ("src2", True),
                                                  ("src2", False)])
def test_a_multiply_by_a_known_scalar_becomes_the_matmuls_alpha(operand, scalar_first):
    m = ModelBuilder()
    x = m.input("x", [2, 3, 6, 5] if operand == "src1" else [2, 3, 5, 4])
    c = m.weight("c", [1], 0.2, 0.6)
    scaled = m.op("elew", {"src1": c, "src2": x} if scalar_first else {"src1": x, "src2": c},
                  elew_op="TL_MUL")
    other = m.input("y", [3, 5, 4] if operand == "src1" else [3, 6, 5])
    ins = {"src1": scaled, "src2": other} if operand == "src1" else {"src1": other,
                                                                      "src2": scaled}
    m.op("matmul", ins, alpha=1.5)
    doc = m.to_dict()
    # Compiled with the weights, so the scalar is known.
    ctx = check_against_cpu(doc, optypes=["matmul_dnnl"], weights={})
    assert not any(op.optype.startswith("elew") for op in ctx.ops)
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert mm.tensors_in[operand] == "x"
    assert 1.5 * 0.2 <= mm.values["alpha"] <= 1.5 * 0.6
    # Without them it is not: the multiply runs.
    assert "elew_dnnl" in [op.optype for op in compiled(doc, "dnnl").ops]


def test_a_multiply_the_matmul_cannot_take_is_kept():
    """With a bias (alpha would scale it too), by a tensor, or read by another op."""
    m = ModelBuilder()
    x = m.input("x", [4, 5])
    c = m.weight("c", [1], 0.2, 0.6)
    a = m.op("elew", {"src1": x, "src2": c}, elew_op="TL_MUL")
    m.op("matmul", {"src1": a, "src2": m.input("y", [5, 3]), "bias": m.weight("b", [3])})
    b = m.op("elew", {"src1": x, "src2": m.weight("d", [5])}, elew_op="TL_MUL")
    m.op("matmul", {"src1": b, "src2": m.input("z", [5, 2])})
    e = m.op("elew", {"src1": x, "src2": c}, elew_op="TL_MUL")
    m.op("matmul", {"src1": e, "src2": m.input("w", [5, 2])})
    m.op("relu", {"src": e})
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"], weights={})
    assert [op.values["alpha"] for op in ctx.ops if op.optype == "matmul_dnnl"] == [1.0] * 3
    assert len([op for op in ctx.ops if op.optype.startswith("elew")]) == 3


def test_matmul_with_beta_zero_leaves_the_bias_out():
    m = ModelBuilder()
    m.op("matmul", {"src1": m.input("a", [2, 5, 6]), "src2": m.input("b", [6, 3]),
                    "bias": m.weight("c", [3])}, alpha=0.25, beta=0.0)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert "bias" not in mm.values["call"].kernel.args


def test_matmul_of_blocked_sources_reorders_them_into_its_scratch():
    """Convolution outputs (oneDNN's blocked layouts) multiplied as stacks of matrices:
    the matmul reorders each operand to plain first, into its scratch."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 6, 6])
    a, b = m.conv(x, 3, 16, 3, pad=1), m.conv(x, 3, 16, 3, pad=1)
    m.op("matmul", {"src1": a, "src2": b}, transB=True)
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    layouts = [ctx.tensors[mm.tensors_in[arg]].layout for arg in ("src1", "src2")]
    call = mm.values["call"]
    assert sorted(call.before) == sorted(n for n, lay in zip(("src", "weights"), layouts)
                                         if lay is not None)
    assert call.scratch >= call.kernel.scratchpad + sum(call.kernel.nbytes(n)
                                                        for n in call.before)


def test_a_source_layout_without_a_fast_kernel_is_reordered_inside_the_convolution():
    """The 3-channel stem writes channels in blocks of 16; a depthwise convolution has
    only its reference kernel for that source with a channels-last output, so it takes
    the source's layout for its output, or reorders the source first into its scratch."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 3, 20, 20]), 3, 32, 3, stride=2, pad=1)
    m.conv(x, 32, 32, 3, pad=1, group=32)
    ctx = check_against_cpu(m.to_dict())
    calls = [op.values["call"] for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert not any(c.impl_info.startswith("ref") for c in calls), [c.impl_info for c in calls]


@pytest.mark.parametrize("shape", [[1, 1, 1, 1], [1, 2, 1, 1], [2, 1, 3, 1]], ids=str)
def test_a_plain_source_whose_kernel_is_the_reference_one_is_reordered(shape):
    """oneDNN convolves a 1-pixel plain source only with its reference kernel; the
    convolution reorders the (plain) source into its preferred layout first (this once
    failed with an internal error: the plain source has no oneDNN descriptor)."""
    m = ModelBuilder()
    m.conv(m.op("relu", {"src": m.input("data", shape)}), shape[1], 3, 3, pad=1)
    check_against_cpu(m.to_dict(), optypes=["conv2d_dnnl"])


@pytest.mark.parametrize("c,group,k,direct", [(136, 4, 1, True), (240, 3, 1, True),
                                              (58, 2, 3, True), (21, 3, 3, False)])
def test_grouped_convolutions_of_odd_group_widths_run_fast_kernels(c, group, k, direct):
    """ShuffleNet v1's 1x1 convolutions of 4 groups of 34 channels (and groups of 80,
    29 and 7): never oneDNN's reference kernel, and its direct one where it has one (for
    3x3 groups of 7 channels AVX2 has only the GEMM-based one, which beats the
    reference one the other layouts get)."""
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 3, 14, 14]), 3, c, 3, pad=1))
    m.conv(x, c, c, k, pad=k // 2, group=group)
    ctx = check_against_cpu(m.to_dict(), optypes=["conv2d_dnnl"])
    assert not ctx.refused
    for op in ctx.ops:
        if op.optype == "conv2d_dnnl" and direct:
            assert "gemm" not in op.values["call"].impl_info, op.values["call"].impl_info


@pytest.mark.parametrize("k,group", [(7, 16), (3, 16), (3, 1)])
def test_a_plain_source_is_reordered_rather_than_convolved_by_gemm(k, group):
    """A relu of the (plain) input writes plain; oneDNN convolves a plain source by
    im2col and a GEMM (`gemm:jit`, a depthwise 7x7 several times slower than its direct
    kernel), so the convolution reorders it into the layout it prefers first."""
    m = ModelBuilder()
    x = m.relu(m.input("data", [1, 16, 17, 17]))
    m.conv(x, 16, 16, k, pad=k // 2, group=group)
    ctx = check_against_cpu(m.to_dict())
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert ctx.tensors[conv.tensors_in["src"]].layout is None
    assert "gemm" not in conv.values["call"].impl_info, conv.values["call"].impl_info


@pytest.mark.parametrize("kind", ["maxpool2d", "avgpool2d"])
def test_a_pool_of_a_plain_source_runs_channels_last(kind):
    """oneDNN pools a plain source by a simple loop (`simple_nchw`, 50x its jit kernel on
    AlexNet's first max pool): the pool reads the input channels-last instead."""
    m = ModelBuilder()
    x = m.op(kind, {"src": m.input("data", [1, 13, 17, 17])}, size=[3, 3], stride=[2, 2],
             padding=[0, 0, 0, 0])
    m.relu(x)
    ctx = check_against_cpu(m.to_dict())
    (pool,) = [op for op in ctx.ops if op.optype == f"{kind}_dnnl"]
    assert pool.values["call"].impl_info.startswith("jit"), pool.values["call"].impl_info
    assert ctx.tensors[pool.tensors_out["dst"]].layout.format == "acdb"



@pytest.mark.parametrize("channels", [13, 16])
@pytest.mark.parametrize("source", ["input", "transpose"])
def test_a_batchnorm_of_a_plain_source_runs_channels_last(source, channels):
    """oneDNN normalizes a plain source by a loop (`ncsp_bnorm`, 5x its jit kernel on
    DenseNet's 64x56x56): the batchnorm reads a model input, or a tensor a cpu op made
    (MaxViT's window partition), channels-last instead (16 channels), or in channel
    blocks (13: oneDNN's channels-last kernel takes whole vectors of channels)."""
    m = ModelBuilder()
    if source == "input":
        x = m.input("data", [1, channels, 9, 11])
    else:
        x = m.op("transpose", {"src": m.input("data", [1, 9, channels, 11])}, axes=[0, 2, 1, 3])
    m.relu(m.batchnorm(x, channels))
    ctx = check_against_cpu(m.to_dict())
    (norm,) = [op for op in ctx.ops if op.optype == "batchnorm_dnnl"]
    assert "jit" in norm.values["call"].impl_info, norm.values["call"].impl_info
    layout = ctx.tensors[norm.tensors_out["dst"]].layout.format
    assert layout == ("acdb" if channels == 16 else "aBcd8b"), layout


AVX2 = capi.library().cpu_isa.startswith("avx2")


def small_residual_block():
    """1x1 convolution, two 3x3 ones of 64 channels at 16x16 adding the first's output
    (a fused residual), a 1x1 one."""
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 16, 16, 16]), 16, 64, 1))
    y = m.relu(m.conv(x, 64, 64, 3, pad=1))
    y = m.conv(y, 64, 64, 3, pad=1)
    z = m.relu(m.op("elew", {"src1": y, "src2": x}, elew_op="TL_SUM"))
    m.conv(z, 64, 24, 1)
    return m.to_dict()


@pytest.mark.skipif(not AVX2, reason="the time model of conv_layouts is AVX2's")
def test_small_3x3_convolutions_run_channels_last_with_the_group_they_write():
    """3x3 convolutions of 64 channels at 16x16 run channels-last (oneDNN's brgemm
    kernel), and so does the 1x1 one writing the residual their block adds to (one
    group of tensors) and the small 1x1 one after it (a reorder would cost more than
    it loses); the block agrees with cpu."""
    ctx = check_against_cpu(small_residual_block())
    convs = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert [op.values["layout"] for op in convs] == ["channels_last"] * 4
    assert convs[2].tensors_in.get("residual") is not None  # the add fused as a sum
    for op in convs[1:]:
        assert ctx.tensors[op.tensors_in["src"]].layout.format == "acdb"
    for op in convs[1:3]:
        assert "brgconv" in op.values["call"].impl_info, op.values["call"].impl_info


@pytest.mark.skipif(not AVX2, reason="the time model of conv_layouts is AVX2's")
def test_the_layout_choice_round_trips_in_the_compiled_ir():
    """The compiled IR records each convolution's layout param; run again from it, the
    model computes the same bytes, and compiling it again changes nothing."""
    doc = small_residual_block()
    inputs = random_inputs(doc)
    ctx = compiled(doc, "dnnl", load=True)
    ours = run(ctx, inputs)
    text = ctx.print()
    assert text.count("channels_last") == 4
    again = Context()
    again.init(json.loads(text))
    again.load()
    out = run(again, inputs)
    for name in ours:
        np.testing.assert_array_equal(out[name], ours[name])
    again.unload()
    again.compile("dnnl")
    assert again.print() == text


def test_a_weight_two_convolutions_read_is_reordered_for_each():
    m = ModelBuilder()
    x = m.input("data", [1, 8, 6, 6])
    w, b = m.weight("w", [8, 8, 3, 3], -0.3, 0.3), m.weight("b", [8])
    y = m.op("conv2d", {"src": x, "weight": w, "bias": b}, size=[3, 3], padding=[1, 1, 1, 1])
    m.op("conv2d", {"src": y, "weight": w, "bias": b}, size=[3, 3], stride=[2, 2])
    ctx = check_against_cpu(m.to_dict())
    reorders = [op for op in ctx.ops if op.optype == "weights_dnnl"]
    assert [op.tensors_in["src"] for op in reorders] == [w, w]
    assert len({op.tensors_out["dst"] for op in reorders}) == 2


@pytest.mark.parametrize("shape,axis", [([2, 17, 5, 3], 1), ([3, 1000], 1), ([2, 7, 4, 6], 3)])
def test_softmax_matches_cpu(shape, axis):
    m = ModelBuilder()
    m.op("softmax", {"src": m.input("data", shape)}, axis=axis)
    check_against_cpu(m.to_dict(), optypes=["softmax_dnnl"])


@pytest.mark.parametrize("shape,axis", [((4, 1000), 1), ((2, 16, 8400), 1), ((3, 5, 7), 0),
                                        ((1, 16, 6, 7), 1)])
def test_log_softmax_matches_cpu(shape, axis):
    """Plain inputs, and a convolution's output (in oneDNN's blocked layout)."""
    m = ModelBuilder()
    x = m.input("data", list(shape))
    if len(shape) == 4:
        x = m.conv(x, 16, 16, 3, pad=1)
    m.op("log_softmax", {"src": x}, axis=axis)
    check_against_cpu(m.to_dict(), optypes=["log_softmax_dnnl"])


def layernorm_cases(count, seed):
    """(shape, axis, bias, epsilon): the last axis, or the trailing axes when those
    before the last are of size 1 (a 1-D scale then covers them)."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        ndim = int(rng.integers(2, 5))
        shape = [int(v) for v in rng.integers(1, 9, ndim - 1)] + [int(rng.integers(1, 400))]
        axis = ndim - 1
        if i % 4 == 3:
            axis = int(rng.integers(1, ndim - 1)) if ndim > 2 else 1
            shape[axis:-1] = [1] * (ndim - 1 - axis)
        yield shape, axis, bool(i % 2), float([1e-5, 1e-6, 1e-3, 0.5][i % 4])


@pytest.mark.parametrize("case", list(layernorm_cases(16, 23)), ids=str)
def test_layernorm_matches_cpu(case):
    shape, axis, bias, epsilon = case
    m = ModelBuilder()
    ins = {"src": m.input("data", shape), "scale": m.weight("s", [shape[-1]], 0.5, 1.5)}
    if bias:
        ins["bias"] = m.weight("b", [shape[-1]], -0.5, 0.5)
    m.op("layernorm", ins, axis=axis, epsilon=epsilon)
    ctx = check_against_cpu(m.to_dict(), optypes=["layernorm_dnnl"])
    assert "reorder_dnnl" not in [op.optype for op in ctx.ops]  # read and written plain


def test_layernorm_of_a_blocked_source_matches_cpu():
    """After a convolution (a blocked layout): reordered to plain into the scratch; its
    output plain, read by the relu after it as it is."""
    m = ModelBuilder()
    x = m.conv(m.input("data", [2, 3, 7, 9]), 3, 16, 3, pad=1)
    y = m.op("layernorm", {"src": x, "scale": m.weight("s", [9], 0.5, 1.5),
                           "bias": m.weight("b", [9])}, axis=3, epsilon=1e-3)
    m.op("sigmoid", {"src": y})
    ctx = check_against_cpu(m.to_dict(), optypes=["layernorm_dnnl", "sigmoid_dnnl"])
    (ln,) = [op for op in ctx.ops if op.optype == "layernorm_dnnl"]
    assert ctx.tensors[ln.tensors_out["dst"]].layout is None
    if ctx.tensors[ln.tensors_in["src"]].layout is not None:
        assert list(ln.values["call"].before) == ["src"]


def test_layernorm_oneDNN_computes_otherwise_stays_on_cpu():
    """A scale that broadcasts or spans several axes, one computed per run, TL_DOUBLE:
    as on the cpu."""
    m = ModelBuilder()
    x = m.input("data", [2, 3, 4, 5])
    y = m.op("layernorm", {"src": x, "scale": m.weight("s", [1])}, axis=3)
    y = m.op("layernorm", {"src": y, "scale": m.weight("s", [4, 5]),
                           "bias": m.weight("b", [5])}, axis=2)
    y = m.op("layernorm", {"src": y, "scale": m.input("t", [5])}, axis=3)
    ctx = check_against_cpu(m.to_dict())
    assert [op.optype for op in ctx.ops if op.optype.startswith("layernorm")] == [
        "layernorm_cpu"] * 3
    m = ModelBuilder()
    m.op("layernorm", {"src": m.input("data", [2, 5], dtype="TL_DOUBLE"),
                       "scale": m.input("s", [5], dtype="TL_DOUBLE")}, axis=1)
    assert "layernorm_cpu" in [op.optype for op in compiled(m.to_dict(), "dnnl").ops]


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_matches_cpu(size):
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 3, 9, 9]), 3, 19, 3, pad=1)
    m.op("lrn", {"src": x}, size=size, alpha=0.01, beta=0.75, bias=2.0)
    check_against_cpu(m.to_dict(), optypes=["lrn_dnnl"])


def test_lrn_of_an_even_size_stays_on_cpu():
    m = ModelBuilder()
    m.op("lrn", {"src": m.input("data", [1, 6, 4, 4])}, size=4)
    ctx = check_against_cpu(m.to_dict())
    assert "lrn_cpu" in [op.optype for op in ctx.ops]


def test_batchnorm_not_folded_matches_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 3, 8, 8])
    parts = [m.conv(x, 3, c, 3, pad=1) for c in (5, 12)]
    y = m.op("concat", {"src1": parts[0], "src2": parts[1]}, axis=1)
    m.relu(m.batchnorm(y, 17))
    ctx = check_against_cpu(m.to_dict(), optypes=["batchnorm_dnnl", "concat_dnnl"])
    (bn,) = [op for op in ctx.ops if op.optype == "batchnorm_dnnl"]
    assert bn.values["activation"] == "relu"  # the relu fused (fuse_norm_relu)
    assert "relu_dnnl" not in [op.optype for op in ctx.ops]
    check_against_cpu(m.to_dict(), combine=False, optypes=["batchnorm_dnnl", "relu_dnnl"])


@pytest.mark.parametrize("group,stride,padding,output_padding,dilation", [
    (1, [2, 2], [1, 1, 1, 1], [1, 1], [1, 1]),
    (1, [1, 2], [0, 1, 2, 1], [0, 1], [2, 1]),
    (3, [2, 1], [1, 0, 1, 0], [0, 0], [1, 1]),
    (1, [3, 3], [0, 0, 0, 0], [0, 0], [1, 1]),
])
def test_deconv2d_matches_cpu(group, stride, padding, output_padding, dilation):
    m = ModelBuilder()
    x = m.input("data", [2, 6, 7, 5])
    w = m.weight("w", [6, 5, 3, 3], -0.3, 0.3)
    b = m.weight("b", [5 * group])
    m.op("deconv2d", {"src": x, "weight": w, "bias": b}, group=group, size=[3, 3],
         stride=stride, padding=padding, output_padding=output_padding, dilation=dilation)
    check_against_cpu(m.to_dict(), optypes=["deconv2d_dnnl", "weights_dnnl"])


def test_deconv2d_whose_output_padding_exceeds_the_end_padding_stays_on_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 2, 4, 4])
    m.op("deconv2d", {"src": x, "weight": m.weight("w", [2, 3, 3, 3]), "bias": m.weight("b", [3])},
         size=[3, 3], stride=[2, 2], output_padding=[1, 1])
    ctx = check_against_cpu(m.to_dict())
    assert "deconv2d_cpu" in [op.optype for op in ctx.ops]


def test_float64_stays_on_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 2, 5, 5], dtype="TL_DOUBLE")
    m.relu(m.op("maxpool2d", {"src": x}, size=[2, 2]))
    ctx = compiled(m.to_dict(), "dnnl")
    assert [op.optype for op in ctx.ops] == ["input_cpu", "maxpool2d_cpu", "relu_cpu"]


# Fusions -----------------------------------------------------------------------------------

def residual_block(activation="relu", bn=False):
    """x -> conv -> relu -> conv (-> batchnorm) -> add x -> activation."""
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 5, 10, 10]), 5, 19, 3, pad=1))
    y = m.conv(m.relu(m.conv(x, 19, 19, 3, pad=1)), 19, 19, 1)
    if bn:
        y = m.batchnorm(y, 19)
    y = m.add(y, x)
    if activation == "clip":
        m.op("clip", {"src": y}, min=0.0, max=6.0)
    elif activation == "lrelu":
        m.op("lrelu", {"src": y}, negslope=0.1)
    elif activation is not None:
        m.op(activation, {"src": y})
    return m.to_dict()


@pytest.mark.parametrize("activation", ["relu", "clip", "lrelu", "sigmoid", "tanh"])
def test_conv_activation_fusion_on_and_off(activation):
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 6, 9, 9]), 6, 13, 3, stride=2, pad=1)
    if activation == "clip":
        m.op("clip", {"src": y}, min=0.0, max=6.0)
    elif activation == "lrelu":
        m.op("lrelu", {"src": y}, negslope=0.1)
    else:
        m.op(activation, {"src": y})
    doc = m.to_dict()
    fused = check_against_cpu(doc)
    assert [op.optype for op in fused.ops if op.arch == "dnnl"] == [
        "reorder_dnnl", "weights_dnnl", "conv2d_dnnl", "reorder_dnnl"]
    assert [op.values["activation"] for op in fused.ops if op.optype == "conv2d_dnnl"] == [
        activation]
    plain = check_against_cpu(doc, combine=False)
    assert f"{activation}_dnnl" in [op.optype for op in plain.ops]


def activation_op(m, y, optype, params):
    return m.op(optype, {"src": y}, **params)


# The activation param of each fused op, and its fused params.
FUSED = {
    ("hard_swish", ()): ("hard_swish", {"hard_alpha": 1 / 6, "hard_beta": 0.5}),
    ("hard_swish", (("alpha", 0.3), ("beta", 0.2))): (
        "hard_swish", {"hard_alpha": 0.3, "hard_beta": 0.2}),
    ("hard_sigmoid", ()): ("hard_sigmoid", {"hard_alpha": 0.2, "hard_beta": 0.5}),
    ("hard_sigmoid", (("alpha", 1 / 6), ("beta", 0.5))): (
        "hard_sigmoid", {"hard_alpha": 1 / 6, "hard_beta": 0.5}),
    ("gelu", ()): ("gelu", {}),
    ("gelu", (("approximate", "tanh"),)): ("gelu_tanh", {}),
    ("swish", ()): ("swish", {"swish_alpha": 1.0}),
    ("swish", (("alpha", 1.702),)): ("swish", {"swish_alpha": 1.702}),
}


@pytest.mark.parametrize("optype,params", ACTIVATIONS, ids=str)
def test_conv_new_activation_fusion_on_and_off(optype, params):
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 6, 9, 9]), 6, 13, 3, stride=2, pad=1, scale=1.0)
    activation_op(m, y, optype, params)
    doc = m.to_dict()
    fused = check_against_cpu(doc)
    assert [op.optype for op in fused.ops if op.arch == "dnnl"] == [
        "reorder_dnnl", "weights_dnnl", "conv2d_dnnl", "reorder_dnnl"]
    (conv,) = [op for op in fused.ops if op.optype == "conv2d_dnnl"]
    activation, values = FUSED[optype, tuple(sorted(params.items()))]
    assert conv.values["activation"] == activation
    for name, value in values.items():
        assert conv.values[name] == pytest.approx(value), name
    plain = check_against_cpu(doc, combine=False)
    assert f"{optype}_dnnl" in [op.optype for op in plain.ops]


@pytest.mark.parametrize("optype,params", ACTIVATIONS, ids=str)
def test_matmul_new_activation_fusion_on_and_off(optype, params):
    m = ModelBuilder()
    y = m.op("matmul", {"src1": m.input("a", [5, 19]), "src2": m.weight("b", [19, 11]),
                        "bias": m.weight("c", [11])})
    activation_op(m, y, optype, params)
    doc = m.to_dict()
    fused = check_against_cpu(doc, optypes=["matmul_dnnl"])
    if optype == "gelu" and not dnnl_ops.matmul_post_ops_cheap():  # slower inside: apart
        assert [op.values["activation"] for op in fused.ops if op.optype == "matmul_dnnl"] \
            == ["none"] and "gelu_dnnl" in [op.optype for op in fused.ops]
        return
    assert [op.values["activation"] for op in fused.ops if op.optype == "matmul_dnnl"] == [
        FUSED[optype, tuple(sorted(params.items()))][0]]
    assert f"{optype}_dnnl" not in [op.optype for op in fused.ops]
    plain = check_against_cpu(doc, combine=False)
    assert f"{optype}_dnnl" in [op.optype for op in plain.ops]


def test_a_fused_gelu_computes_its_own_form():
    """The two forms differ by up to 5e-4 near |x| = 2: over values in [-3, 3] a fused
    gelu matches the cpu's of its form to 1e-5 and misses the other's."""
    outs = {}
    for approximate in ("none", "tanh"):
        m = ModelBuilder()
        y = m.conv(m.input("data", [1, 6, 9, 9]), 6, 13, 3, pad=1, scale=0.25)
        m.op("gelu", {"src": y}, approximate=approximate)
        doc = m.to_dict()
        inputs = random_inputs(doc)
        ctx = compiled(doc, "dnnl")
        assert [op.values["activation"] for op in ctx.ops if op.optype == "conv2d_dnnl"] == [
            "gelu" if approximate == "none" else "gelu_tanh"]
        ctx.load()
        (ours,) = run(ctx, inputs).values()
        (ref,) = run(compiled(doc, load=True), inputs).values()
        assert np.abs(ref).max() < 4
        assert rel_error(ours, ref) <= 1e-5
        outs[approximate] = ref
    assert rel_error(outs["none"], outs["tanh"]) > 1e-5


def test_residual_add_then_hard_swish_fuses_after_the_sum():
    doc = residual_block("hard_swish")
    ctx = check_against_cpu(doc)
    convs = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert [op.values["activation"] for op in convs] == ["relu", "relu", "hard_swish"]
    assert "residual" in convs[-1].tensors_in


def test_residual_add_fuses_as_a_sum_in_place():
    doc = residual_block()
    ctx = check_against_cpu(doc)
    convs = [op for op in ctx.ops if op.optype == "conv2d_dnnl"]
    assert [op.values["activation"] for op in convs] == ["relu", "relu", "relu"]
    last = convs[-1]
    assert "residual" in last.tensors_in
    dst = ctx.tensors[last.tensors_out["dst"]]
    assert dst.owner == last.tensors_in["residual"]
    assert dst.offset == ctx.tensors[dst.owner].offset  # written in place
    assert not any(op.optype.startswith("elew") or op.optype.startswith("relu")
                   for op in ctx.ops)
    plain = check_against_cpu(doc, combine=False)
    assert "elew_dnnl" in [op.optype for op in plain.ops]


def test_residual_read_later_is_not_overwritten():
    """add(conv(x), x) where the conv reads x itself: no in-place sum."""
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 4, 6, 6]), 4, 8, 3, pad=1))
    y = m.add(m.conv(x, 8, 8, 3, pad=1), x)
    m.relu(y)
    ctx = check_against_cpu(m.to_dict())
    assert "elew_dnnl" in [op.optype for op in ctx.ops]


def test_batchnorm_folds_into_the_convolution_with_the_weights():
    m = ModelBuilder()
    y = m.conv(m.input("data", [1, 5, 8, 8]), 5, 17, 3, pad=1)
    bn = m.batchnorm(y, 17)
    m.relu(bn)
    doc = m.to_dict()
    for op in doc["ops"]:
        if op["optype"] == "create":
            for p in op["params"]:
                if p["arg_name"] == "from_file":
                    p["value"] = True
            op["params"] = [p for p in op["params"] if p["arg_name"] != "ran"]
    ctx = Context()
    ctx.init(doc)
    rng = np.random.default_rng(3)
    weights = {n: rng.uniform(0.5, 1.5, e.shape).astype(np.float32)
               for n, e in ctx.tensors.items() if e.from_file}
    folded = check_against_cpu(doc, weights=weights)
    assert "batchnorm_dnnl" not in [op.optype for op in folded.ops]
    assert [op.optype for op in folded.ops if op.arch == "dnnl"] == [
        "reorder_dnnl", "weights_dnnl", "conv2d_dnnl", "reorder_dnnl"]
    plain = check_against_cpu(doc, combine=False, weights=weights)
    assert "batchnorm_dnnl" in [op.optype for op in plain.ops]


# The layout pass ---------------------------------------------------------------------------

def test_a_model_mixing_dnnl_and_cpu_ops_reorders_at_the_borders():
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 3, 8, 8]), 3, 17, 3, pad=1))
    s = m.op("erf", {"src": x})  # a cpu op
    y = m.conv(s, 17, 6, 1)
    m.add(y, m.conv(x, 17, 6, 1))
    ctx = check_against_cpu(m.to_dict(), combine=False)
    kinds = [(op.optype, op.params["to"].value if "to" in op.params else None)
             for op in ctx.ops if op.optype in ("reorder_dnnl", "erf_cpu")]
    assert kinds == [("reorder_dnnl", "dnnl"), ("reorder_dnnl", "plain"),
                     ("erf_cpu", None), ("reorder_dnnl", "dnnl"),
                     ("reorder_dnnl", "plain")]
    # x is read by erf (cpu) and a conv (dnnl): the conv reads the dnnl tensor.
    relu = next(op for op in ctx.ops if op.optype == "relu_dnnl")
    produced = relu.tensors_out["dst"]
    assert produced.endswith("_dnnl")
    readers = [op.optype for op in ctx.ops if produced in op.tensors_in.values()]
    assert readers == ["reorder_dnnl", "conv2d_dnnl"]


def test_a_reorder_that_would_copy_a_plain_tensor_is_left_out():
    """A matmul reads and writes LightNet's plain layout: between it and cpu ops
    (reshape before, a 3-D transpose after) no reorder copies anything."""
    m = ModelBuilder()
    x = m.op("reshape", {"src": m.input("data", [2, 3, 4])}, dims=[6, 4])
    y = m.op("matmul", {"src1": x, "src2": m.weight("w", [4, 5])})
    m.op("reshape", {"src": y}, dims=[2, 3, 5])
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl", "weights_dnnl"])
    assert "reorder_dnnl" not in [op.optype for op in ctx.ops]


def test_the_compiled_ir_round_trips_and_records_no_layouts(tmp_path):
    doc = residual_block(bn=True)
    inputs = random_inputs(doc)
    ctx = compiled(doc, "dnnl", load=True)
    ours = run(ctx, inputs)
    text = ctx.print()
    for fmt in ("acdb", "aBcd", "Acdb", "abcd"):
        assert fmt not in text  # layouts are the machine's oneDNN's, never in the IR
    again = Context()
    again.init(json.loads(text))
    assert [op.optype for op in again.ops] == [op.optype for op in ctx.ops]
    again.load()
    out = run(again, inputs)
    for name in ours:
        np.testing.assert_array_equal(out[name], ours[name])
    # Compiling it again changes nothing: the layout pass sees its reorders.
    again.unload()
    again.compile("dnnl")
    assert again.print() == text


def test_blocked_tensors_scratchpads_and_weights_are_planned_in_the_arena():
    m = ModelBuilder()
    x = m.conv(m.input("data", [1, 17, 12, 12]), 17, 33, 3, pad=1)
    m.conv(x, 33, 17, 5, pad=2)
    ctx = compiled(m.to_dict(), "dnnl")
    ctx.plan()
    report = ctx.mem[next(iter(ctx.mem))]
    arena = report.arena
    blocks = []
    for op in ctx.ops:
        for name in op.tensors_out.values():
            entry = ctx.tensors[name]
            if entry.owner is None:
                assert entry.offset is not None
                assert entry.offset + entry.stored_nbytes <= arena
                blocks.append(entry)
    weights = [ctx.tensors[op.tensors_out["dst"]] for op in ctx.ops
               if op.optype == "weights_dnnl"]
    assert len(weights) == 2 and all(w.static and w.layout.nbytes for w in weights)
    assert all(w.layout.nbytes >= w.nbytes for w in weights)
    # The memory limit counts them: a limit just below the plan refuses it.
    with pytest.raises(LightNetError, match="more than the limit"):
        compiled(m.to_dict(), "dnnl", memory_limit=report.needed - 1).plan()
    ctx.load()
    for w in weights:  # reordered once, at load: not zeros
        assert np.any(ctx.arrays[w.name])


def test_an_ir_with_a_plain_weight_read_by_a_dnnl_op_is_refused_at_load():
    m = ModelBuilder()
    x = m.input("data", [1, 3, 5, 5])
    wt = m.weight("w", [4, 3, 3, 3])
    b = m.weight("b", [4])
    m.op("conv2d_dnnl", {"src": x, "weight": wt, "bias": b}, size=[3, 3])
    doc = m.to_dict()
    for op in doc["ops"]:  # a compiled IR: cpu ops make the input and the weights
        if op["optype"] in ("input", "create"):
            op["optype"] += "_cpu"
    ctx = Context()
    ctx.init(doc)
    with pytest.raises(LightNetError, match=r"conv2d_dnnl.*reads \['weight'\] in a layout of "
                                            "its own, but they are plain"):
        ctx.load()


def linear_layer(m, x, rows, cin, cout, bias_shape=(None,), activation=None, reshape_to=None):
    """A linear layer as exporters write it for [1, rows, cin]: a 2-D matmul of the
    flattened rows, a reshape back, a bias add, an activation."""
    flat = m.op("reshape", {"src": x}, dims=[rows, cin])
    y = m.op("matmul", {"src1": flat, "src2": m.weight("w", [cin, cout], -0.3, 0.3)})
    y = m.op("reshape", {"src": y}, dims=reshape_to or [1, rows, cout])
    if bias_shape is not None:
        shape = [cout] if bias_shape == (None,) else list(bias_shape)
        y = m.op("elew", {"src1": y, "src2": m.weight("b", shape, -1, 1)}, elew_op="TL_SUM")
    if activation is not None:
        y = m.op(activation, {"src": y})
    return y


@pytest.mark.parametrize("activation", [None, "gelu", "relu"])
def test_a_linear_layers_bias_and_activation_fuse_into_the_matmul(activation):
    m = ModelBuilder()
    linear_layer(m, m.input("x", [1, 7, 12]), 7, 12, 20, activation=activation)
    doc = m.to_dict()
    ctx = check_against_cpu(doc, optypes=["matmul_dnnl"])
    optypes = [op.optype for op in ctx.ops]
    # A gelu stays apart where oneDNN's matmul applies it slower (matmul_post_ops_cheap).
    fused = activation if activation != "gelu" or dnnl_ops.matmul_post_ops_cheap() else None
    assert "elew_dnnl" not in optypes and f"{fused}_dnnl" not in optypes, optypes
    (mm,) = [op for op in ctx.ops if op.optype == "matmul_dnnl"]
    assert mm.tensors_in.get("bias") == "b1" and mm.values["activation"] == (fused or "none")
    # The last op is the reshape back, writing the model's output.
    assert ctx.ops[-1].optype == "reshape_cpu"
    unfused = compiled(doc, "dnnl", combine=False)
    assert "elew_dnnl" in [op.optype for op in unfused.ops]


@pytest.mark.parametrize("case", ["last axis changes", "bias of two dims", "read twice"])
def test_a_bias_the_matmul_cannot_take_stays_an_add(case):
    m = ModelBuilder()
    x = m.input("x", [1, 6, 12])
    if case == "last axis changes":
        y = linear_layer(m, x, 6, 12, 20, bias_shape=(10,), reshape_to=[1, 12, 10])
    elif case == "bias of two dims":
        y = linear_layer(m, x, 6, 12, 20, bias_shape=(6, 20))
    else:
        flat = m.op("reshape", {"src": x}, dims=[6, 12])
        y = m.op("matmul", {"src1": flat, "src2": m.weight("w", [12, 20], -0.3, 0.3)})
        m.op("relu", {"src": y})  # the matmul's output is read twice
        y = m.op("elew", {"src1": y, "src2": m.weight("b", [20], -1, 1)}, elew_op="TL_SUM")
    ctx = check_against_cpu(m.to_dict(), optypes=["matmul_dnnl"])
    assert "elew_dnnl" in [op.optype for op in ctx.ops]
    assert not any("bias" in op.tensors_in for op in ctx.ops if op.optype == "matmul_dnnl")


def test_an_op_may_overwrite_a_residual_added_in_place_before():
    """A chain of residual blocks: the second block's convolution may add into the
    first's output, itself held in the memory of the residual the first added into."""
    m = ModelBuilder()
    x = m.input("x", (1, 8, 5, 5))
    t = m.conv(x, 8, 8, 1)
    for _ in range(2):  # each block: two convolutions of t, added to t
        t = m.op("elew", {"src1": m.conv(m.conv(t, 8, 8, 1), 8, 8, 1), "src2": t},
                 elew_op="TL_SUM")
    m.conv(t, 8, 8, 1)
    ctx = compiled(m.to_dict(), "dnnl", weights={})
    fused = [op for op in ctx.ops if op.optype == "conv2d_dnnl" and "residual" in op.tensors_in]
    assert len(fused) == 2, [op.optype for op in ctx.ops]
    second = ctx.tensors[fused[1].tensors_in["residual"]]
    assert second.owner == fused[0].tensors_in["residual"]  # held in the first's residual
    feeds = {x: np.random.default_rng(5).standard_normal((1, 8, 5, 5)).astype(np.float32)}
    want = run(compiled(m.to_dict(), load=True), feeds)
    got = run(compiled(m.to_dict(), "dnnl", load=True), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)
