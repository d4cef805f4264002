"""Differential fuzzing: every generated model runs under both configurations
of each pair in ORACLE_PAIRS (a target and whether the optimizer fuses), and
the two must agree: the same outputs (each within rel 1e-4 of the largest
magnitude of the reference's, NaN where it has NaN) or the same kind of
refusal. A new target joins with one line: its pair with `cpu`.

The models: FUSIBLE ones (every fusion the cpu optimizer makes: batchnorm
folds, residual adds, each activation, chains of transposes and reshapes, a
forward) and the IR fuzzer's (examples, built models, one per op example),
with 0-3 plausible changes (a size, a stride, a pad, a dim, a slope moved to
a nearby value: new models that mostly compile) or 0-2 of the IR fuzzer's
mutations (mostly refused by init, identically in both configurations).
Inputs are fed seeded random data.

A refusal's kind is where it happened (init, compile, load, run), or `memory`
for the memory limit: fusion changes what a model needs, so a model refused by
the limit in one configuration and not in the other is no disagreement.
"""

from __future__ import annotations

import copy
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import (BASE_DOCS, CI_EXAMPLES, FUZZ_MEMORY_LIMIT, SLOW_EXAMPLES, deadline,
                      fuzz_settings, mutated_docs)
from lightnet import Context, LightNetError
from tests.irbuild import ModelBuilder

# (target, fusion) configurations whose results must agree.
ORACLE_PAIRS = [
    (("cpu", True), ("cpu", False)),
    (("cpu", True), ("dnnl", True)),
]
RTOL = 1e-4

OUTCOMES: dict[str, int] = {}


@dataclass
class Outcome:
    outputs: dict | None  # name -> array, when it ran
    kind: str | None = None  # when refused: init, compile, load, run or memory
    message: str = ""


def input_data(name: str, dtype: np.dtype, shape) -> np.ndarray:
    """Seeded by the tensor's name: the same in every configuration."""
    rng = np.random.default_rng(zlib.crc32(name.encode("utf-8", "surrogatepass")))
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 4, shape).astype(dtype)  # small: valid as indices too


def run(doc, target: str, fusion: bool, weights: dict) -> Outcome:
    ctx = Context(memory_limit=FUZZ_MEMORY_LIMIT)
    stage = "init"
    try:
        with deadline():
            ctx.init(doc)
            stage = "compile"
            ctx.compile(target, combine=fusion, weights=weights)
            stage = "load"
            ctx.load()
            for name in ctx.inputs:
                entry = ctx.tensors[name]
                ctx.set_data(name, input_data(name, entry.dtype.np, entry.shape))
            stage = "run"
            ctx.run()
            return Outcome({name: ctx.get_data(name) for name in ctx.outputs})
    except LightNetError as e:
        message = str(e)
        kind = "memory" if message.endswith("(--memory-limit)") else stage
        return Outcome(None, kind, message)


