"""Resource limits: a model needing more memory than allowed is refused when
it is planned, before anything is allocated; absurd shapes are refused by
shape inference; weight files are checked before their data is read.

The limit defaults to the memory the machine has available (MemAvailable of
/proc/meminfo, else the free physical pages); `Context(memory_limit=...)`,
`Session(..., memory_limit=...)` and `lightnet --memory-limit` set it, in
bytes or with a suffix K, M, G (powers of 1024).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session, mem
from lightnet.cli import main as lightnet_main
from tests.irbuild import ModelBuilder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "example.json"
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
    assert mem.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1", "1.5G", "1e9", "G", "12Q", -1, True, None,
                                  1.0])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="expected a number of bytes"):
        mem.parse_size(text)


def test_available_memory_reads_meminfo(monkeypatch):
    meminfo = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n"
    monkeypatch.setattr(mem, "open", lambda *a, **k: io.StringIO(meminfo), raising=False)
    assert mem.available_memory() == 2048 * 1024


def test_available_memory_falls_back_to_sysconf(monkeypatch):
    def no_proc(*args, **kwargs):
        raise OSError("no /proc")
    monkeypatch.setattr(mem, "open", no_proc, raising=False)
    values = {"SC_AVPHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(mem.os, "sysconf", lambda name: values[name])
    assert mem.available_memory() == 4096000

    def no_sysconf(name):
        raise ValueError(name)
    monkeypatch.setattr(mem.os, "sysconf", no_sysconf)
    assert mem.available_memory() is None  # unknown: no limit


def test_real_available_memory_is_plausible():
    available = mem.available_memory()
    assert available is None or 2**20 < available < 2**60


# The limit ---------------------------------------------------------------------------------


def test_default_limit_is_the_available_memory(monkeypatch, no_allocation):
    monkeypatch.setattr(mem, "available_memory", lambda: 100)
    ctx = Context()
    ctx.init(str(EXAMPLE))
    with pytest.raises(LightNetError) as e:
        ctx.compile("cpu")
    assert str(e.value) == refusal(128, 100, str(EXAMPLE))
    monkeypatch.setattr(mem, "available_memory", lambda: None)  # unknown: no limit
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
        Session(m.to_dict(), memory_limit="16K")
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
    from lightnet.arch import get_proto
    from lightnet.op import Op
    from lightnet.opck import Checker
    from lightnet.tensor import TensorTable

    ck = Checker(Op(get_proto("relu"), "r", {}, {"dst": "t"}, {}), TensorTable())
    with pytest.raises(LightNetError, match=r"size: expected at most 2\*\*40 elements"):
        ck.define("dst", "TL_FLOAT", (0, 2**41))
    ck.define("dst", "TL_FLOAT", (0, 2**40))  # empty, and each dimension within bounds


# Weight files --------------------------------------------------------------------------------


def from_file_model():
    doc = json.loads(EXAMPLE.read_text())
    doc["ops"][0]["params"] = [{"arg_name": "dtype", "value": "TL_FLOAT"},
                               {"arg_name": "dims", "value": [2, 4]},
                               {"arg_name": "from_file", "value": True}]
    return doc


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
    ctx.init(from_file_model())
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
