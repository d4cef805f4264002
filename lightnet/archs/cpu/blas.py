"""numpy's BLAS, which does most of LightNet's arithmetic: what it says about
itself, and how many threads it runs.

A model's speed depends on which BLAS numpy loaded, which kernels it picked for this
CPU and how many threads it runs, and none of that shows in LightNet's own code:
OpenBLAS, for one, picks its kernels when it loads, from the CPU model or from the
OPENBLAS_CORETYPE variable (on an AVX-512 machine, its "Haswell" AVX2 kernels run
float32 GEMM at about half the rate of its "SkylakeX" ones). `lightnet --profile`
and the benchmark print this next to their timings.

The thread count is OpenBLAS's, so it is the whole process's: `threads(n)` sets it
for a block (what `Context(threads=n)` does around each run) and puts it back after.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os

import numpy as np

from lightnet.errors import LightNetError

__all__ = ["controllable", "describe", "info", "set_threads", "thread_control", "threads"]


# The OpenBLAS functions used here: (restype, argtypes).
_SIGNATURES = {
    "get_corename": (ctypes.c_char_p, []),
    "get_num_threads": (ctypes.c_int, []),
    "set_num_threads": (None, [ctypes.c_int]),
}


@functools.cache
def _openblas_function(name: str):
    """Function `name` of _SIGNATURES in the OpenBLAS loaded in this process, typed,
    whatever prefix and suffix its build gave the symbols; None when there is none.
    Looked up once (numpy, imported above, has loaded its BLAS by then)."""
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
                    function.restype, function.argtypes = _SIGNATURES[name]
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
        core = corename().decode()
    num_threads = _openblas_function("get_num_threads")
    if num_threads is not None:
        threads = num_threads()
    return {"name": name, "version": version, "core": core, "threads": threads}


# What OpenBLAS's AVX-512 kernels need (its own test for SkylakeX), and its cores with them.
_AVX512_FLAGS = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
_AVX512_CORES = {"SkylakeX", "Cooperlake", "SapphireRapids"}


def _cpu_flags(cpuinfo: str) -> set[str]:
    """The CPU's feature flags as Linux reports them (without the AVX-512 ones when
    the OS does not enable them); empty where there is no such file."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def describe(cpuinfo: str = "/proc/cpuinfo") -> str:
    """info() as one line, e.g. "BLAS: scipy-openblas 0.3.31, Haswell kernels, 2 threads",
    saying so when OpenBLAS runs AVX2 kernels on a CPU with AVX-512."""
    i = info()
    line = f"BLAS: {i['name']} {i['version']}, {i['core']} kernels, {i['threads']} threads"
    if i["core"] not in ("?", *_AVX512_CORES) and _AVX512_FLAGS <= _cpu_flags(cpuinfo):
        chosen = os.environ.get("OPENBLAS_CORETYPE")
        line += (" (this CPU has AVX-512, which OpenBLAS's SkylakeX kernels use"
                 + (f"; OPENBLAS_CORETYPE={chosen} chose these)" if chosen else ")"))
    return line


def controllable() -> bool:
    """Whether this BLAS's threads can be set from here (OpenBLAS's can)."""
    return None not in (_openblas_function("set_num_threads"),
                        _openblas_function("get_num_threads"))


def thread_control():
    """OpenBLAS's (set_num_threads, get_num_threads); a LightNetError for a BLAS
    whose threads cannot be set from here."""
    setter = _openblas_function("set_num_threads")
    getter = _openblas_function("get_num_threads")
    if setter is None or getter is None:
        raise LightNetError(f"threads: cannot set the threads of numpy's BLAS "
                            f"({info()['name']}): only OpenBLAS's can be set; use its own "
                            "environment variable instead")
    return setter, getter


def set_threads(n: int) -> int:
    """Make numpy's BLAS run `n` threads from now on, in the whole process; returns
    the count it had."""
    setter, getter = thread_control()
    previous = getter()
    setter(n)
    return previous


def threads(n: int | None):
    """A context: BLAS threads = `n` inside the block, as before after it. None leaves
    them as they are, at no cost (Context.run enters this on every run)."""
    return _UNCHANGED if n is None else _threads_set(n)


_UNCHANGED = contextlib.nullcontext()


@contextlib.contextmanager
def _threads_set(n: int):
    previous = set_threads(n)
    try:
        yield
    finally:
        set_threads(previous)
