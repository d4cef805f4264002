"""Every oneDNN primitive against the numpy kernel the cpu ops run (float32, rel 1e-4),
over random geometries (channel counts that are not multiples of 8 or 16, strides,
dilations, groups, asymmetric pads), in the plain layout and in the layouts oneDNN
picks (`any`: data reordered in and out), with and without post-ops."""

import numpy as np
import pytest

from lightnet.archs.cpu import kernels as K
from lightnet.archs.dnnl import capi

if capi.unavailable_reason():
    pytest.skip(f"oneDNN is unavailable: {capi.unavailable_reason()}", allow_module_level=True)

from lightnet.archs.dnnl import primitives as P  # noqa: E402
from lightnet.errors import LightNetError  # noqa: E402
from tests.dnnl.dnnlutil import execute  # noqa: E402
from tests.helpers import rand  # noqa: E402

RTOL = 1e-4
# The layouts a source of a primitive that cannot choose its own may come in.
LAYOUTS = ("plain", "channels_last", "aBcd8b", "aBcd16b")


def close(got, want):
    scale = max(float(np.abs(want).max()), 1e-6)
    err = float(np.abs(got - want).max()) / scale
    assert err <= RTOL, f"relative error {err}"


def odd_channels(rng):
    return int(rng.choice([1, 3, 5, 7, 12, 17, 20, 33]))


def test_conv2d_random_geometries():
    rng = np.random.default_rng(1)
    impls = set()
    for trial in range(40):
        group = int(rng.choice([1, 1, 2, 3]))
        depthwise = trial % 5 == 0
        c = odd_channels(rng) * group
        o = c if depthwise else odd_channels(rng) * group
        group = c if depthwise else group
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
        padding = tuple(int(v) for v in rng.integers(0, 3, 4))
        h, w = int(rng.integers(kh * dilation[0], 14)), int(rng.integers(kw * dilation[1], 14))
        x, wt = rand(rng, 2, c, h, w), rand(rng, o, c // group, kh, kw)
        bias = rand(rng, o) if trial % 2 else None
        layout = "any" if trial % 3 else "plain"
        k = P.conv2d(x.shape, wt.shape, bias=bias is not None, group=group, stride=stride,
                     padding=padding, dilation=dilation, src=layout, dst=layout)
        impls.add(k.impl_info)
        inputs = {"src": x, "weights": wt, **({"bias": bias} if bias is not None else {})}
        got = execute(k, inputs, weights=("weights",))
        want = np.zeros(k.plain["dst"].shape, np.float32)
        K.conv2d(x, wt, bias, want, group=group, stride=stride, padding=padding,
                 dilation=dilation)
        close(got, want)
    assert len(impls) > 1  # more than one oneDNN implementation was exercised


def test_conv2d_post_ops_relu6_sum_and_binary():
    rng = np.random.default_rng(2)
    x, wt, bias = rand(rng, 1, 20, 9, 9), rand(rng, 17, 20, 3, 3), rand(rng, 17)
    residual, scale = rand(rng, 1, 17, 9, 9), rand(rng, 1, 17, 1, 1)
    post = [P.sum_post_op(), P.eltwise_post_op("clip", 0.0, 6.0),
            P.binary_post_op("mul", (1, 17, 1, 1)), P.eltwise_post_op("lrelu", 0.1)]
    k = P.conv2d(x.shape, wt.shape, bias=True, padding=(1, 1, 1, 1), post_ops=post)
    got = execute(k, {"src": x, "weights": wt, "bias": bias, "post_op_2": scale},
                  weights=("weights",), prefill=residual)
    conv = np.zeros((1, 17, 9, 9), np.float32)
    K.conv2d(x, wt, bias, conv, group=1, stride=(1, 1), padding=(1, 1, 1, 1),
             dilation=(1, 1))
    want = np.clip(conv + residual, 0, 6) * scale
    close(got, np.where(want >= 0, want, 0.1 * want))


def test_deconv2d_random_geometries():
    rng = np.random.default_rng(3)
    for trial in range(20):
        group = int(rng.choice([1, 2]))
        c, og = odd_channels(rng) * group, odd_channels(rng)
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
        padding = tuple(int(v) for v in rng.integers(0, 2, 4))
        output_padding = tuple(int(rng.integers(0, s)) for s in stride)
        padding = (padding[0], padding[1], padding[2] + output_padding[0],
                   padding[3] + output_padding[1])
        x, wt, bias = rand(rng, 2, c, 5, 6), rand(rng, c, og, kh, kw), rand(rng, og * group)
        k = P.deconv2d(x.shape, wt.shape, bias=True, group=group, stride=stride,
                       padding=padding, output_padding=output_padding, dilation=dilation,
                       src="any" if trial % 2 else "plain", dst="any")
        got = execute(k, {"src": x, "weights": wt, "bias": bias}, weights=("weights",))
        want = np.zeros(k.plain["dst"].shape, np.float32)
        K.deconv2d(x, wt, bias, want, group=group, stride=stride, padding=padding,
                   output_padding=output_padding, dilation=dilation)
        close(got, want)


def test_deconv2d_output_padding_beyond_the_end_padding_stays_on_cpu():
    with pytest.raises(P.Unsupported):
        P.deconv2d((1, 3, 4, 4), (3, 3, 3, 3), bias=False, stride=(2, 2),
                   output_padding=(1, 1))


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False)])
def test_matmul_static_and_runtime_weights(trans_a, trans_b):
    rng = np.random.default_rng(4)
    m, k_, n = 7, 13, 19
    a = rand(rng, k_, m) if trans_a else rand(rng, m, k_)
    b = rand(rng, n, k_) if trans_b else rand(rng, k_, n)
    bias = rand(rng, n)
    want = np.zeros((m, n), np.float32)
    K.matmul(a, b, bias, want, transA=trans_a, transB=trans_b)
    k = P.matmul(a.shape, b.shape, trans_a=trans_a, trans_b=trans_b, bias_shape=(n,),
                 post_ops=[P.eltwise_post_op("tanh")])
    close(execute(k, {"src": a, "weights": b, "bias": bias}, weights=("weights",)),
          np.tanh(want))
    batched_a = np.stack([a, 2 * a, -a])
    k = P.matmul(batched_a.shape, (1,) + b.shape, trans_a=trans_a, trans_b=trans_b,
                 b_layout="plain")
    want = np.zeros((3, m, n), np.float32)
    K.matmul(batched_a, b[None], None, want, transA=trans_a, transB=trans_b)
    close(execute(k, {"src": batched_a, "weights": b[None]}), want)


