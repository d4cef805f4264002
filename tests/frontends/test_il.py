"""The IL front-end (lightnet.frontends.il, the il2json command)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lightnet.errors import LightNetError
from lightnet.frontends import il
from lightnet.frontends.il import format_ir, main, to_ir
from lightnet.ir import json_ir
from tests.frontends.ilutil import HAS_CPP, PREPROCESSORS, error, ops, params
from tests.helpers import python

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = """\
create(| dst=tensor1 | dtype="TL_FLOAT", dims=[2, 4], data=[1, 2, 3, 4, 5, 6, 7, 8], ran=[0, 0], from_file=false);
slice(src=tensor1 | dst=tensor2 | axis=1, start=1, len=3);
print(src=tensor2 | | msg="tensor2:");
"""
EXPECTED_PRINT = "tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"


def cli(argv, capsys, stdin=None, monkeypatch=None):
    """Run il2json in process: (exit status, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's usage errors
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


# -- the example model


def test_example_is_examples_example_json():
    doc = to_ir(EXAMPLE)
    assert doc == json.loads((ROOT / "examples/example.json").read_text())
    assert json.loads(format_ir(doc)) == doc
    json_ir.parse(doc, "<il>")  # valid IR


def test_example_runs_end_to_end():
    converted = python("-m", "lightnet.frontends.il", "-", stdin=EXAMPLE)
    assert converted.returncode == 0, converted.stderr
    result = python("-m", "lightnet", "-", stdin=converted.stdout)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(EXPECTED_PRINT)
    assert "info: run time:" in result.stdout


def test_output_is_deterministic_and_indented():
    text = format_ir(to_ir(EXAMPLE))
    assert text == format_ir(to_ir(EXAMPLE))
    assert text.splitlines()[:4] == ['{', '    "ops": [', "        {",
                                     '            "name": "create1",']
    assert format_ir({"ops": []}) == '{\n    "ops": []\n}\n'


# -- op names


def test_names_count_per_optype():
    names = [op["name"] for op in ops("a(||); b(||); a(||); a(||); b(||);")]
    assert names == ["a1", "b1", "a2", "a3", "b2"]


def test_explicit_names_and_generated_names_never_clash():
    names = [op["name"] for op in ops("conv1: relu(||); conv(||); relu(||); "
                                      "x: conv(||); conv(||);")]
    # conv's first generated name, conv1, is taken: the counter moves on.
    assert names == ["conv1", "conv2", "relu1", "x", "conv3"]
    assert "op name 'x' is used by an earlier op" in error("x: a(||); x: b(||);")
    assert "m.net:1:11: op name 'a1'" in error("a(||);    a1: b(||);")


# -- values


def test_numbers():
    p = params("x(| | a=1, b=-2, c=1.5, d=-0.25, e=1e3, f=2.5E-3, g=-1e+2, h=.5, i=3., "
               "j=- 7, k=[-1, 2.5, 1e-1], l=0);")
    assert p == {"a": 1, "b": -2, "c": 1.5, "d": -0.25, "e": 1000.0, "f": 0.0025,
                 "g": -100.0, "h": 0.5, "i": 3.0, "j": -7, "k": [-1, 2.5, 0.1], "l": 0}
    assert type(p["a"]) is int and type(p["e"]) is float


@pytest.mark.parametrize("pp", [*PREPROCESSORS, "none"])
def test_strings_and_escapes(pp):
    p = params(r'x(| | a="q\"uote", b="back\\slash", c="line\nbreak\ttab", d="\u00e9\u4e2d", '
               r'e="\ud83d\ude00", f="", g="a // not a comment /* nor this */", h="\/\r\b\f", '
               r'i="what??! ??= ???/", j="\?");', preprocessor=pp)
    assert p == {"a": 'q"uote', "b": "back\\slash", "c": "line\nbreak\ttab", "d": "é中",
                 "e": "\U0001F600", "f": "", "g": "a // not a comment /* nor this */",
                 "h": "/\r\b\f", "i": "what??! ??= ???/", "j": "?"}


def test_booleans_null_and_arrays():
    p = params('x(| | a=true, b=false, c=null, d=[], e=[true, false], f=["s", "t"], g=[ ]);')
    assert p == {"a": True, "b": False, "c": None, "d": [], "e": [True, False],
                 "f": ["s", "t"], "g": []}


def test_tensor_names_may_be_strings():
    (op,) = ops('x(src="conv1/out:0" | dst=y |);')
    assert op["tensors_in"] == [{"arg_name": "src", "name": "conv1/out:0"}]


def test_empty_sections_trailing_commas_and_layout():
    (a, b, c) = ops("relu(src=a | dst=b |);\n"
                    "create(| dst=t, | dims=[2, 3,], ran=[0, 1],);\n"
                    "  f (  |\n  | \n ) ;")
    assert a == {"name": "relu1", "optype": "relu",
                 "tensors_in": [{"arg_name": "src", "name": "a"}],
                 "tensors_out": [{"arg_name": "dst", "name": "b"}], "params": []}
    assert b["params"] == [{"arg_name": "dims", "value": [2, 3]},
                           {"arg_name": "ran", "value": [0, 1]}]
    assert c == {"name": "f1", "optype": "f", "tensors_in": [], "tensors_out": [],
                 "params": []}
    assert ops("") == [] and ops("// nothing\n") == []


def test_comments():
    text = """\
// a line comment
/* a block
   comment */ relu(src=a /* inside */ | dst=b |); // after
#define DIMS [1, /* a comment
   in a directive */ 2]
create(| dst=c | dims=DIMS);
"""
    relu, create = ops(text)
    assert relu["tensors_in"] == [{"arg_name": "src", "name": "a"}]
    # the define went on past its comment's newline
    assert create["params"] == [{"arg_name": "dims", "value": [1, 2]}]
    assert error(text + "x(| | a=1 b=2);\n") == \
        "m.net:7:11: expected ',' or ')' after param 'a', found 'b'"


@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_macros_with_params_and_token_pasting(pp):
    text = """\
#define CONV(n, in, k) \\
    conv2d(src=in, weight=conv##n##_w | dst=conv##n | size=[k, k]); \\
    relu(src=conv##n | dst=conv##n##_relu |);
#define FIRE(n, in) CONV(n##1, in, 1) CONV(n##3, in, 3) \\
    concat(src1=conv##n##1_relu, src2=conv##n##3_relu | dst=fire##n | axis=1);
#define STR(x) #x
FIRE(2, data)
FIRE(3, fire2)
print(src=fire3 | | msg=STR(fire 3:));
"""
    result = ops(text, preprocessor=pp)
    assert [op["name"] for op in result] == [
        "conv2d1", "relu1", "conv2d2", "relu2", "concat1",
        "conv2d3", "relu3", "conv2d4", "relu4", "concat2", "print1"]
    assert result[0]["tensors_in"] == [{"arg_name": "src", "name": "data"},
                                       {"arg_name": "weight", "name": "conv21_w"}]
    assert result[2]["params"] == [{"arg_name": "size", "value": [3, 3]}]
    assert result[9]["tensors_in"] == [{"arg_name": "src1", "name": "conv31_relu"},
                                       {"arg_name": "src2", "name": "conv33_relu"}]
    assert result[10]["params"] == [{"arg_name": "msg", "value": "fire 3:"}]


@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_conditionals_and_defines(pp):
    text = """\
#ifdef WIDE
wide(||);
#else
narrow(||);
#endif
#ifndef N
#define N 2
#endif
#if N > 3
big(| | n=N);
#elif defined(SMALL) || N == 2
small(| | n=N);
#endif
"""
    assert [op["optype"] for op in ops(text, preprocessor=pp)] == ["narrow", "small"]
    result = ops(text, preprocessor=pp, defines=["WIDE", "N=7"])
    assert [op["optype"] for op in result] == ["wide", "big"]
    assert result[1]["params"] == [{"arg_name": "n", "value": 7}]
    assert [op["optype"] for op in ops(text, preprocessor=pp, defines={"N": 1, "SMALL": None})] \
        == ["narrow", "small"]


@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_include_relative_to_the_including_file(tmp_path, pp, monkeypatch):
    (tmp_path / "lib" / "deeper").mkdir(parents=True)
    (tmp_path / "lib" / "layers.net").write_text(
        '#include "deeper/act.net"\n#define DENSE(n) matmul(src=x | dst=d##n |);\n')
    (tmp_path / "lib" / "deeper" / "act.net").write_text(
        "#define ACT(t) relu(src=t | dst=t##_r |);\n")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "common.net").write_text("common(||);\n")
    model = tmp_path / "model.net"
    model.write_text('#include "lib/layers.net"\n#include "common.net"\nDENSE(1)\nACT(d1)\n')
    monkeypatch.chdir("/")  # includes do not depend on the current directory
    result = to_ir(model, include_dirs=[tmp_path / "shared"], preprocessor=pp)["ops"]
    assert [op["name"] for op in result] == ["common1", "matmul1", "relu1"]
    assert result[2]["tensors_out"] == [{"arg_name": "dst", "name": "d1_r"}]


