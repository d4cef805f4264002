"""The characteristic blocks of MobileNetV3, EfficientNet, ConvNeXt, ViT and Swin, built
with onnx.helper the way PyTorch exports them (opset 17, seeded weights), imported
and run by LightNet and compared with ONNX Runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import LightNetError, Session  # noqa: E402
from lightnet.frontends.onnx import convert, save_weights  # noqa: E402
from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402
from tests.helpers import bench_models  # noqa: E402

OPSET = 17


class Block:
    """Nodes and seeded initializers of one graph; each method returns its output's name."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array, prefix="c") -> str:
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, scale=None) -> str:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        scale = 1 / math.sqrt(fan_in) if scale is None else scale
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def scalar(self, value) -> str:
        return self.const(np.array(value, np.float32))

    def ints(self, *values) -> str:
        return self.const(np.array(values, np.int64), "i")

    def node(self, op_type, *inputs, outputs=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=outs[0], **attrs))
        return outs[0] if outputs == 1 else outs

    # Layers as PyTorch exports them ---------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True):
        ins = [x, self.weight(cout, cin // group, k, k)]
        if bias:
            ins.append(self.weight(cout, scale=0.1))
        return self.node("Conv", *ins, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[k // 2] * 4, group=group)

    def bn(self, x, c):
        r = self.rng
        return self.node(
            "BatchNormalization", x,
            self.const(r.uniform(0.5, 1.5, c).astype(np.float32)),
            self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)),
            self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)),
            self.const(r.uniform(0.5, 1.5, c).astype(np.float32)), epsilon=1e-5)

    def linear(self, x, cin, cout):
        """torch.nn.Linear on a 3-D tensor: MatMul by the transposed weight, Add the bias."""
        return self.node("Add", self.node("MatMul", x, self.weight(cin, cout)),
                         self.weight(cout, scale=0.1))

    def silu(self, x):
        return self.node("Mul", x, self.node("Sigmoid", x))

    def gelu(self, x):
        """nn.GELU() at opset < 20: x * 0.5 * (1 + erf(x / sqrt(2)))... as torch writes it."""
        erf = self.node("Erf", self.node("Div", x, self.scalar(math.sqrt(2))))
        return self.node("Mul", self.node("Mul", x, self.node("Add", erf, self.scalar(1.0))),
                         self.scalar(0.5))

    def layernorm(self, x, c, axis=-1, eps=1e-5):
        r = self.rng
        return self.node("LayerNormalization", x,
                         self.const(r.uniform(0.5, 1.5, c).astype(np.float32)),
                         self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)),
                         axis=axis, epsilon=eps)

    def layernorm_decomposed(self, x, c, eps=1e-5):
        """What exporters wrote before LayerNormalization existed (opset < 17)."""
        r = self.rng
        mean = self.node("ReduceMean", x, axes=[-1])
        d = self.node("Sub", x, mean)
        var = self.node("ReduceMean", self.node("Pow", d, self.scalar(2.0)), axes=[-1])
        y = self.node("Div", d, self.node("Sqrt", self.node("Add", var, self.scalar(eps))))
        y = self.node("Mul", y, self.const(r.uniform(0.5, 1.5, c).astype(np.float32)))
        return self.node("Add", y, self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)))

    def attention(self, x, tokens, dim, heads, bias=None):
        """timm's Attention: one qkv Linear, heads split by reshape/transpose and picked
        with Gather, softmax(q k^T * scale [+ bias]) v, heads merged, a proj Linear."""
        hd = dim // heads
        qkv = self.linear(x, dim, 3 * dim)
        qkv = self.node("Reshape", qkv, self.ints(-1, tokens, 3, heads, hd))
        qkv = self.node("Transpose", qkv, perm=[2, 0, 3, 1, 4])
        q, k, v = (self.node("Gather", qkv, self.const(np.array(i, np.int64)), axis=0)
                   for i in range(3))
        q = self.node("Mul", q, self.scalar(hd ** -0.5))
        attn = self.node("MatMul", q, self.node("Transpose", k, perm=[0, 1, 3, 2]))
        if bias is not None:
            attn = bias(attn)
        attn = self.node("Softmax", attn, axis=-1)
        y = self.node("Transpose", self.node("MatMul", attn, v), perm=[0, 2, 1, 3])
        y = self.node("Reshape", y, self.ints(-1, tokens, dim))
        return self.linear(y, dim, dim)

    def model(self, x_shape, out, opset=OPSET):
        graph = helper.make_graph(
            self.nodes, "block",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset < 20 else 9
        onnx.shape_inference.infer_shapes(m, strict_mode=True)  # a well-formed graph
        return m


def mobilenetv3_block(hardswish_op=True, seed=1):
    """An inverted residual with squeeze-excite: 1x1 expand + bn + hard swish, 5x5
    depthwise + bn + hard swish, SE (pool, 1x1 + relu, 1x1 + hard sigmoid, scale),
    1x1 project + bn, residual. Without `hardswish_op`, hard swish is written
    x * HardSigmoid(x), as torch exports it below opset 14."""
    b = Block(seed)
    c, e = 16, 64

    def hswish(x):
        if hardswish_op:
            return b.node("HardSwish", x)
        return b.node("Mul", x, b.node("HardSigmoid", x, alpha=1 / 6, beta=0.5))

    y = hswish(b.bn(b.conv("x", c, e, 1, bias=False), e))
    y = hswish(b.bn(b.conv(y, e, e, 5, group=e, bias=False), e))
    s = b.node("GlobalAveragePool", y)
    s = b.node("Relu", b.conv(s, e, e // 4, 1))
    s = b.node("HardSigmoid", b.conv(s, e // 4, e, 1), alpha=1 / 6, beta=0.5)
    y = b.node("Mul", y, s)
    y = b.bn(b.conv(y, e, c, 1, bias=False), c)
    return b.model((1, c, 14, 14), b.node("Add", y, "x"), opset=OPSET if hardswish_op else 13)


def efficientnet_block(seed=2):
    """MBConv: 1x1 expand + bn + SiLU, 3x3 depthwise + bn + SiLU, SE with SiLU and a
    sigmoid gate, 1x1 project + bn, residual (SiLU as torch exports it: x * Sigmoid(x))."""
    b = Block(seed)
    c, e = 24, 96
    y = b.silu(b.bn(b.conv("x", c, e, 1, bias=False), e))
    y = b.silu(b.bn(b.conv(y, e, e, 3, group=e, bias=False), e))
    s = b.node("GlobalAveragePool", y)
    s = b.silu(b.conv(s, e, c // 4, 1))
    s = b.node("Sigmoid", b.conv(s, c // 4, e, 1))
    y = b.bn(b.conv(b.node("Mul", y, s), e, c, 1, bias=False), c)
    return b.model((1, c, 12, 12), b.node("Add", y, "x"))


def convnext_block(seed=3):
    """7x7 depthwise conv, permute to channels-last, LayerNormalization, Linear 4x,
    GELU, Linear back, layer scale, permute back, residual."""
    b = Block(seed)
    c = 32
    y = b.conv("x", c, c, 7, group=c)
    y = b.node("Transpose", y, perm=[0, 2, 3, 1])
    y = b.layernorm(y, c, eps=1e-6)
    y = b.linear(b.gelu(b.linear(y, c, 4 * c)), 4 * c, c)
    y = b.node("Mul", y, b.const(b.rng.uniform(0.1, 1.0, c).astype(np.float32)))
    y = b.node("Transpose", y, perm=[0, 3, 1, 2])
    return b.model((1, c, 14, 14), b.node("Add", y, "x"))


def vit_block(decomposed_layernorm=False, seed=4, tokens=17, dim=64, heads=4):
    """A pre-norm ViT encoder block: x + attn(ln1(x)), then + mlp(ln2(.)), the MLP
    Linear 4x, GELU, Linear back."""
    b = Block(seed)
    norm = (lambda x: b.layernorm_decomposed(x, dim)) if decomposed_layernorm else (
        lambda x: b.layernorm(x, dim, eps=1e-6))
    y = b.node("Add", "x", b.attention(norm("x"), tokens, dim, heads))
    mlp = b.linear(b.gelu(b.linear(norm(y), dim, 4 * dim)), 4 * dim, dim)
    return b.model((1, tokens, dim), b.node("Add", y, mlp),
                   opset=13 if decomposed_layernorm else OPSET)


def relative_position_index(window: int) -> np.ndarray:
    """Swin's index of the relative position of every pair of a window's tokens into
    the (2 window - 1)^2 row bias table."""
    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij"))
    flat = coords.reshape(2, -1)
    rel = (flat[:, :, None] - flat[:, None, :]).transpose(1, 2, 0) + window - 1
    return (rel[..., 0] * (2 * window - 1) + rel[..., 1]).astype(np.int64)


def window_bias(b, windows, window, heads):
    """Swin's attention bias: the relative-position bias, Gather(table, constant index)
    -> [N, N, heads] -> [heads, N, N], added to every window's logits [B * windows,
    heads, N, N] with a shifted-window mask [windows, N, N]; returns a function of the
    logits for Block.attention."""
    n = window * window
    table = b.weight((2 * window - 1) ** 2, heads, scale=0.5)
    index = b.const(relative_position_index(window).reshape(-1), "index")
    mask = np.where(b.rng.random((windows, n, n)) < 0.2, -100.0, 0.0).astype(np.float32)
    mask_name = b.const(mask.reshape(1, windows, 1, n, n), "mask")

    def bias(attn):
        rel = b.node("Gather", table, index, axis=0)
        rel = b.node("Transpose", b.node("Reshape", rel, b.ints(n, n, heads)), perm=[2, 0, 1])
        attn = b.node("Add", attn, b.node("Unsqueeze", rel, b.ints(0)))
        attn = b.node("Reshape", attn, b.ints(-1, windows, heads, n, n))
        attn = b.node("Add", attn, mask_name)
        return b.node("Reshape", attn, b.ints(-1, heads, n, n))

    return bias


def swin_window_attention(seed=5, windows=4, window=4, dim=32, heads=2):
    """Swin's WindowAttention on [windows, tokens, dim] with window_bias."""
    b = Block(seed)
    n = window * window
    bias = window_bias(b, windows, window, heads)
    return b.model((windows, n, dim), b.attention("x", n, dim, heads, bias=bias))


def swin_block(seed=7, size=8, window=4, dim=32, heads=2):
    """A Swin Transformer block on [B, size * size, dim] tokens: layernorm, window
    partition (Reshape to 6-D, Transpose, Reshape: B * windows rows), window attention
    with window_bias, window reverse, residual, layernorm, GELU MLP, residual. B is the
    only dim a batch changes."""
    b = Block(seed)
    n, side = window * window, size // window
    bias = window_bias(b, side * side, window, heads)
    y = b.node("Reshape", b.layernorm("x", dim), b.ints(-1, side, window, side, window, dim))
    y = b.node("Reshape", b.node("Transpose", y, perm=[0, 1, 3, 2, 4, 5]), b.ints(-1, n, dim))
    y = b.node("Reshape", b.attention(y, n, dim, heads, bias=bias),
               b.ints(-1, side, side, window, window, dim))
    y = b.node("Reshape", b.node("Transpose", y, perm=[0, 1, 3, 2, 4, 5]),
               b.ints(-1, size * size, dim))
    x = b.node("Add", "x", y)
    mlp = b.linear(b.gelu(b.linear(b.layernorm(x, dim), dim, 2 * dim)), 2 * dim, dim)
    return b.model((1, size * size, dim), b.node("Add", x, mlp))


def einsum_attention(seed=6, tokens=10, dim=32, heads=4):
    """Attention whose products are Einsums (as MaxViT and many exports write them)."""
    b = Block(seed)
    hd = dim // heads
    qkv = b.node("Reshape", b.linear("x", dim, 3 * dim), b.ints(1, tokens, 3, heads, hd))
    q, k, v = b.node("Split", qkv, b.ints(1, 1, 1), axis=2, outputs=3)
    q, k, v = (b.node("Squeeze", t, b.ints(2)) for t in (q, k, v))  # [b, n, h, d]
    logits = b.node("Einsum", q, k, equation="bqhd,bkhd->bhqk")
    attn = b.node("Softmax", b.node("Mul", logits, b.scalar(hd ** -0.5)), axis=-1)
    y = b.node("Einsum", attn, v, equation="bhqk,bkhd->bqhd")
    y = b.node("Reshape", y, b.ints(1, tokens, dim))
    return b.model((1, tokens, dim), b.linear(y, dim, dim))


def run_both(m, x, tmp_path):
    """LightNet's and ONNX Runtime's outputs for input x; the imported IR."""
    (want,) = run_ort(m, {"x": x}).values()
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    (value,) = got.values()
    return value.reshape(want.shape), want, ir


def computed_optypes(ir):
    return sorted({op["optype"] for op in ir["ops"]} - {"input", "create", "forward", "reshape"})


def feed(m, seed=0):
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("hardswish_op", [True, False])
def test_mobilenetv3_inverted_residual(hardswish_op, tmp_path):
    m = mobilenetv3_block(hardswish_op)
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ops = computed_optypes(ir)
    assert "hard_swish" in ops and "hard_sigmoid" in ops


def test_efficientnet_mbconv(tmp_path):
    m = efficientnet_block()
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ops = computed_optypes(ir)
    assert "swish" in ops and "sigmoid" in ops  # the SE gate stays a sigmoid


def test_convnext_block(tmp_path):
    m = convnext_block()
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ops = computed_optypes(ir)
    assert "layernorm" in ops and "gelu" in ops and "erf" not in ops


@pytest.mark.parametrize("decomposed_layernorm", [False, True])
def test_vit_encoder_block(decomposed_layernorm, tmp_path):
    m = vit_block(decomposed_layernorm)
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ops = computed_optypes(ir)
    assert "layernorm" in ops and "gelu" in ops and "softmax" in ops
    assert "reduce" not in ops  # the decomposed form is fused too


def test_swin_window_attention(tmp_path):
    m = swin_window_attention()
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_swin_block(tmp_path):
    m = swin_block()
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ops = computed_optypes(ir)
    assert "layernorm" in ops and "gelu" in ops and "gather" in ops


def test_einsum_attention(tmp_path):
    m = einsum_attention()
    got, want, ir = run_both(m, feed(m), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert "einsum" not in computed_optypes(ir) and "matmul" in computed_optypes(ir)


def test_relative_position_index_is_swins():
    """The index of a 2x2 window, written out by hand from Swin's definition."""
    assert relative_position_index(2).tolist() == [
        [4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]


# --- single operators against ONNX Runtime ------------------------------------------------

def node_model(nodes, inputs, inits=(), opset=OPSET, output="y", elem=TensorProto.FLOAT):
    """A graph of `nodes` with float inputs `inputs` ((name, shape) pairs)."""
    graph = helper.make_graph(
        nodes, "ops", [helper.make_tensor_value_info(n, elem, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(output, elem, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 20 else 9
    return m


def check_ops(m, tmp_path, rtol=1e-5, atol=1e-6, dtype=np.float32, seed=0):
    """Feed every input random values; LightNet must match ONNX Runtime. The IR's ops."""
    rng = np.random.default_rng(seed)
    feeds = {i.name: (rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
                      * 2).astype(dtype) for i in m.graph.input
             if i.name not in {t.name for t in m.graph.initializer}}
    (want,) = run_ort(m, feeds).values()
    got, ir = run_lightnet(m, feeds, tmp_path)
    (got,) = got.values()
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=rtol, atol=atol)
    return computed_optypes(ir)


def test_erf(tmp_path):
    m = node_model([helper.make_node("Erf", ["x"], ["y"])], [("x", (3, 50))])
    assert check_ops(m, tmp_path) == ["erf"]


def test_erf_double_against_math_erf(tmp_path):
    """ONNX Runtime has no double Erf; math.erf is the reference."""
    m = node_model([helper.make_node("Erf", ["x"], ["y"])], [("x", (40,))],
                   elem=TensorProto.DOUBLE)
    x = np.linspace(-5, 5, 40)
    ir, _ = convert(m)
    (got,) = Session(ir).run({"x": x}).values()
    np.testing.assert_allclose(got, [math.erf(v) for v in x], rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset_20(approximate, tmp_path):
    m = node_model([helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)],
                   [("x", (4, 40))], opset=20)
    assert check_ops(m, tmp_path) == ["gelu"]


@pytest.mark.parametrize("attrs", [{}, {"alpha": 1 / 6}, {"alpha": 0.3, "beta": 0.2}])
def test_hard_sigmoid(attrs, tmp_path):
    m = node_model([helper.make_node("HardSigmoid", ["x"], ["y"], **attrs)], [("x", (5, 20))])
    assert check_ops(m, tmp_path) == ["hard_sigmoid"]


def test_hard_swish(tmp_path):
    m = node_model([helper.make_node("HardSwish", ["x"], ["y"])], [("x", (2, 3, 8, 8))])
    assert check_ops(m, tmp_path) == ["hard_swish"]


@pytest.mark.parametrize("shape, axis, bias, scale_shape", [
    ((2, 7, 16), -1, True, (16,)),
    ((2, 7, 16), 1, True, (7, 16)),
    ((2, 7, 16), -2, False, (7, 16)),
    ((3, 10), 0, True, (3, 10)),
])
def test_layer_normalization(shape, axis, bias, scale_shape, tmp_path):
    rng = np.random.default_rng(7)
    inits = {"scale": rng.standard_normal(scale_shape).astype(np.float32)}
    if bias:
        inits["bias"] = rng.standard_normal(scale_shape).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "scale"] + (["bias"] if bias else []),
                            ["y"], axis=axis, epsilon=1e-3)
    m = node_model([node], [("x", shape)], inits)
    assert check_ops(m, tmp_path, rtol=1e-4, atol=1e-5) == ["layernorm"]


def test_layer_normalization_statistics_outputs_are_refused():
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean"], axis=-1)
    m = node_model([node], [("x", (2, 4))], {"scale": np.ones(4, np.float32)})
    m.graph.output.append(helper.make_tensor_value_info("mean", TensorProto.FLOAT, None))
    with pytest.raises(LightNetError, match=r"LayerNormalization .*the Mean and InvStdDev "
                                            r"outputs"):
        convert(m)


@pytest.mark.parametrize("equation, shape1, shape2, optypes", [
    ("bhqd,bhkd->bhqk", (1, 2, 5, 4), (1, 2, 6, 4), ["matmul"]),  # K^T taken as it is
    ("bqhd,bkhd->bhqk", (2, 5, 3, 4), (2, 6, 3, 4), ["matmul", "transpose"]),
    ("ij,jk->ik", (3, 4), (4, 5), ["matmul"]),
    ("ij,jk->ki", (3, 4), (4, 5), ["matmul"]),  # the operands swapped
    ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5), ["matmul"]),
    ("bhwc,hkc->bhwk", (2, 3, 4, 5), (3, 6, 5), ["matmul", "transpose"]),
    # XLNet's: attention scores, context, a projection by weights [h, n, d] and back
    ("ibnd,jbnd->bnij", (5, 1, 3, 4), (6, 1, 3, 4), ["matmul", "transpose"]),
    ("ijbn,jbnd->ibnd", (5, 6, 1, 3), (6, 1, 3, 4), ["matmul", "transpose"]),
    ("ibh,hnd->ibnd", (5, 2, 8), (8, 3, 4), ["matmul"]),
    ("ibnd,hnd->ibh", (5, 2, 3, 4), (8, 3, 4), ["matmul"]),
    ("ij->ji", (3, 4), None, ["transpose"]),
    ("ij->ij", (3, 4), None, []),  # the operand itself
])
def test_einsum(equation, shape1, shape2, optypes, tmp_path):
    """An einsum is imported as transposes, reshapes and one matmul."""
    inputs = [("a", shape1)] + ([("b", shape2)] if shape2 else [])
    node = helper.make_node("Einsum", [n for n, _ in inputs], ["y"], equation=equation)
    m = node_model([node], inputs)
    assert check_ops(m, tmp_path, rtol=1e-5, atol=1e-5) == optypes


def test_einsum_that_is_no_matrix_product_is_refused_with_its_reason():
    node = helper.make_node("Einsum", ["a"], ["y"], equation="ii->i")
    with pytest.raises(LightNetError, match=r"Einsum .*index 'i' appears twice in an operand"):
        convert(node_model([node], [("a", (3, 3))]))


@pytest.mark.parametrize("shape1, shape2", [
    ((2, 3, 4, 5), (2, 3, 5, 6)),
    ((2, 1, 4, 5), (3, 5, 6)),
    ((300, 2, 3), (300, 3, 2)),  # a batch of 300 matrices: one op
    ((4, 5), (3, 5, 2)),
])
def test_batched_matmul_is_one_op(shape1, shape2, tmp_path):
    m = node_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", shape1), ("b", shape2)])
    assert check_ops(m, tmp_path) == ["matmul"]


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, 2], 0), ([-1, 1], 1), (None, 0)])
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_over_any_axes(op, axes, keepdims, opset, tmp_path):
    inputs, inits, attrs = ["x"], {}, {"keepdims": keepdims}
    if axes is not None:
        if opset >= 18 or (op == "ReduceSum"):
            inputs.append("axes")
            inits["axes"] = np.array(axes, np.int64)
        else:
            attrs["axes"] = axes
    m = node_model([helper.make_node(op, inputs, ["y"], **attrs)], [("x", (3, 4, 5))], inits,
                   opset=opset)
    assert check_ops(m, tmp_path, rtol=1e-5, atol=1e-5) == ["reduce"]


@pytest.mark.parametrize("axis, indices", [(0, [2, -1, 0]), (1, [[0, 3], [3, 1]]),
                                           (2, 1), (-1, [4, 4, 0, 2])])
def test_gather_with_constant_indices(axis, indices, tmp_path):
    m = node_model([helper.make_node("Gather", ["x", "idx"], ["y"], axis=axis)],
                   [("x", (3, 4, 5))], {"idx": np.array(indices, np.int64)})
    assert check_ops(m, tmp_path) == ["gather"]


def test_squeeze_unsqueeze_flatten_split(tmp_path):
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax0"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax0"], ["s"]),
        helper.make_node("Split", ["s"], ["p1", "p2", "p3"], axis=1, num_outputs=3),
        helper.make_node("Concat", ["p3", "p1", "p2"], ["c"], axis=1),
        helper.make_node("Flatten", ["c"], ["y"], axis=2),
    ]
    m = node_model(nodes, [("x", (2, 6, 3, 2))], {"ax0": np.array([0], np.int64)}, opset=18)
    assert check_ops(m, tmp_path) == ["concat", "slice"]


@pytest.mark.parametrize("op, func", [("Sqrt", "sqrt"), ("Reciprocal", "reciprocal"),
                                      ("Exp", "exp"), ("Neg", "neg")])
def test_unary_operators(op, func, tmp_path):
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node(op, ["a"], ["y"])]
    if op in ("Exp", "Neg"):
        nodes = [helper.make_node(op, ["x"], ["y"])]
    m = node_model(nodes, [("x", (4, 9))])
    assert func in [op["params"][0]["value"] for op in convert(m)[0]["ops"]
                    if op["optype"] == "unary"]
    check_ops(m, tmp_path)


@pytest.mark.parametrize("op", ["Sub", "Div", "Pow"])
def test_binary_operators(op, tmp_path):
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node(op, ["a", "b"], ["y"])]
    m = node_model(nodes, [("x", (3, 4))], {"b": np.array([0.5, 1.5, 2.0, 3.0], np.float32)})
    assert "elew" in check_ops(m, tmp_path)


# --- what the importer fuses ------------------------------------------------------------

def gelu_nodes(form, x="x", out="y", half=0.5, root2=math.sqrt(2)):
    """GELU written out in the association orders exporters use."""
    scale = (helper.make_node("Div", [x, "root2"], ["s"]) if form != "mul-inverse" else
             helper.make_node("Mul", ["inv_root2", x], ["s"]))
    nodes = [scale, helper.make_node("Erf", ["s"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["p"])]
    if form in ("x-first", "mul-inverse"):  # (x * (1 + erf)) * 0.5: torch
        nodes += [helper.make_node("Mul", [x, "p"], ["t"]),
                  helper.make_node("Mul", ["t", "half"], [out])]
    elif form == "half-first":  # (x * 0.5) * (1 + erf): Hugging Face
        nodes += [helper.make_node("Mul", [x, "half"], ["t"]),
                  helper.make_node("Mul", ["t", "p"], [out])]
    else:  # x * ((1 + erf) * 0.5)
        nodes += [helper.make_node("Mul", ["p", "half"], ["t"]),
                  helper.make_node("Mul", [x, "t"], [out])]
    inits = {"root2": np.array(root2, np.float32), "one": np.array(1, np.float32),
             "half": np.array(half, np.float32),
             "inv_root2": np.array(1 / root2, np.float32)}
    return nodes, inits


@pytest.mark.parametrize("form", ["x-first", "half-first", "sum-first", "mul-inverse"])
def test_gelu_forms_fuse(form, tmp_path):
    nodes, inits = gelu_nodes(form)
    m = node_model(nodes, [("x", (3, 40))], inits)
    assert check_ops(m, tmp_path) == ["gelu"]


def test_what_only_looks_like_gelu_is_left_alone(tmp_path):
    nodes, inits = gelu_nodes("x-first", half=0.6)
    assert "gelu" not in check_ops(node_model(nodes, [("x", (3, 40))], inits), tmp_path)
    nodes, inits = gelu_nodes("x-first")  # the erf is also a graph output: it must stay
    m = node_model(nodes, [("x", (3, 40))], inits)
    m.graph.output.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, None))
    ir, _ = convert(m)
    assert "erf" in computed_optypes(ir) and "gelu" not in computed_optypes(ir)


