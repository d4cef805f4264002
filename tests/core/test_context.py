"""lightnet.runtime.context: building, compiling, loading and running a model."""

import copy
import io
import json
import os

import numpy as np
import pytest

from lightnet import Context
from lightnet.errors import CheckError, LightNetError
from lightnet.ir.dataflow import DataFlowGraph
from tests.helpers import EXAMPLE, example_doc, run_model
from tests.irbuild import create, slice_

EXAMPLE_OUTPUT = "tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"
SRC = np.arange(1, 9, dtype=np.float32).reshape(2, 4)


def no_print_model():
    """The example without its print: tensor2 is the model's output."""
    return {"ops": [create(data=SRC.reshape(-1).tolist()), slice_()]}


def state(ctx):
    """Everything set_param must leave as it was when it fails."""
    return (ctx.print(), [op.name for op in ctx.ops],
            {n: (e.dtype, e.shape, e.creator) for n, e in ctx.tensors.items()},
            sorted((a, b, t) for a in ctx.dfg.graph.nodes for b, t in ctx.dfg.graph.successors(a)),
            dict(ctx.dfg.producer), {t: list(c) for t, c in ctx.dfg.consumers.items()},
            [dict(op.values) for op in ctx.ops])


# init -------------------------------------------------------------------------------------


def test_init_from_path_dict_and_stdin(monkeypatch):
    by_path = Context()
    by_path.init(str(EXAMPLE))
    assert by_path.label == str(EXAMPLE)
    by_pathlib = Context()
    by_pathlib.init(EXAMPLE)
    by_dict = Context()
    by_dict.init(example_doc())
    assert by_dict.label == "<model>"
    monkeypatch.setattr("sys.stdin", io.StringIO(EXAMPLE.read_text()))
    by_stdin = Context()
    by_stdin.init("-")
    assert by_stdin.label == "<stdin>"
    for ctx in (by_path, by_pathlib, by_dict, by_stdin):
        assert [(op.name, op.optype) for op in ctx.ops] == [
            ("create1", "create"), ("slice1", "slice"), ("print1", "print")]
        assert ctx.tensors["tensor1"].shape == (2, 4)
        assert ctx.tensors["tensor2"].shape == (2, 3)
        assert ctx.tensors["tensor1"].static and not ctx.tensors["tensor2"].static
        assert ctx.ops[1].values == {"axis": 1, "start": 1, "len": 3}
        assert ctx.outputs == []
        assert ctx.print() == by_path.print()


def test_stdin_errors_are_labelled(monkeypatch):
    doc = example_doc()
    doc["ops"][1]["params"][0]["value"] = 2
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(doc)))
    with pytest.raises(LightNetError) as e:
        Context().init("-")
    assert str(e.value) == ("<stdin>: op 'slice1' (slice): param 'axis': lt: "
                            "expected axis < src.ndim (2), found 2")


def test_unknown_optype():
    doc = example_doc()
    doc["ops"][1]["optype"] = "slise"
    with pytest.raises(LightNetError) as e:
        Context().init(doc)
    assert str(e.value) == "<model>: op 1 ('slice1'): unknown optype 'slise'"


def test_input_tensor_not_defined(tmp_path):
    doc = example_doc()
    doc["ops"][2]["tensors_in"][0]["name"] = "tensor7"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LightNetError) as e:
        Context().init(str(path))
    assert str(e.value) == (f"{path}: op 'print1' (print): tensor_in 'src': defined: expected "
                            "tensor 'tensor7' defined by an earlier op, found no such tensor")
    assert isinstance(e.value.__cause__, CheckError)


def test_reinit_replaces_the_model():
    ctx = Context()
    ctx.init(example_doc())
    ctx.init(no_print_model())
    assert [op.name for op in ctx.ops] == ["create1", "slice1"]
    assert ctx.outputs == ["tensor2"]
    # A failed init leaves nothing of the model before it.
    with pytest.raises(LightNetError):
        ctx.init({"ops": [create(), slice_(axis=5)]})
    assert "tensor2" not in ctx.tensors


