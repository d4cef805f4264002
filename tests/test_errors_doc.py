"""docs/errors.md cannot drift from the code.

1. Every documented error is triggered here (TRIGGERS: doc key -> a function
   making the error happen and returning its message), and the example
   message in the doc must match the real one; `<placeholders>` (a path, a
   number...) match any text. `<model>`, `<stdin>` and `<string>` are labels
   LightNet itself prints, not placeholders.
2. Every place the code makes a user error (LightNetError, ILError,
   CheckError via Checker.fail, the generator's DescriptionError, RenderError
   and UserError, found by an AST scan of lightnet/ and generator/) must be
   covered by some entry: the constant text of its message (every fragment
   of four letters or more) appears in the entry's example or its "Also"
   forms. A new or reworded error therefore needs its doc entry.

The ONNX importer (lightnet/frontends/onnx/, onnx_conformance.py) documents its own errors
with the importer and is not scanned here.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session
from tests.frontends.onnxutil import relu_model_file
from tests.helpers import example_doc, from_file_example
from tests.irbuild import create, op

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "errors.md"
EXAMPLES = ROOT / "examples"
LABELS = ("<model>", "<stdin>", "<string>")


# The doc ---------------------------------------------------------------------------------


@dataclass
class Entry:
    key: str
    group: str
    example: str
    forms: list[str]
    fix: str


HEADING = re.compile(r"^### `(?P<key>[\w.-]+)`", re.M)


def parse_doc(text: str) -> dict[str, Entry]:
    entries = {}
    group = None
    for block in re.split(r"(?m)^(?=##+ )", text):
        if block.startswith("## "):
            group = block.splitlines()[0][3:].strip()
            continue
        m = HEADING.match(block)
        if not m:
            continue
        key = m.group("key")
        assert key not in entries, f"{key} is documented twice"
        lines = block.splitlines()[1:]
        examples = [line[4:] for line in lines if line.startswith("    ") and line.strip()]
        assert examples, f"{key}: no example message (an indented line)"
        also = re.search(r"(?ms)^Also: (.*?)(?:\n\n|\Z)", block)
        forms = re.findall(r"`([^`]+)`", also.group(1)) if also else []
        fix = re.search(r"(?ms)^Fix: (.*?)(?:\n\n|\Z)", block)
        assert fix, f"{key}: no 'Fix: ...' paragraph"
        entries[key] = Entry(key, group, examples[0], forms, fix.group(1))
    return entries


def pattern(example: str) -> re.Pattern:
    """The example as a regex: each <placeholder> matches any text."""
    out, pos = [], 0
    for m in re.finditer(r"<[^<>\s][^<>]*>", example):
        out.append(re.escape(example[pos:m.start()]))
        out.append(re.escape(m.group()) if m.group() in LABELS else ".+?")
        pos = m.end()
    out.append(re.escape(example[pos:]))
    return re.compile("".join(out))


ENTRIES = parse_doc(DOC.read_text(encoding="utf-8"))


# Triggers --------------------------------------------------------------------------------


def threads_of_another_blas(tmp) -> str:
    """Context(threads=...) when numpy's BLAS has no OpenBLAS thread functions."""
    from lightnet.archs.cpu import blas

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blas, "_openblas_function", lambda name: None)
        return message(Context, threads=2)


def message(fn, *args, **kwargs) -> str:
    """The message of the LightNetError `fn` raises."""
    with pytest.raises(LightNetError) as e:
        fn(*args, **kwargs)
    return str(e.value)


def run_model(model, datafile=None, stage="run", **ctx_kwargs) -> str:
    """The message of the error running `model` (a dict or a path) raises."""
    def go():
        ctx = Context(**ctx_kwargs)
        ctx.init(model)
        if stage == "init":
            return
        ctx.compile("cpu")
        ctx.load(datafile)
        ctx.run()
    with contextlib.redirect_stdout(io.StringIO()):
        return message(go)


def model_file(tmp, text, name="m.json"):
    path = tmp / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


def with_example(change):
    doc = example_doc()
    change(doc)
    return doc


def ir(change):
    return lambda tmp: run_model(with_example(change))


def il(text, **kw):
    from lightnet.frontends.il import to_ir
    kw.setdefault("filename", "m.net")
    return lambda tmp: message(to_ir, text, **kw)


def bad_types(tmp):
    """A types file whose set lists a dtype that does not exist."""
    from tests.generator.genutil import make_root

    from generator import model
    from generator.source import DescriptionError
    root = make_root(tmp / "root")
    (root / "descriptions" / "types.yaml").write_text(
        "# sets\ndtypes:\n  half: [TL_HALF]\n", encoding="utf-8")
    with pytest.raises(DescriptionError) as e:
        model.load(root)
    return str(e.value)


def gen(ops=None, optimizers=None, render=False, archs=None, params=None):
    """The generator's error on a tree holding these description files (and
    this descriptions/params.yaml)."""
    from generator import model
    from generator import render as rendering
    from generator.source import DescriptionError

    def trigger(tmp):
        from tests.generator.genutil import BASE_ARCHS, BASE_OPS, make_root
        root = make_root(tmp / "root", {**BASE_OPS, **(ops or {})}, optimizers or {},
                         {**BASE_ARCHS, **(archs or {})})
        if params is not None:
            (root / "descriptions" / "params.yaml").write_text(params, encoding="utf-8")
        with pytest.raises((DescriptionError, rendering.RenderError)) as e:
            descriptions = model.load(root)
            if render:
                rendering.render_all(root, descriptions)
        return str(e.value)
    return trigger


def cli(main_module, argv, tmp=None):
    """The last line a command writes on stderr (in process)."""
    import importlib
    main = importlib.import_module(main_module).main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main([str(a) for a in argv])
        except SystemExit:
            pass
    return err.getvalue().splitlines()[-1]


def weights_npz(tmp, arrays=None, members=None, name="w.npz"):
    path = tmp / name
    if members is not None:
        with zipfile.ZipFile(path, "w") as z:
            for member, data in members.items():
                z.writestr(member, data)
    else:
        np.savez(path, **arrays)
    return path


def load_weights(path_or_fn):
    def trigger(tmp):
        path = path_or_fn(tmp) if callable(path_or_fn) else path_or_fn
        return run_model(from_file_example(), datafile=path)
    return trigger


def compiled_with_weights(kind):
    """Errors of a model compiled with its weights (compile(weights=...))."""
    def trigger(tmp):
        ctx = Context()
        if kind == "set_param":
            ctx.init(example_doc())
            ctx.compile("cpu", weights={})
            ctx.set_param(ctx.ops[0].name, "from_file", True)
            return message(ctx.load)
        ctx.init(from_file_example())
        if kind == "unknown":
            ctx.compile("cpu")
            return message(ctx.save_weights, tmp / "w.npz")
        ctx.compile("cpu", weights={"tensor1": np.zeros((2, 4), np.float32)})
        if kind == "load_file":
            return message(ctx.load, tmp / "w.npz")
        if kind == "write":
            return message(ctx.save_weights, tmp / "no" / "dir" / "w.npz")
        ctx.load()
        return message(ctx.set_data, "tensor1", np.ones((2, 4), np.float32))
    return trigger


def fold_over_limit(tmp):
    from tests.irbuild import ModelBuilder
    m = ModelBuilder()
    m.batchnorm(m.conv(m.input("x", [1, 4, 5, 5]), 4, 3, 3), 3)
    ctx = Context(memory_limit=100)
    ctx.init(m.to_dict())
    return message(ctx.compile, "cpu", weights={})


