#!/usr/bin/env python3
"""How long `make test` takes as CI runs it: a fresh `git clone` of this checkout's HEAD, then `bash .ci/run` (a new
venv, the warm toolchain, every test). Prints the wall time and the counts pytest reports; exit 1 when the suite
fails. `--out DIR` writes DIR/suite.json.

Usage: .venv/bin/python bench/suite.py [--out DIR]
It runs the suite's own clusters (trainyard-test and others): run nothing else on them meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainyard.benchkit import run_record, write_results

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=*\s*(?P<body>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s", re.M)
"""pytest's last line: `2446 passed, 3 warnings in 2630.19s (0:43:50)` under -q, between `=` banners otherwise."""


def pytest_counts(output: str) -> dict:
    """The last pytest summary line's counts and its seconds."""
    found = list(SUMMARY.finditer(output))
    if not found:
        return {}
    last = found[-1]
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", last["body"])}
    return {**counts, "pytest_seconds": float(last["seconds"])}


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/suite.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write DIR/suite.json")
    args = parser.parse_args(argv)
    clone = Path(tempfile.mkdtemp(prefix="trainyard-suite-")) / "trainyard"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "KUBECONFIG"))}
    started = time.monotonic()
    run = subprocess.run(["bash", ".ci/run"], cwd=clone, env={**env, "CI": "true"}, capture_output=True, text=True)
    seconds = round(time.monotonic() - started, 1)
    output = run.stdout + run.stderr
    (Path(tempfile.gettempdir()) / "trainyard-suite.log").write_text(output)
    shutil.rmtree(clone.parent, ignore_errors=True)
    figures = {"exit_code": run.returncode, "seconds": seconds, **pytest_counts(output)}
    print(json.dumps(figures))
    if args.out:
        write_results(args.out, "suite", record, figures)
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
