import itertools
import math
import warnings

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.elementwise import (
    clip,
    elew,
    gelu,
    hard_sigmoid,
    hard_swish,
    lrelu,
    relu,
    sigmoid,
    submean,
    swish,
    tanh,
    unary,
)
from lightnet.ir.shapes import broadcast_shape, submean_shape
from tests.helpers import arena_view, assert_guards

RTOL, ATOL = 1e-5, 1e-6

SCALAR_OPS = {
    "TL_MUL": lambda a, b: a * b,
    "TL_DIV": lambda a, b: a / b,
    "TL_SUM": lambda a, b: a + b,
    "TL_SUB": lambda a, b: a - b,
    "TL_MAX": lambda a, b: a if a > b else b,
    "TL_MIN": lambda a, b: a if a < b else b,
    "TL_POW": lambda a, b: math.pow(a, b),
}


def naive_broadcast_op(a, b, f, out_shape):
    """Apply scalar f over the broadcast of a and b, indexing each by hand."""
    nd = len(out_shape)
    a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    b = b.reshape((1,) * (nd - b.ndim) + b.shape)
    out = np.zeros(out_shape)
    for idx in itertools.product(*map(range, out_shape)):
        ia = tuple(0 if a.shape[k] == 1 else i for k, i in enumerate(idx))
        ib = tuple(0 if b.shape[k] == 1 else i for k, i in enumerate(idx))
        out[idx] = f(float(a[ia]), float(b[ib]))
    return out


def operands(rng, shape1, shape2, op, dtype):
    a = rng.uniform(0.5, 2.0, shape1) if op == "TL_POW" else rng.standard_normal(shape1)
    b = rng.standard_normal(shape2)
    if op == "TL_DIV":
        b = np.where(np.abs(b) < 0.1, 0.5, b)
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("op", list(SCALAR_OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elew_same_shape(op, dtype):
    rng = np.random.default_rng(len(op) + (dtype == np.float64))
    a, b = operands(rng, (3, 4, 5), (3, 4, 5), op, dtype)
    arena, dst = arena_view((3, 4, 5), dtype=dtype)
    assert elew(a, b, dst, elew_op=op) is None
    expected = naive_broadcast_op(a, b, SCALAR_OPS[op], (3, 4, 5))
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)
    assert_guards(arena)


@pytest.mark.parametrize("op", list(SCALAR_OPS))
@pytest.mark.parametrize(
    "shape1, shape2, out_shape",
    [
        ((2, 3, 4), (4,), (2, 3, 4)),
        ((2, 1, 4), (3, 1), (2, 3, 4)),
        ((1,), (2, 3), (2, 3)),
        ((), (2, 2), (2, 2)),
        ((3, 1), (1, 5), (3, 5)),
    ],
)
def test_elew_broadcasting(op, shape1, shape2, out_shape):
    rng = np.random.default_rng(sum(shape1) * 7 + sum(shape2))
    a, b = operands(rng, shape1, shape2, op, np.float32)
    assert broadcast_shape(shape1, shape2) == out_shape
    _, dst = arena_view(out_shape)
    elew(a, b, dst, elew_op=op)
    expected = naive_broadcast_op(a, b, SCALAR_OPS[op], out_shape)
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)


def test_elew_non_contiguous_inputs():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3)).astype(np.float32).T
    b = rng.standard_normal((3, 8)).astype(np.float32)[:, ::2]
    _, dst = arena_view((3, 4))
    elew(a, b, dst, elew_op="TL_SUB")
    np.testing.assert_allclose(
        dst, naive_broadcast_op(a, b, SCALAR_OPS["TL_SUB"], (3, 4)), rtol=RTOL, atol=ATOL
    )


def test_elew_hand_values():
    a = np.array([1.0, -2.0, 3.0, 4.0], np.float32)
    b = np.array([2.0, 2.0, -1.0, 0.5], np.float32)
    expected = {
        "TL_MUL": [2, -4, -3, 2],
        "TL_DIV": [0.5, -1, -3, 8],
        "TL_SUM": [3, 0, 2, 4.5],
        "TL_SUB": [-1, -4, 4, 3.5],
        "TL_MAX": [2, 2, 3, 4],
        "TL_MIN": [1, -2, -1, 0.5],
        "TL_POW": [1, 4, 1 / 3, 2],
    }
    for op, want in expected.items():
        dst = np.empty(4, np.float32)
        elew(a, b, dst, elew_op=op)
        np.testing.assert_allclose(dst, want, rtol=RTOL, atol=ATOL, err_msg=op)


