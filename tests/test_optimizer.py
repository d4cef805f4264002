"""The cpu optimizer rules (descriptions/optimizers/cpu.yaml): each fusion keeps
the model's outputs (to 1e-5 relative, against the same model lowered without
combiners and, for a residual block, against numpy) and lowers the op count."""

import numpy as np
import pytest

from lightnet import Context
from tests.helpers import assert_outputs_close, compiled
from tests.irbuild import ModelBuilder, squeezenet

RNG = np.random.default_rng(7)


def run_both(model, feeds):
    """Outputs and op counts (creates and inputs aside) with and without combiners."""
    results = []
    for combine in (False, True):
        ctx = compiled(model, combine=combine, load=True)
        weights = {n: ctx.get_data(n) for n, e in ctx.tensors.items() if e.static}
        for name, value in feeds.items():
            ctx.set_data(name, value)
        ctx.run()
        for name, value in weights.items():  # nothing overwrites a weight
            np.testing.assert_array_equal(ctx.get_data(name), value, err_msg=name)
        count = sum(op.optype not in ("create_cpu", "input_cpu") for op in ctx.ops)
        results.append(({n: ctx.get_data(n) for n in ctx.outputs}, count, ctx))
    (plain, n_plain, _), (fused, n_fused, ctx) = results
    assert_outputs_close(fused, plain)
    return n_plain, n_fused, ctx


def image(m, shape=(1, 4, 9, 9)):
    x = m.input("x", shape)
    return x, {"x": RNG.standard_normal(shape).astype(np.float32)}


def optypes(ctx):
    return [op.optype for op in ctx.ops if op.optype not in ("create_cpu", "input_cpu")]


def test_conv_batchnorm_relu_is_one_op():
    m = ModelBuilder()
    x, feeds = image(m)
    m.relu(m.batchnorm(m.conv(x, 4, 6, 3, pad=1), 6))
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert (n_plain, n_fused) == (3, 1)
    op = ctx.ops[-1]
    assert op.optype == "conv2d_cpu" and op.values["activation"] == "relu"
    assert "bn_scale" in op.tensors_in


def test_residual_block_matches_numpy():
    """conv-bn-relu-conv-bn + x -> relu: two ops after fusion, and the numbers
    agree with a numpy implementation of the unfused block."""
    m = ModelBuilder()
    x, feeds = image(m, (1, 4, 6, 6))
    y = m.relu(m.batchnorm(m.conv(x, 4, 4, 3, pad=1), 4))
    y = m.batchnorm(m.conv(y, 4, 4, 3, pad=1), 4)
    m.relu(m.add(y, x))
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert (n_plain, n_fused) == (7, 2)
    assert ctx.ops[-1].values["activation"] == "relu" and "residual" in ctx.ops[-1].tensors_in

    w = {n: ctx.get_data(n) for n, e in ctx.tensors.items() if e.static}

    def conv(v, wn, bn):
        k = w[wn]
        p = np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, k.shape[0], 6, 6))
        for o in range(k.shape[0]):
            for i in range(6):
                for j in range(6):
                    out[0, o, i, j] = (p[0, :, i:i + 3, j:j + 3] * k[o]).sum() + w[bn][o]
        return out

    def bn(v, i):
        s, o, mu, var = (w[f"bn_{k}{i}"][None, :, None, None]
                         for k in ("scale", "offset", "mean", "var"))
        return (v - mu) / np.sqrt(var + 1e-5) * s + o

    xv = feeds["x"].astype(np.float64)
    ref = np.maximum(bn(conv(np.maximum(bn(conv(xv, "w1", "b1"), 1), 0), "w2", "b2"), 2) + xv, 0)
    np.testing.assert_allclose(ctx.get_data(ctx.outputs[0]), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act, params", [
    ("relu", {}), ("sigmoid", {}), ("tanh", {}),
    ("lrelu", {"negslope": 0.2}), ("lrelu", {"negslope": 3.0}),
    ("clip", {"min": -0.3, "max": 0.4}),
])
@pytest.mark.parametrize("producer", ["conv", "matmul"])
def test_activation_fuses(producer, act, params):
    m = ModelBuilder()
    if producer == "conv":
        x, feeds = image(m)
        y = m.conv(x, 4, 5, 3)
    else:
        x = m.input("x", (3, 8))
        feeds = {"x": RNG.standard_normal((3, 8)).astype(np.float32)}
        y = m.op("matmul", {"src1": x, "src2": m.weight("w", [8, 5]), "bias": m.weight("b", [5])})
    m.op(act, {"src": y}, **params)
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert (n_plain, n_fused) == (2, 1)
    assert ctx.ops[-1].values["activation"] == act


@pytest.mark.parametrize("trans_b", [False, True])
def test_matmul_batchnorm_relu(trans_b):
    m = ModelBuilder()
    x = m.input("x", (4, 6))
    w = m.weight("w", [5, 6] if trans_b else [6, 5])
    y = m.op("matmul", {"src1": x, "src2": w, "bias": m.weight("b", [5])},
             transB=trans_b, alpha=0.5, beta=2.0)
    m.relu(m.batchnorm(y, 5))
    feeds = {"x": RNG.standard_normal((4, 6)).astype(np.float32)}
    assert run_both(m.to_dict(), feeds)[:2] == (3, 1)


def test_no_fusion_when_the_output_is_read_twice():
    m = ModelBuilder()
    x, feeds = image(m)
    y = m.conv(x, 4, 4, 3, pad=1)
    m.add(m.relu(y), y)
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert n_fused == n_plain == 3


