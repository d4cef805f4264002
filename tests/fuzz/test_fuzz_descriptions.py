"""Fuzzing op and optimizer descriptions: `python -m generator --root ROOT` on
a mutated copy of a real description either succeeds, or exits 1 with
`error: file:line: ...` on stderr and leaves the root's generated files
(lightnet/auto/ and docs/ops.md) byte-identical.

Each test root (see tests/generator/genutil.py) holds one real description
from descriptions/ops/, or the generator tests' small families with their
optimizer file, generated once; every root has the test archs and the real
param groups, which two cases mutate. A case mutates one file, as YAML data
(fields dropped, renamed or given other types; expressions and code
replaced by invalid, undefined or hostile Python) or as text (characters,
lines, indentation, tabs, tags, an alias bomb), then runs the generator in
process. Anything escaping it, a message without `file:line`, a changed
generated file after a failure or an example past its deadline fails.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzzutil import CI_EXAMPLES, ROOT, SLOW_EXAMPLES, deadline, fuzz_settings, get, paths
from generator import render
from tests.generator.genutil import (BASE_ARCHS, BASE_OPS, BASE_OPTIMIZERS, make_root, run,
                                   snapshot)

FAMILIES = ["slice.yaml", "create.yaml", "concat.yaml", "conv2d.yaml", "softmax.yaml"]
CASES = [("ops", name, {name: (ROOT / "descriptions" / "ops" / name).read_text()}, {})
         for name in FAMILIES]
CASES.append(("optimizers", "cpu.yaml", BASE_OPS, BASE_OPTIMIZERS))
CASES.append(("ops", "scale.yaml", BASE_OPS, BASE_OPTIMIZERS))
CONV2D = CASES[FAMILIES.index("conv2d.yaml")][2]  # a dnnl variant, ops taking groups
CASES.append(("archs", "dnnl.yaml", CONV2D, {}))
CASES.append(("", "params.yaml", CONV2D, {}))
PARAMS = (ROOT / "descriptions" / "params.yaml").read_text()
# The test archs, the cpu's with the repository's templates (conv2d_cpu runs one).
ARCHS = {**BASE_ARCHS, "cpu.yaml": (ROOT / "descriptions" / "archs" / "cpu.yaml").read_text()}


def _text(kind: str, name: str, ops: dict, optimizers: dict) -> str:
    """The text of the file a case mutates."""
    return {"ops": ops, "optimizers": optimizers, "archs": BASE_ARCHS,
            "": {"params.yaml": PARAMS}}[kind][name]


_TMP = Path(tempfile.mkdtemp(prefix="lightnet-fuzz-gen-"))
_ROOTS: dict[int, tuple[Path, dict]] = {}


def _root(case: int) -> tuple[Path, dict]:
    """The generated root of a case (made once), and its snapshot."""
    if case not in _ROOTS:
        _, _, ops, optimizers = CASES[case]
        root = make_root(_TMP / f"root{case}", ops, optimizers, ARCHS)
        result = run(root)
        assert result.rc == 0, result.err
        _ROOTS[case] = root, snapshot(root)
    return _ROOTS[case]


def _restore(root: Path, files: dict) -> None:
    """Put the generated files back as they were (after a successful run)."""
    now = snapshot(root)
    for rel in set(now) - set(files):
        (root / rel).unlink()
    for rel, (data, mtime) in files.items():
        if now.get(rel, (None,))[0] != data:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            os.utime(root / rel, ns=(mtime, mtime))


KEYS = ["arch", "inherits", "doc", "mtype", "tensors_in", "tensors_out", "params", "checks",
        "pre_run", "static_run", "run", "post_run", "examples", "assemble", "arg_name",
        "dtype", "shape", "ndim", "len", "owner", "view", "from_file", "static", "optional",
        "variadic", "min", "type", "drop_checks", "default", "ge", "lt", "choices", "expr",
        "msg", "inputs", "outputs", "error", "when", "replace", "like", "optype", "window",
        "expanders", "combiners", "ins", "outs", "rename", "tensors", "sametype", "input",
        "param_groups", "template", "templates", "extends", "library", "dtypes", "fallback",
        "float32_ops", "elementwise_ops"]
CODE = ["src.shape[", "undefined_name", "src.shape", "1/0", "lambda: 0", "import os",
        "op", "ck", "yield 1", "await x", "__import__('os').system('true')", "x = (",
        "def f():\n  return 1\n", "  indented = 1\n", "if True:\nreturn", "\t", "",
        "np.add(src, 1, out=dst)", "dst = src", "priv['x'] = 1", "kernels", "TL_FLOAT",
        "none", "cpu", "gpu", "number", "int", "string[]", "slice_cpu", "ops[0]", "*",
        "{{7*7}}", "global x", "nonlocal y", "del src", "src.dtype", "(1,)", "ran", "len"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    [2**31, -(2**63), 1e309, float("nan"), 0.5]), st.sampled_from(CODE + KEYS),
    st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=5)


def _mutate_data(draw, doc):
    inside = [p for p in paths(doc) if p]
    if not inside:
        return doc
    path = draw(st.sampled_from(inside))
    parent = get(doc, path[:-1])
    how = draw(st.sampled_from(["drop", "rename", "retype", "code", "duplicate"]))
    if how == "drop":
        del parent[path[-1]]
    elif how == "rename" and isinstance(parent, dict):
        parent[draw(st.sampled_from(KEYS) | st.text(max_size=5))] = parent.pop(path[-1])
    elif how == "code":
        parent[path[-1]] = draw(st.sampled_from(CODE))
    elif how == "duplicate" and isinstance(parent, list):
        parent.append(parent[path[-1]])
    else:
        parent[path[-1]] = draw(VALUES)
    return doc


def _alias_bomb(depth: int = 8) -> str:
    """Nested lists of ten aliases each: 10**depth values once expanded."""
    text = "&x0 [" + ", ".join(["1"] * 10) + "]"
    for k in range(1, depth + 1):
        text = f"&x{k} [{text}" + f", *x{k - 1}" * 9 + "]"
    return text


def _mutate_text(draw, text: str) -> str:
    how = draw(st.sampled_from(["chars", "line_drop", "line_dup", "indent", "tab", "cut",
                                "tag", "bomb", "recursive", "key_twice", "bom"]))
    lines = text.split("\n")
    i = draw(st.integers(0, len(lines) - 1))
    if how == "chars":
        k = draw(st.integers(0, len(text)))
        chars = draw(st.text(alphabet=st.sampled_from(":-[]{}#&*!|>'\"\n \\%@`,?") |
                             st.characters(), min_size=1, max_size=6))
        return text[:k] + chars + text[k + draw(st.integers(0, 3)):]
    if how == "line_drop":
        del lines[i]
    elif how == "line_dup":
        lines.insert(i, lines[i])
    elif how == "indent":
        lines[i] = " " * draw(st.integers(0, 7)) + lines[i].lstrip(" ")
    elif how == "tab":
        lines[i] = "\t" + lines[i]
    elif how == "cut":
        return text[:draw(st.integers(0, len(text)))]
    elif how == "tag":
        lines[i] = re.sub(r": (\S)", r": !!python/object:os.system \1", lines[i], count=1)
    elif how == "bomb":  # small (4) or not (6 to 9: up to 10**9 values)
        depth = draw(st.integers(4, 9))
        lines.append(f"bomb:\n  arch: none\n  tensors_in: [{{arg_name: src}}]\n"
                     f"  tensors_out: [{{arg_name: dst, dtype: src.dtype, shape: src.shape}}]\n"
                     f"  examples:\n    - {{inputs: {{src: {_alias_bomb(depth)}}}, "
                     f"outputs: {{dst: *x{depth}}}}}")
    elif how == "recursive":
        lines.append("rec: &r\n  arch: none\n  doc: [*r]")
    elif how == "key_twice":
        lines.insert(i, lines[i])
    else:
        return "\ufeff" + text
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def _parsed(text: str):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


@st.composite
def mutations(draw):
    """(case index, mutated text of the case's file)."""
    case = draw(st.integers(0, len(CASES) - 1))
    kind, name, ops, optimizers = CASES[case]
    text = _text(kind, name, ops, optimizers)
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()) and "&x0" not in text and "&r" not in text:  # never expand them here
            doc = copy.deepcopy(_parsed(text))
            if isinstance(doc, (dict, list)):
                text = yaml.safe_dump(_mutate_data(draw, doc), sort_keys=False,
                                      allow_unicode=True)
                continue
        text = _mutate_text(draw, text)
    return case, text


