"""One engine on one model, in a fresh process: `bench/run.py` starts it so that the
memory each engine takes can be measured from the process's own peak RSS.

    python bench/worker.py ENGINE DIR REPEAT THREADS      (ENGINE: ours | ort)

DIR holds model.onnx, input.npy and, for ours, model.json + model.npz (the ONNX
importer's output). Prints one JSON line; writes DIR/out_ENGINE.npy.

Memory: the kernel's peak-RSS counter (VmHWM) is reset (/proc/self/clear_refs) once
the engine's module is imported, then read after creating the engine's model and
running it once. The growth counts everything either engine allocates for the
model: weights, activations, scratch, plus whatever it reads from the model file.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _outside_arena_bytes(ctx) -> int:
    """Bytes of arrays the run functions keep besides the arena: conv im2col
    workspaces, padded copies, folded batchnorm weights (found in the closures)."""
    import numpy as np

    arenas = list(ctx.arenas.values())
    seen, total = set(), 0

    def count(a):
        nonlocal total
        if not isinstance(a, np.ndarray):
            return
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if any(base is arena for arena in arenas) or id(base) in seen:
            return
        seen.add(id(base))
        total += base.nbytes

    for _, run in ctx._run_ops:
        for cell in run.__closure__ or ():
            value = cell.cell_contents
            if isinstance(value, dict):
                for v in value.values():
                    count(v)
            else:
                count(value)
    return total


def run_ours(d: str, x, repeat: int) -> tuple[dict, object]:
    import lightnet

    with open(os.path.join(d, "model.json")) as f:
        ir = json.load(f)
    base = _status("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    ctx = lightnet.Context()
    ctx.init(ir)
    ctx.compile("cpu")
    ctx.load(os.path.join(d, "model.npz"))
    t1 = time.perf_counter()
    (name,) = ctx.inputs
    ctx.set_data(name, x)
    ctx.run()
    peak = _status("VmHWM") - base
    out = ctx.get_data(ctx.outputs[0])
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ctx.set_data(name, x)
        ctx.run()
        times.append(time.perf_counter() - start)
    result = {
        "latency": _median(times), "times": times, "setup": t1 - t0, "peak_growth": peak,
        "rss_growth": _status("VmRSS") - base,
        "arena": sum(r.arena for r in ctx.mem.values()),
        "lower_bound": sum(r.lower_bound for r in ctx.mem.values()),
        "tensor_total": sum(r.total for r in ctx.mem.values()),
        "outside_arena": _outside_arena_bytes(ctx),
        "ops": len(ctx._runs),
    }
    return result, out


def run_ort(d: str, x, repeat: int, threads: int) -> tuple[dict, object]:
    import onnxruntime as ort

    path = os.path.join(d, "model.onnx")
    base = _status("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    t1 = time.perf_counter()
    name = sess.get_inputs()[0].name
    out = sess.run(None, {name: x})[0]
    peak = _status("VmHWM") - base
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sess.run(None, {name: x})
        times.append(time.perf_counter() - start)
    result = {"latency": _median(times), "times": times, "setup": t1 - t0,
              "peak_growth": peak, "rss_growth": _status("VmRSS") - base,
              "version": ort.__version__}
    return result, out


def main(argv) -> None:
    engine, d, repeat, threads = argv[0], argv[1], int(argv[2]), int(argv[3])
    import numpy as np

    x = np.load(os.path.join(d, "input.npy"))
    warmup = 2
    if engine == "ours":
        result, out = run_ours(d, x, repeat + warmup)
    else:
        result, out = run_ort(d, x, repeat + warmup, threads)
    times = result["times"][warmup:]  # the first runs after the measured one warm caches
    result["times"] = times
    result["latency"] = _median(times)
    np.save(os.path.join(d, f"out_{engine}.npy"), out)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
