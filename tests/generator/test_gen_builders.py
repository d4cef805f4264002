"""The builder functions of lightnet.nn the generator writes (lightnet/auto/nn.py):
one per abstract op, its inputs positional, its params keyword-only with the
description's defaults and types, its docs (and rules) as the docstring."""

from __future__ import annotations

import inspect

import pytest

from genutil import load_module, make_root, run


@pytest.fixture(scope="module")
def builders(base_tree):
    return load_module(base_tree, "lightnet/auto/nn.py", "gen_test_nn")


def test_one_builder_per_abstract_op(builders):
    assert "scale" in builders.__all__ and "scale_cpu" not in builders.__all__
    assert not hasattr(builders, "scale_cpu")


def test_the_signature_follows_the_description(builders):
    signature = inspect.signature(builders.scale)
    assert str(signature) == (
        "(src: 'Tensor', other: 'Tensor | None' = None, *, alpha: 'float' = 1.0, "
        "axis: 'int' = 0, mode: \"Literal['fast', 'exact']\" = 'fast', "
        "pad: 'Sequence[int]' = (0, 0), name: 'str | None' = None) -> 'Tensor'")


def test_the_docstring_holds_the_docs_and_rules(builders):
    assert inspect.getdoc(builders.scale) == """\
Multiply `src` by `alpha`.

Args:
    src: The input. (dtype float; ndim 2)
    other: Unused. (dtype of src; shape of src)
    alpha: Scale. (>= 0; <= 10)
    axis: (>= 0; < src.ndim)
    mode:
    pad: (length 2; each >= 0; the pads are ordered)
    name: The op's name, and its output's; None: `scale` and a number not taken.

Returns:
    dst: The result."""


def test_an_optional_input_before_a_required_one_has_no_default(tmp_path):
    root = make_root(tmp_path / "root", {"pick.yaml": """\
pick:
  arch: none
  doc: The first input given.
  tensors_in:
    first: {optional: true}
    rest: {variadic: true, min: 2}
  tensors_out:
    dst: {dtype: "rest[0].dtype", shape: "rest[0].shape"}
"""})
    assert run(root).rc == 0
    pick = load_module(root, "lightnet/auto/nn.py", "gen_test_pick").pick
    assert str(inspect.signature(pick)) == (
        "(first: 'Tensor | None', rest: 'Sequence[Tensor]', *, name: 'str | None' = None) "
        "-> 'Tensor'")


@pytest.mark.parametrize("where, yaml", [
    ("tensors_in", "    name: {}\n"),
    ("params", "    apply: {type: int}\n"),
])
def test_an_argument_named_like_the_builders_own_names_is_refused(tmp_path, where, yaml):
    arg = yaml.split(":")[0].strip()
    root = make_root(tmp_path / "root", {"bad.yaml": f"""\
bad:
  arch: none
  doc: Bad.
  {where}:
{yaml}  tensors_out:
    dst: {{dtype: TL_FLOAT, shape: (1,)}}
"""})
    result = run(root)
    assert result.rc == 1 and f"'{arg}' is reserved: the generated code uses that name" in result.err


def test_an_optype_named_like_the_builders_own_names_is_refused(tmp_path):
    root = make_root(tmp_path / "root", {"bad.yaml": """\
Tensor:
  arch: none
  doc: Bad.
  tensors_out:
    dst: {dtype: TL_FLOAT, shape: (1,)}
"""})
    result = run(root)
    assert result.rc == 1 and "'Tensor' is reserved: the generated code uses that name" in result.err
