"""Resource limits: a model needing more memory than allowed is refused when
it is planned, before anything is allocated; absurd shapes are refused by
shape inference; weight files are checked before their data is read; inputs
beyond the structural limits (nesting, op count, string lengths, IL macro
expansion: lightnet/ir/limits.py, lightnet/frontends/il_limits.py) are refused
with one line naming the limit.

The limit defaults to the memory the machine has available (MemAvailable of
/proc/meminfo, else the free physical pages); `Context(memory_limit=...)`,
`Session(..., memory_limit=...)` and `lightnet --memory-limit` set it, in
bytes or with a suffix K, M, G (powers of 1024).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session
from lightnet.cli import main as lightnet_main
from lightnet.compiler import memory_plan
from lightnet.ir import limits
from tests.helpers import EXAMPLE, from_file_example, lightnet
from tests.irbuild import ModelBuilder
from lightnet.ir.tensor import MemType

ROOT = Path(__file__).resolve().parent.parent
SQUEEZENET = ROOT / "examples" / "squeezenet.json"


def refusal(needed, limit, label="<model>"):
    return (f"{label}: the model needs {needed} bytes of cpu memory, more than the limit of "
            f"{limit} bytes (--memory-limit)")


@pytest.fixture
def no_allocation(monkeypatch):
    """Fail the test if an arena is allocated."""
    def forbidden(self, report):
        raise AssertionError("an arena was allocated")
    monkeypatch.setattr(Context, "_alloc_arena", forbidden)


# Sizes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, size", [
    ("0", 0), ("4096", 4096), ("512K", 512 * 2**10), ("64M", 64 * 2**20), ("2G", 2 * 2**30),
    ("1T", 2**40), ("2g", 2 * 2**30), ("512MB", 512 * 2**20), ("512MiB", 512 * 2**20),
    (" 8k ", 8192), (123, 123),
])
def test_parse_size(text, size):
    assert memory_plan.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1", "1.5G", "1e9", "G", "12Q", -1, True, None,
                                  1.0])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="expected a number of bytes"):
        memory_plan.parse_size(text)


def test_available_memory_reads_meminfo(monkeypatch):
    meminfo = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n"
    monkeypatch.setattr(memory_plan, "open", lambda *a, **k: io.StringIO(meminfo), raising=False)
    assert memory_plan.available_memory() == 2048 * 1024


def test_available_memory_falls_back_to_sysconf(monkeypatch):
    def no_proc(*args, **kwargs):
        raise OSError("no /proc")
    monkeypatch.setattr(memory_plan, "open", no_proc, raising=False)
    values = {"SC_AVPHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(memory_plan.os, "sysconf", lambda name: values[name])
    assert memory_plan.available_memory() == 4096000

    def no_sysconf(name):
        raise ValueError(name)
    monkeypatch.setattr(memory_plan.os, "sysconf", no_sysconf)
    assert memory_plan.available_memory() is None  # unknown: no limit


def test_real_available_memory_is_plausible():
    available = memory_plan.available_memory()
    assert available is None or 2**20 < available < 2**60


# The limit ---------------------------------------------------------------------------------


def test_default_limit_is_the_available_memory(monkeypatch, no_allocation):
    monkeypatch.setattr(memory_plan, "available_memory", lambda: 100)
    ctx = Context()
    ctx.init(str(EXAMPLE))
    with pytest.raises(LightNetError) as e:
        ctx.compile("cpu")
    assert str(e.value) == refusal(128, 100, str(EXAMPLE))
    monkeypatch.setattr(memory_plan, "available_memory", lambda: None)  # unknown: no limit
    ctx.compile("cpu")


def test_explicit_limit_refuses_at_plan_time_before_allocating(no_allocation):
    ctx = Context(memory_limit=127)
    ctx.init(str(EXAMPLE))
    with pytest.raises(LightNetError) as e:
        ctx.compile("cpu")
    assert str(e.value) == refusal(128, 127, str(EXAMPLE))
    assert ctx.mem is None and ctx.arenas == {}
    with pytest.raises(LightNetError):  # load plans again, and refuses again
        ctx.load()


def test_a_higher_limit_lets_the_model_load(capsys):
    ctx = Context(memory_limit="1M")
    ctx.init(str(SQUEEZENET))
    ctx.compile("cpu")
    ctx.memory_limit = 1000
    with pytest.raises(LightNetError, match="more than the limit of 1000 bytes"):
        ctx.plan()
    ctx.memory_limit = 128
    with pytest.raises(LightNetError, match="more than the limit of 128 bytes"):
        ctx.load()
    ctx.memory_limit = None
    ctx.load()  # planned again
    ctx.run()
    assert "class scores" in capsys.readouterr().out
    assert Context(memory_limit=128).memory_limit == 128


def test_exact_limit_is_enough():
    ctx = Context(memory_limit=128)
    ctx.init(str(EXAMPLE))
    ctx.compile("cpu")
    assert ctx.mem[next(iter(ctx.mem))].arena == 128


@pytest.mark.parametrize("limit", ["lots", -5, 1.5, "1.5G"])
def test_bad_limit_is_a_user_error(limit):
    with pytest.raises(LightNetError, match="^memory limit: expected a number of bytes"):
        Context(memory_limit=limit)


def test_session_memory_limit(no_allocation):
    m = ModelBuilder()
    m.relu(m.input("x", [64, 64]))
    with pytest.raises(LightNetError) as e:
        Session(m.to_dict(), memory_limit="16K", target="cpu")
    assert str(e.value) == refusal(32768, 16384)


def test_large_model_is_refused_not_allocated(no_allocation):
    """A model of 1 TiB (below the 2**40 element cap) is refused by the plan."""
    m = ModelBuilder()
    x = m.input("x", [2**18, 2**20])  # 2**38 float32s
    m.relu(x)
    ctx = Context()
    ctx.init(m.to_dict())
    with pytest.raises(LightNetError, match="^<model>: the model needs 2199023255552 bytes"):
        ctx.compile("cpu")


def test_cli_memory_limit_applies_to_compiled_models_too(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert lightnet_main([str(EXAMPLE), "-c", "-o", str(out)]) == 0
    assert lightnet_main(["-r", str(out), "--memory-limit", "100"]) == 1
    assert capsys.readouterr().err == f"lightnet: error: {refusal(128, 100, str(out))}\n"
    assert lightnet_main(["-r", str(out), "--memory-limit", "1k"]) == 0


# Shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dims, elements", [
    ([2**31 - 1] * 2, 4611686014132420609),
    ([2**20, 2**20, 2], 2**41),
])
def test_absurd_shapes_are_refused_by_shape_inference(dims, elements, no_allocation):
    m = ModelBuilder()
    m.input("x", dims)
    with pytest.raises(LightNetError) as e:
        Context().init(m.to_dict())
    assert str(e.value) == (f"<model>: op 'x' (input): tensor_out 'dst': size: expected at most "
                            f"2**40 elements (1099511627776), found {elements} elements {dims}")


def test_a_huge_dimension_is_refused_even_with_no_elements():
    from lightnet.archs.registry import get_proto
    from lightnet.ir.op import Op
    from lightnet.ir.checks import Checker
    from lightnet.ir.tensor import TensorTable

    ck = Checker(Op(get_proto("relu"), "r", {}, {"dst": "t"}, {}), TensorTable())
    with pytest.raises(LightNetError, match=r"size: expected at most 2\*\*40 elements"):
        ck.define("dst", "TL_FLOAT", (0, 2**41))
    ck.define("dst", "TL_FLOAT", (0, 2**40))  # empty, and each dimension within bounds


# Weight files --------------------------------------------------------------------------------


def test_weight_headers_are_checked_before_the_data_is_read(tmp_path, monkeypatch):
    """An array whose header declares 4 TiB is refused from its header: its
    data (here a few bytes; in a zip bomb, gigabytes) is never read."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (2**20, 2**20)})
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("tensor1.npy", header.getvalue() + bytes(64))

    def never(self, key):
        raise AssertionError("the array data was read")
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", never)
    ctx = Context()
    ctx.init(from_file_example())
    ctx.compile("cpu")
    with pytest.raises(LightNetError) as e:
        ctx.load(path)
    assert str(e.value) == (f"{path}: tensor 'tensor1': expected shape (2, 4), found "
                            "(1048576, 1048576)")


