"""The contract every LightNet command keeps.

Exit status 0 on success; 1 on a user error, with exactly one line on stderr
(`<tool>: error: ...`, or `error: ...` for the generator) and no traceback;
2 on bad usage (argparse's usage message); `--debug` adds the traceback of
the error. A bug (any other exception) is reported as one `internal error`
line, exit status 1. Checked for `lightnet`, `il2json`, `python -m
generator` and `onnx2ln`, each run as a separate process.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import io
import json
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.frontends.onnxutil import relu_model_file
from tests.generator.genutil import BASE_OPS, BASE_OPTIMIZERS, make_root
from tests.helpers import python

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

HAS_ONNX = importlib.util.find_spec("onnx") is not None


def _bad_model(tmp: Path) -> Path:
    doc = json.loads((EXAMPLES / "example.json").read_text())
    doc["ops"][1]["params"][0]["value"] = 2  # axis out of range
    path = tmp / "bad.json"
    path.write_text(json.dumps(doc))
    return path


def _bad_il(tmp: Path) -> Path:
    path = tmp / "bad.net"
    path.write_text('create(| dst=t | dtype="TL_FLOAT", dims=[2]);\nslice(src=t | dst=u |;\n')
    return path


def _root(tmp: Path, broken: bool = False) -> Path:
    root = make_root(tmp / "root", BASE_OPS, BASE_OPTIMIZERS)
    if broken:
        path = root / "descriptions" / "ops" / "shift.yaml"
        path.write_text(path.read_text().replace("arch: cpu", "arch: gpu"))
    return root


def _garbage(tmp: Path) -> Path:
    path = tmp / "garbage.onnx"
    path.write_bytes(bytes(range(256)) * 2)
    return path


@dataclass
class Tool:
    name: str
    module: str  # run as `python -m module`
    script: str | None  # its console script, if it has one
    prefix: str  # how its error line starts
    internal_prefix: str  # how its line for a bug starts
    ok: Callable  # tmp -> argv of a run that succeeds
    user_error: Callable  # tmp -> (argv, the error line's text after the prefix, or None)
    usage: list  # argvs of bad usage
    internal: tuple | None = None  # (module attribute to break, argv factory) in process


TOOLS = [
    Tool("lightnet", "lightnet", "lightnet", "lightnet: error: ",
         "lightnet: internal error: ",
         ok=lambda t: [EXAMPLES / "example.json"],
         user_error=lambda t: ([_bad_model(t)], f"{t / 'bad.json'}: op 'slice1' (slice): param "
                                                "'axis': lt: expected axis < src.ndim (2), "
                                                "found 2"),
         usage=[[], ["--bogus", "m.json"], ["-t"], ["--memory-limit", "lots", "m.json"],
                ["--memory-limit", "-1", "m.json"], ["--threads", "0", "m.json"],
                ["--threads", "two", "m.json"], ["info"], ["info", "--bogus", "m.json"],
                ["bench", "--runs", "0", "m.json"],
                ["bench", "--runs", "2", "--duration", "1", "m.json"],
                ["--input", "x", "m.json"], ["-c", "--save", "o.npz", "m.json"]],
         internal=("lightnet.runtime.context.Context.init", lambda t: [EXAMPLES / "example.json"])),
    Tool("il2json", "lightnet.frontends.il", "il2json", "il2json: error: ",
         "il2json: internal error: ",
         ok=lambda t: [EXAMPLES / "fire.net", "-o", t / "fire.json"],
         user_error=lambda t: ([_bad_il(t)], f"{t / 'bad.net'}:2:22: expected a param name or "
                                             "')', found ';'"),
         usage=[[], ["--bogus", "m.net"], ["-D", "1bad", "m.net"],
                ["--preprocessor", "m4", "m.net"]],
         internal=("lightnet.frontends.il.to_ir", lambda t: [EXAMPLES / "fire.net"])),
    Tool("generator", "generator", None, "error: ", "error: internal error: ",
         ok=lambda t: ["--root", _root(t)],
         user_error=lambda t: (["--root", _root(t, broken=True)],
                               "descriptions/ops/shift.yaml:14: shift_cpu.arch: unknown arch "
                               "'gpu' (known: none, cpu, dnnl)"),
         usage=[["--bogus"], ["new-op"], ["frobnicate"]],
         internal=("generator.model.load", lambda t: ["--root", _root(t)])),
]
if HAS_ONNX:
    TOOLS.append(Tool(
        "onnx2ln", "lightnet.frontends.onnx", "onnx2ln", "onnx2ln: error: ",
        "onnx2ln: internal error: ",
        ok=lambda t: [relu_model_file(t, [1, 3]), "-o", t / "m.json"],
        user_error=lambda t: ([_garbage(t)], None),
        usage=[[], ["--bogus", "m.onnx"], ["--dim", "nonsense", "m.onnx"]],
        internal=("lightnet.frontends.onnx.cli.import_model",
                  lambda t: [relu_model_file(t, [1, 3]), "-o", t / "m.json"])))


def run(tool: Tool, argv, cwd) -> subprocess.CompletedProcess:
    return python("-m", tool.module, *argv, cwd=cwd)  # the generator is not installed


def ids(tools):
    return [t.name for t in tools]


@pytest.mark.parametrize("tool", TOOLS, ids=ids(TOOLS))
def test_success_exits_0(tool, tmp_path):
    result = run(tool, tool.ok(tmp_path), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("tool", TOOLS, ids=ids(TOOLS))
def test_user_error_exits_1_with_one_line(tool, tmp_path):
    argv, message = tool.user_error(tmp_path)
    result = run(tool, argv, tmp_path)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(tool.prefix), lines[0]
    assert "Traceback" not in result.stderr
    if message is not None:
        assert lines[0] == tool.prefix + message

    # --debug: the same line last, after the traceback.
    debug = run(tool, [*argv, "--debug"], tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr
    assert debug.stderr.splitlines()[-1] == lines[0]


@pytest.mark.parametrize("tool, argv", [(t, a) for t in TOOLS for a in t.usage],
                         ids=[f"{t.name}-{' '.join(a) or 'no-args'}" for t in TOOLS
                              for a in t.usage])
def test_bad_usage_exits_2(tool, argv, tmp_path):
    result = run(tool, argv, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("usage: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def _main(tool: Tool):
    module = {"lightnet": "lightnet.cli", "generator": "generator.__main__"}.get(tool.name,
                                                                                tool.module)
    return importlib.import_module(module).main


@pytest.mark.parametrize("tool", TOOLS, ids=ids(TOOLS))
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_internal_error_is_one_line_exit_1(tool, debug, tmp_path, monkeypatch):
    """A bug (an exception that is not a user error) in process: exit status 1,
    one `internal error` line; --debug shows the traceback."""
    target, argv = tool.internal

    def broken(*args, **kwargs):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(target, broken)
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        rc = _main(tool)([*map(str, argv(tmp_path)), *(["--debug"] if debug else [])])
    assert rc == 1
    lines = err.getvalue().splitlines()
    assert lines[-1].startswith(f"{tool.internal_prefix}RuntimeError: planted bug")
    assert ("Traceback (most recent call last):" in err.getvalue()) == debug
    if not debug:
        assert len(lines) == 1


@pytest.mark.parametrize("tool", [t for t in TOOLS if t.script], ids=ids(t for t in TOOLS
                                                                         if t.script))
def test_console_scripts_are_these_commands(tool):
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")}
    assert tool.script in scripts, f"{tool.script} is not installed (pip install -e .)"
    module = "lightnet.cli" if tool.name == "lightnet" else tool.module
    assert scripts[tool.script] == f"{module}:main"
    if shutil.which(tool.script):  # the installed script behaves the same
        result = subprocess.run([tool.script, "--bogus"], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2


def test_lightnet_memory_limit_option(tmp_path):
    tool = TOOLS[0]
    model = EXAMPLES / "example.json"
    result = run(tool, [model, "--memory-limit", "100"], tmp_path)
    assert result.returncode == 1
    assert result.stderr == (f"lightnet: error: {model}: the model needs 128 bytes of cpu "
                             "memory, more than the limit of 100 bytes (--memory-limit)\n")
    result = run(tool, [model, "--memory-limit", "1K"], tmp_path)
    assert result.returncode == 0, result.stderr
