"""The ONNX package's PyTorch-exported test models (pytorch-converted, pytorch-operator)
through the importer and lightnet.Session: every case that imports must pass.

KNOWN_FAILURES lists cases that import but compute wrong values because of a bug
in an op description or kernel (not in the importer), with the reason; it is
empty now. MAY_BE_UNSUPPORTED lists the cases the importer cannot map today, with
the reason (empty too since the 3-D convolutions import): any other case must import,
so a regression in the importer or in an op it relies on shows up here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")

from lightnet.errors import LightNetError  # noqa: E402
from lightnet.frontends import onnx_conformance as conformance  # noqa: E402

KNOWN_FAILURES: dict[str, str] = {}

MAY_BE_UNSUPPORTED: dict[str, str] = {}

CASES = conformance.cases()


def test_the_suites_are_found():
    names = {c.name for c in CASES}
    assert len(CASES) > 100
    assert {"test_Conv2d", "test_operator_addmm"} <= names
    assert set(MAY_BE_UNSUPPORTED) <= names and set(KNOWN_FAILURES) <= names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        result = conformance.run_case(case)
    if result.status == "unsupported":
        assert case.name in MAY_BE_UNSUPPORTED, f"no longer imports: {result.detail}"
        pytest.skip(f"unsupported: {MAY_BE_UNSUPPORTED[case.name]}")
    if case.name in KNOWN_FAILURES:
        if result.status == "passed":
            pytest.fail("known failure now passes: remove it from KNOWN_FAILURES")
        pytest.xfail(KNOWN_FAILURES[case.name])
    assert result.status == "passed", result.detail


def test_main_prints_the_counts(capsys):
    assert conformance.main(["-k", "test_Conv2d_"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("passed: ")
    assert "failed: 0" in out and "unsupported: 0" in out


# --- the backend node tests -----------------------------------------------------------

# Passed with onnx 1.23: a floor, raised as operators are added.
NODE_PASS_FLOOR = 1029


def test_node_tests_give_no_wrong_result_and_no_failure_after_import():
    """Every node test the importer accepts must run and give the declared dtype, shape
    and values: a refusal at import is the only way not to pass."""
    tests = conformance.node_cases()
    assert len(tests) > 1800
    op_types = conformance.node_op_types(tests)
    results = [conformance.run_node_case(c, op_types[c.name]) for c in tests]
    failed = [f"{r.name}: {r.detail}" for r in results if r.status == "failed"]
    assert not failed, "\n".join(failed)
    passed = {r.name for r in results if r.status == "passed"}
    assert len(passed) >= NODE_PASS_FLOOR
    # Scalar outputs, int64 and float16 inputs, as the models declare them.
    assert {"test_matmul_1d_1d", "test_size", "test_size_example", "test_gather_0",
            "test_max_int64", "test_add_uint64", "test_max_float16",
            "test_dropout_default_ratio"} <= passed


def test_node_op_types_name_the_op_under_test():
    tests = [c for c in conformance.node_cases() if c.name.startswith("test_softmax_axis_0")]
    op_types = conformance.node_op_types(tests)
    assert op_types == {"test_softmax_axis_0": "Softmax", "test_softmax_axis_0_expanded": "Softmax",
                        "test_softmax_axis_0_expanded_ver18": "Softmax"}


def test_main_prints_node_counts_per_op_type(capsys):
    assert conformance.main(["--suite", "node", "-k", "test_size"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op", "type", "passed", "failed", "refused"]
    assert lines[1].split() == ["Size", "2", "0", "0"]
    assert lines[-1] == "node tests: passed: 2  failed: 0  refused: 0  (of 2)"


def test_a_parameter_fed_as_graph_input_is_fixed_to_its_data_set_value():
    """A graph input the importer needs constant (ReduceL1's axes) is made an
    initializer of the value every data set gives it; data sets that disagree on it
    leave the case refused."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceL1", ["x", "axes"], ["y"], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.array([[1, -2, 3], [-4, 5, 6]], np.float32)
    axes = np.array([1], np.int64)
    want = np.array([6, 15], np.float32)
    assert conformance.run_model(model, [("a", [x, axes], [want]), ("b", [x, axes], [want])],
                                 refused=LightNetError) == ("passed", "")
    status, detail = conformance.run_model(
        model, [("a", [x, axes], [want]), ("b", [x, np.array([0], np.int64)], [want])],
        refused=LightNetError)
    assert status == "refused" and "axes 'axes' must be a constant" in detail
    status, detail = conformance.run_model(
        model, [("a", [x, axes], [np.array([6, 16], np.float32)])], refused=LightNetError)
    assert status == "failed" and "max abs error 1" in detail