def test_errors_at_run_time_are_user_errors(tmp_path, capsys):
    """What a kernel meets at run (an index out of range, a file an op cannot
    open) is a LightNetError naming the op."""
    doc = {"ops": [
        {"name": "x", "optype": "create", "tensors_out": [{"arg_name": "dst", "name": "x"}],
         "params": [{"arg_name": "dtype", "value": "TL_FLOAT"}, {"arg_name": "dims",
                                                                 "value": [2]}]},
        {"name": "dump", "optype": "fprint", "tensors_in": [{"arg_name": "src", "name": "x"}],
         "params": [{"arg_name": "msg", "value": "x"},
                    {"arg_name": "file", "value": str(tmp_path / "no" / "dir" / "x.txt")}]}]}
    ctx = Context()
    ctx.init(doc)
    ctx.compile("cpu")
    ctx.load()
    with pytest.raises(LightNetError, match=r"^<model>: op 'dump' \(fprint_cpu\): run: "
                                            r"FileNotFoundError: "):
        ctx.run()


# Workspaces are planned -----------------------------------------------------------------------


def workspace_model() -> dict:
    """Every op whose kernel needs buffers besides its tensors: padded inputs
    (conv2d, maxpool2d, avgpool2d), the depthwise weight table, fused lrelu,
    deconv2d's columns and accumulator, linear resampling, softmax's rows."""
    m = ModelBuilder()
    x = m.input("x", [1, 16, 48, 48])
    x = m.op("lrelu", {"src": m.conv(x, 16, 16, 3, pad=1)}, negslope=0.1)
    x = m.maxpool(x, 3, 1, pad=1)
    x = m.op("avgpool2d", {"src": x}, size=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1])
    x = m.op("lrelu", {"src": m.conv(x, 16, 16, 3, pad=1, group=16)}, negslope=0.2)
    x = m.op("deconv2d", {"src": x, "weight": m.weight("dw", [16, 8, 2, 2], -0.3, 0.3),
                          "bias": m.weight("db", [8])},
             group=1, size=[2, 2], stride=[2, 2], padding=[1, 1, 1, 1])
    x = m.op("resize", {"src": x}, mode="TL_LINEAR", dims=[1, 8, 64, 80])
    x = m.op("upsample", {"src": x}, mode="TL_LINEAR", scales=[1, 1, 1.5, 1.25])
    m.op("softmax", {"src": x}, axis=1)
    return m.to_dict()


