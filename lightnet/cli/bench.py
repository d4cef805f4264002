"""`lightnet bench MODEL`: the latency of one run of a compiled, loaded model.

The inputs are random, of each input's dtype and shape (floats uniform in
[0, 1), integers 0 or 1, so that index inputs stay in range; seeded, so every
bench runs on the same data), set once. After the warm-up runs, each timed run
is one `Context.run()`: the model's ops, without copying inputs in or outputs
out. What print ops print is discarded while they run.
"""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np

from lightnet.archs.registry import archs, threads_set
from lightnet.cli.run import kernel_lines
from lightnet.compiler import targets
from lightnet.files import model_source
from lightnet.runtime.context import Context


def random_input(entry, rng: np.random.Generator) -> np.ndarray:
    dtype = entry.dtype.np
    if dtype.kind == "f":
        return rng.random(entry.shape, dtype=dtype)
    return rng.integers(0, 2, entry.shape).astype(dtype)


def measure(ctx: Context, warmup: int, runs: int | None, duration: float) -> list[float]:
    """Seconds of each timed run: `runs` of them, or (None) as many as start
    within `duration` seconds (at least one)."""
    clock = time.perf_counter
    times: list[float] = []
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(warmup):
            ctx.run()
        deadline = clock() + duration
        while (len(times) < runs) if runs is not None else (not times or clock() < deadline):
            start = clock()
            ctx.run()
            times.append(clock() - start)
    return times


def statistics(times: list[float]) -> dict[str, float]:
    """min, median, p90, p99 and mean latency in seconds, and runs per second."""
    t = np.asarray(times)
    median, p90, p99 = np.percentile(t, [50, 90, 99])
    return {"min": float(t.min()), "median": float(median), "p90": float(p90),
            "p99": float(p99), "mean": float(t.mean()), "throughput": len(t) / float(t.sum())}


def bench(args, out) -> None:
    ctx = Context(memory_limit=args.memory_limit, threads=args.threads,
                  fold_limit=args.fold_limit)
    weights = model_source.init(ctx, args.model, args.datafile, batch=args.batch)
    ctx.compile(args.target, weights=weights if weights is not None else {},
                precision=args.precision)
    ctx.load()
    rng = np.random.default_rng(0)
    entries = [ctx.tensors[n] for n in ctx.inputs]
    for entry in entries:
        ctx.set_data(entry.name, random_input(entry, rng))
    with threads_set(args.threads):  # what the runs see
        threads = next(n for a in archs().values() if (n := a.thread_count()) is not None)
        kernels = kernel_lines(ctx.ops)
    print(f"model: {ctx.label}", file=out)
    print(f"target: {targets.resolve(args.target)}", file=out)
    inputs = ", ".join(f"{e.name} {e.describe()}" for e in entries)
    print(f"inputs: {inputs} (random)" if inputs else "inputs: none", file=out)
    print(f"threads: {threads}", file=out)
    for line in kernels:
        print(f"kernels: {line}", file=out)
    out.flush()
    start = time.perf_counter()
    times = measure(ctx, args.warmup, args.runs, args.duration)
    wall = time.perf_counter() - start
    s = statistics(times)
    print(f"runs: {args.warmup} warm-up, {len(times)} timed ({wall:.3f} s in all)", file=out)
    print("latency: " + ", ".join(f"{k} {s[k] * 1e3:.3f} ms"
                                  for k in ("min", "median", "p90", "p99", "mean")), file=out)
    batches = {e.shape[0] for e in entries}
    line = f"throughput: {s['throughput']:.2f} runs/s"
    if len(batches) == 1 and (batch := batches.pop()) > 1:
        line += f", {s['throughput'] * batch:.2f} samples/s (batch {batch})"
    print(line, file=out)
