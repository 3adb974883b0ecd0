"""The workload a what-if replays on both sides: a generated trace sized for the stack in effect, or a trace file.

A trace file is JSON, `{"jobs": [...]}`, each job in the schedtrace shape with camelCase keys:
`name`, `tenant`, `arrival` and `duration` (seconds), `pods`, `gpusPerPod`, `tier` (1 rack, 2 spine, or null)
and optionally `priorityClass` and `checkpointEvery` (seconds of work between the job's checkpoints: evicted, it
resumes from its last one; null or absent: it saves none). `trace_document` writes the same shape (`whatif --save-trace FILE`), so a generated
trace can be saved, edited and replayed again. Reading checks every field and names the bad one with its fix.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainyard.errors import ProblemsError
from trainyard.platform.problems import ConfigProblem
from trainyard.scheduling.trace import LARGEST_RACK_GANG, RACK_TIER, SPINE_TIER, Tenant, TraceJob, generate
from trainyard.whatif.scenario import Scenario

GENERATED, RECORDED = "generated", "recorded"
DEFAULT_JOBS = 150
"""The scheduling trace's size: about two simulated hours of an overloaded local cluster, under a second per side."""


class TraceError(ProblemsError):
    """A trace file the what-if cannot replay; every problem names its field and the fix."""


def generated(current: Scenario, tenants: Sequence[str], seed: int, jobs: int = DEFAULT_JOBS) -> list[TraceJob]:
    """A seeded trace that offers 1.5x the current cluster, each tenant submitting in proportion to what the stack
    in effect entitles it to (`entitled_gpus`), no job bigger than that entitlement (a gang above its queue's
    deserved share waits until the other queues ask for less): a workload the stack in effect serves, so what
    changes on the proposed side is the stack's doing."""
    if not tenants:
        raise TraceError([ConfigProblem("stack", "tenants", "no tenant to submit jobs",
                                        "add a tenant to the stack (trainyard:tenants)")])
    entitled = entitled_gpus(current)
    loads = {name: entitled.get(name, 0.0) for name in tenants}
    if not any(loads.values()):
        loads = dict.fromkeys(tenants, 1.0)
    total = sum(loads.values())
    trace = generate(seed, jobs, current.capacity,
                     tuple(Tenant(name, 1, loads[name] / total) for name in tenants if loads[name] > 0),
                     rack_nodes=max(1, current.rack_nodes()), spine_nodes=max(1, current.spine_nodes()),
                     node_gpus=current.nodes[0].gpus if current.nodes else 8)
    return [_sized(job, current, int(entitled.get(job.tenant, 0.0))) for job in trace]


def entitled_gpus(current: Scenario) -> dict[str, float]:
    """GPUs each tenant may expect on a full cluster: its deserved GPUs under `capacity` (its weight share when it
    has none), its weight share under `proportion`, at most its GPU cap."""
    total = sum(t.weight for t in current.tenants.values()) or 1
    out = {}
    for name, terms in current.tenants.items():
        share = current.capacity * terms.weight / total
        if current.policy.queue_plugin == "capacity" and terms.deserved_gpus:
            share = float(terms.deserved_gpus)
        out[name] = min(share, float(terms.cap_gpus)) if terms.cap_gpus is not None else share
    return out


def _sized(job: TraceJob, current: Scenario, most_gpus: int) -> TraceJob:
    """The job shrunk to `most_gpus` (whole pods, at least one), its tier set as the generator sets it."""
    pods = job.pods
    if job.gpus > most_gpus:
        pods = max(1, most_gpus // job.gpus_per_pod)
    if pods == 1:
        return replace(job, pods=1, tier=None)
    tier = RACK_TIER if pods <= min(LARGEST_RACK_GANG, current.rack_nodes()) else SPINE_TIER
    return replace(job, pods=pods, tier=tier if current.topology else None)


_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "name": (str, True), "tenant": (str, True), "arrival": ((int, float), True), "duration": ((int, float), True),
    "pods": (int, True), "gpusPerPod": (int, True), "tier": ((int, type(None)), False),
    "priorityClass": ((str, type(None)), False), "checkpointEvery": ((int, float, type(None)), False)}