def test_check_order():
    ctx = Context()
    ctx.init(no_print_model())
    ctx.check()
    ctx.ops.reverse()
    with pytest.raises(LightNetError) as e:
        ctx.check()
    assert str(e.value) == ("<model>: op 'slice1' (slice): input 'src' reads tensor 'tensor1' "
                            "before any op creates it")


# compile, load, run -------------------------------------------------------------------------


def test_example_runs(capsys):
    _, ctx = run_model(str(EXAMPLE))
    assert capsys.readouterr().out == EXAMPLE_OUTPUT
    assert [op.optype for op in ctx.ops] == ["create_cpu", "slice_cpu", "print_cpu"]
    np.testing.assert_array_equal(ctx.get_data("tensor1"), SRC)
    ctx.run()
    assert capsys.readouterr().out == EXAMPLE_OUTPUT


def test_get_set_data_and_size():
    _, ctx = run_model(no_print_model())
    out = ctx.get_data("tensor2")
    np.testing.assert_array_equal(out, SRC[:, 1:4])
    assert out.dtype == np.float32 and out.shape == (2, 3)
    out[...] = 0  # a copy
    np.testing.assert_array_equal(ctx.get_data("tensor2"), SRC[:, 1:4])
    assert (ctx.data_size("tensor1"), ctx.data_size("tensor2")) == (32, 24)
    new = np.arange(100, 108).reshape(2, 4)  # int64 is cast to float32
    ctx.set_data("tensor1", new)
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), new[:, 1:4].astype(np.float32))
    ctx.set_data("tensor1", list(range(8)))  # same element count, any shape
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), [[1, 2, 3], [5, 6, 7]])


def test_set_data_errors():
    ctx = Context()
    ctx.init(no_print_model())
    with pytest.raises(LightNetError, match=r"^the model is not loaded: call load\(\) first$"):
        ctx.get_data("tensor2")
    with pytest.raises(LightNetError, match="the model is not loaded"):
        ctx.set_data("tensor1", SRC)
    assert ctx.data_size("tensor1") == 32  # known before load
    ctx.compile()
    ctx.load()
    with pytest.raises(LightNetError) as e:
        ctx.set_data("tensor1", [1, 2, 3])
    assert str(e.value) == "tensor 'tensor1': expected 8 elements (2, 4), found 3 (3,)"
    with pytest.raises(LightNetError) as e:
        ctx.set_data("tensor1", np.ones(8, dtype=np.complex64))
    assert str(e.value) == "tensor 'tensor1': expected dtype float32, found complex64"
    with pytest.raises(LightNetError, match="^no tensor named 'nope' in the model$"):
        ctx.get_data("nope")
    with pytest.raises(LightNetError, match="^no tensor named 'nope' in the model$"):
        ctx.data_size("nope")
    np.testing.assert_array_equal(ctx.get_data("tensor1"), SRC)  # nothing was written


def test_compile_unknown_target():
    ctx = Context()
    ctx.init(str(EXAMPLE))
    with pytest.raises(LightNetError) as e:
        ctx.compile("gpu")
    assert str(e.value).startswith("unknown target 'gpu' (known: ")
    assert "cpu" in str(e.value) and "none" not in str(e.value)


def test_uncompiled_model_cannot_run():
    ctx = Context()
    ctx.init(str(EXAMPLE))
    with pytest.raises(LightNetError) as e:
        ctx.load()
    assert str(e.value) == ("op 'create1' (create) is abstract and cannot run: "
                            "compile the model for a target first")
    with pytest.raises(LightNetError):
        ctx.plan()
    with pytest.raises(LightNetError, match="not loaded"):
        ctx.get_data("tensor2")


@pytest.mark.parametrize("dims, size", [
    # Tensors this large are refused by shape inference (more than 2**40 elements).
    ([100000, 100000, 100000], 10**15),
    ([2147483647, 2147483647], 4611686014132420609),
])
def test_arena_too_large_is_a_user_error(dims, size):
    ctx = Context()
    with pytest.raises(LightNetError) as e:
        ctx.init({"ops": [create(dims=dims)]})
    assert str(e.value) == (f"<model>: op 'create1' (create): tensor_out 'dst': size: expected "
                            f"at most 2**40 elements (1099511627776), found {size} elements {dims}")
    assert ctx.arrays == {}


