"""The shipped example models run end to end from the command line, and a
compiled (optimized) IR run with -r gives what compiling in one go gives."""

import re
from pathlib import Path

import pytest

from lightnet.compiler import targets
from tests.helpers import lightnet

ROOT = Path(__file__).resolve().parent.parent


def body(stdout: str) -> str:
    """The output without the run time line."""
    return re.sub(r"info: run time: \d+\.\d{6}s\n", "", stdout)


@pytest.mark.parametrize("model", ["examples/example.json", "examples/squeezenet.json"])
def test_compiled_ir_runs_the_same(model, tmp_path):
    direct = lightnet(model)
    assert direct.returncode == 0, direct.stderr
    out = tmp_path / "out.json"
    compiled = lightnet("-c", "-o", out, model)
    assert compiled.returncode == 0 and compiled.stdout == "", compiled.stderr
    again = lightnet("-r", out)
    assert again.returncode == 0, again.stderr
    assert body(again.stdout) == body(direct.stdout)


def test_squeezenet_runs_with_random_weights():
    """SqueezeNet 1.1 (narrowed) built only from catalogue ops: ten finite scores."""
    run = lightnet("examples/squeezenet.json")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "class scores:"
    scores = [float(v) for v in re.findall(r"-?\d+\.\d+", lines[1])]
    assert len(scores) == 10 and all(s >= 0 for s in scores)  # relu then average pool
    assert re.fullmatch(r"info: run time: \d+\.\d{6}s", lines[-1])


@pytest.mark.parametrize("threads", [1, 2])
def test_profile_names_the_blas_and_its_threads(threads):
    from lightnet.archs.cpu import blas

    run = lightnet("--threads", threads, "--profile", "examples/squeezenet.json")
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("info: BLAS: "))
    if "openblas" in blas.info()["name"].lower():
        assert re.search(rf", {threads} threads( \(.*\))?$", line), line


def test_profile_and_dot(tmp_path):
    dot = tmp_path / "g.dot"
    run = lightnet("--profile", "--dot", dot, "examples/squeezenet.json")
    assert run.returncode == 0, run.stderr
    table = run.stdout.split("info: run time:")[1]
    assert re.search(r"^op\s+optype\s+ms\s+%$", table, re.M)
    assert re.search(r"^total\s+\d+\.\d{3}\s+100\.0$", table, re.M)
    conv = f"conv2d_{targets.resolve('auto')}"  # the default target's
    assert conv in table
    text = dot.read_text()
    assert text.startswith("digraph lightnet {") and conv in text
    if conv == "conv2d_dnnl":  # dnnl ops filled; the weights' reorders shown
        assert "fillcolor=lightblue" in text and "weights_dnnl" in text