# -- errors: file, line and column of the original source


def test_syntax_errors():
    assert error("relu(src=a | dst=b |;\n") == \
        "m.net:1:21: expected a param name or ')', found ';'"
    assert error("\nslice(src=t1 | dst=t2 | axis=1, start=1;\n") == \
        "m.net:2:40: expected ',' or ')' after param 'start', found ';'"
    assert error("relu(src=a | dst=b |)\nprint(src=b | | msg=\"x\");\n") == \
        "m.net:1:22: expected ';' after 'relu(...)', found 'print'"
    assert error("a(||);\nrelu(src=a | dst=b |)  // the end") == \
        "m.net:2:22: expected ';' after 'relu(...)', found the end of the file"
    assert error("slice(src=t1 | dst=t2 | dims=[1, foo]);") == (
        "m.net:1:34: bad value 'foo' in the array of param 'dims': expected a number, "
        "a \"string\", true or false")
    assert error('x(||);\n\n  print(src=t | | msg="abc);\n') == "m.net:3:23: unterminated string"
    assert error("print(src=t2);") == (
        "m.net:1:13: expected ',' or '|' after input 'src', found ')' "
        "(an op has three sections: inputs | outputs | params)")


@pytest.mark.parametrize("text, message", [
    ("x(| | a=1.2.3);", "1:9: bad number '1.2.3'"),
    ("x(| | a=);", "1:9: expected a value for param 'a', found ')'"),
    ("x(| | a=1e999);", "1:9: number out of range: '1e999'"),
    ("x(| | a=[[1]]);", "1:10: param 'a': nested arrays are not allowed"),
    ('x(| | a=[1, "b"]);', "1:13: param 'a': the elements of an array must have one type, "
                           "found a string after a number"),
    ("x(| | a=[1, null]);", "1:13: param 'a': null is not allowed in an array"),
    ("x(| | a=[1 2]);", "1:12: expected ',' or ']' in the array of param 'a', found '2'"),
    ("x(| | a=- b);", "1:11: expected a number after '-', found 'b'"),
    ("x(| | a='s');", "1:9: strings are written in double quotes"),
    (r'x(| | a="\q");', "1:10: unknown escape '\\q' in a string"),
    (r'x(| | a="\u12");', "1:10: \\u must be followed by 4 hex digits"),
    (r'x(| | a="\ud800");', "1:10: \\u escape of a lone UTF-16 surrogate"),
    ("x(| | a=1, a=2);", "1:12: param 'a' is given twice"),
    ("x(src=a, src=b | |);", "1:10: input 'src' is given twice"),
    ("x(src=1 | |);", "1:7: expected a tensor name (an identifier or a string) for input "
                      "'src', found '1'"),
    ('x(src="" | |);', "1:7: expected a tensor name"),
    ("x(| , |);", "1:5: expected an output name or '|', found ','"),
    ("x(| | a=1 b=2);", "1:11: expected ',' or ')' after param 'a', found 'b'"),
    ("x(src a | |);", "1:7: expected '=' after input 'src', found 'a'"),
    ("x | |);", "1:3: expected '(' after 'x', found '|'"),
    ("(| |);", "1:1: expected an op (optype(inputs | outputs | params);), found '('"),
    ("n: 5(| |);", "1:4: expected an optype after 'n:', found '5'"),
    ("x(| |) $", "1:8: unexpected character '$'"),
    ("x(| |); /* open", "1:9: unterminated comment"),
    ("x(| |", "1:6: expected a param name or ')', found the end of the file"),
])
def test_error_messages(text, message):
    assert error(text).startswith("m.net:" + message)