def test_elew_integer_div_truncates_like_c():
    a = np.array([7, -7, 7, -7, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    dst = np.empty(5, np.int32)
    elew(a, b, dst, elew_op="TL_DIV")
    np.testing.assert_array_equal(dst, [3, -3, -3, 3, 2])


def test_elew_integer_pow_saturates_like_tensorlight():
    a = np.array([3, -3, 2, 2, 5], np.int8)
    b = np.array([5, 5, -1, 3, 0], np.int8)
    dst = np.empty(5, np.int8)
    elew(a, b, dst, elew_op="TL_POW")
    np.testing.assert_array_equal(dst, [127, -128, 0, 8, 1])


def test_elew_integer_other_ops():
    a = np.array([5, -3, 0], np.int32)
    b = np.array([2, 4, -1], np.int32)
    for op in ["TL_MUL", "TL_SUM", "TL_SUB", "TL_MAX", "TL_MIN"]:
        dst = np.empty(3, np.int32)
        elew(a, b, dst, elew_op=op)
        want = [SCALAR_OPS[op](int(x), int(y)) for x, y in zip(a, b)]
        np.testing.assert_array_equal(dst, want, err_msg=op)


def test_elew_unknown_op():
    dst = np.empty(2, np.float32)
    with pytest.raises(ValueError, match="unknown elew_op 'TL_MOD'.*TL_MUL"):
        elew(dst, dst, dst, elew_op="TL_MOD")


def unary_reference(src, f):
    return np.array([f(float(x)) for x in src.ravel()]).reshape(src.shape)


def test_relu_sigmoid_tanh_against_loops():
    rng = np.random.default_rng(11)
    src = (rng.standard_normal((4, 5, 6)) * 4).astype(np.float32)
    for kernel, f in [
        (relu, lambda x: x if x > 0 else 0.0),
        (sigmoid, lambda x: 1 / (1 + math.exp(-x))),
        (tanh, math.tanh),
    ]:
        arena, dst = arena_view(src.shape)
        assert kernel(src, dst) is None
        np.testing.assert_allclose(dst, unary_reference(src, f), rtol=RTOL, atol=ATOL)
        assert_guards(arena)


def test_sigmoid_extremes_without_warnings():
    src = np.array([-1000, -100, -20, 0, 20, 100, 1000], np.float32)
    dst = np.empty_like(src)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sigmoid(src, dst)
    np.testing.assert_allclose(dst, [0, 0, 2.0611537e-09, 0.5, 1, 1, 1], rtol=RTOL, atol=ATOL)


def test_unary_in_place():
    rng = np.random.default_rng(12)
    base = rng.standard_normal(50).astype(np.float32)
    for kernel, f in [
        (relu, lambda x: max(x, 0.0)),
        (sigmoid, lambda x: 1 / (1 + math.exp(-x))),
        (tanh, math.tanh),
    ]:
        buf = base.copy()
        kernel(buf, buf)
        np.testing.assert_allclose(buf, unary_reference(base, f), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("negslope", [0.1, 0.0, 1.0, 1.5, -0.5])
def test_lrelu(negslope):
    rng = np.random.default_rng(13)
    src = rng.standard_normal((3, 7)).astype(np.float32)
    src[0, 0] = 0.0
    _, dst = arena_view(src.shape)
    assert lrelu(src, dst, negslope=negslope) is None
    expected = unary_reference(src, lambda x: x if x >= 0 else x * negslope)
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=ATOL)
    buf = src.copy()
    lrelu(buf, buf, negslope=negslope)
    np.testing.assert_allclose(buf, expected, rtol=RTOL, atol=ATOL)


def test_lrelu_integer_casts_slope_like_tensorlight():
    src = np.array([-5, -1, 0, 3], np.int32)
    dst = np.empty(4, np.int32)
    lrelu(src, dst, negslope=0.1)  # (int32)0.1 == 0
    np.testing.assert_array_equal(dst, [0, 0, 0, 3])
    lrelu(src, dst, negslope=2.7)  # (int32)2.7 == 2
    np.testing.assert_array_equal(dst, [-10, -2, 0, 3])


def test_clip():
    src = np.array([[-3, -1, 0], [0.5, 2, 9]], np.float32)
    _, dst = arena_view(src.shape)
    assert clip(src, dst, min=-1, max=2) is None
    np.testing.assert_array_equal(dst, [[-1, -1, 0], [0.5, 2, 2]])



@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint16])
def test_clip_integer_rounds_bounds_inward_and_saturates(dtype):
    info = np.iinfo(dtype)
    src = np.array([info.min, 0, 1, 2, 3, info.max], dtype)
    dst = np.empty_like(src)
    clip(src, dst, min=0.5, max=2.5)  # float bounds: numpy alone refuses them
    np.testing.assert_array_equal(dst, [1, 1, 1, 2, 2, 2])
    clip(src, dst, min=-1e30, max=1e30)  # beyond the dtype: saturated
    np.testing.assert_array_equal(dst, src)
    assert dst.dtype == dtype

