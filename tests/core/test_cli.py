"""The `lightnet` command, run as a separate process."""

import json
import re

import numpy as np
import pytest

from tests.helpers import EXAMPLE, assert_one_error_line, lightnet

EXAMPLE_OUTPUT = "tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"
RUN_TIME = re.compile(r"info: run time: \d+\.\d{6}s\n")


def assert_ran(result, output=EXAMPLE_OUTPUT):
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith(output)
    assert RUN_TIME.fullmatch(result.stdout[len(output):])


def test_example_runs():
    assert_ran(lightnet(EXAMPLE))


def test_compile_then_run_compiled(tmp_path):
    out = tmp_path / "out.json"
    result = lightnet(EXAMPLE, "-c", "-o", out)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    ops = json.loads(out.read_text())["ops"]
    assert [op["optype"] for op in ops] == ["create_cpu", "slice_cpu", "print_cpu"]
    assert_ran(lightnet("-r", out))


def test_compile_default_outfile(tmp_path):
    result = lightnet(EXAMPLE, "-c", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out.json").read_text())["ops"][1]["optype"] == "slice_cpu"


def test_stdin():
    assert_ran(lightnet("-", stdin=EXAMPLE.read_text()))


def test_weight_file(tmp_path):
    model = json.loads(EXAMPLE.read_text())
    create = model["ops"][0]
    create["params"] = [p for p in create["params"] if p["arg_name"] != "data"]
    create["params"][-1]["value"] = True  # from_file
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model))
    weights = tmp_path / "w.npz"
    np.savez(weights, tensor1=np.float32([[0, -1, 0.5, 2], [9, 8, 7, 6]]))
    assert_ran(lightnet(path, "-f", weights),
               "tensor2:\n[[-1.000 0.500 2.000]\n [8.000 7.000 6.000]]\n")
    assert_one_error_line(
        lightnet(path),
        f"{path}: tensors ['tensor1'] are created from a file, but no weight file (-f) gives them")


def test_mem_report():
    result = lightnet(EXAMPLE, "--mem-report")
    assert result.returncode == 0
    assert result.stdout.startswith(
        "memory cpu: arena 128 bytes, all tensors 56 bytes, lower bound 56 bytes "
        "(arena / lower bound = 2.286); weights 0 bytes\n" + EXAMPLE_OUTPUT)


def bad_model(tmp_path, change):
    model = json.loads(EXAMPLE.read_text())
    change(model)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model, indent=4))
    return path


def set_param(model, op, arg, value):
    for p in model["ops"][op]["params"]:
        if p["arg_name"] == arg:
            p["value"] = value


def test_malformed_json(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"ops": [\n  {"name": "a",,}\n]}')
    assert_one_error_line(lightnet(path), f"{path}:2:16: invalid JSON: Expecting property name "
                                          "enclosed in double quotes")
    assert_one_error_line(lightnet("-", stdin="{"),
                          "<stdin>:1:2: invalid JSON: Expecting property name enclosed in "
                          "double quotes")


def test_unknown_optype(tmp_path):
    path = bad_model(tmp_path, lambda m: m["ops"][2].update(optype="show"))
    assert_one_error_line(lightnet(path), f"{path}: op 2 ('print1'): unknown optype 'show'")


def test_undefined_input_tensor(tmp_path):
    path = bad_model(tmp_path, lambda m: m["ops"][1]["tensors_in"][0].update(name="tensorX"))
    assert_one_error_line(
        lightnet(path),
        f"{path}: op 'slice1' (slice): tensor_in 'src': defined: expected tensor 'tensorX' "
        "defined by an earlier op, found no such tensor")


def test_bad_param(tmp_path):
    path = bad_model(tmp_path, lambda m: set_param(m, 1, "axis", 2))
    assert_one_error_line(
        lightnet(path),
        f"{path}: op 'slice1' (slice): param 'axis': lt: expected axis < src.ndim (2), found 2")
    # A param no check knows of (once a crash in the unknown-arg check).
    path = bad_model(tmp_path, lambda m: m["ops"][1]["params"].append(
        {"arg_name": "step", "value": 1}))
    assert_one_error_line(
        lightnet(path),
        f"{path}: op 'slice1' (slice): param 'step': known: expected one of axis, start, len, "
        "found an unknown param")
    # A number beyond the double range (once an OverflowError).
    path = tmp_path / "big.json"
    path.write_text(EXAMPLE.read_text().replace('"value": 3}', '"value": 1' + "0" * 400 + "}"))
    assert_one_error_line(
        lightnet(path),
        f"{path}: op 1 ('slice1'): param 'len': numbers must be finite, found an integer "
        "beyond the double range")


def test_debug_shows_traceback(tmp_path):
    path = bad_model(tmp_path, lambda m: set_param(m, 1, "axis", 2))
    result = lightnet("--debug", path)
    assert result.returncode == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert "CheckError" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"lightnet: error: {path}: op 'slice1' (slice): param 'axis': lt: expected axis < "
        "src.ndim (2), found 2")


@pytest.mark.parametrize("args", [(), (str(EXAMPLE), "--bogus"), ("-t",)])
def test_bad_usage(args):
    result = lightnet(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: lightnet")
    assert "Traceback" not in result.stderr


def test_unknown_target():
    line = assert_one_error_line(lightnet(EXAMPLE, "-t", "gpu"))
    assert line.startswith("lightnet: error: unknown target 'gpu' (known: ")


def test_missing_model_file(tmp_path):
    path = tmp_path / "nope.json"
    assert_one_error_line(lightnet(path),
                          f"{path}: cannot read the model: No such file or directory")


def test_run_uncompiled_model():
    assert_one_error_line(lightnet("-r", EXAMPLE),
                          "op 'create1' (create) is abstract and cannot run: compile the model "
                          "for a target first")