@pytest.mark.parametrize("trans_b,bias,relu", [(False, True, True), (True, False, False)])
def test_linear_is_the_matmul(trans_b, bias, relu):
    """A linear layer as a 1x1 convolution in channel blocks of 8 (K = 21, N = 19 not
    multiples of 8), its operand reordered in and its product out: the cpu matmul's
    values; float32 and eltwise post-ops only."""
    rng = np.random.default_rng(6)
    m, k_, n = 10, 21, 19
    a = rand(rng, m, k_)
    b = rand(rng, n, k_) if trans_b else rand(rng, k_, n)
    c = rand(rng, n)
    want = np.zeros((m, n), np.float32)
    K.matmul(a, b, c if bias else None, want, transA=False, transB=trans_b)
    kernel = P.linear(a.shape, b.shape, trans_b=trans_b, bias=bias,
                      post_ops=[P.eltwise_post_op("relu")] if relu else ())
    assert kernel.format("weights") != kernel.plain["weights"].format  # blocked at load
    inputs = {"src": a, "weights": b, **({"bias": c} if bias else {})}
    close(execute(kernel, inputs, weights=("weights",)), np.maximum(want, 0) if relu else want)
    with pytest.raises(ValueError, match="eltwise post-ops only"):
        P.linear(a.shape, b.shape, post_ops=[P.binary_post_op("add", (m, n))])
    with pytest.raises(ValueError, match="float32 only"):
        P.linear(a.shape, b.shape, dtype="bfloat16")
    with pytest.raises(ValueError, match="2-D operands"):
        P.linear((1,) + a.shape, b.shape)


@pytest.mark.parametrize("src_blocked,dst_blocked", [(True, False), (False, True),
                                                     (True, True)])
def test_linear_reads_and_writes_its_blocks(src_blocked, dst_blocked):
    """A linear reading its operand, or writing its product, in its own channel blocks
    (blocked_matrix: Ba8b, K = 21 and N = 19 padded) reorders neither: the cpu matmul's
    values, and the blocked tensors are the [1, C, 1, M] convolution's bytes."""
    rng = np.random.default_rng(7)
    m, k_, n = 10, 21, 19
    a, b, c = rand(rng, m, k_), rand(rng, k_, n), rand(rng, n)
    want = np.zeros((m, n), np.float32)
    K.matmul(a, b, c, want, transA=False, transB=False)
    kernel = P.linear(a.shape, b.shape, bias=True, src_blocked=src_blocked,
                      dst_blocked=dst_blocked)
    assert (kernel.reorder_in is None) == src_blocked
    assert (kernel.reorder_out is None) == dst_blocked
    for name, blocked, shape in (("src", src_blocked, (m, k_)), ("dst", dst_blocked, (m, n))):
        assert kernel.format(name) == ("Ba8b" if blocked else "ab")
        if blocked:
            assert kernel.descs[name] == P.blocked_matrix(shape)
            assert kernel.nbytes(name) == kernel.conv.nbytes(name) == 4 * 24 * m
    close(execute(kernel, {"src": a, "weights": b, "bias": c}, weights=("weights",)), want)


