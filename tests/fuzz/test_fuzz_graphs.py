"""Differential fuzzing of random ONNX graphs shaped like real CNNs.

The hand-built models of test_fuzz_differential.py have channel counts of a few
and no channel surgery; real models (ShuffleNet, MobileNet v3, EfficientNet,
Caffe2 exports) split, slice and concatenate channels, shuffle them, gate them
(squeeze-excite), scale them by per-channel constants and run grouped
convolutions of odd group widths. On dnnl those tensors live in oneDNN's
blocked layouts (16 channels a block), so a channel count that is not a
multiple of 16 leaves a partial last block, a split or a concat cuts or joins
blocks, and an op the dnnl target keeps on the cpu forces reorders in the
middle of a chain: the places a layout bug shows.

So the graphs here are drawn from those patterns, on channel counts 1-70
(primes included), batch 1 or 2 and spatial sizes 1-17, as ONNX graphs
imported by LightNet's ONNX importer (as real models arrive, with its
fusions). Each graph runs in every configuration of ORACLE_PAIRS, which must
agree (the differential fuzzer's oracle), and cpu must agree with ONNX Runtime.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from fuzzutil import check, disagreement, fuzz_settings, input_data, slow_examples  # noqa: E402
from lightnet import LightNetError  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402

CI_GRAPHS = 30  # a few seconds
SLOW_GRAPHS = slow_examples(20000)
OPSET = 17
# The oracle's tolerance is relative to an output's largest magnitude: an output of a
# few elements may be a near cancellation (a mean times a weight plus a bias), its
# rounding far above 1e-4 of it. Of this many elements, one of them is not.
OUTPUT_SIZE = 16

# Channel counts: any from 1 to 70, often one real models have or a prime (ShuffleNet's
# 116 and 136 too, which split into 58 + 58 and grouped convs of 4 groups of 34).
channels = st.integers(1, 70) | st.sampled_from([1, 3, 7, 13, 16, 17, 24, 29, 32, 34, 58, 67,
                                                 116, 136])
ACTIVATIONS = ["Relu", "Clip", "Sigmoid", "LeakyRelu", "HardSwish", "HardSigmoid", "Tanh",
               "Neg", "Softmax"]


class Graph:
    """An ONNX graph being drawn: its nodes, its initializers (random values from a
    drawn seed: hypothesis draws the structure, numpy the numbers) and the shape of
    every tensor made so far."""

    def __init__(self, draw, shape):
        self.draw = draw
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        self.nodes, self.inits = [], []
        self.shapes = {"x": tuple(shape)}

    def node(self, op_type, inputs, shapes, **attrs):
        """Add a node making tensors of `shapes`; returns their names (one: the name)."""
        outs = [f"t{len(self.shapes) + i}" for i in range(len(shapes))]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"n{len(self.nodes)}",
                                           **attrs))
        self.shapes.update(zip(outs, map(tuple, shapes)))
        return outs[0] if len(outs) == 1 else outs

    def const(self, array, dtype=np.float32):
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype), name))
        return name

    def uniform(self, shape, low, high):
        return self.const(self.rng.uniform(low, high, shape))

    def model(self, outputs):
        def info(name):
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, self.shapes[name])

        graph = helper.make_graph(self.nodes, "fuzz", [info("x")], [info(o) for o in outputs],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 ir_version=8)


def _with(shape, c=None, hw=None):
    n, c0, *hw0 = shape
    return (n, c0 if c is None else c, *(hw0 if hw is None else hw))


def _out(size, k, stride, dilation, pad):
    return (size + pad - dilation * (k - 1) - 1) // stride + 1


# Blocks: each reads tensor x and returns a new tensor --------------------------------


def conv(g, x, cout=None, same=False, group=None):
    """A convolution (dense, grouped of any group width, depthwise; 1x1, 3x3 or 5x5,
    strides 1-2, dilation, padding), maybe a batchnorm, maybe an activation. `same`:
    stride 1 and the spatial size kept."""
    draw = g.draw
    n, c, h, w = g.shapes[x]
    if group is None:
        kind = draw(st.sampled_from(["dense", "grouped", "depthwise"]))
        divisors = [d for d in range(2, c + 1) if c % d == 0]
        group = {"dense": 1, "depthwise": c,
                 "grouped": draw(st.sampled_from(divisors)) if divisors else 1}[kind]
    if cout is None:
        cout = group * draw(st.integers(1, max(1, 70 // group)))
    k = draw(st.sampled_from([1, 3, 3, 5]))
    stride = 1 if same else draw(st.integers(1, 2))
    dilation = draw(st.integers(1, 2)) if k > 1 else 1
    span = dilation * (k - 1)
    if same:
        pads = [span // 2] * 4
    else:
        pads = [draw(st.integers(0, span)) for _ in range(4)]
        if _out(h, k, 1, dilation, pads[0] + pads[2]) < 1 or \
                _out(w, k, 1, dilation, pads[1] + pads[3]) < 1:
            pads = [span // 2] * 4
    oh = _out(h, k, stride, dilation, pads[0] + pads[2])
    ow = _out(w, k, stride, dilation, pads[1] + pads[3])
    bound = np.sqrt(6.0 / (c // group * k * k))
    inputs = [x, g.uniform([cout, c // group, k, k], -bound, bound)]
    if draw(st.booleans()):
        inputs.append(g.uniform([cout], -0.1, 0.1))
    y = g.node("Conv", inputs, [(n, cout, oh, ow)], group=group, kernel_shape=[k, k],
               strides=[stride, stride], dilations=[dilation, dilation], pads=pads)
    if draw(st.booleans()):
        stats = [g.uniform([cout], lo, hi) for lo, hi in
                 ((0.5, 1.5), (-0.2, 0.2), (-0.2, 0.2), (0.5, 1.5))]
        y = g.node("BatchNormalization", [y, *stats], [g.shapes[y]], epsilon=1e-5)
    return activation(g, y) if draw(st.booleans()) else y


def activation(g, x):
    """An element-wise op (the ones a convolution fuses among them), or a softmax over
    the channels."""
    kind = g.draw(st.sampled_from(ACTIVATIONS))
    if kind == "Clip":
        return g.node("Clip", [x, g.const(0.0), g.const(6.0)], [g.shapes[x]])
    if kind == "LeakyRelu":
        return g.node(kind, [x], [g.shapes[x]], alpha=0.1)
    if kind == "Softmax":
        return g.node(kind, [x], [g.shapes[x]], axis=1)
    return g.node(kind, [x], [g.shapes[x]])


def norm(g, x):
    """A batchnorm no convolution precedes (not folded), or an LRN of odd size."""
    c = g.shapes[x][1]
    if g.draw(st.booleans()):
        stats = [g.uniform([c], lo, hi) for lo, hi in
                 ((0.5, 1.5), (-0.2, 0.2), (-0.2, 0.2), (0.5, 1.5))]
        return g.node("BatchNormalization", [x, *stats], [g.shapes[x]], epsilon=1e-5)
    return g.node("LRN", [x], [g.shapes[x]], size=g.draw(st.sampled_from([1, 3, 5])),
                  alpha=1e-2, beta=0.75, bias=1.0)


def deconv(g, x):
    """A transposed convolution (dense or depthwise; kernel 1-4, stride 1-2, padding,
    output padding), as decoders upsample."""
    draw = g.draw
    n, c, h, w = g.shapes[x]
    group = draw(st.sampled_from([1, c]))
    cout = c if group == c else draw(channels)
    k, stride = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, k - 1)) for _ in range(4)]
    extra = [draw(st.integers(0, stride - 1)) for _ in range(2)]
    hw = [(s - 1) * stride - pads[a] - pads[a + 2] + k + extra[a] for a, s in enumerate((h, w))]
    if min(hw) < 1:
        pads, hw = [0] * 4, [(s - 1) * stride + k + e for s, e in zip((h, w), extra)]
    bound = np.sqrt(6.0 / (c // group * k * k))
    return g.node("ConvTranspose", [x, g.uniform([c, cout // group, k, k], -bound, bound)],
                  [(n, cout, *hw)], group=group, kernel_shape=[k, k], strides=[stride, stride],
                  pads=pads, output_padding=extra)


def pool(g, x):
    """Max or average pooling (ceil mode, padding counted or not), or a global one."""
    draw = g.draw
    kind = draw(st.sampled_from(["MaxPool", "AveragePool", "GlobalAveragePool",
                                 "GlobalMaxPool"]))
    shape = g.shapes[x]
    if kind.startswith("Global"):
        return g.node(kind, [x], [_with(shape, hw=(1, 1))])
    k, stride = draw(st.integers(2, 3)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, k - 1)) for _ in range(4)]
    for axis in (0, 1):  # the window must fit the padded input
        if shape[2 + axis] + pads[axis] + pads[axis + 2] < k:
            pads[axis] = pads[axis + 2] = k - 1

    def size(axis, ceil):
        span = shape[2 + axis] + pads[axis] + pads[axis + 2] - k
        return (-(-span // stride) if ceil else span // stride) + 1

    # Not where the last window would start in the end padding: ONNX Runtime drops it,
    # ONNX's shape inference (which the importer checks against) does not.
    ceil = draw(st.booleans()) and all(
        (size(a, True) - 1) * stride < shape[2 + a] + pads[a] for a in (0, 1))
    hw = [size(a, ceil) for a in (0, 1)]
    attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": pads,
             "ceil_mode": int(ceil)}
    if kind == "AveragePool":
        attrs["count_include_pad"] = draw(st.integers(0, 1))
    return g.node(kind, [x], [_with(shape, hw=hw)], **attrs)


def cut(g, x):
    """x cut along the channels into 2-4 parts (equal or not), by a Split or Slices."""
    draw = g.draw
    shape = g.shapes[x]
    c = shape[1]
    parts = draw(st.integers(2, min(4, c)))
    if draw(st.booleans()) and c % parts == 0:
        sizes = [c // parts] * parts
    else:
        ends = sorted(draw(st.lists(st.integers(1, c - 1), min_size=parts - 1,
                                    max_size=parts - 1, unique=True)))
        sizes = [b - a for a, b in zip([0, *ends], [*ends, c])]
    shapes = [_with(shape, c=s) for s in sizes]
    if draw(st.booleans()):
        return g.node("Split", [x, g.const(sizes, np.int64)], shapes, axis=1)
    starts = np.cumsum([0, *sizes[:-1]])
    return [g.node("Slice", [x, g.const([s], np.int64), g.const([s + n], np.int64),
                             g.const([1], np.int64)], [sh])
            for s, n, sh in zip(starts, sizes, shapes)]


def branch(g, x):
    """A shape-keeping op on x (what a part of a split goes through): nothing, a
    convolution, an activation, a per-channel constant or an op the dnnl target keeps on
    the cpu."""
    kind = g.draw(st.sampled_from(["none", "conv", "activation", "per_channel", "cpu"]))
    if kind == "conv":
        return conv(g, x, g.shapes[x][1], same=True)
    if kind == "none":
        return x
    if kind == "cpu":
        return cpu_op(g, x, same=True)
    return {"activation": activation, "per_channel": per_channel}[kind](g, x)


def concat(g, xs):
    shapes = [g.shapes[x] for x in xs]
    return g.node("Concat", xs, [_with(shapes[0], c=sum(s[1] for s in shapes))], axis=1)


def split_concat(g, x):
    """Split, a branch per part, and a concat of the parts (maybe reordered, maybe one
    dropped)."""
    if g.shapes[x][1] < 2:
        return activation(g, x)
    parts = [branch(g, p) for p in cut(g, x)]
    parts = g.draw(st.permutations(parts))
    if len(parts) > 2 and g.draw(st.booleans()):
        parts = parts[1:]
    return concat(g, parts)


def shuffle(g, x, groups=None):
    """A channel shuffle as exporters write it: reshape, transpose, reshape."""
    n, c, h, w = g.shapes[x]
    if groups is None:
        groups = g.draw(st.sampled_from([d for d in range(2, c + 1) if c % d == 0] or [1]))
    y = g.node("Reshape", [x, g.const([n, groups, c // groups, h, w], np.int64)],
               [(n, groups, c // groups, h, w)])
    y = g.node("Transpose", [y], [(n, c // groups, groups, h, w)], perm=[0, 2, 1, 3, 4])
    return g.node("Reshape", [y, g.const([n, c, h, w], np.int64)], [(n, c, h, w)])


def shufflenet_unit(g, x):
    """ShuffleNet v2's unit: split in two (halves, or near halves for an odd count), a
    1x1 conv, 3x3 depthwise, 1x1 conv branch on one part, concat, shuffle of 2 groups;
    or the downsampling unit, a branch of each kind on x with the depthwise stride 2."""
    c = g.shapes[x][1]
    if g.draw(st.booleans()) and c >= 2:
        half = c // 2
        a, b = g.node("Split", [x, g.const([half, c - half], np.int64)],
                      [_with(g.shapes[x], c=half), _with(g.shapes[x], c=c - half)], axis=1)
        y = concat(g, [a, shufflenet_branch(g, b, c - half, stride=1)])
    else:
        out = g.draw(channels)
        left = conv(g, depthwise_3x3(g, x, stride=2), out, same=True, group=1)
        y = concat(g, [left, shufflenet_branch(g, x, out, stride=2)])
    return shuffle(g, y, 2 if g.shapes[y][1] % 2 == 0 else None)


def shufflenet_branch(g, x, cout, stride):
    y = conv(g, x, cout, same=True, group=1)
    return conv(g, depthwise_3x3(g, y, stride), cout, same=True, group=1)


def depthwise_3x3(g, x, stride):
    n, c, h, w = g.shapes[x]
    return g.node("Conv", [x, g.uniform([c, 1, 3, 3], -0.5, 0.5)],
                  [(n, c, (h - 1) // stride + 1, (w - 1) // stride + 1)], group=c,
                  kernel_shape=[3, 3], strides=[stride, stride], pads=[1, 1, 1, 1])


def squeeze_excite(g, x):
    """A squeeze-excite gate: global average pool (or a ReduceMean), 1x1 conv, relu,
    1x1 conv, sigmoid (or hard sigmoid), times the feature map (either operand
    first)."""
    draw = g.draw
    n, c, h, w = g.shapes[x]
    if draw(st.booleans()):
        s = g.node("GlobalAveragePool", [x], [(n, c, 1, 1)])
    else:
        s = g.node("ReduceMean", [x], [(n, c, 1, 1)], axes=[2, 3], keepdims=1)
    r = draw(st.integers(1, max(1, c // 2)))
    s = g.node("Relu", [conv_1x1(g, s, r)], [(n, r, 1, 1)])
    s = conv_1x1(g, s, c)
    gate = g.node(draw(st.sampled_from(["Sigmoid", "HardSigmoid"])), [s], [(n, c, 1, 1)])
    operands = [x, gate] if draw(st.booleans()) else [gate, x]
    return g.node("Mul", operands, [(n, c, h, w)])


def conv_1x1(g, x, cout):
    c = g.shapes[x][1]
    bound = np.sqrt(6.0 / c)
    return g.node("Conv", [x, g.uniform([cout, c, 1, 1], -bound, bound),
                           g.uniform([cout], -0.1, 0.1)], [_with(g.shapes[x], c=cout)],
                  kernel_shape=[1, 1])


def per_channel(g, x):
    """x times, plus, minus or over a constant of one value per channel ([C, 1, 1] or
    [1, C, 1, 1]), as Caffe2-converted models scale and shift a convolution's output, or
    of one value, or of one per column ([W]: no channel constant, however many columns);
    either operand first, but never dividing by x."""
    draw = g.draw
    c, w = g.shapes[x][1], g.shapes[x][3]
    op = draw(st.sampled_from(["Mul", "Add", "Sub", "Div"]))
    shape = draw(st.sampled_from([[c, 1, 1], [1, c, 1, 1], [1], [w]]))
    if op in ("Mul", "Div"):
        k = g.const(g.rng.uniform(0.5, 1.5, shape) * g.rng.choice([-1, 1], shape))
    else:
        k = g.uniform(shape, -1, 1)
    operands = [k, x] if op != "Div" and draw(st.booleans()) else [x, k]
    return g.node(op, operands, [g.shapes[x]])


def cpu_op(g, x, same=False):
    """An op the dnnl target runs on the cpu (not in descriptions/optimizers/dnnl.yaml's
    expanders, or outside their conditions): a pad, a nearest upsampling, a power, an
    erf, an average pool counting padding in ceil mode, a constant minus x (src1
    broadcasting in a non-commutative op), or an activation between transposes to NHWC
    and back. `same`: one of those keeping the shape."""
    draw = g.draw
    n, c, h, w = shape = g.shapes[x]
    kind = draw(st.sampled_from(["Pow", "Erf", "Sub", "nhwc"] + (
        [] if same else ["Pad", "Resize", "AveragePool"])))
    if kind == "Pad":
        pads = [0, 0] + [draw(st.integers(0, 2)) for _ in range(2)] + [0, 0] + \
            [draw(st.integers(0, 2)) for _ in range(2)]
        return g.node("Pad", [x, g.const(pads, np.int64)],
                      [_with(shape, hw=[h + pads[2] + pads[6], w + pads[3] + pads[7]])])
    if kind == "Resize":
        return g.node("Resize", [x, "", g.const([1, 1, 2, 2])], [_with(shape, hw=[2 * h, 2 * w])],
                      mode="nearest")
    if kind == "Pow":
        return g.node("Pow", [x, g.const(2.0)], [shape])
    if kind == "AveragePool":
        out = [-(-(s - 1) // 2) + 1 for s in (h, w)]
        return g.node("AveragePool", [x], [_with(shape, hw=out)], kernel_shape=[3, 3],
                      strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    if kind == "Sub":
        return g.node("Sub", [g.uniform([1, c, 1, 1], -1, 1), x], [shape])
    if kind == "nhwc":
        y = g.node("Transpose", [x], [(n, h, w, c)], perm=[0, 2, 3, 1])
        y = activation(g, y)
        return g.node("Transpose", [y], [shape], perm=[0, 3, 1, 2])
    return g.node("Erf", [x], [shape])


def crop(g, x):
    """A Slice of rows or columns (of a 1x1 map: the whole of it)."""
    shape = g.shapes[x]
    axis = g.draw(st.sampled_from([a for a in (2, 3) if shape[a] > 1] or [3]))
    start = g.draw(st.integers(0, shape[axis] - 1))
    end = g.draw(st.integers(start + 1, shape[axis]))
    out = list(shape)
    out[axis] = end - start
    return g.node("Slice", [x, g.const([start], np.int64), g.const([end], np.int64),
                            g.const([axis], np.int64)], [out])


def merge(g, x):
    """x and a shape-keeping branch of it joined by a two-operand op (a residual add,
    mostly), in either order, maybe then a relu: a dnnl binary op over operands from
    any producer, or a convolution's fused sum."""
    y = branch(g, x)
    op = g.draw(st.sampled_from(["Add", "Add", "Mul", "Max", "Sub"]))
    y = g.node(op, g.draw(st.permutations([x, y])), [g.shapes[x]])
    return g.node("Relu", [y], [g.shapes[y]]) if g.draw(st.booleans()) else y