def test_arena_allocation_failure_is_a_user_error():
    # Far beyond any address space (only reachable with a memory limit above it):
    # numpy fails at once, nothing is touched.
    from lightnet.compiler.memory_plan import MemReport
    from lightnet.ir.tensor import MemType

    ctx = Context(memory_limit=2**70)
    arena = 4 * 10**15 * 2**10
    with pytest.raises(LightNetError) as e:
        ctx._alloc_arena(MemReport(MemType.CPU, arena, arena, arena))
    assert str(e.value) == f"<model>: cannot allocate the cpu arena of {arena} bytes"


@pytest.mark.parametrize("size", [1000, 9 << 20])
def test_an_arena_is_zeroed_writable_memory_of_its_size(size):
    """A large arena (HUGE_ARENA bytes or more) is an anonymous mapping with huge pages
    asked for, where the platform has them; either kind is zeroed and writable."""
    import mmap

    from lightnet.compiler.memory_plan import MemReport
    from lightnet.ir.tensor import MemType
    from lightnet.runtime import context

    arena = Context()._alloc_arena(MemReport(MemType.CPU, size, size, size))
    assert arena.dtype == np.uint8 and arena.shape == (size,) and not arena.any()
    arena[-1] = 7
    assert arena[-1] == 7
    mapped = isinstance(arena.base, memoryview) and isinstance(arena.base.obj, mmap.mmap)
    assert mapped == (size >= context.HUGE_ARENA and hasattr(mmap, "MADV_HUGEPAGE"))
    if mapped and os.path.exists("/proc/self/smaps"):
        # Private, not shmem (whose huge pages shmem_enabled rules, often "never"): the
        # kernel's own account of the mapping says whether it may take huge pages.
        flags, eligible = _mapping_of(arena.__array_interface__["data"][0])
        assert "sh" not in flags.split()
        thp = "/sys/kernel/mm/transparent_hugepage/enabled"
        if eligible is not None and os.path.exists(thp) and "[never]" not in open(thp).read():
            assert eligible


def _mapping_of(address: int) -> tuple[str, bool | None]:
    """The VmFlags of the mapping holding `address` in /proc/self/smaps, and whether
    the kernel counts it eligible for transparent huge pages (None: not said)."""
    flags, eligible, inside = "", None, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                if inside:
                    break
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                flags = line.partition(":")[2]
            elif inside and head == "THPeligible:":
                eligible = line.split()[1] == "1"
    return flags, eligible


def test_unload_and_cleanup(capsys):
    _, ctx = run_model(no_print_model())
    ctx.unload()
    assert ctx.arrays == {} and ctx.arenas == {}
    with pytest.raises(LightNetError, match="not loaded"):
        ctx.get_data("tensor2")
    ctx.run()  # nothing loaded: nothing runs
    # The model stays checked and compiled: it loads again.
    assert [op.optype for op in ctx.ops] == ["create_cpu", "slice_cpu"]
    ctx.load()
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), SRC[:, 1:4])
    ctx.cleanup()
    assert (ctx.ops, dict(ctx.tensors), ctx.arrays, ctx.mem) == ([], {}, {}, None)
    assert ctx.dfg.ops == {} and len(ctx.dfg.graph) == 0
    ctx.init(str(EXAMPLE))  # usable again
    ctx.compile()
    ctx.load()
    ctx.run()
    assert capsys.readouterr().out == EXAMPLE_OUTPUT


def test_every_output_survives_the_run():
    # tensor2 is an output made first: tensor3, made later, must not take its place.
    model = {"ops": [create(data=SRC.reshape(-1).tolist()), slice_(),
                     slice_("slice2", "tensor1", "tensor3", axis=0, start=1, len=1)]}
    _, ctx = run_model(model)
    assert ctx.outputs == ["tensor2", "tensor3"]
    np.testing.assert_array_equal(ctx.get_data("tensor2"), SRC[:, 1:4])
    np.testing.assert_array_equal(ctx.get_data("tensor3"), SRC[1:2])


