"""One engine on one model, in a fresh process: `bench/run.py` starts it so that the
memory each engine takes can be measured from the process's own peak RSS.

    python bench/worker.py ENGINE DIR THREADS      (ENGINE: ours:TARGET | ort | ov | ov-bf16)

TARGET is dnnl, cpu, or dnnl-bf16 (dnnl computing in bfloat16); ov is OpenVINO's CPU
plugin in float32, ov-bf16 the same asked for bfloat16 (an optional comparison: the
`openvino` package).

DIR holds model.onnx, inputs.npz (the model's inputs by name) and, for ours,
model.json + model.npz (the ONNX importer's output). The worker sets its engine up, prints what that took as one
JSON line, then runs the model when told to (see `main`), so that bench/run.py
can interleave the two engines' timed runs.

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

# the lightnet next to this bench/, like bench/run.py (not another installed copy)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def status(field: str) -> int:
    """A /proc/self/status field of this process in bytes (VmRSS, VmHWM: the peak)."""
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


def _outside_arena_bytes(ctx) -> int:
    """Bytes of arrays the run functions keep besides the arena and the
    weights: conv padded copies, batchnorm weights folded at load, softmax and
    resampling tables (found in the closures). Scratch (im2col, depthwise taps,
    pooling rows) is planned in the arena."""
    import numpy as np

    def root(a):
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    arenas = list(ctx.arenas.values())
    seen = {id(root(w)) for w in ctx.weights.values()}
    total = 0

    def count(a):
        nonlocal total
        if not isinstance(a, np.ndarray):
            return
        base = root(a)
        if any(base is arena for arena in arenas) or id(base) in seen:
            return
        seen.add(id(base))
        total += base.nbytes

    for _, run in ctx._run_ops:
        for cell in getattr(run, "__closure__", None) or ():  # a capi.Execute has none
            value = cell.cell_contents
            if isinstance(value, dict):
                for v in value.values():
                    count(v)
            else:
                count(value)
    return total


class Ours:
    """LightNet compiled for `target` (dnnl, cpu; dnnl-bf16: dnnl in bfloat16)."""

    def __init__(self, d: str, threads: int, target: str):
        import lightnet
        from lightnet.archs.dnnl import ops as dnnl_ops
        from lightnet.files.model_source import command_dims

        with open(os.path.join(d, "model.json")) as f:
            ir = json.load(f)
        self.feed = _load_inputs(d)
        base = status("VmRSS")
        _reset_peak()
        t0 = time.perf_counter()
        ctx = lightnet.Context(threads=threads)
        # Symbolic dims (a text model's batch and sequence) from the inputs' shapes.
        ctx.init(ir, dims=command_dims(ir, "model.json",
                                       shapes={n: x.shape for n, x in self.feed.items()}))
        target, _, precision = target.partition("-")
        ctx.compile(target, weights=os.path.join(d, "model.npz"),  # as `lightnet -f` does
                    precision=precision or "f32")
        ctx.load()
        self.setup = time.perf_counter() - t0
        self.ctx = ctx
        self.run()
        self.info = {
            "setup": self.setup, "peak_growth": status("VmHWM") - base,
            "rss_growth": status("VmRSS") - base,
            "arena": sum(r.needed for r in ctx.mem.values()),  # arena + weights
            "lower_bound": sum(r.lower_bound for r in ctx.mem.values()),
            "tensor_total": sum(r.total for r in ctx.mem.values()),
            "outside_arena": _outside_arena_bytes(ctx),
            "ops": len(ctx._runs),
            "kernels": dnnl_ops.describe_kernels(ctx.ops),
        }

    def run(self):
        for name, x in self.feed.items():
            self.ctx.set_data(name, x)
        self.ctx.run()

    def output(self):
        """The model's first output, as its producer orders them (the interface's)."""
        ports = self.ctx.interface.outputs if self.ctx.interface is not None else []
        return self.ctx.get_data(ports[0].name if ports else self.ctx.outputs[0])


class Ort:
    def __init__(self, d: str, threads: int):
        import onnxruntime as ort

        path = os.path.join(d, "model.onnx")
        base = status("VmRSS")
        _reset_peak()
        t0 = time.perf_counter()
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.setup = time.perf_counter() - t0
        self.feed = _load_inputs(d)
        self.run()
        self.info = {"setup": self.setup, "peak_growth": status("VmHWM") - base,
                     "rss_growth": status("VmRSS") - base, "version": ort.__version__}

    def run(self):
        self.out = self.sess.run(None, self.feed)[0]

    def output(self):
        return self.out


def _load_inputs(d) -> dict:
    import numpy as np

    with np.load(os.path.join(d, "inputs.npz")) as data:
        return dict(data)


class OpenVino:
    """OpenVINO's CPU plugin on the ONNX model, latency-tuned (one stream, `threads`
    inference threads), computing in float32 or bfloat16 (`precision`)."""

    def __init__(self, d: str, threads: int, precision: str):
        import openvino as ov

        base = status("VmRSS")
        _reset_peak()
        t0 = time.perf_counter()
        core = ov.Core()
        model = core.read_model(os.path.join(d, "model.onnx"))
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
                  "INFERENCE_NUM_THREADS": str(threads),
                  "INFERENCE_PRECISION_HINT": {"f32": "f32", "bf16": "bf16"}[precision]}
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.setup = time.perf_counter() - t0
        self.feed = _load_inputs(d)
        self.run()
        self.info = {"setup": self.setup, "peak_growth": status("VmHWM") - base,
                     "rss_growth": status("VmRSS") - base, "version": ov.__version__,
                     "precision": str(self.compiled.get_property("INFERENCE_PRECISION_HINT"))}

    def run(self):
        self.request.infer(self.feed)

    def output(self):
        return self.request.get_output_tensor(0).data.copy()


def main(argv) -> None:
    """Set the engine up (measuring memory), print its info as one JSON line, then
    serve commands from stdin, one a line: `run K` (print the K run times as a JSON
    list), `save` (write DIR/out_ENGINE.npy) and `quit`."""
    engine, d, threads = argv[0], argv[1], int(argv[2])
    import numpy as np

    if engine == "ort":
        e = Ort(d, threads)
    elif engine in ("ov", "ov-bf16"):
        e = OpenVino(d, threads, "bf16" if engine == "ov-bf16" else "f32")
    else:
        e = Ours(d, threads, engine.removeprefix("ours:"))
    print(json.dumps(e.info), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "run":
            times = []
            for _ in range(int(cmd[1])):
                start = time.perf_counter()
                e.run()
                times.append(time.perf_counter() - start)
            print(json.dumps(times), flush=True)
        elif cmd[0] == "save":
            np.save(os.path.join(d, f"out_{engine.replace(':', '-')}.npy"), e.output())
            print("{}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
