"""lightnet.blas reports what numpy's BLAS is: checked against what we make it be."""

import json
import os
import subprocess
import sys

import pytest

from lightnet import blas

OPENBLAS = "openblas" in blas.info()["name"].lower()


def _info_with(env: dict) -> dict:
    """blas.info() in a fresh interpreter whose environment has `env` added
    (OpenBLAS reads its variables when it loads)."""
    code = "import json; from lightnet import blas; print(json.dumps(blas.info()))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_info_has_every_field():
    i = blas.info()
    assert set(i) == {"name", "version", "core", "threads"}
    assert blas.describe().startswith(f"BLAS: {i['name']} {i['version']}, {i['core']} kernels")


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
