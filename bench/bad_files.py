#!/usr/bin/env python3
"""Hostile files through the real CLI (issue 18.5): each case is a file a user could hand trainyard, run as
`trainyard validate|render|platform validate` in a subprocess under a 1 GiB address-space limit and a time
limit, and classified: refused clearly, accepted silently, traceback, out of memory, timeout. Prints counts
per class and every case that was not refused clearly; exits 1 if any was.

Usage: .venv/bin/python bench/bad_files.py [--class NAME ...] [--out DIR]
`tests/unit/test_bad_files.py` runs the classes fixed so far in `make test`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from trainyard.benchkit import run_record, write_results
from trainyard.k8s import TRAINER_API_VERSION

ROOT = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 1 << 30
TIME_LIMIT = 60
OUTCOMES = ("refused clearly", "accepted silently", "traceback", "out of memory", "timeout")

TRAINJOB = (f"apiVersion: {TRAINER_API_VERSION}\nkind: TrainJob\nmetadata: {{name: tj, namespace: team-a}}\n"
            "spec:\n  runtimeRef: {name: torch-distributed-volcano}\n")


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    lines = ["a0: &a0 [" + ",".join(["lol"] * fan) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def shipped_stack(name: str) -> str:
    return (ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text()


def with_config_line(stack: str, line: str) -> str:
    return stack.replace("config:\n", f"config:\n  {line}\n", 1)


@dataclass(frozen=True)
class Case:
    """One file and the command that reads it; `{file}` in the arguments is the file's path."""

    klass: str
    name: str
    content: bytes
    args: tuple[str, ...]
    stack: bool = False  # the file is a stack file, read by `platform validate --stack`


def trainjob_case(klass: str, name: str, text: str | bytes, *extra: str, command: str = "validate") -> Case:
    content = text if isinstance(text, bytes) else text.encode()
    return Case(klass, name, content, (command, "{file}", "--catalog", "1.2.0", "--tenant", "team-a", *extra))


def stack_case(klass: str, name: str, text: str | bytes) -> Case:
    return Case(klass, name, text if isinstance(text, bytes) else text.encode(), (), stack=True)


