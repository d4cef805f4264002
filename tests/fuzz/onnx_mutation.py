"""Mutation fuzzing of real ONNX files: the corpus, the mutations, and the worker
process that imports, compiles, loads and runs each mutated model.

The corpus is the onnx package's backend test models (light/, simple/,
pytorch-converted/, pytorch-operator/ files; with `node=True` also the node test
cases of every op type the importer maps, which take half a minute to generate)
and a relu chain of bench/models.py, each at most 1 MB. Case `i` draws its seed
model and one to three mutations of its protobuf fields from a generator seeded
with (SEED, i): dims, attributes, dtypes, initializer sizes and raw data, node
inputs and outputs, op types, opset versions, external-data fields. So a case is
reproduced by its index alone:

    python tests/fuzz/onnx_mutation.py --case 1234 [--node]

The contract every case keeps: it runs, or it is refused with one clear line (a
LightNetError: one line, not the importer's catch-all for a Python error it did
not expect, such as an IndexError);
nothing else escapes; importing, compiling and loading it take at most
CASE_SECONDS of CPU time (CPU time: the machine may be shared), and the whole case
answers within HANG_SECONDS; and the worker's peak memory grows by at most
MEMORY_LIMIT (the Session's limit) plus MEMORY_SLACK. The worker is a separate
process, killed and restarted on a hang.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SEED = 26
CASE_SECONDS = 10
HANG_SECONDS = 60
MEMORY_LIMIT = 256 * 2**20
MEMORY_SLACK = 192 * 2**20  # the interpreter's own: IR documents, op tables, protobufs
MAX_MODEL_BYTES = 2**20
# A guard for the shared machine, not the check: the worker's address space.
ADDRESS_SPACE = 8 * 2**30

# The importer's catch-all for a Python error it did not expect while mapping a node
# (an IndexError, a TypeError...): a bug to fix, not a clear refusal.
CATCH_ALL = re.compile(r": cannot be imported: \w+: ")


# The corpus ------------------------------------------------------------------------------


def corpus(node: bool = False) -> list[tuple[str, bytes]]:
    """(name, serialized model) of every seed model, in a fixed order."""
    import onnx

    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    files = sorted([*data.glob("light/*.onnx"), *data.glob("simple/*/model.onnx"),
                    *data.glob("pytorch-converted/*/model.onnx"),
                    *data.glob("pytorch-operator/*/model.onnx")])
    seeds = [(str(p.relative_to(data)), p.read_bytes()) for p in files
             if p.stat().st_size <= MAX_MODEL_BYTES]
    from tests.helpers import bench_models

    seeds.append(("bench relu_chain(30)", bench_models().relu_chain(30).SerializeToString()))
    if node:
        from onnx.backend.test.case.node import collect_testcases

        from lightnet.frontends.onnx import SUPPORTED_OPS

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            cases = [c for c in collect_testcases(None) if c.model is not None]
        seeds += sorted((f"node {c.name}", c.model.SerializeToString()) for c in cases
                        if all(n.op_type in SUPPORTED_OPS for n in c.model.graph.node))
    return seeds


# Mutations -------------------------------------------------------------------------------

INTS = [0, 1, -1, 2, 3, 5, 64, 1000, 2**31 - 1, 2**31, -2**31, 2**40, 10**12, 2**62, -2**63]
FLOATS = [0.0, -1.0, 0.5, 3.0, 1e-30, 1e30, -1e30, math.nan, math.inf, -math.inf]
STRINGS = ["", "x", "NOTSET", "SAME_UPPER", "VALID", "linear", "nearest", "cubic",
           "constant", "reflect", "edge", "\udcff", "a" * 5000]
LOCATIONS = ["/etc/passwd", "../../../../etc/passwd", "nonexistent.bin", "/dev/zero",
             "/dev/urandom", "", ".", "model.onnx", "/proc/self/mem", "a/../../b"]
OPSETS = [-1, 0, 1, 5, 6, 7, 9, 10, 11, 12, 13, 15, 17, 18, 21, 23, 25, 26, 1000, 2**62]
DTYPES = list(range(0, 24)) + [100, -1]


class _Draw:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def one(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def int(self) -> int:
        return self.one(INTS) if self.chance(0.7) else int(self.rng.integers(-4, 300))

    def float(self) -> float:
        return self.one(FLOATS) if self.chance(0.7) else float(self.rng.normal() * 10)


def _value_infos(g):
    return [*g.input, *g.output, *g.value_info]


def _dims(m, d: _Draw) -> str:
    infos = [v for v in _value_infos(m.graph) if v.type.HasField("tensor_type")]
    if not infos:
        return "dims: none"
    v = d.one(infos)
    shape = v.type.tensor_type.shape
    choice = d.rng.integers(5)
    if choice == 0 or not shape.dim:
        shape.dim.add().dim_value = max(d.int(), 0)
        return f"dims: a dim added to {v.name}"
    if choice == 1:
        del shape.dim[int(d.rng.integers(len(shape.dim)))]
        return f"dims: a dim of {v.name} removed"
    if choice == 2:
        dim = d.one(shape.dim)
        dim.dim_param = d.one(["N", "", "batch", "1N", "N*2"])
        return f"dims: {v.name} dim -> param '{dim.dim_param}'"
    if choice == 3:
        v.type.tensor_type.ClearField("shape")
        return f"dims: {v.name}'s shape cleared"
    dim = d.one(shape.dim)
    dim.dim_value = max(d.int(), -2**63)
    return f"dims: {v.name} dim -> {dim.dim_value}"


def _attribute(m, d: _Draw) -> str:
    from onnx import AttributeProto, helper, numpy_helper

    nodes = list(m.graph.node)
    if not nodes:
        return "attribute: no node"
    n = d.one(nodes)
    if not n.attribute or d.chance(0.15):
        name = d.one(["axis", "axes", "perm", "kernel_shape", "pads", "strides", "group",
                      "to", "value", "keepdims", "alpha", "mode", "bogus"])
        value = d.one([d.int(), d.float(), [d.int() for _ in range(int(d.rng.integers(0, 5)))],
                       d.one(STRINGS)])
        try:
            n.attribute.append(helper.make_attribute(name, value))
        except (ValueError, TypeError):
            return "attribute: none added"
        return f"attribute: {n.op_type}.{name} added = {value!r:.60}"
    a = d.one(n.attribute)
    choice = d.rng.integers(6)
    if choice == 0:
        n.attribute.remove(a)
        return f"attribute: {n.op_type}.{a.name} removed"
    if choice == 1:
        a.type = d.one(list(AttributeProto.AttributeType.values()))
        return f"attribute: {n.op_type}.{a.name} type -> {a.type}"
    if a.type == AttributeProto.INT or choice == 2:
        a.i = d.int()
        return f"attribute: {n.op_type}.{a.name}.i -> {a.i}"
    if a.type == AttributeProto.FLOAT:
        a.f = d.float()
        return f"attribute: {n.op_type}.{a.name}.f -> {a.f}"
    if a.type == AttributeProto.INTS:
        ints = list(a.ints)
        if ints and d.chance(0.6):
            ints[int(d.rng.integers(len(ints)))] = d.int()
        elif ints and d.chance(0.5):
            ints.pop()
        else:
            ints.append(d.int())
        del a.ints[:]
        a.ints.extend(ints)
        return f"attribute: {n.op_type}.{a.name}.ints -> {ints}"
    if a.type == AttributeProto.STRING:
        a.s = d.one(STRINGS).encode("utf-8", "surrogatepass")
        return f"attribute: {n.op_type}.{a.name}.s -> {a.s[:20]!r}"
    if a.type == AttributeProto.TENSOR:
        _tensor(a.t, d)
        return f"attribute: {n.op_type}.{a.name}.t mutated"
    a.t.CopyFrom(numpy_helper.from_array(np.asarray(d.float(), np.float32)))
    a.type = AttributeProto.TENSOR
    return f"attribute: {n.op_type}.{a.name} -> a tensor"


def _tensor(t, d: _Draw) -> str:
    """Mutate a TensorProto: its dims, data type, raw data, or where its data is."""
    choice = d.rng.integers(7)
    if choice == 0:
        t.data_type = d.one(DTYPES)
        return f"data_type -> {t.data_type}"
    if choice == 1:
        dims = list(t.dims)
        if dims and d.chance(0.5):
            dims[int(d.rng.integers(len(dims)))] = d.int()
        elif dims and d.chance(0.5):
            dims.pop()
        else:
            dims.append(abs(d.int()) % 10**13)
        del t.dims[:]
        t.dims.extend(max(x, -2**63) for x in dims)
        return f"dims -> {dims}"
    if choice == 2 and t.raw_data:
        t.raw_data = t.raw_data[: int(d.rng.integers(len(t.raw_data)))]
        return "raw_data cut"
    if choice == 3:
        t.raw_data = bytes(t.raw_data) + bytes(d.rng.integers(0, 256, int(d.rng.integers(1, 64)),
                                                              dtype=np.uint8))
        return "raw_data extended"
    if choice == 4:
        t.ClearField("raw_data")
        t.float_data.extend(d.float() for _ in range(int(d.rng.integers(0, 8))))
        return "data moved to float_data"
    if choice == 5:
        t.raw_data = bytes(d.rng.integers(0, 256, len(t.raw_data), dtype=np.uint8))
        return "raw_data randomized"
    return _external(t, d)


def _external(t, d: _Draw) -> str:
    from onnx import TensorProto

    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    del t.external_data[:]
    fields = {"location": d.one(LOCATIONS)}
    if d.chance(0.5):
        fields["offset"] = str(d.one([0, 1, 4096, -1, 2**40, 2**63]))
    if d.chance(0.7):
        fields["length"] = str(d.one([0, 4, 16, 2**30, 2**40, -1]))
    if d.chance(0.1):
        fields["checksum"] = "x"
    for key, value in fields.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return f"external data {fields}"


def _initializer(m, d: _Draw) -> str:
    from onnx import numpy_helper

    inits = list(m.graph.initializer)
    if not inits or d.chance(0.1):
        names = [x for n in m.graph.node for x in n.input if x]
        name = d.one(names) if names else "w"
        shape = [int(d.rng.integers(0, 4)) for _ in range(int(d.rng.integers(0, 4)))]
        m.graph.initializer.append(numpy_helper.from_array(
            np.ones(shape, np.float32), name))
        return f"initializer {name} added"
    t = d.one(inits)
    return f"initializer {t.name}: {_tensor(t, d)}"


def _edges(m, d: _Draw) -> str:
    g = m.graph
    nodes = list(g.node)
    names = sorted({x for n in nodes for x in [*n.input, *n.output] if x}
                   | {v.name for v in g.input} | {t.name for t in g.initializer})
    if not nodes or not names:
        return "edges: none"
    n = d.one(nodes)
    choice = d.rng.integers(9)
    if choice == 0 and n.input:
        i = int(d.rng.integers(len(n.input)))
        n.input[i] = d.one(names + ["", "missing"])
        return f"edges: {n.op_type} input {i} -> {n.input[i]!r}"
    if choice == 1 and n.output:
        i = int(d.rng.integers(len(n.output)))
        n.output[i] = d.one(names + [""])
        return f"edges: {n.op_type} output {i} -> {n.output[i]!r}"
    if choice == 2 and n.input:
        del n.input[int(d.rng.integers(len(n.input)))]
        return f"edges: an input of {n.op_type} removed"
    if choice == 3:
        n.input.append(d.one(names + [""]))
        return f"edges: an input added to {n.op_type}"
    if choice == 4:
        g.node.remove(n)
        return f"edges: node {n.op_type} removed"
    if choice == 5:
        g.node.append(n)
        return f"edges: node {n.op_type} duplicated"
    if choice == 6:
        reordered = list(g.node)[::-1]
        del g.node[:]
        g.node.extend(reordered)
        return "edges: nodes reversed"
    if choice == 7 and g.output:
        g.output[int(d.rng.integers(len(g.output)))].name = d.one(names + ["", "missing"])
        return "edges: a graph output renamed"
    if g.input:
        g.input[int(d.rng.integers(len(g.input)))].name = d.one(names + [""])
        return "edges: a graph input renamed"
    return "edges: none"


def _op_type(m, d: _Draw) -> str:
    from lightnet.frontends.onnx import SUPPORTED_OPS

    if not m.graph.node:
        return "op type: no node"
    n = d.one(list(m.graph.node))
    if d.chance(0.15):
        n.domain = d.one(["com.microsoft", "ai.onnx", "x", "ai.onnx.ml"])
        return f"op type: {n.op_type} domain -> {n.domain}"
    old, n.op_type = n.op_type, d.one(SUPPORTED_OPS + ["Loop", "If", "Unknown", ""])
    return f"op type: {old} -> {n.op_type}"


def _opset(m, d: _Draw) -> str:
    choice = d.rng.integers(4)
    if choice == 0:
        m.ir_version = d.one([0, 1, 3, 4, 7, 8, 10, 11, 13, 100, -1])
        return f"ir_version -> {m.ir_version}"
    if choice == 1 or not m.opset_import:
        entry = m.opset_import.add()
        entry.domain, entry.version = d.one(["", "ai.onnx", "com.microsoft"]), d.one(OPSETS)
        return f"opset import added: {entry.domain!r} {entry.version}"
    if choice == 2:
        del m.opset_import[:]
        return "opset imports removed"
    entry = d.one(list(m.opset_import))
    entry.version = d.one(OPSETS)
    return f"opset {entry.domain!r} -> {entry.version}"


def _dtype(m, d: _Draw) -> str:
    infos = [v for v in _value_infos(m.graph) if v.type.HasField("tensor_type")]
    casts = [n for n in m.graph.node if n.op_type == "Cast"]
    if casts and d.chance(0.3):
        from onnx import helper

        n = d.one(casts)
        del n.attribute[:]
        n.attribute.append(helper.make_attribute("to", d.one(DTYPES)))
        return "dtype: a Cast's to"
    if infos and d.chance(0.6):
        v = d.one(infos)
        v.type.tensor_type.elem_type = d.one(DTYPES)
        return f"dtype: {v.name} -> {v.type.tensor_type.elem_type}"
    if m.graph.initializer:
        t = d.one(list(m.graph.initializer))
        t.data_type = d.one(DTYPES)
        return f"dtype: initializer {t.name} -> {t.data_type}"
    return "dtype: none"


MUTATIONS = [_dims, _attribute, _dtype, _initializer, _edges, _op_type, _opset]


@dataclass
class Case:
    index: int
    seed: str
    mutations: list[str]
    model: bytes


def make_case(index: int, seeds: list[tuple[str, bytes]]) -> Case:
    """Case `index`: a seed model with one to three mutations, all drawn from
    a generator seeded with (SEED, index)."""
    import onnx

    d = _Draw(np.random.default_rng([SEED, index]))
    name, data = d.one(seeds)
    m = onnx.ModelProto()
    m.ParseFromString(data)
    done = []
    for _ in range(int(d.rng.integers(1, 4))):
        mutation = d.one(MUTATIONS)
        try:
            done.append(mutation(m, d))
        except (ValueError, TypeError) as e:  # a value protobuf itself refuses
            done.append(f"{mutation.__name__[1:]}: not made ({e})")
    return Case(index, name, done, m.SerializeToString())


# The worker ------------------------------------------------------------------------------


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def run_model(path: str, times: list) -> tuple[str, str]:
    """(outcome, message) of importing, compiling, loading and running the ONNX
    model at `path` on zeros: ran, refused (one clear line), or a finding:
    unclear (a message of several lines, or the importer's catch-all) or internal
    (any other exception, with its traceback). Appends the CPU seconds the
    Session took to set up to `times`."""
    import time

    import lightnet

    start = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                session = lightnet.Session(path, memory_limit=MEMORY_LIMIT)
            finally:
                times.append(time.process_time() - start)
            feeds = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape],
                                      i.dtype) for i in session.inputs}
            session.run(feeds)
        return "ran", ""
    except lightnet.LightNetError as e:
        message = str(e)
        if not message.strip() or "\n" in message or CATCH_ALL.search(message):
            return "unclear", message[:2000]
        return "refused", message[:300]
    except Exception:  # noqa: BLE001 - what the fuzzer looks for
        return "internal", traceback.format_exc()[-3000:]


def worker() -> None:
    """Run the model of every path read from stdin; print one JSON line each."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import lightnet  # noqa: F401 - imported before the first case is measured
    import lightnet.frontends.onnx  # noqa: F401

    for line in sys.stdin:
        before = _status("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        times = []
        outcome, message = run_model(line.strip(), times)
        growth = _status("VmHWM") - before
        print(json.dumps({"outcome": outcome, "message": message, "growth": growth,
                          "setup": times[0]}), flush=True)


class Worker:
    """A worker process (restarted after a hang or a crash) running one case at a time."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lightnet-onnx-fuzz-")
        self.proc = None

    def _start(self):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], cwd=self.tmp.name,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)

    def run(self, case: Case) -> dict:
        """The worker's result of `case`, or outcome hang / crash."""
        path = Path(self.tmp.name) / "model.onnx"
        path.write_bytes(case.model)
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            ready = sel.select(HANG_SECONDS)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            hung = self.proc.poll() is None
            self.close()
            return {"outcome": "hang" if hung else "crash",
                    "message": f"no answer in {HANG_SECONDS} s" if hung else "the worker died",
                    "growth": 0, "setup": 0}
        result = json.loads(line)
        if result["setup"] > CASE_SECONDS:
            result = {**result, "outcome": "slow",
                      "message": f"set up in {result['setup']:.1f} CPU s: {result['message']}"}
        if result["growth"] > MEMORY_LIMIT + MEMORY_SLACK:
            result = {**result, "outcome": "memory",
                      "message": f"peak memory grew by {result['growth']} bytes: "
                                 f"{result['message']}"[:2000]}
        return result

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        self.tmp.cleanup()


FINDINGS = ("unclear", "internal", "hang", "crash", "memory", "slow")


def fuzz(indices, node: bool = False, on_result=None) -> tuple[dict, list]:
    """Run the cases `indices`: (outcome -> count, [(case, result) of every finding]).
    A hang is tried once more in a fresh worker before it counts."""
    seeds = corpus(node)
    counts: dict[str, int] = {}
    findings = []
    with Worker() as w:
        for i in indices:
            case = make_case(i, seeds)
            result = w.run(case)
            if result["outcome"] in ("hang", "slow"):  # once more, in case the machine was busy
                result = w.run(case)
            counts[result["outcome"]] = counts.get(result["outcome"], 0) + 1
            if result["outcome"] in FINDINGS:
                findings.append((case, result))
            if on_result is not None:
                on_result(case, result)
    return counts, findings


def describe(case: Case, result: dict) -> str:
    return (f"case {case.index} ({case.seed}; {' | '.join(case.mutations)}): "
            f"{result['outcome']}: {result['message']}")


def main(argv=None) -> None:
    import argparse

    p = argparse.ArgumentParser(description="Run mutated ONNX models (see the module doc).")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", type=int, help="run one case and print it")
    p.add_argument("--cases", type=int, default=0, help="run cases 0 .. N-1, print findings")
    p.add_argument("--start", type=int, default=0, help="the first case of --cases")
    p.add_argument("--node", action="store_true", help="the node test cases in the corpus too")
    p.add_argument("--save", metavar="PATH", help="with --case: write its model to PATH")
    args = p.parse_args(argv)
    if args.worker:
        worker()
        return
    if args.case is not None:
        case = make_case(args.case, corpus(args.node))
        if args.save:
            Path(args.save).write_bytes(case.model)
        counts, findings = fuzz([args.case], args.node,
                                lambda c, r: print(describe(c, r)))
        return

    def show(case, result):
        if result["outcome"] in FINDINGS:
            print(describe(case, result), flush=True)

    counts, findings = fuzz(range(args.start, args.start + args.cases), args.node, show)
    print(json.dumps(counts))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
