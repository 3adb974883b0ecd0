"""One what-if from the command line's inputs: read both stacks and the workload, replay, return the result (I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainyard.errors import TrainyardError
from trainyard.platform.problems import ConfigProblem
from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.cluster_plan import DEFAULT_SPEEDUP, ENGINE_PORT_BASE
from trainyard.whatif.compare import compare
from trainyard.whatif.scenario import scenario
from trainyard.whatif.stacks import StackPair, scheduling_changes, stack_pair
from trainyard.whatif.text import render
from trainyard.whatif.workload import DEFAULT_JOBS, GENERATED, RECORDED, TraceError, generated, read_trace, tenants_of


@dataclass(frozen=True)
class WhatIf:
    result: dict[str, dict[str, Any]]
    """`{"current": side, "proposed": side}` (compare.replay_side), each with its stack and workload."""
    changes: list[str]
    trace: list[TraceJob]
    """The workload both sides replayed (`--save-trace` writes it as a trace file)."""


def workload(trace: str, pair: StackPair, seed: int, jobs: int) -> tuple[list[TraceJob], dict[str, Any]]:
    if trace == RECORDED:
        raise TraceError([ConfigProblem("--trace", "recorded", "the usage record (trainyard usage) cannot be replayed as a trace yet",
                                        "use --trace generated, or a trace file (trainyard platform whatif --help)")])
    if trace == GENERATED:
        current = scenario(pair.current)
        names = tenants_of({t.name: t for t in pair.current.tenants}, {t.name: t for t in pair.proposed.tenants})
        return generated(current, names, seed, jobs), {"source": GENERATED, "seed": seed, "jobs": jobs}
    jobs_read = read_trace(Path(trace))
    return jobs_read, {"source": trace, "seed": seed, "jobs": len(jobs_read)}


MODEL, CLUSTER = "model", "cluster"
ENGINES = (MODEL, CLUSTER)


def what_if(pair: StackPair, trace: str = GENERATED, seed: int = 0, jobs: int = DEFAULT_JOBS, engine: str = MODEL,
            speedup: float = DEFAULT_SPEEDUP, port_base: int = ENGINE_PORT_BASE, echo=print) -> WhatIf:
    """Replay the workload under the stack in effect and under the proposal (same trace, same seed), on the
    model (seconds) or, `engine="cluster"`, on a throw-away local cluster per side (minutes)."""
    replayed, described = workload(trace, pair, seed, jobs)
    if engine == CLUSTER:
        from trainyard.whatif.cluster_engine import replay_on_cluster
        from trainyard.whatif.cluster_plan import plan

        for config in (pair.current, pair.proposed):  # a stack it cannot build is refused before anything starts
            plan(config, port_base=port_base, speedup=speedup)
        result: dict[str, dict[str, Any]] = {}
        for side, config in (("current", pair.current), ("proposed", pair.proposed)):
            echo(f"{side} stack on the cluster engine:")
            result[side] = replay_on_cluster(config, scenario(config), replayed, speedup=speedup, port_base=port_base,
                                             echo=echo)
    else:
        result = compare(scenario(pair.current), scenario(pair.proposed), replayed, seed)
        for figures in result.values():
            figures["engine"] = {"name": MODEL}
    result["current"] = {"stack": pair.current_label, "workload": described, **result["current"]}
    result["proposed"] = {"stack": pair.proposed_label, "workload": described, **result["proposed"]}
    return WhatIf(result, scheduling_changes(pair.current, pair.proposed), replayed)


def what_if_files(stack_path: Path, root: Path, proposed: Path | None = None, trace: str = GENERATED, seed: int = 0,
                  jobs: int = DEFAULT_JOBS, **engine: Any) -> WhatIf:
    return what_if(stack_pair(stack_path, root, proposed), trace, seed, jobs, **engine)


def preview_summary(stack_path: Path, root: Path, seed: int = 0, jobs: int = DEFAULT_JOBS) -> str | None:
    """What `platform preview` prints before Pulumi's diff when the working copy changes a setting the what-if
    replays (against the last commit); None when none changes, or when there is no valid pair to compare (no
    committed version yet, or a stack error, which the preview itself then reports)."""
    try:
        pair = stack_pair(stack_path, root)
    except TrainyardError:
        return None
    if not scheduling_changes(pair.current, pair.proposed):
        return None
    found = what_if(pair, GENERATED, seed, jobs)
    return render(found.result, found.changes)