def test_linear_adds_a_residual_in_its_output_reorder():
    """`residual`: the linear's output reorder adds its product to what dst holds (a
    sum post-op), the cpu matmul's values plus the residual; a blocked product takes
    none."""
    rng = np.random.default_rng(8)
    m, k_, n = 10, 21, 19
    a, b, c, r = rand(rng, m, k_), rand(rng, k_, n), rand(rng, n), rand(rng, m, n)
    want = np.zeros((m, n), np.float32)
    K.matmul(a, b, c, want, transA=False, transB=False)
    kernel = P.linear(a.shape, b.shape, bias=True, residual=True)
    close(execute(kernel, {"src": a, "weights": b, "bias": c}, weights=("weights",),
                  prefill=r), want + r)
    with pytest.raises(ValueError, match="residual is added to a plain product only"):
        P.linear(a.shape, b.shape, dst_blocked=True, residual=True)


def test_pooling_random_geometries():
    rng = np.random.default_rng(5)
    unsupported = 0
    for trial in range(40):
        kind = "max" if trial % 2 else "avg"
        size = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        padding = tuple(int(rng.integers(0, size[i % 2])) for i in range(4))
        ceil_mode, include = bool(rng.integers(2)), bool(rng.integers(2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, 2)) if kind == "max" else (1, 1)
        x = rand(rng, 2, odd_channels(rng), int(rng.integers(6, 12)), int(rng.integers(6, 12)))
        try:
            k = P.pool(x.shape, kind=kind, size=size, stride=stride, padding=padding,
                         dilation=dilation, ceil_mode=ceil_mode, count_include_pad=include,
                         src=LAYOUTS[trial % len(LAYOUTS)])
        except P.Unsupported:
            assert kind == "avg" and include and ceil_mode
            unsupported += 1
            continue
        want = np.zeros(k.plain["dst"].shape, np.float32)
        if kind == "max":
            K.maxpool(x, want, size=size, stride=stride, padding=padding, dilation=dilation)
        else:
            K.avgpool(x, want, size=size, stride=stride, padding=padding,
                        count_include_pad=include)
        close(execute(k, {"src": x}), want)
    assert unsupported < 40