def numpy_bytes_held_after(fn) -> int:
    """Bytes of numpy array data allocated by `fn` and still held when it returns."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        fn()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    only_numpy = [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)]
    return sum(d.size_diff for d in after.filter_traces(only_numpy).compare_to(
        before.filter_traces(only_numpy), "filename"))


def test_load_allocates_only_the_arena():
    """Every workspace is op scratch in the arena: what load allocates besides the
    arena is the kernels' small tables (window counts, resampling indices)."""
    ctx = Context()
    ctx.init(workspace_model())
    ctx.compile("cpu")
    assert {op.optype for op in ctx.ops} >= {"conv2d_cpu", "depthwise_conv2d_cpu",
                                             "maxpool2d_cpu", "avgpool2d_cpu", "deconv2d_cpu",
                                             "resize_cpu", "upsample_cpu", "softmax_cpu"}
    assert {op.values["activation"] for op in ctx.ops
            if op.optype in ("conv2d_cpu", "depthwise_conv2d_cpu")} == {"lrelu"}
    ctx.load()  # numpy's lazily imported modules, once
    ctx.unload()
    held = numpy_bytes_held_after(ctx.load)
    arena = ctx.mem[MemType.CPU].arena
    # Before workspaces were planned: 2.4 MB besides a 2.1 MB arena.
    assert arena <= held <= arena + 32 * 1024