def parse_trace(document: Any, file: str) -> list[TraceJob]:
    """TraceJobs from a trace document, sorted by arrival; a TraceError lists every bad field."""
    problems: list[ConfigProblem] = []

    def bad(path: str, message: str, fix: str) -> None:
        problems.append(ConfigProblem(file, path, message, fix))

    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise TraceError([ConfigProblem(file, "jobs", "no list of jobs",
                                        'write {"jobs": [{"name": ..., "tenant": ..., ...}, ...]}')])
    out, seen = [], set()
    for index, entry in enumerate(jobs):
        where = f"jobs[{index}]"
        if not isinstance(entry, dict):
            bad(where, "is not an object", "write each job as an object with name, tenant, arrival, ...")
            continue
        for key in sorted(set(entry) - set(_FIELDS)):
            bad(f"{where}.{key}", "is not a trace field", f"use only {', '.join(_FIELDS)}")
        fine = True
        for key, (kinds, required) in _FIELDS.items():
            value = entry.get(key)
            if key not in entry:
                if required:
                    bad(f"{where}.{key}", "is missing", f"add {key}")
                    fine = False
            elif isinstance(value, bool) or not isinstance(value, kinds):
                bad(f"{where}.{key}", f"{value!r} has the wrong type", f"give {key} as {_kind(kinds)}")
                fine = False
        if not fine:
            continue
        numbers = (("arrival", 0, "0 or more seconds"), ("duration", 0, "more than 0 seconds"),
                   ("pods", 1, "1 or more"), ("gpusPerPod", 0, "0 or more"))
        for key, least, fix in numbers:
            if entry[key] < least or (key == "duration" and entry[key] <= 0):
                bad(f"{where}.{key}", f"{entry[key]} is out of range", f"use {fix}")
                fine = False
        if entry.get("checkpointEvery") is not None and entry["checkpointEvery"] <= 0:
            bad(f"{where}.checkpointEvery", f"{entry['checkpointEvery']} is out of range",
                "use seconds of work between checkpoints (more than 0), or null for a job that saves none")
            fine = False
        if entry.get("tier") not in (None, RACK_TIER, SPINE_TIER):
            bad(f"{where}.tier", f"{entry['tier']} is not a tier", f"use {RACK_TIER} (rack), {SPINE_TIER} (spine) or null")
            fine = False
        if entry["name"] in seen:
            bad(f"{where}.name", f"{entry['name']!r} is used twice", "give every job its own name")
            fine = False
        seen.add(entry["name"])
        if fine:
            out.append(TraceJob(entry["name"], entry["tenant"], float(entry["arrival"]), float(entry["duration"]),
                                entry["pods"], entry["gpusPerPod"], entry.get("tier") if entry["pods"] > 1 else None,
                                priority_class=entry.get("priorityClass"),
                                checkpoint_every=None if entry.get("checkpointEvery") is None
                                else float(entry["checkpointEvery"])))
    if problems:
        raise TraceError(problems, heading=f"{file}: not a trace the what-if can replay")
    return sorted(out, key=lambda j: (j.arrival, j.name))


def _kind(kinds: type | tuple[type, ...]) -> str:
    names = {int: "a whole number", float: "a number", str: "a string", type(None): "null"}
    members = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(dict.fromkeys(names[k] for k in members))


def read_trace(path: Path) -> list[TraceJob]:
    try:
        document = json.loads(path.read_text())
    except OSError as err:
        raise TraceError([ConfigProblem(str(path), "file", f"cannot read it ({err.strerror})",
                                        "give the path of a trace file, or --trace generated")]) from None
    except json.JSONDecodeError as err:
        raise TraceError([ConfigProblem(str(path), "file", f"not JSON ({err.msg}, line {err.lineno})",
                                        'write the trace as JSON: {"jobs": [...]}')]) from None
    return parse_trace(document, str(path))


def trace_document(trace: Sequence[TraceJob]) -> dict[str, list[dict[str, Any]]]:
    """The trace file shape of a trace (what `parse_trace` reads back)."""
    jobs = []
    for job in trace:
        entry: dict[str, Any] = {"name": job.name, "tenant": job.tenant, "arrival": job.arrival,
                                 "duration": job.duration, "pods": job.pods, "gpusPerPod": job.gpus_per_pod,
                                 "tier": job.tier}
        if job.priority_class:
            entry["priorityClass"] = job.priority_class
        if job.checkpoint_every is not None:
            entry["checkpointEvery"] = job.checkpoint_every
        jobs.append(entry)
    return {"jobs": jobs}


def tenants_of(*sides: Mapping[str, object]) -> list[str]:
    """Every tenant of either side, in name order: both replay the same trace."""
    return sorted({name for side in sides for name in side})
