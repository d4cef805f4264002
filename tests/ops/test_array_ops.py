"""Array, element-wise, reduction, sort, resampling and detection ops through the
whole runtime: small IR models (`input` ops fed with set_data, or `create`
constants) feeding the op are checked, compiled for cpu, loaded and run, and
the outputs compared with naive references written here with loops."""

import itertools
import math

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.ir.tensor import DType
from tests.helpers import assert_check_error, op_context, op_error, rand, run_op
from tests.irbuild import create_op, input_op, op


def each_index(shape):
    return itertools.product(*(range(d) for d in shape))


# ---------------------------------------------------------------- zeros, arange


def test_zeros_are_zeroed_on_every_run():
    ctx = Context()
    ctx.init({"ops": [op("op", "zeros", outs={"dst": "z"}, dtype="TL_INT16", dims=[2, 3])]})
    ctx.compile("cpu")
    ctx.load()
    ctx.arrays["z"][...] = 7
    ctx.run()
    got = ctx.get_data("z")
    assert got.dtype == np.int16 and got.shape == (2, 3) and not got.any()


@pytest.mark.parametrize("dtype, start, stop, step", [
    ("TL_FLOAT", 0, 1, 0.1), ("TL_DOUBLE", -2.5, 3, 0.75), ("TL_INT32", 10, -3, -4),
    ("TL_UINT8", 0, 256, 1), ("TL_INT8", -128, 128, 17),
])
def test_arange_against_loop(dtype, start, stop, step):
    ctx = Context()
    ctx.init({"ops": [op("op", "arange", outs={"dst": "a"},
                         dtype=dtype, start=start, stop=stop, step=step)]})
    ctx.compile("cpu")
    ctx.load()
    ctx.run()
    n = math.ceil((stop - start) / step)
    want = np.array([start + step * i for i in range(n)]).astype(DType.from_name(dtype).np)
    got = ctx.get_data("a")
    assert ctx.tensors["a"].static and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_arange_values_must_fit_the_integer_dtype():
    ctx = Context()
    with pytest.raises(LightNetError) as info:
        ctx.init({"ops": [op("op", "arange", outs={"dst": "a"},
                             dtype="TL_INT8", start=0, stop=200, step=50)]})
    assert_check_error(info.value.__cause__, "arange", "param 'step'", "check",
                       "(the first and last values fit the integer dtype)",
                       "start=0.0, stop=200.0")


# ---------------------------------------------------------------- views


def test_reshape_is_a_view_of_src():
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ctx = op_context("reshape", {"src": src}, {"dims": [4, -1]})
    assert np.shares_memory(ctx.arrays["out_dst"], ctx.arrays["src"])
    np.testing.assert_array_equal(ctx.get_data("out_dst"), src.reshape(4, 6))
    ctx.set_data("src", -src)  # no run: the view reads src's memory
    np.testing.assert_array_equal(ctx.get_data("out_dst"), -src.reshape(4, 6))


def test_forward_is_a_view_of_src():
    src = np.array([[1, 2], [3, 4]], np.int32)
    ctx = op_context("forward", {"src": src})
    assert np.shares_memory(ctx.arrays["out_dst"], ctx.arrays["src"])
    assert ctx.arrays["out_dst"].dtype == np.int32
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("out_dst"), src)


@pytest.mark.parametrize("start, stop, step", [
    (0, 10, 1), (1, 10, 3), (2, 9, 3), (9, -1, -1), (8, 0, -3), (5, 6, 4), (0.5, 3, 0.75),
])
def test_rearange_fills_src_memory(start, stop, step):
    """tl_tensor_rearange: dst is src's memory, holding start + step * i."""
    n = math.ceil((stop - start) / step)
    src = np.full(n, 7.0, dtype=np.float32)
    ctx = op_context("rearange", {"src": src}, {"start": start, "stop": stop, "step": step})
    assert np.shares_memory(ctx.arrays["out_dst"], ctx.arrays["src"])
    ctx.run()
    want = [start + step * i for i in range(n)]
    np.testing.assert_allclose(ctx.get_data("out_dst"), want, rtol=1e-6)
    np.testing.assert_allclose(ctx.get_data("src"), want, rtol=1e-6)