def gelu_tanh_nodes(cubic=0.044715, swapped=False):
    """GPT-2's GELU as transformers exports it: 0.5 * x * (1 + tanh(sqrt(2 / pi) *
    (x + 0.044715 * x ** 3))); `swapped`: every commutative pair the other way."""
    def pair(a, b):
        return [b, a] if swapped else [a, b]

    nodes = [helper.make_node("Mul", pair("x", "half"), ["h"]),
             helper.make_node("Pow", ["x", "three"], ["c"]),
             helper.make_node("Mul", pair("c", "k"), ["ck"]),
             helper.make_node("Add", pair("x", "ck"), ["a"]),
             helper.make_node("Mul", pair("a", "root"), ["r"]),
             helper.make_node("Tanh", ["r"], ["t"]),
             helper.make_node("Add", pair("t", "one"), ["p"]),
             helper.make_node("Mul", pair("h", "p"), ["y"])]
    inits = {"half": np.array(0.5, np.float32), "three": np.array(3, np.float32),
             "k": np.array(cubic, np.float32), "one": np.array(1, np.float32),
             "root": np.array(math.sqrt(2 / math.pi), np.float32)}
    return nodes, inits


@pytest.mark.parametrize("swapped", [False, True])
def test_gelu_tanh_form_fuses(swapped, tmp_path):
    nodes, inits = gelu_tanh_nodes(swapped=swapped)
    m = node_model(nodes, [("x", (3, 40))], inits)
    assert check_ops(m, tmp_path) == ["gelu"]
    assert [p["value"] for op in convert(m)[0]["ops"] if op["optype"] == "gelu"
            for p in op["params"] if p["arg_name"] == "approximate"] == ["tanh"]
    nodes, inits = gelu_tanh_nodes(cubic=0.05)  # not GELU: left as it is
    assert "gelu" not in check_ops(node_model(nodes, [("x", (3, 40))], inits), tmp_path)


