"""Hostile ONNX models: a few bytes asking for terabytes of constant folding.

Evaluating constants before the run is bounded by the fold limit
(lightnet.ir.limits.FoldBudget): a node past it is not folded but mapped to an op
computed when the model runs, which the memory limit then accepts or refuses
with its one-line error. Each case is a model of a few hundred bytes that an
unbounded fold would hang on (a reduction of 10**12 elements) or run out of
memory with; values that do fold are checked against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import Context, LightNetError, Session  # noqa: E402
from lightnet.frontends import onnx as onnx2ln  # noqa: E402
from lightnet.ir import limits
from tests.frontends.onnxutil import init  # noqa: E402
from tests.fuzz.onnx_mutation import CATCH_ALL  # noqa: E402
from tests.helpers import assert_outputs_close, run_model  # noqa: E402
from tests.irbuild import conv_bn_relu  # noqa: E402

HUGE = [100_000, 100_000, 100]  # 10**12 elements: 4 TB of float32
LIMIT = "1G"


def ones_of_shape(shape_name, out, dtype=np.float32):
    return helper.make_node("ConstantOfShape", [shape_name], [out],
                            value=numpy_helper.from_array(np.ones(1, dtype)))


def model(nodes, inits, inputs=(), opset=13):
    graph = helper.make_graph(
        nodes, "hostile", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                           for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def session(m, **kwargs) -> Session:
    """A Session of `m` (saved as hostile.onnx) on the cpu, with a memory limit of 1G."""
    onnx.save(m, "hostile.onnx")
    return Session("hostile.onnx", memory_limit=LIMIT, target="cpu", **kwargs)


def refusal(m) -> str:
    """The one line a Session of `m` is refused with."""
    with pytest.raises(LightNetError) as e:
        session(m)
    message = str(e.value)
    assert "\n" not in message
    return message


def assert_over_memory_limit(m):
    assert refusal(m).endswith(f"more than the limit of {2**30} bytes (--memory-limit)")


def test_a_reduction_of_a_huge_constant_is_left_to_the_run_and_refused():
    """Issue #26's model: ConstantOfShape [1e5, 1e5, 100] into a ReduceSum hung
    folding a 10**12-element sum; the sum is now a reduce op, refused at once."""
    m = model([ones_of_shape("s", "c"), helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0)],
              [init("s", np.array(HUGE, np.int64))])
    ir, _ = onnx2ln.convert(m)
    assert [op["optype"] for op in ir["ops"]] == ["create", "reduce", "reshape"]
    assert_over_memory_limit(m)


@pytest.mark.parametrize("case", ["expand", "tile", "range", "gather", "outer-add",
                                  "reshape-of-view"])
def test_folds_whose_result_would_be_huge_are_left_to_the_run(case):
    s = init("s", np.array(HUGE, np.int64))
    if case == "expand":
        nodes = [helper.make_node("Expand", ["one", "s"], ["y"])]
        inits = [s, init("one", np.ones(1, np.float32))]
    elif case == "tile":
        nodes = [helper.make_node("Tile", ["one", "r"], ["y"])]
        inits = [init("one", np.ones((1, 1), np.float32)),
                 init("r", np.array([10**6, 10**6], np.int64))]
    elif case == "range":
        nodes = [helper.make_node("Range", ["a", "b", "d"], ["y"])]
        inits = [init("a", np.array(0, np.int64)), init("b", np.array(10**12, np.int64)),
                 init("d", np.array(1, np.int64))]
    elif case == "gather":  # 10**12 indices of a ConstantOfShape
        nodes = [ones_of_shape("s2", "i", np.int64),
                 helper.make_node("Gather", ["data", "i"], ["y"])]
        inits = [init("s2", np.array([10**6, 10**6], np.int64)),
                 init("data", np.arange(4, dtype=np.float32))]
    elif case == "outer-add":  # [1e6, 1] + [1, 1e6]
        nodes = [ones_of_shape("sa", "a"), ones_of_shape("sb", "b"),
                 helper.make_node("Add", ["a", "b"], ["y"])]
        inits = [init("sa", np.array([10**6, 1], np.int64)),
                 init("sb", np.array([1, 10**6], np.int64))]
    else:  # a reshape of a broadcast view would copy it
        nodes = [ones_of_shape("s", "c"), helper.make_node("Reshape", ["c", "t"], ["y"])]
        inits = [s, init("t", np.array([10**6, 10**6], np.int64))]
    m = model(nodes, inits)
    if case == "range":  # not folded: an arange whose length no tensor can have
        assert refusal(m) == (
            "hostile.onnx: op 'y' (arange): param 'step': check: expected "
            "shapes.arange_len(start, stop, step) <= 2**31 - 1 (the length fits a "
            "TensorLight dimension (int32)), found start=0.0, stop=1000000000000.0, step=1.0")
    else:
        assert_over_memory_limit(m)


def test_an_unfolded_range_27_accumulating_in_float16_is_refused():
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["y"], stash_type=10)]
    inits = [init("a", np.array(0, np.float16)), init("b", np.array(60000, np.float16)),
             init("d", np.array(1, np.float16))]
    with pytest.raises(LightNetError) as e:
        session(model(nodes, inits, opset=27), fold_limit=1000)
    assert str(e.value).endswith("Range-27): stash_type 10 (only 1, float)" + ran_out(1000))


def test_the_fold_limit_is_spent_across_the_whole_import():
    """Forty sums of 4M-element constants (of forty shapes: equal ones would fold
    once): each is small enough to fold, all of them are not; past the limit they
    are reduce ops, and the values agree."""
    nodes, inits = [], []
    for k in range(40):
        inits.append(init(f"s{k}", np.array([2048, 2048 - k], np.int64)))
        nodes += [ones_of_shape(f"s{k}", f"c{k}"),
                  helper.make_node("ReduceSum", [f"c{k}"], [f"r{k}"], keepdims=0)]
    nodes.append(helper.make_node("Sum", [f"r{k}" for k in range(40)], ["y"]))
    m = model(nodes, inits)
    ir, _ = onnx2ln.convert(m)
    reduces = sum(op["optype"] == "reduce" for op in ir["ops"])
    folded = 40 - reduces  # each reads 4M elements and may write as many
    # Folds so large may spend half the limit (the other half is kept for small ones).
    assert 0 < folded <= limits.DEFAULT_FOLD_LIMIT // 2 // (2 * 2048 * 2000) < 40
    (y,) = session(m).run({}).values()
    assert y == sum(2048 * (2048 - k) for k in range(40))


def test_layers_computing_the_same_constants_fold_them_once():
    """BEiT's pattern: each of its layers computes the same relative position
    index from constants of its own (equal values, other names). Eight layers
    each add (i - j + n - 1), a [256, 256] table computed from a Range, to the
    input: one layer's folding fits a fold limit of 1M elements, eight would
    not; the seven others reuse the first's tables, so all fold and only the
    adds run."""
    n, layers = 256, 8
    nodes, h = [], "x"
    for k in range(layers):
        def const(name, value):
            return helper.make_node("Constant", [], [f"{name}{k}"],
                                    value=numpy_helper.from_array(np.array(value, np.int64)))
        nodes += [const("start", 0), const("stop", n), const("step", 1),
                  const("rows", [1]), const("cols", [0]), const("shift", n - 1),
                  helper.make_node("Range", [f"start{k}", f"stop{k}", f"step{k}"], [f"r{k}"]),
                  helper.make_node("Unsqueeze", [f"r{k}", f"rows{k}"], [f"i{k}"]),
                  helper.make_node("Unsqueeze", [f"r{k}", f"cols{k}"], [f"j{k}"]),
                  helper.make_node("Sub", [f"i{k}", f"j{k}"], [f"d{k}"]),
                  helper.make_node("Add", [f"d{k}", f"shift{k}"], [f"index{k}"]),
                  helper.make_node("Cast", [f"index{k}"], [f"bias{k}"], to=TensorProto.FLOAT),
                  helper.make_node("Add", [h, f"bias{k}"], ["y" if k == layers - 1 else f"h{k}"])]
        h = f"h{k}"
    m = model(nodes, [], inputs=[("x", [n, n])])
    ir, _ = onnx2ln.convert(m, fold_limit=1_000_000)
    assert sorted({op["optype"] for op in ir["ops"]}) == ["create", "elew", "input"]
    assert sum(op["optype"] == "elew" for op in ir["ops"]) == layers
    x = np.random.default_rng(3).standard_normal((n, n), dtype=np.float32)
    (y,) = session(m, fold_limit=1_000_000).run({"x": x}).values()
    i, j = np.indices((n, n))
    np.testing.assert_allclose(y, x + layers * (i - j + n - 1), rtol=1e-6)


def test_the_fold_limit_is_settable():
    m = model([ones_of_shape("s", "c"), helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0)],
              [init("s", np.array([4, 5], np.int64))])
    for fold_limit, optypes in ((None, ["create"]), (16, ["create", "reduce", "reshape"]),
                                ("1K", ["create"])):
        ir, _ = onnx2ln.convert(m, fold_limit=fold_limit)
        assert [op["optype"] for op in ir["ops"]] == optypes
        (y,) = session(m, fold_limit=fold_limit).run({}).values()
        assert y == 20
    with pytest.raises(LightNetError, match=r"^fold limit: expected a number of elements"):
        onnx2ln.convert(m, fold_limit="lots")


def test_compile_time_folding_of_weights_stops_at_the_fold_limit():
    """A batchnorm is folded into the conv's weights while the fold limit lasts;
    past it, the conv reads the batchnorm's statistics and applies them when it
    runs, with the same results."""
    model_doc, feeds, _ = conv_bn_relu(np.random.default_rng(11))
    folded, ctx = run_model(model_doc, feeds, weights={})
    (conv,) = [op for op in ctx.ops if op.optype == "conv2d_cpu"]
    assert "bn_scale" not in conv.tensors_in
    unfolded = Context(fold_limit=0)
    unfolded.init(model_doc)
    unfolded.compile("cpu", weights={})
    (conv,) = [op for op in unfolded.ops if op.optype == "conv2d_cpu"]
    assert "bn_scale" in conv.tensors_in
    unfolded.load()
    for name, value in feeds.items():
        unfolded.set_data(name, value)
    unfolded.run()
    assert_outputs_close({n: unfolded.get_data(n) for n in unfolded.outputs}, folded)


def test_cli_fold_limit(capsys):
    from lightnet.cli import main

    m = model([ones_of_shape("s", "c"), helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0)],
              [init("s", np.array(HUGE, np.int64))])
    path = "hostile.onnx"
    onnx.save(m, path)
    assert main([str(path), "-t", "cpu", "--memory-limit", LIMIT]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("more than the limit of 1073741824 bytes "
                                             "(--memory-limit)")
    assert main(["info", str(path), "--fold-limit", "2K", "--memory-limit", LIMIT]) == 1
    with pytest.raises(SystemExit) as e:
        main([str(path), "--fold-limit", "lots"])
    assert e.value.code == 2
    assert "expected a number of elements" in capsys.readouterr().err


def ran_out(limit: int) -> str:
    """What an import error adds when the fold limit left a shape or value uncomputed."""
    return (f": the fold limit ({limit} elements) ran out before it could be computed; "
            "raise it with --fold-limit or fold_limit=")


def computed_reshape_model():
    """x [2, 3, 4] -> Relu(Reshape(x, Concat(Slice(Shape(x), 0, 1), [-1]))): the
    reshape's shape, which must be a constant, is computed by nodes folding must
    evaluate (a Slice and a Concat of a few elements each)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["b"]),
             helper.make_node("Concat", ["b", "minus1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    inits = [init("zero", np.array([0], np.int64)), init("one", np.array([1], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    return model(nodes, inits, inputs=[("x", [2, 3, 4])])


def test_a_shape_the_fold_limit_left_uncomputed_says_so():
    """A limit of 8 elements folds the Slice but not the Concat: the Reshape's shape
    is not known, and the error says why; a limit of 1K imports and runs it."""
    m = computed_reshape_model()
    with pytest.raises(LightNetError) as e:
        onnx2ln.convert(m, fold_limit=8)
    assert str(e.value) == ("unsupported ONNX model: 1 operator(s) cannot be imported: Reshape "
                            "(opset 13, Reshape-13): shape 't' must be a constant" + ran_out(8))
    # At 0 the Concat is not folded either, nor its shape inferred: it is named too.
    with pytest.raises(LightNetError) as e:
        onnx2ln.convert(m, fold_limit=0)
    assert str(e.value) == (
        "unsupported ONNX model: 2 operator(s) cannot be imported: Concat (opset 13, "
        "Concat-13): the shape of output 't' is unknown" + ran_out(0) + " | Reshape (opset 13, "
        "Reshape-13): shape 't' must be a constant" + ran_out(0))
    x = np.random.default_rng(5).standard_normal((2, 3, 4), dtype=np.float32)
    (y,) = session(m, fold_limit="1K").run({"x": x}).values()
    np.testing.assert_array_equal(y, np.maximum(x.reshape(2, 12), 0))


def test_large_folds_leave_half_the_fold_limit_to_shape_computations():
    """Sums of three 5000-element constants (about 10K elements touched each) come
    before the computed Reshape, with a fold limit they would spend to within 5
    elements, leaving too few for the Concat computing the Reshape's shape. Folds
    larger than limits.SMALL_FOLD may spend only half the limit: one sum is folded,
    two are left to the run, and the Reshape's shape is computed."""
    m = computed_reshape_model()
    nodes = list(m.graph.node)
    for k in range(3):
        m.graph.initializer.append(init(f"s{k}", np.array([50, 100 + k], np.int64)))
        nodes[:0] = [ones_of_shape(f"s{k}", f"c{k}"),
                     helper.make_node("ReduceSum", [f"c{k}"], [f"t{k}"], keepdims=0)]
    nodes[-1] = helper.make_node("Relu", ["r"], ["pos"])
    nodes += [helper.make_node("Sum", ["t0", "t1", "t2"], ["total"]),
              helper.make_node("Mul", ["pos", "total"], ["y"])]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    ir, _ = onnx2ln.convert(m, fold_limit=30_320)
    assert sum(op["optype"] == "reduce" for op in ir["ops"]) == 2
    x = np.random.default_rng(7).standard_normal((2, 3, 4), dtype=np.float32)
    (y,) = session(m, fold_limit=30_320).run({"x": x}).values()
    np.testing.assert_allclose(y, np.maximum(x.reshape(2, 12), 0) * (3 * 5000 + 150),
                               rtol=1e-6)


def test_a_shape_inference_could_not_give_past_the_fold_limit_says_so():
    """The Reshape's shape [2, -1] (an initializer) is given to ONNX shape inference
    only while the fold limit lasts; without it the Gather after the Reshape has no
    output shape, and the error says why."""
    nodes = [helper.make_node("Reshape", ["x", "t"], ["r"]),
             helper.make_node("Gather", ["r", "i"], ["y"], axis=1)]
    inits = [init("t", np.array([2, -1], np.int64)), init("i", np.array([0, 5], np.int64))]
    m = model(nodes, inits, inputs=[("x", [2, 3, 4])])
    with pytest.raises(LightNetError) as e:
        onnx2ln.convert(m, fold_limit=3)
    assert str(e.value) == ("unsupported ONNX model: 1 operator(s) cannot be imported: Gather "
                            "(opset 13, Gather-13): the shape of output 'y' is unknown"
                            + ran_out(3))
    x = np.random.default_rng(6).standard_normal((2, 3, 4), dtype=np.float32)
    (y,) = session(m, fold_limit=4).run({"x": x}).values()
    np.testing.assert_array_equal(y, x.reshape(2, 12)[:, [0, 5]])


def test_an_error_the_fold_limit_did_not_cause_does_not_name_it():
    """The fold limit leaves a sum to the run, and a Reshape's shape is a graph
    input: that it is not a constant has nothing to do with the limit."""
    nodes = [ones_of_shape("s", "c"), helper.make_node("ReduceSum", ["c"], ["total"], keepdims=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Mul", ["r", "total"], ["y"])]
    m = model(nodes, [init("s", np.array([4, 5], np.int64))], inputs=[("x", [2, 3, 4])])
    m.graph.input.append(helper.make_tensor_value_info("shape", TensorProto.INT64, [2]))
    with pytest.raises(LightNetError) as e:
        onnx2ln.convert(m, fold_limit=16)
    assert str(e.value) == ("unsupported ONNX model: 1 operator(s) cannot be imported: Reshape "
                            "(opset 13, Reshape-13): shape 'shape' must be a constant")


def test_cli_says_the_fold_limit_ran_out(capsys):
    from lightnet.cli import main
    from lightnet.frontends.onnx.cli import main as onnx2ln_main

    onnx.save(computed_reshape_model(), "computed.onnx")
    detail = ("unsupported ONNX model: 1 operator(s) cannot be imported: Reshape (opset 13, "
              "Reshape-13): shape 't' must be a constant" + ran_out(8))
    for prog, command in (("lightnet", main), ("onnx2ln", onnx2ln_main)):
        assert command(["computed.onnx", "--fold-limit", "8"]) == 1
        out, err = capsys.readouterr()
        assert err == f"{prog}: error: {detail}\n"
    assert main(["computed.onnx", "-t", "cpu", "--fold-limit", "1K"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("y: float32[2, 12]")


# What the mutation fuzzer found (tests/fuzz/onnx_mutation.py) ---------------------------


def conv_model(**changes):
    """x [1, 1, 4, 4] -> Conv with a 1x1 weight W: a model to break."""
    w = init("W", np.ones((1, 1, 1, 1), np.float32))
    node = helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[1, 1])
    m = model([node], [w], inputs=[("x", [1, 1, 4, 4])])
    for change in changes.values():
        change(m)
    return m


def import_error(m) -> str:
    with pytest.raises(LightNetError) as e:
        onnx2ln.convert(m)
    message = str(e.value)
    assert "\n" not in message and not CATCH_ALL.search(message)
    return message


def test_an_initializer_whose_data_does_not_fit_its_dims():
    """numpy_helper.to_array's ValueError escaped (raw data cut, dims grown)."""
    m = conv_model(dims=lambda m: m.graph.initializer[0].dims.extend([2]))
    assert import_error(m) == ("initializer 'W': its data is not float [1, 1, 1, 1, 2]: cannot "
                               "reshape array of size 1 into shape (1,1,1,1,2) (an invalid "
                               "ONNX model)")
    m = conv_model(raw=lambda m: setattr(m.graph.initializer[0], "raw_data", b"\0\0"))
    assert import_error(m).startswith("initializer 'W': its data is not float [1, 1, 1, 1]:")


@pytest.mark.parametrize("data_type", [0, -1, 100])
def test_an_initializer_of_no_tensor_type(data_type):
    """TypeError (UNDEFINED) and KeyError (-1) escaped from to_array."""
    m = conv_model(t=lambda m: setattr(m.graph.initializer[0], "data_type", data_type))
    assert import_error(m) == (f"initializer 'W': data type {data_type} is not an ONNX "
                               "tensor type (an invalid ONNX model)")


def test_an_initializer_with_negative_dims():
    m = conv_model(t=lambda m: m.graph.initializer[0].dims.__setitem__(0, -1))
    assert import_error(m) == ("initializer 'W': dims [-1, 1, 1, 1]: expected dims >= 0 (an "
                               "invalid ONNX model)")


def test_an_attribute_of_the_wrong_type():
    """A Conv's kernel_shape as an INT: TypeError 'int' object is not iterable."""
    def kernel_shape_int(m):
        del m.graph.node[0].attribute[:]
        m.graph.node[0].attribute.append(helper.make_attribute("kernel_shape", 1))
    assert import_error(conv_model(k=kernel_shape_int)) == (
        "node #0 (output 'y') (Conv-11): attribute 'kernel_shape' must be INTS, found INT "
        "(an invalid ONNX model)")


def test_a_node_without_its_inputs():
    """A ReduceMean without an input: IndexError in the layer-norm fusion's matcher."""
    m = model([helper.make_node("ReduceMean", [], ["y"])], [])
    assert import_error(m) == ("node #0 (output 'y') (ReduceMean-13): expected 1 inputs, "
                               "found 0 (an invalid ONNX model)")


@pytest.mark.parametrize("node, message", [
    (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5]),
     "axis 5 is out of range for rank 2"),
    (helper.make_node("Transpose", ["x"], ["y"], perm=[1, 1]),
     "perm [1, 1] of a rank-2 input (not a permutation)"),
    (helper.make_node("Split", ["x"], ["y", "z"], axis=3), "axis 3 is out of range for rank 2"),
])
def test_axes_out_of_range(node, message):
    """IndexError: tuple index out of range (Transpose, Split)."""
    m = model([node], [], inputs=[("x", [2, 4])])
    assert message in import_error(m)


def test_a_required_attribute_missing():
    """A Slice-1 without its starts: TypeError int(None) in the handler."""
    m = model([helper.make_node("Slice", ["x"], ["y"], ends=[1])], [], inputs=[("x", [2, 4])],
              opset=9)
    assert import_error(m) == ("node #0 (output 'y') (Slice-1): required attribute 'starts' is "
                               "missing (an invalid ONNX model)")


def test_no_unbounded_data_propagation_in_onnx_shape_inference():
    """ONNX's shape inference with data propagation computed an Expand to the
    shape of a [2**31 - 1] input in C++: 20 GB, then std::bad_alloc. The folding
    computes shape values instead, within the fold limit."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Expand", ["one", "s"], ["e"]),
             helper.make_node("Concat", ["e", "e"], ["y"], axis=0)]
    m = model(nodes, [init("one", np.ones(1, np.int64))], inputs=[("x", [2**31 - 1])])
    assert_over_memory_limit(m)


def test_a_required_input_left_empty():
    """A Flatten reading '': numpy folded None into an object array, then
    AttributeError in uniform_value."""
    m = model([helper.make_node("Flatten", [""], ["y"])], [])
    assert import_error(m) == ("node #0 (output 'y') (Flatten-13): input 0 ('input') is "
                               "required, and empty (an invalid ONNX model)")


def test_a_constant_of_strings():
    m = model([helper.make_node("Identity", ["s"], ["y"])],
              [helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"b"])])
    assert import_error(m).endswith("graph output (opset 13): constant 'y' of strings")


def test_split_num_outputs_must_be_the_outputs():
    """num_outputs 10**12 for 2 outputs: a list of 10**12 sizes, MemoryError."""
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=10**12)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info(
            n, TensorProto.FLOAT, None) for n in "ab"])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert import_error(m) == ("node #0 (output 'a') (Split): num_outputs 1000000000000 for "
                               "2 outputs (an invalid ONNX model)")


def test_pad_pads_must_match_its_axes():
    """Pad-18 with 2 axes and 2 pads: IndexError."""
    node = helper.make_node("Pad", ["x", "p", "", "a"], ["y"])
    m = model([node], [init("p", np.array([1, 1], np.int64)),
                       init("a", np.array([0, 1], np.int64))], inputs=[("x", [2, 4])],
              opset=18)
    assert "Pad-18): 2 pads for 2 axes (expected 4)" in import_error(m)


@pytest.mark.parametrize("axes", [None, [2, 3]])
def test_resize_sizes_must_match_the_axes(axes):
    """Resize with 3 sizes for 2 axes (or a rank-4 input): IndexError."""
    node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="nearest",
                            **({} if axes is None else {"axes": axes}))
    m = model([node], [init("s", np.array([4, 4, 4], np.int64))],
              inputs=[("x", [1, 1, 2, 2])], opset=19)
    assert f"Resize-19): 3 sizes for {4 if axes is None else 2} axes" in import_error(m)


def test_a_resize_too_large_to_compare_with_lightnets_ops():
    """The importer resamples a row of each axis to choose upsample or resize: a
    Resize to 2**31 rows made a 2**31-element row (16 GB)."""
    node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="nearest")
    m = model([node], [init("s", np.array([1, 1, 2**31, 2], np.int64))],
              inputs=[("x", [1, 1, 2, 2])], opset=19)
    assert import_error(m) == (
        "unsupported ONNX model: 1 operator(s) cannot be imported: Resize (opset 19, "
        "Resize-19): output [1, 1, 2147483648, 2]: comparing its coordinates with LightNet's "
        "ops' would touch 2147483650 elements" + ran_out(limits.DEFAULT_FOLD_LIMIT))
