"""The dnnl int8 ops (qconv2d_dnnl, qmatmul_dnnl) against their cpu variants, which compute
ONNX's integer arithmetic exactly: integer outputs equal, requantized ones within one
step, float ones to float32 rounding; oneDNN's int8 kernels, never its reference ones.

Below VNNI oneDNN adds pairs of u8 x s8 products in int16 with saturation, so the dnnl
expanders lower a quantized op there only for a uint8 source and weights within +-64
(ONNX Runtime's reduce_range weights), which those kernels sum exactly
(ops.int8_sums_exact); these tests use such operands."""

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.archs.dnnl import capi
from lightnet.archs.dnnl import ops as dnnl_ops
from tests.helpers import compiled, run
from tests.irbuild import create_op, input_op, op

pytestmark = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")


def _model(optype, src, statics: dict, params: dict) -> dict:
    first = "src" if optype == "qconv2d" else "src1"
    ops = [input_op(first, src)]
    ops += [create_op(arg, value) for arg, value in statics.items()]
    ins = {first: first, **{arg: arg for arg in statics}}
    ops.append(op("q", optype, ins, {"dst": "out"}, **params))
    return {"ops": ops}


def _compare(optype, src, statics, params):
    doc = _model(optype, src, statics, params)
    feeds = {"src" if optype == "qconv2d" else "src1": src}
    want = run(compiled(doc, load=True), feeds)["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})  # the weights known at compile
    assert not ctx.refused, ctx.refused  # oneDNN had only its reference kernel for it
    dnnl_op = next(o for o in ctx.ops if o.optype == f"{optype}_dnnl")
    impl = dnnl_op.values["call"].impl_info
    assert not impl.startswith("ref"), impl
    got = run(ctx, feeds)["out"]
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    elif got.dtype == np.int32:
        np.testing.assert_array_equal(got, want)
    else:
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
        assert np.mean(got != want) < 0.01  # a rounding at a tie, rarely


def _scales(rng, dtype, channels, per_channel):
    statics = {"src_scale": np.array([0.02], np.float32),
               "weight_scale": rng.uniform(0.001, 0.01, channels if per_channel else 1)
               .astype(np.float32)}
    if dtype in ("TL_UINT8", "TL_INT8"):
        statics["dst_scale"] = np.array([0.05], np.float32)
        zero = 128 if dtype == "TL_UINT8" else -3
        statics["dst_zero"] = np.array([zero], np.uint8 if dtype == "TL_UINT8" else np.int8)
    return statics


CONVS = [  # (n, c, h, w, o, k, group, stride, padding, dilation)
    (1, 8, 10, 10, 16, 3, 1, 1, 1, 1),
    (2, 3, 11, 9, 8, 3, 1, 2, 1, 1),
    (1, 16, 8, 8, 16, 3, 16, 1, 1, 1),
    (1, 16, 9, 9, 16, 1, 2, 1, 0, 1),
    (1, 8, 12, 12, 8, 3, 1, 1, 2, 2),
]


@pytest.mark.parametrize("dtype", ["TL_UINT8", "TL_INT8", "TL_FLOAT", "TL_INT32"])
@pytest.mark.parametrize("geometry", CONVS, ids=str)
def test_qconv2d_matches_cpu(geometry, dtype):
    n, c, h, w, o, k, group, stride, padding, dilation = geometry
    rng = np.random.default_rng(sum(geometry))
    src = rng.integers(0, 256, (n, c, h, w)).astype(np.uint8)
    statics = {"weight": rng.integers(-64, 64, (o, c // group, k, k)).astype(np.int8),
               "bias": rng.integers(-2000, 2000, o).astype(np.int32),
               "src_zero": np.array([120], np.uint8)}
    if dtype != "TL_INT32":
        statics.update(_scales(rng, dtype, o, per_channel=group % 2 == 0 or o % 2 == 0))
    params = {"size": [k, k], "group": group, "stride": [stride] * 2,
              "padding": [padding] * 4, "dilation": [dilation] * 2, "dtype": dtype,
              "activation": "relu" if dtype == "TL_UINT8" else "none"}
    _compare("qconv2d", src, statics, params)


@pytest.mark.parametrize("dtype", ["TL_UINT8", "TL_INT8", "TL_FLOAT", "TL_INT32"])
@pytest.mark.parametrize("shapes", [((6, 16), (16, 12)), ((2, 3, 8), (8, 5)),
                                    ((2, 3, 8), (2, 8, 5))], ids=str)
def test_qmatmul_matches_cpu(shapes, dtype):
    a_shape, b_shape = shapes
    rng = np.random.default_rng(len(a_shape) + len(b_shape))
    src = rng.integers(0, 256, a_shape).astype(np.uint8)
    statics = {"src2": rng.integers(-64, 64, b_shape).astype(np.int8),
               "bias": rng.integers(-2000, 2000, b_shape[-1]).astype(np.int32),
               "src1_zero": np.array([100], np.uint8)}
    if dtype != "TL_INT32":
        scales = _scales(rng, dtype, b_shape[-1], per_channel=True)
        statics.update({"src1_scale": scales.pop("src_scale"),
                        "src2_scale": scales.pop("weight_scale"), **scales})
    params = {"dtype": dtype, "activation": "relu" if dtype == "TL_FLOAT" else "none"}
    _compare("qmatmul", src, statics, params)


def test_int32_sums_equal_at_the_seven_bit_bound():
    """The largest pair sums the 7-bit route admits (255 * 64 twice, either sign) are exact."""
    src = np.full((1, 8, 5, 5), 255, np.uint8)
    src[0, :, 2, 2] = 0
    weight = np.where(np.arange(8 * 8 * 9).reshape(8, 8, 3, 3) % 3 == 0, -64, 64).astype(np.int8)
    weight[0] = 64
    weight[1] = -64
    statics = {"weight": weight, "src_zero": np.array([0], np.uint8)}
    _compare("qconv2d", src, statics, {"size": [3, 3], "padding": [1] * 4, "dtype": "TL_INT32"})
    a = np.full((3, 64), 255, np.uint8)
    b = np.where(np.arange(64 * 5).reshape(64, 5) % 4 == 1, 64, -64).astype(np.int8)
    _compare("qmatmul", a, {"src2": b}, {"dtype": "TL_INT32"})


def _lowered(optype, src, weight, known=True) -> str:
    """The optype `optype` (qconv2d or qmatmul, int32 output) of a uint8 or int8 `src`
    and `weight` lowers to for dnnl, the weight's values `known` at compile or not."""
    if optype == "qconv2d":
        doc = _model(optype, src, {"weight": weight}, {"size": list(weight.shape[2:]),
                                                      "dtype": "TL_INT32"})
    else:
        doc = _model(optype, src, {"src2": weight}, {"dtype": "TL_INT32"})
    ctx = compiled(doc, "dnnl", weights={} if known else None)
    return next(o.optype for o in ctx.ops if o.optype.startswith(optype))


@pytest.mark.parametrize("optype", ["qconv2d", "qmatmul"])
@pytest.mark.parametrize("src_dtype, low, high, exact", [
    (np.uint8, -64, 64, True),  # reduce_range weights: every pair sum fits int16
    (np.uint8, -64, 65, False),  # one weight of 65: 2 * 255 * 65 saturates
    (np.uint8, -65, 64, False),
    (np.int8, -8, 8, False),  # an int8 source: oneDNN halves the weights below VNNI
])
def test_int8_route_is_chosen_per_op(optype, src_dtype, low, high, exact):
    rng = np.random.default_rng(7)
    src = rng.integers(np.iinfo(src_dtype).min, np.iinfo(src_dtype).max, (1, 4, 6, 6)
                       if optype == "qconv2d" else (6, 36)).astype(src_dtype)
    shape = (4, 4, 3, 3) if optype == "qconv2d" else (36, 4)
    weight = rng.integers(-20, 20, shape).astype(np.int8)
    weight.reshape(-1)[[3, 10]] = [low, high]
    want = "dnnl" if exact or dnnl_ops.int8_exact() else "cpu"
    assert _lowered(optype, src, weight) == f"{optype}_{want}"


@pytest.mark.parametrize("optype", ["qconv2d", "qmatmul"])
def test_weights_unknown_at_compile_keep_the_cpu_below_vnni(optype):
    src = np.zeros((1, 4, 6, 6) if optype == "qconv2d" else (6, 36), np.uint8)
    weight = np.ones((4, 4, 3, 3) if optype == "qconv2d" else (36, 4), np.int8)
    want = "dnnl" if dnnl_ops.int8_exact() else "cpu"
    assert _lowered(optype, src, weight, known=False) == f"{optype}_{want}"
    assert _lowered(optype, src, weight) == f"{optype}_dnnl"
    assert dnnl_ops.int8_sums_exact("TL_UINT8", None) == dnnl_ops.int8_exact()
    assert dnnl_ops.int8_sums_exact("TL_UINT8", np.array([-64, 64], np.int8))
    assert dnnl_ops.int8_sums_exact("TL_INT8", np.array([1], np.int8)) == dnnl_ops.int8_exact()


def _chain(src, weights, dtype="TL_UINT8"):
    """A model of uint8 convolutions in a row (3x3, padding 1, a relu), each requantized
    by powers of two (which oneDNN and the cpu scale exactly alike), the last writing
    `dtype`."""
    ops = [input_op("src", src)]
    last = "src"
    for i, w in enumerate(weights):
        out_dtype = dtype if i == len(weights) - 1 else "TL_UINT8"
        statics = {f"w{i}": w, f"b{i}": np.arange(w.shape[0], dtype=np.int32) * 8,
                   f"sz{i}": np.array([3], np.uint8), f"ss{i}": np.array([0.5], np.float32),
                   f"ws{i}": np.array([2.0 ** -6] * w.shape[0], np.float32)}
        ins = {"src": last, "weight": f"w{i}", "bias": f"b{i}", "src_zero": f"sz{i}",
               "src_scale": f"ss{i}", "weight_scale": f"ws{i}"}
        if out_dtype in ("TL_UINT8", "TL_INT8"):
            statics[f"ds{i}"] = np.array([0.125], np.float32)
            ins["dst_scale"] = f"ds{i}"
        elif out_dtype == "TL_INT32":  # the accumulator itself: no scales
            for arg, name in (("src_scale", f"ss{i}"), ("weight_scale", f"ws{i}")):
                del statics[name], ins[arg]
        ops += [create_op(arg, value) for arg, value in statics.items()]
        out = "out" if i == len(weights) - 1 else f"t{i}"
        ops.append(op(f"q{i}", "qconv2d", ins, {"dst": out}, size=[3, 3], padding=[1] * 4,
                      dtype=out_dtype, activation="none" if out_dtype == "TL_INT32" else "relu"))
        last = out
    return {"ops": ops}


@pytest.mark.parametrize("dtype", ["TL_UINT8", "TL_FLOAT", "TL_INT32"])
def test_int8_convolutions_in_a_row_pass_channels_last(dtype):
    """No reorder between consecutive int8 convolutions: one into the first's layout,
    one out of the last's (none for an int32 output, which the convolution writes
    plain itself), and the values the cpu's."""
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    weights = [rng.integers(-64, 65, (16, 8, 3, 3)).astype(np.int8),
               rng.integers(-64, 65, (16, 16, 3, 3)).astype(np.int8),
               rng.integers(-64, 65, (8, 16, 3, 3)).astype(np.int8)]
    doc = _chain(src, weights, dtype)
    want = run(compiled(doc, load=True), {"src": src})["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    optypes = [o.optype for o in ctx.ops if o.optype not in ("create_cpu", "weights_dnnl")]
    reorders = 2 if dtype != "TL_INT32" else 1
    assert optypes == (["input_cpu", "reorder_dnnl"] + ["qconv2d_dnnl"] * 3
                       + ["reorder_dnnl"] * (reorders - 1)), optypes
    impls = [o.values["call"].impl_info for o in ctx.ops if o.optype == "qconv2d_dnnl"]
    assert all(i.startswith("jit") for i in impls), impls
    got = run(ctx, {"src": src})["out"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _one_op(optype, x, statics, **params):
    """(the cpu's output, dnnl's output, dnnl's optypes but create ops) of one op."""
    doc = {"ops": [input_op("src", x)] + [create_op(a, v) for a, v in statics.items()] + [
        op("op", optype, {"src": "src", **{a: a for a in statics}}, {"dst": "out"}, **params)]}
    want = run(compiled(doc, load=True), {"src": x})["out"]
    ctx = compiled(doc, "dnnl", load=True)
    assert all(o.values["call"].impl_info.startswith("jit") for o in ctx.ops
               if o.optype == f"{optype}_dnnl")
    return want, run(ctx, {"src": x})["out"], [o.optype for o in ctx.ops
                                                if o.optype != "create_cpu"]


@pytest.mark.parametrize("dtype", ["TL_UINT8", "TL_INT8"])
@pytest.mark.parametrize("shape", [(2, 5, 7, 9), (3, 40)], ids=str)
def test_quantize_and_dequantize_match_cpu(shape, dtype):
    """quantize_dnnl as the cpu's (a value within a float32 rounding of a half step may
    round the other way, rarely), half steps exactly (an even zero point: oneDNN rounds
    after adding it), saturation; dequantize_dnnl equal. A 4-D output is written
    channels-last (then reordered, as a model output)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 60).astype(np.float32)
    x.reshape(-1)[:6] = [0.5 * 0.4, 2.5 * 0.4, -1.5 * 0.4, 1e6, -1e6, 0]  # exact ties, saturated
    np_dtype = np.uint8 if dtype == "TL_UINT8" else np.int8
    statics = {"scale": np.array([0.4], np.float32), "zero": np.array([8], np_dtype)}
    reorder = ["reorder_dnnl"] if len(shape) == 4 else []
    want, got, optypes = _one_op("quantize", x, statics, dtype=dtype)
    assert optypes == ["input_cpu", "quantize_dnnl"] + reorder, optypes
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert np.mean(got != want) < 0.001
    np.testing.assert_array_equal(got.reshape(-1)[:6], want.reshape(-1)[:6])
    q = rng.integers(np.iinfo(np_dtype).min, np.iinfo(np_dtype).max + 1, shape).astype(np_dtype)
    want, got, optypes = _one_op("dequantize", q, statics)
    assert optypes == ["input_cpu", "dequantize_dnnl"], optypes
    np.testing.assert_array_equal(got, want)


def test_int8_max_pool_between_convolutions_keeps_channels_last():
    """A max pool of uint8 between two int8 convolutions runs on oneDNN's int8 pooling
    (the combiner int8_maxpool), in their channels-last layout: no reorder between."""
    rng = np.random.default_rng(5)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    weights = [rng.integers(-64, 65, (16, 8, 3, 3)).astype(np.int8),
               rng.integers(-64, 65, (8, 16, 3, 3)).astype(np.int8)]
    doc = _chain(src, weights)
    at = next(i for i, o in enumerate(doc["ops"]) if o["name"] == "q1")
    next(t for t in doc["ops"][at]["tensors_in"] if t["arg_name"] == "src")["name"] = "p0"
    doc["ops"].insert(at, op("pool", "maxpool2d", {"src": "t0"}, {"dst": "p0"}, size=[3, 3],
                             stride=[2, 2], padding=[1, 1, 1, 1]))
    want = run(compiled(doc, load=True), {"src": src})["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    optypes = [o.optype for o in ctx.ops if o.optype not in ("create_cpu", "weights_dnnl")]
    assert optypes == ["input_cpu", "reorder_dnnl", "qconv2d_dnnl", "maxpool2d_int8_dnnl",
                       "qconv2d_dnnl", "reorder_dnnl"], optypes
    pool = next(o for o in ctx.ops if o.optype == "maxpool2d_int8_dnnl")
    assert pool.values["call"].impl_info.startswith("jit"), pool.values["call"].impl_info
    np.testing.assert_array_equal(run(ctx, {"src": src})["out"], want)


@pytest.mark.parametrize("zero", [0, 5])
def test_zero_points_known_to_be_zero_are_left_out(zero):
    """oneDNN's int8 kernels run faster without zero points: one known to be 0 is not
    given to them (the values the cpu's either way); any other is."""
    rng = np.random.default_rng(9)
    src = rng.integers(0, 256, (1, 8, 7, 7)).astype(np.uint8)
    statics = {"weight": rng.integers(-64, 65, (8, 8, 3, 3)).astype(np.int8),
               "src_zero": np.array([zero], np.uint8)}
    statics.update(_scales(rng, "TL_UINT8", 8, per_channel=True))
    statics["dst_zero"] = np.array([zero], np.uint8)
    params = {"size": [3, 3], "padding": [1] * 4}
    _compare("qconv2d", src, statics, params)
    ctx = compiled(_model("qconv2d", src, statics, params), "dnnl", weights={})
    conv = next(o for o in ctx.ops if o.optype == "qconv2d_dnnl")
    given = {"src_zero", "dst_zero"} & set(conv.tensors_in)
    assert given == (set() if zero == 0 else {"src_zero", "dst_zero"})
    src1 = rng.integers(0, 256, (4, 16)).astype(np.uint8)
    statics = {"src2": rng.integers(-64, 65, (16, 8)).astype(np.int8),
               "src1_zero": np.array([zero], np.uint8), "src1_scale": statics["src_scale"],
               "src2_scale": statics["weight_scale"], "dst_scale": statics["dst_scale"],
               "dst_zero": np.array([zero], np.uint8)}
    _compare("qmatmul", src1, statics, {})
    ctx = compiled(_model("qmatmul", src1, statics, {}), "dnnl", weights={})
    product = next(o for o in ctx.ops if o.optype == "qmatmul_dnnl")
    given = {"src1_zero", "dst_zero"} & set(product.tensors_in)
    assert given == (set() if zero == 0 else {"src1_zero", "dst_zero"})


def test_int8_concat_of_convolutions_keeps_channels_last():
    """A concat of two int8 convolutions' uint8 outputs, read by a third, runs on oneDNN
    (the combiner int8_concat) in their channels-last layout: no reorder between."""
    rng = np.random.default_rng(6)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    weights = [rng.integers(-64, 65, (8, 8, 3, 3)).astype(np.int8),
               rng.integers(-64, 65, (8, 16, 3, 3)).astype(np.int8)]
    doc = _chain(src, weights)
    at = next(i for i, o in enumerate(doc["ops"]) if o["name"] == "q1")
    next(t for t in doc["ops"][at]["tensors_in"] if t["arg_name"] == "src")["name"] = "c0"
    doc["ops"].insert(at, op("join", "concat", {"src1": "t0", "src2": "src"}, {"dst": "c0"},
                             axis=1))
    want = run(compiled(doc, load=True), {"src": src})["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    optypes = [o.optype for o in ctx.ops if o.optype not in ("create_cpu", "weights_dnnl")]
    assert optypes == ["input_cpu", "reorder_dnnl", "qconv2d_dnnl", "concat_int8_dnnl",
                       "qconv2d_dnnl", "reorder_dnnl"], optypes
    join = next(o for o in ctx.ops if o.optype == "concat_int8_dnnl")
    assert not join.values["call"].impl_info.startswith("ref"), join.values["call"].impl_info
    np.testing.assert_array_equal(run(ctx, {"src": src})["out"], want)


def _qelew_doc(a, b, statics: dict, elew_op: str, b_input: bool = True) -> dict:
    """A model of one qelew of inputs a and b (b a weight unless `b_input`)."""
    ops = [input_op("a", a)] + ([input_op("b", b)] if b_input else [create_op("b", b)])
    ops += [create_op(arg, value) for arg, value in statics.items()]
    ops.append(op("add", "qelew", {"src1": "a", "src2": "b", **{k: k for k in statics}},
                  {"dst": "out"}, elew_op=elew_op))
    return {"ops": ops}


def _qelew_pair(a, b, statics, elew_op):
    """(the cpu's output, dnnl's output, dnnl's optypes but create ops) of one qelew."""
    doc = _qelew_doc(a, b, statics, elew_op)
    feeds = {"a": a, "b": b}
    want = run(compiled(doc, load=True), feeds)["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    assert not ctx.refused, ctx.refused
    impls = [o.values["call"].impl_info for o in ctx.ops if o.optype == "qelew_dnnl"]
    assert all(i.startswith("jit") for i in impls), impls
    return want, run(ctx, feeds)["out"], [o.optype for o in ctx.ops
                                          if o.optype != "create_cpu"]


def _qelew_statics(np_dtype, scales, zeros):
    names = ("src1", "src2", "dst")
    statics = {f"{n}_scale": np.array([s], np.float32) for n, s in zip(names, scales)}
    statics.update((f"{n}_zero", np.array([z], np_dtype)) for n, z in zip(names, zeros)
                   if z is not None)
    return statics


@pytest.mark.parametrize("elew_op", ["TL_SUM", "TL_MUL"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [[(2, 16, 5, 7)] * 2, [(2, 16, 5, 7), (1, 16, 1, 1)],
                                    [(3, 40)] * 2], ids=str)
def test_qelew_matches_cpu(shapes, dtype, elew_op):
    """qelew_dnnl as the cpu's: exactly where every result is an integer number of dst
    steps (scales 0.5, 0.25 over 0.25: 2 (a - za) + (b - zb); a product a * b),
    saturating; within one
    step at most, rarely, for any scales (a rounding at a half step: oneDNN rounds after
    adding dst's zero point)."""
    rng = np.random.default_rng(21)
    info = np.iinfo(dtype)
    # A product's operands small enough that most products fit dst.
    low, high = (info.min, info.max) if elew_op == "TL_SUM" else (max(info.min, -12), 16)
    a, b = (rng.integers(low, high + 1, s).astype(dtype) for s in shapes)
    src_zeros = (7, -3 if dtype == np.int8 else 200) if elew_op == "TL_SUM" else (None, None)
    exact = (0.5, 0.25, 0.25) if elew_op == "TL_SUM" else (0.5, 0.25, 0.125)
    for scales in (exact, (0.0173, 0.0291, 0.0457)):
        statics = _qelew_statics(dtype, scales, src_zeros + (5,))
        want, got, optypes = _qelew_pair(a, b, statics, elew_op)
        assert "qelew_dnnl" in optypes and "qelew_cpu" not in optypes, optypes
        assert got.dtype == want.dtype and got.shape == want.shape
        if scales is exact:
            np.testing.assert_array_equal(got, want)
            assert elew_op == "TL_MUL" or (want == info.max).any()  # saturated
        else:
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
            assert np.mean(got != want) < 0.01


def test_qelew_halves_round_within_one_step():
    """At exact half steps with an odd dst zero point the cpu rounds before adding it,
    oneDNN after: one step apart there, equal elsewhere."""
    a = np.arange(0, 20, dtype=np.uint8).reshape(1, 4, 5, 1)
    b = np.zeros_like(a)
    statics = _qelew_statics(np.uint8, (0.5, 0.5, 1.0), (0, 0, 3))
    want, got, _ = _qelew_pair(a, b, statics, "TL_SUM")
    # a / 2 + 3: the cpu rounds a / 2 half to even, oneDNN a / 2 + 3
    np.testing.assert_array_equal(want.reshape(-1), np.round(np.arange(20) / 2) + 3)
    np.testing.assert_array_equal(got.reshape(-1), np.round(np.arange(20) / 2 + 3))
    assert np.abs(got.astype(int) - want.astype(int)).max() == 1


@pytest.mark.parametrize("zero", [0, 4])
def test_qelew_product_with_zero_points_stays_on_the_cpu(zero):
    """oneDNN's binary takes no zero point: a product's input zero points known to be 0
    are left out, any other keeps the op on the cpu; a sum folds them into its shift."""
    rng = np.random.default_rng(22)
    a, b = (rng.integers(0, 256, (1, 8, 3, 3)).astype(np.uint8) for _ in range(2))
    statics = _qelew_statics(np.uint8, (0.5, 0.25, 0.125), (zero, zero, 9))
    want, got, optypes = _qelew_pair(a, b, statics, "TL_MUL")
    np.testing.assert_array_equal(got, want)
    ctx = compiled(_qelew_doc(a, b, statics, "TL_MUL"), "dnnl", weights={})
    (prod,) = [o for o in ctx.ops if o.optype.startswith("qelew")]
    if zero:
        assert prod.optype == "qelew_cpu"
    else:
        assert prod.optype == "qelew_dnnl"
        assert not {"src1_zero", "src2_zero"} & set(prod.tensors_in)


def test_int8_residual_add_keeps_channels_last():
    """A QDQ residual block (conv, conv, the sum of the second's output and the first's,
    conv) runs its sum on oneDNN's binary in the convolutions' channels-last layout: no
    reorder between; the values the cpu's (scales whose sum is exact)."""
    rng = np.random.default_rng(23)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    weights = [rng.integers(-64, 65, (8, 8, 3, 3)).astype(np.int8) for _ in range(3)]
    doc = _chain(src, weights)
    at = next(i for i, o in enumerate(doc["ops"]) if o["name"] == "q2")
    next(t for t in doc["ops"][at]["tensors_in"] if t["arg_name"] == "src")["name"] = "r"
    statics = _qelew_statics(np.uint8, (0.125, 0.25, 0.125), (3, 3, 1))
    doc["ops"][at:at] = [create_op(k, v) for k, v in statics.items()] + [
        op("res", "qelew", {"src1": "t1", "src2": "t0", **{k: k for k in statics}},
           {"dst": "r"})]
    want = run(compiled(doc, load=True), {"src": src})["out"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    optypes = [o.optype for o in ctx.ops if o.optype not in ("create_cpu", "weights_dnnl")]
    assert optypes == ["input_cpu", "reorder_dnnl", "qconv2d_dnnl", "qconv2d_dnnl",
                       "qelew_dnnl", "qconv2d_dnnl", "reorder_dnnl"], optypes
    add = next(o for o in ctx.ops if o.optype == "qelew_dnnl")
    assert add.values["call"].impl_info.startswith("jit"), add.values["call"].impl_info
    assert ctx.tensors[add.tensors_out["dst"]].layout.format == "acdb"
    np.testing.assert_array_equal(run(ctx, {"src": src})["out"], want)


def _set_static(ops, name, array):
    """Make create op of tensor `name` in `ops` hold `array`."""
    at = next(i for i, o in enumerate(ops) if o["name"] == f"create_{name}")
    ops[at] = create_op(name, array)


def _residual_block(src, weights, scales, zeros, later_reader=False):
    """A QDQ bottleneck of three uint8 convolutions (_chain), the third's output plus
    the first's requantized as the model's output `r` (scales and zero points of: the
    third's output as both the convolution and the sum read it, the first's, the sum's);
    `later_reader`: the first's output is read after the third too (a dequantize,
    another output)."""
    doc = _chain(src, weights)
    ops = doc["ops"]
    statics = _qelew_statics(np.uint8, scales, zeros)
    statics["mid_zero"] = np.array([zeros[0]], np.uint8)
    ops[1:1] = [create_op(k, v) for k, v in statics.items()]
    last = next(o for o in ops if o["name"] == "q2")
    last["tensors_out"][0]["name"] = "t2"
    ins = {t["arg_name"]: t for t in last["tensors_in"]}
    _set_static(ops, ins["dst_scale"]["name"], np.array([scales[0]], np.float32))
    last["tensors_in"].append({"arg_name": "dst_zero", "name": "mid_zero"})
    ops.append(op("res", "qelew", {"src1": "t2", "src2": "t0",
                                   **{k: k for k in statics if k != "mid_zero"}}, {"dst": "r"}))
    if later_reader:
        ops.append(op("dq", "dequantize", {"src": "t0", "scale": "src2_scale",
                                           "zero": "src2_zero"}, {"dst": "t0_float"}))
    return doc


@pytest.mark.parametrize("scales, zeros", [((0.125, 0.125, 0.125), (2, 3, 1)),
                                           ((0.0731, 0.0419, 0.0913), (5, 9, 4))], ids=str)
def test_int8_residual_add_fuses_into_the_convolution(scales, zeros):
    """qint8_sum: a QDQ residual add whose residual the convolution may overwrite runs
    inside it (the convolution's requantization and the residual as post-ops, in
    place): no qelew left, oneDNN's jit kernel, the values the cpu's (which quantizes,
    dequantizes and adds as ONNX does): equal where every sum is a whole number of dst
    steps, within one step at a rounding tie otherwise (oneDNN rounds after adding dst's
    zero point)."""
    rng = np.random.default_rng(24)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    # Small weights: sums spread over the 8-bit range, few saturate.
    weights = [rng.integers(-2, 3, (8, 8, 3, 3)).astype(np.int8) for _ in range(3)]
    doc = _residual_block(src, weights, scales, zeros)
    want = run(compiled(doc, load=True), {"src": src})["r"]
    ctx = compiled(doc, "dnnl", load=True, weights={})
    optypes = [o.optype for o in ctx.ops if o.optype not in ("create_cpu", "weights_dnnl")]
    assert optypes == ["input_cpu", "reorder_dnnl"] + ["qconv2d_dnnl"] * 3 + ["reorder_dnnl"], \
        optypes
    fused = next(o for o in ctx.ops if "residual" in o.tensors_in)
    assert fused.tensors_in["residual"] == "t0"
    assert fused.values["mid_scale"] == np.float32(scales[0])
    assert (fused.values["mid_zero"], fused.values["residual_zero"]) == zeros[:2]
    assert fused.values["call"].impl_info.startswith("jit"), fused.values["call"].impl_info
    got = run(ctx, {"src": src})["r"]
    assert np.mean((want > 0) & (want < 255)) > 0.8  # neither saturated nor cut by a relu
    if scales[0] == 0.125:
        np.testing.assert_array_equal(got, want)
    else:
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
        assert np.mean(got != want) < 0.02


@pytest.mark.parametrize("case", ["residual read later", "other quantization"])
def test_int8_residual_add_stays_where_it_cannot_fuse(case):
    """No qint8_sum where the convolution may not write into the residual (read after
    it), or where the sum dequantizes the convolution's output otherwise than it was
    quantized: the qelew runs on its own, the values the cpu's."""
    rng = np.random.default_rng(25)
    src = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    weights = [rng.integers(-64, 65, (8, 8, 3, 3)).astype(np.int8) for _ in range(4)]
    doc = _residual_block(src, weights, (0.125, 0.125, 0.125), (2, 3, 1),
                          later_reader=case == "residual read later")
    if case == "other quantization":  # the sum reads the third's output at another scale
        _set_static(doc["ops"], "src1_scale", np.array([0.25], np.float32))
    want = run(compiled(doc, load=True), {"src": src})
    ctx = compiled(doc, "dnnl", load=True, weights={})
    assert [o.optype for o in ctx.ops].count("qelew_dnnl") == 1
    assert not any("residual" in o.tensors_in for o in ctx.ops)
    got = run(ctx, {"src": src})
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("case", ["no mid_scale", "other shape", "float output"])
def test_qconv2d_dnnl_refuses_a_residual_it_cannot_add(case):
    """A qconv2d_dnnl op in an IR (as a compile writes it) with a residual but no
    mid_scale, a residual of another shape, or a float output is refused."""
    src = np.zeros((1, 8, 4, 4), np.uint8)
    residual = np.zeros((1, 8, 4, 4 if case != "other shape" else 3), np.uint8)
    statics = {"weight": np.ones((8, 8, 1, 1), np.int8), "src_scale": np.ones(1, np.float32),
               "weight_scale": np.ones(1, np.float32)}
    if case != "float output":
        statics["dst_scale"] = np.ones(1, np.float32)
    ops = [input_op("src", src), input_op("residual", residual)]
    ops += [create_op(k, v) for k, v in statics.items()]
    ops.append(op("q", "qconv2d_dnnl", {"src": "src", "residual": "residual",
                                        **{k: k for k in statics}}, {"dst": "out"},
                  size=[1, 1], mid_scale=0.0 if case == "no mid_scale" else 0.5,
                  dtype="TL_FLOAT" if case == "float output" else "TL_UINT8"))
    for o in ops[:-1]:
        o["optype"] += "_cpu"
    msg = ("a residual is added into a TL_UINT8 or TL_INT8 dst" if case == "float output"
           else "a residual has dst's shape and comes with mid_scale")
    with pytest.raises(LightNetError, match=msg):
        Context().init({"ops": ops})


@pytest.mark.parametrize("case", ["product with zero points", "scale made at run time"])
def test_qelew_dnnl_refuses_what_it_cannot_fold(case):
    """A qelew_dnnl op in an IR (as a compile writes it) whose zero points oneDNN's
    product cannot take, or whose scales are not known at load, is refused."""
    a = np.zeros((1, 4, 2, 2), np.uint8)
    statics = _qelew_statics(np.uint8, (0.5, 0.5, 1.0), (1, 1, 0))
    doc = _qelew_doc(a, a, statics, "TL_MUL" if case.startswith("product") else "TL_SUM")
    if case.startswith("scale"):
        doc["ops"][2] = input_op("src1_scale", statics["src1_scale"])
    for o in doc["ops"]:
        o["optype"] = {"input": "input_cpu", "create": "create_cpu"}.get(o["optype"],
                                                                        "qelew_dnnl")
    msg = ("a product's inputs have no zero point" if case.startswith("product")
           else "the scales and zero points are given at load")
    with pytest.raises(LightNetError, match=msg):
        Context().init(doc)
