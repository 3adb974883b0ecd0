"""Where trainyard keeps things: the repository checkout and the per-user cache.

The package is installed in strict editable mode (files are links into the
checkout), so the repository root is found by resolving this file's real path.
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout that holds tools/, stacks/ and runtimes/ (override: TRAINYARD_ROOT)."""
    override = os.environ.get("TRAINYARD_ROOT")
    if override:
        return Path(override).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tools" / "versions.toml").is_file() and (parent / "pyproject.toml").is_file():
            return parent
    raise RuntimeError(
        f"cannot find the trainyard checkout above {here}; set TRAINYARD_ROOT to the repository root"
    )


def cache_dir() -> Path:
    """Per-user cache for built tools and local clusters (override: TRAINYARD_CACHE)."""
    override = os.environ.get("TRAINYARD_CACHE")
    base = Path(override) if override else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainyard"
    return base.resolve()
