import itertools
import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.reduce import (
    arg_reduce,
    reduce,
    reduce_scratch,
    maxreduce,
    maxreduce_arg,
    softmax,
    softmax_workspace,
)
from lightnet.ir.shapes import reduce_axes_shape, reduce_shape
from lightnet.archs.cpu.kernels.scratch import carve
from tests.helpers import arena_view, assert_guards

RTOL, ATOL = 1e-5, 1e-6


def lines(shape, axis):
    """Every index tuple of `shape` with `axis` left free, as lists of full indices."""
    others = [range(d) if k != axis else [None] for k, d in enumerate(shape)]
    for idx in itertools.product(*others):
        yield [idx[:axis] + (i,) + idx[axis + 1 :] for i in range(shape[axis])]


def naive_softmax(src, axis):
    out = np.zeros(src.shape)
    for line in lines(src.shape, axis):
        exps = [math.exp(float(src[i])) for i in line]
        total = sum(exps)
        for i, e in zip(line, exps):
            out[i] = e / total
    return out


def naive_max_arg(src, axis):
    shape = reduce_shape(src.shape, axis)
    values, args = np.zeros(shape), np.zeros(shape, np.int64)
    for line in lines(src.shape, axis):
        best = 0
        for k in range(1, len(line)):
            if src[line[k]] > src[line[best]]:
                best = k
        key = line[0][:axis] + (0,) + line[0][axis + 1 :]
        values[key], args[key] = src[line[best]], best
    return values, args


@pytest.mark.parametrize(
    "shape, axis",
    [
        ((5,), 0),
        ((3, 4), 0),
        ((3, 4), 1),
        ((2, 3, 4), 0),
        ((2, 3, 4), 1),
        ((2, 3, 4), 2),
        ((2, 3, 2, 5), 3),
    ],
)
def test_softmax_matches_naive(shape, axis):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    src = (rng.standard_normal(shape) * 3).astype(np.float32)
    arena, dst = arena_view(shape)
    assert softmax(src, dst, axis=axis) is None
    np.testing.assert_allclose(dst, naive_softmax(src, axis), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dst.sum(axis=axis), 1, rtol=RTOL, atol=ATOL)
    assert_guards(arena)


def test_softmax_large_values_are_stable_and_workspace_reused():
    src = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], np.float32)
    ws = softmax_workspace(src.shape, np.float32, axis=1)
    assert ws.shape == (2, 1)
    dst = np.empty_like(src)
    for _ in range(2):
        softmax(src, dst, axis=1, ws=ws)
        e = [math.exp(-2), math.exp(-1), 1.0]
        np.testing.assert_allclose(dst[0], [x / sum(e) for x in e], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(dst[1], [1 / 3] * 3, rtol=RTOL, atol=ATOL)


def test_softmax_non_contiguous_input_and_in_place():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 3)).astype(np.float32)
    src = base.T  # (3, 4), non-contiguous
    dst = np.empty((3, 4), np.float32)
    softmax(src, dst, axis=1)
    np.testing.assert_allclose(dst, naive_softmax(src, 1), rtol=RTOL, atol=ATOL)
    buf = base.copy()
    softmax(buf, buf, axis=0)
    np.testing.assert_allclose(buf, naive_softmax(base, 0), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "shape, axis", [((6,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4, 5), 2)]
)
def test_maxreduce_and_arg_match_naive(shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    src = rng.integers(-3, 4, shape).astype(np.float32)  # many ties
    values, args = naive_max_arg(src, axis)
    out_shape = reduce_shape(shape, axis)

    arena, dst = arena_view(out_shape)
    assert maxreduce(src, dst, axis=axis) is None
    np.testing.assert_allclose(dst, values, rtol=RTOL, atol=ATOL)
    assert_guards(arena)

    _, dst2 = arena_view(out_shape)
    arg_arena, arg = arena_view(out_shape, dtype=np.int32)
    assert maxreduce_arg(src, dst2, arg, axis=axis) is None
    np.testing.assert_allclose(dst2, values, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(arg, args)
    assert arg.dtype == np.int32
    assert_guards(arg_arena)


def test_maxreduce_arg_ties_take_first():
    src = np.array([[1, 5, 5, 2], [7, 7, 7, 7], [0, 1, 2, 3]], np.float32)
    dst = np.empty((3, 1), np.float32)
    arg = np.empty((3, 1), np.int32)
    maxreduce_arg(src, dst, arg, axis=1)
    np.testing.assert_array_equal(dst[:, 0], [5, 7, 3])
    np.testing.assert_array_equal(arg[:, 0], [1, 0, 3])
    dst0 = np.empty((1, 4), np.float32)
    arg0 = np.empty((1, 4), np.int32)
    maxreduce_arg(src, dst0, arg0, axis=0)
    np.testing.assert_array_equal(dst0[0], [7, 7, 7, 7])
    np.testing.assert_array_equal(arg0[0], [1, 1, 1, 1])


def test_maxreduce_integer_dtype():
    src = np.array([[3, -9], [4, 8]], np.int32)
    dst = np.empty((2, 1), np.int32)
    maxreduce(src, dst, axis=1)
    np.testing.assert_array_equal(dst, [[3], [8]])


# --- reduce over any axes ---------------------------------------------------------------

def naive_reduce(src, func, axes, keepdims):
    kept = [i for i in range(src.ndim) if i not in axes]
    out_shape = tuple(src.shape[i] for i in kept)
    out = np.zeros(out_shape or (1,))
    for idx in itertools.product(*[range(src.shape[i]) for i in kept]):
        values = []
        for red in itertools.product(*[range(src.shape[i]) for i in axes]):
            full = [0] * src.ndim
            for i, v in zip(kept, idx):
                full[i] = v
            for i, v in zip(axes, red):
                full[i] = v
            values.append(float(src[tuple(full)]))
        result = {"mean": lambda: sum(values) / len(values), "sum": lambda: sum(values),
                  "max": lambda: max(values), "min": lambda: min(values),
                  "prod": lambda: math.prod(values),
                  "sum_square": lambda: sum(v * v for v in values),
                  "l1": lambda: sum(abs(v) for v in values),
                  "l2": lambda: math.sqrt(sum(v * v for v in values)),
                  "log_sum": lambda: math.log(sum(values)),
                  "log_sum_exp": lambda: math.log(sum(math.exp(v) for v in values))}[func]()
        out[idx if idx else (0,)] = result
    return out.reshape(reduce_axes_shape(src.shape, axes, keepdims))


@pytest.mark.parametrize("func", ["mean", "sum", "max", "min", "prod", "sum_square", "l1",
                                  "l2", "log_sum", "log_sum_exp"])
@pytest.mark.parametrize("axes", [(0,), (2,), (1, 3), (0, 2, 3), (3, 1), (0, 1, 2, 3)])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce(func, axes, keepdims):
    rng = np.random.default_rng(len(axes) + 4 * keepdims)
    src = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    if func == "log_sum":
        src = np.abs(src) + 0.1
    shape = reduce_axes_shape(src.shape, axes, keepdims)
    arena, dst = arena_view(shape)
    ws = carve(None, reduce_scratch(src.shape, axes, func, dst.dtype))
    assert reduce(src, dst, func=func, axes=axes, keepdims=keepdims, ws=ws) is None
    np.testing.assert_allclose(dst, naive_reduce(src, func, sorted(axes), keepdims),
                               rtol=RTOL, atol=ATOL)
    assert_guards(arena)


def test_reduce_unknown_func():
    with pytest.raises(ValueError, match="unknown reduction 'median'"):
        reduce(np.ones((2, 2)), np.empty((2, 1)), func="median", axes=(1,), keepdims=True)


def test_log_sum_exp_of_large_and_infinite_values():
    src = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 0.0]], np.float32)
    dst = np.empty(3, np.float32)
    with np.errstate(divide="ignore"):  # the log of the -inf row's sum, 0
        reduce(src, dst, func="log_sum_exp", axes=(1,), keepdims=False)
    np.testing.assert_allclose(dst[0], 1000 + math.log(2), rtol=1e-6)
    assert dst[1] == -np.inf and dst[2] == np.inf