@pytest.mark.parametrize("order", [["x", "s"], ["s", "x"]])
def test_silu_fuses_to_swish(order, tmp_path):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", order, ["y"])]
    assert check_ops(node_model(nodes, [("x", (2, 30))]), tmp_path) == ["swish"]


def test_x_times_hard_sigmoid_fuses_to_hard_swish(tmp_path):
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["h", "x"], ["y"])]
    assert check_ops(node_model(nodes, [("x", (2, 30))]), tmp_path) == ["hard_swish"]
    nodes[0] = helper.make_node("HardSigmoid", ["x"], ["h"])  # alpha 0.2: not hard swish
    assert check_ops(node_model(nodes, [("x", (2, 30))]), tmp_path) == ["elew", "hard_sigmoid"]


def layernorm_nodes(square="Pow", affine=True, axes_input=False):
    reduce = ({"inputs": ["axes"]} if axes_input else {"axes": [-1]})

    def mean(x, out):
        extra = reduce.get("inputs", [])
        attrs = {} if axes_input else {"axes": reduce["axes"]}
        return helper.make_node("ReduceMean", [x] + extra, [out], **attrs)

    nodes = [mean("x", "m"), helper.make_node("Sub", ["x", "m"], ["d"]),
             (helper.make_node("Pow", ["d", "two"], ["q"]) if square == "Pow" else
              helper.make_node("Mul", ["d", "d"], ["q"])),
             mean("q", "v"), helper.make_node("Add", ["v", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n" if affine else "y"])]
    if affine:
        nodes += [helper.make_node("Mul", ["n", "gamma"], ["g"]),
                  helper.make_node("Add", ["g", "beta"], ["y"])]
    rng = np.random.default_rng(3)
    inits = {"two": np.array(2, np.float32), "eps": np.array(1e-5, np.float32),
             "gamma": rng.standard_normal(8).astype(np.float32),
             "beta": rng.standard_normal(8).astype(np.float32),
             "axes": np.array([-1], np.int64)}
    return nodes, inits


@pytest.mark.parametrize("square, affine, axes_input", [
    ("Pow", True, False), ("Mul", True, False), ("Pow", False, False), ("Pow", True, True)])
def test_written_out_layer_norm_fuses(square, affine, axes_input, tmp_path):
    nodes, inits = layernorm_nodes(square, affine, axes_input)
    m = node_model(nodes, [("x", (2, 5, 8))], inits, opset=18 if axes_input else 13)
    assert check_ops(m, tmp_path, rtol=1e-4, atol=1e-5) == ["layernorm"]


# --- whole networks (the benchmark's) ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenetv3", "vit_s16"])
def test_whole_networks(name, tmp_path):
    m = bench_models().MODELS[name](np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"data": x})
    ir, weights = convert(m)
    save_weights(tmp_path / "w.npz", weights)
    (got,) = Session(ir, datafile=tmp_path / "w.npz").run({"data": x}).values()
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4,
                               atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("build", [mobilenetv3_block, efficientnet_block, convnext_block,
                                   vit_block, swin_block],
                         ids=["mobilenetv3", "efficientnet", "convnext", "vit", "swin"])
def test_blocks_take_batches_1_3_and_8_through_one_session(build, tmp_path):
    """A symbolic batch dim: one Session runs every batch size, as ONNX Runtime does."""
    m = build()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ir, weights = convert(m)
    save_weights(tmp_path / "w.npz", weights)
    ours = Session(ir, datafile=tmp_path / "w.npz")
    rest = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
    for batch in (1, 3, 8):
        x = np.random.default_rng(batch).standard_normal([batch] + rest).astype(np.float32)
        (want,) = session.run(None, {"x": x})
        (got,) = ours.run({"x": x}).values()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
