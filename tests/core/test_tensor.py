"""lightnet.ir.tensor: dtypes, memory types, tensor entries and the tensor table."""

import numpy as np
import pytest

from lightnet.errors import LightNetError
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable

# Every LightNet dtype with its numpy dtype and element size, written out by hand.
DTYPES = [
    ("TL_DOUBLE", np.float64, 8),
    ("TL_FLOAT", np.float32, 4),
    ("TL_INT32", np.int32, 4),
    ("TL_INT16", np.int16, 2),
    ("TL_INT8", np.int8, 1),
    ("TL_UINT32", np.uint32, 4),
    ("TL_UINT16", np.uint16, 2),
    ("TL_UINT8", np.uint8, 1),
    ("TL_BOOL", np.bool_, 1),
]


def test_there_are_exactly_nine_dtypes():
    assert sorted(d.name for d in DType) == sorted(name for name, _, _ in DTYPES)


@pytest.mark.parametrize("name, np_type, size", DTYPES)
def test_dtype_maps_to_numpy(name, np_type, size):
    dtype = DType.from_name(name)
    assert dtype is DType[name]
    assert dtype.np == np.dtype(np_type)
    assert isinstance(dtype.np, np.dtype)
    assert dtype.size == size
    assert str(dtype) == name
    assert DType.from_numpy(np_type) is dtype
    assert DType.from_numpy(np.dtype(np_type).name) is dtype


def test_from_name_unknown_lists_every_dtype():
    with pytest.raises(LightNetError) as e:
        DType.from_name("TL_HALF")
    assert str(e.value) == (
        "unknown dtype 'TL_HALF' (known: TL_DOUBLE, TL_FLOAT, TL_INT32, TL_INT16, "
        "TL_INT8, TL_UINT32, TL_UINT16, TL_UINT8, TL_BOOL)"
    )


@pytest.mark.parametrize("bad", ["float32", "tl_float", "", "TL_FLOAT "])
def test_from_name_is_exact(bad):
    with pytest.raises(LightNetError, match=f"unknown dtype '{bad}'"):
        DType.from_name(bad)


@pytest.mark.parametrize("np_type", [np.float16, np.int64, np.uint64, np.complex64])
def test_from_numpy_without_lightnet_dtype(np_type):
    with pytest.raises(LightNetError) as e:
        DType.from_numpy(np_type)
    assert str(e.value) == f"numpy dtype {np.dtype(np_type)} has no LightNet dtype"


def test_memtype():
    assert str(MemType.CPU) == "cpu"
    assert str(MemType.NONE) == "none"
    assert MemType.CPU.align == 64
    assert MemType.NONE.align == 64


@pytest.mark.parametrize(
    "shape, dtype, length, nbytes, text",
    [
        ((2, 4), DType.TL_FLOAT, 8, 32, "float32[2, 4]"),
        ((3,), DType.TL_DOUBLE, 3, 24, "float64[3]"),
        ((2, 3, 5), DType.TL_INT16, 30, 60, "int16[2, 3, 5]"),
        ((7, 1), DType.TL_BOOL, 7, 7, "bool[7, 1]"),
        ((4, 0), DType.TL_UINT32, 0, 0, "uint32[4, 0]"),
        ((), DType.TL_INT8, 1, 1, "int8[]"),
    ],
)
def test_entry_properties(shape, dtype, length, nbytes, text):
    e = TensorEntry("t", dtype, shape, "op1")
    assert e.ndim == len(shape)
    assert e.len == length
    assert e.nbytes == nbytes
    assert e.describe() == text
    # Defaults of a fresh entry.
    assert e.mtype is MemType.CPU
    assert (e.static, e.owner, e.from_file, e.offset) == (False, None, False, None)


def _table():
    t = TensorTable()
    t["a"] = TensorEntry("a", DType.TL_FLOAT, (4,), "op1")
    t["b"] = TensorEntry("b", DType.TL_FLOAT, (2, 2), "op2", owner="a")
    t["c"] = TensorEntry("c", DType.TL_FLOAT, (1, 4), "op3", owner="b")
    t["d"] = TensorEntry("d", DType.TL_INT8, (3,), "op4")
    return t


def test_table_root_follows_owners():
    t = _table()
    assert t.root("a") is t["a"]
    assert t.root("b") is t["a"]
    assert t.root("c") is t["a"]
    assert t.root("d") is t["d"]


def test_table_lookups():
    t = _table()
    assert isinstance(t, dict)
    assert t.find("d") is t["d"]
    assert t.find("zz") is None
    assert t.entry("b") is t["b"]
    with pytest.raises(LightNetError) as e:
        t.entry("zz")
    assert str(e.value) == "no tensor named 'zz' in the model"


def test_table_root_with_missing_owner():
    t = _table()
    t["e"] = TensorEntry("e", DType.TL_FLOAT, (4,), "op5", owner="gone")
    with pytest.raises(LightNetError, match="no tensor named 'gone' in the model"):
        t.root("e")
    with pytest.raises(LightNetError, match="no tensor named 'zz'"):
        t.root("zz")