def test_reduce_integers_in_their_dtype():
    dst = np.empty(2, np.int32)
    reduce(np.array([[1, -5, 3], [7, 2, 2]], np.int32), dst, func="max", axes=(1,),
           keepdims=False)
    assert dst.tolist() == [3, 7]
    reduce(np.array([[1, -5, 3], [7, 2, 2]], np.int32), dst, func="sum", axes=(1,),
           keepdims=False)
    assert dst.tolist() == [-1, 11]
    reduce(np.array([[1, -5, 3], [7, 2, 2]], np.int32), dst, func="prod", axes=(1,),
           keepdims=False)
    assert dst.tolist() == [-15, 28]
    reduce(np.array([[1, -5, 3], [7, 2, 2]], np.int32), dst, func="l1", axes=(1,),
           keepdims=False)
    assert dst.tolist() == [9, 11]


# --- arg_reduce -------------------------------------------------------------------------

def naive_arg(src, func, axis, last):
    """Index of the first (or last) extreme of each line along `axis`, by a loop."""
    moved = np.moveaxis(src, axis, -1)
    out = np.zeros(moved.shape[:-1], np.int64)
    for idx in np.ndindex(*moved.shape[:-1]):
        line = list(moved[idx])
        best = max(line) if func == "max" else min(line)
        hits = [i for i, v in enumerate(line) if v == best]
        out[idx] = hits[-1] if last else hits[0]
    return np.expand_dims(out, axis)


@pytest.mark.parametrize("func", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("keepdims", [True, False])
def test_arg_reduce_matches_a_loop_with_ties(func, axis, last, keepdims):
    rng = np.random.default_rng(axis + 3 * last)
    src = rng.integers(-2, 3, (3, 4, 5)).astype(np.float32)  # many ties
    want = naive_arg(src, func, axis, last)
    arena, dst = arena_view(reduce_axes_shape(src.shape, [axis], keepdims), np.int32)
    assert arg_reduce(src, dst, func=func, axis=axis, keepdims=keepdims,
                      select_last_index=last) is None
    np.testing.assert_array_equal(dst, want.reshape(dst.shape))
    assert_guards(arena)


def test_arg_reduce_unknown_func():
    with pytest.raises(ValueError, match="unknown arg reduction 'median'"):
        arg_reduce(np.ones(3), np.empty(1, np.int32), func="median", axis=0, keepdims=True)
