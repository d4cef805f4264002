"""Nothing in a model, weight file or IL source is ever evaluated.

Python expressions and template syntax are planted in every string a user
controls: op names, optypes, arg names, tensor names, param strings, weight
file tensor names and IL strings. The model goes through the runtime (and the
`lightnet` / `il2json` commands); the marker file the payload would create
must not exist, and no output may show what evaluating the templates gives
(49, or a class name). Then an AST scan of the whole package (generated code
included) checks that nothing calls eval/exec/__import__, imports pickle or
the like, or asks numpy to unpickle.
"""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.frontends.il import ILError, to_ir
from tests.helpers import example_doc, lightnet

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lightnet"


def payloads(marker: Path) -> list[str]:
    return [
        f"__import__('os').system('touch {marker}')",
        f"exec(\"open('{marker}', 'w')\")",
        "{{7*7}}", "${{7*7}}", "#{7*7}", "<%= 7*7 %>", "{0.__class__}", "%(x)s%s",
        "{{ ''.__class__.__mro__ }}",
    ]


def evaluated(text: str) -> bool:
    """Whether `text` shows the result of evaluating one of the payloads: 49
    as a number of its own (not inside a timing such as 0.149 or 49.0). The model
    the payloads go into, example_doc(), has only small integral data: no 49."""
    return bool(re.search(r"(?<![\d.])49(?![\d.])", text)) or "<class" in text or "__mro__'>" in text


def string_slots(doc):
    """Setters for every string a user controls in the IR document."""
    slots = []
    for op in doc["ops"]:
        slots.append(lambda v, op=op: op.__setitem__("name", v))
        slots.append(lambda v, op=op: op.__setitem__("optype", v))
        for field in ("tensors_in", "tensors_out", "params"):
            for item in op[field]:
                slots.append(lambda v, item=item: item.__setitem__("arg_name", v))
                if field != "params":
                    # a tensor name: renamed in every op that uses it, so the model stays valid
                    slots.append(lambda v, old=item["name"]: rename_tensor(doc, old, v))
                elif isinstance(item["value"], str):
                    slots.append(lambda v, item=item: item.__setitem__("value", v))
    return slots


def rename_tensor(doc, old, new):
    for op in doc["ops"]:
        for field in ("tensors_in", "tensors_out"):
            for item in op[field]:
                if item["name"] == old:
                    item["name"] = new


def run_in_process(doc, capsys) -> str:
    ctx = Context()
    try:
        ctx.init(doc)
        ctx.compile("cpu")
        ctx.load()
        ctx.run()
        text = ctx.print()  # the IR, names and all
    except LightNetError as e:
        text = str(e)
    out, err = capsys.readouterr()
    return "\n".join((text, out, err))


def test_ir_strings_are_never_evaluated(tmp_path, capsys):
    marker = tmp_path / "pwned_ir"
    count = 0
    for payload in payloads(marker):
        base = example_doc()
        for k in range(len(string_slots(base))):
            doc = copy.deepcopy(base)
            string_slots(doc)[k](payload)  # one string at a time: deeper code sees it
            output = run_in_process(doc, capsys)
            assert not marker.exists(), (payload, k)
            assert not evaluated(output), (payload, k, output)
            count += 1
        doc = copy.deepcopy(base)  # every string at once
        for k, slot in enumerate(string_slots(doc)):
            slot(f"{payload}{k}")
        assert not evaluated(run_in_process(doc, capsys))
    assert not marker.exists()
    assert count > 100


def test_commands_never_evaluate_model_strings(tmp_path):
    """The `lightnet` command, with the options that write names out (DOT,
    memory report, profile, compiled IR), on a model whose names, tensors
    and print message are payloads."""
    marker = tmp_path / "pwned_cli"
    for i, payload in enumerate(payloads(marker)[:4]):
        doc = example_doc()
        rename_tensor(doc, "tensor1", payload)
        rename_tensor(doc, "tensor2", payload + "2")
        doc["ops"][1]["name"] = payload
        doc["ops"][2]["params"][0]["value"] = payload
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps(doc))
        for args in (["--dot", tmp_path / "g.dot", "--mem-report", "--profile"],
                     ["-c", "-o", tmp_path / "out.json"]):
            result = lightnet(path, *args, cwd=tmp_path, timeout=60)
            assert result.returncode == 0, result.stderr
            written = (tmp_path / ("g.dot" if "--dot" in args else "out.json")).read_text()
            shown = "\n".join(line for line in result.stdout.splitlines()
                              if not line.startswith(("info: run time", "memory cpu")))
            for text in (shown, result.stderr, written):
                assert not evaluated(text), text
            assert payload in result.stdout or "-c" in args  # printed as it is
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore::lightnet.LightNetWarning")  # the skipped names
def test_weight_file_names_are_never_evaluated(tmp_path):
    marker = tmp_path / "pwned_weights"
    doc = example_doc()
    create = doc["ops"][0]
    create["params"] = [p for p in create["params"] if p["arg_name"] not in ("data", "ran")]
    create["params"][-1]["value"] = True  # from_file
    for i, payload in enumerate(payloads(marker)):
        for tensor_name in ("tensor1", payload):
            d = copy.deepcopy(doc)
            rename_tensor(d, "tensor1", tensor_name)
            npz = tmp_path / f"w{i}.npz"
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ones((2, 4), np.float32))
            with zipfile.ZipFile(npz, "w") as z:
                z.writestr(payload + ".npy", buf.getvalue())
            text = tmp_path / f"w{i}.wts"
            text.write_text("1\n" + payload.replace(" ", "_") + " 0 8" + " 3f800000" * 8 + "\n")
            for weights in (npz, text):
                ctx = Context()
                ctx.init(d)
                ctx.compile("cpu")
                try:
                    ctx.load(weights)
                except LightNetError as e:
                    assert not evaluated(str(e)), str(e)
    assert not marker.exists()