def concat_earlier(g, x):
    """x and an earlier tensor of its spatial size (maybe x itself) joined, in either
    order: a concat of tensors from any producer, dnnl or cpu."""
    same = [t for t, s in g.shapes.items() if len(s) == 4 and s[2:] == g.shapes[x][2:]]
    other = g.draw(st.sampled_from(sorted(same)))
    return concat(g, g.draw(st.permutations([x, other])))


def dense_block(g, x):
    """DenseNet's block: each layer (a batchnorm maybe, a convolution of a few new
    channels) reads the concat of x and every earlier layer's output, and the next
    concat takes those same maps and one more (the memory plan makes each concat the
    first part of the next)."""
    maps = [x]
    for _ in range(g.draw(st.integers(2, 4))):
        joined = concat(g, maps) if len(maps) > 1 else x
        if g.draw(st.booleans()):
            joined = norm(g, joined)
        maps.append(conv(g, joined, g.draw(st.integers(1, 20)), same=True, group=1))
    return concat(g, maps)


def part_conv(g, x):
    """A convolution of one part of a split (the other parts unread), or of any range of
    channels."""
    c = g.shapes[x][1]
    if c > 1 and g.draw(st.booleans()):
        return conv(g, g.draw(st.sampled_from(cut(g, x))))
    start = g.draw(st.integers(0, c - 1))
    end = g.draw(st.integers(start + 1, c))
    return conv(g, g.node("Slice", [x, g.const([start], np.int64), g.const([end], np.int64),
                                    g.const([1], np.int64)], [_with(g.shapes[x], c=end - start)]))


