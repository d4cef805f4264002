"""The pass registry: the pipelines it derives from the passes' declarations,
passes registered by a user, and the errors of bad declarations."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.archs.registry import get_arch
from lightnet.cli import main
from lightnet.compiler import pipeline, rewrites
from tests.helpers import compiled
from tests.irbuild import op

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ["expand", "fold-constants", "hoist-constants", "combine", "remove-dead-constants",
            "check", "plan-memory"]


@pytest.fixture
def register():
    """pipeline.register, undone after the test."""
    added = []

    def reg(name, **declarations):
        def add(run):
            pipeline.register(name, **declarations)(run)
            added.append(name)
            return run
        return add

    yield reg
    for name in added:
        pipeline.unregister(name)


def weight(name, dims):
    return op(name, "create", outs={"dst": name}, dtype="TL_FLOAT", dims=dims, from_file=True)


def conv_bn_relu_print():
    """x -> conv -> batchnorm -> relu -> print: the batchnorm folds into the
    conv (with the weights), the relu fuses, and the print stays."""
    return {"ops": [
        op("x", "input", outs={"dst": "x"}, dims=[1, 2, 5, 5], dtype="TL_FLOAT"),
        weight("w", [3, 2, 3, 3]), weight("b", [3]),
        *(weight(n, [3]) for n in ("scale", "offset", "mean", "var")),
        op("conv", "conv2d", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "conv"},
           size=[3, 3], padding=[1, 1, 1, 1]),
        op("bn", "batchnorm", {"src": "conv", "scale": "scale", "offset": "offset",
                               "mean": "mean", "var": "var"}, {"dst": "bn"}, epsilon=1e-3),
        op("relu", "relu", {"src": "bn"}, {"dst": "relu"}),
        op("show", "print", {"src": "relu"}, msg="relu"),
    ]}


def model_weights():
    rng = np.random.default_rng(3)
    w = {"w": rng.uniform(-1, 1, (3, 2, 3, 3)), "b": rng.uniform(-1, 1, 3),
         "scale": rng.uniform(0.5, 1.5, 3), "offset": rng.uniform(-1, 1, 3),
         "mean": rng.uniform(-1, 1, 3), "var": rng.uniform(0.5, 1.5, 3)}
    return {n: a.astype(np.float32) for n, a in w.items()}


def by_hand(model, steps, weights=None):
    """`model` compiled by calling the pass functions in the given order."""
    ctx = Context()
    ctx.init(model)
    if weights is not None:
        ctx.weights = ctx._read_weights(weights)
        ctx.compiled_with_weights = True
    arch, outputs = get_arch("cpu"), ctx.outputs
    for step in steps:
        {"expand": lambda: rewrites.expand(ctx, arch),
         "fold-constants": lambda: rewrites.fold_constants(ctx, "cpu", outputs),
         "hoist-constants": lambda: rewrites.hoist_constants(ctx),
         "combine": lambda: rewrites.combine(ctx, arch),
         "remove-dead-constants": lambda: rewrites.remove_dead_constants(ctx, outputs),
         "check": ctx.check,
         "plan-memory": ctx.plan}[step]()
    return ctx


def plan_of(ctx):
    return ({m: (r.arena, r.lower_bound) for m, r in ctx.mem.items()},
            {n: e.offset for n, e in ctx.tensors.items()})


# Today's pipeline ---------------------------------------------------------------------


def test_the_built_in_declarations_give_the_pipeline_in_its_order():
    assert [p.name for p in pipeline.pipeline("cpu")] == BUILT_IN
    # dnnl's layout pass runs after the fusions, before the check.
    assert [p.name for p in pipeline.pipeline("dnnl")] == [*BUILT_IN[:5], "layouts",
                                                          *BUILT_IN[5:]]


@pytest.mark.parametrize("with_weights", [False, True])
def test_compiling_is_running_the_passes_in_that_order(with_weights):
    weights = model_weights() if with_weights else None
    ctx = compiled(conv_bn_relu_print(), weights=weights)
    hand = by_hand(conv_bn_relu_print(), BUILT_IN, weights)
    assert ctx.print() == hand.print()
    assert plan_of(ctx) == plan_of(hand)
    optypes = [o.optype for o in ctx.ops]
    if with_weights:  # the batchnorm folded, its weights (and the conv's) gone
        assert optypes == ["create_cpu", "create_cpu", "input_cpu", "conv2d_cpu", "print_cpu"]
    else:
        assert "batchnorm_cpu" not in optypes and "relu_cpu" not in optypes


def test_without_combining_the_fusion_passes_are_left_out():
    weights = model_weights()
    ctx = compiled(conv_bn_relu_print(), weights=weights, combine=False)
    hand = by_hand(conv_bn_relu_print(), ["expand", "hoist-constants", "check", "plan-memory"],
                   weights)
    assert ctx.print() == hand.print()
    assert [o.optype for o in ctx.ops][-4:] == ["conv2d_cpu", "batchnorm_cpu", "relu_cpu",
                                                "print_cpu"]


# Passes of one's own --------------------------------------------------------------------


def test_a_pass_rewriting_fused_ops_runs_after_the_fusions_and_before_the_check(register):
    seen = {}

    @register("drop-prints", requires=["fused"], provides=["ops-final"])
    def drop_prints(ctx, job):
        seen["optypes"] = [o.optype for o in ctx.ops]
        seen["planned"] = ctx.mem is not None
        seen["target"] = job.arch.name
        for i in reversed(range(len(ctx.ops))):
            if ctx.ops[i].optype == "print_cpu":
                ctx.remove_ops(i, 1)

    assert [p.name for p in pipeline.pipeline("cpu")] == [
        "expand", "fold-constants", "hoist-constants", "combine", "remove-dead-constants",
        "drop-prints", "check", "plan-memory"]
    ctx = compiled(conv_bn_relu_print(), weights=model_weights())
    assert seen == {"optypes": ["create_cpu", "create_cpu", "input_cpu", "conv2d_cpu",
                                "print_cpu"], "planned": False, "target": "cpu"}
    assert [o.optype for o in ctx.ops] == ["create_cpu", "create_cpu", "input_cpu",
                                           "conv2d_cpu"]
    assert ctx.mem is not None and ctx.outputs == ["relu"]  # the print is gone


def test_a_pass_requiring_only_the_lowering_still_runs_before_the_plan(register):
    @register("count", requires=["lowered"], provides=["ops-final"])
    def count(ctx, job):
        pass

    names = [p.name for p in pipeline.pipeline("cpu")]
    assert names.index("expand") < names.index("count") < names.index("check")


def test_a_pass_requiring_the_memory_plan_runs_last_and_sees_it(register):
    arenas = []

    @register("arena-report", requires=["memory-plan"], provides=["arena-report"])
    def report(ctx, job):
        arenas.append(sum(r.arena for r in ctx.mem.values()))

    ctx = compiled(conv_bn_relu_print())
    assert [p.name for p in pipeline.pipeline("cpu")] == [*BUILT_IN, "arena-report"]
    assert arenas == [sum(r.arena for r in ctx.mem.values())] and arenas[0] > 0


def test_a_pass_of_one_target_is_only_in_its_pipeline(register):
    register("dnnl-only", requires=["fused"], provides=["ops-final"], targets=["dnnl"])(
        lambda ctx, job: None)
    assert "dnnl-only" in [p.name for p in pipeline.pipeline("dnnl")]
    assert [p.name for p in pipeline.pipeline("cpu")] == BUILT_IN


def test_passes_left_unordered_keep_their_registration_order(register):
    for name in ("b-pass", "a-pass"):
        register(name, requires=["checked"], provides=[name])(lambda ctx, job: None)
    assert [p.name for p in pipeline.pipeline("cpu")][-3:] == ["plan-memory", "b-pass",
                                                               "a-pass"]


def test_register_returns_the_function_and_records_its_declarations(register):
    def run(ctx, job):
        """Say why, in one line.

        More."""

    assert register("mine", requires=("fused",), provides=["x"])(run) is run
    (mine,) = [p for p in pipeline.registered() if p.name == "mine"]
    assert (mine.run, mine.requires, mine.provides, mine.targets, mine.doc) == (
        run, ("fused",), ("x",), None, "Say why, in one line.")


# Errors ---------------------------------------------------------------------------------


def test_a_requirement_no_pass_provides_is_an_error(register):
    register("needs-layouts", requires=["layouts"], provides=["ops-final"])(
        lambda ctx, job: None)
    message = "pass 'needs-layouts' requires 'layouts', which no pass of target 'cpu' provides"
    with pytest.raises(LightNetError, match=message):
        pipeline.pipeline("cpu")
    ctx = Context()
    ctx.init(conv_bn_relu_print())
    with pytest.raises(LightNetError, match=message):
        ctx.compile("cpu")


def test_a_requirement_only_another_target_provides_is_missing_too(register):
    register("layout", requires=["fused"], provides=["layouts"], targets=["dnnl"])(
        lambda ctx, job: None)
    register("reorder", requires=["layouts"], provides=["ops-final"])(lambda ctx, job: None)
    assert [p.name for p in pipeline.pipeline("dnnl")][5:8] == ["layouts", "layout", "reorder"]
    with pytest.raises(LightNetError, match="'reorder' requires 'layouts', which no pass of "
                                            "target 'cpu' provides"):
        pipeline.pipeline("cpu")


def test_passes_requiring_each_other_are_an_error_naming_the_circle(register):
    register("a", requires=["fused", "y"], provides=["x"])(lambda ctx, job: None)
    register("b", requires=["x"], provides=["y"])(lambda ctx, job: None)
    with pytest.raises(LightNetError, match=r"^passes of target 'cpu' require each other in a "
                                            r"circle: 'a' requires 'y' \(provided by 'b'\), "
                                            r"'b' requires 'x' \(provided by 'a'\)$"):
        pipeline.pipeline("cpu")


def test_a_pass_requiring_what_only_it_provides_is_a_circle(register):
    register("self", requires=["self-made"], provides=["self-made"])(lambda ctx, job: None)
    with pytest.raises(LightNetError, match=r"circle: 'self' requires 'self-made' "
                                            r"\(provided by 'self'\)$"):
        pipeline.pipeline("cpu")


def test_a_pass_providing_what_the_built_ins_need_from_after_them_is_a_circle(register):
    register("late", requires=["memory-plan"], provides=["ops-final"])(lambda ctx, job: None)
    with pytest.raises(LightNetError, match="require each other in a circle"):
        pipeline.pipeline("cpu")


@pytest.mark.parametrize("name, declarations, run, message", [
    ("expand", {}, lambda ctx, job: None, "a pass named 'expand' is already registered"),
    ("", {}, lambda ctx, job: None, "a pass name must be a non-empty string, found ''"),
    ("p", {"requires": "fused"}, lambda ctx, job: None,
     "pass 'p': requires must be a list of names, found 'fused'"),
    ("p", {"provides": ["x", 3]}, lambda ctx, job: None,
     r"pass 'p': provides must be a list of names, found \['x', 3\]"),
    ("p", {"requires": 3}, lambda ctx, job: None,
     "pass 'p': requires must be a list of names, found 3"),
    ("p", {"targets": "cpu"}, lambda ctx, job: None,
     "pass 'p': targets must be a list of names, found 'cpu'"),
    ("p", {}, "not a function", r"pass 'p': expected a function run\(ctx, job\), found str"),
])
def test_bad_registrations_are_refused(name, declarations, run, message):
    before = pipeline.registered()
    with pytest.raises(LightNetError, match=message):
        pipeline.register(name, **declarations)(run)
    assert pipeline.registered() == before


def test_unregistering_an_unknown_pass_is_an_error():
    with pytest.raises(LightNetError, match="no pass named 'nope' is registered"):
        pipeline.unregister("nope")


# lightnet --passes ----------------------------------------------------------------------


def test_lightnet_passes_prints_each_targets_pipeline(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--passes"])
    assert e.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    cpu = [
        "cpu:",
        "  1. expand: requires nothing; provides lowered, ops-final",
        "  2. fold-constants: requires lowered; provides folded, ops-final",
        "  3. hoist-constants: requires lowered, folded; provides sources-first, ops-final",
        "  4. combine: requires lowered, sources-first; provides fused, ops-final",
        "  5. remove-dead-constants: requires fused; provides no-dead-constants, ops-final",
        "  6. check: requires ops-final; provides checked",
        "  7. plan-memory: requires checked; provides memory-plan",
    ]
    start = lines.index("cpu:")
    assert lines[start:start + 8] == cpu
    dnnl = lines[lines.index("dnnl:") + 1:lines.index("dnnl:") + 9]
    assert dnnl == [*cpu[1:6], "  6. layouts: requires fused, no-dead-constants; provides "
                    "laid-out, ops-final", *(f"  {int(line[2]) + 1}{line[3:]}" for line in cpu[6:])]
    assert lines[-2].startswith("auto: the pipeline of ")
    assert lines[-1] == ("--no-combine leaves out fold-constants, combine and "
                         "remove-dead-constants")


def test_the_runtime_docs_example_prints_what_the_docs_say():
    doc = (ROOT / "docs" / "runtime.md").read_text()
    section = doc[doc.index("### Passes of your own"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    expected = re.search(r"prints\n\n```\n(.*?)```", section, re.S).group(1)
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == expected
