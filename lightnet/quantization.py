"""Post-training int8 quantization of an ONNX model (`lightnet quantize`,
`lightnet.quantize`): ONNX Runtime's quantize_static, calibrated on samples from an
.npz, writes a QDQ model (per-channel symmetric int8 weights, uint8 activations) that
LightNet imports as quantized ops (frontends/onnx/qdq.py); then the int8 model runs
beside the float one on the calibration samples and lightnet.accuracy reports how close
it comes.

Without VNNI, int8 products are summed in pairs into int16 with saturation (x86's
vpmaddubsw: oneDNN's and ONNX Runtime's int8 kernels there), which 8-bit weights against
uint8 activations overflow (2 x 255 x 127 > 32767); weights of 7 bits (reduce_range)
cannot (2 x 255 x 64 < 32767). `reduce_range="auto"` chooses them where oneDNN reports no
VNNI (lightnet.archs.dnnl's int8_exact) or cannot be used, at the cost of one bit of the
weights' precision; LightNet's cpu kernels compute exactly either way.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from lightnet import accuracy
from lightnet.errors import LightNetError
from lightnet.files import model_source, weight_file
from lightnet.ir import symbolic
from lightnet.runtime.session import Session

__all__ = ["REDUCE_RANGE", "quantize", "read_calibration", "reduce_range_here"]

REDUCE_RANGE = ("auto", "on", "off")
EXTRA = "pip install 'lightnet[quantize]'"


def reduce_range_here() -> bool:
    """Whether int8 weights should keep to 7 bits on this machine: unless oneDNN's int8
    sums are exact here (VNNI)."""
    from lightnet.archs.dnnl import capi

    if capi.unavailable_reason() is not None:
        return True
    from lightnet.archs.dnnl.ops import int8_exact

    return not int8_exact()


def read_calibration(path, inputs) -> list[dict[str, np.ndarray]]:
    """The samples of calibration file `path` (an .npz of one array per model input,
    by input name, each with a leading sample axis), one {name: array} per sample,
    checked against `inputs` (the float model's TensorInfo: dtype, and shape with
    symbolic dims)."""
    path = Path(path)
    if not path.is_file():
        raise LightNetError(f"{path}: no such calibration file")
    names = [i.name for i in inputs]
    known = ", ".join(names) or "none"

    def expect_names(found):
        for name in names:
            if name not in found:
                raise LightNetError(f"{path}: no array for input '{name}' (the model's "
                                    f"inputs: {known}; the file's arrays: "
                                    f"{', '.join(found) or 'none'})")
        for name in found:
            if name not in names:
                raise LightNetError(f"{path}: '{name}' is not an input of the model "
                                    f"(inputs: {known})")

    dims: dict[str, int] = {}
    by_name = {i.name: i for i in inputs}

    def expect(name, dtype, shape):
        info = by_name[name]
        if dtype != info.dtype:
            raise LightNetError(f"{path}: input '{name}': expected dtype {info.dtype}, "
                                f"found {dtype}")
        if len(shape) != len(info.shape) + 1 or shape[0] < 1:
            raise LightNetError(
                f"{path}: input '{name}': expected samples of shape "
                f"{symbolic.describe(info.shape)} along a leading sample axis "
                f"({symbolic.describe(('S', *info.shape))}), found {symbolic.describe(shape)}")
        problem = symbolic.match(info.shape, tuple(shape[1:]), dims)
        if problem is not None:
            raise LightNetError(f"{path}: input '{name}': its samples: {problem}")

    arrays = weight_file.read(path, expect_names, expect)
    counts = {name: len(a) for name, a in arrays.items()}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"'{n}' {c}" for n, c in counts.items())
        raise LightNetError(f"{path}: the inputs have different numbers of samples "
                            f"({listed}); every input needs one array per sample")
    samples = next(iter(counts.values()), 0)
    return [{name: arrays[name][s] for name in names} for s in range(samples)]


def _quantize_static(model, output, samples, reduce_range: bool) -> None:
    try:
        from onnxruntime import quantization as ortq
    except ImportError:
        raise LightNetError(f"{model}: quantizing needs the onnxruntime package: "
                            f"{EXTRA}") from None

    class Samples(ortq.CalibrationDataReader):
        def __init__(self):
            self.rest = iter(samples)

        def get_next(self):
            return next(self.rest, None)

    # quantize_static logs a suggestion to preprocess the model first on the root
    # logger: not something the user of this command can act on.
    logging.disable(logging.WARNING)
    try:
        ortq.quantize_static(
            str(model), str(output), Samples(), quant_format=ortq.QuantFormat.QDQ,
            per_channel=True, reduce_range=reduce_range,
            activation_type=ortq.QuantType.QUInt8, weight_type=ortq.QuantType.QInt8,
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False})
    except OSError as e:
        raise LightNetError(f"{output}: cannot write the quantized model: "
                            f"{e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - ONNX Runtime's refusal, as one line
        raise LightNetError(f"{model}: ONNX Runtime's quantize_static failed: "
                            f"{type(e).__name__}: {e}") from None
    finally:
        logging.disable(logging.NOTSET)


def quantize(model, calibration, output, *, reduce_range: str = "auto",
             target: str = "auto") -> accuracy.Report:
    """Quantize ONNX model `model` to int8 (QDQ) calibrated on the samples of
    `calibration` (an .npz: see read_calibration), write it to `output`, and return the
    accuracy of LightNet running it (compiled for `target`) against the float model on
    those samples. `reduce_range`: auto (7-bit weights where the machine has no VNNI;
    see the module docstring), on or off."""
    if reduce_range not in REDUCE_RANGE:
        raise LightNetError(f"reduce_range: expected one of {', '.join(REDUCE_RANGE)}, "
                            f"found {reduce_range!r}")
    if not model_source.is_onnx(model):
        raise LightNetError(f"{model}: quantizing takes an ONNX model (a path ending in "
                            ".onnx)")
    if not model_source.is_onnx(output):
        raise LightNetError(f"{output}: the quantized model is an ONNX model: name it "
                            "*.onnx")
    reference = Session(model, target=target)
    samples = read_calibration(calibration, reference.inputs)
    reduce = reduce_range_here() if reduce_range == "auto" else reduce_range == "on"
    _quantize_static(model, output, samples, reduce)
    quantized = Session(output, target=target)
    want = [reference.run(s) for s in samples]
    got = [quantized.run(s) for s in samples]
    return accuracy.compare(got, want)
