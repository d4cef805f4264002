"""LightNet vs ONNX Runtime on 224x224 float32 CNNs and a ViT (not part of the unit tests).

    python bench/run.py                         # every model, then the dispatch table
    python bench/run.py --target dnnl           # dnnl, cpu or both (the default)
    python bench/run.py --precision bf16        # dnnl in bfloat16 too, beside float32
    python bench/run.py --models resnet50,vgg11 --blocks 3
    python bench/run.py --profile mobilenetv2   # where LightNet's time goes, by optype
    python bench/run.py --threads 1
    python bench/run.py --quiet-wait 120        # on a shared machine: wait for quiet
    python bench/run.py --openvino off          # leave OpenVINO out even where installed
    python bench/run.py --zoo                   # the zoo's models instead (bench/zoo.py)
    python bench/run.py --zoo --target both --models resnet18,yolov8n
    python bench/run.py --zoo --models resnet50 --quantized /tmp/int8/resnet50-qdq.onnx

Each model is built once as an ONNX graph with seeded random weights (bench/models.py);
ONNX Runtime runs it directly, LightNet through its ONNX importer, compiled for each
--target (dnnl, cpu, or both in the same run). Each engine runs in its own process
(bench/worker.py), which measures the memory the engine takes; the timed runs come in
blocks of --runs back-to-back runs, the engines taking turns block by block with a
--pause between blocks (so that one engine's spinning threads do not slow the next),
--blocks rounds; each engine's median block (ms per run) is reported, so all see the
same machine, with two ratios to ONNX Runtime that a slow spell of the machine (a
neighbour on a shared host, which can slow every engine by half for seconds) moves
less: `paired`, the median over rounds of the ratio of the two engines' blocks in the
same round, and `q1`, the ratio of their lower quartiles of blocks. Every engine's output must agree with ONNX Runtime's to 1e-3
(max |ours - ort| / max |ort|), 2e-2 in bfloat16 (the accuracy contract), or the
row says FAIL (and the exit status is 1). --precision bf16 adds LightNet's dnnl
target computing in bfloat16 (`dnnl-bf16`) beside the float32 engines.

Where the `openvino` package is installed (an optional, bench-only comparison), its
CPU plugin runs the same ONNX model too, latency-tuned: `ov` in float32 and, with
--precision bf16, `ov-bf16` (INFERENCE_PRECISION_HINT bf16), timed in the same
rounds; their error against ONNX Runtime is shown, not checked.

BLAS threads: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and
BLIS_NUM_THREADS are set to --threads before numpy is imported (here and in the
worker processes, which inherit them); ONNX Runtime gets intra_op_num_threads =
--threads. The header names the BLAS kernels numpy's OpenBLAS runs (OPENBLAS_CORETYPE,
or --openblas-coretype, chooses them), and each row's "GEMM ms" is the floor that BLAS
puts under LightNet's latency (gemm_floor). Results and what they mean: docs/performance.md.

--zoo times the models bench/zoo.py exported to its cache (--cache, default
~/.cache/lightnet-zoo) instead, each on the inputs it was exported with, on the dnnl
target (--target both adds cpu): the same workers and blocks, the error of the first
output only (bench/zoo.py check compares every output, to 1e-4), no dispatch table.
A model LightNet cannot import, or whose worker fails, is listed below the table with
its error's line, and makes the exit status 1.

--quantized FILE (with --zoo and one model) times a QDQ model quantized from it (ONNX
Runtime's quantize_static, made outside the bench): LightNet's dnnl target, ONNX Runtime
and OpenVINO on FILE against ONNX Runtime on the float model, in the same rounds; the
error is LightNet's against ONNX Runtime on FILE in steps of the output's quantization
(the scale of the DequantizeLinear making it), and whether the top-1 classes agree.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="BLAS threads and ONNX Runtime intra-op threads (default: all cores)")
    p.add_argument("--models", default=None,
                   help="comma-separated subset of: vgg11, resnet50, squeezenet1.1, "
                        "mobilenetv2, shufflenet, mobilenetv3, vit_s16, or with --zoo of "
                        "the zoo's models (default: all)")
    p.add_argument("--target", choices=("dnnl", "cpu", "both"), default=None,
                   help="LightNet's target(s), each timed against ONNX Runtime (default both; "
                        "dnnl with --zoo)")
    p.add_argument("--zoo", action="store_true",
                   help="time the models bench/zoo.py exported (see --cache) instead")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="--zoo: the zoo's cache (default: bench/zoo.py's, ~/.cache/lightnet-zoo)")
    p.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                   help="bf16: also time the dnnl target in bfloat16 (dnnl-bf16), beside "
                        "float32 and ONNX Runtime (float32)")
    p.add_argument("--blocks", type=int, default=7,
                   help="timed blocks per engine and model; the median block is reported "
                        "(default 7)")
    p.add_argument("--runs", type=int, default=3,
                   help="back-to-back runs per block (default 3)")
    p.add_argument("--pause", type=float, default=0.3, metavar="SECONDS",
                   help="pause between two blocks (default 0.3)")
    p.add_argument("--profile", metavar="MODEL", default=None,
                   help="print where LightNet's time goes on MODEL, by optype, and exit")
    p.add_argument("--quiet-wait", type=float, default=0, metavar="SECONDS",
                   help="before each model, wait up to SECONDS for other processes to use "
                        "less than 10%% of the machine (a shared machine makes OpenBLAS's "
                        "threads stall; default 0: do not wait)")
    p.add_argument("--openblas-coretype", metavar="NAME", default=None,
                   help="set OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell) for LightNet's and the "
                        "GEMM measurements' OpenBLAS (default: leave the environment's choice)")
    p.add_argument("--openvino", choices=("auto", "off"), default="auto",
                   help="auto (default): also time OpenVINO's CPU plugin (ov; ov-bf16 with "
                        "--precision bf16) where the openvino package is installed")
    p.add_argument("--quantized", metavar="FILE", default=None,
                   help="a QDQ model of the one --zoo model: int8 engines against ORT float32")
    p.add_argument("--no-dispatch", action="store_true",
                   help="skip the dispatch table (--zoo always does)")
    p.add_argument("--dispatch-ops", type=int, default=1000,
                   help="length of the relu chain of the dispatch table (default 1000)")
    return p.parse_args(argv)


ARGS = _args()
if ARGS.threads < 1:
    sys.exit("run.py: --threads must be >= 1")
if ARGS.blocks < 1 or ARGS.runs < 1 or ARGS.pause < 0:
    sys.exit("run.py: --blocks and --runs must be >= 1, --pause >= 0")
TARGET = ARGS.target or ("dnnl" if ARGS.zoo else "both")
TARGETS = ("dnnl", "cpu") if TARGET == "both" else (TARGET,)
if ARGS.precision == "bf16":
    if "dnnl" not in TARGETS:
        sys.exit("run.py: --precision bf16 times the dnnl target (drop --target cpu)")
    TARGETS = ("dnnl", "dnnl-bf16", *TARGETS[1:])
# Other engines timed beside ONNX Runtime: OpenVINO where it is installed.
OTHERS = ()
if ARGS.openvino == "auto":
    try:
        import openvino  # noqa: F401

        OTHERS = ("ov", "ov-bf16") if ARGS.precision == "bf16" else ("ov",)
    except ImportError:
        pass
# The largest error against ONNX Runtime each of LightNet's engines may show.
TOLERANCE = {"dnnl": 1e-3, "cpu": 1e-3, "dnnl-bf16": 2e-2}
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)
if ARGS.openblas_coretype:
    os.environ["OPENBLAS_CORETYPE"] = ARGS.openblas_coretype

import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

for _module in ("onnx", "onnxruntime"):
    try:
        __import__(_module)
    except ImportError:
        sys.exit(f"run.py: needs {_module} (pip install -e \".[test]\" installs it)")

sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import models  # noqa: E402
import zoo  # noqa: E402

from lightnet.archs.cpu import blas  # noqa: E402

SEED = 20240611
MB = 1 << 20
ZOO_CACHE = ARGS.cache or zoo.DEFAULT_CACHE


class CpuShare:
    """How much of the machine other processes used between start() and stop():
    busy time from /proc/stat minus this process's and its waited-for children's
    CPU time, over elapsed time x cores. Shared machines make timings noisy, and
    OpenBLAS's threads suffer most (see docs/performance.md), so every row shows it."""

    HZ = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        return (user + nice + system + irq + softirq + steal) / CpuShare.HZ

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __init__(self):
        self.start()

    def start(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    def stop(self) -> float | None:
        """The others' share of all cores, 0..1 (None if /proc/stat is unreadable)."""
        busy = self._busy()
        if busy is None or self.busy0 is None:
            return None
        elapsed = (time.perf_counter() - self.t0) * (os.cpu_count() or 1)
        others = (busy - self.busy0) - (self._own() - self.own0)
        return max(0.0, others / elapsed) if elapsed > 0 else None


def wait_quiet(limit: float, below: float = 0.10) -> None:
    """Wait (up to `limit` seconds) until other processes use < `below` of all cores
    over one second."""
    end = time.perf_counter() + limit
    while True:
        share = CpuShare()
        time.sleep(1.0)
        others = share.stop()
        if others is None or others < below:
            return
        if time.perf_counter() >= end:
            print(f"  (machine still busy: others use {100 * others:.0f}%; measuring anyway)",
                  file=sys.stderr, flush=True)
            return


def gemm_rate(n: int = 1024, repeat: int = 20) -> float:
    """float32 GFLOP/s of numpy's matmul on n x n matrices (median of `repeat`)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    for _ in range(3):
        np.matmul(a, b, out=c)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t)
    return 2 * n ** 3 / float(np.median(times)) / 1e9


def prepare(name: str, d: str) -> list:
    """Write everything the workers read to `d`: model `name` as ONNX (from the zoo's
    cache with --zoo, else built by bench/models.py), LightNet's import of it and its
    inputs; returns its matrix products (models.gemms; a zoo model's from LightNet's
    import, models.ir_gemms)."""
    import onnx

    import lightnet
    from lightnet.files.model_source import command_dims
    from lightnet.frontends.onnx import convert, save_weights

    if ARGS.zoo:
        entry = zoo.read_manifest(ZOO_CACHE)[name]
        model = onnx.load(os.path.join(ZOO_CACHE, entry["file"]))
        feed = zoo.inputs_of(ZOO_CACHE, entry)
    else:
        model = models.MODELS[name](np.random.default_rng(SEED))
        x = np.random.default_rng(SEED + 1).standard_normal((1, 3, 224, 224))
        feed = {"data": x.astype(np.float32)}
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    ir, weights = convert(model)
    with open(os.path.join(d, "model.json"), "w") as f:
        json.dump(ir, f)
    save_weights(os.path.join(d, "model.npz"), weights)
    np.savez(os.path.join(d, "inputs.npz"), **feed)
    if not ARGS.zoo:
        return models.gemms(model)
    ctx = lightnet.Context()
    ctx.init(ir, dims=command_dims(ir, name, shapes={n: x.shape for n, x in feed.items()}))
    return models.ir_gemms(ctx)


def gemm_floor(products, repeat: int = 10) -> float:
    """Seconds numpy's matmul takes for all of a model's matrix products (models.gemms),
    run back to back (median of `repeat` rounds): each with weights of its own, the
    columns and the result in two shared buffers (as activations share an arena, so
    they stay in cache). No engine whose arithmetic is numpy's BLAS runs the model
    faster: this is LightNet's floor, before any im2col, bias, activation or pooling."""
    rng = np.random.default_rng(0)
    cols = rng.standard_normal(max(b * k * n for b, _, k, n in products), dtype=np.float32)
    out = np.empty(max(b * m * n for b, m, _, n in products), np.float32)
    calls = [(rng.standard_normal((b, m, k), dtype=np.float32),
              cols[:b * k * n].reshape(b, k, n), out[:b * m * n].reshape(b, m, n))
             for b, m, k, n in products]
    times = []
    for _ in range(repeat + 2):
        t = time.perf_counter()
        for a, b, c in calls:
            np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


class Worker:
    """An engine in its own process (bench/worker.py), set up and waiting for commands."""

    def __init__(self, engine: str, d: str):
        """`engine`: ort, or ours:TARGET."""
        cmd = [sys.executable, os.path.join(HERE, "worker.py"), engine, d, str(ARGS.threads)]
        self.engine = engine
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        self.info = self._reply()

    def _reply(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            tail = self.proc.stderr.read()[-3000:]
            print(tail, file=sys.stderr, flush=True)
            last = (tail.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"the {self.engine} worker failed: {last}")
        return json.loads(line)

    def ask(self, command: str):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=60)


def measure(d: str, engines=None) -> dict[str, dict]:
    """Set the engines up (one at a time, each measuring its own memory: LightNet for
    each target, then ONNX Runtime), then time them in turns: a warm-up block each,
    then --blocks rounds of one block of --runs runs each, --pause between blocks.
    `engines`: (label, engine, directory) of each (default: every engine on `d`).
    Returns each engine's info by label with its block times (seconds per run) and
    median."""
    if engines is None:
        engines = [(e, e, d) for e in [f"ours:{t}" for t in TARGETS] + ["ort", *OTHERS]]
    workers = {}
    try:
        for label, engine, where in engines:
            workers[label] = Worker(engine, where)
        blocks = {label: [] for label in workers}
        for round_ in range(ARGS.blocks + 1):
            for label, w in workers.items():
                times = w.ask(f"run {ARGS.runs}")
                if round_:  # the first round warms up
                    blocks[label].append(sum(times) / len(times))
                time.sleep(ARGS.pause)
        for w in workers.values():
            w.ask("save")
    finally:
        for w in workers.values():
            w.close()
    return {label: {**w.info, "times": blocks[label],
                    "latency": float(np.median(blocks[label])),
                    "quartile": float(np.percentile(blocks[label], 25))}
            for label, w in workers.items()}


def paired(mine: dict, ort: dict) -> float:
    """The median over rounds of the ratio of two engines' blocks in the same round: the
    machine's slow spells (a neighbour on the host) hit both blocks of a round alike."""
    return float(np.median(np.array(mine["times"]) / np.array(ort["times"])))


def output_step(model) -> float | None:
    """The quantization step of a QDQ model's first output: the scale of the
    DequantizeLinear making it (None: another node makes it)."""
    from onnx import numpy_helper

    consts = {t.name: t for t in model.graph.initializer}
    out = model.graph.output[0].name
    node = next((n for n in model.graph.node if out in n.output), None)
    if node is None or node.op_type != "DequantizeLinear" or node.input[1] not in consts:
        return None
    return float(numpy_helper.to_array(consts[node.input[1]]).reshape(-1)[0])


def bench_quantized(name: str, path: str) -> None:
    """Time LightNet's dnnl target, ONNX Runtime and OpenVINO on the QDQ model `path`
    of zoo model `name` against ONNX Runtime on the float model (--quantized)."""
    import onnx

    from lightnet.frontends.onnx import convert, save_weights

    with tempfile.TemporaryDirectory(prefix=f"lnbench-{name}-") as d, \
            tempfile.TemporaryDirectory(prefix=f"lnbench-{name}-int8-") as dq:
        prepare(name, d)
        model = onnx.load(path)
        with open(os.path.join(dq, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        ir, weights = convert(model)
        with open(os.path.join(dq, "model.json"), "w") as f:
            json.dump(ir, f)
        save_weights(os.path.join(dq, "model.npz"), weights)
        shutil.copy(os.path.join(d, "inputs.npz"), os.path.join(dq, "inputs.npz"))
        engines = [("ours:dnnl int8", "ours:dnnl", dq), ("ort int8", "ort", dq),
                   ("ort float32", "ort", d)] + [(f"{e} int8", e, dq) for e in OTHERS]
        if ARGS.quiet_wait > 0:
            wait_quiet(ARGS.quiet_wait)
        results = measure(d, engines)
        ref = np.load(os.path.join(dq, "out_ort.npy"))
        ours = np.load(os.path.join(dq, "out_ours-dnnl.npy")).reshape(ref.shape)
        step = output_step(model)
    base = results["ort float32"]["latency"]
    rows = [(label, f"{r['latency'] * 1e3:.1f}", f"{r['latency'] / base:.2f}")
            for label, r in results.items()]
    _print_table(("engine", "ms", "x ort float32"), rows)
    diff = float(np.max(np.abs(ours.astype(np.float64) - ref)))
    steps = f"{diff / step:.1f} steps of {step:.4g}" if step else "no output step"
    print(f"\n{name}: LightNet dnnl int8 against ORT int8 on {path}: max |diff| {diff:.4g} "
          f"({steps}); top-1 {'agrees' if ours.argmax() == ref.argmax() else 'differs'}")
    print(results["ours:dnnl int8"].get("kernels", ""))


def rel_error(ours: np.ndarray, ref: np.ndarray) -> float:
    ours = ours.reshape(ref.shape).astype(np.float64)
    ref = ref.astype(np.float64)
    if not (np.all(np.isfinite(ours)) and np.all(np.isfinite(ref))):
        return math.inf
    return float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))


def bench_models(names) -> tuple[list[dict], list[str]]:
    """The rows of the models measured, and a line for each model that could not be
    (LightNet refused it, or a worker failed)."""
    rows, failed = [], []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"lnbench-{name}-") as d:
            t = time.perf_counter()
            try:
                products = prepare(name, d)
                if ARGS.quiet_wait > 0:
                    wait_quiet(ARGS.quiet_wait)
                share = CpuShare()
                results = measure(d)
            except Exception as e:  # noqa: BLE001 - a line below the table, then the next model
                failed.append(f"{name}: {zoo.one_line(e)}")
                print(f"  {failed[-1]}", file=sys.stderr, flush=True)
                continue
            floor = gemm_floor(products)
            others = share.stop()
            ref = np.load(os.path.join(d, "out_ort.npy"))
            errs = {tg: rel_error(np.load(os.path.join(d, f"out_ours-{tg}.npy")), ref)
                    for tg in TARGETS}
            other_errs = {e: rel_error(np.load(os.path.join(d, f"out_{e}.npy")), ref)
                          for e in OTHERS}
        row = {"model": name, "gflops": models.gflops(products), "ort": results["ort"],
               "ours": {tg: results[f"ours:{tg}"] for tg in TARGETS}, "err": errs,
               "others": {e: {**results[e], "err": other_errs[e]} for e in OTHERS},
               "floor": floor, "ok": all(e <= TOLERANCE[tg] for tg, e in errs.items()),
               "wall": time.perf_counter() - t, "others_cpu": others}
        rows.append(row)
        mine = ", ".join(f"{tg} {row['ours'][tg]['latency'] * 1e3:.1f} ms (err {errs[tg]:.1e})"
                         for tg in TARGETS)
        theirs = "".join(f", {e} {row['others'][e]['latency'] * 1e3:.1f} ms" for e in OTHERS)
        print(f"  {name}: {mine}, ort {row['ort']['latency'] * 1e3:.1f} ms{theirs} "
              f"({row['wall']:.0f} s)", file=sys.stderr, flush=True)
    return rows, failed


