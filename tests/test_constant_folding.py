"""Compile-time constant folding: a model compiled with its weights
(`compile(target, weights=...)`, `lightnet -f`) has rules compute new weights
(a batchnorm folded into a conv's or a matmul's), the weights nothing reads
any more dropped, and weights bound to their arrays, not copied into the arena.

Every folded model is compared with the same model lowered without
combiners (to 1e-5), and the folded weights with a float64 numpy fold.
"""

import json

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session
from tests.helpers import assert_outputs_close, lightnet, run_model
from tests.irbuild import ModelBuilder, conv_bn_relu

RNG = np.random.default_rng(11)


def test_conv_batchnorm_is_folded_into_new_weights_when_compiled_with_them():
    model, feeds, _ = conv_bn_relu(RNG)
    plain, _ = run_model(model, feeds, combine=False)
    folded, ctx = run_model(model, feeds, weights={})
    assert_outputs_close(folded, plain)
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_cpu"]
    assert conv.values["activation"] == "relu" and "bn_scale" not in conv.tensors_in
    # the new weight and bias replace the old ones, which are gone with the batchnorm's
    assert (conv.tensors_in["weight"], conv.tensors_in["bias"]) == ("conv2d1_weight",
                                                                      "conv2d1_bias")
    assert sorted(n for n, e in ctx.tensors.items() if e.static) == ["conv2d1_bias",
                                                                      "conv2d1_weight"]
    assert [op.optype for op in ctx.ops] == ["create_cpu", "create_cpu", "input_cpu",
                                            "conv2d_cpu"]


def test_folded_weights_are_the_float64_fold_of_the_weight_file(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    np.savez(tmp_path / "w.npz", **weights)
    folded, ctx = run_model(model, feeds, weights=tmp_path / "w.npz")
    plain, _ = run_model(model, feeds, combine=False, load=tmp_path / "w.npz")
    assert_outputs_close(folded, plain)
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    s = w["s1"] / np.sqrt(w["var1"] + 1e-3)
    np.testing.assert_allclose(ctx.weights["conv2d1_weight"], w["w1"] * s[:, None, None, None],
                               rtol=1e-6)
    np.testing.assert_allclose(ctx.weights["conv2d1_bias"], (w["b1"] - w["mu1"]) * s + w["o1"],
                               rtol=1e-6, atol=1e-7)
    assert set(ctx.weights) == {"conv2d1_weight", "conv2d1_bias"}


def test_load_time_folding_without_weights_at_compile_time():
    model, feeds, _ = conv_bn_relu(RNG)
    plain, _ = run_model(model, feeds, combine=False)
    fused, ctx = run_model(model, feeds)
    assert_outputs_close(fused, plain)
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_cpu"]
    assert "bn_scale" in conv.tensors_in  # folded at load instead


def test_a_weight_another_op_reads_is_kept():
    model, feeds, _ = conv_bn_relu(RNG, shared_weight=True)
    plain, _ = run_model(model, feeds, combine=False)
    folded, ctx = run_model(model, feeds, weights={})
    assert_outputs_close(folded, plain)
    convs = [op for op in ctx.ops if op.optype == "conv2d_cpu"]
    assert [c.tensors_in["weight"] for c in convs] == ["conv2d1_weight", "w1"]
    assert "s1" not in ctx.tensors and "w1" in ctx.tensors


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_batchnorm_is_folded(trans_b, with_bias):
    m = ModelBuilder()
    x = m.input("x", (4, 6))
    ins = {"src1": x, "src2": m.weight("w", [5, 6] if trans_b else [6, 5])}
    if with_bias:
        ins["bias"] = m.weight("b", [5])
    y = m.op("matmul", ins, transB=trans_b, alpha=0.5, beta=2.0)
    m.batchnorm(y, 5)
    feeds = {"x": RNG.standard_normal((4, 6)).astype(np.float32)}
    plain, _ = run_model(m.to_dict(), feeds, combine=False)
    folded, ctx = run_model(m.to_dict(), feeds, weights={})
    assert_outputs_close(folded, plain)
    (op,) = [op for op in ctx.ops if op.optype == "matmul_cpu"]
    assert op.values["beta"] == 1.0 and "bn_scale" not in op.tensors_in
    assert {"matmul1_src2", "matmul1_bias"} <= set(ctx.weights)


def test_static_data_computed_by_an_op_is_known_at_compile_time():
    """value() evaluates the ops making static tensors from weights (bn2scale_wts)
    the way the run does."""
    m = ModelBuilder()
    ins = {f"src_{k}": m.weight(k, [3], 0.5, 1.5) for k in ("mean", "var", "scale", "offset")}
    outs = m.op("bn2scale_wts", ins, outs=("dst_scale", "dst_shift", "dst_power"),
                epsilon=1e-3)
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu")
    ctx.load()
    ctx.run()
    ran = {n: ctx.get_data(n) for n in outs}
    assert all(ctx.value(n) is None for n in outs)  # not compiled with weights
    ctx.compile("cpu", weights={})
    for name in outs:  # unread, so model outputs: kept
        np.testing.assert_array_equal(ctx.value(name), ran[name])


def test_a_long_chain_of_static_ops_is_folded():
    """value() computes what a folded weight is made of on a stack of its own: a chain
    of 1,500 static ops (each bn2scale_wts reading the last one's scale and shift)
    under a batchnorm the conv folds, deeper than Python's recursion limit."""
    m = ModelBuilder()
    x = m.input("x", [1, 4, 3, 3])
    mean, var = m.weight("mean", [4], -0.1, 0.1), m.weight("var", [4], 1.0, 1.0)
    scale, offset = m.weight("scale", [4], 0.5, 1.5), m.weight("offset", [4], -0.1, 0.1)
    ins = {"src_mean": mean, "src_var": var}
    for _ in range(1500):
        scale, offset, _power = m.op(
            "bn2scale_wts", {**ins, "src_scale": scale, "src_offset": offset},
            outs=("dst_scale", "dst_shift", "dst_power"), epsilon=1e-3)
    x = m.conv(x, 4, 4, 1)
    y = m.op("batchnorm", {"src": x, "scale": scale, "offset": offset, "mean": mean,
                           "var": var})
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu", weights={})
    optypes = [op.optype for op in ctx.ops]
    assert "batchnorm_cpu" not in optypes and "conv2d_cpu" in optypes  # folded
    unfolded = Context()
    unfolded.init(m.to_dict())
    unfolded.compile("cpu", combine=False)
    outputs = []
    for c in (ctx, unfolded):
        c.load()
        c.set_data("x", np.ones((1, 4, 3, 3), np.float32))
        c.run()
        outputs.append(c.get_data(y))
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)