def test_submean_hwc_to_chw():
    rng = np.random.default_rng(14)
    h, w, c = 4, 5, 3
    src = rng.integers(0, 256, (h, w, c)).astype(np.uint8)
    mean = [103.94, 116.78, 123.68]
    assert submean_shape(src.shape) == (c, h, w)
    arena, dst = arena_view((c, h, w))
    assert submean(src, dst, mean=mean) is None
    expected = np.zeros((c, h, w))
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                expected[ci, y, x] = float(src[y, x, ci]) - mean[ci]
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=1e-4)
    assert_guards(arena)


def test_submean_other_dtypes_and_channel_count():
    src = np.arange(2 * 2 * 4, dtype=np.float32).reshape(2, 2, 4)
    dst = np.empty((4, 2, 2), np.float64)
    submean(src, dst, mean=np.array([0.0, 1.0, 2.0, 3.0]))
    np.testing.assert_allclose(dst[3], [[0, 4], [8, 12]])
    np.testing.assert_allclose(dst[0], [[0, 4], [8, 12]])


# --- activations of modern networks, element by element with math ------------------------

def scalar_loop(x, f):
    return np.array([f(float(v)) for v in x.reshape(-1)]).reshape(x.shape)


def hard_sigmoid_ref(v, alpha, beta):
    return max(0.0, min(1.0, alpha * v + beta))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha, beta", [(0.2, 0.5), (1 / 6, 0.5), (0.5, -0.25)])
def test_hard_sigmoid_and_hard_swish(dtype, alpha, beta):
    x = np.concatenate([np.linspace(-8, 8, 97), [-3, 3, -2.5, 2.5]]).astype(dtype)
    arena, dst = arena_view(x.shape, dtype)
    hard_sigmoid(x, dst, alpha=alpha, beta=beta)
    np.testing.assert_allclose(dst, scalar_loop(x, lambda v: hard_sigmoid_ref(v, alpha, beta)),
                               rtol=1e-6, atol=1e-7)
    hard_swish(x, dst, alpha=alpha, beta=beta)
    np.testing.assert_allclose(dst, scalar_loop(x, lambda v: v * hard_sigmoid_ref(v, alpha, beta)),
                               rtol=1e-6, atol=1e-7)
    assert_guards(arena)


