"""Fuzzing the IR: mutated models either run or are refused with LightNetError.

Starting from examples/example.json, examples/squeezenet.json, models built
with ModelBuilder and one model per op example, each case applies 1-3
mutations (dropped or renamed fields, wrong JSON types, unknown optypes,
dangling and duplicate names, cycles, huge or negative dims, NaN/inf params,
wrong array lengths, strings in number fields...) and runs the model through
init, compile, load and run. A refusal must be a LightNetError naming the op
and the field or arg (fuzzutil.refusal_problem); anything else, or an example
running past its deadline, fails. Models run under a 16 MiB memory limit, so
a mutation that makes a tensor big is refused before anything is allocated.

The default suite runs CI_EXAMPLES derandomized cases per test; `-m slow`
runs SLOW_EXAMPLES.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import (CI_EXAMPLES, FUZZ_MEMORY_LIMIT, SLOW_EXAMPLES, deadline, fuzz_settings,
                      mutated_docs, run_fuzzed)
from lightnet import Context, LightNetError

def check_doc(case):
    doc, kinds = case
    run_fuzzed(doc)


@fuzz_settings(CI_EXAMPLES)
@given(mutated_docs())
def test_mutated_ir(case):
    check_doc(case)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutated_docs())
def test_mutated_ir_slow(case):
    check_doc(case)


# JSON text --------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.\"])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w.\"])")
_TMP = Path(tempfile.mkdtemp(prefix="lightnet-fuzz-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


@st.composite
def mutated_texts(draw):
    """Model text: a (maybe mutated) document written as JSON, then damaged as
    text: NaN / Infinity / 1e999 for a number, a key given twice, a cut, a
    byte changed, or bytes that are not UTF-8."""
    doc, _ = draw(mutated_docs(count=st.integers(0, 1)))
    text = json.dumps(doc, indent=1, allow_nan=True)
    how = draw(st.sampled_from(["number", "duplicate_key", "cut", "byte", "not_utf8",
                                "as_is"]))
    if how == "number":
        numbers = list(_NUMBER.finditer(text))
        if numbers:
            m = draw(st.sampled_from(numbers))
            text = text[:m.start()] + draw(st.sampled_from(
                ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "nan", "0x10", "1_0",
                 "01", "+1", "1.", ".5", '"1"', "true", "null"])) + text[m.end():]
    elif how == "duplicate_key":
        keys = list(re.finditer(r'\n(\s*)("(?:name|optype|value|arg_name|params)": [^\n]*?),?\n',
                                text))
        if keys:
            m = draw(st.sampled_from(keys))
            text = text[:m.end() - 1] + m.group(1) + m.group(2) + ",\n" + text[m.end():]
    elif how == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif how == "byte":
        i = draw(st.integers(0, max(len(text) - 1, 0)))
        text = text[:i] + draw(st.characters(codec="utf-8")) + text[i + 1:]
    data = text.encode("utf-8", errors="surrogatepass")
    if how == "not_utf8":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) \
            + data[i:]
    return data


def check_text(data: bytes):
    path = _TMP / "model.json"
    path.write_bytes(data)
    run_fuzzed(path)


@fuzz_settings(CI_EXAMPLES // 3)
@given(mutated_texts())
def test_mutated_ir_text(data):
    check_text(data)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutated_texts())
def test_mutated_ir_text_slow(data):
    check_text(data)


# Targeted cases ---------------------------------------------------------------------------


def test_huge_dims_are_refused_before_allocating(monkeypatch):
    """A tensor beyond 2**40 elements is a shape error naming the op; one
    below it but beyond the memory limit is refused by the plan: neither
    allocates an arena."""
    monkeypatch.setattr(Context, "_alloc_arena",
                        lambda self, report: pytest.fail("an arena was allocated"))
    for dims, expected in (([2**31 - 1] * 3, "op 'c' (create): tensor_out 'dst': size: "),
                           ([2**20, 2**20, 2], "op 'c' (create): tensor_out 'dst': size: "),
                           ([2**20, 2**19], "the model needs 2199023255552 bytes of cpu "
                                            "memory, more than the limit of")):
        doc = {"ops": [{"name": "c", "optype": "create",
                        "tensors_out": [{"arg_name": "dst", "name": "t"}],
                        "params": [{"arg_name": "dtype", "value": "TL_FLOAT"},
                                   {"arg_name": "dims", "value": dims}]}]}
        message = run_fuzzed(doc)
        assert message is not None and expected in message


def test_lrn_with_a_huge_size_does_not_hang():
    doc = {"ops": [
        {"name": "x", "optype": "create", "tensors_out": [{"arg_name": "dst", "name": "x"}],
         "params": [{"arg_name": "dtype", "value": "TL_FLOAT"},
                    {"arg_name": "dims", "value": [1, 3, 1, 1]}]},
        {"name": "lrn1", "optype": "lrn", "tensors_in": [{"arg_name": "src", "name": "x"}],
         "tensors_out": [{"arg_name": "dst", "name": "y"}],
         "params": [{"arg_name": "size", "value": 2**24}]}]}
    ctx = Context(memory_limit=FUZZ_MEMORY_LIMIT)
    try:
        ctx.init(doc)
        ctx.compile("cpu")
    except LightNetError:
        return  # fixed by a bound on size
    with deadline(1):
        ctx.load()
        ctx.run()  # or fixed in the kernel: runs at once