def test_views_chain_and_feed_later_ops():
    """rearange -> reshape -> forward -> relu: the outputs share the input's
    memory, and every run refills it whatever data it was given."""
    src = np.arange(-6, 0, dtype=np.float32)
    extra = [
        op("r", "reshape", {"src": "out_dst"}, {"dst": "grid"}, dims=[2, 3]),
        op("f", "forward", {"src": "grid"}, {"dst": "same"}),
        op("act", "relu", {"src": "same"}, {"dst": "pos"}),
    ]
    ctx = op_context("rearange", {"src": src}, {"start": 3, "stop": -3, "step": -1}, extra=extra)
    for name in ("out_dst", "grid", "same"):
        assert np.shares_memory(ctx.arrays[name], ctx.arrays["src"]), name
    for data in (src, src[::-1].copy()):
        ctx.set_data("src", data)
        ctx.run()
        np.testing.assert_array_equal(ctx.get_data("pos"), [[3, 2, 1], [0, 0, 0]])


def test_view_errors():
    assert_check_error(op_error("reshape", {"src": np.zeros((2, 3))}, {"dims": [5, -1]}),
                       "reshape", "param 'dims'", "check",
                       "(the product of the other dims divides the element count of src), "
                       "found src=float64[2, 3], dims=(5, -1)")
    assert_check_error(op_error("reshape", {"src": np.zeros(4)}, {"dims": [-2, 2]}),
                       "reshape", "param 'dims'", "ge", "found dims[0] = -2")
    assert_check_error(op_error("rearange", {"src": np.zeros(4)},
                                {"start": 4, "stop": 5, "step": 1}),
                       "rearange", "param 'step'", "check",
                       "(src has ceil((stop - start) / step) elements), found src=float64[4], "
                       "start=4.0, stop=5.0, step=1.0")
    assert_check_error(op_error("rearange", {"src": np.zeros(4)},
                                {"start": 1, "stop": 1, "step": 1}),
                       "rearange", "param 'step'", "check", "(src has ceil((stop - start) / step)")


# ---------------------------------------------------------------- transpose, concat


@pytest.mark.parametrize("axes", [*itertools.permutations(range(3)),
                                  *itertools.permutations(range(4))])
def test_transpose_every_permutation(axes):
    shape = (2, 3, 4, 5)[: len(axes)]
    src = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    got = run_op("transpose", {"src": src}, {"axes": list(axes)})
    assert got.shape == tuple(shape[a] for a in axes)
    for index in each_index(got.shape):
        src_index = [0] * len(axes)
        for i, a in enumerate(axes):
            src_index[a] = index[i]
        assert got[index] == src[tuple(src_index)]


def test_transpose_errors():
    err = op_error("transpose", {"src": np.zeros((2, 3, 4))}, {"axes": [0, 2, 3]})
    assert_check_error(err, "transpose", "param 'axes'", "check", "(axes is a permutation of "
                       "0 .. src.ndim - 1), found src=float64[2, 3, 4], axes=(0, 2, 3)")


def _concat_reference(arrays, axis):
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    out = np.empty(shape, arrays[0].dtype)
    at = 0
    for a in arrays:
        for index in each_index(a.shape):
            dst = list(index)
            dst[axis] += at
            out[tuple(dst)] = a[index]
        at += a.shape[axis]
    return out


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("static", [False, True])
def test_concat_three_inputs_on_each_axis(axis, static):
    rng = np.random.default_rng(axis)
    shapes = [[2, 3, 4] for _ in range(3)]
    for k, n in enumerate((1, 3, 2)):
        shapes[k][axis] = n
    arrays = [rand(rng, *s) for s in shapes]
    got = run_op("concat", {f"src{k + 1}": a for k, a in enumerate(arrays)}, {"axis": axis},
                 static=static)
    np.testing.assert_array_equal(got, _concat_reference(arrays, axis))


@pytest.mark.parametrize("axis", [0, 1])
def test_concat_of_computed_inputs(axis):
    """Inputs produced by ops: on axis 0 the planner may place them inside dst
    (no copy); the result is the same either way, run after run."""
    rng = np.random.default_rng(5)
    a, b, c = rand(rng, 1, 3), rand(rng, 2, 3), rand(rng, 1, 3)
    if axis == 1:
        a, b, c = a.T.copy(), b.T.copy(), c.T.copy()
    ops = [input_op("a", a), input_op("b", b), create_op("c", c),
           op("ra", "relu", {"src": "a"}, {"dst": "ra"}),
           op("tb", "tanh", {"src": "b"}, {"dst": "tb"}),
           op("op", "concat", {"src1": "ra", "src2": "tb", "src3": "c"}, {"dst": "out"},
              axis=axis)]
    ctx = Context()
    ctx.init({"ops": ops})
    ctx.compile("cpu")
    ctx.load()
    placed = [ctx.tensors[n].owner for n in ("ra", "tb", "c")]
    if axis == 0:
        assert placed[:2] == ["out", "out"] and placed[2] is None  # constants stay apart
    for k in range(2):
        ctx.set_data("a", a + k)
        ctx.set_data("b", b - k)
        ctx.run()
        want = _concat_reference([np.maximum(a + k, 0), np.tanh(b - k), c], axis)
        np.testing.assert_allclose(ctx.get_data("out"), want, rtol=1e-6)


