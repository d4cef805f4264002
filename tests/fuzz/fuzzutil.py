"""Shared pieces of the fuzz tests: base documents, JSON mutations, a deadline
per example, the contract every refusal must keep (run_fuzzed holds a model to
it), and the differential oracle (check: every configuration agrees).

Each fuzz test starts from valid inputs, applies a few drawn mutations and
checks the component either accepts the result or raises LightNetError with a
message naming where the problem is. Hypothesis profiles (conftest.py) make
the default run derandomized, so CI explores the same cases every time.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import signal
import zlib
from dataclasses import dataclass
from pathlib import Path

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from lightnet import Context, LightNetError
from lightnet.archs.registry import op_protos
from tests.irbuild import ModelBuilder
from tests.opexamples import op_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# The fuzzed models run under this memory limit, so that a mutation making a
# tensor large (but below the 2**40 element cap) is refused by the planner
# instead of allocating gigabytes: the limit is part of what is tested.
FUZZ_MEMORY_LIMIT = 16 * 2**20
# Seconds one example may take before it counts as a hang.
EXAMPLE_SECONDS = 20


def slow_examples(default: int) -> int:
    """The example count of a fuzz test run with -m slow: `default`, unless the
    environment sets LIGHTNET_FUZZ_EXAMPLES (a longer or a shorter run)."""
    return int(os.environ.get("LIGHTNET_FUZZ_EXAMPLES", default))


CI_EXAMPLES = 300  # per fuzz test in the default suite
SLOW_EXAMPLES = slow_examples(5000)  # per fuzz test with -m slow

# Hypothesis profiles. `ci` (the default) is derandomized: every run draws the
# same examples, so the suite is deterministic. `explore` draws new examples
# each run (LIGHTNET_FUZZ_PROFILE=explore, e.g. with -m slow); a failure
# prints the blob that reproduces it. Applied per test, never globally.
_COMMON = dict(
    deadline=None,  # each example has its own hard deadline: see deadline()
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.large_base_example],
)
settings.register_profile("lightnet-ci", derandomize=True, **_COMMON)
settings.register_profile("lightnet-explore", derandomize=False, **_COMMON)
PROFILE = settings.get_profile("lightnet-" + os.environ.get("LIGHTNET_FUZZ_PROFILE", "ci"))


def fuzz_settings(max_examples: int) -> settings:
    """The settings of one fuzz test: the profile, with its example count."""
    return settings(PROFILE, max_examples=max_examples)


# Deadlines -------------------------------------------------------------------------------


class Hang(BaseException):
    """An example ran past its deadline (a BaseException: nothing may catch it)."""


@contextlib.contextmanager
def deadline(seconds: float = EXAMPLE_SECONDS):
    """Raise Hang in the main thread when the block runs longer than `seconds`."""
    def on_alarm(signum, frame):
        raise Hang(f"the example ran longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Base documents ----------------------------------------------------------------------------


def _example_models() -> list[dict]:
    """One small model per valid op example: `create` ops for the inputs, then
    the op (the same construction as tests/test_op_examples.py)."""
    models = []
    for optype, example in op_examples():
        proto = op_protos()[optype]
        if proto.arch != "none" or example["error"] is not None:
            continue
        ops, ins = [], []
        for arg, value in example["inputs"].items():
            dtype, data = "TL_FLOAT", value
            if isinstance(value, dict):
                dtype, data = value.get("dtype", "TL_FLOAT"), value["data"]
            shape, flat = _shape_and_flat(data)
            ops.append({"name": f"create_{arg}", "optype": "create", "tensors_in": [],
                        "tensors_out": [{"arg_name": "dst", "name": f"in_{arg}"}],
                        "params": [{"arg_name": "dtype", "value": dtype},
                                   {"arg_name": "dims", "value": shape or [1]},
                                   {"arg_name": "data", "value": flat}]})
            ins.append({"arg_name": arg, "name": f"in_{arg}"})
        outs = [t.arg_name for t in proto.tensors_out]
        ops.append({"name": "op", "optype": proto.optype, "tensors_in": ins,
                    "tensors_out": [{"arg_name": a, "name": f"out_{a}"} for a in outs],
                    "params": [{"arg_name": k, "value": v}
                               for k, v in example["params"].items()]})
        models.append({"ops": ops})
    return models


def _shape_and_flat(value):
    if not isinstance(value, list):
        return [], [float(value)]
    if not value:
        return [0], []
    inner = [_shape_and_flat(v) for v in value]
    return [len(value), *inner[0][0]], [x for _, flat in inner for x in flat]


def _built_models() -> list[dict]:
    """Small models built with ModelBuilder: a conv block, a residual, inputs."""
    m = ModelBuilder()
    x = m.input("data", [1, 3, 8, 8])
    y = m.relu(m.batchnorm(m.conv(x, 3, 4, 3, pad=1), 4))
    y = m.maxpool(y, 2, 2)
    z = m.relu(m.conv(y, 4, 4, 1))
    m.concat([m.add(y, z), z])
    first = m.to_dict()

    m = ModelBuilder()
    x = m.weight("x", [1, 2, 6, 6])
    y = m.conv(x, 2, 2, 3, pad=1)
    y = m.op("softmax", {"src": m.add(y, x)}, axis=1)
    y = m.op("transpose", {"src": y}, axes=[0, 2, 3, 1])
    m.op("reshape", {"src": y}, dims=[36, 2])
    second = m.to_dict()

    m = ModelBuilder()
    a = m.weight("a", [2, 3], from_file=False)
    b = m.weight("b", [3, 4])
    c = m.op("matmul", {"src1": a, "src2": b})
    m.op("print", {"src": m.op("sigmoid", {"src": c})}, outs=(), msg="c:")
    third = m.to_dict()
    return [first, second, third]


def load_example(name: str) -> dict:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


BASE_DOCS = [load_example("example.json"), load_example("squeezenet.json"),
             *_built_models(), *_example_models()]


# JSON mutations ------------------------------------------------------------------------------

OPTYPES = sorted(op_protos())
FIELD_NAMES = ["ops", "name", "optype", "tensors_in", "tensors_out", "params", "arg_name",
               "value", "offset", "src", "dst", "dims", "dtype", "axis", "data", "from_file"]
SPECIAL_NUMBERS = [0, -1, 1, 2, 3, -(2**31), 2**31 - 1, 2**31, 2**32, 2**40, 2**40 + 1,
                   2**53 + 1, 2**63, 2**64, 10**12, 10**30, 10**400, -(10**400), 0.5, -0.0,
                   1e-300, 1e300, 1e308, -1e308, 3.4e38, 3.5e38, math.nan, math.inf,
                   -math.inf]
INJECTIONS = ["__import__('os').system('touch /tmp/x')", "{{7*7}}", "${{7*7}}", "%s%n",
              "'; DROP TABLE", "../../etc/passwd", "\x00", "\ud800", "é" * 3, " ", ""]

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(SPECIAL_NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(INJECTIONS + OPTYPES + FIELD_NAMES),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=4),
                                            inner, max_size=3)),
    max_leaves=6,
)


def paths(node, path=()):
    """Every path (a tuple of keys and indices) into a JSON value, itself first."""
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*path, i))


def get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def put(doc, path, value):
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


def _strings_of(doc) -> list[str]:
    """Names the document uses (ops, tensors, args): for plausible mix-ups."""
    found = set()
    for p in paths(doc):
        value = get(doc, p)
        if isinstance(value, str) and p and p[-1] in ("name", "arg_name", "optype"):
            found.add(value)
    return sorted(found)


def _pick(draw, doc, kind=None):
    """A path into `doc` (of a value of `kind`, if given); None when there is none."""
    candidates = [p for p in paths(doc) if kind is None or isinstance(get(doc, p), kind)]
    if kind in (int, float, (int, float)):
        candidates = [p for p in candidates if not isinstance(get(doc, p), bool)]
    return draw(st.sampled_from(candidates)) if candidates else None


def _ops(doc):
    ops = doc.get("ops") if isinstance(doc, dict) else None
    return ops if isinstance(ops, list) else []


def _op_dicts(doc):
    return [(i, op) for i, op in enumerate(_ops(doc)) if isinstance(op, dict)]


def _tensor_refs(doc, field):
    """(op index, item) of every well-formed tensors_in / tensors_out item."""
    refs = []
    for i, op in _op_dicts(doc):
        items = op.get(field)
        if isinstance(items, list):
            refs += [(i, t) for t in items if isinstance(t, dict) and "name" in t]
    return refs


def mutate(draw, doc):
    """Apply one drawn mutation to `doc` (in place where it can); returns the
    document and a short description of what was done."""
    kind = draw(st.sampled_from([
        "drop", "rename_key", "retype", "number", "string", "array", "swap_ops",
        "later_input", "duplicate_name", "huge_dims", "nan_param", "duplicate_op",
        "self_input", "dangling", "optype",
    ]))
    if kind == "drop":
        path = _pick(draw, doc)
        if path:
            parent = get(doc, path[:-1])
            del parent[path[-1]]
    elif kind == "rename_key":
        path = _pick(draw, doc, dict)
        node = get(doc, path) if path is not None else None
        if node:
            old = draw(st.sampled_from(sorted(node)))
            new = draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=6))
            node[new] = node.pop(old)
    elif kind == "retype":
        path = _pick(draw, doc)
        value = draw(json_values)
        if path == () and isinstance(value, str):
            value = [value]  # a string is a path to Context.init, not a document
        doc = put(doc, path, value)
    elif kind == "number":
        path = _pick(draw, doc, (int, float))
        if path is not None:
            doc = put(doc, path, draw(st.sampled_from(SPECIAL_NUMBERS) | st.integers()
                                      | st.floats()))
    elif kind == "string":
        path = _pick(draw, doc, str)
        if path is not None:
            names = _strings_of(doc)
            doc = put(doc, path, draw(st.sampled_from(names + INJECTIONS + OPTYPES)
                                      | st.text(max_size=8) | st.integers() | st.floats()))
    elif kind == "array":
        path = _pick(draw, doc, list)
        node = get(doc, path) if path is not None else None
        if node is not None:
            how = draw(st.sampled_from(["pop", "duplicate", "append", "clear", "reverse"]))
            if how == "pop" and node:
                node.pop(draw(st.integers(0, len(node) - 1)))
            elif how == "duplicate" and node:
                node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
            elif how == "append":
                node.append(draw(json_values))
            elif how == "clear":
                node.clear()
            else:
                node.reverse()
    elif kind == "swap_ops":
        ops = _ops(doc)
        if len(ops) >= 2:
            i, j = draw(st.integers(0, len(ops) - 1)), draw(st.integers(0, len(ops) - 1))
            ops[i], ops[j] = ops[j], ops[i]
    elif kind in ("later_input", "self_input", "dangling"):
        ins, outs = _tensor_refs(doc, "tensors_in"), _tensor_refs(doc, "tensors_out")
        if ins:
            i, item = draw(st.sampled_from(ins))
            if kind == "dangling":
                item["name"] = draw(st.sampled_from(["nowhere", "tensor0", ""]) | st.text(max_size=5))
            else:
                # An op reading a tensor produced later (or by itself): a cycle.
                later = [t["name"] for j, t in outs if (j > i if kind == "later_input" else j == i)]
                if later:
                    item["name"] = draw(st.sampled_from(later))
    elif kind == "duplicate_name":
        ops = _op_dicts(doc)
        outs = _tensor_refs(doc, "tensors_out")
        if len(ops) >= 2 and draw(st.booleans()):
            (_, a), (_, b) = draw(st.sampled_from(ops)), draw(st.sampled_from(ops))
            a["name"] = b.get("name")
        elif len(outs) >= 2:
            (_, a), (_, b) = draw(st.sampled_from(outs)), draw(st.sampled_from(outs))
            a["name"] = b["name"]
    elif kind in ("huge_dims", "nan_param"):
        params = [p for _, op in _op_dicts(doc) if isinstance(op.get("params"), list)
                  for p in op["params"] if isinstance(p, dict) and "value" in p]
        if kind == "huge_dims":
            params = [p for p in params if p.get("arg_name") in ("dims", "size", "stride",
                                                                 "padding", "len", "scales")]
        if params:
            p = draw(st.sampled_from(params))
            value = draw(st.sampled_from([2**31 - 1, 2**31, 2**40, 10**12, 2**62, -1, -(2**31),
                                          1e300, math.nan, math.inf, -math.inf]))
            if isinstance(p["value"], list) and p["value"] and draw(st.booleans()):
                p["value"][draw(st.integers(0, len(p["value"]) - 1))] = value
            elif isinstance(p["value"], list) and draw(st.booleans()):
                p["value"] = [value] * draw(st.integers(1, 5))
            else:
                p["value"] = value
    elif kind == "duplicate_op":
        ops = _ops(doc)
        if ops:
            ops.insert(draw(st.integers(0, len(ops))),
                       copy.deepcopy(ops[draw(st.integers(0, len(ops) - 1))]))
    elif kind == "optype":
        ops = _op_dicts(doc)
        if ops:
            _, op = draw(st.sampled_from(ops))
            op["optype"] = draw(st.sampled_from(OPTYPES + ["nope", "", "CREATE", "slice_gpu"]))
    return doc, kind


@st.composite
def mutated_docs(draw, count=st.integers(1, 3)):
    """A base document with 1 to 3 mutations: (document, kinds applied)."""
    doc = copy.deepcopy(draw(st.sampled_from(BASE_DOCS)))
    kinds = []
    for _ in range(draw(count)):
        doc, kind = mutate(draw, doc)
        kinds.append(kind)
    return doc, kinds


# The contract of a refusal -----------------------------------------------------------------

# Where a message says which op: its index or its name.
NAMES_OP = re.compile(r"\bop (\d+\b|'[^']*')")
# Where a message says which part of the op: a field, an arg or a param.
NAMES_FIELD = re.compile(
    r"\b(field|param|tensor_in|tensor_out|input|output|arg_name|name) '"
    r"|\b(tensors_in|tensors_out|params)\[\d+\]"
    r"|: unknown field '|: unknown optype '"
    r"|\bop \d+: expected an object, found "  # the op itself is not an object
    r"|: op: infer: "  # a shape helper refused the op's arguments
    r"|: op: check: .*, found \w+="  # a check over several args: it lists each
    r"|\): (load|run): \w+: ")  # a kernel refused the data (static_run or run)
# Problems of the whole model, which belong to no op; each says where it is.
MODEL_LEVEL = [
    re.compile(r"^[^:]*(:\d+:\d+)?: invalid JSON: "),
    re.compile(r"^[^:]*: the model is not UTF-8 text$"),
    re.compile(r"^[^:]*: the model must be a JSON object, found "),
    re.compile(r"^[^:]*: the model has no 'ops' field$"),
    re.compile(r"^[^:]*: 'ops' must be an array, found "),
    re.compile(r"^[^:]*: the model needs \d+ bytes of cpu memory, more than the limit of "
               r"\d+ bytes \(--memory-limit\)$"),
    re.compile(r"^[^:]*:\d+: the JSON nests more than \d+ brackets deep \(the limit\)$"),
    re.compile(r"^[^:]*: the model has \d+ ops, more than the limit of \d+$"),
]


def refusal_problem(message: str) -> str | None:
    """Why `message` breaks the error contract (None: it keeps it).

    A refusal of a model names the op (index or name) and the field or arg at
    fault, or is one of the few problems of the whole model (MODEL_LEVEL).
    """
    if "\n" in message:
        return "the message is not one line"
    if any(p.search(message) for p in MODEL_LEVEL):
        return None
    if not NAMES_OP.search(message):
        return "the message names no op"
    if not NAMES_FIELD.search(message) and "tensor '" not in message:
        return "the message names no field or arg"
    return None


# Running a model under the contract ---------------------------------------------------------

RUN_OUTCOMES: dict[str, int] = {}


def run_fuzzed(source) -> str | None:
    """Run a model end to end under the contract of a refusal (refusal_problem):
    None if it ran, else the refusal's message."""
    ctx = Context(memory_limit=FUZZ_MEMORY_LIMIT)
    try:
        with deadline():
            ctx.init(source)
            ctx.compile("cpu", weights={})  # as the lightnet command does: rules may fold
            ctx.load()
            ctx.run()
    except LightNetError as e:
        message = str(e)
        problem = refusal_problem(message)
        assert problem is None, f"{problem}: {message}"
        RUN_OUTCOMES["refused"] = RUN_OUTCOMES.get("refused", 0) + 1
        return message
    RUN_OUTCOMES["ran"] = RUN_OUTCOMES.get("ran", 0) + 1
    return None


