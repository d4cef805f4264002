"""Generated files: determinism, headers, --check, and how they are written."""

from __future__ import annotations

import os
import re
import pytest

from generator import model, output, render
from genutil import (BASE_OPS, BASE_OPTIMIZERS, HEADER, MD_HEADER, generated, make_root, run,
                     snapshot, write_descriptions)

EXPECTED_FILES = {
    "docs/ops.md",
    "lightnet/auto/__init__.py",
    "lightnet/auto/archs.py",
    "lightnet/auto/dtypes.py",
    "lightnet/auto/nn.py",
    "lightnet/auto/ops/__init__.py",
    "lightnet/auto/ops/scale.py",
    "lightnet/auto/ops/shift.py",
    "lightnet/auto/optimizers/__init__.py",
    "lightnet/auto/optimizers/cpu.py",
    "lightnet/auto/params.py",
    "lightnet/auto/registry.py",
    "lightnet/auto/templates.py",
}


def _files(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] not in ("descriptions", "templates")}


# What is generated ----------------------------------------------------------------------


def test_generates_exactly_the_expected_files(base_tree):
    assert _files(base_tree) == EXPECTED_FILES


def test_every_generated_file_has_the_header(base_tree):
    for rel, text in generated(base_tree).items():
        header = MD_HEADER if rel.endswith(".md") else HEADER
        assert text.startswith(header), rel


def test_modules_name_their_source_description(base_tree):
    files = generated(base_tree)
    for family in ("scale", "shift"):
        text = files[f"lightnet/auto/ops/{family}.py"]
        first = text.splitlines()[0]
        assert first == (f"{HEADER} from descriptions/ops/{family}.yaml. Do not edit.")
        # The abstract op's; its variant's proto is the abstract op's with what differs.
        assert text.count(f'source="descriptions/ops/{family}.yaml"') == 1
    assert files["lightnet/auto/optimizers/cpu.py"].splitlines()[0] == (
        f"{HEADER} from descriptions/optimizers/cpu.yaml. Do not edit.")
    assert "Source: `descriptions/ops/scale.yaml`" in files["docs/ops.md"]


def test_generated_python_compiles(base_tree):
    for rel, text in generated(base_tree).items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")


def test_nothing_path_dependent_appears(base_tree):
    for rel, text in generated(base_tree).items():
        assert str(base_tree) not in text, rel
        assert "/tmp" not in text and "pytest-of" not in text, rel


def test_registry_lists_every_family_and_the_optimizers_every_arch(base_tree):
    text = (base_tree / "lightnet/auto/registry.py").read_text()
    assert "from lightnet.auto.ops import scale as scale_ops" in text
    assert "from lightnet.auto.ops import shift as shift_ops" in text
    assert "optimizers" not in text  # the registry lists ops only
    text = (base_tree / "lightnet/auto/optimizers/__init__.py").read_text()
    assert "from lightnet.auto.optimizers import cpu" in text
    assert re.search(r'"cpu": cpu,', text)


def test_optimizer_module_has_only_the_explicit_expanders(base_tree):
    """shift is lowered to shift_cpu by the expand pass: no generated function."""
    text = (base_tree / "lightnet/auto/optimizers/cpu.py").read_text()
    assert re.search(r'EXPANDERS = \{\s+"scale": expand_scale,\s+\}', text)
    assert "if op.params.alpha == 0:" in text[text.index("def expand_scale"):]
    assert "shift" not in text
    assert "FALLBACK" not in text and "ARCHS" not in text  # the arch's facts: archs.py


def test_dtype_sets_are_generated_once(base_tree):
    text = (base_tree / "lightnet/auto/dtypes.py").read_text()
    assert "FLOAT = (DType.TL_FLOAT, DType.TL_DOUBLE)" in text
    scale = (base_tree / "lightnet/auto/ops/scale.py").read_text()
    assert "from lightnet.auto.dtypes import FLOAT" in scale
    assert 'TensorArg("src", dtype=FLOAT, ndim=2)' in scale