def test_no_batchnorm_folding_into_non_static_weights():
    m = ModelBuilder()
    x, feeds = image(m)
    w = m.input("w", (4, 4, 3, 3))
    y = m.op("conv2d", {"src": x, "weight": w, "bias": m.weight("b", [4])}, size=[3, 3])
    m.batchnorm(y, 4)
    feeds["w"] = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    assert run_both(m.to_dict(), feeds)[:2] == (2, 2)


def test_layout_rules():
    m = ModelBuilder()
    x = m.input("x", (2, 3, 4))
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}
    y = m.relu(x)
    y = m.op("forward", {"src": y})                      # dropped: relu writes it
    y = m.op("reshape", {"src": y}, dims=[6, 4])
    y = m.op("reshape", {"src": y}, dims=[4, -1])        # two reshapes: one
    y = m.op("transpose", {"src": y}, axes=[1, 0])
    y = m.op("transpose", {"src": y}, axes=[1, 0])       # cancels: a forward, dropped
    y = m.op("transpose", {"src": m.op("reshape", {"src": y}, dims=[2, 3, 4])}, axes=[2, 0, 1])
    m.op("transpose", {"src": y}, axes=[0, 2, 1])        # composed into one
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert optypes(ctx) == ["relu_cpu", "reshape_cpu", "transpose_cpu"]
    out = ctx.get_data(ctx.outputs[0])
    ref = np.maximum(feeds["x"], 0).reshape(2, 3, 4).transpose(2, 0, 1).transpose(0, 2, 1)
    np.testing.assert_array_equal(out, ref)


def test_concat_inputs_are_written_in_place():
    m = ModelBuilder()
    x, feeds = image(m, (1, 4, 5, 5))
    s = m.relu(m.conv(x, 4, 2, 1))
    e1 = m.relu(m.conv(s, 2, 3, 1))
    e3 = m.relu(m.conv(s, 2, 3, 3, pad=1))
    out = m.concat([e1, e3])
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert n_fused == 4
    producers = [op for op in ctx.ops if op.optype == "conv2d_cpu"][1:]
    for op in producers:
        assert ctx.tensors[op.tensors_out["dst"]].owner == out
        assert np.shares_memory(ctx.arrays[op.tensors_out["dst"]], ctx.arrays[out])


def test_squeezenet_memory_plan_is_near_the_lower_bound():
    m = ModelBuilder()
    x = m.input("x", (1, 3, 64, 64))
    squeezenet(m, x, classes=10, width=0.25)
    feeds = {"x": RNG.uniform(0, 1, (1, 3, 64, 64)).astype(np.float32)}
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert n_fused < n_plain
    report = ctx.mem[next(iter(ctx.mem))]
    assert report.arena <= 1.10 * report.lower_bound


def test_depthwise_convolution_gets_its_kernel_and_fusions():
    m = ModelBuilder()
    x, feeds = image(m, (1, 6, 8, 8))
    y = m.relu(m.batchnorm(m.conv(x, 6, 6, 3, stride=2, pad=1, group=6), 6))
    m.conv(y, 6, 6, 3, pad=1, group=3)  # grouped, not depthwise
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert optypes(ctx) == ["depthwise_conv2d_cpu", "conv2d_cpu"]
    assert (n_plain, n_fused) == (4, 2)
    # the dedicated kernel agrees with the general one
    general = Context()
    general.init(m.to_dict())
    general.compile("cpu", combine=False)
    for op in general.ops:
        if op.optype == "depthwise_conv2d_cpu":
            from lightnet.archs.registry import get_proto
            general.replace_ops(general.ops.index(op), 1,
                                [op.copy_as(get_proto("conv2d_cpu"))])
    general.plan()
    general.load()
    general.set_data("x", feeds["x"])
    general.run()
    np.testing.assert_allclose(ctx.get_data(ctx.outputs[0]),
                               general.get_data(general.outputs[0]), rtol=1e-5, atol=1e-5)


def bottleneck_net(m, x, c):
    """A ResNet-style stack: 1x1 / 3x3 / 1x1 bottlenecks with batchnorms and
    residual adds, then a stride-2 stage."""
    for cin, mid, stride in ((c, c // 4, 1), (c, c // 4, 1), (c, c // 2, 2)):
        y = m.relu(m.batchnorm(m.conv(x, cin, mid, 1), mid))
        y = m.relu(m.batchnorm(m.conv(y, mid, mid, 3, stride=stride, pad=1), mid))
        cout = c if stride == 1 else 2 * c
        y = m.batchnorm(m.conv(y, mid, cout, 1), cout)
        short = x if stride == 1 else m.conv(x, cin, cout, 1, stride=2)
        x = m.relu(m.add(y, short))
    return x


def inverted_residual_net(m, x, c):
    """A MobileNet v2-style stack: expand 1x1, depthwise 3x3, project 1x1."""
    for stride in (1, 1, 2, 1):
        y = m.relu(m.conv(x, c, 4 * c, 1))
        y = m.relu(m.conv(y, 4 * c, 4 * c, 3, stride=stride, pad=1, group=4 * c))
        y = m.conv(y, 4 * c, c, 1)
        x = m.add(y, x) if stride == 1 else y
    return x


@pytest.mark.parametrize("net", [bottleneck_net, inverted_residual_net])
def test_memory_plan_is_near_the_lower_bound(net):
    m = ModelBuilder()
    x = m.input("x", (1, 16, 32, 32))
    net(m, x, 16)
    feeds = {"x": RNG.standard_normal((1, 16, 32, 32)).astype(np.float32)}
    n_plain, n_fused, ctx = run_both(m.to_dict(), feeds)
    assert n_fused < n_plain
    report = ctx.mem[next(iter(ctx.mem))]
    assert report.arena <= 1.10 * report.lower_bound
