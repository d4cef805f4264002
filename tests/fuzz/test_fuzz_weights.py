"""Fuzzing weight files: damaged or wrong weight files are refused with
LightNetError, and nothing in them is ever unpickled.

A small model creates four tensors from the weight file (two float32, one
int32, one float64). Each case starts from its valid weights and mutates them:
tensors dropped, renamed (to names that look like code, too), added, reshaped,
cast to another dtype, replaced by object arrays whose unpickling would create
a marker file, or by members that are not .npy; then the file's bytes may be
cut, flipped or replaced. LightNet's .wts text gets line-level damage. Loading must
succeed or raise LightNetError naming the weight file or the model, and the
marker file must never exist.
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import CI_EXAMPLES, INJECTIONS, SLOW_EXAMPLES, deadline, fuzz_settings
from lightnet import Context, LightNetError
from lightnet.files import weight_file

TMP = Path(tempfile.mkdtemp(prefix="lightnet-fuzz-weights-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
MARKER = TMP / "unpickled"

MODEL = {"ops": [
    *({"name": name, "optype": "create", "tensors_out": [{"arg_name": "dst", "name": name}],
       "params": [{"arg_name": "dtype", "value": dtype}, {"arg_name": "dims", "value": dims},
                  {"arg_name": "from_file", "value": True}]}
      for name, dtype, dims in (("w", "TL_FLOAT", [2, 3]), ("b", "TL_FLOAT", [3]),
                                ("idx", "TL_INT32", [4]), ("d", "TL_DOUBLE", [2, 2]))),
    {"name": "add", "optype": "elew", "tensors_in": [{"arg_name": "src1", "name": "w"},
                                                     {"arg_name": "src2", "name": "b"}],
     "tensors_out": [{"arg_name": "dst", "name": "y"}],
     "params": [{"arg_name": "elew_op", "value": "TL_SUM"}]},
]}
VALID = {
    "w": np.arange(6, dtype=np.float32).reshape(2, 3),
    "b": np.float32([0.5, -1, 2]),
    "idx": np.int32([3, 1, 4, 1]),
    "d": np.eye(2),
}


class Boom:
    """Unpickling this creates MARKER: it must never happen."""

    def __reduce__(self):
        return (os.mkdir, (str(MARKER),))


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


ARRAYS = st.sampled_from([
    np.zeros(6, np.float32), np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float64),
    np.zeros((2, 3), np.float16), np.zeros((2, 3), ">f4"), np.zeros((2, 3), np.complex64),
    np.zeros((2, 3), np.int32), np.zeros(4, np.int64), np.zeros(4, np.uint32),
    np.zeros((), np.float32), np.zeros((0,), np.float32), np.zeros((1, 2, 3), np.float32),
    np.array(["a", "b", "c"]), np.zeros(3, dtype=[("x", np.float32)]),
    np.array([Boom(), 1], dtype=object), np.array([Boom()] * 6, dtype=object).reshape(2, 3),
])


@st.composite
def npz_files(draw) -> bytes:
    members = {name: _npy(a) for name, a in VALID.items()}
    for _ in range(draw(st.integers(0, 3))):
        how = draw(st.sampled_from(["drop", "rename", "add", "replace", "raw", "pickle_member",
                                    "huge_header"]))
        names = sorted(members)
        name = draw(st.sampled_from(names)) if names else "w"
        if how == "drop" and names:
            del members[name]
        elif how == "rename" and names:
            members[draw(st.sampled_from(INJECTIONS[:4] + ["W", "w ", "b/../w", "idx.npy"])
                         | st.text(st.characters(codec="utf-8", blacklist_characters="\x00"),
                                   max_size=6))
                    ] = members.pop(name)  # (zip member names: UTF-8, ending at a NUL)
        elif how in ("add", "replace"):
            key = name if how == "replace" else draw(st.sampled_from(["extra", "w2", "{{7*7}}"]))
            members[key] = _npy(draw(ARRAYS))
        elif how == "raw":  # a member that is not a .npy file
            members[name + ".bin"] = draw(st.binary(max_size=20))
        elif how == "pickle_member":  # a pickle where a .npy is expected
            import pickle
            members[name] = pickle.dumps(Boom())
        else:  # a header claiming far more data than the member holds
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {
                "descr": draw(st.sampled_from(["<f4", "<i4", "<f8"])), "fortran_order": False,
                "shape": draw(st.sampled_from([(2**40,), (2**20, 2**20), (6,), (2, 3)]))})
            members[name] = buf.getvalue() + bytes(draw(st.integers(0, 64)))
    buf = io.BytesIO()
    compression = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            member = name if name.endswith(".bin") else name + ".npy"
            z.writestr(member, data)
    return _damage(draw, buf.getvalue())


def _damage(draw, data: bytes) -> bytes:
    how = draw(st.sampled_from(["none", "none", "cut", "flip", "insert", "random", "empty"]))
    if how == "cut":
        return data[:draw(st.integers(0, len(data)))]
    if how == "flip" and data:
        b = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        return bytes(b)
    if how == "insert":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.binary(min_size=1, max_size=16)) + data[i:]
    if how == "random":
        return draw(st.binary(max_size=300))
    if how == "empty":
        return b""
    return data


@st.composite
def text_files(draw) -> bytes:
    """LightNet .wts text: a count line, then NAME TYPE LEN HEX... lines."""
    lines = [(name, a.astype(np.float32)) for name, a in VALID.items()]
    out = []
    for name, a in lines:
        hexes = [format(v, "08x") for v in a.reshape(-1).view(np.uint32).tolist()]
        out.append([name, "0", str(len(hexes)), *hexes])
    count = str(len(out))
    for _ in range(draw(st.integers(0, 3))):
        line = draw(st.sampled_from(out)) if out else None
        how = draw(st.sampled_from(["len", "type", "hex", "long_hex", "name", "drop", "dup",
                                    "drop_len", "count", "field"]))
        if line is None:
            break
        if how == "len":
            line[2] = draw(st.sampled_from(["-1", "0", "99999999999999999999", "x", "1e3",
                                            "٣"]))
        elif how == "type":
            line[1] = draw(st.sampled_from(["1", "2", "3", "-1", "x"]))
        elif how == "hex" and len(line) > 3:
            line[draw(st.integers(3, len(line) - 1))] = draw(st.sampled_from(
                ["zz", "0x1", "-1", "ffffffff", "7fc00000", "", "g"]) | st.text(max_size=9))
        elif how == "long_hex" and len(line) > 3:
            line[3] = "1" * draw(st.integers(9, 40))
        elif how == "name":
            line[0] = draw(st.sampled_from(INJECTIONS[:4] + ["W", "#w", "extra"]))
        elif how == "drop":
            out.remove(line)
        elif how == "dup":
            out.append(list(line))
        elif how == "drop_len":
            del line[2]
        elif how == "count":
            count = draw(st.sampled_from(["0", "1", "9", "-1", "x", ""]))
        else:
            line.append(draw(st.text(max_size=5)))
    text = "\n".join([count] + [" ".join(line) for line in out]) + "\n"
    return _damage(draw, text.encode("utf-8", errors="surrogatepass"))


def check(data: bytes, suffix: str) -> None:
    path = TMP / f"weights{suffix}"
    path.write_bytes(data)
    ctx = Context(memory_limit=2**24)
    ctx.init(MODEL)
    ctx.compile("cpu")
    try:
        with deadline():
            ctx.load(path)
            ctx.run()
    except LightNetError as e:
        message = str(e)
        assert "\n" not in message
        assert message.startswith((str(path), "<model>")), message
    else:
        for name, array in VALID.items():  # what loads is what the file holds
            assert ctx.get_data(name).shape == array.shape
    assert not MARKER.exists(), "a pickle in the weight file was loaded"


@fuzz_settings(CI_EXAMPLES)
@given(npz_files())
def test_npz_files(data):
    check(data, ".npz")


@pytest.mark.filterwarnings("ignore::lightnet.LightNetWarning")  # renamed tensors are skipped
@fuzz_settings(CI_EXAMPLES // 3)
@given(text_files())
def test_text_files(data):
    check(data, ".wts")


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(npz_files())
def test_npz_files_slow(data):
    check(data, ".npz")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::lightnet.LightNetWarning")
@fuzz_settings(SLOW_EXAMPLES)
@given(text_files())
def test_text_files_slow(data):
    check(data, ".wts")


def test_valid_files_load():
    buf = io.BytesIO()
    np.savez(buf, **VALID)
    check(buf.getvalue(), ".npz")
    ctx = Context()
    ctx.init(MODEL)
    ctx.compile("cpu")
    ctx.load(TMP / "weights.npz")
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("y"), VALID["w"] + VALID["b"])


def test_pickles_are_never_loaded():
    """An object array and a bare pickle member, each unpickling to mkdir."""
    for members in ({"w.npy": _npy(np.array([Boom()] * 6, dtype=object).reshape(2, 3))},
                    {"w.npy": __import__("pickle").dumps(Boom())},
                    {"w.pkl": __import__("pickle").dumps(Boom())}):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
        path = TMP / "evil.npz"
        path.write_bytes(buf.getvalue())
        with pytest.raises(LightNetError):
            weight_file.read(path)
        assert not MARKER.exists()