def test_concat_errors():
    z = np.zeros
    assert_check_error(op_error("concat", {"src1": z((2, 3)), "src2": z((2, 3)),
                                           "src3": z((3, 3))}, {"axis": 1}),
                       "concat", "tensor_in 'src'", "check",
                       "(the inputs have the sizes of src1 on every axis but axis), found "
                       "src=[float64[2, 3], float64[2, 3], float64[3, 3]], axis=1")
    assert_check_error(op_error("concat", {"src1": z((2, 3)), "src2": z(6)}, {"axis": 0}),
                       "concat", "tensor_in 'src'", "check", "(every input has the rank of src1)")
    assert_check_error(op_error("concat", {"src1": z(2), "src2": z(2, np.float32)}, {"axis": 0}),
                       "concat", "tensor_in 'src'", "check", "(every input has the dtype of src1)")
    assert_check_error(op_error("concat", {"src1": z(2)}, {"axis": 0}),
                       "concat", "tensor_in 'src1..'", "len_ge", "at least 2 inputs, found 1")


# ---------------------------------------------------------------- elew

ELEW = {
    "TL_MUL": lambda x, y: x * y, "TL_DIV": lambda x, y: x / y,
    "TL_SUM": lambda x, y: x + y, "TL_SUB": lambda x, y: x - y,
    "TL_MAX": max, "TL_MIN": min, "TL_POW": lambda x, y: x ** y,
}
BROADCASTS = [
    ((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 3)), ((3,), (2, 3), (2, 3)),
    ((2, 1, 4), (3, 1), (2, 3, 4)), ((4, 1), (1, 5), (4, 5)), ((1,), (2, 2), (2, 2)),
    ((2, 3, 1, 1), (1, 2), (2, 3, 1, 2)),
]


def _broadcast_reference(a, b, f, out_shape):
    out = np.empty(out_shape, np.float64)
    for index in each_index(out_shape):
        ia = tuple(i if d > 1 else 0 for i, d in zip(index[len(index) - a.ndim:], a.shape))
        ib = tuple(i if d > 1 else 0 for i, d in zip(index[len(index) - b.ndim:], b.shape))
        out[index] = f(float(a[ia]), float(b[ib]))
    return out


@pytest.mark.parametrize("elew_op", list(ELEW))
@pytest.mark.parametrize("shape1, shape2, out_shape", BROADCASTS)
def test_elew_broadcasting(elew_op, shape1, shape2, out_shape):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2, shape1).astype(np.float32)
    b = rng.uniform(0.5, 2, shape2).astype(np.float32)
    got = run_op("elew", {"src1": a, "src2": b}, {"elew_op": elew_op})
    assert got.shape == out_shape and got.dtype == np.float32
    np.testing.assert_allclose(got, _broadcast_reference(a, b, ELEW[elew_op], out_shape),
                               rtol=1e-5)


def test_elew_integer_semantics():
    a = np.array([[7, -7, 100]], np.int8)
    b = np.array([[2], [-2]], np.int8)
    got = run_op("elew", {"src1": a, "src2": b}, {"elew_op": "TL_DIV"})
    np.testing.assert_array_equal(got, [[3, -3, 50], [-3, 3, -50]])  # toward zero
    got = run_op("elew", {"src1": a, "src2": b}, {"elew_op": "TL_POW"})
    np.testing.assert_array_equal(got[0], [49, 49, 127])  # saturated
    got = run_op("elew", {"src1": a, "src2": b}, {"elew_op": "TL_SUM"})
    assert got.dtype == np.int8 and got[0, 2] == 102