def test_il_strings_are_never_evaluated(tmp_path, capsys):
    marker = tmp_path / "pwned_il"
    for payload in payloads(marker):
        quoted = json.dumps(payload)
        source = (f'create(| dst={quoted} | dtype="TL_FLOAT", dims=[2], data=[1, 2]);\n'
                  f'named: print(src={quoted} | | msg={quoted});\n'
                  f'print(src={quoted} | | msg={quoted}, extra={quoted});\n')
        doc = to_ir(source, filename="m.net", preprocessor="pcpp")
        assert doc["ops"][0]["tensors_out"][0]["name"] == payload
        assert doc["ops"][1]["params"][0]["value"] == payload
        assert not evaluated(json.dumps(doc))
        output = run_in_process(doc, capsys)
        assert "param 'extra': known" in output and not evaluated(output), output
        doc["ops"].pop()
        output = run_in_process(doc, capsys)
        assert f"{payload}\n[1.000 2.000]" in output and not evaluated(output), output
        with pytest.raises(ILError) as e:  # an error quoting the payload
            to_ir(source + f"print(src={quoted} | | msg={quoted}, msg=1);",
                  filename="m.net", preprocessor="pcpp")
        assert not evaluated(str(e.value))
    assert not marker.exists()


# The package itself ------------------------------------------------------------------------

FORBIDDEN_CALLS = {"eval", "exec", "__import__", "execfile", "input"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
                     "joblib"}


def python_files():
    files = sorted(PACKAGE.rglob("*.py"))
    assert any("auto" in p.parts for p in files), "the generated code is scanned too"
    return files


def problems(path: Path, text: str | None = None) -> list[str]:
    """What in a module evaluates code, unpickles, or runs a shell."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    found = []
    for node in ast.walk(tree):
        where = f"{label}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name) and func.value.id == "builtins" else None)
            if name in FORBIDDEN_CALLS or (name == "compile" and "compile" not in defined
                                           and isinstance(func, ast.Name)):
                found.append(f"{where}: calls {name}()")
            for kw in node.keywords:
                if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant)
                                                     and kw.value.value is False):
                    found.append(f"{where}: allow_pickle is not False")
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant)
                                              and kw.value.value is False):
                    found.append(f"{where}: shell=True")
            if isinstance(func, ast.Attribute) and func.attr == "load" and \
                    isinstance(func.value, ast.Name) and func.value.id == "yaml":
                found.append(f"{where}: yaml.load")
        elif isinstance(node, ast.Import):
            found += [f"{where}: imports {a.name}" for a in node.names
                      if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"{where}: imports from {node.module}")
        elif isinstance(node, ast.Name) and node.id in ("eval", "exec") and \
                isinstance(node.ctx, ast.Load):
            found.append(f"{where}: refers to {node.id}")
    return found


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_never_evaluates_or_unpickles(path):
    assert problems(path) == []


def test_the_scan_finds_what_it_looks_for():
    sample = ("import pickle\nfrom marshal import loads\nimport numpy as np\n"
              "eval('1')\nexec('x = 1')\nf = eval\n__import__('os')\n"
              "np.load('w.npz', allow_pickle=True)\nimport subprocess\n"
              "subprocess.run('ls', shell=True)\ncompile('1', 'f', 'eval')\n"
              "import yaml\nyaml.load('a')\n")
    found = problems(Path("probe.py"), sample)
    lines = {int(f.split(":")[1]) for f in found}
    assert lines == {1, 2, 4, 5, 6, 7, 8, 10, 11, 13}, found