def runtime_with_typo() -> bytes:
    """The catalog's torch-distributed-volcano with `schedulerName` misspelt, plus a TrainJob on it."""
    import yaml

    from trainyard.runtimes import load_catalog
    from trainyard.runtimes.publish import cluster_runtimes_of

    runtime = next(r for r in cluster_runtimes_of(load_catalog(), "1.2.0")
                   if r["metadata"]["name"] == "torch-distributed-volcano")
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["schedulerNamee"] = pod.pop("schedulerName", "volcano")
    trainjob = yaml.safe_load(TRAINJOB)
    trainjob["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
    return yaml.safe_dump_all([runtime, trainjob]).encode()


def cases() -> list[Case]:
    local, prod = shipped_stack("local"), shipped_stack("prod")
    tenant_a = "    - name: team-a\n"
    return [
        stack_case("alias bomb", "stack", "config:\n" + textwrap.indent(alias_bomb(), "  ")
                   + "  trainyard:tenants: *a8\n"),
        trainjob_case("alias bomb", "trainjob", alias_bomb() + TRAINJOB),
        trainjob_case("alias bomb", "trainjob render", alias_bomb() + TRAINJOB, command="render"),
        stack_case("non-UTF-8 byte", "stack", with_config_line(local, "trainyard:clusterName: caf\xe9").encode("latin-1")),
        trainjob_case("non-UTF-8 byte", "trainjob", (TRAINJOB + "  labels: {owner: caf\xe9}\n").encode("latin-1")),
        stack_case("duplicate key", "top-level tenants twice", local + "  trainyard:tenants: []\n"),
        stack_case("duplicate key", "tenant catalogVersion twice",
                   local.replace(tenant_a, tenant_a + "      catalogVersion: 1.2.0\n", 1)),
        trainjob_case("duplicate key", "trainjob spec key twice", TRAINJOB + "  trainer: {numNodes: 1}\n  trainer: {numNodes: 2}\n"),
        trainjob_case("huge count", "numNodes int32 max", TRAINJOB + "  trainer: {numNodes: 2147483647}\n"),
        trainjob_case("huge count", "numProcPerNode above int32", TRAINJOB + "  trainer: {numProcPerNode: 2147483648}\n"),
        Case("unknown tenant", "ClusterTrainingRuntime job",
             TRAINJOB.replace("{name: torch-distributed-volcano}",
                              "{name: torch-distributed, kind: ClusterTrainingRuntime}").encode(),
             ("validate", "{file}", "--catalog", "1.2.0", "--tenant", "nobody")),
        stack_case("stack rules", "duplicate rack names", with_config_line(
            local, "trainyard:topology: {racks: [{name: r1}, {name: r1, spine: s2}]}")),
        stack_case("stack rules", "empty user name", local.replace("users: [team-a-users]", 'users: [team-a-users, ""]', 1)),
        stack_case("stack rules", "controllersRunLocally in prod",
                   with_config_line(prod, 'trainyard:controllersRunLocally: "true"')),
        # Below a replicated job's Job spec: checked against the pinned Kubernetes OpenAPI (trainyard.toolchain.k8s_fields).
        Case("pod spec typo", "schedulerNamee in a runtime's pod spec", runtime_with_typo(),
             ("validate", "{file}", "--runtime", "{file}")),
        trainjob_case("pod spec typo", "schedulerNamee in podTemplateOverrides", TRAINJOB
                      + "  podTemplateOverrides:\n    - targetJobs: [{name: node}]\n      spec: {schedulerNamee: x}\n"),
        trainjob_case("metadata", "metadata.lables", TRAINJOB.replace("metadata: {name: tj,", "metadata: {lables: {a: b}, name: tj,")),
        trainjob_case("metadata", "label value over 63 characters",
                      TRAINJOB.replace("metadata: {name: tj,", "metadata: {labels: {a: " + "x" * 64 + "}, name: tj,")),
        trainjob_case("metadata", "uppercase namespace", TRAINJOB.replace("namespace: team-a", "namespace: Team-A")),
    ]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, what the tool printed). A stack case is written as stacks/Pulumi.<scratch>.yaml of this checkout
    (what `platform validate --stack` reads) and removed afterwards."""
    with tempfile.TemporaryDirectory() as scratch:
        args = list(case.args)
        if case.stack:
            name = f"bad-files-{os.getpid()}"
            path = ROOT / "stacks" / f"Pulumi.{name}.yaml"
            args = ["platform", "validate", "--stack", name]
        else:
            path = Path(scratch) / "input.yaml"
            args = [a.replace("{file}", str(path)) for a in args]
        path.write_bytes(case.content)
        try:
            run = subprocess.run([sys.executable, "-m", "trainyard.cli", *args], capture_output=True, text=True,
                                 timeout=TIME_LIMIT, preexec_fn=_limits, cwd=scratch)
        except subprocess.TimeoutExpired:
            return "timeout", ""
        finally:
            if case.stack:
                path.unlink(missing_ok=True)
    output = run.stdout + run.stderr
    if "MemoryError" in output or run.returncode in (-9, 137):
        return "out of memory", output
    if "Traceback" in output:
        return "traceback", output
    return ("refused clearly" if run.returncode != 0 else "accepted silently"), output


def run_classes(selected: Callable[[Case], bool] = lambda case: True) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    for case in filter(selected, cases()):
        outcome, output = run_case(case)
        counts.setdefault(case.klass, Counter())[outcome] += 1
        if outcome != "refused clearly":
            counts[case.klass][f"case: {case.name}: {outcome}: {output.strip()[-200:]}"] += 1
    return counts


def outcome_counts(counts: dict[str, Counter], seconds: float) -> dict:
    """The figures of a run: cases per outcome over every class, per class, and what was not refused clearly."""
    outcomes = Counter()
    for tally in counts.values():
        outcomes.update({o: tally.get(o, 0) for o in OUTCOMES})
    failures = [f"{klass}: {key[6:]}" for klass, tally in counts.items() for key in tally if key.startswith("case: ")]
    return {"cases": sum(outcomes.values()), "outcomes": dict(outcomes),
            "not_refused_clearly": sum(outcomes.values()) - outcomes["refused clearly"],
            "by_class": {klass: {o: tally.get(o, 0) for o in OUTCOMES} for klass, tally in counts.items()},
            "failures": failures, "seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class", dest="classes", action="append", help="only these classes")
    parser.add_argument("--out", type=Path, help="write DIR/bad_files.json: the outcomes with the run's provenance")
    args = parser.parse_args(argv)
    record = run_record(["bench/bad_files.py", *(sys.argv[1:] if argv is None else argv)])
    started = time.monotonic()
    counts = run_classes(lambda case: not args.classes or case.klass in args.classes)
    if args.out:
        write_results(args.out, "bad_files", record, outcome_counts(counts, time.monotonic() - started))
    print(f"{'class':<16} " + " ".join(f"{o:>17}" for o in OUTCOMES))
    failed = False
    for klass, tally in counts.items():
        print(f"{klass:<16} " + " ".join(f"{tally.get(o, 0):>17}" for o in OUTCOMES))
        failed |= any(tally.get(o, 0) for o in OUTCOMES[1:])
    for klass, tally in counts.items():
        for key in tally:
            if key.startswith("case: "):
                print(f"  {klass}: {key[6:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
