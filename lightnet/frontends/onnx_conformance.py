"""Run the ONNX package's backend tests through the importer and lightnet.Session.

    python -m lightnet.frontends.onnx_conformance [-v] [-k SUBSTRING] [--suite models|node|all]

Two suites, both read from the installed onnx package (nothing is downloaded):

- *models*: every case of `onnx/backend/test/data/pytorch-converted` and
  `pytorch-operator` (a directory with model.onnx and test_data_set_*/input_*.pb,
  output_*.pb). A case is *passed*, *failed* (wrong values, or an error other
  than an unsupported op) or *unsupported* (the importer reports ops it cannot map).
- *node*: the backend node tests (`onnx.backend.test.case.node.collect_testcases`,
  one model per operator case, generated in memory), counted per op type. A case
  is *passed*, *failed* (it imports, then fails to run or gives a wrong value,
  dtype or shape) or *refused* (the importer refuses it with a LightNetError).

Each model is converted with `lightnet.frontends.onnx.convert`, run with
`lightnet.Session` on the case's inputs as ONNX declares them (int64, float16,
scalars...), and every output must have the declared dtype and shape and the
expected values (rtol 1e-3, atol 1e-4; NaN equals NaN). Exit status 0 when no
case fails.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError

SUITES = ("pytorch-converted", "pytorch-operator")
RTOL, ATOL = 1e-3, 1e-4


@dataclass
class Result:
    name: str
    status: str  # passed | failed | unsupported (models) | refused (node)
    detail: str = ""
    seconds: float = 0.0
    op_type: str = ""  # node tests: the op type under test


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


def _mismatch(name: str, have, want) -> str | None:
    """What differs between output `have` and the expected `want`, or None."""
    want = np.asarray(want)
    if not isinstance(have, np.ndarray):
        return f"output '{name}' is {type(have).__name__}, expected an array"
    if have.dtype != want.dtype:
        return f"output '{name}': dtype {have.dtype}, expected {want.dtype}"
    if have.shape != want.shape:
        return f"output '{name}': shape {list(have.shape)}, expected {list(want.shape)}"
    if want.dtype.kind not in "biufc":
        return f"output '{name}' has dtype {want.dtype}, which cannot be compared"
    a, b = have.astype(np.float64), want.astype(np.float64)
    if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
        with np.errstate(invalid="ignore"):
            err = np.nanmax(np.abs(a - b)) if a.size else 0.0
        return f"output '{name}': max abs error {err:.3g}"
    return None


def run_model(model, data_sets, refused=None) -> tuple[str, str]:
    """(status, detail) of importing `model` and running it on every (label, inputs,
    expected outputs) of `data_sets`. An import error of a type in `refused` gives
    'refused'; an UnsupportedModelError otherwise gives 'unsupported'."""
    from lightnet import Session
    from lightnet.frontends.onnx import UnsupportedModelError, convert, save_weights

    try:
        ir, weights = convert(model)
    except UnsupportedModelError as e:
        return ("refused" if refused else "unsupported"), str(e)
    except LightNetError as e:
        if refused and isinstance(e, refused):
            return "refused", str(e)
        return "failed", f"import: {e}"
    except Exception as e:  # noqa: BLE001 - a crash of the importer is a failure
        return "failed", f"import crashed: {type(e).__name__}: {e}"
    initializers = {t.name for t in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in initializers]
    output_names = [o.name for o in model.graph.output]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "weights.npz"
            save_weights(npz, weights)
            session = Session(ir, datafile=npz)
        for label, inputs, expected in data_sets:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                # sqrt / pow of negatives give NaN, as expected
                warnings.simplefilter("ignore", RuntimeWarning)
                got = session.run(dict(zip(input_names, inputs)))
            for out_name, want in zip(output_names, expected):
                problem = _mismatch(out_name, got[out_name], want)
                if problem:
                    return "failed", f"{label}: {problem}"
    except LightNetError as e:
        return "failed", f"run: {e}"
    except Exception as e:  # noqa: BLE001 - a crash of the runtime is a failure
        return "failed", f"run crashed: {type(e).__name__}: {e}"
    return "passed", ""


def run_case(case: Path) -> Result:
    """Import, run and compare one case directory of the models suite."""
    from lightnet.frontends.onnx.graph import onnx_package

    start = time.perf_counter()
    model = onnx_package().load(str(case / "model.onnx"))
    status, detail = run_model(model, _data_sets(case))
    return Result(case.name, status, detail, time.perf_counter() - start)


# -----------------------------------------------------------------------------
# The node tests
# -----------------------------------------------------------------------------

def node_cases() -> list:
    """Every backend node test case (onnx's TestCase: name, model, data_sets)."""
    from lightnet.frontends.onnx.graph import onnx_package

    onnx_package()
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        return [c for c in collect_testcases(None) if c.model is not None]


def node_op_types(node_tests) -> dict[str, str]:
    """The op type each case tests: its node's, or for a function expanded into
    several nodes (`..._expanded`), the op type of the case it expands."""
    single = {c.name: c.model.graph.node[0].op_type for c in node_tests
              if len(c.model.graph.node) == 1}
    result = {}
    for c in node_tests:
        base = re.sub(r"_expanded(_ver\d+)?$", "", c.name)
        nodes = c.model.graph.node
        result[c.name] = single.get(c.name) or single.get(base) or (
            nodes[-1].op_type if nodes else "(no node)")
    return result


def _array(value):
    """A data set's value as an array (the float16 and bfloat16 cases give TensorProtos);
    bfloat16 as float32, which LightNet holds it as (numpy has no bfloat16)."""
    from lightnet.frontends.onnx.graph import onnx_package

    onnx = onnx_package()
    array = onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value
    dtype = getattr(array, "dtype", None)  # sequence cases give lists
    return array.astype(np.float32) if dtype is not None and dtype.name == "bfloat16" else array


def run_node_case(case, op_type: str = "") -> Result:
    """Import, run and compare one backend node test case."""
    start = time.perf_counter()
    data_sets = [(f"data set {k}", [_array(x) for x in inputs], [_array(x) for x in outputs])
                 for k, (inputs, outputs) in enumerate(case.data_sets)]
    status, detail = run_model(case.model, data_sets, refused=LightNetError)
    return Result(case.name, status, detail, time.perf_counter() - start, op_type)


# -----------------------------------------------------------------------------
# The command
# -----------------------------------------------------------------------------

def _line(r: Result) -> str:
    line = f"{r.status:11} {r.name} ({r.seconds:.2f}s)"
    if r.detail and r.status != "passed":
        line += f": {r.detail}"
    return line


def _run_models(selected, verbose: bool) -> int:
    results = []
    for case in selected:
        r = run_case(case)
        results.append(r)
        if verbose:
            print(_line(r), flush=True)
    counts = {s: [r for r in results if r.status == s] for s in ("passed", "failed", "unsupported")}
    print(f"passed: {len(counts['passed'])}  failed: {len(counts['failed'])}  "
          f"unsupported: {len(counts['unsupported'])}  (of {len(results)})")
    for r in counts["failed"]:
        print(f"FAILED {r.name}: {r.detail}")
    if not verbose:
        for r in counts["unsupported"]:
            print(f"unsupported {r.name}: {r.detail.removeprefix('unsupported ONNX model: ')}")
    return len(counts["failed"])


def _run_nodes(selected, op_types: dict[str, str], verbose: bool) -> int:
    results = []
    for case in selected:
        r = run_node_case(case, op_types[case.name])
        results.append(r)
        if verbose:
            print(_line(r), flush=True)
    per_op: dict[str, Counter] = {}
    for r in results:
        per_op.setdefault(r.op_type, Counter())[r.status] += 1
    statuses = ("passed", "failed", "refused")
    width = max([len(op) for op in per_op] + [len("op type")])
    print(f"{'op type':{width}}  passed  failed  refused")
    for op, count in sorted(per_op.items()):
        print(f"{op:{width}}  " + "  ".join(f"{count[s]:{len(s)}}" for s in statuses))
    total = Counter(r.status for r in results)
    print(f"node tests: passed: {total['passed']}  failed: {total['failed']}  "
          f"refused: {total['refused']}  (of {len(results)})")
    for r in results:
        if r.status == "failed":
            print(f"FAILED {r.name}: {r.detail}")
    return total["failed"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lightnet.frontends.onnx_conformance",
                                description="Run the ONNX backend test models and node tests "
                                            "through onnx2ln and lightnet.Session.")
    p.add_argument("-k", metavar="SUBSTRING", help="only cases whose name contains SUBSTRING")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    p.add_argument("--suite", choices=("models", "node", "all"), default="all",
                   help="the PyTorch-exported models, the node tests, or both (default)")
    args = p.parse_args(argv)
    failed = 0
    try:
        if args.suite in ("models", "all"):
            selected = [c for c in cases() if not args.k or args.k in c.name]
            failed += _run_models(selected, args.verbose)
        if args.suite in ("node", "all"):
            tests = node_cases()
            selected = [c for c in tests if not args.k or args.k in c.name]
            if selected or args.suite == "node":
                failed += _run_nodes(selected, node_op_types(tests), args.verbose)
    except LightNetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