@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_errors_name_the_original_line_after_comments_and_macros(pp):
    text = """\
/* a comment
   of three lines */
#define OP(t) relu(src=t | dst=t##_r |);
OP(a)
OP(b)



OP(c) x(| | a=1 /* c */ b=2);
"""
    assert error(text, preprocessor=pp).startswith(
        "m.net:9:25: expected ',' or ')' after param 'a', found 'b'")
    # inside a macro expansion: the line of the macro's use
    text = "#define BAD(n) x(| | a=n n);\n\nok(||);\n  BAD(1)\n"
    assert error(text, preprocessor=pp).startswith("m.net:4:")


@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_errors_in_included_files(tmp_path, pp):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "layers.net").write_text(
        "// layers\nok(||);\n\n  bad(| | msg=\"unterminated);\n")
    (tmp_path / "model.net").write_text('first(||);\n#include "sub/layers.net"\nlast(||)\n')
    model = tmp_path / "model.net"
    message = error(model, preprocessor=pp, filename=None)
    assert message.endswith("sub/layers.net:4:15: unterminated string")
    # after the include, lines are the including file's again
    (tmp_path / "sub" / "layers.net").write_text("ok(||);\n")
    assert error(model, preprocessor=pp, filename=None) == \
        f"{model}:3:9: expected ';' after 'last(...)', found the end of the file"


