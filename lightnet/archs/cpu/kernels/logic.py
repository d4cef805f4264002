"""Boolean kernels: comparisons, logic, selection, dtype conversion and the IEEE tests
that make or read TL_BOOL tensors (ONNX's masks). Each writes through a ufunc's `out=`
or np.copyto, with numpy broadcasting, so a run allocates nothing."""

import numpy as np

__all__ = [
    "cast",
    "compare",
    "isinf",
    "isnan",
    "logic",
    "logic_not",
    "where",
]

_COMPARE_UFUNCS = {
    "TL_EQ": np.equal,
    "TL_LT": np.less,
    "TL_LE": np.less_equal,
    "TL_GT": np.greater,
    "TL_GE": np.greater_equal,
}

_LOGIC_UFUNCS = {"TL_AND": np.logical_and, "TL_OR": np.logical_or, "TL_XOR": np.logical_xor}


def compare(src1: np.ndarray, src2: np.ndarray, dst: np.ndarray, *, cmp_op: str) -> None:
    """dst = src1 <cmp_op> src2 (TL_EQ, TL_LT, TL_LE, TL_GT or TL_GE), a bool array."""
    _COMPARE_UFUNCS[cmp_op](src1, src2, out=dst)


def logic(src1: np.ndarray, src2: np.ndarray, dst: np.ndarray, *, logic_op: str) -> None:
    """dst = src1 <logic_op> src2 (TL_AND, TL_OR or TL_XOR) of bool arrays."""
    _LOGIC_UFUNCS[logic_op](src1, src2, out=dst)


def logic_not(src: np.ndarray, dst: np.ndarray) -> None:
    """dst = not src, element-wise."""
    np.logical_not(src, out=dst)


def where(cond: np.ndarray, src1: np.ndarray, src2: np.ndarray, dst: np.ndarray) -> None:
    """dst = src1 where cond is true, else src2 (all three broadcast to dst)."""
    np.copyto(dst, src2)
    np.copyto(dst, src1, where=cond)


def cast(src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src converted to dst's dtype as C converts: a float to an integer
    truncates toward zero, an integer to a narrower one wraps around, any nonzero
    value (NaN too) to bool is true. A float that does not fit the integer type
    (NaN, inf, out of range) gives an undefined value, as in C and ONNX."""
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(dst, src, casting="unsafe")


def isnan(src: np.ndarray, dst: np.ndarray) -> None:
    """dst = whether each element of src is NaN."""
    np.isnan(src, out=dst)


def isinf(src: np.ndarray, dst: np.ndarray, *, detect_positive: bool,
          detect_negative: bool) -> None:
    """dst = whether each element of src is an infinity of a detected sign."""
    if detect_positive and detect_negative:
        np.isinf(src, out=dst)
    elif detect_positive:
        np.isposinf(src, out=dst)
    elif detect_negative:
        np.isneginf(src, out=dst)
    else:
        dst.fill(False)
