"""Shared generated trees: black is the slow part, so each is generated once."""

from __future__ import annotations

import shutil

import pytest

from genutil import BASE_OPS, BASE_OPTIMIZERS, make_root, run


@pytest.fixture(scope="session")
def base_tree(tmp_path_factory):
    """A root with the fixture families, generated. Read only: copy it to change it."""
    root = make_root(tmp_path_factory.mktemp("base") / "root", BASE_OPS, BASE_OPTIMIZERS)
    result = run(root)
    assert result.rc == 0, result.err
    return root


@pytest.fixture
def tree(base_tree, tmp_path):
    """A private copy of the generated base tree (mtimes preserved)."""
    return shutil.copytree(base_tree, tmp_path / "root")