def test_hard_swish_hand_computed():
    dst = np.empty(5, np.float32)
    hard_swish(np.array([-4, -3, 0, 1.5, 3], np.float32), dst, alpha=1 / 6, beta=0.5)
    np.testing.assert_allclose(dst, [0, 0, 0, 1.5 * 0.75, 3], rtol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swish(dtype, alpha):
    x = np.concatenate([np.linspace(-20, 20, 101), [-1000, 1000, 0]]).astype(dtype)
    dst = np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swish(x, dst, alpha=alpha)

    def ref(v):
        t = alpha * v
        return v / (1 + math.exp(-t)) if t > -700 else 0.0

    np.testing.assert_allclose(dst, scalar_loop(x, ref), rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("dtype, erf_error", [(np.float32, 4.3e-7), (np.float64, 2.3e-16)])
def test_gelu_exact(dtype, erf_error):
    """Within what erf's absolute error allows: 0.5 |x| erf_error, plus rounding."""
    x = np.concatenate([np.linspace(-9, 9, 181), [-30, 30, 0]]).astype(dtype)
    dst = np.full_like(x, np.nan)
    gelu(x, dst, approximate="none")
    want = scalar_loop(x, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    bound = 0.5 * np.abs(x.astype(np.float64)) * erf_error + 4 * np.finfo(dtype).eps * np.abs(want)
    assert (np.abs(dst - want) <= bound).all()


def test_gelu_tanh_and_its_distance_from_exact():
    x = np.linspace(-6, 6, 121)
    dst = np.empty_like(x)
    gelu(x, dst, approximate="tanh")
    c = math.sqrt(2 / math.pi)
    want = scalar_loop(x, lambda v: 0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v ** 3))))
    np.testing.assert_allclose(dst, want, rtol=1e-14, atol=1e-15)
    exact = scalar_loop(x, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    assert 1e-4 < np.abs(dst - exact).max() < 1e-3  # the two forms do differ


def test_gelu_with_carved_scratch_and_bad_approximation():
    from lightnet.archs.cpu.kernels import carve, gelu_scratch, scratch_bytes

    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    layout = gelu_scratch(x.shape, np.float32, "none")
    assert gelu_scratch(x.shape, np.float32, "tanh") == ()
    buffer = np.full(scratch_bytes(layout), 0xFF, np.uint8)
    dst = np.empty_like(x)
    gelu(x, dst, approximate="none", ws=carve(buffer, layout))
    want = scalar_loop(x, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    np.testing.assert_allclose(dst, want, rtol=1e-6, atol=5e-7)
    with pytest.raises(ValueError, match="unknown gelu approximation 'fast'"):
        gelu(x, dst, approximate="fast")


@pytest.mark.parametrize("func, f", [
    ("exp", lambda v: math.exp(v) if v < 709 else math.inf),
    ("neg", lambda v: -v),
    ("reciprocal", lambda v: 1 / v if v else math.inf),
    ("sqrt", lambda v: math.sqrt(v) if v >= 0 else math.nan),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(func, f, dtype):
    x = np.array([-2.5, -1, 0.0, 0.25, 1, 3.5, 80, 800], dtype)
    arena, dst = arena_view(x.shape, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unary(x, dst, func=func)
    want = scalar_loop(x, f)
    if dtype == np.float32:
        want = want.astype(np.float32)  # exp(800) overflows float32 to inf
    np.testing.assert_allclose(dst, want, rtol=1e-6)
    assert_guards(arena)


def test_unary_neg_of_integers_and_unknown_func():
    dst = np.empty(3, np.int32)
    unary(np.array([5, -7, 0], np.int32), dst, func="neg")
    assert dst.tolist() == [-5, 7, 0]
    with pytest.raises(ValueError, match="unknown unary func 'logit'"):
        unary(np.ones(2), np.empty(2), func="logit")


@pytest.mark.parametrize("func,alpha,beta,f", [
    ("softplus", 1, 0, lambda v: math.log1p(math.exp(v)) if v < 30 else v),
    ("softsign", 1, 0, lambda v: v / (1 + abs(v))),
    ("mish", 1, 0, lambda v: v * math.tanh(math.log1p(math.exp(v)) if v < 30 else v)),
    ("elu", 0.3, 0, lambda v: v if v > 0 else 0.3 * (math.exp(v) - 1)),
    ("celu", 1.7, 0, lambda v: max(0, v) + min(0, 1.7 * (math.exp(v / 1.7) - 1))),
    ("thresholded_relu", 0.4, 0, lambda v: v if v > 0.4 else 0.0),
    ("shrink", 0.5, 0.2, lambda v: v + 0.2 if v < -0.5 else v - 0.2 if v > 0.5 else 0.0),
    ("sign", 1, 0, lambda v: (v > 0) - (v < 0)),
    ("round", 1, 0, round),  # Python's round takes halves to even
])
def test_unary_functions_against_a_scalar_loop(func, alpha, beta, f):
    x = np.concatenate([np.linspace(-40, 40, 161), [-0.5, 0.5, 1.5, 2.5, 0.0]])
    dst = np.empty_like(x)
    unary(x, dst, func=func, alpha=alpha, beta=beta)
    np.testing.assert_allclose(dst, scalar_loop(x, f), rtol=1e-12, atol=1e-300)
