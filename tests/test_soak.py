"""A server-style soak (slow: `python -m pytest -m slow tests/test_soak.py`):
in one fresh process, 10,000 runs of a small model's Session, 1,000 runs of
SqueezeNet 1.1's, then 200 Sessions made, run and dropped. After each warm-up,
resident memory grows by less than 1 MB and no file handle or thread is left
behind. The soak runs in a child process (this file run as a script), so what
the test runner itself allocates meanwhile is not counted. The last figures
are in docs/performance.md, "Long runs".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

from lightnet import Session
from tests.irbuild import ModelBuilder, squeezenet

MB = 1 << 20


def resident_bytes() -> int:
    """Resident memory, after handing the allocator's free pages back (glibc's
    malloc_trim): what the process holds, not what malloc keeps cached."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc is not None and hasattr(ctypes.CDLL(libc), "malloc_trim"):
        ctypes.CDLL(libc).malloc_trim(0)
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def state() -> dict:
    return {"rss": resident_bytes(), "files": len(os.listdir("/proc/self/fd")),
            "os_threads": len(os.listdir("/proc/self/task")),
            "threads": threading.active_count()}


def small_model() -> dict:
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("x", [1, 3, 16, 16]), 3, 8, 3, pad=1))
    m.op("softmax", {"src": m.maxpool(x, 2, 2)}, axis=1)
    return m.to_dict()


def bench_model() -> dict:
    """SqueezeNet 1.1 at 224 x 224, as bench/ runs it."""
    m = ModelBuilder()
    squeezenet(m, m.input("data", [1, 3, 224, 224]))
    return m.to_dict()


def soak(step, runs: int, warmup: int) -> dict:
    """Run `step` `warmup` times, then `runs` times; what grew in between."""
    for _ in range(warmup):
        step()
    before = state()
    for _ in range(runs):
        step()
    after = state()
    return {key: after[key] - before[key] for key in before}


def runs_of_one_session(model: dict, runs: int, warmup: int) -> dict:
    session = Session(model)
    info = session.inputs[0]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(info.shape).astype(np.float32) for _ in range(4)]
    first = session.run({info.name: inputs[0]})
    count = [0]

    def step():
        session.run({info.name: inputs[count[0] % 4]})
        count[0] += 1

    growth = soak(step, runs, warmup)
    again = session.run({info.name: inputs[0]})
    growth["same_outputs"] = all(np.array_equal(again[n], first[n]) for n in first)
    return growth


def sessions_created_and_dropped(model: dict, count: int, warmup: int) -> dict:
    x = np.zeros((1, 3, 16, 16), np.float32)
    dropped = []

    def step():
        session = Session(model)
        session.run({"x": x})
        dropped.append(weakref.ref(session))

    growth = soak(step, count, warmup)
    gc.collect()
    growth["all_freed"] = all(ref() is None for ref in dropped)
    return growth


def soak_all() -> dict:
    return {"small model, 10000 runs": runs_of_one_session(small_model(), 10_000, 500),
            "squeezenet 1.1, 1000 runs": runs_of_one_session(bench_model(), 1_000, 100),
            "200 sessions": sessions_created_and_dropped(small_model(), 200, 100)}


@pytest.mark.slow
def test_soak():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-m", "tests.test_soak"], capture_output=True,
                            text=True, cwd=root, timeout=3600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    print(json.dumps(report, indent=1))
    assert len(report) == 3
    for name, growth in report.items():
        assert growth["rss"] < MB, f"{name}: resident memory grew by {growth['rss']} bytes"
        assert growth["files"] <= 0 and growth["os_threads"] <= 0 and growth["threads"] <= 0, \
            f"{name}: {growth}"
        assert growth.get("same_outputs", True) and growth.get("all_freed", True), \
            f"{name}: {growth}"


if __name__ == "__main__":
    print(json.dumps(soak_all()))
