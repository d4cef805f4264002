"""oneDNN primitives in bfloat16 against the same primitives in float32 on seeded
inputs, with the accuracy contract: max |bf16 - f32| <= 2e-2 x max |f32|. The
tensors are held in float32 (reorders convert), the weights are converted to
bfloat16 once by load_weights, and a convolution's result matches a float64 one
computed from the bfloat16-rounded inputs (float32 accumulation, not bfloat16)."""

import numpy as np
import pytest

from lightnet.archs.dnnl import capi

if capi.unavailable_reason():
    pytest.skip(f"oneDNN is unavailable: {capi.unavailable_reason()}", allow_module_level=True)
if capi.library().bf16 is None:
    pytest.skip(f"oneDNN has no bfloat16 on this CPU (ISA {capi.library().cpu_isa})",
                allow_module_level=True)

from lightnet.archs.cpu import kernels as K  # noqa: E402
from lightnet.archs.dnnl import primitives as P  # noqa: E402
from tests.dnnl.dnnlutil import execute  # noqa: E402
from tests.helpers import rand  # noqa: E402

CONTRACT = 2e-2
BF16 = "bfloat16"


def to_bf16(x):
    """x rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def within_contract(got, want):
    scale = float(np.abs(want).max())
    err = float(np.abs(got - want).max())
    assert err <= CONTRACT * scale, f"max |diff| {err} > {CONTRACT} x {scale}"
    return err / scale


def compare(make, inputs, weights=(), prefill=None):
    """Run the kernel `make(dtype)` builds in float32 and in bfloat16 on the same
    inputs; check the contract, that the bf16 kernel computes in bf16 (its tensors
    are, and its result differs from float32's), and return the relative error."""
    f32, bf16 = make("float32"), make(BF16)
    for name, desc in bf16.descs.items():
        if name not in ("bias", "mean", "variance", "scale", "shift") and \
                not name.startswith("post_op_"):
            assert desc.dtype == BF16, (name, desc)
        assert bf16.plain[name].dtype == "float32"
    want = execute(f32, inputs, weights=weights, prefill=prefill)
    got = execute(bf16, inputs, weights=weights, prefill=prefill)
    assert not np.array_equal(got, want)
    return within_contract(got, want)


def test_conv2d_random_geometries():
    rng = np.random.default_rng(21)
    for trial in range(16):
        group = int(rng.choice([1, 2]))
        depthwise = trial % 4 == 0
        c = int(rng.choice([3, 8, 17, 32])) * group
        o = c if depthwise else int(rng.choice([5, 16, 33])) * group
        group = c if depthwise else group
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        padding = tuple(int(v) for v in rng.integers(0, 2, 4))
        x, wt, bias = rand(rng, 2, c, 11, 10), rand(rng, o, c // group, kh, kw), rand(rng, o)
        layout = "any" if trial % 3 else "plain"

        def make(dtype):
            return P.conv2d(x.shape, wt.shape, bias=True, group=group, stride=stride,
                            padding=padding, dtype=dtype, src=layout, dst=layout,
                            post_ops=[P.eltwise_post_op("relu")])
        compare(make, {"src": x, "weights": wt, "bias": bias}, weights=("weights",))


def test_conv2d_accumulates_in_float32():
    # 576 products per output: accumulated in bf16 they would be off by far more than
    # one bf16 rounding of the result.
    rng = np.random.default_rng(22)
    x, wt, bias = rand(rng, 1, 64, 8, 8), rand(rng, 48, 64, 3, 3), rand(rng, 48)
    k = P.conv2d(x.shape, wt.shape, bias=True, padding=(1, 1, 1, 1), dtype=BF16)
    got = execute(k, {"src": x, "weights": wt, "bias": bias}, weights=("weights",))
    want = np.zeros(got.shape, np.float64)
    K.conv2d(to_bf16(x).astype(np.float64), to_bf16(wt).astype(np.float64),
             bias.astype(np.float64), want, group=1, stride=(1, 1), padding=(1, 1, 1, 1),
             dilation=(1, 1))
    # Only the result's own rounding to bf16 (half a unit: 2^-9 relative) remains.
    assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-6)


def test_conv2d_sum_and_relu_post_ops():
    rng = np.random.default_rng(23)
    x, wt, bias = rand(rng, 1, 20, 9, 9), rand(rng, 17, 20, 3, 3), rand(rng, 17)
    residual = rand(rng, 1, 17, 9, 9)

    def make(dtype):
        return P.conv2d(x.shape, wt.shape, bias=True, padding=(1, 1, 1, 1), dtype=dtype,
                        post_ops=[P.sum_post_op(), P.eltwise_post_op("relu")])
    compare(make, {"src": x, "weights": wt, "bias": bias}, weights=("weights",),
            prefill=residual)


def test_weights_are_converted_once_at_load_into_half_the_bytes():
    wt = rand(np.random.default_rng(24), 32, 16, 3, 3)
    f32 = P.conv2d((1, 16, 8, 8), wt.shape, bias=False, padding=(1, 1, 1, 1))
    bf16 = P.conv2d((1, 16, 8, 8), wt.shape, bias=False, padding=(1, 1, 1, 1), dtype=BF16)
    assert bf16.nbytes("weights") * 2 == f32.nbytes("weights")
    loaded = np.zeros(bf16.nbytes("weights"), np.uint8)
    bf16.load_weights("weights", wt, loaded)
    back = np.zeros_like(wt)
    P.reorder(bf16.descs["weights"], bf16.plain["weights"]).bind(
        {"src": loaded, "dst": back})()
    assert np.array_equal(back, to_bf16(wt))


def test_deconv2d():
    rng = np.random.default_rng(25)
    x, wt, bias = rand(rng, 2, 12, 5, 6), rand(rng, 12, 7, 3, 3), rand(rng, 14)

    def make(dtype):
        return P.deconv2d(x.shape, wt.shape, bias=True, group=2, stride=(2, 2),
                          padding=(1, 1, 2, 2), output_padding=(1, 1), dtype=dtype)
    compare(make, {"src": x, "weights": wt, "bias": bias}, weights=("weights",))


@pytest.mark.parametrize("trans_b", [False, True])
def test_matmul_static_and_runtime_weights(trans_b):
    rng = np.random.default_rng(26)
    a, bias = rand(rng, 7, 300), rand(rng, 19)
    b = rand(rng, 19, 300) if trans_b else rand(rng, 300, 19)

    def static(dtype):
        return P.matmul(a.shape, b.shape, trans_b=trans_b, bias_shape=(19,), dtype=dtype,
                        post_ops=[P.eltwise_post_op("relu")])

    def runtime(dtype):
        return P.matmul(a.shape, b.shape, trans_b=trans_b, dtype=dtype, b_layout="plain")
    compare(static, {"src": a, "weights": b, "bias": bias}, weights=("weights",))
    compare(runtime, {"src": a, "weights": b})


def test_batched_matmul_of_two_activations():
    """Q @ K^T per head (both computed per run, B read plain and transposed by strides,
    alpha a linear post-op), the batch dims of A broadcasting."""
    rng = np.random.default_rng(33)
    q, k = rand(rng, 1, 6, 37, 64), rand(rng, 2, 6, 37, 64)

    def make(dtype):
        return P.matmul(q.shape, k.shape, trans_b=True, dtype=dtype, b_layout="plain",
                        post_ops=[P.eltwise_post_op("linear", 0.125)])
    compare(make, {"src": q, "weights": k})


def test_layernorm_keeps_float32_scale_and_shift():
    rng = np.random.default_rng(34)
    x = rand(rng, 197, 384) * 3 + 1
    scale, shift = rand(rng, 384) + 1, rand(rng, 384)
    compare(lambda dtype: P.layernorm(x.shape, 1e-6, dtype=dtype),
            {"src": x, "scale": scale, "shift": shift})


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling(kind):
    x = rand(np.random.default_rng(27), 2, 17, 9, 10)

    def make(dtype):
        return P.pool(x.shape, kind=kind, size=(3, 3), stride=(2, 2),
                        padding=(1, 1, 1, 1), dtype=dtype, src="plain")
    compare(make, {"src": x})


@pytest.mark.parametrize("name,alpha,beta", [("relu", 0.0, 0.0), ("clip", 0.0, 6.0),
                                             ("sigmoid", 0.0, 0.0), ("tanh", 0.0, 0.0),
                                             ("gelu_erf", 0.0, 0.0)])
def test_eltwise(name, alpha, beta):
    x = rand(np.random.default_rng(28), 2, 17, 5, 3) * 3
    compare(lambda dtype: P.eltwise(x.shape, name, alpha, beta, dtype=dtype, src="plain"),
            {"src": x})


@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary(name):
    rng = np.random.default_rng(29)
    x, y = rand(rng, 2, 17, 5, 6), rand(rng, 1, 17, 1, 1)
    compare(lambda dtype: P.binary(x.shape, y.shape, name, dtype=dtype), {"src0": x, "src1": y})


def test_concat():
    rng = np.random.default_rng(30)
    parts = [rand(rng, 2, c, 4, 5) for c in (3, 17, 8)]
    compare(lambda dtype: P.concat([p.shape for p in parts], 1, dtype=dtype, dst="plain"),
            {f"src{i}": p for i, p in enumerate(parts)})


def test_batchnorm_keeps_float32_statistics():
    rng = np.random.default_rng(31)
    x = rand(rng, 2, 20, 6, 7)
    stats = {n: rng.random(20).astype(np.float32) + 0.5
             for n in ("mean", "variance", "scale", "shift")}
    compare(lambda dtype: P.batchnorm(x.shape, 1e-3, dtype=dtype, src="plain"),
            {"src": x, **stats})


def test_lrn_softmax_resample():
    x = rand(np.random.default_rng(32), 2, 13, 9, 11) * 3
    compare(lambda dtype: P.lrn(x.shape, size=5, alpha=0.3, beta=0.75, bias=2.0, dtype=dtype),
            {"src": x})
    compare(lambda dtype: P.softmax(x.shape, 1, dtype=dtype), {"src": x})
    compare(lambda dtype: P.resample(x.shape, (2, 13, 18, 22), "linear", dtype=dtype),
            {"src": x})
