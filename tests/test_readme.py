"""The README's commands and its Python example work as written."""

import re
from pathlib import Path

import pytest

from tests.helpers import lightnet, python

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_first_lines_are_the_two_commands():
    block = re.search(r"```sh\n(.*?)```", README, re.S).group(1).splitlines()
    assert block[0].startswith('pip install -e . && lightnet examples/')
    assert block[1].startswith('pip install -e ".[test]" && python -m pytest')
    model = block[0].split("lightnet ")[1].split()[0]
    run = lightnet(model, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_onnx_python_example(tmp_path):
    pytest.importorskip("onnx")
    code = re.search(r"```python\n(import os, numpy.*?)```", README, re.S).group(1)
    run = python("-c", code, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "{'softmaxout_1': (1, 1000, 1, 1)}"


def test_builder_python_example(tmp_path):
    code = re.search(r"```python\n(import numpy as np\nimport lightnet\nfrom lightnet import nn"
                     r".*?)```", README, re.S).group(1)
    run = python("-c", code, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "{'y': (1, 4, 8, 8)}"
    assert (tmp_path / "model.json").is_file() and (tmp_path / "model.npz").is_file()


def test_context_python_example():
    code = re.search(r"```python\n(import lightnet\n\nctx = lightnet.Context\(\).*?)```", README,
                     re.S).group(1)
    run = python("-c", code, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == ["[[2. 3. 4.]", " [6. 7. 8.]]"]