def test_docs_list_abstract_ops_only(base_tree):
    """One section per abstract op; the variants are listed in it."""
    text = (base_tree / "docs/ops.md").read_text()
    assert re.findall(r"^## (\w+)$", text, re.M) == ["scale", "shift"]
    assert "Variants: `scale` (none), `scale_cpu` (cpu)." in text


# Determinism --------------------------------------------------------------------------


def test_generating_twice_changes_nothing(tree):
    before = snapshot(tree)
    result = run(tree)
    assert (result.rc, result.out, result.err) == (0, "", "")
    assert snapshot(tree) == before  # not even rewritten (mtimes)


def test_two_roots_give_identical_files(base_tree, tmp_path):
    other = make_root(tmp_path / "elsewhere" / "deeper", BASE_OPS, BASE_OPTIMIZERS)
    assert run(other).rc == 0
    assert generated(other) == generated(base_tree)
    for rel in generated(base_tree):
        assert (other / rel).read_bytes() == (base_tree / rel).read_bytes(), rel


def test_description_order_on_disk_does_not_matter(base_tree, tmp_path):
    """Files are read sorted, whatever order they were created in."""
    root = make_root(tmp_path / "r", {"shift.yaml": BASE_OPS["shift.yaml"]})
    write_descriptions(root, {"scale.yaml": BASE_OPS["scale.yaml"]}, BASE_OPTIMIZERS)
    assert run(root).rc == 0
    assert generated(root) == generated(base_tree)


# --check ---------------------------------------------------------------------------------


def test_check_up_to_date_is_silent(tree):
    before = snapshot(tree)
    result = run(tree, "--check")
    assert (result.rc, result.out, result.err) == (0, "", "")
    assert snapshot(tree) == before


def test_check_after_editing_a_description(tree):
    path = tree / "descriptions/ops/shift.yaml"
    path.write_text(path.read_text().replace("default: 1}", "default: 2}"))
    before = snapshot(tree)
    result = run(tree, "--check")
    assert result.rc == 1
    assert result.out == ("stale: docs/ops.md\nstale: lightnet/auto/nn.py\n"  # shift's default
                          "stale: lightnet/auto/ops/shift.py\n")
    assert "out of date" in result.err
    assert snapshot(tree) == before


def test_check_missing_file(tree):
    (tree / "lightnet/auto/ops/shift.py").unlink()
    before = snapshot(tree)
    result = run(tree, "--check")
    assert (result.rc, result.out) == (1, "missing: lightnet/auto/ops/shift.py\n")
    assert snapshot(tree) == before
    assert not (tree / "lightnet/auto/ops/shift.py").exists()


def test_check_extra_file(tree):
    (tree / "lightnet/auto/ops/old.py").write_text("# left over\n")
    (tree / "lightnet/auto/ops/__pycache__").mkdir()
    (tree / "lightnet/auto/ops/__pycache__/scale.cpython-311.pyc").write_bytes(b"\0")
    before = snapshot(tree)
    result = run(tree, "--check")
    assert (result.rc, result.out) == (1, "extra: lightnet/auto/ops/old.py\n")
    assert snapshot(tree) == before


def test_check_lists_every_problem_sorted(tree):
    (tree / "lightnet/auto/registry.py").write_text("edited\n")
    (tree / "lightnet/auto/ops/scale.py").unlink()
    (tree / "lightnet/auto/zzz.py").write_text("")
    result = run(tree, "--check")
    assert result.rc == 1
    assert result.out.splitlines() == [
        "missing: lightnet/auto/ops/scale.py",
        "stale: lightnet/auto/registry.py",
        "extra: lightnet/auto/zzz.py",
    ]


def test_check_is_byte_exact(tree):
    """CRLF line ends are a difference, though reading as text would hide them."""
    path = tree / "lightnet/auto/ops/shift.py"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    result = run(tree, "--check")
    assert (result.rc, result.out) == (1, "stale: lightnet/auto/ops/shift.py\n")
    assert run(tree).out == "updated: lightnet/auto/ops/shift.py\n"
    assert b"\r" not in path.read_bytes()


# Writing ----------------------------------------------------------------------------------


