"""Targets (auto, dnnl, cpu), `lightnet --targets`, oneDNN's threads, and a machine
where oneDNN cannot load (simulated: the wheel missing, the library unloadable)."""

import subprocess
import sys
from pathlib import Path

import pytest

from lightnet import Context, Session
from lightnet.archs.dnnl import capi
from lightnet.compiler import targets
from tests.helpers import EXAMPLE, assert_one_error_line, lightnet, python

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_OUTPUT = "tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"
NEEDS_ONEDNN = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                  reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")

# Runs `lightnet` in a process where the onednn-cpu-gomp distribution is not installed.
WITHOUT_WHEEL = """
import importlib.metadata, sys
real = importlib.metadata.distribution
def distribution(name):
    if name == "onednn-cpu-gomp":
        raise importlib.metadata.PackageNotFoundError(name)
    return real(name)
importlib.metadata.distribution = distribution
from lightnet.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_wheel_auto_runs_on_cpu_and_dnnl_fails_in_one_line():
    result = python("-c", WITHOUT_WHEEL, EXAMPLE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(EXAMPLE_OUTPUT)
    line = assert_one_error_line(python("-c", WITHOUT_WHEEL, EXAMPLE, "-t", "dnnl"))
    assert line == ("lightnet: error: target 'dnnl': unavailable: the onednn-cpu-gomp package "
                    "is not installed (pip install onednn-cpu-gomp==2023.2.0); use -t cpu "
                    "(or auto)")
    listed = python("-c", WITHOUT_WHEEL, "--targets")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        "cpu: available (numpy kernels)",
        "dnnl: unavailable: the onednn-cpu-gomp package is not installed "
        "(pip install onednn-cpu-gomp==2023.2.0)",
        "auto: cpu (dnnl where it can be used, else cpu)"]


def test_a_library_that_cannot_load_says_why(tmp_path):
    broken = tmp_path / "libdnnl.so.3"
    broken.write_bytes(b"not a shared object")
    with pytest.raises(capi.Unavailable, match=r"^cannot load .*libdnnl.so.3: "):
        capi.Library(str(broken))


@NEEDS_ONEDNN
def test_targets_lists_onednn_and_its_isa():
    result = lightnet("--targets")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    lib = capi.library()
    assert lines[0] == "cpu: available (numpy kernels)"
    assert f"oneDNN {lib.version}, ISA {lib.cpu_isa}, " in lines[1]
    bf16 = {"native": ", bf16 native, ", "emulated": ", bf16 emulated, ", None: ", no bf16, "}
    assert bf16[capi.bf16_support(capi.library().dnnl_get_effective_cpu_isa())] in lines[1]


def test_bf16_support_follows_the_isa_bits():
    isa = {name: value for value, name in capi.CPU_ISA_NAMES.items()}
    support = {name: capi.bf16_support(value) for name, value in isa.items()}
    assert [n for n, s in support.items() if s == "native"] == [
        "avx2_vnni_2", "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx",
        "avx512_core_amx_fp16"]
    assert [n for n, s in support.items() if s == "emulated"] == [
        "avx512_core", "avx512_core_vnni"]


def test_auto_is_the_default_and_resolves_to_an_architecture():
    assert targets.resolve("auto") in ("cpu", "dnnl")
    assert targets.resolve("cpu") == "cpu"
    result = lightnet(EXAMPLE)
    assert result.returncode == 0 and result.stdout.startswith(EXAMPLE_OUTPUT)
    assert Session(str(EXAMPLE)).run() == Session(str(EXAMPLE), target="cpu").run()


@NEEDS_ONEDNN
def test_auto_compiles_for_dnnl_where_onednn_loads():
    assert targets.resolve("auto") == "dnnl"
    ctx = Context()
    ctx.init(str(ROOT / "examples" / "squeezenet.json"))
    ctx.compile()
    assert "conv2d_dnnl" in [op.optype for op in ctx.ops]


@NEEDS_ONEDNN
def test_threads_set_onednn_while_running_and_put_them_back():
    lib = capi.library()
    before = lib.threads()
    with capi.threads(1):
        assert lib.threads() == 1
    assert lib.threads() == before
    assert capi.threads(None) is capi.threads(None)  # the free no-op
    ctx = Context(threads=1)
    ctx.init(str(EXAMPLE))
    ctx.compile("cpu")
    ctx.load()
    seen = []
    ctx._runs = (lambda: seen.append(lib.threads()),)
    ctx.run()
    assert seen == [1] and lib.threads() == before


@NEEDS_ONEDNN
@pytest.mark.parametrize("environment,spin_count", [
    ({}, capi.SPIN_COUNT), ({"OMP_WAIT_POLICY": "passive"}, "0"),
    ({"GOMP_SPINCOUNT": "77"}, "77")])
def test_onednn_spins_briefly_unless_the_environment_chooses(environment, spin_count):
    """libgomp (OMP_DISPLAY_ENV shows what it read) spins SPIN_COUNT times after a
    parallel region unless the environment sets a wait policy or a spin count; the
    process's environment is left as it was."""
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(environment, OMP_DISPLAY_ENV="VERBOSE")
    result = subprocess.run(
        [sys.executable, "-c", "import os; from lightnet.archs.dnnl import capi; capi.library(); "
                               "print(os.environ.get('GOMP_SPINCOUNT'))"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(environment.get("GOMP_SPINCOUNT"))
    assert f"GOMP_SPINCOUNT = '{spin_count}'" in result.stderr


@NEEDS_ONEDNN
@pytest.mark.parametrize("target,blas_threads", [("dnnl", 1), ("cpu", 2)])
def test_numpy_blas_runs_one_thread_in_a_model_with_dnnl_ops(target, blas_threads):
    from lightnet.archs.cpu import blas

    if not blas.controllable():
        pytest.skip("numpy's BLAS threads cannot be set here")
    before = blas.set_threads(3)
    try:
        ctx = Context(threads=2)
        ctx.init(str(ROOT / "examples" / "squeezenet.json"))
        ctx.compile(target)
        ctx.load()
        seen = []
        ctx._runs = (lambda: seen.append((blas.thread_control()[1](),
                                          capi.library().threads())),)
        ctx.run()
        assert seen == [(blas_threads, 2)]
        assert blas.thread_control()[1]() == 3  # put back after the run
    finally:
        blas.set_threads(before)
