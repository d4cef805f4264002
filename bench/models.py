"""The benchmark's networks, each built once as an ONNX graph (onnx.helper) with
seeded random weights as initializers. Both engines run that same graph: ONNX
Runtime directly, LightNet through its ONNX importer.

Every builder takes a numpy Generator and returns a ModelProto with one input
"data" [1, 3, 224, 224] float32 and one output [1, 1000].
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

OPSET = 13


class Graph:
    """A tiny ONNX graph builder: every method adds nodes and returns the output name."""

    def __init__(self, rng: np.random.Generator, name: str, opset: int = OPSET):
        self.rng = rng
        self.name = name
        self.opset = opset
        self.nodes: list = []
        self.inits: list = []
        self.counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        return f"{prefix}{self.counts[prefix]}"

    def const(self, prefix: str, array) -> str:
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def uniform(self, prefix: str, shape, low, high) -> str:
        return self.const(prefix, self.rng.uniform(low, high, shape).astype(np.float32))

    def node(self, op_type: str, inputs, prefix: str | None = None, **attrs) -> str:
        out = self.fresh(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    # Layers -------------------------------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, bias=True) -> str:
        """He-uniform weights (activations stay in range through deep stacks)."""
        pad = k // 2 if pad is None else pad
        bound = math.sqrt(6.0 / (cin // group * k * k))
        ins = [x, self.uniform("w", [cout, cin // group, k, k], -bound, bound)]
        if bias:
            ins.append(self.uniform("b", [cout], -0.1, 0.1))
        return self.node("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, x, c, gamma=(0.5, 1.0)) -> str:
        ins = [x, self.uniform("bn_scale", [c], *gamma), self.uniform("bn_bias", [c], -0.1, 0.1),
               self.uniform("bn_mean", [c], -0.1, 0.1), self.uniform("bn_var", [c], 0.5, 1.5)]
        return self.node("BatchNormalization", ins, "bn", epsilon=1e-5)

    def relu(self, x) -> str:
        return self.node("Relu", [x])

    def relu6(self, x) -> str:
        lo = self.const("c", np.array(0, np.float32))
        hi = self.const("c", np.array(6, np.float32))
        return self.node("Clip", [x, lo, hi], "relu6")

    def hardswish(self, x) -> str:
        return self.node("HardSwish", [x])

    def hardsigmoid(self, x) -> str:
        """torch's Hardsigmoid: relu6(x + 3) / 6."""
        return self.node("HardSigmoid", [x], alpha=1 / 6, beta=0.5)

    def gelu(self, x) -> str:
        """nn.GELU() as torch exports it below opset 20: x * (1 + erf(x / sqrt 2)) * 0.5."""
        root2 = self.const("c", np.array(math.sqrt(2), np.float32))
        one = self.const("c", np.array(1, np.float32))
        half = self.const("c", np.array(0.5, np.float32))
        y = self.node("Add", [self.node("Erf", [self.node("Div", [x, root2])]), one])
        return self.node("Mul", [self.node("Mul", [x, y]), half], "gelu")

    def layernorm(self, x, c, eps=1e-6) -> str:
        ins = [x, self.uniform("ln_scale", [c], 0.5, 1.5), self.uniform("ln_bias", [c], -0.1, 0.1)]
        return self.node("LayerNormalization", ins, "ln", axis=-1, epsilon=eps)

    def linear(self, x, cin, cout) -> str:
        """nn.Linear on [B, T, cin]: MatMul by the transposed weight, then Add the bias."""
        bound = math.sqrt(6.0 / cin)
        y = self.node("MatMul", [x, self.uniform("lin_w", [cin, cout], -bound, bound)])
        return self.node("Add", [y, self.uniform("lin_b", [cout], -0.1, 0.1)])

    def attention(self, x, tokens, dim, heads) -> str:
        """timm's Attention: qkv Linear, [B, T, 3, H, D] permuted to [3, B, H, T, D] and
        picked by Gather, softmax(q k^T / sqrt D) v, heads merged, proj Linear."""
        hd = dim // heads
        qkv = self.linear(x, dim, 3 * dim)
        qkv = self.node("Reshape", [qkv, self.const("shape", np.array([1, tokens, 3, heads, hd],
                                                                     np.int64))])
        qkv = self.node("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
        q, k, v = (self.node("Gather", [qkv, self.const("i", np.array(i, np.int64))], axis=0)
                   for i in range(3))
        q = self.node("Mul", [q, self.const("c", np.array(hd ** -0.5, np.float32))])
        a = self.node("MatMul", [q, self.node("Transpose", [k], perm=[0, 1, 3, 2])])
        a = self.node("Softmax", [a], axis=-1)
        y = self.node("Transpose", [self.node("MatMul", [a, v])], perm=[0, 2, 1, 3])
        y = self.node("Reshape", [y, self.const("shape", np.array([1, tokens, dim], np.int64))])
        return self.linear(y, dim, dim)

    def maxpool(self, x, k, stride, pad=0) -> str:
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4)

    def avgpool(self, x, k, stride, pad=0) -> str:
        return self.node("AveragePool", [x], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4)

    def add(self, a, b) -> str:
        return self.node("Add", [a, b])

    def concat(self, xs) -> str:
        return self.node("Concat", xs, axis=1)

    def gap(self, x) -> str:
        return self.node("GlobalAveragePool", [x], "gap")

    def flatten(self, x) -> str:
        return self.node("Flatten", [x], axis=1)

    def fc(self, x, cin, cout) -> str:
        bound = math.sqrt(6.0 / cin)
        w = self.uniform("fc_w", [cout, cin], -bound, bound)
        b = self.uniform("fc_b", [cout], -0.1, 0.1)
        return self.node("Gemm", [x, w, b], "fc", transB=1)

    def shuffle(self, x, c, hw, groups) -> str:
        """ShuffleNet's channel shuffle: reshape [g, c/g] -> transpose -> reshape."""
        s1 = self.const("shape", np.array([1, groups, c // groups, hw, hw], np.int64))
        s2 = self.const("shape", np.array([1, c, hw, hw], np.int64))
        y = self.node("Reshape", [x, s1])
        y = self.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return self.node("Reshape", [y, s2])

    def model(self, out: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="lightnet-bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


# The networks -------------------------------------------------------------------------

VGG11_CFG = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


def vgg11(rng, width: float = 0.5, hidden: int = 1024) -> onnx.ModelProto:
    """VGG-11 (configuration A): 8 3x3 convs + relu, 5 max pools, 3 fully connected
    layers. Narrowed: conv widths x `width` and `hidden` units in the classifier
    (the original, width 1 and 4096, has 133M parameters and 15.2 GFLOPs)."""
    g = Graph(rng, "vgg11")
    x, c = "data", 3
    for v in VGG11_CFG:
        if v == "M":
            x = g.maxpool(x, 2, 2)
        else:
            w = int(v * width)
            x, c = g.relu(g.conv(x, c, w, 3)), w
    x = g.flatten(x)
    x = g.relu(g.fc(x, c * 7 * 7, hidden))
    x = g.relu(g.fc(x, hidden, hidden))
    return g.model(g.fc(x, hidden, 1000))


def resnet50(rng) -> onnx.ModelProto:
    """ResNet-50 (v1.5: stride on the 3x3): conv-bn-relu stem, max pool, bottleneck
    stages [3, 4, 6, 3], global average pool, fully connected."""
    g = Graph(rng, "resnet50")
    x = g.relu(g.bn(g.conv("data", 3, 64, 7, stride=2, bias=False), 64))
    x = g.maxpool(x, 3, 2, pad=1)
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            cout = width * 4
            # the shortcut first, so the last conv + bn sit right before the Add
            if i == 0:
                short = g.bn(g.conv(x, cin, cout, 1, stride=stride, bias=False), cout)
            else:
                short = x
            y = g.relu(g.bn(g.conv(x, cin, width, 1, bias=False), width))
            y = g.relu(g.bn(g.conv(y, width, width, 3, stride=stride, bias=False), width))
            y = g.bn(g.conv(y, width, cout, 1, bias=False), cout, gamma=(0.2, 0.5))
            x, cin = g.relu(g.add(y, short)), cout
    return g.model(g.fc(g.flatten(g.gap(x)), cin, 1000))


def squeezenet11(rng) -> onnx.ModelProto:
    """SqueezeNet 1.1, the same network as tests.irbuild.squeezenet: a 3x3 stride-2
    stem, eight fire modules, max pools, a 1x1 conv classifier, global average pool."""
    g = Graph(rng, "squeezenet11")

    def fire(x, cin, squeeze, expand):
        s = g.relu(g.conv(x, cin, squeeze, 1))
        e1 = g.relu(g.conv(s, squeeze, expand, 1))
        e3 = g.relu(g.conv(s, squeeze, expand, 3, pad=1))
        return g.concat([e1, e3]), 2 * expand

    x = g.relu(g.conv("data", 3, 64, 3, stride=2, pad=0))
    x = g.maxpool(x, 3, 2)
    c = 64
    for i, (sq, ex) in enumerate([(16, 64), (16, 64), (32, 128), (32, 128),
                                  (48, 192), (48, 192), (64, 256), (64, 256)]):
        x, c = fire(x, c, sq, ex)
        if i in (1, 3):
            x = g.maxpool(x, 3, 2)
    x = g.relu(g.conv(x, c, 1000, 1))
    return g.model(g.flatten(g.gap(x)))


def mobilenetv2(rng) -> onnx.ModelProto:
    """MobileNet v2 (width 1.0): inverted residual blocks of 1x1 expand, 3x3 depthwise
    (group = channels) and 1x1 project convs, each with batchnorm, relu6 (Clip)."""
    g = Graph(rng, "mobilenetv2")
    x = g.relu6(g.bn(g.conv("data", 3, 32, 3, stride=2, bias=False), 32))
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = g.relu6(g.bn(g.conv(y, cin, hidden, 1, bias=False), hidden))
            y = g.relu6(g.bn(g.conv(y, hidden, hidden, 3, stride=stride, group=hidden,
                                    bias=False), hidden))
            y = g.bn(g.conv(y, hidden, c, 1, bias=False), c, gamma=(0.2, 0.5))
            x = g.add(y, x) if stride == 1 and cin == c else y
            cin = c
    x = g.relu6(g.bn(g.conv(x, cin, 1280, 1, bias=False), 1280))
    return g.model(g.fc(g.flatten(g.gap(x)), 1280, 1000))


def shufflenet(rng, groups: int = 3) -> onnx.ModelProto:
    """ShuffleNet v1 (g = 3, 1x): units of grouped 1x1 conv, channel shuffle, 3x3
    depthwise conv, grouped 1x1 conv; stride-2 units concatenate a 3x3 average-pooled
    shortcut, the others add the input."""
    g = Graph(rng, "shufflenet")
    x = g.relu(g.bn(g.conv("data", 3, 24, 3, stride=2, bias=False), 24))
    x = g.maxpool(x, 3, 2, pad=1)
    cin, hw = 24, 56
    for stage, (cout, repeats) in enumerate([(240, 4), (480, 8), (960, 4)]):
        for i in range(repeats):
            stride = 2 if i == 0 else 1
            branch = cout - cin if stride == 2 else cout
            mid = cout // 4
            g1 = 1 if stage == 0 and i == 0 else groups  # the first unit sees 24 channels
            y = g.relu(g.bn(g.conv(x, cin, mid, 1, group=g1, bias=False), mid))
            y = g.shuffle(y, mid, hw, groups)
            hw_out = hw // stride
            y = g.bn(g.conv(y, mid, mid, 3, stride=stride, group=mid, bias=False), mid)
            y = g.bn(g.conv(y, mid, branch, 1, group=groups, bias=False), branch,
                     gamma=(0.2, 0.5))
            if stride == 2:
                x = g.relu(g.concat([g.avgpool(x, 3, 2, pad=1), y]))
            else:
                x = g.relu(g.add(y, x))
            cin, hw = cout, hw_out
    return g.model(g.fc(g.flatten(g.gap(x)), cin, 1000))


# torchvision's MobileNet v3 Large: (kernel, expanded, out, squeeze-excite, hard swish, stride)
MOBILENETV3_LARGE = [
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
]


def mobilenetv3(rng) -> onnx.ModelProto:
    """MobileNet v3 Large (torchvision): inverted residuals with 3x3 or 5x5 depthwise
    convs, ReLU or HardSwish, squeeze-excite gated by HardSigmoid; a 1x1 conv to 960,
    pool, Linear 1280 + HardSwish, Linear 1000. Opset 17 (HardSwish is opset 14)."""
    g = Graph(rng, "mobilenetv3", opset=17)
    x = g.hardswish(g.bn(g.conv("data", 3, 16, 3, stride=2, bias=False), 16))
    cin = 16
    for k, exp, cout, se, hs, stride in MOBILENETV3_LARGE:
        act = g.hardswish if hs else g.relu
        y = x
        if exp != cin:
            y = act(g.bn(g.conv(y, cin, exp, 1, bias=False), exp))
        y = act(g.bn(g.conv(y, exp, exp, k, stride=stride, group=exp, bias=False), exp))
        if se:
            squeeze = max(8, (exp // 4 + 4) // 8 * 8)  # torchvision's _make_divisible(exp // 4, 8)
            squeeze += 8 if squeeze < 0.9 * (exp // 4) else 0
            s = g.relu(g.conv(g.gap(y), exp, squeeze, 1))
            y = g.node("Mul", [y, g.hardsigmoid(g.conv(s, squeeze, exp, 1))])
        y = g.bn(g.conv(y, exp, cout, 1, bias=False), cout, gamma=(0.2, 0.5))
        x = g.add(y, x) if stride == 1 and cin == cout else y
        cin = cout
    x = g.hardswish(g.bn(g.conv(x, cin, 960, 1, bias=False), 960))
    x = g.hardswish(g.fc(g.flatten(g.gap(x)), 960, 1280))
    return g.model(g.fc(x, 1280, 1000))


def vit_s16(rng, depth: int = 12, dim: int = 384, heads: int = 6) -> onnx.ModelProto:
    """ViT-S/16 (timm's vit_small_patch16_224): a 16x16 stride-16 conv patch embedding,
    a class token and position embedding, `depth` pre-norm encoder blocks (attention
    with `heads` heads, MLP 4x with GELU), a final LayerNormalization, the class
    token's Linear head. Opset 17 (LayerNormalization); GELU in its erf form."""
    g = Graph(rng, "vit_s16", opset=17)
    tokens = 14 * 14 + 1
    x = g.conv("data", 3, dim, 16, stride=16, pad=0)
    x = g.node("Reshape", [x, g.const("shape", np.array([1, dim, tokens - 1], np.int64))])
    x = g.node("Transpose", [x], perm=[0, 2, 1])
    x = g.node("Concat", [g.uniform("cls", [1, 1, dim], -0.1, 0.1), x], axis=1)
    x = g.add(x, g.uniform("pos", [1, tokens, dim], -0.1, 0.1))
    for _ in range(depth):
        x = g.add(x, g.attention(g.layernorm(x, dim), tokens, dim, heads))
        y = g.linear(g.gelu(g.linear(g.layernorm(x, dim), dim, 4 * dim)), 4 * dim, dim)
        x = g.add(x, y)
    x = g.layernorm(x, dim)
    x = g.node("Gather", [x, g.const("i", np.array(0, np.int64))], axis=1)
    return g.model(g.fc(x, dim, 1000))


MODELS = {
    "vgg11": vgg11,
    "resnet50": resnet50,
    "squeezenet1.1": squeezenet11,
    "mobilenetv2": mobilenetv2,
    "shufflenet": shufflenet,
    "mobilenetv3": mobilenetv3,
    "vit_s16": vit_s16,
}


def relu_chain(n: int = 1000, shape=(1, 16)) -> onnx.ModelProto:
    """n Relu nodes in a row on a tiny tensor: what one op costs besides its work."""
    nodes, x = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"r{i}"))
        x = f"r{i}"
    graph = helper.make_graph(nodes, "relu_chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(shape))])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m


def gemms(model: onnx.ModelProto) -> list[tuple[int, int, int, int]]:
    """The matrix products of every Conv, Gemm and MatMul as (batch, M, K, N): a
    convolution is weight [O/g, C/g*kh*kw] @ columns [C/g*kh*kw, OH*OW] for each of
    its g groups and N images (a depthwise conv: C matrix-vector products). Shapes
    from ONNX shape inference."""
    inferred = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    products = []
    for n in model.graph.node:
        if n.op_type == "Conv":
            out = shapes[n.output[0]]
            w = shapes[n.input[1]]
            group = next((at.i for at in n.attribute if at.name == "group"), 1)
            products.append((out[0] * group, w[0] // group, math.prod(w[1:]), math.prod(out[2:])))
        elif n.op_type in ("Gemm", "MatMul"):
            out = shapes[n.output[0]]
            a = shapes[n.input[0]]
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            k = a[-2] if trans_a else a[-1]
            products.append((math.prod(out[:-2]), out[-2], k, out[-1]))
    return products


def ir_gemms(ctx) -> list[tuple[int, int, int, int]]:
    """`gemms` of a model LightNet has initialized (`ctx`, a Context after init): its
    shapes are all known, where ONNX shape inference leaves the dims of an exporter's
    computed reshapes unknown (a transformer's every MatMul)."""
    products = []
    for op in ctx.ops:
        shape = {arg: ctx.tensors[name].shape
                 for arg, name in (*op.tensors_in.items(), *op.tensors_out.items())}
        if op.optype in ("conv2d", "conv3d"):  # (3-D: one more spatial axis of each)
            out, w, group = shape["dst"], shape["weight"], op.values["group"]
            products.append((out[0] * group, w[0] // group, math.prod(w[1:]),
                             math.prod(out[2:])))
        elif op.optype == "matmul":
            a, out = shape["src1"], shape["dst"]
            k = a[-2] if op.values["transA"] else a[-1]
            products.append((math.prod(out[:-2]), out[-2], k, out[-1]))
    return products


def gflops(products) -> float:
    """GFLOPs of matrix products as `gemms` lists them: 2 * multiply-accumulates."""
    return 2 * sum(math.prod(p) for p in products) / 1e9
