"""Fuzzing the IL front-end: mutated examples/fire.net either converts to IR
or raises ILError (and only ILError) at `file:line[:col]`.

Mutations work on the text: characters deleted, inserted or replaced (biased
to the ones IL gives meaning to), lines dropped, duplicated or swapped,
numbers made huge, negative or malformed, strings given bad escapes and lone
surrogates, directives inserted (#include of a missing file or of the file
itself, #error, #if without #endif, a broken #define), the text cut short.
When it converts, the IR goes through the runtime under the IR fuzz contract
(fuzzutil.run_fuzzed).
"""

from __future__ import annotations

import re
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import CI_EXAMPLES, EXAMPLES, SLOW_EXAMPLES, deadline, fuzz_settings, run_fuzzed
from lightnet import LightNetError
from lightnet.frontends.il import ILError, to_ir

SOURCE = (EXAMPLES / "fire.net").read_text(encoding="utf-8")
FILENAME = "fire.net"
PREPROCESSORS = ["pcpp", "pcpp", "pcpp", "none"] + (["cpp"] if shutil.which("cpp") else [])
SIGNIFICANT = '()|=,;[]:-#"\\/*\n 0123456789.eE_xX'
DIRECTIVES = ['#include "missing.h"', f'#include "{FILENAME}"', "#error boom", "#warning careful",
              "#if 1", "#endif", "#else", "#define", "#define F(x", "#define CLASSES 0",
              "#define CLASSES 2147483648", "#undef CONV", "#line 7", '#line 99 "other.net"',
              "#pragma once", "#bogus", "#", "##", "#include <stdio.h>", "#if CLASSES/0",
              "#define CONV(a) CONV(a)"]
NUMBERS = ["0", "-1", "2147483647", "2147483648", "99999999999999999999", "1e999", "1e308",
           "0x10", "1.5", ".5", "1.", "1e", "007", "1_0", "NaN", "inf", "-0"]
STRINGS = ['""', '"\\u0000"', '"\\ud800"', '"\\q"', '"\\u12"', '"unterminated', '"a\\\nb"',
           '"{{7*7}}"', "\"__import__('os')\"", '"TL_HALF"', '"é"']


@st.composite
def mutated_sources(draw) -> str:
    text = SOURCE
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["delete", "insert", "replace", "line_drop", "line_dup",
                                    "line_swap", "number", "string", "directive", "cut",
                                    "ident"]))
        n = len(text)
        if how in ("delete", "insert", "replace"):
            i = draw(st.integers(0, n))
            k = draw(st.integers(1, 12))
            chars = draw(st.text(alphabet=st.sampled_from(SIGNIFICANT) | st.characters(),
                                 min_size=1, max_size=k))
            if how == "delete":
                text = text[:i] + text[i + k:]
            elif how == "insert":
                text = text[:i] + chars + text[i:]
            else:
                text = text[:i] + chars + text[i + len(chars):]
        elif how.startswith("line"):
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if how == "line_drop":
                del lines[i]
            elif how == "line_dup":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif how in ("number", "string", "ident"):
            pattern = {"number": r"(?<![\w.])\d+(\.\d+)?", "string": r'"[^"\n]*"',
                       "ident": r"\b[A-Za-z_]\w*\b"}[how]
            matches = list(re.finditer(pattern, text))
            if matches:
                m = draw(st.sampled_from(matches))
                values = {"number": NUMBERS, "string": STRINGS,
                          "ident": ["create", "nope", "CONV", "FIRE", "true", "null", "src",
                                    "dst", "__LINE__", "defined"]}[how]
                text = text[:m.start()] + draw(st.sampled_from(values)) + text[m.end():]
        elif how == "directive":
            lines = text.split("\n")
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(DIRECTIVES)))
            text = "\n".join(lines)
        else:
            text = text[:draw(st.integers(0, n))]
    return text


def check(source: str, preprocessor: str) -> None:
    try:
        with deadline():
            doc = to_ir(source, filename=FILENAME, preprocessor=preprocessor,
                        on_warning=lambda message: None)
    except ILError as e:
        message = str(e)
        assert "\n" not in message, message
        assert e.file is not None and e.line is not None, message
        assert re.match(rf"({re.escape(FILENAME)}|other\.net|missing\.h):\d+(:\d+)?: ",
                        message), message
        return
    except LightNetError as e:  # pragma: no cover - the failure message shows it
        pytest.fail(f"to_ir raised {type(e).__name__}, not ILError: {e}")
    run_fuzzed(doc)


@fuzz_settings(CI_EXAMPLES * 2 // 3)
@given(mutated_sources(), st.sampled_from(PREPROCESSORS))
def test_mutated_il(source, preprocessor):
    check(source, preprocessor)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutated_sources(), st.sampled_from(PREPROCESSORS))
def test_mutated_il_slow(source, preprocessor):
    check(source, preprocessor)


def test_the_unmutated_source_converts_and_runs():
    check(SOURCE, "pcpp")
