"""`lightnet bench MODEL`: the latency of one run of a compiled, loaded model.

The inputs are those `--input` gives, else of each input's dtype and shape:
floats random, uniform in [0, 1) (seeded, so every bench runs on the same
data), integers and bools zeros, which every index input accepts (a token id,
a mask). `--shape NAME=D1,D2,...` and `--batch` give a model's symbolic dims
their values (the shape of an `--input` too; any other is 1). The output says
which inputs are random, zeros or given. After the warm-up runs, each timed run
is one `Context.run()`: the model's ops, without copying inputs in or outputs
out. What print ops print is discarded while they run.
"""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np

from lightnet.archs.registry import archs, threads_set
from lightnet.cli import arrays
from lightnet.cli.run import kernel_lines
from lightnet.compiler import targets
from lightnet.files import model_source
from lightnet.runtime.context import Context


def default_input(entry, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """(array, how it was made) of an input no --input gives: floats random in
    [0, 1), anything else zeros (in range for any index or mask)."""
    dtype = entry.dtype.np
    if dtype.kind == "f":
        return rng.random(entry.shape, dtype=dtype), "random"
    return np.zeros(entry.shape, dtype), "zeros"


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
    doc, label, weights = model_source.read(args.model, args.datafile, ctx.fold_limit)
    names = model_source.input_names(doc)
    shapes = {**arrays.input_shapes(args.inputs, names), **dict(args.shapes)}
    ctx.init(doc, dims=model_source.command_dims(doc, label, args.batch, shapes,
                                                      strict=dict(args.shapes)),
             label=label)
    fed = arrays.read_fed(args.inputs, ctx)
    ctx.compile(args.target, weights=weights if weights is not None else {},
                precision=args.precision)
    ctx.load()
    rng = np.random.default_rng(0)
    entries = [ctx.tensors[n] for n in ctx.inputs]
    how = {}
    for entry in entries:
        array, how[entry.name] = ((fed[entry.name], "given") if entry.name in fed
                                  else default_input(entry, rng))
        ctx.set_data(entry.name, array)
    with threads_set(args.threads):  # what the runs see
        threads = next(n for a in archs().values() if (n := a.thread_count()) is not None)
        kernels = kernel_lines(ctx.ops)
    print(f"model: {ctx.label}", file=out)
    print(f"target: {targets.resolve(args.target)}", file=out)
    inputs = ", ".join(f"{e.name} {e.describe()} ({how[e.name]})" for e in entries)
    print(f"inputs: {inputs}" if inputs else "inputs: none", file=out)
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
