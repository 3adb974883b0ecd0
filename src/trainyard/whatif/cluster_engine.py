"""The what-if's cluster engine (I/O): one side replayed on a throw-away local cluster shaped as its stack.

The cluster runs the real vc-scheduler with the stack's scheduler configuration and queues, the real JobSet
controller and trainyard's controller (with the stack's reclaim rule); every tenant is onboarded with the
platform's own objects, so each job meets the admission, quota and priority checks a real one meets. What the
API server refuses is reported as never runnable with its own message. A job no node, rack or spine of the stack
could ever hold is not submitted (it would only wait); it is reported with the model's reason.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, ContextManager, Mapping, Sequence

from trainyard.cluster import local, tenant_readiness
from trainyard.cluster.state import ClusterPaths
from trainyard.platform.stack_model import StackConfig
from trainyard.schedtrace.replay import Replay, RunRecord
from trainyard.schedtrace.summary import SCHEDULE_CYCLE_S
from trainyard.scheduling.trace import TraceJob, offered_gpu_seconds
from trainyard.whatif import cluster_plan
from trainyard.whatif.compare import job_starts, prioritized, shape_refusal, side_figures
from trainyard.whatif.scenario import Scenario

PROFILE = "whatif"


@dataclass(frozen=True)
class ClusterRun:
    """One replay on a cluster of the stack's shape: its plan, the jobs submitted, what the replay recorded."""
    built: cluster_plan.ClusterPlan
    submitted_jobs: list[TraceJob]
    unsubmitted: list[dict[str, Any]]
    """Jobs no node, rack or spine could ever hold, with the model's reason (not submitted: they could only wait)."""
    record: RunRecord
    """In the cluster's (compressed) seconds."""
    held_back: dict[str, dict[str, float]]
    """vc-scheduler's own log of the replay: per queue, the trace seconds it was skipped as overused or had a task
    refused beyond its deserved share (`queues_held_back`): the mechanism the model's queue order must match."""


def run_on_cluster(config: StackConfig, scenario: Scenario, trace: Sequence[TraceJob], *,
                   speedup: float = cluster_plan.DEFAULT_SPEEDUP, port_base: int = cluster_plan.ENGINE_PORT_BASE,
                   echo: Callable[[str], None] = print, spec_changes: Mapping[str, Any] | None = None,
                   alongside: Callable[[Replay], ContextManager[Any]] | None = None) -> ClusterRun:
    """Start a cluster shaped as `config` (its ClusterSpec changed by `spec_changes`), replay the trace on it with
    `alongside(replay)` entered for the replay's length (watchers, reporters), stop the cluster."""
    from trainyard.toolchain.build import ensure_built

    built = cluster_plan.plan(config, port_base=port_base, speedup=speedup)
    if spec_changes:
        built = replace(built, spec=replace(built.spec, **spec_changes))
    unsubmitted = [{"job": job.name, "tenant": job.tenant, "gpus": job.gpus,
                    "reason": f"{reason} (not submitted: it could only wait)"}
                   for job in trace if (reason := shape_refusal(job, scenario)) is not None]
    skipped = {entry["job"] for entry in unsubmitted}
    submitted_jobs = [job for job in trace if job.name not in skipped]
    ensure_built(*local.REQUIRED_TOOLS)
    name = built.spec.name
    if local.is_running(name):
        local.down(name, echo=lambda *_: None)
    echo(f"  starting cluster {name}: {built.spec.nodes} nodes x {built.spec.gpus_per_node} GPUs")
    local.up(built.spec, echo=lambda line: None)
    try:
        record = _replay(built, submitted_jobs, speedup, echo, alongside)
        held_back = queues_held_back(_scheduler_log(name), SCHEDULE_CYCLE_S * speedup)
    finally:
        local.down(name, echo=lambda *_: None)
    return ClusterRun(built, submitted_jobs, unsubmitted, record, held_back)