def test_limit_just_below_a_models_need_refuses_just_above_runs(monkeypatch):
    ctx = Context()
    ctx.init(workspace_model())
    ctx.compile("cpu")
    needed = ctx.mem[MemType.CPU].needed
    x = np.random.default_rng(2).standard_normal((1, 16, 48, 48)).astype(np.float32)
    expected = Session(workspace_model(), target="cpu").run({"x": x})

    def forbidden(self, report):
        raise AssertionError("an arena was allocated")
    with monkeypatch.context() as patch:
        patch.setattr(Context, "_alloc_arena", forbidden)
        with pytest.raises(LightNetError) as e:
            Session(workspace_model(), target="cpu", memory_limit=needed - 1)
    assert str(e.value) == refusal(needed, needed - 1)
    out = Session(workspace_model(), target="cpu", memory_limit=needed).run({"x": x})
    for name in expected:
        np.testing.assert_array_equal(out[name], expected[name])


# Structural limits -------------------------------------------------------------------------


def relu_op(name="r", src="x", dst="y", **fields):
    return {"name": name, "optype": "relu", "tensors_in": [{"arg_name": "src", "name": src}],
            "tensors_out": [{"arg_name": "dst", "name": dst}], **fields}


def lightnet_cli(*args, stdin=None):
    """(exit status, stderr lines) of the lightnet command, in a new process."""
    result = lightnet(*args, stdin=stdin)
    return result.returncode, result.stderr.splitlines()