@pytest.mark.parametrize("shape1, shape2", [
    ((2, 3), (2,)), ((2, 3), (3, 2)), ((4, 1, 3), (2, 2)), ((5,), (4,)),
])
def test_elew_shapes_that_do_not_broadcast(shape1, shape2):
    err = op_error("elew", {"src1": np.zeros(shape1), "src2": np.zeros(shape2)},
                   {"elew_op": "TL_SUM"})
    assert_check_error(err, "elew", "tensor_in 'src2'", "check",
                       "(the shapes broadcast, each trailing dimension equal or 1)",
                       f"src1=float64[{', '.join(map(str, shape1))}], "
                       f"src2=float64[{', '.join(map(str, shape2))}]")


def test_elew_dtype_errors():
    err = op_error("elew", {"src1": np.zeros(2), "src2": np.zeros(2, np.float32)},
                   {"elew_op": "TL_SUM"})
    assert_check_error(err, "elew", "tensor_in 'src2'", "sametype",
                       "the dtype of 'src1' (TL_DOUBLE)")
    err = op_error("elew", {"src1": np.zeros(2), "src2": np.zeros(2)}, {"elew_op": "TL_SUM"},
                   dtypes={"src1": "TL_BOOL", "src2": "TL_BOOL"})
    assert_check_error(err, "elew", "tensor_in 'src1'", "dtype", "found TL_BOOL")


# ---------------------------------------------------------------- activations


def test_activations_against_loops():
    rng = np.random.default_rng(2)
    src = rand(rng, 3, 4) * 4
    cases = {
        "relu": ({}, lambda x: max(x, 0.0)),
        "sigmoid": ({}, lambda x: 1 / (1 + math.exp(-x))),
        "tanh": ({}, math.tanh),
        "lrelu": ({"negslope": 0.25}, lambda x: x if x >= 0 else x * 0.25),
        "clip": ({"min": -1.5, "max": 0.5}, lambda x: min(max(x, -1.5), 0.5)),
    }
    for optype, (params, f) in cases.items():
        got = run_op(optype, {"src": src}, params)
        want = np.vectorize(f)(src.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=optype)


def test_integer_activations():
    src = np.array([-100, -3, 0, 3, 100], np.int8)
    np.testing.assert_array_equal(run_op("relu", {"src": src}), [0, 0, 0, 3, 100])
    np.testing.assert_array_equal(run_op("lrelu", {"src": src}, {"negslope": 2.9}),
                                  [-200 + 256, -6, 0, 3, 100])  # slope 2; int8 wraps
    np.testing.assert_array_equal(run_op("clip", {"src": src}, {"min": -3.5, "max": 1e9}),
                                  [-3, -3, 0, 3, 100])


def test_activation_errors():
    err = op_error("sigmoid", {"src": np.zeros(2, np.int32)})
    assert_check_error(err, "sigmoid", "tensor_in 'src'", "dtype",
                       "TL_FLOAT or TL_DOUBLE, found TL_INT32 (int32[2])")
    err = op_error("clip", {"src": np.zeros(2)}, {"min": 0, "max": 1}, dtypes={"src": "TL_BOOL"})
    assert_check_error(err, "clip", "tensor_in 'src'", "dtype", "found TL_BOOL (bool[2])")
    err = op_error("clip", {"src": np.zeros(2)}, {"min": 1, "max": 0})
    assert_check_error(err, "clip", "param 'max'", "ge", "expected max >= min (1.0), found 0.0")
    err = op_error("clip", {"src": np.zeros(2, np.uint8)}, {"min": 0.2, "max": 0.8})
    assert_check_error(err, "clip", "param 'max'", "check", "(an integer lies in [min, max])")


# ---------------------------------------------------------------- softmax, maxreduce


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_against_loops(axis):
    rng = np.random.default_rng(3)
    src = rand(rng, 2, 3, 4) * 10
    src[0, 0, 0] = 500  # exp would overflow without the max subtracted
    got = run_op("softmax", {"src": src}, {"axis": axis})
    want = np.empty(src.shape)
    for index in each_index(src.shape):
        row = [src[index[:axis] + (k,) + index[axis + 1:]] for k in range(src.shape[axis])]
        m = max(row)
        want[index] = math.exp(src[index] - m) / sum(math.exp(x - m) for x in row)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.sum(axis=axis), 1, rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_maxreduce_arg_against_loops(axis, dtype):
    rng = np.random.default_rng(4)
    src = rng.integers(-3, 3, (3, 4, 5)).astype(dtype)  # many ties
    dst, arg = run_op("maxreduce_arg", {"src": src}, {"axis": axis}, outs=("dst", "arg"))
    shape = list(src.shape)
    shape[axis] = 1
    assert dst.shape == arg.shape == tuple(shape)
    assert dst.dtype == dtype and arg.dtype == np.int32
    for index in each_index(shape):
        row = [src[index[:axis] + (k,) + index[axis + 1:]] for k in range(src.shape[axis])]
        assert dst[index] == max(row)
        assert arg[index] == row.index(max(row))  # the first maximum
    np.testing.assert_array_equal(run_op("maxreduce", {"src": src}, {"axis": axis}), dst)


