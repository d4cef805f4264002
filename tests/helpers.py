"""Helpers the test files share, each written once here instead of once per file.

    from tests.helpers import arena_view, assert_guards, compiled, lightnet, rand, run

Builders of IR documents live in tests/irbuild.py, the op descriptions' examples
in tests/opexamples.py, numpy references of the ops in tests/references.py; the
helpers of one family of tests beside them: tests/frontends/onnxutil.py and
ilutil.py, tests/dnnl/dnnlutil.py, tests/fuzz/fuzzutil.py, tests/generator/genutil.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet import CheckError, Context, LightNetError
from lightnet.ir.op import Op, OpProto
from lightnet.ir.tensor import MemType
from tests.irbuild import op_model

# Files of the checkout --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "example.json"


def example_doc() -> dict:
    """A fresh copy of examples/example.json (create -> slice -> print), to change."""
    return json.loads(EXAMPLE.read_text())


def from_file_example() -> dict:
    """examples/example.json with its create reading tensor1 [2, 4] from a weight file."""
    doc = example_doc()
    doc["ops"][0]["params"] = [{"arg_name": "dtype", "value": "TL_FLOAT"},
                               {"arg_name": "dims", "value": [2, 4]},
                               {"arg_name": "from_file", "value": True}]
    return doc


def bench_models():
    """bench/models.py, the benchmark's networks (bench/ is not a package)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import models
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return models


# The benchmark's networks (bench/models.py) as test parameters: SqueezeNet 1.1 with the
# fast tests, the others with -m slow.
BENCH_NETWORKS = ["squeezenet1.1", *(pytest.param(name, marks=pytest.mark.slow) for name in (
    "resnet50", "mobilenetv2", "shufflenet", "vgg11", "mobilenetv3", "vit_s16"))]


# Kernel outputs ---------------------------------------------------------------------------

GUARD = 8  # cells on each side of the view arena_view hands out
SENTINEL = -777  # what arena_view fills its arena with unless told otherwise


def arena_view(shape, dtype=np.float32, fill=SENTINEL):
    """(arena, view): a C-contiguous view in the middle of a bigger buffer filled with
    `fill`, the way the runtime hands a kernel its output. An element the kernel leaves
    unwritten still holds `fill`; a write past either end shows in assert_guards. The
    float tests that pass `fill=np.nan` also catch a kernel reading its output before
    writing it (a max that starts from what is there)."""
    size = int(np.prod(shape))
    arena = np.full(size + 2 * GUARD, fill, dtype)
    return arena, arena[GUARD:GUARD + size].reshape(shape)


def assert_guards(arena, fill=SENTINEL):
    """The cells around the view of `arena` (from arena_view) still hold `fill`: the
    kernel wrote nothing outside its output."""
    want = np.full(GUARD, fill, arena.dtype)
    for side, cells in (("before", arena[:GUARD]), ("after", arena[-GUARD:])):
        assert np.array_equal(cells, want, equal_nan=True), f"written {side} the view: {cells}"


def rand(rng, *shape, dtype=np.float32):
    """Standard-normal values of `shape` from `rng`, as `dtype` (the kernels' float32)."""
    return rng.standard_normal(shape).astype(dtype)


# Ops and models through a Context ---------------------------------------------------------


def bare_op(name, ins=(), outs=(), arch="cpu") -> Op:
    """An op that checks and runs nothing, reading tensors `ins` and writing `outs` (as
    in0, in1, ... and out0, ...): what the memory planner and the data-flow graph read
    of an op is its tensor names."""
    proto = OpProto(optype="t", arch=arch, mtype=MemType.CPU, tensors_in=(), tensors_out=(),
                    params=(), pre_run=lambda op, tensors: None, source="test")
    return Op(proto, name, {f"in{i}": t for i, t in enumerate(ins)},
              {f"out{i}": t for i, t in enumerate(outs)}, {})


def compiled(doc, target="cpu", *, load=False, memory_limit=None, **compile_args) -> Context:
    """A Context that read `doc` (an IR document or a path) and compiled it for `target`
    with `compile_args` (combine, weights, precision, ...). `load`: also load it, from
    the weight file `load` names when it is not simply True."""
    ctx = Context(memory_limit=memory_limit)
    ctx.init(doc)
    ctx.compile(target, **compile_args)
    if load is not False:
        ctx.load(None if load is True else load)
    return ctx


