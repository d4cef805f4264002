"""ONNX element types and the LightNet dtypes that hold them (float16 -> TL_FLOAT,
int64 -> TL_INT32, range-checked)."""

from __future__ import annotations

import numpy as np

from lightnet.errors import LightNetError

from .errors import Unsupported
from .graph import onnx_package

# ONNX TensorProto element types.
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64 = 1, 2, 3, 4, 5, 6, 7
STRING, BOOL, FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16 = 8, 9, 10, 11, 12, 13, 16

TL_OF = {
    FLOAT: "TL_FLOAT", FLOAT16: "TL_FLOAT", BFLOAT16: "TL_FLOAT", DOUBLE: "TL_DOUBLE",
    INT8: "TL_INT8", INT16: "TL_INT16", INT32: "TL_INT32", INT64: "TL_INT32",
    UINT8: "TL_UINT8", UINT16: "TL_UINT16", UINT32: "TL_UINT32", UINT64: "TL_UINT32",
    BOOL: "TL_BOOL",
}
NP_OF_TL = {
    "TL_DOUBLE": np.float64, "TL_FLOAT": np.float32, "TL_INT32": np.int32, "TL_INT16": np.int16,
    "TL_INT8": np.int8, "TL_UINT32": np.uint32, "TL_UINT16": np.uint16, "TL_UINT8": np.uint8,
    "TL_BOOL": np.bool_,
}
NP_OF_ONNX = {
    FLOAT: np.float32, UINT8: np.uint8, INT8: np.int8, UINT16: np.uint16, INT16: np.int16,
    INT32: np.int32, INT64: np.int64, BOOL: np.bool_, FLOAT16: np.float16,
    DOUBLE: np.float64, UINT32: np.uint32, UINT64: np.uint64,
}


def type_name(elem_type: int) -> str:
    onnx = onnx_package()
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def tl_dtype(elem_type: int, what: str) -> str:
    """The LightNet dtype holding ONNX `elem_type` (float16 -> TL_FLOAT, int64 -> TL_INT32)."""
    if elem_type not in TL_OF:
        raise Unsupported(f"{what} has element type {type_name(elem_type)}, "
                          "which LightNet has no dtype for")
    return TL_OF[elem_type]


def to_tl_array(array: np.ndarray, what: str) -> np.ndarray:
    """`array` converted to its LightNet dtype; 64-bit integers are range checked."""
    array = np.asarray(array)
    kind = array.dtype
    if kind == np.float16 or kind.name == "bfloat16" or kind == np.float32:
        return np.ascontiguousarray(array, dtype=np.float32)
    if kind == np.float64:
        return np.ascontiguousarray(array)
    if kind == np.bool_:
        return np.ascontiguousarray(array)
    if kind in (np.int64, np.uint64):
        target = np.int32 if kind == np.int64 else np.uint32
        info = np.iinfo(target)
        if array.size and (array.min() < info.min or array.max() > info.max):
            bad = array[(array < info.min) | (array > info.max)].reshape(-1)[0]
            raise LightNetError(
                f"{what} is {kind.name} and holds {int(bad)}, which does not fit in "
                f"{'TL_INT32' if target is np.int32 else 'TL_UINT32'} "
                f"[{info.min}, {info.max}] (LightNet has no 64-bit integers)")
        return np.ascontiguousarray(array, dtype=target)
    if kind in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32):
        return np.ascontiguousarray(array)
    raise Unsupported(f"{what} has numpy dtype {kind}, which LightNet has no dtype for")
