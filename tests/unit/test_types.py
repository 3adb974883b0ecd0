"""mypy finds nothing over the installed package (controller/, platform/, queues/, runtimes/, src/ under their
trainyard.* names), and the unit tests' fake API server is an `ApiView` like the real client and the cache.

mypy runs from the strict editable install's tree (build/__editable__...), where the folders carry their
package names; platform/ is a namespace package there, as at run time. Configuration: pyproject [tool.mypy].
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trainyard

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = Path(trainyard.__file__).parent.parent  # the editable tree: trainyard/ with every subpackage
CACHE = ROOT / "build" / ".mypy_cache"


def mypy(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(CACHE), *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_the_package_type_checks():
    assert (INSTALLED / "trainyard" / "platform").is_dir(), f"{INSTALLED} is not the installed tree"
    run = mypy("-p", "trainyard", cwd=INSTALLED)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_unit_tests_fake_is_an_api_view():
    """`fake_apiserver.as_view` returns the fake as an ApiView: mypy refuses it if a method drifts."""
    env = {**os.environ, "MYPYPATH": str(INSTALLED)}
    run = mypy("--follow-imports=silent", str(ROOT / "tests/unit/controller/fake_apiserver.py"), cwd=ROOT, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