def test_mem_report_of_example():
    ctx = Context()
    ctx.init(no_print_model())
    ctx.compile()
    (report,) = ctx.mem.values()
    assert (report.arena, report.total, report.lower_bound) == (128, 56, 56)
    assert ctx.tensors["tensor1"].offset == 0 and ctx.tensors["tensor2"].offset == 64


# set_param ------------------------------------------------------------------------------------


def test_set_param_changes_shapes_and_results():
    ctx = Context()
    ctx.init(no_print_model())
    ctx.set_param("slice1", "len", 2)
    assert ctx.tensors["tensor2"].shape == (2, 2)
    assert ctx.ops[1].values["len"] == 2
    ctx.compile()
    ctx.load()
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), [[2, 3], [6, 7]])
    ctx.unload()
    ctx.set_param("slice1", "len", 1)  # now on the compiled op
    ctx.set_param("slice1", "start", 0)
    ctx.set_param("slice1", "axis", 0)
    assert ctx.tensors["tensor2"].shape == (1, 4)
    ctx.load()
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), [[1, 2, 3, 4]])
    # A param the IR left out can be set too; the printed IR shows it.
    ctx.unload()
    ctx.set_param("create1", "ran", [0, 1])
    assert '"arg_name": "ran"' in ctx.print()


@pytest.mark.parametrize(
    "op, param, value, message",
    [
        ("slice1", "len", 9,
         "<model>: op 'slice1' (slice): param 'len': check: expected start + len <= src.shape[axis] "
         "(the slice ends inside the axis), found src=float32[2, 4], axis=1, start=1, len=9"),
        ("slice1", "axis", "x",
         "<model>: op 'slice1' (slice): param 'axis': type: expected a number, found a string \"x\""),
        ("slice1", "step", 1,
         "<model>: op 'slice1' (slice): param 'step': known: expected one of axis, start, len, "
         "found an unknown param"),
        # The bad value is fine for its op but breaks a later one.
        ("create1", "dims", [2, 2],
         "<model>: op 'create1' (create): param 'data': check: expected len(data) <= "
         "math.prod(dims) (data gives at most every element), found dims=(2, 2), "
         "data=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)"),
        ("slice1", "len", float("nan"), "op 'slice1': param 'len': numbers must be finite, found nan"),
        ("slice1", "len", {"a": 1}, "op 'slice1': param 'len': a param value cannot be a dict"),
        ("slice9", "len", 1, "no op named 'slice9' in the model"),
    ],
)
def test_set_param_failure_leaves_model_as_it_was(op, param, value, message):
    ctx = Context()
    ctx.init(no_print_model())
    before = state(ctx)
    with pytest.raises(LightNetError) as e:
        ctx.set_param(op, param, value)
    assert str(e.value) == message
    assert state(ctx) == before
    ctx.compile()
    ctx.load()
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("tensor2"), SRC[:, 1:4])


def test_set_param_failure_in_a_later_op():
    # create makes random data, so its dims may change; the slice then fails.
    model = {"ops": [create(), slice_(), slice_("slice2", "tensor2", "tensor3", axis=0, len=1)]}
    ctx = Context()
    ctx.init(model)
    before = state(ctx)
    with pytest.raises(LightNetError) as e:
        ctx.set_param("create1", "dims", [1, 4])
    assert str(e.value) == ("<model>: op 'slice2' (slice): param 'start': lt: expected "
                            "start < src.shape[axis] (1), found 1")
    assert state(ctx) == before
    ctx.set_param("create1", "dims", [2, 5])
    assert ctx.tensors["tensor1"].shape == (2, 5)
    assert ctx.tensors["tensor3"].shape == (1, 3)


def test_set_param_needs_unloaded_model():
    _, ctx = run_model(no_print_model())
    with pytest.raises(LightNetError) as e:
        ctx.set_param("slice1", "len", 2)
    assert str(e.value) == "set_param needs an unloaded model: call unload() first"
    assert ctx.tensors["tensor2"].shape == (2, 3)