def print_model_table(rows, gemm: float, gemm_end: float) -> None:
    head = ["model", "GFLOP", "ORT ms"]
    for tg in (*TARGETS, *OTHERS):
        head += [f"{tg} ms", f"{tg} / ORT", f"{tg} / ORT paired", f"{tg} / ORT q1"]
    head += ["ORT GF/s", *(f"{tg} GF/s" for tg in TARGETS), "GEMM ms"]
    head += [*(f"{tg} arena MB" for tg in TARGETS), *(f"{tg} +ws MB" for tg in TARGETS),
             *(f"{tg} peak MB" for tg in TARGETS), "ORT peak MB",
             *(f"{tg} rel err" for tg in (*TARGETS, *OTHERS)), "check", "others' CPU"]
    table = []
    for r in rows:
        t = r["ort"]
        cells = [r["model"], f"{r['gflops']:.2f}", f"{t['latency'] * 1e3:.1f}"]
        for o in (*(r["ours"][tg] for tg in TARGETS), *(r["others"][e] for e in OTHERS)):
            cells += [f"{o['latency'] * 1e3:.1f}", f"{o['latency'] / t['latency']:.2f}",
                      f"{paired(o, t):.2f}", f"{o['quartile'] / t['quartile']:.2f}"]
        cells += [f"{r['gflops'] / t['latency']:.1f}",
                  *(f"{r['gflops'] / r['ours'][tg]['latency']:.1f}" for tg in TARGETS),
                  f"{r['floor'] * 1e3:.1f}"]
        cells += [*(f"{r['ours'][tg]['arena'] / MB:.1f}" for tg in TARGETS),
                  *(f"{r['ours'][tg]['outside_arena'] / MB:.1f}" for tg in TARGETS),
                  *(f"{r['ours'][tg]['peak_growth'] / MB:.1f}" for tg in TARGETS),
                  f"{t['peak_growth'] / MB:.1f}",
                  *(f"{r['err'][tg]:.1e}" for tg in TARGETS),
                  *(f"{r['others'][e]['err']:.1e}" for e in OTHERS), "ok" if r["ok"] else "FAIL",
                  "?" if r["others_cpu"] is None else f"{100 * r['others_cpu']:.0f}%"]
        table.append(cells)
    _print_table(head, table)
    for tg in (*TARGETS, *OTHERS):
        engine = [(r["ours"] if tg in TARGETS else r["others"])[tg] for r in rows]
        ratios = [o["latency"] / r["ort"]["latency"] for o, r in zip(engine, rows)]
        pairs = [paired(o, r["ort"]) for o, r in zip(engine, rows)]
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            geo_paired = math.exp(sum(math.log(x) for x in pairs) / len(pairs))
            print(f"\n{tg}: geometric mean latency ratio ({tg} / ORT): {geo:.2f} (paired "
                  f"{geo_paired:.2f}); worst: {max(ratios):.2f} (paired {max(pairs):.2f})",
                  end="")
    print()
    print(f"float32 GEMM rate (numpy matmul 1024x1024, {ARGS.threads} threads): {gemm:.1f} "
          f"GFLOP/s before the models, {gemm_end:.1f} after (a drop means the machine slowed)")
    print("ms: the median of each engine's blocks of back-to-back runs; / ORT: the ratio of"
          " the medians; paired: the median over rounds of the ratio of the two engines'"
          " blocks in the same round; q1: the ratio of the engines' lower quartiles of"
          " blocks (a slow spell of the machine only adds time). GEMM ms: the model's"
          " convolutions and matmuls as bare numpy matmul calls (weights times im2col columns,"
          " depthwise as matrix-vector products), back to back on warm operands: the floor"
          " for the cpu target's latency with this BLAS.")
    print("arena MB: LightNet's planned arena (activations, scratch and, on dnnl, the weights"
          " reordered into oneDNN's layouts) plus its weights (compiled with them, so"
          " batchnorms are folded); +ws MB: arrays its ops keep besides those (padded copies,"
          " lrelu/softmax/resampling buffers and tables); peak MB: growth"
          " of the process's peak RSS over creating the model and running it once; others'"
          " CPU: share of all cores that other processes used while the row was measured.")


