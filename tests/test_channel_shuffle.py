"""channel_shuffle: the cpu kernel against a loop over channels, the optimizers' rule
that makes it of a reshape-transpose-reshape (fused where the pattern is exact, left
alone where it is not), and the dnnl variant (oneDNN's shuffle, in the layouts the
convolutions around it choose) against the cpu."""

import numpy as np
import pytest

from lightnet import Context
from lightnet.archs.cpu.kernels import channel_shuffle, channel_shuffle_groups
from lightnet.archs.dnnl import capi
from tests.helpers import random_inputs, run_model
from tests.irbuild import ModelBuilder

needs_dnnl = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")


def naive_shuffle(x, group):
    n, c = x.shape[:2]
    per = c // group
    out = np.empty_like(x)
    for i in range(group):
        for j in range(per):
            out[:, j * group + i] = x[:, i * per + j]
    return out


@pytest.mark.parametrize("shape,group", [((1, 6, 1, 1), 2), ((2, 12, 3, 5), 3),
                                         ((1, 240, 4, 4), 3), ((1, 7, 2, 2), 7),
                                         ((1, 8, 2, 3), 1)])
def test_kernel_matches_a_loop_over_channels(shape, group):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    dst = np.full_like(x, np.nan)
    channel_shuffle(x, dst, group=group)
    np.testing.assert_array_equal(dst, naive_shuffle(x, group))


@pytest.mark.parametrize("grouped,axes,dst,groups", [
    ((1, 3, 4, 5, 6), (0, 2, 1, 3, 4), (1, 12, 5, 6), 3),
    ((1, 4, 3, 5, 6), (0, 2, 1, 3, 4), (1, 12, 5, 6), 4),
    ((1, 3, 4, 5, 6), (0, 1, 2, 3, 4), (1, 12, 5, 6), 0),   # no transpose of the groups
    ((1, 3, 4, 5, 6), (0, 2, 1, 4, 3), (1, 12, 5, 6), 0),   # the spatial axes move too
    ((1, 3, 4, 30, 1), (0, 2, 1, 3, 4), (1, 12, 5, 6), 0),  # the spatial dims change
    ((1, 3, 4, 5, 6), (0, 2, 1, 3, 4), (1, 12, 30, 1), 0),  # not back to the source's shape
])
def test_groups_of_a_written_out_shuffle(grouped, axes, dst, groups):
    assert channel_shuffle_groups((1, 12, 5, 6), grouped, axes, dst) == groups


def shuffle_model(c, group, axes=(0, 2, 1, 3, 4), conv=False, extra_reader=False):
    """A reshape-transpose-reshape channel shuffle, between two convolutions if `conv`."""
    m = ModelBuilder()
    x = m.input("data", [1, c, 6, 5])
    if conv:
        x = m.conv(x, c, c, 3, pad=1)
    r = m.op("reshape", {"src": x}, dims=[1, group, c // group, 6, 5])
    t = m.op("transpose", {"src": r}, axes=list(axes))
    if extra_reader:
        m.op("relu", {"src": t})
    y = m.op("reshape", {"src": t}, dims=[1, c, 6, 5])
    if conv:
        y = m.conv(y, c, c, 1)
    return m.to_dict()


def optypes(ctx):
    return [op.optype for op in ctx.ops]


@pytest.mark.parametrize("c,group", [(12, 3), (240, 3), (18, 2)])
def test_cpu_fuses_the_written_out_shuffle(c, group):
    doc = shuffle_model(c, group)
    feeds = random_inputs(doc, seed=1)
    fused, ctx = run_model(doc, feeds)
    assert "channel_shuffle_cpu" in optypes(ctx)
    assert "transpose_cpu" not in optypes(ctx)
    unfused, plain = run_model(doc, feeds, combine=False)
    assert "transpose_cpu" in optypes(plain)
    (name,) = fused
    np.testing.assert_array_equal(fused[name], unfused[name])
    src = plain.get_data("data")
    np.testing.assert_array_equal(fused[name], naive_shuffle(src, group))


@pytest.mark.parametrize("kwargs", [{"axes": (0, 1, 2, 3, 4)}, {"axes": (0, 2, 1, 4, 3)},
                                    {"extra_reader": True}])
def test_other_reshape_transpose_reshapes_are_left_alone(kwargs):
    doc = shuffle_model(12, 3, **kwargs)
    feeds = random_inputs(doc, seed=1)
    ours, ctx = run_model(doc, feeds)
    assert "channel_shuffle_cpu" not in optypes(ctx)
    ref, _ = run_model(doc, feeds, combine=False)
    for name in ref:
        np.testing.assert_array_equal(ours[name], ref[name])


@needs_dnnl
@pytest.mark.parametrize("c,group,conv", [(12, 3, False), (240, 3, True), (18, 2, True),
                                          (20, 5, True), (48, 3, True)])
def test_dnnl_shuffle_matches_cpu(c, group, conv):
    """oneDNN's shuffle, never its reference kernel: a source held plain or
    channels-last (the input; this machine's AVX2 convolutions' choice), which oneDNN
    shuffles only with that, is read in channel blocks (a reorder inside the op)."""
    doc = shuffle_model(c, group, conv=conv)
    feeds = random_inputs(doc, seed=1)
    ours, ctx = run_model(doc, feeds, "dnnl")
    assert "channel_shuffle_dnnl" in optypes(ctx) and not ctx.refused
    assert "transpose_cpu" not in optypes(ctx)
    (shuffle,) = [op for op in ctx.ops if op.optype == "channel_shuffle_dnnl"]
    assert not shuffle.values["call"].impl_info.startswith("ref")
    if conv:  # one region: only the model input and output are reordered
        assert optypes(ctx).count("reorder_dnnl") <= 2
    ref, _ = run_model(doc, feeds)
    (name,) = ref
    np.testing.assert_allclose(ours[name], ref[name], rtol=1e-4, atol=1e-5)


@needs_dnnl
def test_a_channel_shuffle_op_of_another_dtype_stays_on_cpu():
    m = ModelBuilder()
    x = m.input("data", [1, 6, 2, 2], dtype="TL_INT32")
    m.op("channel_shuffle", {"src": x}, group=2)
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("dnnl")
    assert "channel_shuffle_cpu" in optypes(ctx)
    ctx.load()
    x = np.arange(24, dtype=np.int32).reshape(1, 6, 2, 2)
    ctx.set_data("data", x)
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data(ctx.outputs[0]), naive_shuffle(x, 2))
