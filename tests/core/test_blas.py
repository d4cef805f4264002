"""lightnet.archs.cpu.blas reports what numpy's BLAS is: checked against what we make it be."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session
from lightnet.archs.cpu import blas, kernels

SRC = np.arange(1, 9, dtype=np.float32).reshape(2, 4)


def slice_model() -> dict:
    """create [2, 4] -> slice columns 1..3: one kernel call per run (kernels.slice)."""
    def params(**values):
        return [{"arg_name": a, "value": v} for a, v in values.items()]

    return {"ops": [
        {"name": "create1", "optype": "create", "tensors_out": [{"arg_name": "dst", "name": "t1"}],
         "params": params(dtype="TL_FLOAT", dims=[2, 4], data=SRC.reshape(-1).tolist())},
        {"name": "slice1", "optype": "slice", "tensors_in": [{"arg_name": "src", "name": "t1"}],
         "tensors_out": [{"arg_name": "dst", "name": "t2"}],
         "params": params(axis=1, start=1, len=3)},
    ]}


OPENBLAS = "openblas" in blas.info()["name"].lower()


def _info_with(env: dict) -> dict:
    """blas.info() in a fresh interpreter whose environment has `env` added
    (OpenBLAS reads its variables when it loads)."""
    code = "import json; from lightnet.archs.cpu import blas; print(json.dumps(blas.info()))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_info_has_every_field():
    i = blas.info()
    assert set(i) == {"name", "version", "core", "threads"}
    assert blas.describe().startswith(f"BLAS: {i['name']} {i['version']}, {i['core']} kernels")


AVX2 = "fpu sse sse2 avx avx2 fma"
AVX512 = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl"


@pytest.mark.parametrize("core, flags, env, hint", [
    ("Haswell", AVX512, None, " (this CPU has AVX-512, which OpenBLAS's SkylakeX kernels use)"),
    ("Haswell", AVX512, "Haswell", " (this CPU has AVX-512, which OpenBLAS's SkylakeX kernels "
                                   "use; OPENBLAS_CORETYPE=Haswell chose these)"),
    ("Zen", AVX512.replace(" avx512vl", ""), None, ""),  # not all that SkylakeX needs
    ("Haswell", AVX2, None, ""),
    ("SkylakeX", AVX512, None, ""),
    ("?", AVX512, None, ""),  # not OpenBLAS: it has no kernels to choose
])
def test_describe_says_when_avx512_goes_unused(core, flags, env, hint, tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n")
    monkeypatch.setattr(blas, "info", lambda: {"name": "b", "version": "1", "core": core,
                                               "threads": 2})
    if env is None:
        monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_CORETYPE", env)
    assert blas.describe(str(cpuinfo)) == f"BLAS: b 1, {core} kernels, 2 threads{hint}"
    assert blas.describe(str(tmp_path / "none")) == f"BLAS: b 1, {core} kernels, 2 threads"


@pytest.mark.skipif(not OPENBLAS, reason="numpy is not built with OpenBLAS")
@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_what_the_environment_asks(threads):
    assert _info_with({"OPENBLAS_NUM_THREADS": str(threads)})["threads"] == threads


@pytest.mark.skipif(not OPENBLAS, reason="numpy is not built with OpenBLAS")
def test_core_is_what_the_environment_asks():
    # Nehalem (SSE4.2) runs on every x86-64 machine of this decade
    if os.uname().machine != "x86_64":
        pytest.skip("core names are x86-64 ones")
    assert _info_with({"OPENBLAS_CORETYPE": "Nehalem"})["core"] == "Nehalem"


@pytest.mark.skipif(not OPENBLAS, reason="numpy is not built with OpenBLAS")
def test_set_threads_returns_the_count_it_replaces():
    start = blas.info()["threads"]
    try:
        assert blas.set_threads(1) == start
        assert blas.info()["threads"] == 1
        assert blas.set_threads(3) == 1
        assert blas.info()["threads"] == 3
    finally:
        blas.set_threads(start)


@pytest.mark.skipif(not OPENBLAS, reason="numpy is not built with OpenBLAS")
def test_threads_block_puts_the_count_back_even_on_error():
    start = blas.info()["threads"]
    with pytest.raises(RuntimeError):
        with blas.threads(start + 1):
            assert blas.info()["threads"] == start + 1
            raise RuntimeError("inside")
    assert blas.info()["threads"] == start
    with blas.threads(None):
        assert blas.info()["threads"] == start


def test_a_blas_that_cannot_be_told_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(blas, "_openblas_function", lambda name: None)
    with pytest.raises(LightNetError, match=r"^threads: cannot set the threads of numpy's BLAS"):
        blas.set_threads(2)
    with pytest.raises(LightNetError, match=r"only OpenBLAS's can be set"):
        Context(threads=2)
    Context()  # without threads nothing asks the BLAS


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_context_threads_must_be_a_count(bad):
    with pytest.raises(LightNetError, match=r"^threads: expected a whole number >= 1, found "):
        Context(threads=bad)


@pytest.mark.skipif(not OPENBLAS, reason="numpy is not built with OpenBLAS")
@pytest.mark.parametrize("threads", [1, 2])
def test_context_runs_with_its_threads_and_puts_them_back(threads, monkeypatch):
    """The kernels see the context's thread count; after run() and profile() the
    process has its own back."""
    seen = []
    real = kernels.slice

    def spy(*args, **kwargs):
        seen.append(blas.info()["threads"])
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels, "slice", spy)
    start = blas.set_threads(3)
    try:
        ctx = Context(threads=threads)
        ctx.init(slice_model())
        ctx.compile("cpu")
        ctx.load()
        ctx.run()
        assert blas.info()["threads"] == 3
        ctx.profile()
        assert blas.info()["threads"] == 3
        session = Session(slice_model(), target="cpu", threads=threads)
        session.run()
        assert blas.info()["threads"] == 3
    finally:
        blas.set_threads(start)
    assert seen == [threads] * 3
    np.testing.assert_array_equal(ctx.get_data("t2"), SRC[:, 1:4])