def test_reduce_errors():
    err = op_error("maxreduce_arg", {"src": np.zeros((2, 3))}, {"axis": 2}, outs=("dst", "arg"))
    assert_check_error(err, "maxreduce_arg", "param 'axis'", "lt", "axis < src.ndim (2), found 2")
    err = op_error("softmax", {"src": np.zeros(3)}, {"axis": -1})
    assert_check_error(err, "softmax", "param 'axis'", "ge", "axis >= 0, found -1")


# ---------------------------------------------------------------- upsample, resize


def _nearest_reference(src, out_shape, source_index):
    out = np.empty(out_shape, src.dtype)
    for index in each_index(out_shape):
        out[index] = src[tuple(source_index(i, axis) for axis, i in enumerate(index))]
    return out


def _linear_1d(x, n_in):
    """(i0, i1, w1) of a half-pixel coordinate, clamped to the axis."""
    x = min(max(x, 0.0), n_in - 1.0)
    i0 = math.floor(x)
    return i0, min(i0 + 1, n_in - 1), x - i0


def _linear_reference(src, out_shape, coordinate):
    out = np.empty(out_shape)
    for index in each_index(out_shape):
        taps = [_linear_1d(coordinate(i, axis), src.shape[axis]) for axis, i in enumerate(index)]
        total = 0.0
        for corner in itertools.product((0, 1), repeat=src.ndim):
            weight, at = 1.0, []
            for (i0, i1, w1), c in zip(taps, corner):
                weight *= w1 if c else 1 - w1
                at.append(i1 if c else i0)
            total += weight * float(src[tuple(at)])
        out[index] = total
    return out


def _tensorlight_nearest(i, n_in, n_out):
    """tl_tensor_resize's nearest_resize: roundf(((float)i + 0.5) * scale - 0.5),
    scale = (float)in / (float)out, the product taken to float."""
    scale = float(np.float32(n_in) / np.float32(n_out))
    x = float(np.float32((i + 0.5) * scale - 0.5))
    rounded = math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)  # roundf
    return min(max(rounded, 0), n_in - 1)


