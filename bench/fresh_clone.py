#!/usr/bin/env python3
"""The README's commands as a new user meets them: a fresh `git clone` of this checkout's HEAD, `make up` (a new
venv from PyPI, the warm toolchain from ~/.cache/trainyard, the local cluster and `pulumi up` of the local stack),
the example TrainJob submitted as a tenant user until it is Complete, `trainyard fit`, `trainyard report`, `trainyard
usage`, then `make down`: the README's five-minute tour.
Prints the wall time of each step and fails (exit 1) when a step fails; `--out DIR` writes DIR/fresh_clone.json.

Usage: .venv/bin/python bench/fresh_clone.py [--out DIR] [--keep-clone]
It uses the default local cluster name (`trainyard`): stop a running `make up` first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainyard.benchkit import run_record, write_results

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/torch-distributed-team-a.yaml"
TOUR_ENV = 'eval "$(.venv/bin/trainyard cluster env)" && '
"""What the README's tour runs first in the shell: KUBECONFIG and the pinned kubectl."""


def timed(what: str, command: list[str], cwd: Path, env: dict | None = None, timeout: float = 3600) -> float:
    print(f"# {what}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    run = subprocess.run(command, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True)
    seconds = round(time.monotonic() - started, 1)
    if run.returncode != 0:
        raise SystemExit(f"{what} failed ({run.returncode}) after {seconds} s:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    print(f"# {what}: {seconds} s", flush=True)
    return seconds


def tour(line: str) -> list[str]:
    """A line of the README's tour, run as a user's shell runs it after the tour's `eval`."""
    return ["bash", "-c", TOUR_ENV + line]


def until_complete(clone: Path, env: dict, name: str, timeout: float = 300) -> float:
    """Seconds from now until the TrainJob has condition Complete=True."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        run = subprocess.run(tour(f"kubectl get trainjob {name} -n team-a -o "
                                  "jsonpath='{.status.conditions[?(@.type==\"Complete\")].status}'"),
                             cwd=clone, env=env, capture_output=True, text=True)
        if run.stdout.strip() == "True":
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    raise SystemExit(f"TrainJob {name} not Complete after {timeout} s")


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/fresh_clone.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write DIR/fresh_clone.json")
    parser.add_argument("--keep-clone", action="store_true")
    args = parser.parse_args(argv)
    clone = Path(tempfile.mkdtemp(prefix="trainyard-fresh-")) / "trainyard"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "KUBECONFIG"))}
    figures: dict = {}
    try:
        figures["make_up_seconds"] = timed("make up", ["make", "up"], clone, env)
        figures["fit_seconds"] = timed("trainyard fit", [".venv/bin/trainyard", "fit", EXAMPLE], clone, env)
        created = subprocess.run(tour(f"kubectl create -f {EXAMPLE} --as alice --as-group team-a-users -o name"),
                                 cwd=clone, env=env, capture_output=True, text=True, check=True).stdout.strip()
        figures["example_complete_seconds"] = until_complete(clone, env, created.split("/")[-1])
        timed("kubectl get", tour("kubectl get trainjobs,jobsets,podgroups -n team-a"), clone, env)
        figures["report_seconds"] = timed("trainyard report", [".venv/bin/trainyard", "report"], clone, env)
        figures["usage_seconds"] = timed("trainyard usage", [".venv/bin/trainyard", "usage", "--since", "1h"], clone, env)
    finally:
        figures["make_down_seconds"] = timed("make down", ["make", "down"], clone, env)
        if not args.keep_clone:
            shutil.rmtree(clone.parent, ignore_errors=True)
    print(json.dumps(figures))
    if args.out:
        write_results(args.out, "fresh_clone", record, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
