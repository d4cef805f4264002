"""The fold-constants pass: what ops compute from weights and constants alone becomes
weights while compiling with the weights, on every target, and the model computes what
it computed before (checked against numpy); what must stay a run-time op stays."""

import numpy as np
import pytest

from lightnet import Context, nn
from lightnet.archs.dnnl import capi

RNG = np.random.default_rng(17)
TARGETS = ["cpu", pytest.param("dnnl", marks=pytest.mark.skipif(
    capi.unavailable_reason() is not None, reason="oneDNN is unavailable"))]


def weights(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def layernorm(a, scale, bias):
    mean = a.mean(-1, keepdims=True)
    return (a - mean) / np.sqrt(((a - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * scale + bias


def position_model():
    """DeBERTa's pattern: a table of position embeddings, layer-normed and projected by a
    weight, multiplied by the input: y = x @ (layernorm(table) @ w)^T."""
    table, w, scale, bias = weights(6, 8), weights(8, 8), weights(8), weights(8)
    x = nn.input("x", [3, 8])
    normed = nn.layernorm(nn.constant(table), nn.constant(scale), nn.constant(bias), axis=1)
    keys = nn.matmul(normed, nn.constant(w), name="keys")
    y = nn.matmul(x, keys, transB=True, name="y")
    want = lambda x: x @ (layernorm(table, scale, bias) @ w).T  # noqa: E731
    return nn.Model(outputs=y), want


def compiled(model, target, **kwargs):
    ctx = Context()
    ctx.init(model)
    ctx.compile(target, **kwargs)
    ctx.load()
    return ctx


def run(ctx, x):
    ctx.set_data("x", x)
    ctx.run()
    return ctx.get_data("y")


@pytest.mark.parametrize("target", TARGETS)
def test_what_weights_alone_compute_becomes_a_weight(target):
    model, want = position_model()
    ctx = compiled(model, target)
    optypes = [op.optype for op in ctx.ops]
    assert not any(t.startswith(("layernorm", "reorder")) for t in optypes), optypes
    assert sum(t.startswith("matmul") for t in optypes) == 1  # x's own
    assert "keys" in ctx.weights and "keys" in ctx.tensors  # the tensor kept its name
    assert not {"table", "w"} & set(ctx.weights)  # read by nothing left
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(run(ctx, x), want(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_without_the_weights_or_without_combining_nothing_folds(target):
    model, want = position_model()
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    unfolded = compiled(model, target, combine=False)
    without = Context()
    without.init(model.to_dict())  # the IR alone: compiled without its weights
    without.compile(target)
    without.load(model.weights)
    for ctx in (unfolded, without):
        assert sum(op.optype.startswith("matmul") for op in ctx.ops) == 2
        np.testing.assert_allclose(run(ctx, x), want(x), rtol=1e-5, atol=1e-5)


def test_an_expand_of_a_constant_stays_a_run_time_op():
    """A result larger than its inputs would be a weight as large: it is computed when
    the model runs (the constant it expands folds)."""
    row = weights(1, 8)
    x = nn.input("x", [4, 8])
    y = nn.elew(x, nn.expand(nn.relu(nn.constant(row)), dims=[4, 8]), elew_op="TL_SUM",
                name="y")
    ctx = compiled(nn.Model(outputs=y), "cpu")
    assert [op.optype for op in ctx.ops if op.tensors_in] == ["expand_cpu", "elew_cpu"]
    x_ = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(run(ctx, x_), x_ + np.maximum(row, 0), rtol=1e-6)


def test_a_view_of_a_weight_is_not_copied():
    """A reshape of a weight costs nothing when the model runs: no weight is made of it."""
    w = weights(2, 8)
    x = nn.input("x", [4, 8])
    y = nn.matmul(x, nn.reshape(nn.constant(w, name="w"), dims=[8, 2]), name="y")
    ctx = compiled(nn.Model(outputs=y), "cpu")
    assert sorted(ctx.weights) == ["w"]
    assert [op.optype for op in ctx.ops if op.tensors_in] == ["reshape_cpu", "matmul_cpu"]
    x_ = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(run(ctx, x_), x_ @ w.reshape(8, 2), rtol=1e-5)


def test_past_the_fold_limit_the_ops_run_as_before():
    model, want = position_model()
    ctx = Context(fold_limit=100)
    ctx.init(model)
    ctx.compile("cpu")
    ctx.load()
    assert [op.optype for op in ctx.ops if op.optype.startswith("matmul")] == ["matmul_cpu"] * 2
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(run(ctx, x), want(x), rtol=1e-5, atol=1e-5)


def test_a_print_of_a_constant_still_prints(capfd):
    c = nn.constant(np.array([1.5, 2.5], np.float32))
    ctx = compiled(nn.Model(outputs=[nn.print(nn.relu(c), msg="folded")]), "cpu")
    ctx.run()
    assert "folded" in capfd.readouterr().out