def test_tensorlight_nearest_by_hand():
    # in 4, out 2: 2i + 0.5 rounds away from zero to 1, 3; in 2, out 3: 0, 1, 1
    assert [_tensorlight_nearest(i, 4, 2) for i in range(2)] == [1, 3]
    assert [_tensorlight_nearest(i, 2, 3) for i in range(3)] == [0, 1, 1]
    assert [_tensorlight_nearest(i, 3, 9) for i in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("scales", [[2, 3], [1, 2], [3, 1], [0.5, 2], [1.5, 2.5], [0.75, 1.25]])
def test_upsample_against_loops(scales):
    rng = np.random.default_rng(6)
    src = rand(rng, 2, 4)
    out_shape = tuple(math.floor(d * s) for d, s in zip(src.shape, scales))
    s32 = [float(np.float32(s)) for s in scales]  # scales are float params
    got = run_op("upsample", {"src": src}, {"mode": "TL_NEAREST", "scales": scales})
    want = _nearest_reference(
        src, out_shape, lambda i, axis: _tensorlight_nearest(i, src.shape[axis], out_shape[axis]))
    np.testing.assert_array_equal(got, want)
    got = run_op("upsample", {"src": src}, {"mode": "TL_LINEAR", "scales": scales})
    want = _linear_reference(src, out_shape, lambda i, axis: (i + 0.5) / s32[axis] - 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_upsample_nearest_integer_dtype_and_rank_4():
    src = np.arange(12, dtype=np.uint8).reshape(1, 3, 2, 2)
    got = run_op("upsample", {"src": src}, {"mode": "TL_NEAREST", "scales": [1, 1, 2, 2]})
    np.testing.assert_array_equal(got, src.repeat(2, axis=2).repeat(2, axis=3))


@pytest.mark.parametrize("dims", [[4, 8], [2, 4], [3, 5], [1, 1], [5, 2]])
def test_resize_against_loops(dims):
    rng = np.random.default_rng(7)
    src = rand(rng, 2, 4)
    got = run_op("resize", {"src": src}, {"mode": "TL_NEAREST", "dims": dims})
    want = _nearest_reference(src, tuple(dims),
                              lambda i, axis: i * src.shape[axis] // dims[axis])
    np.testing.assert_array_equal(got, want)
    got = run_op("resize", {"src": src}, {"mode": "TL_LINEAR", "dims": dims})
    want = _linear_reference(src, tuple(dims),
                             lambda i, axis: (i + 0.5) * src.shape[axis] / dims[axis] - 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_resample_errors():
    err = op_error("upsample", {"src": np.zeros((2, 2))}, {"mode": "TL_LINEAR", "scales": [2, 2]},
                   dtypes={"src": "TL_INT32"})
    assert_check_error(err, "upsample", "param 'mode'", "check",
                       "(TL_LINEAR needs a floating dtype)")
    err = op_error("upsample", {"src": np.zeros((2, 2))}, {"mode": "TL_NEAREST", "scales": [2, 0]})
    assert_check_error(err, "upsample", "param 'scales'", "gt", "found scales[1] = 0.0")
    err = op_error("resize", {"src": np.zeros((2, 2))}, {"mode": "TL_NEAREST", "dims": [2, 2, 2]})
    assert_check_error(err, "resize", "param 'dims'", "len", "src.ndim (2) elements, found 3")


# ---------------------------------------------------------------- sort, pick1d, submean


@pytest.mark.parametrize("dir", ["TL_SORT_DIR_ASCENDING", "TL_SORT_DIR_DESCENDING"])
def test_sort1d_by_key_is_stable(dir):
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 4, 50).astype(np.float32)  # many equal keys
    vals = np.arange(50, dtype=np.int32)
    dst_key, dst_val = run_op("sort1d_by_key", {"src_key": keys, "src_val": vals}, {"dir": dir},
                              outs=("dst_key", "dst_val"))
    descending = dir == "TL_SORT_DIR_DESCENDING"
    order = sorted(range(50), key=lambda i: keys[i], reverse=descending)  # stable
    np.testing.assert_array_equal(dst_key, keys[order])
    np.testing.assert_array_equal(dst_val, vals[order])
    got = run_op("sort1d", {"src_key": keys}, {"dir": dir}, outs=("dst_key",))
    np.testing.assert_array_equal(got, keys[order])


def test_sort_errors():
    err = op_error("sort1d_by_key", {"src_key": np.zeros(3), "src_val": np.zeros(4)},
                   {"dir": "TL_SORT_DIR_ASCENDING"}, outs=("dst_key", "dst_val"))
    assert_check_error(err, "sort1d_by_key", "tensor_in 'src_val'", "len",
                       "src_key.len (3) elements, found 4")
    err = op_error("sort1d", {"src_key": np.zeros(3)}, {"dir": "UP"}, outs=("dst_key",))
    assert_check_error(err, "sort1d", "param 'dir'", "choices", "found 'UP'")


def test_pick1d_against_loop():
    src = np.arange(12, dtype=np.float64) * 10
    index = np.array([5, 0, 2, 2, 1], np.int32)
    got = run_op("pick1d", {"src": src, "src_index": index}, {"len": 4, "stride": 2})
    want = [src[index[i] * 2 + j] for i in range(4) for j in range(2)]
    np.testing.assert_array_equal(got, want)
    err = op_error("pick1d", {"src": src, "src_index": index}, {"len": 1, "stride": 13})
    assert_check_error(err, "pick1d", "param 'stride'", "le", "stride <= src.len (12), found 13")


def test_submean_against_loop():
    rng = np.random.default_rng(9)
    src = rng.integers(0, 256, (3, 4, 3)).astype(np.uint8)
    mean = [104.5, 117.25, 123.0]
    got = run_op("submean", {"src": src}, {"mean": mean, "dtype": "TL_FLOAT"})
    assert got.shape == (3, 3, 4) and got.dtype == np.float32
    for c, h, w in each_index(got.shape):
        assert got[c, h, w] == np.float32(src[h, w, c] - mean[c])
    err = op_error("submean", {"src": src}, {"mean": [1, 2], "dtype": "TL_FLOAT"})
    assert_check_error(err, "submean", "param 'mean'", "len", "src.shape[2] (3) elements, found 2")


# ---------------------------------------------------------------- detection


def _bbox_sqd_reference(delta, anchor, width, height, img_w, img_h, x_shift, y_shift):
    sx, sy = img_w / width, img_h / height
    out = np.empty(delta.shape)
    for n, y, x, a in each_index(delta.shape[:4]):
        dx, dy, dw, dh = map(float, delta[n, y, x, a])
        acx, acy, aw, ah = map(float, anchor[y, x, a])
        cx = (acx + dx * aw) * sx + x_shift
        cy = (acy + dy * ah) * sy + y_shift
        w = aw * (math.exp(dw) if dw < 1 else dw * math.e) * sx
        h = ah * (math.exp(dh) if dh < 1 else dh * math.e) * sy
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        limits = (img_w - 1, img_h - 1, img_w - 1, img_h - 1)
        out[n, y, x, a] = [min(max(v, 0), lim) for v, lim in zip(box, limits)]
    return out


def test_transform_bboxSQD_against_loops():
    rng = np.random.default_rng(10)
    delta = rand(rng, 2, 3, 4, 2, 4)
    anchor = np.abs(rand(rng, 3, 4, 2, 4)) * 20
    params = {"width": 40, "height": 30, "img_width": 80, "img_height": 45,
              "x_shift": 3, "y_shift": -2}
    got = run_op("transform_bboxSQD", {"src_delta": delta, "src_anchor": anchor}, params)
    want = _bbox_sqd_reference(delta, anchor, 40, 30, 80, 45, 3, -2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    err = op_error("transform_bboxSQD", {"src_delta": delta, "src_anchor": anchor[:2]}, params)
    assert_check_error(err, "transform_bboxSQD", "tensor_in 'src_anchor'", "check",
                       "(src_anchor is [H, W, A, 4], or the shape of src_delta)")


def test_detect_yolov3_against_loops():
    rng = np.random.default_rng(11)
    n, a, c, h, w = 1, 2, 3, 2, 3
    feature = rand(rng, n, a * (5 + c), h, w)
    anchors = np.array([[10, 13], [30, 61]], np.float32)
    outs = ("box_centers", "box_sizes", "boxes", "confs", "probs")
    got = dict(zip(outs, run_op("detect_yolov3", {"feature": feature, "anchors": anchors},
                                {"img_width": 96, "img_height": 64}, outs=outs)))
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    f = feature.reshape(n, a, 5 + c, h, w).astype(np.float64)
    for k, y, x in each_index((a, h, w)):
        cx = (sig(f[0, k, 0, y, x]) + x) * 96 / w
        cy = (sig(f[0, k, 1, y, x]) + y) * 64 / h
        bw = anchors[k, 0] * min(max(math.exp(f[0, k, 2, y, x]), 1e-9), 50)
        bh = anchors[k, 1] * min(max(math.exp(f[0, k, 3, y, x]), 1e-9), 50)
        close = lambda got_, want: np.testing.assert_allclose(got_, want, rtol=1e-5)  # noqa
        close(got["box_centers"][0, k, :, y, x], [cx, cy])
        close(got["box_sizes"][0, k, :, y, x], [bw, bh])
        close(got["boxes"][0, k, :, y, x], [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2])
        close(got["confs"][0, k, 0, y, x], sig(f[0, k, 4, y, x]))
        close(got["probs"][0, k, :, y, x], [sig(f[0, k, 5 + j, y, x]) for j in range(c)])
    err = op_error("detect_yolov3", {"feature": feature[:, :13], "anchors": anchors},
                   {"img_width": 96, "img_height": 64}, outs=outs)
    assert_check_error(err, "detect_yolov3", "tensor_in 'anchors'", "check",
                       "(feature has A * (5 + C) channels, C >= 1 classes)")


# ---------------------------------------------------------------- fprint


def test_fprint_appends_each_run(tmp_path):
    path = tmp_path / "dump.txt"
    src = np.array([[1, 2.5]], np.float32)
    ctx = op_context("fprint", {"src": src}, {"msg": "values", "file": str(path)}, outs=())
    ctx.run()
    ctx.set_data("src", src * 2)
    ctx.run()
    assert path.read_text(encoding="utf-8") == (
        "values\n[[1.000 2.500]]\nvalues\n[[2.000 5.000]]\n")
