"""Concurrent runs: one Session (or Context) shared by several threads gives,
bit for bit, the outputs of sequential runs of the same inputs
(docs/runtime.md, "Concurrency"). Without the context's lock these runs share
one arena and return wrong outputs (on the light SqueezeNet, most of 120)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx
import pytest

from lightnet import Context, Session
from tests.irbuild import ModelBuilder

LIGHT_SQUEEZENET = (Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
                    / "light_squeezenet.onnx")
THREADS, RUNS = 4, 30


def residual_cnn() -> dict:
    """Conv, batchnorm, relu, two residual blocks, a pool: every buffer of it reused."""
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("x", [1, 3, 32, 32]), 3, 16, 3, pad=1))
    for _ in range(2):
        y = m.relu(m.batchnorm(m.conv(x, 16, 16, 3, pad=1), 16))
        x = m.relu(m.add(m.conv(y, 16, 16, 3, pad=1), x))
    m.maxpool(x, 2, 2)
    return m.to_dict()


def hammer(run, inputs) -> list:
    """Each of THREADS threads runs its own input RUNS times; the outputs, by thread."""
    results = [[] for _ in inputs]
    errors = []
    start = threading.Barrier(len(inputs))

    def work(k):
        try:
            start.wait()
            for _ in range(RUNS):
                results[k].append(run(inputs[k]))
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def check_session(session: Session) -> None:
    info = session.inputs[0]
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(info.shape).astype(info.dtype) for _ in range(THREADS)]
    expected = [session.run({info.name: x}) for x in inputs]  # sequential
    results = hammer(lambda x: session.run({info.name: x}), inputs)
    wrong = sum(any(not np.array_equal(out[n], expected[k][n]) for n in expected[k])
                for k, outs in enumerate(results) for out in outs)
    assert wrong == 0, f"{wrong} of {THREADS * RUNS} concurrent runs differ from sequential runs"


def test_shared_session_light_squeezenet():
    pytest.importorskip("onnx")
    from lightnet.frontends.onnx import convert
    ir, weights = convert(LIGHT_SQUEEZENET)
    check_session(Session(ir, datafile=weights))


def test_shared_session_residual_cnn():
    check_session(Session(residual_cnn()))


def test_shared_context_with_its_lock():
    """set_data, run, get_data on a shared Context: each call is atomic; the
    sequence is when the thread holds ctx.lock around it."""
    ctx = Context()
    ctx.init(residual_cnn())
    ctx.compile("cpu")
    ctx.load()
    out = ctx.outputs[0]
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(THREADS)]
    expected = []
    for x in inputs:
        ctx.set_data("x", x)
        ctx.run()
        expected.append(ctx.get_data(out))

    def run(x):
        with ctx.lock:
            ctx.set_data("x", x)
            ctx.run()
            return ctx.get_data(out)

    results = hammer(run, inputs)
    for k, outs in enumerate(results):
        for got in outs:
            np.testing.assert_array_equal(got, expected[k])


def test_reload_waits_for_a_running_run():
    """load() from another thread while runs go on: each run sees one whole set
    of buffers, before or after the reload, never a mix."""
    session = Session(residual_cnn())
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    expected = session.run({"x": x})
    stop = threading.Event()

    def reload():
        while not stop.is_set():
            session.ctx.load()

    reloader = threading.Thread(target=reload)
    reloader.start()
    try:
        results = hammer(lambda x: session.run({"x": x}), [x] * 2)
    finally:
        stop.set()
        reloader.join()
    for outs in results:
        for got in outs:
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name])