def run(ctx, feeds=None) -> dict[str, np.ndarray]:
    """Set `feeds` (input name -> array) on the loaded `ctx`, run it, and return a copy
    of each of its outputs by name (the next run overwrites the arena)."""
    for name, value in (feeds or {}).items():
        ctx.set_data(name, value)
    ctx.run()
    return {name: ctx.get_data(name).copy() for name in ctx.outputs}


def run_model(doc, feeds=None, target="cpu", *, load=True, **compile_args):
    """(outputs, ctx): `doc` compiled, loaded (`load`: True, or the weight file) and run
    on `feeds`, as compiled() and run() do it."""
    ctx = compiled(doc, target, load=load, **compile_args)
    return run(ctx, feeds), ctx


def assert_outputs_close(got, want, rtol=1e-5, atol=1e-5):
    """`got` and `want` (output name -> array) name the same outputs, each equal to
    within the tolerances."""
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def rel_error(got, want) -> float:
    """The largest difference of `got` from the reference `want`, relative to the largest
    magnitude of `want` (in float64)."""
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def random_inputs(doc, seed=0) -> dict[str, np.ndarray]:
    """Standard-normal float32 data for every input of `doc`, from a generator seeded
    with `seed`."""
    rng = np.random.default_rng(seed)
    ctx = Context()
    ctx.init(doc)
    return {name: rand(rng, *ctx.tensors[name].shape) for name in ctx.inputs}


# One op through the runtime ---------------------------------------------------------------


def op_context(optype, inputs, params=None, outs=("dst",), static=False, extra=()) -> Context:
    """op_model(...) compiled for cpu without fusions (every op and tensor keeps the name
    written) and loaded; its input ops are fed `inputs`."""
    inputs = {arg: np.asarray(a) for arg, a in inputs.items()}
    ctx = compiled(op_model(optype, inputs, params, outs, static, extra=extra), combine=False,
                   load=True)
    if not static:
        for arg, a in inputs.items():
            ctx.set_data(arg, a)
    return ctx


def run_op(optype, inputs, params=None, outs=("dst",), static=False):
    """The outputs of a run of op_context(...): one array, or a tuple for several."""
    ctx = op_context(optype, inputs, params, outs, static)
    ctx.run()
    got = tuple(ctx.get_data(f"out_{o}") for o in outs)
    return got[0] if len(got) == 1 else got


def op_error(optype, inputs, params=None, outs=("dst",), static=False,
             dtypes=None) -> CheckError:
    """The CheckError op_model(...) is refused with when read, the cause of the
    LightNetError a user sees."""
    with pytest.raises(LightNetError) as info:
        Context().init(op_model(optype, inputs, params, outs, static, dtypes))
    assert isinstance(info.value.__cause__, CheckError), info.value
    return info.value.__cause__


def assert_check_error(err: CheckError, optype, arg, rule, *parts):
    """`err` is the op `op` of `optype` failing `rule` on `arg`, its message says so
    first, then what was expected, and it holds each of `parts`."""
    text = str(err)
    assert text.startswith(f"op 'op' ({optype}): {arg}: {rule}: expected "), text
    assert (err.op_name, err.optype, err.arg, err.rule) == ("op", optype, arg, rule)
    for part in parts:
        assert part in text, text


# Commands ---------------------------------------------------------------------------------


def python(*argv, cwd=ROOT, stdin=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`python ARGV...` in a new process, text in and out. PYTHONPATH names this checkout
    whatever `cwd` is, so the process runs the lightnet under test and not one installed
    elsewhere (another worktree's); `env` is added to the environment, last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, *map(str, argv)], input=stdin, capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


def lightnet(*args, **kwargs) -> subprocess.CompletedProcess:
    """The lightnet command, `python -m lightnet ARGS...`, run as python() runs it."""
    return python("-m", "lightnet", *args, **kwargs)


def assert_one_error_line(result, message=None) -> str:
    """`result` (of lightnet()) failed with exit status 1 and one line on stderr, the
    lightnet command's `lightnet: error: ...` (the whole line when `message` is given),
    no traceback and nothing on stdout; returns the line."""
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lightnet: error: ")
    assert "Traceback" not in result.stderr
    if message is not None:
        assert lines[0] == "lightnet: error: " + message
    return lines[0]
