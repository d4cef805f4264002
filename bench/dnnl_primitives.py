"""The bench models through lightnet.archs.dnnl.primitives vs ONNX Runtime (not a test).

    python bench/dnnl_primitives.py                      # resnet50, mobilenetv2, squeezenet1.1
    python bench/dnnl_primitives.py --models resnet50 --threads 1 --blocks 9

What the dnnl architecture's kernels can reach before any op description uses them:
each model of bench/models.py (the graph ONNX Runtime runs) is walked node by node
and turned into oneDNN primitives the way the dnnl layout and fusion rules are meant
to: batchnorm folded into the convolution's weights, Relu / Clip as eltwise
post-ops, a residual Add as a `sum` post-op of the later of its two producers
(written in place into the other's buffer), activations in the layout oneDNN
chooses (`any` at the first convolution, each producer's layout after it, unless
no fast implementation reads it: then `any` and a reorder in between), weights
reordered once, one buffer per tensor and one shared scratchpad. The input is
reordered in and the output out on every run, as the runtime's border reorders will.

Both engines run in this process at --threads threads, timed in blocks of --runs
back-to-back runs, the engines alternating block by block with a pause between
blocks; the table gives each engine's median block (ms per run) and the ratio
dnnl / ORT (< 1: faster than ONNX Runtime). Outputs must agree to 1e-3.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import models  # noqa: E402

from lightnet.archs.cpu.kernels import fold_batchnorm_conv  # noqa: E402
from lightnet.archs.dnnl import capi  # noqa: E402
from lightnet.archs.dnnl import primitives as P  # noqa: E402

SEED = 20240611
DEFAULT_MODELS = ("resnet50", "mobilenetv2", "squeezenet1.1")


class Net:
    """One model as a list of bound primitives over one buffer per tensor."""

    def __init__(self, model):
        graph = model.graph
        self.consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        self.nodes = list(graph.node)
        self.producer = {out: n for n in self.nodes for out in n.output}
        self.readers = collections.defaultdict(list)
        for index, n in enumerate(self.nodes):
            for name in n.input:
                self.readers[name].append(index)
        self.descs: dict[str, capi.MemoryDesc] = {}
        self.buffers: dict[str, np.ndarray] = {}
        self.alias: dict[str, str] = {}  # a tensor that lives in another's buffer
        self.steps: list = []  # (kernel, tensor name -> buffer name)
        self.kernels: list[P.Kernel] = []
        self.input_name = graph.input[0].name
        self.output_name = graph.output[0].name
        self._build()

    # Graph helpers ---------------------------------------------------------------------

    def _only_reader(self, name: str, index: int):
        """The node reading `name` if it is the only reader (and comes after `index`)."""
        readers = self.readers[name]
        if len(readers) == 1 and readers[0] > index and name != self.output_name:
            return readers[0]
        return None

    def _attrs(self, node) -> dict:
        out = {}
        for a in node.attribute:
            out[a.name] = list(a.ints) if a.ints else (a.i if a.type == 2 else a.f)
        return out

    def _buffer(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def _add(self, kernel: P.Kernel, tensors: dict[str, str]) -> None:
        """Run `kernel` with its tensors bound to graph tensors (buffers made as needed)."""
        for arg, name in tensors.items():
            name = self._buffer(name)
            if name not in self.buffers:
                self.buffers[name] = np.zeros(kernel.nbytes(arg), np.uint8)
        self.steps.append((kernel, {a: self._buffer(n) for a, n in tensors.items()}))
        self.kernels.append(kernel)

    def _static(self, kernel: P.Kernel, arg: str, data: np.ndarray) -> str:
        name = f"{kernel.what}{len(self.steps)}.{arg}"
        self.buffers[name] = np.zeros(kernel.nbytes(arg), np.uint8)
        kernel.load_weights(arg, data.astype(np.float32), self.buffers[name])
        return name

    # Lowering --------------------------------------------------------------------------

    def _build(self) -> None:
        done = set()
        shapes = {self.input_name: (1, 3, 224, 224)}
        for index, node in enumerate(self.nodes):
            if index in done:
                continue
            if node.op_type == "Conv":
                self._conv(index, node, shapes, done)
            elif node.op_type in ("MaxPool", "GlobalAveragePool"):
                x = node.input[0]
                a = self._attrs(node)
                kind, size = (("max", a["kernel_shape"]) if node.op_type == "MaxPool"
                              else ("avg", shapes[x][2:]))
                k = P.pool(shapes[x], kind=kind, size=size, stride=a.get("strides", (1, 1)),
                             padding=a.get("pads", (0, 0, 0, 0)), src=self.descs[x])
                self._out(k, node.output[0], shapes)
                self._add(k, {"src": x, "dst": node.output[0]})
            elif node.op_type == "Concat":
                srcs = list(node.input)
                k = P.concat([shapes[s] for s in srcs], 1, srcs=[self.descs[s] for s in srcs])
                self._out(k, node.output[0], shapes)
                self._add(k, {**{f"src{i}": s for i, s in enumerate(srcs)},
                              "dst": node.output[0]})
            elif node.op_type == "Flatten":
                x, y = node.input[0], node.output[0]
                shape = (shapes[x][0], int(np.prod(shapes[x][1:])))
                k = P.reorder(self.descs[x], P.plain_desc(shapes[x]))  # to C order: a view
                self.descs[y], shapes[y] = P.plain_desc(shape), shape
                self._add(k, {"src": x, "dst": y})
            elif node.op_type == "Gemm":
                x, w, b = node.input
                weight = self.consts[w]
                k = P.matmul(shapes[x], weight.shape, trans_b=True, bias_shape=(1, len(
                    self.consts[b])))
                bias = self._static(k, "bias", self.consts[b].reshape(1, -1))
                weights = self._static(k, "weights", weight)
                self._out(k, node.output[0], shapes)
                self._add(k, {"src": x, "weights": weights, "bias": bias,
                              "dst": node.output[0]})
            else:
                raise SystemExit(f"dnnl_primitives.py: no lowering for {node.op_type}")

    def _out(self, kernel: P.Kernel, name: str, shapes) -> None:
        self.descs[name] = kernel.descs["dst"]
        shapes[name] = kernel.descs["dst"].shape

    def _conv(self, index, node, shapes, done) -> None:
        x, w = node.input[0], node.input[1]
        a = self._attrs(node)
        weight = self.consts[w]
        bias = self.consts[node.input[2]] if len(node.input) > 2 else None
        out, last = node.output[0], index
        nxt = self._only_reader(out, last)
        if nxt is not None and self.nodes[nxt].op_type == "BatchNormalization":
            bn = self.nodes[nxt]
            scale, offset, mean, var = (self.consts[n] for n in bn.input[1:])
            weight, bias = fold_batchnorm_conv(weight, bias, scale, offset, mean, var,
                                               self._attrs(bn).get("epsilon", 1e-5),
                                               np.float32)
            done.add(nxt)
            out, last = bn.output[0], nxt
        post, residual = [], None
        while True:
            nxt = self._only_reader(out, last)
            if nxt is None:
                break
            follower = self.nodes[nxt]
            if follower.op_type == "Relu":
                post.append(P.eltwise_post_op("relu"))
            elif follower.op_type == "Clip":
                lo, hi = (float(self.consts[n]) for n in follower.input[1:])
                post.append(P.eltwise_post_op("clip", lo, hi))
            elif follower.op_type == "Add" and residual is None and not post:
                other = next(n for n in follower.input if n != out)
                # The other operand must be finished and read by nothing after this Add.
                if other not in self.descs or any(r > nxt for r in self.readers[other]):
                    break
                residual = other
                post.append(P.sum_post_op())
            else:
                break
            done.add(nxt)
            out, last = follower.output[0], nxt
        dst = self.descs[residual] if residual is not None else "any"

        def conv(src):
            return P.conv2d(shapes[x], weight.shape, bias=bias is not None,
                            group=a.get("group", 1), stride=a.get("strides", (1, 1)),
                            padding=a.get("pads", (0, 0, 0, 0)),
                            dilation=a.get("dilations", (1, 1)), src=src, dst=dst,
                            post_ops=post)

        k = conv(self.descs.get(x, "any"))
        if x == self.input_name:
            self.descs[x] = k.descs["src"]
        elif k.impl_info.startswith("ref"):
            # No fast implementation reads the producer's layout: let the convolution
            # choose, and reorder in between (the layout pass's rule).
            k = conv("any")
            moved = f"{x}.{k.format('src')}"
            self._add(P.reorder(self.descs[x], k.descs["src"]), {"src": x, "dst": moved})
            x = moved
        tensors = {"src": x, "dst": out}
        if residual is not None:
            self.alias[out] = residual
        tensors["weights"] = self._static(k, "weights", weight)
        if bias is not None:
            tensors["bias"] = self._static(k, "bias", bias)
        self._out(k, out, shapes)
        self._add(k, tensors)

    # Running ---------------------------------------------------------------------------

    def bind(self, x: np.ndarray) -> None:
        scratch = np.zeros(max((k.scratchpad for k in self.kernels), default=0), np.uint8)
        self.x = np.ascontiguousarray(x)
        self.out = np.zeros(self.descs[self.output_name].shape, np.float32)
        into = P.reorder(P.plain_desc(self.x.shape), self.descs[self.input_name])
        out_of = P.reorder(self.descs[self.output_name], P.plain_desc(self.out.shape))
        self.calls = [into.bind({"src": self.x, "dst": self.buffers[self.input_name]})]
        self.calls += [k.bind({a: self.buffers[n] for a, n in t.items()}, scratch)
                       for k, t in self.steps]
        self.calls.append(out_of.bind({"src": self.buffers[self._buffer(self.output_name)],
                                       "dst": self.out}))

    def run(self) -> np.ndarray:
        for call in self.calls:
            call()
        return self.out


def timed_block(run, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        run()
    return (time.perf_counter() - start) / runs


def execute_overhead(n: int = 20000) -> float:
    """Microseconds per bound execute of a tiny primitive (1 thread: no OpenMP fork)."""
    lib = capi.library()
    k = P.eltwise((1, 8), "relu")
    a = np.zeros((1, 8), np.float32)
    call = k.bind({"src": a, "dst": a})
    previous = lib.set_threads(1)
    try:
        call()
        return min(timed_block(call, n) for _ in range(3)) * 1e6
    finally:
        lib.set_threads(previous)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--blocks", type=int, default=7, help="timed blocks per engine")
    p.add_argument("--runs", type=int, default=5, help="back-to-back runs per block")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between blocks")
    p.add_argument("--ort-spinning", choices=("0", "1"), default="1",
                   help="ONNX Runtime's session.intra_op.allow_spinning (default 1, its own "
                        "default; oneDNN's GNU OpenMP threads wait as "
                        "OMP_WAIT_POLICY says, libgomp's default when unset)")
    args = p.parse_args()
    reason = capi.unavailable_reason()
    if reason:
        sys.exit(f"dnnl_primitives.py: oneDNN is unavailable: {reason}")
    import onnxruntime as ort

    lib = capi.library()
    lib.set_threads(args.threads)
    print(f"oneDNN {lib.version} ({lib.cpu_isa}), ONNX Runtime {ort.__version__}, "
          f"{args.threads} threads, {os.cpu_count()} cores; {args.blocks} blocks of "
          f"{args.runs} runs per engine; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, "
          f"ORT spinning {args.ort_spinning}; load average {os.getloadavg()[0]:.1f}")
    print(f"per-execute overhead (1 thread, tiny eltwise): {execute_overhead():.2f} us")
    rows = []
    for name in args.models.split(","):
        model = models.MODELS[name](np.random.default_rng(SEED))
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        net = Net(model)
        net.bind(x)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.intra_op.allow_spinning", args.ort_spinning)
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        feeds = {sess.get_inputs()[0].name: x}
        want = sess.run(None, feeds)[0]
        got = net.run().reshape(want.shape)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        ours, theirs = [], []
        for _ in range(args.blocks):
            ours.append(timed_block(net.run, args.runs))
            time.sleep(args.pause)
            theirs.append(timed_block(lambda: sess.run(None, feeds), args.runs))
            time.sleep(args.pause)
        a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        impls = collections.Counter(f"{k.what}:{k.impl_info}" for k in net.kernels)
        rows.append((name, len(net.calls), a, b, a / b, err, impls))
        print(f"{name}: {len(net.calls)} primitives, dnnl {a:.2f} ms, ORT {b:.2f} ms, "
              f"ratio {a / b:.2f}, rel error {err:.1e}"
              + ("" if err <= 1e-3 else "  FAIL"), flush=True)
    print()
    print(f"{'model':<14} {'prims':>5} {'dnnl ms':>9} {'ORT ms':>9} {'ratio':>6} {'rel err':>8}")
    for name, n, a, b, ratio, err, _ in rows:
        print(f"{name:<14} {n:>5} {a:>9.2f} {b:>9.2f} {ratio:>6.2f} {err:>8.1e}")
    if rows:
        print(f"geometric mean ratio: "
              f"{float(np.exp(np.mean([np.log(r[4]) for r in rows]))):.2f}")
    print()
    for name, *_, impls in rows:
        print(f"{name} kernels: " + ", ".join(f"{k} x{n}" for k, n in impls.most_common()))
    if any(r[5] > 1e-3 for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
