"""Kernels that fill tensors from model data or show them to the user."""

import sys
import zlib

import numpy as np

__all__ = ["fill_data", "fill_uniform", "fits_dtype", "format_tensor", "print_tensor"]


def fits_dtype(values, dtype) -> bool:
    """Whether every value is representable in numpy `dtype` (floats up to
    rounding): integers in range for integer dtypes, 0 or 1 for bool, within
    the finite range for floats. So literal data never wraps or overflows
    silently."""
    dtype = np.dtype(dtype)
    v = np.asarray(values, dtype=np.float64)
    if dtype.kind == "b":
        return bool(np.isin(v, (0, 1)).all())
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return bool(((v == np.round(v)) & (v >= info.min) & (v <= info.max)).all())
    return bool((np.abs(v) <= np.finfo(dtype).max).all())



def fill_data(dst: np.ndarray, data) -> None:
    """Fill the first elements of `dst` (row-major) with the literal values of
    a model, cast to its dtype, and the rest with zeros (LightNet's create)."""
    flat = dst.reshape(-1)
    flat[: len(data)] = np.asarray(data, dtype=np.float64)
    flat[len(data) :] = 0


def fill_uniform(dst: np.ndarray, low: float, high: float, seed_name: str, seed: int = 0) -> None:
    """Fill `dst` with uniform random values in [low, high].

    The generator is seeded with `seed` (the context's) and the CRC-32 of the
    tensor's name, so a model without a weight file runs reproducibly, and two
    tensors differ.
    """
    rng = np.random.default_rng([seed, zlib.crc32(seed_name.encode("utf-8"))])
    dst[...] = rng.uniform(low, high, size=dst.shape)


def format_tensor(src: np.ndarray) -> str:
    """Render a tensor as LightNet prints it: numpy layout, 3 decimals for floats."""
    return np.array2string(
        src,
        threshold=sys.maxsize,
        max_line_width=sys.maxsize,
        formatter={"float_kind": lambda x: f"{x:.3f}"},
    )


def print_tensor(src: np.ndarray, msg: str, file=None) -> None:
    """Print `msg` on a line, then the tensor."""
    out = sys.stdout if file is None else file
    out.write(f"{msg}\n{format_tensor(src)}\n")