def test_write_reports_and_repairs(tree):
    (tree / "lightnet/auto/registry.py").write_text("edited\n")
    (tree / "lightnet/auto/ops/shift.py").unlink()
    (tree / "lightnet/auto/ops/old.py").write_text("")
    result = run(tree)
    assert result.rc == 0
    assert result.out.splitlines() == [
        "created: lightnet/auto/ops/shift.py",
        "updated: lightnet/auto/registry.py",
        "removed: lightnet/auto/ops/old.py",
    ]
    assert run(tree, "--check").rc == 0


def test_removed_description_deletes_its_module(tree):
    (tree / "descriptions/ops/shift.yaml").unlink()
    result = run(tree)
    assert result.rc == 0
    assert "removed: lightnet/auto/ops/shift.py" in result.out.splitlines()
    assert not (tree / "lightnet/auto/ops/shift.py").exists()
    assert "shift" not in (tree / "lightnet/auto/registry.py").read_text()
    assert "expand_shift" not in (tree / "lightnet/auto/optimizers/cpu.py").read_text()
    assert run(tree, "--check").rc == 0


def test_report_names_paths_verbatim(tmp_path):
    """A family whose name contains `extra` or `missing` is reported as is."""
    ops = {"extract_missing.yaml": "extract_missing:\n  arch: none\n"}
    root = make_root(tmp_path / "r", ops)
    result = run(root)
    assert "created: lightnet/auto/ops/extract_missing.py" in result.out.splitlines()


def test_no_temp_files_left(tree):
    (tree / "descriptions/ops/shift.yaml").unlink()
    write_descriptions(tree, {"other.yaml": "other:\n  arch: none\n"})
    assert run(tree).rc == 0
    assert not [p for p in tree.rglob("*") if p.name.endswith(".tmp")]


def test_new_files_get_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        root = make_root(tmp_path / "r", {"a.yaml": "a:\n  arch: none\n"})
        assert run(root).rc == 0
    finally:
        os.umask(old)
    for rel in ("lightnet/auto/ops/a.py", "docs/ops.md"):
        assert (root / rel).stat().st_mode & 0o777 == 0o644, rel


def test_failed_replace_keeps_the_old_file_and_no_temp_file(tree, monkeypatch):
    path = tree / "descriptions/ops/shift.yaml"
    path.write_text(path.read_text().replace("default: 1}", "default: 2}"))
    old_module = (tree / "lightnet/auto/ops/shift.py").read_bytes()
    before = snapshot(tree)

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(output.os, "replace", failing_replace)
    result = run(tree)  # one line and exit status 1, no traceback
    assert (result.rc, result.err) == (1, "error: cannot write the generated files: disk full\n")
    # the first file to rewrite failed: nothing changed, no temp file remains
    assert snapshot(tree) == before
    assert (tree / "lightnet/auto/ops/shift.py").read_bytes() == old_module
    assert not [p for p in tree.rglob("*") if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert run(tree).rc == 0
    assert run(tree, "--check").rc == 0


def test_failure_after_some_files_leaves_each_file_whole(tree, monkeypatch):
    """Each file is either its old or its new content, never partly written."""
    path = tree / "descriptions/ops/shift.yaml"
    path.write_text(path.read_text().replace("default: 1}", "default: 2}"))
    old = {rel: (tree / rel).read_bytes() for rel in generated(tree)}
    new = render.render_all(tree, model.load(tree))
    real_replace = os.replace
    calls = []

    def replace_once(src, dst):
        calls.append(os.path.relpath(dst, tree))
        if len(calls) > 1:
            raise OSError("interrupted")
        real_replace(src, dst)

    monkeypatch.setattr(output.os, "replace", replace_once)
    result = run(tree)
    assert (result.rc, result.err) == (1, "error: cannot write the generated files: interrupted\n")
    monkeypatch.undo()
    assert calls == ["docs/ops.md", "lightnet/auto/nn.py"]  # sorted, stale only
    assert (tree / "docs/ops.md").read_text() == new["docs/ops.md"]
    for rel in set(old) - {"docs/ops.md"}:
        assert (tree / rel).read_bytes() == old[rel], rel
    assert not [p for p in tree.rglob("*") if p.name.endswith(".tmp")]
