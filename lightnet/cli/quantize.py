"""`lightnet quantize MODEL --calibrate SAMPLES.npz -o OUT.onnx`: an int8 (QDQ) model
made by lightnet.quantization, and the accuracy report of LightNet running it against
the float model on the calibration samples (lightnet.accuracy)."""

from __future__ import annotations

from pathlib import Path

from lightnet.quantization import quantize as quantize_model


def default_output(model) -> str:
    """MODEL.int8.onnx beside MODEL."""
    path = Path(model)
    return str(path.with_name(f"{path.stem}.int8.onnx"))


def quantize(args, out) -> None:
    output = args.outfile or default_output(args.model)
    report = quantize_model(args.model, args.calibrate, output,
                            reduce_range=args.reduce_range, target=args.target)
    print(f"wrote {output}", file=out)
    print("\n".join(report.lines()), file=out)