def _print_table(head, rows) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        str(c).ljust(w) if i == 0 else str(c).rjust(w)
        for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":"
                         for i, w in enumerate(widths)) + "|")
    for r in rows:
        print(line(r))


def bench_dispatch(n: int) -> None:
    """Per-op cost of a chain of n relu ops on a [1, 16] tensor, for each target."""
    import onnxruntime as ort

    import lightnet
    from lightnet.frontends.onnx import convert

    model = models.relu_chain(n)
    ir, _ = convert(model)
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = ARGS.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    feed = {"x": x}

    def theirs():
        sess.run(None, feed)

    def per_op(fn, reps=200):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return float(np.median(times)) / n * 1e6

    theirs()
    rows = []
    for target in [t for t in TARGETS if t != "dnnl-bf16"]:
        ctx = lightnet.Context(threads=ARGS.threads)
        ctx.init(ir)
        ctx.compile(target)
        ctx.load()
        (name,) = ctx.inputs

        def ours():
            ctx.set_data(name, x)
            ctx.run()

        ours()
        if not np.allclose(ctx.get_data(ctx.outputs[0]), sess.run(None, feed)[0]):
            print(f"dispatch chain ({target}): outputs differ: FAIL")
        rows.append((f"LightNet {target} ({len(ctx._runs)} ops)", f"{per_op(ours):.2f}"))
    rows.append(("ONNX Runtime", f"{per_op(theirs):.2f}"))
    print(f"\ndispatch: a chain of {n} relu ops on a float32 [1, 16] tensor, median of 200 "
          "runs")
    _print_table(("engine", "us / op"), rows)