@pytest.mark.parametrize("text, message", [
    ('#include "missing.net"\n', "m.net:1:"),
    ("#error stop here\n", "m.net:1:"),
    ("#if 1\nx(||);\n", "m.net:1:"),
    ("#define F(a, b) a\nF(1);\n", "m.net:2:"),
    ("#bogus\n", "m.net:1:"),
])
@pytest.mark.parametrize("pp", PREPROCESSORS)
def test_preprocessor_errors(text, message, pp):
    assert error(text, preprocessor=pp).startswith(message)


def test_preprocessor_error_messages():
    assert error('\n#include "missing.net"\n') == "m.net:2: #include: file 'missing.net' not found"
    assert error("#error stop here\n") == "m.net:1: #error stop here"
    assert error("#bogus x\n") == "m.net:1: unknown preprocessor directive '#bogus'"


def test_self_include_is_an_error(tmp_path):
    (tmp_path / "loop.net").write_text('#include "loop.net"\n')
    assert "#include nested more than 100 deep" in error(tmp_path / "loop.net", filename=None)


def test_warning_directive():
    seen = []
    assert ops("#warning careful\nx(||);\n", on_warning=seen.append)[0]["name"] == "x1"
    assert seen == ["m.net:1: #warning careful"]
    with pytest.warns(il.ILWarning, match="careful"):
        ops("#warning careful\n")


def test_preprocessor_none():
    assert ops(EXAMPLE, preprocessor="none") == to_ir(EXAMPLE)["ops"]
    assert ops("/* c */ x(||); // c\n", preprocessor="none")[0]["name"] == "x1"
    assert error("x(||);\n#define A 1\n", preprocessor="none").startswith(
        "m.net:2:1: a preprocessor directive, but the preprocessor is off")


def test_missing_pcpp_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pcpp", None)  # import pcpp fails
    with pytest.raises(LightNetError,
                       match=r"needs the pcpp package: pip install 'lightnet\[il\]'"):
        to_ir("x(||);", preprocessor="pcpp")
    # auto falls back to the system cpp
    if HAS_CPP:
        assert to_ir("x(||);")["ops"][0]["name"] == "x1"


def test_api_errors():
    with pytest.raises(LightNetError, match="unknown preprocessor 'gcc'"):
        to_ir("x(||);", preprocessor="gcc")
    with pytest.raises(LightNetError, match="bad macro name '1X'"):
        to_ir("x(||);", defines=["1X=2"])
    with pytest.raises(LightNetError, match="nope.net: cannot read"):
        to_ir(Path("nope.net"))
    with pytest.raises(TypeError):
        to_ir(b"x(||);")


# -- the il2json command


def test_cli_stdout_file_and_stdin(tmp_path, capsys, monkeypatch):
    model = tmp_path / "m.net"
    model.write_text(EXAMPLE)
    expected = format_ir(to_ir(EXAMPLE))
    assert cli([str(model)], capsys) == (0, expected, "")
    out = tmp_path / "m.json"
    assert cli([str(model), "-o", str(out)], capsys) == (0, "", "")
    assert out.read_text() == expected
    assert cli([str(model), "-o", "-"], capsys) == (0, expected, "")
    assert cli(["-"], capsys, stdin=EXAMPLE, monkeypatch=monkeypatch) == (0, expected, "")