# The differential oracle (test_fuzz_differential.py's docstring) ----------------------------

# (target, fusion) configurations whose results must agree.
ORACLE_PAIRS = [
    (("cpu", True), ("cpu", False)),
    (("cpu", True), ("dnnl", True)),
]
ORACLE_RTOL = 1e-4

ORACLE_OUTCOMES: dict[str, int] = {}


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


def run_configuration(doc, target: str, fusion: bool, weights: dict) -> Outcome:
    """`doc` run for `target`, fused or not, on input_data: its outputs or its refusal."""
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
    if err <= ORACLE_RTOL * scale + 1e-30:
        return None
    return f"max |diff| {err:g}, largest |ref| {scale:g}"


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
    ORACLE_OUTCOMES[outcome] = ORACLE_OUTCOMES.get(outcome, 0) + 1


def check(doc, weights: dict | None = None) -> Outcome:
    """Run `doc` (with `weights`: tensor name -> array) in every configuration of
    ORACLE_PAIRS, once each, and compare each pair; returns the outcome of the first
    configuration (the reference)."""
    outcomes = {}
    for pair in ORACLE_PAIRS:
        for config in pair:
            if config not in outcomes:
                outcomes[config] = run_configuration(doc, *config, weights or {})
        first, second = pair
        compare(outcomes[first], outcomes[second], f"{first} vs {second}")
    return outcomes[ORACLE_PAIRS[0][0]]
