"""How long LightNet takes to import, compile and load a model, against ONNX Runtime's
session creation on the same ONNX file (not part of the unit tests).

    python bench/compile_time.py                          # chains of 2,000 and 10,000 ops
    python bench/compile_time.py --ops 2000,10000,50000 --targets cpu,dnnl
    python bench/compile_time.py --ops "" --blocks 1000,3000   # conv + batchnorm + relu blocks
    python bench/compile_time.py --models resnet50,vit_s16
    python bench/compile_time.py --ops "" --models ~/.cache/lightnet-zoo/swin_t.onnx
    python bench/compile_time.py --profile 10000          # cProfile of LightNet's setup
    python bench/compile_time.py --instructions 1000,5000 # instructions per op (valgrind)

A chain is N unary ONNX nodes (Relu, Sigmoid, Tanh, Neg in turn) on a [1, 64] input,
each mapping to one LightNet op: its cost is what the import, the compiler and the
loader spend per op. A block model (`--blocks N`) is N Conv (1x1, 8 channels, 4x4) +
BatchNormalization + Relu blocks in a row, seeded random weights: 3N nodes and 5N
initializers, and as many batchnorms the compiler folds into the convolutions' weights
(what real exports of convolutional networks are made of). `--models` takes the bench networks of bench/models.py (seeded
random weights), or are ONNX files (a path ending in .onnx, such as the zoo's in
~/.cache/lightnet-zoo/). `--instructions` counts what a chain's op costs in machine instructions (valgrind's
cachegrind, which counts exactly: on a shared machine whose speed moves from minute to
minute, a change of a few per cent shows there and nowhere else): a worker setting up and
running a chain of each length, the difference divided by the difference in ops (what
importing the modules and the run's fixed costs take cancels out).
Each engine sets the model up in a fresh process (this script run
with --worker), after its modules are imported: LightNet from the ONNX file to a
loaded Session (lightnet.Session(path): import, compile, plan, load), ONNX Runtime
to an InferenceSession. Both then run the model once. Each row gives the setup's wall
and CPU seconds (CPU time is less disturbed by other processes on a shared machine),
and the process's peak RSS growth over the setup and the run (VmHWM, reset once the
modules are imported) and its whole peak RSS. Results: docs/performance.md,
"Compile time".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from worker import status  # bench/worker.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1 << 20
UNARY = ("Relu", "Sigmoid", "Tanh", "Neg")


def chain(n: int):
    """N unary nodes in a row on a [1, 64] float input."""
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node(UNARY[i % len(UNARY)], [prev], [out], name=f"n{i}"))
        prev = out
    graph = helper.make_graph(nodes, f"chain{n}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def blocks(n: int, channels: int = 8):
    """N Conv + BatchNormalization + Relu blocks in a row on a [1, C, 4, 4] input."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    c = channels
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        w = (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        for name, low, high in (("s", 0.5, 1.5), ("b", -0.1, 0.1), ("m", -0.1, 0.1),
                                ("v", 0.5, 1.5)):
            inits.append(numpy_helper.from_array(
                rng.uniform(low, high, c).astype(np.float32), f"{name}{i}"))
        out = "y" if i == n - 1 else f"r{i}"
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"]),
                  helper.make_node("BatchNormalization",
                                   [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
                  helper.make_node("Relu", [f"n{i}"], [out])]
        prev = out
    graph = helper.make_graph(
        nodes, f"blocks{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def worker(engine: str, path: str) -> None:
    """Set up `engine` (ort, or ours:TARGET) on the ONNX file `path`, run it once,
    and print the measurements as one JSON line."""
    import time

    import numpy as np
    import onnx

    if engine == "ort":
        import onnxruntime as ort
    else:
        sys.path.insert(0, ROOT)
        import lightnet
        import lightnet.frontends.onnx  # noqa: F401 - imported before the clock starts
    rss_before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    wall, cpu = time.perf_counter(), time.process_time()
    if engine == "ort":
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = session.get_inputs()[0]
        setup = time.perf_counter() - wall, time.process_time() - cpu
        session.run(None, {x.name: np.zeros([d if isinstance(d, int) else 1 for d in x.shape],
                                            np.float32)})
    else:
        session = lightnet.Session(path, target=engine.split(":")[1])
        setup = time.perf_counter() - wall, time.process_time() - cpu
        (x,) = session.inputs
        session.run({x.name: np.zeros(x.shape, np.float32)})
    del onnx
    print(json.dumps({"wall": setup[0], "cpu": setup[1], "growth": status("VmHWM") - rss_before,
                      "peak": status("VmHWM")}))


def measure(engine: str, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", engine, path],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile(n: int, target: str) -> None:
    import cProfile
    import pstats

    import onnx

    sys.path.insert(0, ROOT)
    import lightnet
    import lightnet.frontends.onnx  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.onnx")
        onnx.save(chain(n), path)
        profiler = cProfile.Profile()
        profiler.runcall(lightnet.Session, path, target=target)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def instructions(lengths: list[int], target: str) -> None:
    """Instructions per op of LightNet's setup (and one run) of a chain, on `target`."""
    import onnx

    if shutil.which("valgrind") is None:
        sys.exit("compile_time.py: --instructions needs valgrind")
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in lengths:
            path = os.path.join(tmp, f"chain{n}.onnx")
            onnx.save(chain(n), path)
            out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                                  "--cachegrind-out-file=/dev/null", sys.executable, __file__,
                                  "--worker", f"ours:{target}", path],
                                 capture_output=True, text=True, check=False,
                                 # no OpenMP threads spinning through the run's count
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
            found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
            if out.returncode or found is None:
                sys.exit(f"compile_time.py: the worker under valgrind failed: "
                         f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
            counts.append(int(found.group(1).replace(",", "")))
            print(f"chain {n:,} on {target}: {counts[-1]:,} instructions", flush=True)
    for (n1, c1), (n2, c2) in zip(zip(lengths, counts), zip(lengths[1:], counts[1:])):
        print(f"{n1:,} -> {n2:,} ops: {(c2 - c1) / (n2 - n1):,.0f} instructions per op")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default="2000,10000",
                   help="comma-separated chain lengths (default 2000,10000)")
    p.add_argument("--blocks", default="",
                   help="comma-separated counts of conv + batchnorm + relu blocks (default: none)")
    p.add_argument("--models", default="",
                   help="comma-separated bench networks of bench/models.py (default: none)")
    p.add_argument("--targets", default="cpu,dnnl", help="LightNet's targets (default cpu,dnnl)")
    p.add_argument("--profile", type=int, metavar="N",
                   help="print a cProfile of LightNet's setup of a chain of N ops and exit")
    p.add_argument("--instructions", metavar="N1,N2",
                   help="instructions per op between chains of N1 and N2 ops (valgrind), and exit")
    p.add_argument("--worker", nargs=2, metavar=("ENGINE", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if args.profile:
        profile(args.profile, args.targets.split(",")[0])
        return
    if args.instructions:
        instructions([int(n) for n in args.instructions.split(",")], args.targets.split(",")[-1])
        return

    import numpy as np
    import onnx

    sys.path.insert(0, HERE)
    import models

    cases = [(f"chain {int(n):,}", lambda n=int(n): chain(n)) for n in args.ops.split(",") if n]
    cases += [(f"blocks {int(n):,}", lambda n=int(n): blocks(n))
              for n in args.blocks.split(",") if n]
    for name in filter(None, args.models.split(",")):
        if name.endswith(".onnx"):  # a file (its external data beside it)
            cases.append((os.path.basename(name)[:-5], lambda name=name: onnx.load(name)))
        else:
            cases.append((name, lambda name=name: models.MODELS[name](np.random.default_rng(0))))
    engines = [f"ours:{t}" for t in args.targets.split(",")] + ["ort"]
    print(f"{'model':<16} {'engine':<10} {'setup s':>8} {'cpu s':>7} {'growth MB':>10} "
          f"{'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in cases:
            path = os.path.join(tmp, "model.onnx")
            onnx.save(build(), path)
            for engine in engines:
                r = measure(engine, path)
                label = engine.replace("ours:", "")
                if "error" in r:
                    print(f"{name:<16} {label:<10} error: {r['error']}")
                    continue
                print(f"{name:<16} {label:<10} {r['wall']:8.2f} {r['cpu']:7.2f} "
                      f"{r['growth'] / MB:10.1f} {r['peak'] / MB:8.1f}", flush=True)


if __name__ == "__main__":
    main()