def test_cli_defines_and_include_dirs(tmp_path, capsys):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "defs.net").write_text("#define OP(v) op(| | k=v);\n")
    model = tmp_path / "m.net"
    model.write_text('#include "defs.net"\nOP(K)\n')
    status, out, err = cli(["-I", str(tmp_path / "inc"), "-D", "K=7", str(model)], capsys)
    assert (status, err) == (0, "")
    assert json.loads(out)["ops"][0]["params"] == [{"arg_name": "k", "value": 7}]


def test_cli_errors_are_one_line_with_status_1(tmp_path, capsys, monkeypatch):
    status, out, err = cli(["-"], capsys, stdin="x(| | a=[foo]);\n", monkeypatch=monkeypatch)
    assert (status, out) == (1, "")
    assert err == ("il2json: error: <stdin>:1:10: bad value 'foo' in the array of param 'a': "
                   'expected a number, a "string", true or false\n')
    status, out, err = cli([str(tmp_path / "missing.net")], capsys)
    assert status == 1 and err.startswith("il2json: error: ") and err.count("\n") == 1
    # no output file is written for a model with errors
    model = tmp_path / "bad.net"
    model.write_text("x(||)\n")
    out_file = tmp_path / "bad.json"
    status, out, err = cli([str(model), "-o", str(out_file)], capsys)
    assert status == 1 and not out_file.exists()
    assert err == (f"il2json: error: {model}:1:6: expected ';' after 'x(...)', "
                   "found the end of the file\n")


def test_cli_debug_shows_the_traceback(capsys, monkeypatch):
    status, _, err = cli(["--debug", "-"], capsys, stdin="x(", monkeypatch=monkeypatch)
    assert status == 1
    assert "Traceback" in err and err.rstrip().endswith(
        "il2json: error: <stdin>:1:3: expected an input name or '|', found the end of the file")


@pytest.mark.parametrize("argv", [[], ["a.net", "b.net"], ["--bogus", "a.net"],
                                  ["--preprocessor", "gcc", "a.net"], ["-D", "1=2", "a.net"]])
def test_cli_bad_usage_exits_2(argv, capsys):
    status, out, err = cli(argv, capsys)
    assert status == 2 and out == "" and "usage: il2json" in err


def test_cli_warnings_go_to_stderr(capsys, monkeypatch):
    status, out, err = cli(["-"], capsys, stdin="#warning look\nx(||);\n", monkeypatch=monkeypatch)
    assert status == 0 and json.loads(out)["ops"][0]["name"] == "x1"
    assert err == "il2json: warning: <stdin>:1: #warning look\n"


def test_console_script_pipes_into_lightnet():
    il2json = shutil.which("il2json")
    if il2json is None:
        pytest.skip("il2json is not installed (pip install -e '.[test]')")
    model = ROOT / "examples" / "fire.net"
    result = subprocess.run(f"'{il2json}' '{model}' | '{sys.executable}' -m lightnet -",
                            shell=True, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("scores:\n")


# -- examples/fire.net


@pytest.mark.parametrize("classes", [None, 10])
def test_fire_example_converts_and_runs(classes):
    defines = [] if classes is None else ["-D", f"CLASSES={classes}"]
    converted = python("-m", "lightnet.frontends.il", *defines, "examples/fire.net")
    assert converted.returncode == 0, converted.stderr
    doc = json.loads(converted.stdout)
    json_ir.parse(doc, "fire.json")
    names = {t["name"] for op in doc["ops"] for t in op["tensors_out"]}
    assert {"fire2_squeeze_w", "fire3_expand3_relu", "fire4", "scores"} <= names
    concats = [op for op in doc["ops"] if op["optype"] == "concat"]
    assert [op["name"] for op in concats] == ["concat1", "concat2", "concat3"]
    assert concats[1]["tensors_in"] == [{"arg_name": "src1", "name": "fire3_expand1_relu"},
                                        {"arg_name": "src2", "name": "fire3_expand3_relu"}]
    result = python("-m", "lightnet", "-", stdin=converted.stdout)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "scores:"
    assert len(lines[1].strip("[]").split()) == (classes or 4)
    assert lines[2].startswith("info: run time:")