def test_weights_are_bound_read_only_outside_the_arena(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    np.savez(tmp_path / "w.npz", **weights)
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu", combine=False)
    ctx.load(tmp_path / "w.npz")
    (report,) = ctx.mem.values()
    assert report.weights == sum(a.nbytes for a in weights.values())
    assert report.total == sum(e.nbytes for e in ctx.tensors.values()
                               if not e.from_file and e.owner is None) + sum(
        op.scratch for op in ctx.ops)
    for name in weights:
        assert not ctx.arrays[name].flags.writeable
        assert not np.shares_memory(ctx.arrays[name], ctx.arenas[report.mtype])
        np.testing.assert_array_equal(ctx.arrays[name], weights[name])
    with pytest.raises(LightNetError, match="is a weight from the weight file"):
        ctx.set_data("w1", weights["w1"])


def test_folding_drops_the_unfolded_weights_from_memory(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    np.savez(tmp_path / "w.npz", **weights)
    _, at_load = run_model(model, feeds, load=tmp_path / "w.npz")
    _, folded = run_model(model, feeds, weights=tmp_path / "w.npz")
    (before,), (after,) = at_load.mem.values(), folded.mem.values()
    assert before.weights == sum(a.nbytes for a in weights.values())
    assert after.weights == (4 * 3 * 3 * 3 + 4) * 4  # the folded weight and bias alone


def test_compiled_ir_and_saved_weights_run_alike(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    np.savez(tmp_path / "w.npz", **weights)
    direct, ctx = run_model(model, feeds, weights=tmp_path / "w.npz")
    ctx.print(tmp_path / "out.json")
    ctx.save_weights(tmp_path / "out.npz")
    again = Context()
    again.init(tmp_path / "out.json")
    again.plan()
    again.load(tmp_path / "out.npz")
    again.set_data("x", feeds["x"])
    again.run()
    assert_outputs_close({n: again.get_data(n) for n in again.outputs}, direct)
    with np.load(tmp_path / "out.npz") as saved:
        assert sorted(saved.files) == ["conv2d1_bias", "conv2d1_weight"]


def test_a_model_compiled_with_weights_takes_no_file_at_load(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu", weights=weights)
    with pytest.raises(LightNetError, match="compiled with its weights"):
        ctx.load(tmp_path / "w.npz")
    ctx.load()
    ctx.load()  # again: the weights stay with the context


def test_weights_given_as_a_mapping_are_copied():
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    mine = {k: v.copy() for k, v in weights.items()}
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu", combine=False, weights=mine)
    ctx.load()
    mine["w1"][...] = 0  # the caller's array is theirs
    np.testing.assert_array_equal(ctx.get_data("w1"), weights["w1"])


def test_session_folds_with_its_weight_file(tmp_path):
    model, feeds, weights = conv_bn_relu(RNG, from_file=True)
    np.savez(tmp_path / "w.npz", **weights)
    session = Session(model, datafile=tmp_path / "w.npz")
    plain, _ = run_model(model, feeds, combine=False, load=tmp_path / "w.npz")
    assert_outputs_close(session.run(feeds), plain)
    assert not any("bn_scale" in op.tensors_in for op in session.ctx.ops)


def test_cli_compile_with_weights_writes_the_folded_weights(tmp_path):
    model, _, weights = conv_bn_relu(RNG, from_file=True)
    (x,) = [op for op in model["ops"] if op["name"] == "x"]
    x.update(optype="create", params=[{"arg_name": "dtype", "value": "TL_FLOAT"},
                                      {"arg_name": "dims", "value": [1, 3, 7, 7]},
                                      {"arg_name": "ran", "value": [-1, 1]}])
    model["ops"].append({"name": "p", "optype": "print",
                         "params": [{"arg_name": "msg", "value": "y"}],
                         "tensors_in": [{"arg_name": "src", "name": "relu1"}],
                         "tensors_out": []})
    (tmp_path / "m.json").write_text(json.dumps(model))
    np.savez(tmp_path / "w.npz", **weights)
    direct = lightnet("m.json", "-f", "w.npz", cwd=tmp_path)
    assert direct.returncode == 0, direct.stderr
    made = lightnet("m.json", "-f", "w.npz", "-c", "-o", "fast.json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "fast.npz").is_file()
    ran = lightnet("fast.json", "-r", "-f", "fast.npz", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    plain = lightnet("m.json", "-f", "w.npz", "--no-combine", cwd=tmp_path)

    def printed(result):
        return [line for line in result.stdout.splitlines() if not line.startswith("info:")]
    assert printed(direct) == printed(ran) == printed(plain)
    assert len(printed(direct)) > 4
    assert "batchnorm" not in (tmp_path / "fast.json").read_text()
    named = lightnet("m.json", "-f", "w.npz", "-c", "-o", "b.json", "-w", "bw.npz", cwd=tmp_path)
    assert named.returncode == 0 and (tmp_path / "bw.npz").is_file()


def test_a_weight_whose_shape_changed_after_compiling_is_refused():
    m = ModelBuilder()
    m.relu(m.weight("p", [4], from_file=True))
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu", weights={"p1": np.ones(4, np.float32)})
    ctx.set_param("p1", "dims", [2])
    with pytest.raises(LightNetError, match=r"tensors \['p1'\] are created from a file"):
        ctx.load()


def test_saved_weights_may_have_any_name(tmp_path):
    """np.savez(**w) could not write a tensor named 'file'; save_weights can."""
    m = ModelBuilder()
    m.op("relu", {"src": m.op("create", {}, name="file", dtype="TL_FLOAT", dims=[3],
                                from_file=True)})
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu", weights={"file": np.array([-1, 0, 2], np.float32)})
    ctx.save_weights(tmp_path / "w.npz")
    again = Context()
    again.init(m.to_dict())
    again.compile("cpu")
    again.load(tmp_path / "w.npz")
    again.run()
    np.testing.assert_array_equal(again.get_data(again.outputs[0]), [0, 0, 2])


def test_weights_given_as_a_mapping_are_checked_like_a_file():
    model, _, weights = conv_bn_relu(RNG, from_file=True)
    ctx = Context()
    ctx.init(model)
    with pytest.raises(LightNetError, match=r"^<weights>: tensor 'w1': expected shape"):
        ctx.compile("cpu", weights={**weights, "w1": np.zeros((2, 2), np.float32)})
    with pytest.raises(LightNetError, match=r"but no weight file \(-f\) gives them"):
        ctx.compile("cpu", weights={})
    with pytest.raises(LightNetError, match=r"^<weights>: tensor 'nope' is not a tensor"):
        ctx.compile("cpu", weights={**weights, "nope": np.zeros(1, np.float32)})
