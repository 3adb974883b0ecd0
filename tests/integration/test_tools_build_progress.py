"""`trainyard tools build` on a machine whose cache lacks a tool (a fresh cache directory here, the Go caches warm):
without a terminal it prints the tool as it starts and as it ends, with the time so far, not a silent wait."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from trainyard.toolchain.versions import tool

pytestmark = pytest.mark.integration


def test_a_build_without_a_terminal_says_each_tool_as_it_starts_and_ends(tmp_path):
    env = {**os.environ, "TRAINYARD_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "trainyard.cli", "tools", "build", "cni-plugins"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert any(re.fullmatch(r"1 tool\(s\) to build, about \d+ (s|min \d\d s); logs in .*", line) for line in lines), lines
    start = next(i for i, line in enumerate(lines) if line.startswith("[1/1] building cni-plugins"))
    end = next(i for i, line in enumerate(lines) if line.startswith("[1/1] cni-plugins"))
    assert start < end and re.search(r"built in \d+ (s|min \d\d s); \d+ (s|min \d\d s) so far$", lines[end]), lines
    again = subprocess.run([sys.executable, "-m", "trainyard.cli", "tools", "build", "cni-plugins"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert f"cni-plugins {tool('cni-plugins').version}: already built" in again.stdout, again.stdout
