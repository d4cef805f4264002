"""The model zoo (bench/zoo.py) against ONNX Runtime, model by model and target by
target, as `bench/zoo.py check` runs it: LightNet imports the model, its outputs are
within 1e-4 of ORT's (or twice its own float32 noise) and, on dnnl, no op runs a ref
(unoptimized) oneDNN kernel. A model exported with dynamic batch and sequence axes
(bert-dynamic, distilbert-dynamic, gpt2-dynamic) runs batch 1 at sequences 16, 128
and 384 and batch 2 at 16 through one Session, each against ORT (zoo.check_one).

Slow, and skipped unless the zoo has been exported (`bench/zoo.py export`, in an
environment with the `zoo` extra) to bench/zoo.py's cache: ~/.cache/lightnet-zoo, or
$LIGHTNET_ZOO."""

import sys
from pathlib import Path

import pytest

from lightnet.archs.dnnl import capi

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
try:
    import zoo
finally:
    sys.path.pop(0)


def exported() -> list[str]:
    try:
        return list(zoo.read_manifest(zoo.DEFAULT_CACHE))
    except FileNotFoundError:
        return []


@pytest.mark.slow
@pytest.mark.parametrize("target", ["dnnl", "cpu"])
@pytest.mark.parametrize("name", exported() or [None])
def test_zoo_model_matches_onnx_runtime(name, target):
    if name is None:
        pytest.skip(f"no model zoo in {zoo.DEFAULT_CACHE} (run: bench/zoo.py export)")
    if target == "dnnl" and capi.unavailable_reason() is not None:
        pytest.skip(f"oneDNN is unavailable: {capi.unavailable_reason()}")
    r = zoo.check_child(zoo.DEFAULT_CACHE, name, target)
    assert r["status"] == "ok", r["message"] or f"error {r['err']:.1e}"
    assert not r["ref"], f"ref kernels: {'; '.join(r['ref'])}"


def test_zoo_model_names_are_unique():
    """A model's name is its cache entry and its file: two families exporting one name
    (torchvision's and transformers' MobileNet-V2) would overwrite each other."""
    seen = set()
    repeated = [name for name in zoo.MODELS if name in seen or seen.add(name)]
    assert not repeated