def bad_fold(kind):
    """A rule's constants expression giving something other than arrays."""
    def trigger(tmp):
        from lightnet.compiler.rules import Builder
        ctx = Context()
        ctx.init(example_doc())
        ctx.compile("cpu", weights={})
        b = Builder(ctx, "cpu")
        if kind == "one":
            return message(b.constant, "conv1_weight", 1.0)
        return message(b.constants, "conv1", ("weight", "bias"), [1])
    return trigger


def text_weights(text):
    def trigger(tmp):
        return load_weights(model_file(tmp, text, "w.wts"))(tmp)
    return trigger


def two_ops(first, second):
    return {"ops": [first, second]}


# Triggers that need a hand-made situation ---------------------------------------------------


def pass_removed(tmp):
    from lightnet.archs.registry import get_proto
    from lightnet.ir.op import Op
    ctx = Context()
    ctx.init(example_doc())
    other = Op(get_proto("create"), "create1", {}, {"dst": "elsewhere"},
               ctx.ops[0].params)
    return message(ctx.replace_ops, 0, 1, [other])


def pass_changed(tmp):
    from lightnet.archs.registry import get_proto
    from lightnet.ir.op import Op
    from lightnet.ir.param import Param
    ctx = Context()
    ctx.init(example_doc())
    params = {**ctx.ops[0].params, "dims": Param.from_value("dims", [4, 4]),
              "data": Param.from_value("data", [])}
    return message(ctx.replace_ops, 0, 1, [Op(get_proto("create"), "create1", {},
                                              {"dst": "tensor1"}, params)])


def read_before_create(tmp):
    ctx = Context()
    ctx.init(example_doc())
    ctx.ops.reverse()
    return message(ctx.check)


def dfg_error(kind):
    def trigger(tmp):
        from lightnet.archs.registry import get_proto
        from lightnet.ir.dataflow import DataFlowGraph
        from lightnet.ir.op import Op
        relu = get_proto("relu")
        a = Op(relu, "a", {"src": "t2"}, {"dst": "t1"}, {})
        b = Op(relu, "b", {"src": "t1"}, {"dst": "t2"}, {})
        g = DataFlowGraph()
        if kind == "twice":
            g.add(a)
            return message(g.add, Op(relu, "a", {"src": "x"}, {"dst": "y"}, {}))
        if kind == "both":
            g.add(a)
            return message(g.add, Op(relu, "c", {"src": "x"}, {"dst": "t1"}, {}))
        if kind == "dangling":
            g.add(a)
            return message(g.check)
        g.add(a)
        g.add(b)
        return message(g.check)
    return trigger


def no_expander(tmp):
    from lightnet.compiler import rewrites
    from lightnet.archs.registry import Arch
    ctx = Context()
    ctx.init(example_doc())
    return message(rewrites.expand, ctx, Arch("cpu", {}))


def unsettled(tmp):
    from lightnet.compiler import rewrites
    from lightnet.archs.registry import Arch, archs
    from lightnet.compiler.rules import Combiner
    ctx = Context()
    ctx.init(example_doc())
    ctx.compile("cpu", combine=False)
    flip = Combiner("flip", ("*",), lambda c, window: [window[0].copy_as(window[0].proto)])
    return message(rewrites.combine, ctx, Arch("cpu", archs()["cpu"].ops, combiners=(flip,)))


def wrong_view(tmp):
    import dataclasses

    from lightnet.archs.registry import get_proto
    ctx = Context()
    ctx.init(op_model("reshape", {"src": [[1, 2], [3, 4]]}, dims=[4]))
    ctx.compile("cpu")
    for o in ctx.ops:
        if o.optype == "reshape_cpu":
            o.proto = dataclasses.replace(get_proto("reshape_cpu"),
                                          views=lambda op, arrays: {"dst": np.zeros(4)})
    return message(ctx.load)


def op_model(optype, inputs, outs=("dst",), **params):
    """create ops for `inputs` (nested lists, or (dtype, nested lists)), then the op."""
    ops = []
    for arg, value in inputs.items():
        dtype, data = value if isinstance(value, tuple) else ("TL_FLOAT", value)
        a = np.asarray(data)
        ops.append(create(f"create_{arg}", f"in_{arg}", dtype=dtype, dims=list(a.shape),
                          data=a.reshape(-1).astype(float).tolist()))
    ops.append(op("op", optype, {a: f"in_{a}" for a in inputs},
                  {a: f"out_{a}" for a in outs}, **params))
    return {"ops": ops}


def op_error(optype, inputs, outs=("dst",), **params):
    return lambda tmp: run_model(op_model(optype, inputs, outs, **params))


def checker_define(kind):
    def trigger(tmp):
        from lightnet.archs.registry import get_proto
        from lightnet.ir.op import Op
        from lightnet.ir.checks import Checker
        from lightnet.ir.tensor import TensorTable
        ck = Checker(Op(get_proto("relu"), "relu1", {}, {"dst": "t"}, {}), TensorTable())
        if kind == "scratch":
            return message(ck.scratch, -1)
        shape = {"dtype": [2], "seq": 5, "neg": [2, -1]}[kind]
        dtype = 3 if kind == "dtype" else "TL_FLOAT"
        return message(ck.define, "dst", dtype, shape)
    return trigger


def api(kind):
    def trigger(tmp):
        ctx = Context()
        ctx.init({"ops": [create(data=list(range(8))), op("r", "relu", {"src": "tensor1"},
                                                             {"dst": "y"})]})
        ctx.compile("cpu")
        if kind == "not_loaded":
            return message(ctx.get_data, "y")
        if kind == "set_param_loaded":
            ctx.load()
            return message(ctx.set_param, "r", "x", 1)
        if kind == "no_op":
            return message(ctx.set_param, "nope", "x", 1)
        if kind == "param_value":
            return message(ctx.set_param, "r", "x", float("nan"))
        ctx.load()
        if kind == "no_tensor":
            return message(ctx.get_data, "nope")
        if kind == "elements":
            return message(ctx.set_data, "y", np.zeros(3, np.float32))
        if kind == "dtype":
            return message(ctx.set_data, "y", np.zeros(8, np.complex64))
        if kind == "data_size":
            return message(ctx.data_size, "nope")
    return trigger


def session(kind):
    def trigger(tmp):
        from tests.irbuild import ModelBuilder
        m = ModelBuilder()
        m.relu(m.input("x", [1, 2]))
        s = Session(m.to_dict())
        feeds = {"not_input": {"x": np.zeros((1, 2), np.float32), "y": 1},
                 "missing": {},
                 "dtype": {"x": np.zeros((1, 2), np.float64)},
                 "shape": {"x": np.zeros((2, 1), np.float32)}}[kind]
        return message(s.run, feeds)
    return trigger


def input_model():
    """An IR with one input, x float32[1, 3, 8, 8], and its relu."""
    return {"ops": [op("in", "input", outs={"dst": "x"}, dims=[1, 3, 8, 8]),
                    op("r", "relu", {"src": "x"}, {"dst": "y"})]}


def cli_input(kind):
    """Errors of `lightnet --input`: arrays read for input_model()."""
    def trigger(tmp):
        from lightnet.cli import arrays
        ctx = Context()
        ctx.init(input_model())
        inputs = {n: ctx.tensors[n] for n in ctx.inputs}
        good = np.zeros((1, 3, 8, 8), np.float32)
        path = tmp / ("in.npz" if kind.startswith("npz") else "in.npy")
        specs = [(None if kind.startswith("npz") else "x", path)]
        if kind == "npy-truncated":
            np.save(path, good)
            path.write_bytes(path.read_bytes()[:-(good.nbytes - 16)])
        elif kind == "npy-garbage":
            path.write_bytes(b"PK\x03\x04 not an array")
        elif kind == "npy-pickle":
            np.save(path, np.array([None] * 3), allow_pickle=True)
        elif kind in ("npy-dtype", "npy-shape"):
            np.save(path, good.astype(np.float64) if kind == "npy-dtype" else good[0])
        elif kind == "npz-garbage":
            path.write_bytes(b"not a zip")
        elif kind == "npz-member":
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("x", b"raw bytes")
        elif kind == "npz-name":
            np.savez(path, image=good)
        elif kind == "npz-twice":
            np.savez(path, x=good)
            specs = [(None, path), ("x", tmp / "x.npy")]
            np.save(tmp / "x.npy", good)
        return message(arrays.read_inputs, specs, inputs)
    return trigger