@pytest.mark.parametrize("depth", [65, 100_000])
def test_json_nested_too_deep_is_one_line_exit_1(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"ops": ' + "[" * depth + "]" * depth + "}")
    status, lines = lightnet_cli(path)
    assert status == 1
    assert lines == [f"lightnet: error: {path}:1: the JSON nests more than "
                     f"{limits.MAX_JSON_DEPTH} brackets deep (the limit)"]


def test_json_depth_counts_brackets_not_strings(tmp_path):
    """Brackets inside strings (and escaped quotes) do not nest; 64 levels parse."""
    path = tmp_path / "m.json"
    op = relu_op()
    op["optype"] = '[[[{{{\\"' * 30
    path.write_text(json.dumps({"ops": [op]}))
    with pytest.raises(LightNetError, match="unknown optype"):
        Context().init(path)
    inner = "[" * (limits.MAX_JSON_DEPTH - 2) + "]" * (limits.MAX_JSON_DEPTH - 2)
    path.write_text('{"ops": [' + inner + "]}")  # exactly MAX_JSON_DEPTH deep
    with pytest.raises(LightNetError, match=r"op 0: expected an object, found an array$"):
        Context().init(path)


def test_too_many_ops():
    ops = [relu_op(name=f"r{i}") for i in range(limits.MAX_OPS + 1)]
    with pytest.raises(LightNetError) as e:
        Context().init({"ops": ops})
    assert str(e.value) == (f"<model>: the model has {limits.MAX_OPS + 1} ops, more than the "
                            f"limit of {limits.MAX_OPS}")


@pytest.mark.parametrize("where", ["name", "optype", "tensor", "arg"])
def test_name_length(where):
    long = "n" * (limits.MAX_NAME_LENGTH + 1)
    op = relu_op()
    if where in ("name", "optype"):
        op[where] = long
    elif where == "tensor":
        op["tensors_in"][0]["name"] = long
    else:
        op["tensors_in"][0]["arg_name"] = long
    with pytest.raises(LightNetError) as e:
        Context().init({"ops": [op]})
    message = str(e.value)
    assert message.endswith(f"expected a name of at most {limits.MAX_NAME_LENGTH} characters "
                            f"(the limit), found {limits.MAX_NAME_LENGTH + 1}")
    assert long not in message  # the message stays one readable line


def test_longest_name_is_accepted():
    m = ModelBuilder()
    name = "n" * limits.MAX_NAME_LENGTH
    m.op("relu", {"src": m.input("x", [2])}, name=name)
    out = Session(m.to_dict()).run({"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out[name], [0.0, 2.0])


def test_string_param_length():
    op = {"name": "p", "optype": "print", "tensors_in": [{"arg_name": "src", "name": "x"}],
          "params": [{"arg_name": "msg", "value": "m" * (limits.MAX_STRING_LENGTH + 1)}]}
    with pytest.raises(LightNetError) as e:
        Context().init({"ops": [op]})
    assert str(e.value) == (f"<model>: op 0 ('p'): param 'msg': strings must have at most "
                            f"{limits.MAX_STRING_LENGTH} characters (the limit), found "
                            f"{limits.MAX_STRING_LENGTH + 1}")
    op["params"][0]["value"] = ["m" * (limits.MAX_STRING_LENGTH + 1)]
    with pytest.raises(LightNetError, match="strings must have at most"):
        Context().init({"ops": [op]})


def doubling_macros(levels: int) -> str:
    """A macro using the one before it twice, `levels` times: 2**levels tokens."""
    return ("#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n"
                                       for i in range(1, levels + 1))
            + f"relu(| | x=[A{levels}]);\n")


def test_il_macro_doubling_40_times_pcpp(tmp_path):
    pytest.importorskip("pcpp")
    from lightnet.frontends import il_limits
    path = tmp_path / "m.net"
    path.write_text(doubling_macros(40))
    result = subprocess.run([sys.executable, "-m", "lightnet.frontends.il", "--preprocessor",
                             "pcpp", str(path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"il2json: error: {path}:42: macro expansion makes more than "
        f"{il_limits.MAX_EXPANSION_TOKENS} tokens (the limit; macro 'A40')"]


def test_il_macro_expansion_below_the_limit_is_whole():
    """Doubling 10 times (1024 copies) stays within the limit and expands fully."""
    pytest.importorskip("pcpp")
    from lightnet.frontends.il import to_ir
    text = doubling_macros(10).replace("A0 x", "A0 1,").replace("x=[A10]", "x=[A10 1]")
    doc = to_ir(text, filename="m.net", preprocessor="pcpp")
    assert doc["ops"][0]["params"][0]["value"] == [1] * 1025


def test_il_macro_depth_pcpp():
    pytest.importorskip("pcpp")
    from lightnet.frontends import il_limits
    from lightnet.frontends.il import to_ir
    levels = il_limits.MAX_MACRO_DEPTH + 50
    text = ("#define B0 1\n" + "".join(f"#define B{i} B{i - 1}\n" for i in range(1, levels))
            + f"relu(| | x=B{levels - 1});\n")
    with pytest.raises(LightNetError) as e:
        to_ir(text, filename="m.net", preprocessor="pcpp")
    assert str(e.value) == (f"m.net:{levels + 1}: macros expand inside macros more than "
                            f"{il_limits.MAX_MACRO_DEPTH} deep (the limit; macro "
                            f"'B{levels - 1}')")
    ok = to_ir(text.replace(f"x=B{levels - 1}", "x=B90"), filename="m.net", preprocessor="pcpp")
    assert ok["ops"][0]["params"][0]["value"] == 1


def test_il_macro_doubling_system_cpp(monkeypatch):
    """cpp streams its expansion; it is stopped once its output passes the limit
    (lowered here: cpp writes a runaway expansion at about 1 MB/s)."""
    import shutil
    if shutil.which("cpp") is None:
        pytest.skip("no system cpp")
    from lightnet.frontends import il_limits
    from lightnet.frontends.il import to_ir
    monkeypatch.setattr(il_limits, "MAX_PREPROCESSED_BYTES", 1 << 18)
    with pytest.raises(LightNetError) as e:
        to_ir(doubling_macros(40), filename="m.net", preprocessor="cpp")
    assert str(e.value) == ("m.net: the preprocessed text is larger than 262144 bytes (the "
                            "limit: does a macro expand without end?)")
    doc = to_ir("#define R relu(| | x=[1, 2]);\nR\n", filename="m.net", preprocessor="cpp")
    assert doc["ops"][0]["params"][0]["value"] == [1, 2]


def test_onnx_names_beyond_the_limit():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from lightnet.frontends.onnx import convert
    long = "t" * (limits.MAX_NAME_LENGTH + 1)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [long], name="r1"),
         helper.make_node("Relu", [long], ["y"], name="r2")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(LightNetError) as e:
        convert(model)
    assert str(e.value).endswith(f"expected a name of at most {limits.MAX_NAME_LENGTH} "
                                 f"characters (the limit), found {limits.MAX_NAME_LENGTH + 1}")
