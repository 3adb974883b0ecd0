"""Fixtures for catalog tests: a throw-away copy of the shipped catalog and stacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from catalog_builders import SHIPPED


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    """A copy of the shipped catalog (catalog.yaml, lock, releases/) plus the shipped stacks, safe to modify."""
    root = tmp_path / "runtimes"
    root.mkdir()
    shutil.copy2(SHIPPED / "catalog.yaml", root / "catalog.yaml")
    shutil.copy2(SHIPPED / "catalog.lock.json", root / "catalog.lock.json")
    shutil.copytree(SHIPPED / "releases", root / "releases")
    shutil.copytree(SHIPPED.parent / "stacks", tmp_path / "stacks")
    return root