def onnx_file(tmp, batch="N"):
    """A one-Relu ONNX model, x float32[batch, 3, 8, 8]."""
    return relu_model_file(tmp, [batch, 3, 8, 8])


def onnx_invalid(case):
    """The error importing an ONNX model that breaks the spec (see docs/errors.md)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from lightnet.frontends.onnx import convert

    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "W")
    node = helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[1, 1])
    if case == "tensor-dims":
        w.dims.append(2)
    elif case == "tensor-type":
        w.data_type = 0
    elif case == "tensor-negative":
        w.dims[0] = -1
    elif case == "node-inputs":
        node = helper.make_node("ReduceMean", [], ["y"])
    elif case == "attribute-type":
        node = helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=1)
    elif case == "attribute-missing":
        node = helper.make_node("Slice", ["x"], ["y"], ends=[1])
    elif case == "axis":
        node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])
    elif case == "external":
        value = numpy_helper.from_array(np.ones(1, np.float32))
        value.data_location = TensorProto.EXTERNAL
        value.ClearField("raw_data")
        node = helper.make_node("Constant", [], ["y"], value=value)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "g", inputs, outputs, [w])
    opset = 9 if case == "attribute-missing" else 13
    return message(convert, helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(
        "", opset)]))


def onnx_missing(tmp):
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
        return message(Session, tmp / "m.onnx")


def quantize_error(case):
    """The error of lightnet.quantize on a case of a one-Relu ONNX model."""
    def trigger(tmp):
        from lightnet import quantize

        model, npz = onnx_file(tmp), tmp / "s.npz"
        arrays = {"key": {"image": np.zeros((2, 1, 3, 8, 8), np.float32)},
                  "shape": {"x": np.zeros((2, 3, 8, 8), np.float32)},
                  "dims": {"x": np.zeros((2, 1, 3, 8, 9), np.float32)}}.get(case)
        if arrays is not None:
            np.savez(npz, **arrays)
        if case == "dims":
            model = relu_model_file(tmp, [1, 3, 8, 8])
        if case == "uneven":
            return cli("lightnet.cli", ["quantize", two_input_model(tmp), "--calibrate", npz])
        if case == "ort":
            with pytest.MonkeyPatch.context() as patch:
                patch.setitem(sys.modules, "onnxruntime", None)
                np.savez(npz, x=np.zeros((2, 1, 3, 8, 8), np.float32))
                return message(quantize, model, npz, tmp / "q.onnx")
        if case == "ort-fails":
            # An operator ONNX Runtime does not know (LightNet's reading is left out).
            from unittest import mock

            model.write_bytes(model.read_bytes().replace(b"Relu", b"Relv"))
            with mock.patch("lightnet.quantization.Session"), \
                    mock.patch("lightnet.quantization.read_calibration", return_value=[]):
                return message(quantize, model, npz, tmp / "q.onnx")
        output = {"output": tmp / "q.json", "write": tmp / "no" / "q.onnx"}.get(
            case, tmp / "q.onnx")
        if case == "write":
            np.savez(npz, x=np.zeros((2, 1, 3, 8, 8), np.float32))
        if case == "model":
            model = tmp / "m.json"
        return message(quantize, model, npz, output,
                       reduce_range="yes" if case == "reduce" else "auto")
    return trigger


def two_input_model(tmp):
    """x [N, 4] + z [N, 4] -> y (opset 13), and samples.npz of 3 x's and 2 z's."""
    from onnx import TensorProto, helper

    x, z, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]) for n in "xzy")
    graph = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "g", [x, z], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    path = tmp / "add.onnx"
    path.write_bytes(model.SerializeToString())
    np.savez(tmp / "s.npz", x=np.zeros((3, 2, 4), np.float32), z=np.zeros((2, 2, 4), np.float32))
    return path


def batch_error(kind):
    def trigger(tmp):
        from lightnet.files import model_source
        if kind == "fixed":
            return message(model_source.init, Context(), onnx_file(tmp, batch=1), batch=4)
        return message(model_source.init, Context(), example_doc(), batch=4)
    return trigger


def symbolic_model(batch=("N", "N"), add=False):
    """x float32[N, 3, 8, 8] and y float32[N, 3, 8, 8] added; with other first dims
    given, each its own relu (or added, `add`)."""
    inputs = [op("in", "input", outs={"dst": "x"}, dims=[batch[0], 3, 8, 8]),
              op("in2", "input", outs={"dst": "y"}, dims=[batch[1], 3, 8, 8])]
    if batch[0] != batch[1] and not add:
        return {"ops": inputs + [op("r", "relu", {"src": "x"}, {"dst": "rx"}),
                                 op("r2", "relu", {"src": "y"}, {"dst": "ry"})]}
    return {"ops": inputs + [op("add", "elew", {"src1": "x", "src2": "y"}, {"dst": "z"},
                                elew_op="TL_SUM")]}


def symbolic_error(kind):
    def trigger(tmp):
        from lightnet.files import model_source
        from lightnet.ir import symbolic
        if kind == "unbound":
            return message(Context().init, symbolic_model())
        if kind in ("name", "value"):
            dims = {"M": 1} if kind == "name" else {"N": 0}
            return message(Context().init, symbolic_model(), dims=dims)
        if kind == "two-batches":
            return message(model_source.init, Context(), symbolic_model(("N", "M")), batch=4)
        if kind == "weights":
            return message(symbolic.generalize, lambda d: ({"ops": []}, {
                "w": np.zeros(d["N"])}), ["N"], {}, "<model>")

        def build(d):  # a reshape whose dims follow N and M in other ways
            dims = {"sum": [d["N"] + d["M"]], "offset": [d["N"] + 1]}[kind]
            return {"ops": [op("in", "input", outs={"dst": "x"}, dims=[d["N"], d["M"]]),
                            op("r", "reshape", {"src": "x"}, {"dst": "y"}, dims=dims)]}, None
        return message(symbolic.generalize, build, ["M", "N"], {}, "<model>")
    return trigger


def bounded_dims(kind):
    """symbolic_model with N at most 64 (the interface's `dims`), or that bound malformed."""
    def trigger(tmp):
        doc = symbolic_model()
        doc["interface"] = {"dims": {
            "session": [{"name": "N", "max": 64}], "context": [{"name": "N", "max": 64}],
            "name": [{"name": "M", "max": 2}], "array": {"N": 2},
            "object": [{"name": "N"}], "twice": [{"name": "N", "max": 2}] * 2,
            "max": [{"name": "N", "max": 0}]}[kind]}
        if kind == "session":
            x = np.zeros((65, 3, 8, 8), np.float32)
            return message(Session(doc).run, {"x": x, "y": x})
        if kind == "context":
            return message(Context().init, doc, dims={"N": 65})
        return message(Session, doc)
    return trigger


def session_dims(kind):
    def trigger(tmp):
        s = Session(symbolic_model())
        x = np.zeros((2, 3, 8, 8), np.float32)
        feeds = {"shape": {"x": x, "y": np.zeros((2, 3, 7, 8), np.float32)},
                 "rank": {"x": x[0], "y": x},
                 "conflict": {"x": x, "y": np.zeros((3, 3, 8, 8), np.float32)}}[kind]
        return message(s.run, feeds)
    return trigger


def interface_error(kind):
    def trigger(tmp):
        from tests.irbuild import ModelBuilder
        m = ModelBuilder()
        m.op("relu", {"src": m.input("x", [1, 2])}, name="r")
        m.op("forward", {"src": m.input("ids", [1], dtype="TL_INT32")}, name="f")
        doc = m.to_dict()
        doc["interface"] = {
            "not_input": {"inputs": [{"name": "y", "dtype": "float32", "shape": [2]}]},
            "elements": {"outputs": [{"name": "r", "dtype": "float32", "shape": [3]}]},
            "range": {"inputs": [{"name": "ids", "dtype": "int64", "shape": []}]},
        }[kind]
        if kind != "range":
            return message(Session, doc)
        feeds = {"x": np.zeros((1, 2), np.float32), "ids": np.array(2**31, np.int64)}
        return message(Session(doc).run, feeds)
    return trigger


def dtype_error(kind):
    def trigger(tmp):
        from lightnet.ir.tensor import DType
        if kind == "name":
            return message(DType.from_name, "TL_HALF")
        return message(DType.from_numpy, np.float16)
    return trigger


def kernel_run_error(tmp):
    return run_model(op_model("pick1d", {"src": [0, 1, 2, 3, 4, 5],
                                         "src_index": ("TL_INT32", [7, 0, 1])},
                              len=3, stride=1))


def pcpp_missing(tmp):
    import builtins
    from unittest import mock

    from lightnet.frontends.il import to_ir
    real = builtins.__import__

    def no_pcpp(name, *args, **kwargs):
        if name == "pcpp":
            raise ImportError(name)
        return real(name, *args, **kwargs)
    with mock.patch.object(builtins, "__import__", no_pcpp):
        return message(to_ir, "relu(|a|);", filename="m.net", preprocessor="pcpp")


def no_cpp(tmp):
    from unittest import mock

    from lightnet.frontends import il
    with mock.patch.object(il.shutil, "which", lambda name: None):
        return message(il.to_ir, "relu(|a|);", filename="m.net", preprocessor="cpp")


def cpp_fails(kind):
    def trigger(tmp):
        import subprocess
        from unittest import mock

        from lightnet.frontends import il
        if kind == "run":
            def broken(*args, **kwargs):
                raise PermissionError(13, "Permission denied")
        else:
            def broken(*args, **kwargs):
                return subprocess.CompletedProcess(args, 3, "", "cpp: something odd\n")
        with mock.patch.object(il.shutil, "which", lambda name: "/usr/bin/cpp"), \
                mock.patch.object(il.il_limits, "run_cpp", broken):
            return message(il.to_ir, "relu(|a|);", filename="m.net", preprocessor="cpp")
    return trigger


def il_include(text, files):
    def trigger(tmp):
        from lightnet.frontends.il import to_ir
        for name, content in files.items():
            (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        main = tmp / "m.net"
        main.write_text(text)
        return message(to_ir, main, preprocessor="pcpp")
    return trigger


def il_file(content):
    def trigger(tmp):
        from lightnet.frontends.il import to_ir
        path = tmp / "m.net"
        if content is not None:
            path.write_bytes(content)
        return message(to_ir, path)
    return trigger


def write_error(tool):
    def trigger(tmp):
        target = tmp / "no" / "such" / "dir" / "out"
        if tool == "lightnet":
            return cli("lightnet.cli", [EXAMPLES / "example.json", "--dot", target])
        if tool == "ir":
            return cli("lightnet.cli", [EXAMPLES / "example.json", "-c", "-o", target])
        return cli("lightnet.frontends.il", [EXAMPLES / "fire.net", "-o", target])
    return trigger


def gen_cli(kind):
    def trigger(tmp):
        from unittest import mock

        from generator import output
        if kind == "root":
            return cli("generator.__main__", ["--root", tmp])
        from tests.generator.genutil import BASE_OPS, make_root
        root = make_root(tmp / "root", BASE_OPS)

        def disk_full(src, dst):
            raise OSError(28, "No space left on device", dst)
        with mock.patch.object(output.os, "replace", disk_full):
            return cli("generator.__main__", ["--root", root])
    return trigger


def black_version(tmp):
    from unittest import mock

    from generator import render
    with mock.patch.object(render, "BLACK_VERSION", "0.0"):
        return gen(render=True)(tmp)


def damaged_npz(tmp):
    """A .npz whose array data fails its CRC check."""
    path = weights_npz(tmp, {"tensor1": np.arange(8, dtype=np.float32).reshape(2, 4)})
    data = bytearray(path.read_bytes())
    data[data.index(b"\x00\x00\x80?")] ^= 0xFF  # inside the array data
    path.write_bytes(bytes(data))
    return path


def infer_error(tmp):
    """A shape helper refusing what the checks let through (a gap in a description)."""
    import dataclasses

    from lightnet.archs.registry import get_proto
    from lightnet.ir.op import Op
    from lightnet.ir.tensor import TensorTable

    def pre_run(op, tensors):
        raise ValueError("shapes [2] and [3] do not broadcast: dimension -1 is 2 in one "
                         "and 3 in the other")
    proto = dataclasses.replace(get_proto("elew"), pre_run=pre_run, tensors_in=(),
                                tensors_out=(), params=())
    return message(Op(proto, "add1", {}, {}, {}).pre_run, TensorTable())


def onednn_refuses():
    """A convolution whose weights do not fit its source, created through oneDNN."""
    from lightnet.archs.dnnl import capi

    if capi.unavailable_reason():
        pytest.skip(f"oneDNN is unavailable: {capi.unavailable_reason()}")
    from lightnet.archs.dnnl import primitives

    return message(primitives._conv, "conv2d", "dnnl_convolution_forward_primitive_desc_create",
                   (1, 3, 5, 5), (4, 2, 3, 3), (1, 4, 3, 3), False, 1, (1, 1), (0, 0, 0, 0),
                   (1, 1), "float32", "plain", "plain", (), transposed=False)


def pass_registry(kind):
    """Passes registered for the moment the pipeline is derived or registered."""
    declared = {"missing": [("reorder", ["layouts"], ["ops-final"])],
                "circle": [("a", ["fused", "y"], ["x"]), ("b", ["x"], ["y"])]}

    def trigger(tmp):
        from lightnet.compiler import pipeline

        if kind == "duplicate":
            return message(pipeline.register("expand"), lambda ctx, job: None)
        if kind == "name":
            return message(pipeline.register, "")
        if kind == "list":
            return message(pipeline.register, "p", requires="fused")
        if kind == "function":
            return message(pipeline.register("p"), "not a function")
        if kind == "unregister":
            return message(pipeline.unregister, "nope")
        for name, requires, provides in declared[kind]:
            pipeline.register(name, requires=requires, provides=provides)(lambda ctx, job: None)
        try:
            return message(pipeline.pipeline, "cpu")
        finally:
            for name, _, _ in declared[kind]:
                pipeline.unregister(name)
    return trigger


def without_onednn(fn) -> str:
    """The message of `fn` where the onednn-cpu-gomp wheel is not installed."""
    from unittest import mock

    from lightnet.archs.dnnl import capi

    reason = "the onednn-cpu-gomp package is not installed (pip install onednn-cpu-gomp==2023.2.0)"
    with mock.patch.object(capi, "unavailable_reason", lambda: reason):
        return message(fn)


def dnnl_reads_plain_weight() -> str:
    """An IR written by hand: a dnnl convolution reading a weight no reorder made."""
    from lightnet.archs.dnnl import capi

    if capi.unavailable_reason():
        pytest.skip(f"oneDNN is unavailable: {capi.unavailable_reason()}")
    doc = {"ops": [
        {"name": "x", "optype": "input_cpu", "tensors_in": [],
         "tensors_out": [{"arg_name": "dst", "name": "x"}],
         "params": [{"arg_name": "dims", "value": [1, 3, 5, 5]},
                    {"arg_name": "dtype", "value": "TL_FLOAT"}]},
        *({"name": n, "optype": "create_cpu", "tensors_in": [],
           "tensors_out": [{"arg_name": "dst", "name": n}],
           "params": [{"arg_name": "dims", "value": dims},
                      {"arg_name": "dtype", "value": "TL_FLOAT"}]}
          for n, dims in (("w", [4, 3, 3, 3]), ("b", [4]))),
        {"name": "conv", "optype": "conv2d_dnnl",
         "tensors_in": [{"arg_name": a, "name": a[0] if a != "src" else "x"}
                        for a in ("src", "weight", "bias")],
         "tensors_out": [{"arg_name": "dst", "name": "y"}],
         "params": [{"arg_name": "size", "value": [3, 3]}]}]}

    def go():
        ctx = Context()
        ctx.init(doc)
        ctx.load()
    return message(go)


def builder(kind):
    """A model built in Python (lightnet.nn) going wrong."""
    def trigger(tmp):
        from lightnet import nn

        x = nn.input("x", [2, 3])
        if kind == "tensor":
            return message(nn.relu, np.zeros(3), name="relu1")
        if kind == "variadic":
            return message(nn.concat, x, axis=0, name="concat1")
        if kind == "name":
            return message(nn.relu, x, name=7)
        if kind == "param":
            return message(nn.softmax, x, axis={}, name="softmax1")
        if kind == "nan":
            return message(nn.clip, x, min=float("nan"), max=1, name="clip1")
        if kind == "constant":
            return message(nn.constant, np.arange(3))
        if kind == "input":
            return message(nn.input, "y", [2], "float8")
        if kind == "float16":
            return message(nn.input, "y", [2], np.float16)
        if kind == "outputs":
            return message(nn.Model, outputs=[np.zeros(2)])
        if kind == "read":
            r = nn.relu(x, name="relu1")
            return message(nn.Model, outputs=[r, nn.relu(r, name="relu2")])
        if kind == "taken":
            return message(nn.Model, outputs=[nn.relu(x, name="a"), nn.relu(x, name="a")])
    return trigger


def message_of(fn):
    """The message of whatever exception `fn` raises (the generator's own types)."""
    with pytest.raises(Exception) as e:
        fn()
    return str(e.value)


def arch_package(source: str):
    """An arch description whose `package` is missing (source "") or defines a bad ARCH."""
    def trigger(tmp) -> str:
        from lightnet.archs import registry

        if source:
            (tmp / "lightnet_gpu_arch.py").write_text(source)
        with pytest.MonkeyPatch.context() as patch:
            patch.syspath_prepend(str(tmp))
            gpu = replace(registry.ARCHS["cpu"], name="gpu", package="lightnet_gpu_arch")
            patch.setitem(registry.ARCHS, "gpu", gpu)
            return message(registry._arch_class, "gpu")
    return trigger


TRIGGERS = {
    # IR
    "ir.read": lambda tmp: run_model(tmp / "nope.json"),
    "ir.utf8": lambda tmp: run_model(model_file(tmp, b'{"ops": [\xff]}')),
    "ir.json": lambda tmp: run_model(model_file(tmp, '{"ops": [\n  {"name": "a",,}\n]}')),
    "ir.document": lambda tmp: run_model([1, 2]),
    "ir.op-object": lambda tmp: run_model({"ops": [3]}),
    "ir.name": ir(lambda d: d["ops"][0].pop("name")),
    "ir.unknown-field": ir(lambda d: d["ops"][0].update(param=[])),
    "ir.list": ir(lambda d: d["ops"][0].update(params={})),
    "ir.arg-name": ir(lambda d: d["ops"][1]["tensors_in"][0].pop("arg_name")),
    "ir.value": ir(lambda d: d["ops"][1]["params"][0].pop("value")),
    "ir.param-value": ir(lambda d: d["ops"][1]["params"][2].update(value=float("nan"))),
    "ir.duplicate-op": ir(lambda d: d["ops"][2].update(name="slice1")),
    "ir.interface": ir(lambda d: d.update(interface={"inputs": [
        {"name": "x", "dtype": "complex64", "shape": [6]}]})),
    "ir.unknown-optype": ir(lambda d: d["ops"][2].update(optype="show")),
    "ir.limit": lambda tmp: run_model(model_file(tmp, "[" * 100_000 + "]" * 100_000)),
    # Op checks
    "check.exists": ir(lambda d: d["ops"][1]["params"].pop(0)),
    "check.known": ir(lambda d: d["ops"][1]["params"].append({"arg_name": "step", "value": 1})),
    "check.defined": ir(lambda d: d["ops"][1]["tensors_in"][0].update(name="tensorX")),
    "check.not-defined": ir(lambda d: d["ops"][1]["tensors_out"][0].update(name="tensor1")),
    "check.variadic": op_error("concat", {"src1": [1, 2]}, axis=0),
    "check.type": ir(lambda d: d["ops"][1]["params"][0].update(value="1")),
    "check.compare": ir(lambda d: d["ops"][1]["params"][0].update(value=2)),
    "check.array-len": ir(lambda d: d["ops"][0]["params"][3].update(value=[0, 1, 2])),
    "check.choices": ir(lambda d: d["ops"][0]["params"][0].update(value="TL_HALF")),
    "check.ndim": op_error("sort1d_by_key", {"src_key": [[1, 2]], "src_val": [1, 2]},
                           outs=("dst_key", "dst_val"), dir="TL_SORT_DIR_ASCENDING"),
    "check.len": op_error("sort1d_by_key", {"src_key": [1, 2], "src_val": [1, 2, 3]},
                          outs=("dst_key", "dst_val"), dir="TL_SORT_DIR_ASCENDING"),
    "check.dtype": op_error("softmax", {"src": ("TL_INT32", [1, 2])}, axis=0),
    "check.mtype": lambda tmp: run_model(two_ops(create(data=list(range(8))),
                                                 op("r", "relu_cpu", {"src": "tensor1"},
                                                    {"dst": "y"}))),
    "check.same": op_error("dot_product", {"src1": [1, 2], "src2": [1, 2, 3]}),
    "check.static": lambda tmp: run_model({"ops": [
        op("x", "input", outs={"dst": "m"}, dims=[2]),
        *(create(f"c{a}", f"t{a}", dims=[2]) for a in ("var", "scale", "offset")),
        op("bn", "bn2scale_wts", {"src_mean": "m", "src_var": "tvar", "src_scale": "tscale",
                                   "src_offset": "toffset"},
           {"dst_scale": "s", "dst_shift": "h", "dst_power": "p"})]}),
    "check.expression": ir(lambda d: d["ops"][1]["params"][1].update(value=2)),
    "check.infer": infer_error,
    "check.output": checker_define("dtype"),
    "check.size": lambda tmp: run_model({"ops": [create(dims=[2**31 - 1] * 2)]}),
    # Compile
    "compile.arch-package": arch_package(""),
    "compile.target": lambda tmp: message(lambda: Context().compile("gpu")),
    "compile.dnnl": lambda tmp: without_onednn(lambda: (c := Context(), c.init(example_doc()),
                                                        c.compile("dnnl"))),
    "compile.precision": lambda tmp: message(lambda: (c := Context(), c.init(example_doc()),
                                                      c.compile("cpu", precision="bf16"))),
    "compile.abstract": lambda tmp: message(lambda: (c := Context(), c.init(example_doc()),
                                                     c.plan())),
    "compile.no-expander": no_expander,
    "compile.unsettled": unsettled,
    "compile.fold": bad_fold("one"),
    "compile.pass": pass_removed,
    "compile.pass-missing": pass_registry("missing"),
    "compile.pass-circle": pass_registry("circle"),
    "compile.order": read_before_create,
    "compile.graph": dfg_error("cycle"),
    "compile.view": wrong_view,
    # Memory
    "memory.limit": lambda tmp: run_model(EXAMPLES / "example.json", memory_limit=100),
    "memory.limit-value": lambda tmp: message(Context, memory_limit="lots"),
    "memory.fold-limit-value": lambda tmp: message(Context, fold_limit="lots"),
    # ONNX import
    "onnx.tensor": lambda tmp: onnx_invalid("tensor-dims"),
    "onnx.node": lambda tmp: onnx_invalid("node-inputs"),
    "memory.allocate": lambda tmp: message(
        Context(memory_limit=2**70)._alloc_arena,
        __import__("lightnet.compiler.memory_plan", fromlist=["MemReport"]).MemReport(
            __import__("lightnet.ir.tensor", fromlist=["MemType"]).MemType.CPU, 2**62, 0, 0)),
    # Weights
    "weights.no-file": load_weights(lambda tmp: tmp / "nope.npz"),
    "weights.not-weights": load_weights(lambda tmp: model_file(tmp, b"\x93NUMPY\xff", "w.bin")),
    "weights.npz": load_weights(damaged_npz),
    "weights.pickle": load_weights(lambda tmp: weights_npz(
        tmp, {"tensor1": np.array([{"a": 1}] * 8, dtype=object)})),
    "weights.wts-header": text_weights("tensor1 0 1 0\n"),
    "weights.wts-count": text_weights("1\ntensor1 0 8 3f800000\n"),
    "weights.wts-twice": text_weights("2" + "\ntensor1 0 8" + " 0" * 8 + "\ntensor1 0 8" + " 0" * 8),
    "weights.wts-hex": text_weights("1\ntensor1 0 8 3f800000 zz 0 0 0 0 0 0\n"),
    "weights.wts-write": lambda tmp: message(
        __import__("lightnet.files.wts_text", fromlist=["write"]).write, tmp / "w.wts",
        {"w": np.zeros(2)}),
    "weights.unknown": load_weights(lambda tmp: weights_npz(
        tmp, {"tensor1": np.zeros((2, 4), np.float32), "extra": np.zeros(1, np.float32)})),
    "weights.dtype": load_weights(lambda tmp: weights_npz(
        tmp, {"tensor1": np.zeros((2, 4), np.float64)})),
    "weights.shape": load_weights(lambda tmp: weights_npz(
        tmp, {"tensor1": np.zeros((4, 2), np.float32)})),
    "weights.missing": lambda tmp: run_model(from_file_example()),
    "weights.compiled": compiled_with_weights("load_file"),
    "weights.unknown-data": compiled_with_weights("unknown"),
    # Run
    "run.kernel": kernel_run_error,
    "run.onednn": lambda tmp: onednn_refuses(),
    "run.dnnl-layout": lambda tmp: dnnl_reads_plain_weight(),
    "run.threads-value": lambda tmp: message(Context, threads=0),
    "run.threads-blas": threads_of_another_blas,
    "run.seed-value": lambda tmp: message(Context, seed=-1),
    # API
    "api.not-loaded": api("not_loaded"),
    "api.no-tensor": api("no_tensor"),
    "api.set-data": api("elements"),
    "api.set-param": api("set_param_loaded"),
    "api.no-op": api("no_op"),
    "api.session-input": session("not_input"),
    "api.session-missing": session("missing"),
    "api.session-feed": session("shape"),
    "api.session-range": interface_error("range"),
    "api.interface": interface_error("not_input"),
    "api.dtype": dtype_error("name"),
    "api.pass-register": pass_registry("duplicate"),
    # Builder
    "nn.tensor": builder("tensor"),
    "nn.name": builder("name"),
    "nn.param": builder("param"),
    "nn.dtype": builder("constant"),
    "nn.outputs": builder("outputs"),
    "nn.name-taken": builder("taken"),
    # CLI
    "cli.write": write_error("lightnet"),
    "cli.usage": lambda tmp: cli("lightnet.cli", ["--memory-limit", "lots", "m.json"]),
    "cli.input-file": lambda tmp: message(
        __import__("lightnet.cli.arrays", fromlist=["read_inputs"]).read_inputs,
        [("x", tmp / "nope.npy")], {}),
    "cli.input-name": cli_input("npz-name"),
    "cli.input-feed": cli_input("npy-dtype"),
    "cli.onnx": onnx_missing,
    "cli.onnx-option": lambda tmp: message(Session, onnx_file(tmp), datafile="w.npz"),
    "cli.batch": batch_error("fixed"),
    "cli.calibration": quantize_error("key"),
    "cli.quantize-package": quantize_error("ort"),
    "cli.quantize": quantize_error("model"),
    "ir.symbolic-unbound": symbolic_error("unbound"),
    "ir.symbolic-dims": symbolic_error("name"),
    "ir.symbolic-general": symbolic_error("sum"),
    "ir.symbolic-check": lambda tmp: message(Session, symbolic_model(("N", "M"), add=True)),
    "api.session-dims": session_dims("shape"),
    "ir.symbolic-bound": bounded_dims("session"),
    "ir.symbolic-bounds": bounded_dims("name"),
    "api.session-plans": lambda tmp: message(Session, symbolic_model(), plans=0),
    "cli.internal": lambda tmp: internal_error(),
    # IL
    "il.read": il_file(None),
    "il.utf8": il_file(b"relu(| |);\xff"),
    "il.define": lambda tmp: message(__import__("lightnet.frontends.il", fromlist=["to_ir"])
                                     .to_ir, "", defines=["1X=2"]),
    "il.preprocessor": il("", preprocessor="m4"),
    "il.pcpp": pcpp_missing,
    "il.cpp": no_cpp,
    "il.cpp-failed": cpp_fails("status"),
    "il.directive": il("#frobnicate\n", preprocessor="pcpp"),
    "il.error-directive": il("#error stop here\n", preprocessor="pcpp"),
    "il.include": il_include('#include "missing.net"\n', {}),
    "il.include-depth": il_include('#include "m.net"\n', {}),
    "il.expansion": il("#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n"
                                                 for i in range(1, 41))
                       + "relu(| | x=[A40]);\n", preprocessor="pcpp"),
    "il.include-utf8": il_include('#include "bad.net"\n', {"bad.net": b"\xff"}),
    "il.no-argument": il("#define\n", preprocessor="pcpp"),
    "il.pcpp-failed": lambda tmp: pcpp_crash(),
    "il.comment": il("relu(| | /* never closed"),
    "il.character": il("relu(src=a | dst=b | x=@);"),
    "il.number": il("relu(| | x=1e99999);"),
    "il.string": il('print(src=a | | msg="tab\\q");'),
    "il.syntax": il("relu(src=a | dst=b |)"),
    "il.value": il("relu(src=a | dst=b | x=[maybe]);"),
    "il.eval": il("relu(src=a | dst=b | x=${eval 2 * (3 + 1};"),
    "il.array": il("relu(src=a | dst=b | x=[1, \"a\"]);"),
    "il.twice": il("relu(src=a, src=b | dst=c |);"),
    "il.op-name": il("r: relu(src=a | dst=b |);\nr: relu(src=b | dst=c |);"),
    "il.cli-define": lambda tmp: cli("lightnet.frontends.il", ["-D", "1X", "m.net"]),
    "il.write": write_error("il"),
    # Generator
    "gen.yaml": gen({"bad.yaml": "bad:\n  arch: [none\n"}),
    "gen.yaml-text": gen({"bad.yaml": "bad:\n  arch: none\n  doc: \x07\n"}),
    "gen.aliases": gen({"bad.yaml": "bad: &a\n  arch: none\n  doc: [*a]\n"}),
    "gen.keys": gen({"bad.yaml": "bad:\n  arch: none\n  arch: cpu\n"}),
    "gen.structure": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: 3\n"}),
    "gen.required": gen({"bad.yaml": "bad:\n  doc: no arch\n"}),
    "gen.unknown-key": gen({"bad.yaml": "bad:\n  arch: none\n  colour: blue\n"}),
    "gen.optype": gen({"bad.yaml": "scale:\n  arch: none\n"}),
    "gen.arch": gen({"bad.yaml": "bad:\n  arch: gpu\n"}),
    "gen.arch-description": gen(archs={"gpu.yaml": "arch: gpu\nmtype: gpu\n"}),
    "gen.param-group": gen({"bad.yaml": "bad:\n  arch: none\n  param_groups: [window3d]\n"}),
    "gen.run-code": gen({"bad.yaml": "bad:\n  arch: none\n  run: pass\n"}),
    "gen.inherits": gen({"bad.yaml": "bad:\n  arch: cpu\n  inherits: worse\n"}),
    "gen.identifier": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in:\n"
                                       "    - {arg_name: 2src}\n"}),
    "gen.unknown-name": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: [{arg_name: src}]\n"
                                         "  tensors_out:\n"
                                         "    - {arg_name: dst, dtype: src.dtype, shape: srcc}\n"}),
    "gen.python": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: [{arg_name: src}]\n"
                                   "  checks:\n    - {expr: 'src.ndim >'}\n"}),
    "gen.rebind": gen({"bad.yaml": "bad:\n  arch: cpu\n  tensors_in: [{arg_name: src}]\n"
                                   "  tensors_out: [{arg_name: dst, dtype: src.dtype, "
                                   "shape: src.shape}]\n  run: dst = src\n"}),
    "gen.tensor": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in:\n"
                                   "    src: {dtype: TL_HALF}\n"}),
    "gen.param": gen({"bad.yaml": "bad:\n  arch: none\n  params:\n"
                                  "    n: {type: number}\n"}),
    "gen.default": gen({"bad.yaml": "bad:\n  arch: none\n  params:\n"
                                    "    n: {type: int, default: 0.5}\n"}),
    "gen.variant": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in:\n    src: {dtype: float}\n"
                                    "\nbad_cpu:\n  inherits: bad\n  arch: cpu\n  tensors_in:\n"
                                    "    src: {dtype: TL_FLOAT}\n"}),
    "gen.types": bad_types,
    "gen.example": gen({"bad.yaml": "bad:\n  arch: none\n  examples:\n    - inputs: {}\n"}),
    "gen.assemble": gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: [{arg_name: src}]\n"
                                     "  tensors_out: [{arg_name: dst, dtype: src.dtype, "
                                     "shape: src.shape}]\n"
                                     "  assemble: {output: out, inputs: src, axis: axis}\n"}),
    "gen.optimizer": gen(optimizers={"cpu.yaml": "arch: cpu\nexpanders:\n  scale_cpu:\n"
                                                 "    - replace: scale_cpu\n"}),
    "gen.rule": gen(optimizers={"cpu.yaml": "arch: cpu\nexpanders:\n  scale:\n"
                                            "    - replace: shift_cpu\n"
                                            "    - replace: scale_cpu\n"}),
    "gen.render": lambda tmp: message_of(
        lambda: __import__("generator.render", fromlist=["render"]).format_python(
            "def broken(:\n", "descriptions/ops/bad.yaml")),
    "gen.black": black_version,
    "gen.root": gen_cli("root"),
    "gen.write": gen_cli("write"),
}


