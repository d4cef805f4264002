"""IL as LightNet's il2json reads it: bare names, ${eval EXPR}, empty statements,
preprocessor line markers; errors keep pointing at the original file and line."""

from __future__ import annotations

import pytest

from lightnet.frontends.il import to_ir
from lightnet.frontends.il_eval import EvalError, evaluate
from tests.frontends.ilutil import PREPROCESSORS, error, params

# ${eval EXPR} ---------------------------------------------------------------------------


@pytest.mark.parametrize("expr, value", [
    ("360*2**-2", 90),             # the integral result is an int
    ("7/2", 3.5),                  # / divides exactly, as Perl's
    ("-2**2", -4),                 # ** binds tighter than unary minus
    ("2**3**2", 512),              # ** is right-associative
    ("(1 + 2) * 3 - 4 / 8", 8.5),
    ("10 - 2 - 3", 5),             # - is left-associative
    ("-7 % 3", 2),                 # % has the sign of the right operand, as Perl's
    ("7 % -3", -2),
    ("7.9 % 3", 1),                # % takes the integer parts
    ("0.1 + 0.2", 0.3),            # Perl's 15 significant digits
    ("1/3", 0.333333333333333),
    ("1e3 / 8", 125),
    ("--3", 3),
    ("+.5", 0.5),
    ("${eval 1 + ${eval 2 * 3}} * 2", 14),   # nested
])
def test_eval_values(expr, value):
    got, end = evaluate(f"${{eval {expr}}} rest", 0)
    assert got == value and type(got) is type(value)
    assert end == len(f"${{eval {expr}}}")


@pytest.mark.parametrize("text, message, pos", [
    ("${eval 1 +}", "${eval}: expected a number, '(' or '-', found '}'", 10),
    ("${eval (1 + 2}", "${eval}: expected ')', found '}'", 13),
    ("${eval 1 2}", "${eval}: expected an operator or '}', found '2'", 9),
    ("${eval 1", "${eval}: expected an operator or '}', found the end of the line", 8),
    ("${eval1}", "expected a space after '${eval'", 6),
    ("${eval x}", "${eval}: expected a number, '(' or '-', found 'x'", 7),
    ("${eval 1/0}", "${eval}: division by zero", 8),
    ("${eval 1 % 0.5}", "${eval}: modulus by zero", 9),
    ("${eval 10 ** 400}", "${eval}: 10.0 ** 400.0 is not a finite number", 10),
    ("${eval 1e308 * 10}", "${eval}: the result is not a finite number", 0),
])
def test_eval_errors(text, message, pos):
    with pytest.raises(EvalError) as e:
        evaluate(text, 0)
    assert (e.value.msg, e.value.pos) == (message, pos)


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_eval_after_macros(preprocessor):
    text = ("#define A 2\n#define C 3\n#define DIMS(n) [n, ${eval A * (C + 5)}]\n"
            "create(| dst=w | dims=DIMS(${eval 360*2**-2}), scale=${eval ${eval 1 + 1} / 8},"
            " neg=-${eval 3 * 3});\n")
    assert params(text, preprocessor=preprocessor) == {
        "dims": [90, 16], "scale": 0.25, "neg": -9}


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_eval_stands_anywhere_in_the_text(preprocessor):
    """As il2json substitutes it in the text: in a name, a string, a number."""
    text = ('#define NEXT(n) relu(src=conv##n | dst=conv${eval n + 1} | '
            "msg=\"layer ${eval 3 * 2}\", k=1${eval 5 - 5});\nNEXT(3)\n")
    (op,) = to_ir(text, filename="m.net", preprocessor=preprocessor)["ops"]
    assert (op["tensors_in"][0]["name"], op["tensors_out"][0]["name"]) == ("conv3", "conv4")
    assert op["params"] == [{"arg_name": "msg", "value": "layer 6"},
                            {"arg_name": "k", "value": 10}]


def test_eval_lies_within_a_line():
    assert error("relu(| | k=${eval 1 +\n 2});", preprocessor="none") == (
        "m.net:1:22: ${eval}: expected a number, '(' or '-', found the end of the line")


def test_eval_error_points_at_the_original_line():
    text = "relu(src=a | dst=b |);\n\nrelu(src=b | dst=c | x=${eval 2 * (3 + 1});\n"
    assert error(text, preprocessor="pcpp") == "m.net:3:41: ${eval}: expected ')', found '}'"


# Bare names, empty statements, line markers ----------------------------------------------


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_bare_names_are_strings(preprocessor):
    text = ("#define ELEW(op) elew(src1=a, src2=b | dst=c | elew_op=op, dtype=TL_FLOAT);\n"
            "ELEW(TL_MUL)\n")
    assert params(text, preprocessor=preprocessor) == {"elew_op": "TL_MUL", "dtype": "TL_FLOAT"}
    assert params("conv(| | autopad=SAME_UPPER, on=true, off=null);") == {
        "autopad": "SAME_UPPER", "on": True, "off": None}


def test_a_bare_name_in_an_array_is_an_error():
    assert error("x(| | dims=[1, N]);") == (
        "m.net:1:16: bad value 'N' in the array of param 'dims': expected a number, "
        'a "string", true or false')


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_empty_statements_are_skipped(preprocessor):
    text = (";\n#define RELU(a, b) relu(src=a | dst=b |);\n"
            "RELU(x, y);;\n;  ;\nRELU(y, z)\n")
    doc = to_ir(text, filename="m.net", preprocessor=preprocessor)
    assert [op["name"] for op in doc["ops"]] == ["relu1", "relu2"]


@pytest.mark.parametrize("preprocessor", [*PREPROCESSORS, "none"])
def test_line_markers_are_followed(preprocessor):
    """`# N "file"` lines (what gcc -E leaves) are skipped, and errors name
    the file and line they give."""
    text = '# 1 "fire.net"\nrelu(src=a | dst=b |);\n# 40 "net.net"\n\nrelu(src=b | dst=c | x=@);\n'
    assert error(text, preprocessor=preprocessor).startswith("net.net:41:")
    (relu,) = to_ir('# 3 "fire.net" 1\nrelu(src=a | dst=b |);\n', filename="m.net",
                    preprocessor=preprocessor)["ops"]
    assert relu["tensors_out"] == [{"arg_name": "dst", "name": "b"}]


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_token_pasting_names_tensors(preprocessor):
    text = ("#define FIRE(n, in) conv2d(src=in, weight=fire##n##_w | dst=fire##n | "
            "size=[1, 1]);\nFIRE(2, pool1) FIRE(3, fire2)\n")
    doc = to_ir(text, filename="m.net", preprocessor=preprocessor)
    assert [(op["tensors_in"][1]["name"], op["tensors_out"][0]["name"]) for op in doc["ops"]] \
        == [("fire2_w", "fire2"), ("fire3_w", "fire3")]


@pytest.mark.parametrize("preprocessor", PREPROCESSORS)
def test_error_in_a_macro_names_the_line_of_its_use(preprocessor):
    text = "#define BAD(x) relu(src=x | dst=y | k=[x, ${eval 1 +}]);\n\nBAD(1)\n"
    assert error(text, preprocessor=preprocessor).startswith("m.net:3:")
