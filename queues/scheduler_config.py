"""Render the Volcano scheduler configuration (the `volcano-scheduler.conf` ConfigMap key).

Two profiles:
- `gang` (default): `enqueue, allocate, backfill`; a gang binds whole or not at all (gang plugin),
  each queue gets at most its weighted share (`proportion`). No `overcommit` unless
  `overcommitFactor` is set: its enqueue gate reserves a gang's minResources from the moment the
  gang is Inqueue, but `proportion` refuses to allocate a gang that would take its queue beyond its
  weighted share, so on a full cluster the light queues' admitted gangs held the GPUs that freed
  up while the heavy queues' gangs waited "resource in cluster is overused" (measured with
  bench/scheduling_trace.py; docs/tests.md "Scheduling trace").
- `fair-share`: adds `preempt` and `reclaim` (never `overcommit`): reclaim and preempt only act
  on PodGroups that are already Inqueue.

`binpack` lists `nvidia.com/gpu` explicitly: Volcano ignores GPUs in binpack unless asked,
and `nodeorder`'s least-requested score is zeroed so it does not pull the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from trainyard.k8s import GPU_RESOURCE
from trainyard.k8s import part_of_trainyard
from trainyard.problems import ConfigProblem
from trainyard.field_markers import DERIVED

PROFILES = ("gang", "fair-share")
QUEUE_PLUGINS = ("proportion", "capacity")


@dataclass(frozen=True)
class SchedulerSettings:
    """The stack's `scheduler:` keys (fields marked DERIVED are set by the program, not the stack)."""

    profile: str = "gang"
    """`gang` or `fair-share` (adds preempt and reclaim actions)."""
    queue_plugin: str = "proportion"
    """`proportion` or `capacity` (elastic queues, hierarchy)."""
    gpu_resource: str = field(default=GPU_RESOURCE, metadata=DERIVED)
    binpack_weight: int = 10
    """Weight of the binpack plugin (0 or more)."""
    gpu_binpack_weight: int = 10
    """Weight of GPUs inside binpack."""
    topology_weight: int = 10
    """Weight of network-topology-aware placement."""
    overcommit_factor: float | None = None
    """None: no `overcommit` plugin. A factor (>= 1.0) gates enqueue in the `gang` profile: a gang is
    admitted to its queue only while the admitted gangs' minResources fit factor x the cluster."""
    extra_binpack_resources: tuple[str, ...] = field(default_factory=tuple, metadata=DERIVED)
    hierarchical_queues: bool = field(default=False, metadata=DERIVED)
    """Queues with parents (the stack's `queues:`): only `capacity` supports them, with `enableHierarchy`."""

    def problems(self, file: str = "", path: str = "scheduler") -> list[ConfigProblem]:
        """The same problem records stack validation reports (field under `path`, message, fix), not strings."""
        out = []

        def problem(key: str, message: str, fix: str) -> None:
            out.append(ConfigProblem(file, f"{path}.{key}", message, fix))

        if self.profile not in PROFILES:
            problem("profile", f"{self.profile!r} is not a profile", f"use one of the allowed values: {', '.join(PROFILES)}")
        if self.queue_plugin not in QUEUE_PLUGINS:
            problem("queuePlugin", f"{self.queue_plugin!r} is not a queue plugin",
                    f"use one of the allowed values: {', '.join(QUEUE_PLUGINS)}")
        for name, value in (("binpackWeight", self.binpack_weight), ("gpuBinpackWeight", self.gpu_binpack_weight),
                            ("topologyWeight", self.topology_weight)):
            if value < 0:
                problem(name, f"{value} is below 0", "use a weight of 0 or more")
        if self.overcommit_factor is not None and self.overcommit_factor < 1.0:
            problem("overcommitFactor", f"{self.overcommit_factor} is below 1.0, which Volcano ignores", "use 1.0 or more")
        return out


def actions(settings: SchedulerSettings) -> list[str]:
    base = ["enqueue", "allocate", "backfill"]
    return base + ["preempt", "reclaim"] if settings.profile == "fair-share" else base


def tiers(settings: SchedulerSettings) -> list[dict]:
    binpack_resources = [settings.gpu_resource, *settings.extra_binpack_resources]
    binpack_args: dict[str, object] = {
        "binpack.weight": settings.binpack_weight,
        "binpack.resources": ",".join(binpack_resources),
    }
    for resource in binpack_resources:
        binpack_args[f"binpack.resources.{resource}"] = settings.gpu_binpack_weight
    second: list[dict] = []
    if settings.profile == "gang" and settings.overcommit_factor is not None:
        second.append({"name": "overcommit", "arguments": {"overcommit-factor": settings.overcommit_factor}})
    second += [
        {"name": "predicates"},
        {"name": settings.queue_plugin, **({"enableHierarchy": True} if settings.hierarchical_queues and settings.queue_plugin == "capacity" else {})},
        {"name": "nodeorder", "arguments": {"leastrequested.weight": 0, "balancedresource.weight": 0}},
        {"name": "binpack", "arguments": binpack_args},
        {"name": "network-topology-aware", "arguments": {
            "weight": settings.topology_weight,
            "hypernode.binpack.resources": settings.gpu_resource,
            f"hypernode.binpack.resources.{settings.gpu_resource}": settings.gpu_binpack_weight,
        }},
    ]
    first = [
        {"name": "priority"},
        {"name": "gang", "enablePreemptable": False},
        {"name": "conformance"},
    ]
    return [{"plugins": first}, {"plugins": second}]


def scheduler_config(settings: SchedulerSettings = SchedulerSettings()) -> dict:
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(f"{p.field}: {p.message} ({p.fix})" for p in problems))
    return {"actions": ", ".join(actions(settings)), "tiers": tiers(settings)}


def render(settings: SchedulerSettings = SchedulerSettings()) -> str:
    """The conf file text, deterministic so a re-render never shows as a change."""
    return yaml.safe_dump(scheduler_config(settings), sort_keys=False)


CONFIGMAP_NAMESPACE = "volcano-system"
CONFIGMAP_NAME = "volcano-scheduler-configmap"
CONFIGMAP_KEY = "volcano-scheduler.conf"


def scheduler_configmap(settings: SchedulerSettings = SchedulerSettings()) -> dict:
    """The ConfigMap vc-scheduler reads (mounted in-cluster; synced to a file by `trainyard cluster up` locally)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE,
                     "labels": part_of_trainyard()},
        "data": {CONFIGMAP_KEY: render(settings)},
    }