FOLD_RULE = """\
arch: cpu
combiners:
  f:
    window: [scale_cpu]
    constants:
      {names}: ops[0].value("src")
    replace: []
"""

# More triggers, of "Also" forms: each message must contain one of its entry's forms.
ALSO = {
    "ir.json": [lambda tmp: run_model(model_file(tmp, '{"ops": [NaN]}')),
                lambda tmp: run_model(model_file(tmp, '{"ops": [], "ops": []}'))],
    "ir.document": [lambda tmp: run_model(model_file(tmp, "{}")),
                    lambda tmp: run_model(model_file(tmp, '{"ops": {}}'))],
    "ir.param-value": [ir(lambda d: d["ops"][1]["params"][2].update(value=10**400)),
                       ir(lambda d: d["ops"][0]["params"][1].update(value=[1, True]))],
    "check.output": [checker_define("seq"), checker_define("neg"), checker_define("scratch")],
    "gen.run-code": [gen({"bad.yaml": "bad:\n  arch: none\n  scratch: 64\n"})],
    "gen.arch-description": [
        gen(archs={"cpu.yaml": "arch: cpu\nmtype: cpu\ndtypes: any\nfallback: dnnl\n"}),
        gen(archs={"gpu.yaml": "arch: gpu\nmtype: cpu\ndtypes: []\n"}),
        gen({"bad.yaml": "bad:\n  arch: cpu\n  template: nope\n"})],
    "gen.param-group": [
        gen({"bad.yaml": "bad:\n  arch: none\n  param_groups: [window2d, dilated_window2d]\n"}),
        gen(params="a:\n  extends: b\n  params: {x: {type: int}}\n"),
        gen(params="a:\n  params: {}\n")],
    "compile.pass": [pass_changed],
    "compile.arch-package": [arch_package("ARCH = None")],
    "compile.fold": [bad_fold("tuple")],
    "memory.limit": [fold_over_limit],
    "onnx.tensor": [lambda tmp: onnx_invalid("tensor-type"),
                    lambda tmp: onnx_invalid("tensor-negative"),
                    lambda tmp: onnx_invalid("external")],
    "onnx.node": [lambda tmp, case=case: onnx_invalid(case) for case in (
        "attribute-type", "attribute-missing", "axis")],
    "weights.missing": [compiled_with_weights("set_param")],
    "cli.write": [compiled_with_weights("write"), lambda tmp: message(
        __import__("lightnet.cli.arrays", fromlist=["save"]).save, tmp / "no" / "o.npz", {})],
    "cli.input-file": [cli_input("npy-truncated"), cli_input("npy-garbage"),
                       cli_input("npy-pickle"), cli_input("npz-garbage"),
                       cli_input("npz-member")],
    "cli.input-name": [cli_input("npz-twice")],
    "cli.input-feed": [cli_input("npy-shape")],
    "cli.onnx-option": [lambda tmp: cli("lightnet.cli", ["-r", onnx_file(tmp)])],
    "cli.batch": [batch_error("no-inputs"), symbolic_error("two-batches")],
    "cli.calibration": [quantize_error(c) for c in ("none", "shape", "dims", "uneven")],
    "cli.quantize": [quantize_error(c) for c in ("output", "write", "ort-fails", "reduce")],
    "ir.symbolic-dims": [symbolic_error("value")],
    "ir.symbolic-general": [symbolic_error("offset"), symbolic_error("weights")],
    "api.session-dims": [session_dims("rank"), session_dims("conflict")],
    "ir.symbolic-bound": [bounded_dims("context")],
    "ir.symbolic-bounds": [bounded_dims(k) for k in ("array", "object", "twice", "max")],
    "cli.usage": [lambda tmp: cli("lightnet.cli", ["--input", "x", "m.json"]),
                  lambda tmp: cli("lightnet.cli", ["--input", "x=a.txt", "m.json"]),
                  lambda tmp: cli("lightnet.cli", ["bench", "--duration", "0", "m.json"]),
                  lambda tmp: cli("lightnet.cli", ["bench", "--runs", "0", "m.json"]),
                  lambda tmp: cli("lightnet.cli", ["-c", "--save", "o.npz", "m.json"])],
    "compile.graph": [dfg_error("twice"), dfg_error("both"), dfg_error("dangling")],
    "api.set-data": [api("dtype"), compiled_with_weights("set_data")],
    "api.set-param": [api("param_value")],
    "api.no-tensor": [api("data_size")],
    "api.session-feed": [session("dtype")],
    "api.interface": [interface_error("elements")],
    "ir.interface": [ir(lambda d: d.update(interface={"outputs": {}})),
                     ir(lambda d: d.update(interface={"ports": []})),
                     ir(lambda d: d.update(interface=[])),
                     ir(lambda d: d.update(interface={"inputs": [{"name": "", "dtype": "bool",
                                                                  "shape": []}]}))],
    "api.dtype": [dtype_error("numpy")],
    "gen.identifier": [gen({"bad.yaml": "Tensor:\n  arch: none\n"})],
    "nn.tensor": [builder("variadic")],
    "nn.param": [builder("nan")],
    "nn.dtype": [builder("input"), builder("float16")],
    "nn.outputs": [builder("read")],
    "api.pass-register": [pass_registry("name"), pass_registry("list"),
                          pass_registry("function"), pass_registry("unregister")],
    "il.cpp": [cpp_fails("run")],
    "il.string": [il('print(src=a | | msg="open);'), il('print(src=a | | msg="\\u12");'),
                  il('print(src=a | | msg="\\ud800");')],
    "il.character": [il("relu(src='a' | |);"), il("relu(| |);\n  x #y", preprocessor="pcpp")],
    "il.number": [il("relu(| | x=1x);"), il("relu(| | x=-x);")],
    "il.array": [il("relu(| | x=[null]);"), il("relu(| | x=[[1]]);"), il("relu(| | x=[1;);")],
    "il.syntax": [il("|"), il("r: (| |);"), il("relu |"), il("relu(= |"), il("relu(src=a x"),
                  il("relu(src=1 | |);"), il("relu(| | x=)")],
    "il.include": [il('#include <x\n', preprocessor="pcpp")],
    "gen.keys": [gen({"bad.yaml": "bad:\n  1: x\n"})],
    "gen.rule": [gen(optimizers={"cpu.yaml": FOLD_RULE.format(names="w")}),
                 gen(optimizers={"cpu.yaml": FOLD_RULE.format(names="w-x")}),
                 gen(optimizers={"cpu.yaml": FOLD_RULE.format(names="w, w")})],
    "gen.tensor": [gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in:\n"
                                    "    - {arg_name: src, min: 2}\n"})],
    "gen.param": [gen({"bad.yaml": "bad:\n  arch: none\n  params:\n"
                                   "    s: {type: [a, 1]}\n"}),
                  gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: {src: {}}\n  params:\n"
                                   "    n: {type: \"int[m]\"}\n"})],
    "gen.variant": [gen({"bad.yaml": "bad:\n  arch: none\n  pre_run: x = 1\n"
                                     "bad_cpu:\n  inherits: bad\n  arch: cpu\n  pre_run: y = 1\n"}),
                    gen({"bad.yaml": "bad:\n  arch: none\n  drop_checks: [x]\n"})],
    "gen.structure": [gen({"bad.yaml": "- 1\n"}),
                      gen({"bad.yaml": "bad:\n  arch: none\n  tensors_in: [x]\n"}),
                      gen({"bad.yaml": "bad:\n  arch: none\n  params:\n    a: {arg_name: b}\n"})],
}