def replay_on_cluster(config: StackConfig, scenario: Scenario, trace: Sequence[TraceJob], *,
                      speedup: float = cluster_plan.DEFAULT_SPEEDUP, port_base: int = cluster_plan.ENGINE_PORT_BASE,
                      echo: Callable[[str], None] = print) -> dict[str, Any]:
    """The side's figures as `compare.replay_side` gives them, measured on a cluster started for it and
    stopped afterwards, plus `engine` (what ran it), `unfinished` (jobs still waiting when it gave up) and `jobs`
    (each started job's wait and nodes)."""
    started = time.monotonic()
    run = run_on_cluster(config, scenario, trace, speedup=speedup, port_base=port_base, echo=echo)
    record = run.record
    refused = [{"job": job.name, "tenant": job.tenant, "gpus": job.gpus, "reason": server_words(record.refused[job.name])}
               for job in run.submitted_jobs if job.name in record.refused]
    runnable = prioritized([job for job in run.submitted_jobs if job.name not in record.refused], scenario)
    submitted, pods, end = cluster_plan.expanded(record.submitted, list(record.pods.values()), record.end, speedup)
    side = side_figures(scenario, runnable, run.unsubmitted + refused, submitted, pods, end)
    side["not_modelled"] = []  # the cluster ran everything the model leaves out
    side["engine"] = {"name": "cluster", "speedup": speedup, "notes": list(run.built.notes),
                      "wall_s": round(time.monotonic() - started, 1)}
    side["unfinished"] = record.unfinished
    side["jobs"] = job_starts(submitted, pods)
    side["held_back"] = run.held_back
    return side


def _replay(built: cluster_plan.ClusterPlan, trace: Sequence[TraceJob], speedup: float, echo,
            alongside: Callable[[Replay], ContextManager[Any]] | None = None) -> RunRecord:
    name = built.spec.name
    replay = Replay(name, (), built.spec.nodes * built.spec.gpus_per_node, echo=echo)
    for node, labels in built.node_labels.items():
        local.kubectl(name, "label", "node", node, *(f"{k}={v}" for k, v in labels.items()), "--overwrite")
    tenant_readiness.wait_quota_controller_counting(name, replay.core)
    replay.apply(list(built.objects))
    namespaces = sorted(set(built.namespaces.values()))
    tenant_readiness.wait_tenants_in_force(name, replay.core, namespaces)
    replay.use_scheduler_settings(built.scheduler)
    fast = cluster_plan.compressed(trace, speedup)
    capacity = max(1, built.spec.nodes * built.spec.gpus_per_node)
    timeout = max((j.arrival for j in fast), default=0) + 3 * offered_gpu_seconds(fast) / capacity + 120
    echo(f"  replaying {len(fast)} jobs ({speedup:g}x faster than the trace; at most {timeout:.0f} s)")
    with (alongside(replay) if alongside else contextlib.nullcontext()):
        return replay.run(fast, PROFILE, gang=True, direct=False, timeout=timeout,
                          build=lambda job: [cluster_plan.submission(job, built.namespaces)])


HELD_BACK = re.compile(r"^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*Queue <([^>]+)> is overused"
                       r"(?P<refused> when considering task)?", re.M)
SAME_CYCLE_S = 0.25
"""Log lines of one queue closer than this belong to one scheduling cycle (the cycle is 500 ms)."""


def queues_held_back(log: str, seconds_per_cycle: float) -> dict[str, dict[str, float]]:
    """Per queue, from vc-scheduler's log (-v=3), the seconds its waiting jobs were held back by `proportion`:
    `overused_s` (allocate skipped the whole queue) and `refused_s` (a task would take the queue beyond its
    deserved share), each the cycles it happened in times `seconds_per_cycle` (the model's `held_back`)."""
    last: dict[tuple[str, str], float] = {}
    out: dict[str, dict[str, float]] = {}
    for found in HELD_BACK.finditer(log):
        hours, minutes, seconds, queue = found.group(1), found.group(2), found.group(3), found.group(4)
        at = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        field = "refused_s" if found.group("refused") else "overused_s"
        previous = last.get((queue, field))
        last[(queue, field)] = at
        if previous is not None and 0 <= at - previous < SAME_CYCLE_S:
            continue
        counts = out.setdefault(queue, {"overused_s": 0.0, "refused_s": 0.0})
        counts[field] = round(counts[field] + seconds_per_cycle, 3)
    return dict(sorted(out.items()))


def _scheduler_log(name: str) -> str:
    path = ClusterPaths.for_name(name).logs / "vc-scheduler.log"
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def server_words(message: str) -> str:
    """The API server's refusal without the client library's wrapping: the `message` of the Status in the response
    body when there is one, at most 300 characters."""
    found = re.search(r'"message":\s*"((?:[^"\\]|\\.)*)"', message)
    if found:
        return json.loads(f'"{found.group(1)}"')[:300]
    return message.strip()[-300:]
