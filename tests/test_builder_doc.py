"""docs/builder.md's tutorial runs as written: its Python blocks, in order, as
one script print its output blocks, and its commands run the saved model."""

import re
from pathlib import Path

from tests.helpers import lightnet, python

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "builder.md").read_text()
# What the dnnl and auto targets print depends on the machine (oneDNN, its ops).
MACHINE = ("dnnl: ", "auto: ")


def test_the_tutorial_prints_what_it_shows(tmp_path):
    script = "\n".join(re.findall(r"```python\n(.*?)```", DOC, re.S))
    shown = "".join(re.findall(r"```text\n(.*?)```", DOC, re.S))
    (tmp_path / "tutorial.py").write_text(script)
    run = python("tutorial.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert [line for line in printed if not line.startswith(MACHINE)] == [
        line for line in shown.splitlines() if not line.startswith(MACHINE)]
    assert [line[:6] for line in printed if line.startswith(MACHINE)] == ["auto: ", "dnnl: "]
    for command in re.search(r"```sh\n(.*?)```", DOC, re.S).group(1).splitlines():
        argv = command.split("#")[0].split()
        assert argv[0] == "lightnet"
        done = lightnet(*argv[1:], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "cnn-cpu.json").is_file() and (tmp_path / "cnn-cpu.npz").is_file()
