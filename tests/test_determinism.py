"""Determinism: the same model and seed give bit-identical results, in one
process and across processes with different hash seeds (PYTHONHASHSEED), and
`lightnet -c` (and il2json) write byte-identical files every time.

Random weights are seeded by tensor names (CRC-32), inputs here by a fixed
numpy seed; nothing may depend on set or dict order of strings, object ids or
the clock.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, Session
from tests.irbuild import ModelBuilder, squeezenet

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HASH_SEEDS = ("0", "1", "4242")


def outputs(model, combine=True) -> dict[str, bytes]:
    """Every byte the run leaves: each arena (all tensors, intermediates too)."""
    ctx = Context()
    ctx.init(model)
    ctx.compile("cpu", combine=combine)
    ctx.load()
    ctx.run()
    return {str(mtype): arena.tobytes() for mtype, arena in ctx.arenas.items()}


def built_model() -> dict:
    m = ModelBuilder()
    x = m.input("data", [2, 3, 48, 48])
    squeezenet(m, x, classes=10, width=0.25)
    return m.to_dict()


def test_same_model_same_bits_in_one_process(capsys):
    doc = json.loads((EXAMPLES / "squeezenet.json").read_text())
    first = outputs(doc)
    assert first and first == outputs(doc) == outputs(json.loads(json.dumps(doc)))
    assert outputs(doc, combine=False).keys() == first.keys()
    capsys.readouterr()


def test_session_runs_repeat_bit_for_bit():
    session = Session(built_model())
    x = np.random.default_rng(7).standard_normal((2, 3, 48, 48)).astype(np.float32)
    a = session.run({"data": x})
    b = session.run({"data": x.copy()})
    again = Session(built_model()).run({"data": x})
    for name in a:
        assert a[name].tobytes() == b[name].tobytes() == again[name].tobytes()


SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import lightnet
from lightnet.compiler import targets
from tests.irbuild import ModelBuilder, squeezenet

def digest(ctx):
    for mtype, arena in ctx.arenas.items():
        print(mtype, hashlib.sha256(arena.tobytes()).hexdigest())
    print("ir", hashlib.sha256(ctx.print().encode()).hexdigest())
    for report in ctx.mem.values():
        print("mem", report)

ctx = lightnet.Context()
ctx.init(sys.argv[1])
ctx.compile("cpu")
ctx.load()
ctx.run()
digest(ctx)

m = ModelBuilder()
x = m.input("data", [1, 3, 48, 48])
squeezenet(m, x, classes=10, width=0.25)
feed = np.random.default_rng(3).standard_normal((1, 3, 48, 48)).astype(np.float32)
# The cpu target's whole arena; on dnnl, the outputs, the IR and the plan (oneDNN's
# scratchpads and blocked padding hold what its kernels leave there).
session = lightnet.Session(m.to_dict(), target="cpu")
for name, value in session.run({"data": feed}).items():
    print(name, hashlib.sha256(value.tobytes()).hexdigest())
digest(session.ctx)
if targets.resolve("auto") == "dnnl":
    session = lightnet.Session(m.to_dict(), target="dnnl")
    for name, value in session.run({"data": feed}).items():
        print(name, hashlib.sha256(value.tobytes()).hexdigest())
    print("ir", hashlib.sha256(session.ctx.print().encode()).hexdigest())
    for report in session.ctx.mem.values():
        print("mem", report)
"""


def run_with_hash_seed(args, seed, cwd, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, *map(str, args)], capture_output=True, cwd=cwd,
                            env=env, timeout=120, **kw)
    assert result.returncode == 0, result.stderr.decode()
    return result


def test_same_bits_across_processes_and_hash_seeds(tmp_path):
    runs = [run_with_hash_seed(["-c", SCRIPT, EXAMPLES / "squeezenet.json"], seed, tmp_path)
            for seed in HASH_SEEDS]
    assert runs[0].stdout.count(b"\n") > 5
    assert all(r.stdout == runs[0].stdout for r in runs), "outputs differ across processes"


@pytest.mark.parametrize("model", ["squeezenet.json", "example.json"])
def test_compiled_ir_is_byte_identical(tmp_path, model):
    """`lightnet -c` twice, with different hash seeds: the same bytes (and the
    same DOT graph and memory report)."""
    written = []
    for seed in HASH_SEEDS[:2]:
        out, dot = tmp_path / f"out{seed}.json", tmp_path / f"g{seed}.dot"
        result = run_with_hash_seed(["-m", "lightnet", EXAMPLES / model, "-c", "-o", out,
                                     "--dot", dot, "--mem-report"], seed, tmp_path)
        written.append((out.read_bytes(), dot.read_bytes(), result.stdout))
    assert written[0] == written[1]
    assert hashlib.sha256(written[0][0]).hexdigest() != hashlib.sha256(b"").hexdigest()


def test_il2json_output_is_byte_identical(tmp_path):
    outs = [run_with_hash_seed(["-m", "lightnet.frontends.il", EXAMPLES / "fire.net"], seed,
                               tmp_path).stdout for seed in HASH_SEEDS[:2]]
    assert outs[0] == outs[1] and outs[0].startswith(b"{")