def internal_error():
    from unittest import mock

    from lightnet import Context

    def bug(*args, **kwargs):
        raise RuntimeError("planted bug")
    with mock.patch.object(Context, "init", bug):
        return cli("lightnet.cli", [EXAMPLES / "example.json"])


def pcpp_crash():
    from unittest import mock

    import pcpp

    from lightnet.frontends.il import to_ir

    def crash(self, *args, **kwargs):
        raise IndexError("list index out of range")
    with mock.patch.object(pcpp.Preprocessor, "write", crash):
        return message(to_ir, "relu(|a|);", filename="m.net", preprocessor="pcpp")


# Tests -------------------------------------------------------------------------------------


def test_every_documented_error_has_a_trigger_and_every_trigger_a_doc_entry():
    assert sorted(set(ENTRIES) - set(TRIGGERS)) == [], "documented errors without a trigger"
    assert sorted(set(TRIGGERS) - set(ENTRIES)) == [], "triggers without a doc entry"


@pytest.mark.parametrize("key", sorted(TRIGGERS))
def test_documented_message_is_the_real_one(key, tmp_path):
    if key not in ENTRIES:
        pytest.fail(f"{key} is not documented in docs/errors.md")
    actual = TRIGGERS[key](tmp_path)
    example = ENTRIES[key].example
    assert pattern(example).fullmatch(actual), (
        f"docs/errors.md, {key}:\n  documented: {example}\n  actual:     {actual}")


