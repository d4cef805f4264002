"""Models built in Python (lightnet.nn): tensors checked as they are
built, Model's ops and outputs, constants as weights, and what Context,
Session and the command line make of a Model. Values are checked against
numpy computations of the same model."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import lightnet
from lightnet import Context, LightNetError, Session, nn

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(5)
HERE = Path(__file__).name


def line_of(text: str) -> int:
    """The line of this file holding `text` (where a test's failing call is)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def affine_model():
    """y = relu(x @ w + b), with w and b constants."""
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    x = nn.input("x", [2, 3])
    y = nn.relu(nn.matmul(x, nn.constant(w), nn.constant(b)), name="y")
    return nn.Model(outputs=y), w, b


def test_a_tensor_knows_its_dtype_and_shape_when_built():
    x = nn.input("x", [1, 3, 8, 8], np.float64)
    w = nn.constant(np.ones((4, 3, 3, 3)))
    y = nn.conv2d(x, w, nn.constant(np.zeros(4)), size=[3, 3], stride=[2, 2])
    assert (y.dtype, y.shape) == (lightnet.DType.TL_DOUBLE, (1, 4, 3, 3))
    assert repr(y) == f"<Tensor '{y.name}' float64[1, 4, 3, 3]>"


def test_session_runs_a_model_with_its_constants_as_weights():
    model, w, b = affine_model()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    out = Session(model, target="cpu").run({"x": x})
    np.testing.assert_allclose(out["y"], np.maximum(x @ w + b, 0), rtol=1e-5)
    assert [t.name for t in model.inputs] == ["x"] and [t.name for t in model.outputs] == ["y"]


def test_context_takes_a_model_and_compiles_with_its_constants():
    model, w, b = affine_model()
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu")
    ctx.load()  # no weight file: the model brought its weights
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    ctx.set_data("x", x)
    ctx.run()
    np.testing.assert_allclose(ctx.get_data("y"), np.maximum(x @ w + b, 0), rtol=1e-5)
    assert sorted(ctx.weights) == sorted(model.weights)


def test_constants_are_copies_held_read_only():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = nn.constant(a, name="c")
    a[0, 0] = 100
    model = nn.Model(outputs=nn.relu(c))
    (weight,) = model.weights.values()
    assert weight[0, 0] == 0 and not weight.flags.writeable
    assert model.to_dict()["ops"][0] == {
        "name": "c", "optype": "create", "tensors_in": [],
        "tensors_out": [{"arg_name": "dst", "name": "c"}],
        "params": [{"arg_name": "dtype", "value": "TL_FLOAT"},
                   {"arg_name": "dims", "value": [2, 3]},
                   {"arg_name": "from_file", "value": True}]}


def test_the_ir_is_the_ops_the_outputs_need_in_build_order():
    x = nn.input("x", [4])
    unused = nn.sigmoid(x, name="unused")  # built, but no output needs it
    a = nn.relu(x, name="a")
    b = nn.tanh(x, name="b")
    s = nn.elew(b, a, elew_op="TL_SUM", name="s")
    doc = nn.Model(outputs=[s]).to_dict()
    assert [op["name"] for op in doc["ops"]] == ["x", "a", "b", "s"]
    assert doc["ops"][3]["tensors_in"] == [{"arg_name": "src1", "name": "b"},
                                           {"arg_name": "src2", "name": "a"}]
    assert unused.name == "unused"


def test_every_param_is_written_with_its_value_or_default():
    x = nn.input("x", [1, 1, 4, 4])
    y = nn.maxpool2d(x, size=(2, 2), stride=np.array([2, 2]), name="pool")
    (op,) = [o for o in nn.Model(outputs=y).to_dict()["ops"] if o["name"] == "pool"]
    assert op["params"] == [
        {"arg_name": "size", "value": [2, 2]}, {"arg_name": "stride", "value": [2, 2]},
        {"arg_name": "padding", "value": [0, 0, 0, 0]}, {"arg_name": "autopad", "value": "NOTSET"},
        {"arg_name": "dilation", "value": [1, 1]}, {"arg_name": "ceil_mode", "value": False}]


def test_fresh_names_skip_names_taken():
    x = nn.input("x", [2])
    first = nn.relu(x)
    nn.relu(x, name=f"relu{int(first.name[4:]) + 1}")
    third = nn.relu(x)
    assert int(third.name[4:]) == int(first.name[4:]) + 2


def test_threads_building_at_once_get_names_of_their_own():
    x = nn.input("x", [2])
    built = [[] for _ in range(4)]

    def build(mine):
        mine.extend(nn.relu(x).name for _ in range(50))

    threads = [threading.Thread(target=build, args=(b,)) for b in built]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [n for b in built for n in b]
    assert len(names) == 200 and len(set(names)) == 200


def test_several_outputs_are_a_tuple_named_after_the_op():
    x = nn.input("x", [2, 3])
    values, indices = nn.maxreduce_arg(x, axis=1, name="m")
    assert (values.name, indices.name) == ("m_dst", "m_arg")
    assert indices.dtype == lightnet.DType.TL_INT32
    data = RNG.standard_normal((2, 3)).astype(np.float32)
    out = Session(nn.Model(outputs=[values, indices]), target="cpu").run({"x": data})
    np.testing.assert_array_equal(out["m_arg"].reshape(2), data.argmax(axis=1))
    np.testing.assert_array_equal(out["m_dst"].reshape(2), data.max(axis=1))


def test_an_op_without_outputs_is_run_when_given_to_the_model(capfd):
    c = nn.constant(np.array([1.5, 2.5], np.float32), name="c")
    show = nn.print(c, msg="c is")
    assert isinstance(show, nn.Action)
    Session(nn.Model(outputs=[show]), target="cpu").run()
    assert "c is" in capfd.readouterr().out


def test_a_variadic_input_takes_a_list():
    a = nn.constant(np.ones((1, 2), np.float32))
    b = nn.constant(np.zeros((1, 3), np.float32))
    y = nn.concat([a, b], axis=1)
    assert y.shape == (1, 5)
    (op,) = [o for o in nn.Model(outputs=y).to_dict()["ops"] if o["optype"] == "concat"]
    assert [t["arg_name"] for t in op["tensors_in"]] == ["src1", "src2"]


def test_an_optional_input_left_out_is_not_in_the_ir():
    x = nn.input("x", [2, 3])
    y = nn.matmul(x, nn.constant(np.ones((3, 2), np.float32)), name="mm")
    (op,) = [o for o in nn.Model(outputs=y).to_dict()["ops"] if o["name"] == "mm"]
    assert [t["arg_name"] for t in op["tensors_in"]] == ["src1", "src2"]


# Checks when built ---------------------------------------------------------------------


def test_a_failed_check_names_the_users_line_and_says_what_loading_says():
    x = nn.input("x", [1, 3, 8, 8])
    w = nn.constant(np.ones((4, 3, 3, 3), np.float32))
    b = nn.constant(np.ones(4, np.float32))
    with pytest.raises(LightNetError) as built:
        nn.conv2d(x, w, b, size=[2, 3], name="conv")  # the failing call
    where, _, rest = str(built.value).partition(": ")
    assert where.endswith(f"{HERE}:{line_of('# the failing call')}")
    ok = nn.Model(outputs=nn.conv2d(x, w, b, size=[3, 3], name="conv")).to_dict()
    (conv,) = [o for o in ok["ops"] if o["name"] == "conv"]
    next(p for p in conv["params"] if p["arg_name"] == "size")["value"] = [2, 3]
    with pytest.raises(LightNetError) as loaded:
        Context().init(ok)
    assert rest == str(loaded.value).removeprefix("<model>: ")


def test_a_param_of_the_wrong_type_fails_as_in_json():
    x = nn.input("x", [2, 3])
    with pytest.raises(LightNetError, match=r"^.*test_builder.py:\d+: op 'sm' \(softmax\): "
                                            r"param 'axis': type: expected a number, found a "
                                            r"string \"1\"$"):
        nn.softmax(x, axis="1", name="sm")


def test_an_input_that_is_not_a_tensor_is_refused():
    with pytest.raises(LightNetError, match=rf"{HERE}:\d+: op 'r' \(relu\): input 'src': "
                                            "expected a tensor of lightnet.nn, found list"):
        nn.relu([1, 2], name="r")


def test_a_failed_op_takes_no_name():
    x = nn.input("x", [2])
    with pytest.raises(LightNetError):
        nn.softmax(x, axis=3, name="taken_only_if_built")
    assert nn.softmax(x, axis=0, name="taken_only_if_built").name == "taken_only_if_built"


def test_model_outputs_must_be_tensors_no_op_of_the_model_reads():
    x = nn.input("x", [2])
    r = nn.relu(x, name="r1")
    with pytest.raises(LightNetError, match="tensor 'r1' is read by op 'r2' \\(relu\\), so it "
                                            "is not an output"):
        nn.Model(outputs=[r, nn.relu(r, name="r2")])


def test_names_given_twice_in_a_model_fail_at_the_second():
    x = nn.input("x", [2])
    a = nn.relu(x, name="twice")
    b = nn.tanh(x, name="twice")  # the second
    with pytest.raises(LightNetError, match=rf"{HERE}:{line_of('# the second')}: op 'twice' "
                                            rf"\(tanh\): the name 'twice' is taken by op "
                                            rf"'twice' built at .*{HERE}:\d+$"):
        nn.Model(outputs=[a, b])


def test_input_dtypes_by_lightnet_or_numpy_name():
    assert nn.input("a", [1], "TL_INT32").dtype == lightnet.DType.TL_INT32
    assert nn.input("b", [1], np.uint8).dtype == lightnet.DType.TL_UINT8
    assert nn.input("c", [1], lightnet.DType.TL_BOOL).dtype == lightnet.DType.TL_BOOL
    with pytest.raises(LightNetError, match=r"param 'dtype': choices: expected one of"):
        nn.input("d", [1], "TL_HALF")
    with pytest.raises(LightNetError, match=r"input: unknown dtype None"):
        nn.input("e", [1], None)


# Saving ---------------------------------------------------------------------------------


def test_a_saved_model_runs_with_the_command_and_compiles_to_json(tmp_path):
    model, w, b = affine_model()
    npz = model.save(tmp_path / "affine.json")
    assert npz == tmp_path / "affine.npz"
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, "-m", "lightnet", "-t", "cpu", "-f", "affine.npz",
                          "--input", "x=x.npy", "--save", "out.npz", "affine.json"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], np.maximum(x @ w + b, 0),
                               rtol=1e-5)
    compile_only = subprocess.run([sys.executable, "-m", "lightnet", "-t", "cpu", "-c", "-f",
                                   "affine.npz", "-o", "compiled.json", "affine.json"],
                                  cwd=tmp_path, capture_output=True, text=True)
    assert compile_only.returncode == 0, compile_only.stderr
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu")
    assert json.loads((tmp_path / "compiled.json").read_text()) == json.loads(ctx.print())
    assert json.loads((tmp_path / "affine.json").read_text()) == model.to_dict()


def test_a_model_without_constants_saves_no_weight_file(tmp_path):
    x = nn.input("x", [2])
    assert nn.Model(outputs=nn.relu(x)).save(tmp_path / "m.json") is None
    assert not (tmp_path / "m.npz").exists()
