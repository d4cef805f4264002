"""What numpy's BLAS, which does most of LightNet's arithmetic, says about itself.

A model's speed depends on which BLAS numpy loaded, which kernels it picked for this
CPU and how many threads it runs, and none of that shows in LightNet's own code:
OpenBLAS, for one, picks its kernels when it loads, from the CPU model or from the
OPENBLAS_CORETYPE variable (on an AVX-512 machine, its "Haswell" AVX2 kernels run
float32 GEMM at about half the rate of its "SkylakeX" ones). `lightnet --profile`
and the benchmark print this next to their timings.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["info", "describe"]


def _openblas_function(name: str):
    """Function `name` (e.g. "get_corename") of an OpenBLAS loaded in this process,
    whatever prefix and suffix its build gave the symbols; None when there is none."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                function = getattr(lib, f"{prefix}{name}{suffix}", None)
                if function is not None:
                    return function
    return None


def info() -> dict:
    """numpy's BLAS: {"name", "version", "core", "threads"}; "?" for what it does
    not tell (a BLAS other than OpenBLAS has no core name)."""
    name = version = "?"
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name, version = blas.get("name", "?"), blas.get("version", "?")
    except (KeyError, TypeError, ValueError):
        pass
    core = threads = "?"
    corename = _openblas_function("get_corename")
    if corename is not None:
        corename.restype = ctypes.c_char_p
        core = corename().decode()
    num_threads = _openblas_function("get_num_threads")
    if num_threads is not None:
        num_threads.restype = ctypes.c_int
        threads = num_threads()
    return {"name": name, "version": version, "core": core, "threads": threads}


def describe() -> str:
    """info() as one line, e.g. "BLAS: scipy-openblas 0.3.31, Haswell kernels, 2 threads"."""
    i = info()
    return f"BLAS: {i['name']} {i['version']}, {i['core']} kernels, {i['threads']} threads"
