"""Differential fuzzing: every generated model runs under both configurations
of each pair in ORACLE_PAIRS (a target and whether the optimizer fuses), and
the two must agree: the same outputs (each within rel 1e-4 of the largest
magnitude of the reference's, NaN where it has NaN) or the same kind of
refusal (fuzzutil.check). A new target joins with one line: its pair with `cpu`
in fuzzutil.ORACLE_PAIRS.

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

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import BASE_DOCS, CI_EXAMPLES, SLOW_EXAMPLES, check, fuzz_settings, mutated_docs
from tests.irbuild import ModelBuilder

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
