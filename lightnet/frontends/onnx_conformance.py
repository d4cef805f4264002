"""Run the ONNX package's PyTorch-exported test models through the importer.

    python -m lightnet.frontends.onnx_conformance [-v] [-k SUBSTRING]

Every case of `onnx/backend/test/data/pytorch-converted` and `pytorch-operator`
(a directory with model.onnx and test_data_set_*/input_*.pb, output_*.pb) is
converted with `lightnet.frontends.onnx.convert`, run with `lightnet.Session`,
and its outputs compared with the expected ones (rtol 1e-3, atol 1e-4). A case
is *passed*, *failed* (wrong values, or an error other than an unsupported op)
or *unsupported* (the importer reports ops it cannot map). Exit status 0 when
no case fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError

SUITES = ("pytorch-converted", "pytorch-operator")
RTOL, ATOL = 1e-3, 1e-4


@dataclass
class Result:
    name: str
    status: str  # passed | failed | unsupported
    detail: str = ""
    seconds: float = 0.0


def data_dir() -> Path:
    from lightnet.frontends.onnx.graph import onnx_package

    return Path(onnx_package().__file__).parent / "backend" / "test" / "data"


def cases(suites=SUITES) -> list[Path]:
    """Every case directory of `suites`, sorted by suite then name."""
    root = data_dir()
    found = []
    for suite in suites:
        found.extend(sorted(p for p in (root / suite).iterdir() if (p / "model.onnx").is_file()))
    return found


def _read_pb(path: Path) -> np.ndarray:
    from lightnet.frontends.onnx.graph import onnx_package

    onnx = onnx_package()
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return onnx.numpy_helper.to_array(tensor)


def _data_sets(case: Path):
    for ds in sorted(case.glob("test_data_set_*")):
        def numbered(prefix):
            paths = ds.glob(f"{prefix}_*.pb")
            return [_read_pb(p) for p in sorted(paths, key=lambda p: int(p.stem.split("_")[-1]))]

        inputs, outputs = numbered("input"), numbered("output")
        yield ds.name, inputs, outputs


def run_case(case: Path) -> Result:
    """Import, run and compare one case directory."""
    from lightnet import Session
    from lightnet.frontends.onnx import UnsupportedModelError, convert, save_weights
    from lightnet.frontends.onnx.dtypes import to_tl_array
    from lightnet.frontends.onnx.graph import onnx_package

    onnx = onnx_package()
    name = case.name
    start = time.perf_counter()

    def done(status, detail=""):
        return Result(name, status, detail, time.perf_counter() - start)

    model = onnx.load(str(case / "model.onnx"))
    try:
        ir, weights = convert(model)
    except UnsupportedModelError as e:
        return done("unsupported", str(e))
    except LightNetError as e:
        return done("failed", f"import: {e}")
    initializers = {t.name for t in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in initializers]
    output_names = [o.name for o in model.graph.output]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "weights.npz"
            save_weights(npz, weights)
            session = Session(ir, datafile=npz)
        for ds, inputs, expected in _data_sets(case):
            feeds = {}
            by_name = {i.name: i for i in session.inputs}
            for input_name, value in zip(input_names, inputs):
                array = to_tl_array(value, f"input '{input_name}'")
                feeds[input_name] = array.reshape(by_name[input_name].shape)
            with np.errstate(all="ignore"):  # sqrt / pow of negatives give NaN, as expected
                got = session.run(feeds)
            for out_name, want in zip(output_names, expected):
                have = got[out_name]
                if have.size != want.size:
                    return done("failed", f"{ds}: output '{out_name}': shape "
                                f"{list(have.shape)}, expected {list(want.shape)}")
                have = have.reshape(want.shape)
                if not np.allclose(have.astype(np.float64), want.astype(np.float64),
                                   rtol=RTOL, atol=ATOL, equal_nan=True):
                    err = np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)))
                    return done("failed", f"{ds}: output '{out_name}': max abs error {err:.3g}")
    except LightNetError as e:
        return done("failed", f"run: {e}")
    return done("passed")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lightnet.frontends.onnx_conformance",
                                description="Run the ONNX PyTorch test models through onnx2ln.")
    p.add_argument("-k", metavar="SUBSTRING", help="only cases whose name contains SUBSTRING")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = p.parse_args(argv)
    try:
        selected = [c for c in cases() if not args.k or args.k in c.name]
    except LightNetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    results = []
    for case in selected:
        r = run_case(case)
        results.append(r)
        if args.verbose:
            line = f"{r.status:11} {r.name} ({r.seconds:.2f}s)"
            if r.detail and r.status != "passed":
                line += f": {r.detail}"
            print(line, flush=True)
    counts = {s: [r for r in results if r.status == s] for s in ("passed", "failed", "unsupported")}
    print(f"passed: {len(counts['passed'])}  failed: {len(counts['failed'])}  "
          f"unsupported: {len(counts['unsupported'])}  (of {len(results)})")
    for r in counts["failed"]:
        print(f"FAILED {r.name}: {r.detail}")
    if not args.verbose:
        for r in counts["unsupported"]:
            print(f"unsupported {r.name}: {r.detail.removeprefix('unsupported ONNX model: ')}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
