"""The `onnx2ln` command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from lightnet.command import fold_limit_option, parse_shape, report_errors

from .api import import_model


def _parse_dim(text: str):
    name, sep, value = text.partition("=")
    if not sep or not name or not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with VALUE >= 1, found {text!r}")
    return name, int(value)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onnx2ln",
        description="Convert an ONNX model to LightNet's JSON IR and an .npz weight file "
                    "(beside the IR, same stem). Run it with: lightnet OUT.json -f OUT.npz")
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--outfile", metavar="OUT.json",
                   help="the IR to write (default: MODEL.json beside MODEL.onnx)")
    p.add_argument("--dim", metavar="NAME=VALUE", action="append", type=_parse_dim, default=[],
                   help="value of the symbolic input dim NAME (repeatable); a symbolic dim "
                        "not given stays symbolic in the IR; an unnamed batch dim becomes 1")
    p.add_argument("--shape", metavar="INPUT=D1,D2,...", action="append", type=parse_shape,
                   default=[], help="the whole shape of input INPUT (repeatable): fixes its "
                                    "symbolic dims, for a model with static shapes")
    fold_limit_option(p)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.outfile) if args.outfile else Path(args.model).with_suffix(".json")

    def convert():
        ir_path, npz_path = import_model(args.model, out, dict(args.dim), dict(args.shape),
                                         args.fold_limit)
        doc = json.loads(ir_path.read_text(encoding="utf-8"))
        with np.load(npz_path) as npz:
            count = len(npz.files)
        print(f"onnx2ln: wrote {ir_path} ({len(doc['ops'])} ops) and {npz_path} "
              f"({count} tensors)")

    return report_errors("onnx2ln", args.debug, convert)