# Weights -----------------------------------------------------------------------------------


def weight_model(**extra):
    return {"ops": [create(dims=[2, 4], from_file=True, **extra), slice_()]}


def test_weights_from_npz(tmp_path):
    w = (np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5) * 1.25
    path = tmp_path / "w.npz"
    np.savez(path, tensor1=w)
    _, ctx = run_model(weight_model(), load=path)
    np.testing.assert_array_equal(ctx.get_data("tensor1"), w)
    np.testing.assert_array_equal(ctx.get_data("tensor2"), w[:, 1:4])
    # A flat array with the right element count is reshaped.
    np.savez(path, tensor1=w.reshape(-1))
    _, ctx = run_model(weight_model(), load=str(path))
    np.testing.assert_array_equal(ctx.get_data("tensor1"), w)


def test_weights_from_wts(tmp_path):
    from lightnet.files import wts_text
    w = np.float32([[0.1, -2, 3e10, 4], [5, 6, 7, -0.0]])
    path = tmp_path / "w.wts"
    wts_text.write(path, {"tensor1": w})
    _, ctx = run_model(weight_model(), load=path)
    np.testing.assert_array_equal(ctx.get_data("tensor2"), w[:, 1:4])


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"other": np.zeros(8, np.float32)},
         "<model>: tensors ['tensor1'] are created from a file, but weight file {path} gives them"),
        ({"tensor1": np.zeros((2, 4), np.float32), "extra": np.zeros(1, np.float32)},
         "{path}: tensor 'extra' is not a tensor the model creates from a file"),
        ({"tensor1": np.zeros((4, 2), np.float32)},
         "{path}: tensor 'tensor1': expected shape (2, 4), found (4, 2)"),
        ({"tensor1": np.zeros(7, np.float32)},
         "{path}: tensor 'tensor1': expected shape (2, 4), found (7,)"),
        ({"tensor1": np.zeros((2, 4), np.float64)},
         "{path}: tensor 'tensor1': expected dtype float32, found float64"),
        ({"tensor1": np.zeros((2, 4), np.int32)},
         "{path}: tensor 'tensor1': expected dtype float32, found int32"),
    ],
)
def test_weight_errors(tmp_path, arrays, message):
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    ctx = Context()
    ctx.init(weight_model())
    ctx.compile()
    with pytest.raises(LightNetError) as e:
        ctx.load(path)
    assert str(e.value) == message.format(path=path)


def test_weights_missing_without_file():
    ctx = Context()
    ctx.init(weight_model())
    ctx.compile()
    with pytest.raises(LightNetError) as e:
        ctx.load()
    assert str(e.value) == ("<model>: tensors ['tensor1'] are created from a file, but no "
                            "weight file (-f) gives them")


def test_weights_for_a_tensor_not_from_file(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, tensor1=np.zeros((2, 4), np.float32))
    ctx = Context()
    ctx.init(no_print_model())
    ctx.compile()
    with pytest.raises(LightNetError) as e:
        ctx.load(path)
    assert str(e.value) == f"{path}: tensor 'tensor1' is not a tensor the model creates from a file"
    with pytest.raises(LightNetError, match="no such weight file"):
        ctx.load(tmp_path / "nope.npz")


# print and passes ------------------------------------------------------------------------------


def test_printed_ir_reinits_with_identical_results(tmp_path, capsys):
    model = {"ops": [create(data=SRC.reshape(-1).tolist()), create("create2", "r", ran=[-1, 1]),
                     slice_(), slice_("slice2", "r", "r2", axis=0, start=1, len=1)]}
    _, ctx = run_model(model)
    outputs = {n: ctx.get_data(n) for n in ctx.outputs}
    assert sorted(outputs) == ["r2", "tensor2"]
    assert (outputs["r2"] != 0).all()  # random, but reproducible
    path = tmp_path / "out.json"
    text = ctx.print(path)
    assert path.read_text() == text
    again = Context()
    again.init(str(path))
    assert [op.optype for op in again.ops] == ["create_cpu", "create_cpu", "slice_cpu", "slice_cpu"]
    again.plan()  # already compiled: run as it is
    again.load()
    again.run()
    for name, value in outputs.items():
        np.testing.assert_array_equal(again.get_data(name), value)
    assert again.print() == text
    # Compiling a compiled model changes nothing.
    again.compile()
    assert again.print() == text
    with pytest.raises(LightNetError, match="cannot write the IR"):
        ctx.print(tmp_path / "no" / "dir.json")