def head(g, x):
    """A classifier: flatten (after a global average pool, or of a small map), a linear
    layer (Gemm with its weight transposed, as exporters write it), maybe a softmax."""
    n = g.shapes[x][0]
    if g.draw(st.booleans()) or np.prod(g.shapes[x]) > 4096:
        x = g.node("GlobalAveragePool", [x], [_with(g.shapes[x], hw=(1, 1))])
    width = int(np.prod(g.shapes[x][1:]))
    flat = g.node("Flatten", [x], [(n, width)])
    k = g.draw(channels)
    bound = np.sqrt(6.0 / width)
    y = g.node("Gemm", [flat, g.uniform([k, width], -bound, bound), g.uniform([k], -0.1, 0.1)],
               [(n, k)], transB=1)
    return g.node("Softmax", [y], [(n, k)], axis=1) if g.draw(st.booleans()) else y


BLOCKS = [conv, pool, split_concat, shuffle, shufflenet_unit, squeeze_excite, per_channel,
          cpu_op, merge, concat_earlier, dense_block, activation, part_conv, norm, deconv,
          crop]


@st.composite
def graphs(draw):
    """A random graph of 1-6 blocks on an input [1-2, 1-70, 1-17, 1-17], maybe with a
    classifier head. Its outputs: the last tensor and maybe an earlier one (also read by
    later ops), each of at least OUTPUT_SIZE elements (else the latest such tensor)."""
    g = Graph(draw, (draw(st.integers(1, 2)), draw(channels), draw(st.integers(1, 17)),
                     draw(st.integers(1, 17))))
    x = "x"
    for _ in range(draw(st.integers(1, 6))):
        x = draw(st.sampled_from(BLOCKS))(g, x)
    if draw(st.booleans()):
        x = head(g, x)
    made = [t for t in g.shapes if t != "x" and np.prod(g.shapes[t]) >= OUTPUT_SIZE]
    assume(made)
    outputs = [x if x in made else made[-1]]
    if len(made) > 1 and draw(st.booleans()):
        outputs.append(draw(st.sampled_from([t for t in made if t != outputs[0]])))
    return g.model(outputs)


def check_graph(model):
    """The model's outputs agree in every configuration of ORACLE_PAIRS (or it is refused
    alike), and with ONNX Runtime's."""
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = input_data("x", np.dtype(np.float32), shape)
    try:
        doc, weights = convert(model)
    except LightNetError:
        return  # refused before any target sees it: alike in every configuration
    reference = check(doc, weights)
    if reference.outputs is None:
        return
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for name, want in zip(names, session.run(None, {"x": x})):
        problem = disagreement(reference.outputs[name], want)
        assert problem is None, f"cpu vs ONNX Runtime: output '{name}': {problem}"


@fuzz_settings(CI_GRAPHS)
@given(graphs())
def test_graphs_agree(model):
    check_graph(model)


@pytest.mark.slow
@fuzz_settings(SLOW_GRAPHS)
@given(graphs())
def test_graphs_agree_slow(model):
    check_graph(model)
