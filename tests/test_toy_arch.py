"""A third architecture is one package and one description (docs/adding-an-architecture.md).

`toy` is described into a copy of this tree (lightnet/, generator/, templates/,
descriptions/): descriptions/archs/toy.yaml (fallback cpu, package: toyarch, this
directory's tests/toyarch.py), three op variants (relu_toy, sigmoid_toy, elew_toy,
next to their base ops) and descriptions/optimizers/toy.yaml. The copy's generator
writes the copy's lightnet/auto; a process running the copy's lightnet compiles a
small model for target toy and for cpu. Nothing of the core is edited for it.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import numpy as np
import pytest

from helpers import ROOT, python

TOY_ARCH = """\
arch: toy
doc: The test architecture of tests/test_toy_arch.py (numpy, float32 only).
library: toy
package: toyarch
mtype: cpu
dtypes: [TL_FLOAT]
fallback: cpu
elementwise_ops: [relu_toy, sigmoid_toy, elew_toy]
"""

# Its op variants, appended to their base ops' files (a variant inherits within its file).
TOY_OPS = {
    "relu.yaml": """
relu_toy: {inherits: relu, arch: toy, run: "np.multiply(src, src > 0, out=dst)"}
""",
    "sigmoid.yaml": """
sigmoid_toy:
  inherits: sigmoid
  arch: toy
  run: |
    np.negative(np.abs(src), out=dst)
    np.exp(dst, out=dst)
    np.divide(np.where(src >= 0, 1, dst), 1 + dst, out=dst)
""",
    "elew.yaml": """
elew_toy:
  inherits: elew
  arch: toy
  params:
    elew_op:
      checks:
        - {expr: 'elew_op in ("TL_SUM", "TL_MUL")', msg: toy adds and multiplies}
  run: |
    (np.add if elew_op == "TL_SUM" else np.multiply)(src1, src2, out=dst)
""",
}

TOY_OPTIMIZER = """\
arch: toy
doc: The toy architecture takes element-wise sums and products of equal shapes.
expanders:
  elew:
    - when: >-
        op.params.elew_op in ("TL_SUM", "TL_MUL")
        and tuple(op.ins.src1.shape) == tuple(op.ins.src2.shape)
      replace: elew_toy
"""

# Compiles the model for `toy` and `cpu` and prints what each ran and computed.
SCRIPT = """\
import json, sys
import numpy as np
from lightnet.runtime.context import Context

doc = json.loads(sys.argv[1])
x = np.array(json.loads(sys.argv[2]), dtype=np.float32)
result = {}
for target in ("toy", "cpu"):
    ctx = Context()
    ctx.init(doc)
    ctx.compile(target)
    ctx.load(None)
    ctx.set_data("x", x)
    ctx.run()
    result[target] = {
        "optypes": {op.name: op.optype for op in ctx.ops},
        "outputs": {n: ctx.get_data(n).tolist() for n in ctx.outputs},
    }
print(json.dumps(result))
"""


def _op(name, optype, ins, **params):
    return {"name": name, "optype": optype,
            "tensors_in": [{"arg_name": a, "name": t} for a, t in ins.items()],
            "tensors_out": [{"arg_name": "dst", "name": name}],
            "params": [{"arg_name": k, "value": v} for k, v in params.items()]}


# x -> relu, sigmoid -> their product (toy) -> plus x (toy) -> tanh (no toy variant)
# -> minus x (TL_SUB: toy's rule declines) -> plus a bias [8] (a broadcast: declines).
MODEL = {"ops": [
    _op("x", "input", {}, dtype="TL_FLOAT", dims=[2, 8]),
    _op("bias", "create", {}, dtype="TL_FLOAT", dims=[8], data=[0.5 * i - 2 for i in range(8)]),
    _op("r", "relu", {"src": "x"}),
    _op("s", "sigmoid", {"src": "x"}),
    _op("m", "elew", {"src1": "r", "src2": "s"}, elew_op="TL_MUL"),
    _op("a", "elew", {"src1": "m", "src2": "x"}, elew_op="TL_SUM"),
    _op("t", "tanh", {"src": "a"}),
    _op("d", "elew", {"src1": "t", "src2": "x"}, elew_op="TL_SUB"),
    _op("y", "elew", {"src1": "d", "src2": "bias"}, elew_op="TL_SUM"),
]}


def _reference(x):
    bias = np.array([0.5 * i - 2 for i in range(8)])
    m = np.maximum(x, 0) / (1 + np.exp(-x))
    return np.tanh(m + x) - x + bias


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory):
    """A copy of this tree with the toy architecture described and generated."""
    root = tmp_path_factory.mktemp("toy")
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("lightnet", "generator", "templates", "descriptions"):
        shutil.copytree(ROOT / part, root / part, ignore=ignore)
    descriptions = root / "descriptions"
    (descriptions / "archs" / "toy.yaml").write_text(TOY_ARCH)
    (descriptions / "optimizers" / "toy.yaml").write_text(TOY_OPTIMIZER)
    for file, text in TOY_OPS.items():
        with open(descriptions / "ops" / file, "a") as f:
            f.write(text)
    done = python("-m", "generator", cwd=root, env={"PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr
    assert "updated: lightnet/auto/archs.py" in done.stdout
    return root


def _run(root, x):
    env = {"PYTHONPATH": f"{root}:{ROOT / 'tests'}"}
    done = python("-c", SCRIPT, json.dumps(MODEL), json.dumps(x.tolist()), cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_toy_architecture_runs_its_three_ops_and_falls_back_to_cpu(toy_tree):
    x = np.random.default_rng(0).uniform(-3, 3, (2, 8)).astype(np.float32)
    result = _run(toy_tree, x)
    assert result["toy"]["optypes"] == {
        "x": "input_cpu", "bias": "create_cpu", "r": "relu_toy", "s": "sigmoid_toy",
        "m": "elew_toy", "a": "elew_toy", "t": "tanh_cpu", "d": "elew_cpu", "y": "elew_cpu"}
    assert set(result["cpu"]["optypes"].values()) <= {
        "input_cpu", "create_cpu", "relu_cpu", "sigmoid_cpu", "elew_cpu", "tanh_cpu"}
    want = _reference(x.astype(np.float64))
    for target in ("toy", "cpu"):
        (got,) = result[target]["outputs"].values()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_registry_takes_toys_arch_from_its_package(toy_tree):
    script = textwrap.dedent("""\
        from lightnet.archs.registry import get_arch
        toy = get_arch("toy")
        print(type(toy).__module__, toy.fallback, sorted(toy.ops), toy.describe(), sep="|")
        """)
    done = python("-c", script, cwd=toy_tree,
                  env={"PYTHONPATH": f"{toy_tree}:{ROOT / 'tests'}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("|") == [
        "toyarch", "cpu", "['elew_toy', 'relu_toy', 'sigmoid_toy']",
        "available (the test architecture: relu, sigmoid, elew sum/mul)\n"]


def test_lightnet_lists_toy_as_a_target(toy_tree):
    done = python("-m", "lightnet", "--targets", cwd=toy_tree,
                  env={"PYTHONPATH": f"{toy_tree}:{ROOT / 'tests'}"})
    assert done.returncode == 0, done.stderr
    assert "toy: available (the test architecture: relu, sigmoid, elew sum/mul)" in (
        done.stdout.splitlines())