def test_pass_changing_a_shape_is_rejected():
    ctx = Context()
    ctx.init(str(EXAMPLE))
    ctx.compile()
    slice_op = ctx.ops[1]
    bad = slice_op.copy_as(slice_op.proto)
    bad.params = {**bad.params, "len": bad.params["len"].from_value("len", 2)}
    with pytest.raises(LightNetError) as e:
        ctx.replace_ops(1, 1, [bad])
    assert str(e.value) == (f"{EXAMPLE}: a pass changed tensor 'tensor2' from float32[2, 3] "
                            "to float32[2, 2]")


def test_pass_removing_a_read_tensor_is_rejected():
    ctx = Context()
    ctx.init(str(EXAMPLE))
    ctx.compile()
    other = ctx.ops[0].copy_as(ctx.ops[0].proto, "create9")
    other.tensors_out = {"dst": "tensor9"}
    with pytest.raises(LightNetError) as e:
        ctx.replace_ops(1, 1, [other])
    assert str(e.value) == (f"{EXAMPLE}: a pass removed tensor 'tensor2', which op 'print1' "
                            "still reads")


def test_pass_keeping_shapes_is_accepted(capsys):
    ctx = Context()
    ctx.init(str(EXAMPLE))
    ctx.compile()
    same = ctx.ops[1].copy_as(ctx.ops[1].proto, "slice_new")
    ctx.replace_ops(1, 1, [same])
    assert [op.name for op in ctx.ops] == ["create1", "slice_new", "print1"]
    assert ctx.dfg.prev(ctx.ops[2], "tensor2") is same
    ctx.plan()
    ctx.load()
    ctx.run()
    assert capsys.readouterr().out == EXAMPLE_OUTPUT


def test_an_op_replaced_by_one_of_its_name_and_tensors_takes_its_place(capsys):
    ctx = Context()
    ctx.init(str(EXAMPLE))
    ctx.compile()
    old = ctx.ops[1]
    same = old.copy_as(old.proto)
    ctx.replace_ops(1, 1, [same])
    assert ctx.ops[1] is same and ctx.dfg.ops[old.name] is same
    assert ctx.dfg.prev(ctx.ops[2], "tensor2") is same
    rebuilt = DataFlowGraph()
    rebuilt.rebuild(ctx.ops)
    assert (ctx.dfg.ops, ctx.dfg.producer, ctx.dfg.consumers, ctx.dfg.names) == (
        rebuilt.ops, rebuilt.producer, rebuilt.consumers, rebuilt.names)
    ctx.plan()
    ctx.load()
    ctx.run()
    assert capsys.readouterr().out == EXAMPLE_OUTPUT
    # One whose check fails is taken out, as a replacement by other ops would be.
    ctx.unload()
    bad = same.copy_as(same.proto)
    bad.params = {**bad.params, "len": bad.params["len"].from_value("len", 9)}
    with pytest.raises(LightNetError, match=f"op '{old.name}'"):
        ctx.replace_ops(1, 1, [bad])
    assert [op.name for op in ctx.ops] == ["create1", "print1"]
    assert old.name not in ctx.dfg.ops and "tensor2" not in ctx.tensors
    assert "tensor2" not in ctx.dfg.producer and ctx.dfg.consumers["tensor2"] == ["print1"]


def test_model_is_not_modified_by_init():
    doc = example_doc()
    kept = copy.deepcopy(doc)
    ctx = Context()
    ctx.init(doc)
    ctx.compile()
    assert doc == kept
