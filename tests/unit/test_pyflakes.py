"""ruff's pyflakes rules (unused imports and names, undefined names, shadowing) hold over the whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("src", "controller", "platform", "runtimes", "queues", "tests", "bench", "__main__.py")


def test_pyflakes_rules_find_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--output-format", "concise",
                          "--no-cache", *FOLDERS], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