ELTWISE_CASES = [
    ("relu", 0.0, 0.0, lambda x: np.maximum(x, 0)),
    ("lrelu", 0.2, 0.0, lambda x: np.where(x >= 0, x, 0.2 * x)),
    ("clip", -0.5, 0.7, lambda x: np.clip(x, -0.5, 0.7)),
    ("clip", 0.0, 6.0, lambda x: np.clip(x, 0, 6)),
    ("sigmoid", 0.0, 0.0, lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", 0.0, 0.0, np.tanh),
    ("elu", 1.0, 0.0, lambda x: np.where(x > 0, x, np.expm1(x))),
    ("exp", 0.0, 0.0, np.exp),
    ("abs", 0.0, 0.0, np.abs),
    ("square", 0.0, 0.0, np.square),
    ("linear", 2.0, -1.0, lambda x: 2 * x - 1),
    ("hardswish", 1 / 6, 0.5, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
]


@pytest.mark.parametrize("name,alpha,beta,reference", ELTWISE_CASES)
def test_eltwise(name, alpha, beta, reference):
    x = rand(np.random.default_rng(6), 2, 17, 5, 3)
    for layout in LAYOUTS:
        k = P.eltwise(x.shape, name, alpha, beta, src=layout)
        close(execute(k, {"src": x}), reference(x.astype(np.float64)))


def test_eltwise_matches_the_cpu_kernels():
    x = rand(np.random.default_rng(7), 3, 5, 7)
    for name, kernel in (("relu", K.relu), ("sigmoid", K.sigmoid), ("tanh", K.tanh)):
        want = np.zeros_like(x)
        kernel(x, want)
        close(execute(P.eltwise(x.shape, name, src="plain"), {"src": x}), want)


@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_broadcasts_the_second_operand(name):
    rng = np.random.default_rng(8)
    x = rand(rng, 2, 17, 5, 6)
    for shape in [(2, 17, 5, 6), (1, 17, 1, 1), (6,), (1, 1, 5, 1)]:
        y = rand(rng, *shape)
        want = np.zeros_like(x)
        K.elew(x, y, want, elew_op={"add": "TL_SUM", "mul": "TL_MUL"}[name])
        k = P.binary(x.shape, shape, name, src0="aBcd8b" if len(shape) == 4 else "plain",
                     post_ops=[P.eltwise_post_op("relu")])
        close(execute(k, {"src0": x, "src1": y}), np.maximum(want, 0))
    with pytest.raises(P.Unsupported):
        P.binary((1, 17, 1, 1), x.shape, name)


def test_concat():
    rng = np.random.default_rng(9)
    parts = [rand(rng, 2, c, 4, 5) for c in (3, 17, 8)]
    for axis in (1, 3):
        shapes = [p.shape for p in parts] if axis == 1 else [(2, 3, 4, w) for w in (1, 5)]
        arrays = parts if axis == 1 else [rand(rng, *s) for s in shapes]
        k = P.concat(shapes, axis, dst="plain")
        want = np.zeros(k.plain["dst"].shape, np.float32)
        K.concat(arrays, want, axis=axis)
        close(execute(k, {f"src{i}": a for i, a in enumerate(arrays)}), want)


def test_a_concat_of_short_runs_is_a_reorder_per_source():
    """Sources whose runs in the output are shorter than SHORT_RUN bytes (a stack along
    an inner axis) are joined by reorders into their parts of dst; longer runs by
    oneDNN's concat. Both against numpy."""
    rng = np.random.default_rng(19)
    for shapes, axis, joined in (([(8, 3, 5, 1, 4)] * 4, 3, True),
                                 ([(2, 3, 7, 2), (2, 3, 7, 3)], 3, True),
                                 ([(2, 3, 16), (2, 5, 16)], 1, False)):
        arrays = [rand(rng, *s) for s in shapes]
        k = P.concat(shapes, axis)
        assert isinstance(k, P.Join) == joined and not k.impl_info.startswith("ref")
        close(execute(k, {f"src{i}": a for i, a in enumerate(arrays)}),
              np.concatenate(arrays, axis))


def test_batchnorm():
    rng = np.random.default_rng(10)
    x = rand(rng, 2, 20, 6, 7)
    stats = {n: rng.random(20).astype(np.float32) + 0.5
             for n in ("mean", "variance", "scale", "shift")}
    want = np.zeros_like(x)
    K.batchnorm(x, stats["scale"], stats["shift"], stats["mean"], stats["variance"], want,
                epsilon=1e-3)
    for layout in LAYOUTS:
        close(execute(P.batchnorm(x.shape, 1e-3, src=layout), {"src": x, **stats}), want)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    x = rand(np.random.default_rng(11), 2, 13, 5, 6)
    want = np.zeros_like(x)
    K.lrn(x, want, size=size, alpha=0.3, beta=0.75, bias=2.0)
    for layout in LAYOUTS:
        close(execute(P.lrn(x.shape, size=size, alpha=0.3, beta=0.75, bias=2.0, src=layout),
                      {"src": x}), want)


def test_lrn_of_even_size_stays_on_cpu():
    # oneDNN's window is symmetric, the cpu kernel's reaches one channel further.
    with pytest.raises(P.Unsupported):
        P.lrn((1, 8, 4, 4), size=4, alpha=1.0, beta=0.75, bias=1.0)


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_softmax(axis):
    x = rand(np.random.default_rng(12), 2, 17, 5, 6) * 4
    want = np.zeros_like(x)
    K.softmax(x, want, axis=axis)
    close(execute(P.softmax(x.shape, axis, src="plain"), {"src": x}), want)


@pytest.mark.parametrize("dst_hw", [(18, 22), (5, 7), (13, 4), (9, 11)])
def test_linear_resampling_matches_resize(dst_hw):
    x = rand(np.random.default_rng(13), 2, 17, 9, 11)
    want = np.zeros((2, 17) + dst_hw, np.float32)
    K.resize(x, want, mode="TL_LINEAR", dims=want.shape)
    for layout in LAYOUTS:
        close(execute(P.resample(x.shape, want.shape, "linear", src=layout), {"src": x}), want)


def test_reorder_round_trip_and_blocked_sizes():
    x = rand(np.random.default_rng(14), 2, 17, 3, 5)
    k = P.conv2d(x.shape, (20, 17, 3, 3), bias=False, padding=(1, 1, 1, 1))
    src = k.descs["src"]
    assert src.format != "any" and src.shape == x.shape
    assert k.plain["src"] == P.plain_desc(x.shape)  # equal descriptors: no reorder needed
    assert (src == k.plain["src"]) == (src.format == "abcd")
    assert src.nbytes >= x.nbytes  # blocked layouts pad the channels
    blocked = np.zeros(src.nbytes, np.uint8)
    P.reorder(P.plain_desc(x.shape), src).bind({"src": x, "dst": blocked})()
    back = np.zeros_like(x)
    P.reorder(src, P.plain_desc(x.shape)).bind({"src": blocked, "dst": back})()
    assert np.array_equal(back, x)


def test_blocked_layout_is_padded():
    # 17 channels in blocks of 8 or 16 take 24 or 32 channels of memory.
    desc = P.plain_desc((1, 17, 4, 4))
    assert desc.format == "abcd" and desc.nbytes == 17 * 16 * 4
    nhwc = P._desc((1, 17, 4, 4), "float32", "channels_last")
    assert nhwc.format == "acdb"


def test_bind_checks_buffers():
    k = P.eltwise((2, 3), "relu", src="plain")
    with pytest.raises(ValueError, match="needs 24"):
        k.bind({"src": np.zeros(6, np.float32), "dst": np.zeros(5, np.float32)})
    with pytest.raises(ValueError, match="no buffer"):
        k.bind({"src": np.zeros(6, np.float32)})
    with pytest.raises(ValueError, match="unknown element-wise function 'nope'"):
        P.eltwise((2, 3), "nope")
    with pytest.raises(ValueError, match="relu: cannot choose its source's layout"):
        P.eltwise((2, 3), "relu", src="any")


def test_a_failing_call_names_the_function_and_status():
    # A convolution whose weights do not match its source.
    with pytest.raises(LightNetError,
                       match=r"dnnl_convolution_forward_primitive_desc_create failed: "
                             r"dnnl_invalid_arguments \(2\)"):
        P._conv("conv2d", "dnnl_convolution_forward_primitive_desc_create", (1, 3, 5, 5),
                (4, 2, 3, 3), (1, 4, 3, 3), False, 1, (1, 1), (0, 0, 0, 0), (1, 1),
                "float32", "plain", "plain", (), transposed=False)


@pytest.mark.parametrize("part,whole,tag,dtype,expected", [
    ((1, 64, 13, 13), (1, 128, 13, 13), "aBcd16b", "float32", True),
    ((1, 16, 13, 13), (1, 128, 13, 13), "aBcd16b", "float32", True),    # one block
    ((1, 8, 13, 13), (1, 24, 13, 13), "aBcd16b", "float32", False),     # a partial block
    ((1, 8, 13, 13), (1, 24, 13, 13), "aBcd8b", "float32", True),
    ((2, 64, 13, 13), (2, 128, 13, 13), "aBcd16b", "float32", False),   # the batch is outside
    ((1, 64, 13, 13), (1, 128, 13, 13), "acdb", "float32", False),      # channels innermost
    ((1, 64, 13, 13), (1, 128, 13, 13), "aBcd16b", "bfloat16", False),  # another data type
])
def test_a_part_is_a_contiguous_block_of_the_whole(part, whole, tag, dtype, expected):
    tags = P.TAGS_4D
    assert capi.MemoryDesc.with_tag(part, dtype, tags[tag]).is_block_of(
        capi.MemoryDesc.with_tag(whole, "float32", tags[tag]), 1) is expected


def test_layernorm_refuses_a_dst_layout_other_than_its_src():
    """oneDNN 3.2 creates jit:uni for a plain src and a linear's blocked dst (Ba8b) but
    writes dst plain: the primitive is refused, never run with wrong bytes."""
    plain = P.plain_desc((16, 24))
    with pytest.raises(P.Unsupported, match="dst in another layout than src"):
        P.layernorm((16, 24), 1e-5, src=plain, dst=P.blocked_matrix((16, 24)))
    rng = np.random.default_rng(3)
    x, scale, shift = rand(rng, 16, 24), rand(rng, 24), rand(rng, 24)
    k = P.layernorm((16, 24), 1e-5, src=plain, dst=plain)
    got = execute(k, {"src": x, "scale": scale, "shift": shift})
    mean = x.mean(axis=1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * scale + shift
    close(got, want)