def disagreement(a: np.ndarray, b: np.ndarray) -> str | None:
    """Why `a` does not match the reference `b` (None: it does)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    if a.dtype.kind != "f":
        wrong = np.flatnonzero(a != b)
        return None if wrong.size == 0 else f"{wrong.size} elements differ"
    if not np.array_equal(np.isnan(a), np.isnan(b)) or not np.array_equal(
            np.where(np.isinf(b), a, 0), np.where(np.isinf(b), b, 0)):
        return "NaN or infinity where the other has none"
    finite = np.isfinite(b)
    if not finite.any():
        return None
    scale = float(np.max(np.abs(b[finite])))
    err = float(np.max(np.abs(a[finite].astype(np.float64) - b[finite])))
    return None if err <= RTOL * scale + 1e-30 else f"max |diff| {err:g}, largest |ref| {scale:g}"


def compare(one: Outcome, two: Outcome, label: str) -> None:
    """`two` agrees with the reference `one`: the same outputs, or the same refusal."""
    if one.outputs is not None and two.outputs is not None:
        assert sorted(one.outputs) == sorted(two.outputs), \
            f"{label}: outputs {sorted(one.outputs)} vs {sorted(two.outputs)}"
        for name in one.outputs:
            problem = disagreement(two.outputs[name], one.outputs[name])
            assert problem is None, f"{label}: output '{name}': {problem}"
        outcome = "both ran"
    elif one.outputs is None and two.outputs is None:
        # A model over the memory limit may be refused earlier by another target (oneDNN
        # refusing its sizes when the op is checked).
        assert one.kind == two.kind or "memory" in (one.kind, two.kind), \
            f"{label}: refused differently:\n  {one.message}\n  {two.message}"
        outcome = f"both refused ({one.kind})"
    else:
        refused = one if one.outputs is None else two
        assert refused.kind == "memory", f"{label}: only one refused: {refused.message}"
        outcome = "one over the memory limit"
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def check(doc, weights: dict | None = None) -> Outcome:
    """Run `doc` (with `weights`: tensor name -> array) in every configuration of
    ORACLE_PAIRS, once each, and compare each pair; returns the outcome of the first
    configuration (the reference)."""
    outcomes = {}
    for pair in ORACLE_PAIRS:
        for config in pair:
            if config not in outcomes:
                outcomes[config] = run(doc, *config, weights or {})
        first, second = pair
        compare(outcomes[first], outcomes[second], f"{first} vs {second}")
    return outcomes[ORACLE_PAIRS[0][0]]


# Models ---------------------------------------------------------------------------------------


def _fusible() -> list[dict]:
    """Models the cpu optimizer rewrites: every combiner has a window here."""
    models = []
    for act, params in (("relu", {}), ("lrelu", {"negslope": 0.2}), ("sigmoid", {}),
                        ("tanh", {}), ("clip", {"min": -0.5, "max": 0.7})):
        m = ModelBuilder()
        x = m.input("x", [2, 4, 9, 9])
        y = m.batchnorm(m.conv(x, 4, 6, 3, stride=2, pad=1), 6)
        y = m.op(act, {"src": m.add(y, m.conv(x, 4, 6, 1, stride=2))}, **params)
        y = m.conv(y, 6, 6, 3, pad=1, group=6)  # depthwise
        y = m.op(act, {"src": m.batchnorm(y, 6)}, **params)
        y = m.op("reshape", {"src": y}, dims=[2, 6 * 5 * 5])
        w = m.weight("fc", [150, 7], -0.1, 0.1)
        y = m.op("matmul", {"src1": y, "src2": w})
        models.append(m.to_dict())
        m = ModelBuilder()
        y = m.op("matmul", {"src1": m.input("a", [3, 5]), "src2": m.weight("b", [5, 4])})
        y = m.op("batchnorm", {"src": y, "scale": m.weight("s", [4], 0.5, 1.5),
                               "offset": m.weight("o", [4]), "mean": m.weight("mu", [4]),
                               "var": m.weight("v", [4], 0.5, 1.5)}, epsilon=1e-3)
        m.op(act, {"src": y}, name="out", **params)
        models.append(m.to_dict())
    m = ModelBuilder()
    x = m.input("x", [2, 3, 4, 5])
    y = m.op("transpose", {"src": x}, axes=[0, 2, 3, 1])
    y = m.op("transpose", {"src": y}, axes=[0, 3, 1, 2])  # the identity: a forward
    y = m.op("transpose", {"src": m.relu(y)}, axes=[3, 2, 1, 0])
    y = m.op("transpose", {"src": y}, axes=[1, 0, 3, 2])
    y = m.op("reshape", {"src": m.op("reshape", {"src": y}, dims=[6, 20])}, dims=[4, 30])
    m.op("softmax", {"src": y}, axis=1)
    models.append(m.to_dict())
    return models


FUSIBLE = _fusible()
_NUMERIC = ("dims", "size", "stride", "padding", "dilation", "group", "axis", "axes",
            "negslope", "min", "max", "epsilon", "scales", "len", "start", "stop", "step")


@st.composite
def tweaked_docs(draw):
    """A FUSIBLE or base model with 0-3 numeric params moved to nearby values."""
    doc = copy.deepcopy(draw(st.sampled_from(FUSIBLE + BASE_DOCS)))
    params = [p for op in doc["ops"] for p in op.get("params", [])
              if p["arg_name"] in _NUMERIC and p["value"] is not None]
    for _ in range(draw(st.integers(0, 3)) if params else 0):
        p = draw(st.sampled_from(params))
        value = p["value"]
        index = None
        if isinstance(value, list):
            if not value or not all(isinstance(v, (int, float)) for v in value):
                continue
            index = draw(st.integers(0, len(value) - 1))
            value = value[index]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, int):
            new = draw(st.sampled_from([value - 1, value + 1, value * 2, 0, 1, 2, 3]))
        else:
            new = draw(st.floats(-3, 3, allow_nan=False) | st.sampled_from([0.0, 1.0, 0.5]))
        if index is None:
            p["value"] = new
        else:
            p["value"][index] = new
    return doc, []


docs = tweaked_docs() | mutated_docs(count=st.integers(0, 2))


@fuzz_settings(CI_EXAMPLES)
@given(docs)
def test_fusion_on_and_off_agree(case):
    check(case[0])


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(docs)
def test_fusion_on_and_off_agree_slow(case):
    check(case[0])