@pytest.mark.parametrize("key, i", [(k, i) for k, fs in ALSO.items() for i in range(len(fs))])
def test_other_forms_are_real_ones(key, i, tmp_path):
    actual = ALSO[key][i](tmp_path)
    forms = [ENTRIES[key].example, *ENTRIES[key].forms]
    assert any(pattern(form).search(actual) for form in forms), (
        f"docs/errors.md, {key}: no 'Also' form matches\n  actual: {actual}\n  forms: {forms}")


# Coverage of the code ----------------------------------------------------------------------

# The argument holding the message, by the callable making the error.
MESSAGE_ARG = {"LightNetError": 0, "ILError": 0, "DescriptionError": 3, "RenderError": 0,
               "UserError": 0, "ArgumentTypeError": 0}


def _fragments(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parts = [node.value]
    elif isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
    elif isinstance(node, ast.BinOp):
        return _fragments(node.left) + _fragments(node.right)
    else:
        return []
    stripped = (p.strip(" :,.'\"()") for p in parts)
    return [p for p in stripped if len(re.sub(r"\W", "", p)) >= 4]


def error_sites():
    """(file:line, constant fragments of the message) of every user error the
    code makes."""
    paths = [p for p in sorted((ROOT / "lightnet").rglob("*.py"))
             if "auto" not in p.parts and "onnx" not in p.parts
             and not p.name.startswith("onnx")]
    paths += sorted((ROOT / "generator").rglob("*.py"))
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            args = node.args
            if name in MESSAGE_ARG and len(args) > MESSAGE_ARG[name]:
                messages = [args[MESSAGE_ARG[name]]]
            elif name == "error" and (path.name == "il.py" or path.parent.name == "generator") and args:
                messages = [args[0] if path.name == "il.py" else args[-1]]
            elif name == "fail" and path.name == "checks.py" and len(args) > 2:
                messages = [args[1], args[2]]  # the rule and what was expected
            else:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            yield where, [f for m in messages for f in _fragments(m)]


def test_the_scan_sees_the_errors():
    sites = list(error_sites())
    assert len(sites) > 150
    assert any(w.startswith("lightnet/ir/checks.py") for w, _ in sites)
    assert any(w.startswith("generator/ops.py") for w, _ in sites)


def test_every_error_in_the_code_is_documented():
    texts = {key: "\n".join([e.example, *e.forms]) for key, e in ENTRIES.items()}
    missing = []
    for where, fragments in error_sites():
        if fragments and not any(all(f in text for f in fragments) for text in texts.values()):
            missing.append(f"{where}: {fragments}")
    assert missing == [], "errors not in docs/errors.md (add an entry or an 'Also' form):\n" + \
        "\n".join(missing)


def test_doc_groups():
    groups = {e.group for e in ENTRIES.values()}
    assert {"IR", "Op checks", "Compile", "Weights", "Memory", "ONNX import", "CLI", "IL",
            "Generator"} <= groups