WHERE = re.compile(r"error: (descriptions/((ops|optimizers|archs)/)?[\w.]+\.yaml):(\d+): ")


@functools.lru_cache(maxsize=512)
def _format_python(source: str, name: str) -> str:
    """render.format_python (black), remembered: most files of a run are the
    same every time, and black is most of the generator's time."""
    return _black(source, name)


_black = render.format_python
# The jinja environment of a root, kept: compiling the templates again for
# every run would be most of the rest.
_environment = functools.lru_cache(maxsize=None)(render.environment)


def check(case: int, text: str) -> None:
    root, files = _root(case)
    kind, name, ops, optimizers = CASES[case]
    path = root / "descriptions" / kind / name
    original = path.read_bytes()
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = snapshot(root)
    try:
        with deadline(), mock.patch.object(render, "format_python", _format_python), \
                mock.patch.object(render, "environment", _environment):
            result = run(root)
    finally:
        path.write_bytes(original)
    if result.rc == 0:
        _restore(root, files)
        return
    assert result.rc == 1, result
    assert len(result.err.splitlines()) == 1, result.err
    assert WHERE.match(result.err), result.err
    assert snapshot(root) == before, "a failed run changed the generated files"


@fuzz_settings(CI_EXAMPLES // 3)
@given(mutations())
def test_mutated_descriptions(case):
    check(*case)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutations())
def test_mutated_descriptions_slow(case):
    check(*case)


def teardown_module():
    shutil.rmtree(_TMP, ignore_errors=True)