def profile(name: str) -> None:
    """LightNet's time per optype on one model (Context.profile)."""
    import lightnet
    from lightnet.frontends.onnx import convert, save_weights

    model = models.MODELS[name](np.random.default_rng(SEED))
    ir, weights = convert(model)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.npz")
        save_weights(path, weights)
        ctx = lightnet.Context(threads=ARGS.threads)
        ctx.init(ir)
        ctx.compile(TARGETS[0], weights=path)
        ctx.load()
    x = np.random.default_rng(SEED + 1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    ctx.set_data(ctx.inputs[0], x)
    ctx.run()
    ctx.run()
    repeat = ARGS.blocks * ARGS.runs
    t = time.perf_counter()
    for _ in range(repeat):
        ctx.run()
    wall = (time.perf_counter() - t) / repeat
    prof = ctx.profile(repeat)
    total = sum(s for _, s in prof)

    by_type: dict[str, list] = {}
    by_kind: dict[str, list] = {}
    for op, s in prof:
        by_type.setdefault(op.optype, [0, 0.0])
        by_type[op.optype][0] += 1
        by_type[op.optype][1] += s
        if op.optype == "conv2d_cpu":
            kind = conv_kind(ctx, op)
            by_kind.setdefault(kind, [0, 0.0])
            by_kind[kind][0] += 1
            by_kind[kind][1] += s
    print(f"{name} on {TARGETS[0]}: {len(prof)} ops, {wall * 1e3:.1f} ms per run (profiled sum "
          f"{total * 1e3:.1f} ms), {repeat} runs; {blas.describe()}\n")
    rows = [(k, n, f"{s * 1e3:.2f}", f"{100 * s / total:.1f}", f"{s / n * 1e6:.0f}")
            for k, (n, s) in sorted(by_type.items(), key=lambda kv: -kv[1][1])]
    _print_table(("optype", "ops", "ms", "%", "us / op"), rows)
    if by_kind:
        print()
        rows = [(k, n, f"{s * 1e3:.2f}", f"{100 * s / total:.1f}")
                for k, (n, s) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])]
        _print_table(("conv2d_cpu kind", "ops", "ms", "%"), rows)
    print("\nslowest ops:")
    rows = [(op.name, op.optype, conv_kind(ctx, op) if op.optype == "conv2d_cpu" else "",
             f"{s * 1e3:.2f}") for op, s in sorted(prof, key=lambda p: -p[1])[:10]]
    _print_table(("op", "optype", "kind", "ms"), rows)


