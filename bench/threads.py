"""Throughput of concurrent runs (not part of the unit tests).

    python bench/threads.py                      # squeezenet1.1, 1, 2 and 4 threads
    python bench/threads.py --model resnet50 --blas-threads 1 --seconds 10

Each of N Python threads runs the model back to back for --seconds; the figure
is completed runs per second over all threads. Two set-ups:

- shared: one Session for every thread. Its context serializes runs (one set of
  buffers: see docs/runtime.md, "Concurrency").
- own: one Session per thread, so runs overlap: the most per-call arenas from a
  pool could give, at the cost of one arena (and one static_run) per thread.

BLAS threads are set (OPENBLAS_NUM_THREADS etc.) before numpy is imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--model", default="squeezenet11",
                  help="a builder of bench/models.py (default squeezenet11)")
ARGS.add_argument("--threads", default="1,2,4", help="Python thread counts (default 1,2,4)")
ARGS.add_argument("--blas-threads", type=int, default=os.cpu_count() or 1,
                  help="BLAS threads for the process (default: all cores)")
ARGS.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
ARGS = ARGS.parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[var] = str(ARGS.blas_threads)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import models  # noqa: E402
from lightnet import Session  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402


def throughput(sessions, x, seconds: float) -> float:
    """Runs per second with one thread per entry of `sessions` (entries may repeat)."""
    counts = [0] * len(sessions)
    stop = time.perf_counter() + seconds

    def work(k):
        feeds = {sessions[k].inputs[0].name: x}
        while time.perf_counter() < stop:
            sessions[k].run(feeds)
            counts[k] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def main() -> None:
    ir, weights = convert(getattr(models, ARGS.model)(np.random.default_rng(0)))
    counts = [int(n) for n in ARGS.threads.split(",")]
    own = [Session(ir, datafile=weights) for _ in range(max(counts))]
    x = np.random.default_rng(1).standard_normal(own[0].inputs[0].shape).astype(np.float32)
    own[0].run({own[0].inputs[0].name: x})  # warm up
    print(f"{ARGS.model}, BLAS threads {ARGS.blas_threads}, {os.cpu_count()} cores: runs/s")
    print(f"{'threads':>8} {'shared':>8} {'own':>8}")
    for n in counts:
        shared = throughput([own[0]] * n, x, ARGS.seconds)
        mine = throughput(own[:n], x, ARGS.seconds)
        print(f"{n:>8} {shared:>8.1f} {mine:>8.1f}")


if __name__ == "__main__":
    main()