def conv_kind(ctx, op) -> str:
    w = ctx.tensors[op.tensors_in["weight"]].shape
    src = ctx.tensors[op.tensors_in["src"]].shape
    group = op.values["group"]
    k = f"{w[2]}x{w[3]}"
    s = "/s" + str(op.values["stride"][0]) if op.values["stride"][0] != 1 else ""
    if group == src[1] and group > 1:
        return f"depthwise {k}{s}"
    if group > 1:
        return f"grouped {k}{s}"
    return f"dense {k}{s}"


def main() -> None:
    if ARGS.zoo:
        if ARGS.profile:
            sys.exit("run.py: --profile takes a built-in model (leave out --zoo)")
        try:
            known = list(zoo.read_manifest(ZOO_CACHE))
        except FileNotFoundError as e:
            sys.exit(f"run.py: {e}")
    else:
        known = list(models.MODELS)
    names = known
    if ARGS.profile:
        if ARGS.profile not in models.MODELS:
            sys.exit(f"run.py: unknown model {ARGS.profile!r} (known: {', '.join(names)})")
        profile(ARGS.profile)
        return
    if ARGS.models:
        names = [n.strip() for n in ARGS.models.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown:
            sys.exit(f"run.py: unknown models {unknown} (known: {', '.join(known)})")
    if ARGS.quantized:
        if not ARGS.zoo or len(names) != 1:
            sys.exit("run.py: --quantized takes --zoo and one model (--models NAME)")
        print(f"threads: --threads {ARGS.threads}; median of {ARGS.blocks} blocks of "
              f"{ARGS.runs} runs, {ARGS.pause} s apart")
        bench_quantized(names[0], ARGS.quantized)
        return
    import onnxruntime

    start = time.perf_counter()
    share = CpuShare()
    if ARGS.quiet_wait > 0:
        wait_quiet(ARGS.quiet_wait)
    gemm = gemm_rate()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; python "
          f"{platform.python_version()}, numpy {np.__version__}, onnxruntime "
          f"{onnxruntime.__version__}")
    print(blas.describe())
    if "dnnl" in TARGETS:
        from lightnet.compiler import targets

        print(next(line for line in targets.describe() if line.startswith("dnnl:")))
    if OTHERS:
        import openvino

        print(f"OpenVINO {openvino.__version__} (CPU plugin, latency hint, one stream): "
              f"{', '.join(OTHERS)}")
    print(f"OPENBLAS_CORETYPE: {os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"threads: --threads {ARGS.threads} (OMP/OPENBLAS/MKL_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}; ORT intra_op_num_threads={ARGS.threads}, "
          f"oneDNN's OpenMP threads {ARGS.threads}); targets {', '.join(TARGETS)}; median of "
          f"{ARGS.blocks} blocks of {ARGS.runs} runs, {ARGS.pause} s apart\n")
    if ARGS.zoo:
        print(f"zoo: {ZOO_CACHE}, {len(names)} models\n")
    rows, failed = bench_models(names)
    kernels = {f"{r['model']} ({tg})": r["ours"][tg].get("kernels") for r in rows
               for tg in ("dnnl", "dnnl-bf16") if tg in r["ours"]}
    gemm_end = gemm_rate()
    print_model_table(rows, gemm, gemm_end)
    for model, line in kernels.items():
        print(f"{model}: {line}")
    if failed:
        print("\nnot timed:\n" + "\n".join(failed))
    if not ARGS.no_dispatch and not ARGS.zoo:
        if ARGS.quiet_wait > 0:
            wait_quiet(ARGS.quiet_wait)
        bench_dispatch(ARGS.dispatch_ops)
    others = share.stop()
    print(f"\ntotal bench time: {time.perf_counter() - start:.0f} s; other processes used "
          f"{'?' if others is None else f'{100 * others:.0f}%'} of the machine meanwhile; "
          f"load average now {os.getloadavg()[0]:.2f}")
    if failed or not all(r["ok"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
