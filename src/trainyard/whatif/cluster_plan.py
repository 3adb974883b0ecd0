"""What the what-if's cluster engine builds for one stack, as plain values (pure: a StackConfig in, objects out).

The engine replays a side on a throw-away local cluster shaped as the stack: its nodes and GPUs, each node
labelled with the rack and spine the model gives it (`scenario.model_nodes`), the stack's HyperNodes, priority
classes, parent queues, scheduler configuration and every tenant's onboarding objects as the platform renders
them (`platform.tenant_bundle`), and the controller's reclaim rule. Jobs go the real path: a TrainJob in the
tenant's namespace, its priority class as a user names it, on a catalog-style runtime per topology tier.

Time runs `speedup` times faster on the cluster than in the trace; records are scaled back before the same
figures are computed, so both engines report trace seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from trainyard import k8s as K
from trainyard.cluster.spec import ClusterSpec, node_name
from trainyard.platform.tenant_bundle import shared_bundle, tenant_bundle
from trainyard.platform.stack_model import StackConfig
from trainyard.queues.hypernodes import render_hypernodes
from trainyard.queues.priority_classes import render_priority_class
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import render_queue
from trainyard.schedtrace import objects
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.scenario import model_nodes

ENGINE_CLUSTER_NAME = "trainyard-whatif"
ENGINE_PORT_BASE = 28200
DEFAULT_SPEEDUP = 4.0
"""Trace seconds per cluster second: the generated trace (about 45 minutes of arrivals) replays in minutes."""


class EngineLimit(ValueError):
    """A stack the cluster engine cannot build (the message names the field and what to do)."""


@dataclass(frozen=True)
class ClusterPlan:
    spec: ClusterSpec
    node_labels: Mapping[str, Mapping[str, str]]
    """node -> the labels that put it in its rack and spine."""
    objects: tuple[dict, ...]
    """Applied before the replay, in order."""
    scheduler: SchedulerSettings
    """Applied after the objects; the replay waits until vc-scheduler's file holds it."""
    namespaces: Mapping[str, str]
    """tenant -> its namespace."""
    notes: tuple[str, ...]
    """What the cluster replay leaves out or changes, said with the result."""


def plan(config: StackConfig, port_base: int = ENGINE_PORT_BASE, speedup: float = DEFAULT_SPEEDUP) -> ClusterPlan:
    """The cluster (`trainyard-whatif-<port base>`: replays on other ports never meet), labels and objects that
    replay `config`; EngineLimit for what it cannot build."""
    named = [f"topology.racks[{i}].nodes" for i, rack in enumerate(config.topology.racks) if rack.nodes]
    if named:
        raise EngineLimit(f"{named[0]}: racks that list their nodes by name are not built by --engine cluster; "
                          "label the nodes (topology.rackLabel) or use --engine model")
    nodes = model_nodes(config)
    reclaim = config.controller.reclaim if config.scheduler.queue_plugin == "capacity" else "none"
    spec = ClusterSpec(name=f"{ENGINE_CLUSTER_NAME}-{port_base}", port_base=port_base, nodes=len(nodes), gpus_per_node=config.cluster.gpus_per_node,
                       racks=1, spines=1, feature_gates="TrainJobStatus=false", monitoring=False, timed_pods=True,
                       reclaim=reclaim, reclaim_holds=config.controller.reclaim_holds,
                       gang_start_timeout=float(config.controller.gang_start_timeout_seconds),
                       node_loss_release_after=float(config.controller.node_loss_release_after_seconds))
    labels = {node_name(index): {config.topology.rack_label: node.rack, K.RACK_LABEL: node.rack,
                                 K.SPINE_LABEL: node.spine}
              for index, node in enumerate(nodes)}
    built = [*shared_bundle(), *(render_priority_class(pc) for pc in config.priority_classes),
             *(render_queue(queue) for queue in config.parent_queues), *render_hypernodes(config.topology),
             *objects.runtimes(gang=True)]
    for tenant in config.tenants:
        built += tenant_bundle(tenant, config.policies)
    notes = [f"time runs {speedup:g}x faster on the cluster; the scheduler's cycle and the controller's loops do not"]
    if reclaim != "none":
        notes.append("the controller's reclaim waits its own seconds, not trace seconds")
    return ClusterPlan(spec, labels, tuple(built), config.scheduler,
                       {t.name: t.namespace for t in config.tenants}, tuple(notes))


def submission(job: TraceJob, namespaces: Mapping[str, str]) -> dict:
    """The job as its tenant submits it: a TrainJob in the tenant's namespace naming its priority class."""
    trainjob = objects.trainjob(job, gang=True)
    trainjob["metadata"]["namespace"] = namespaces.get(job.tenant, job.tenant)
    if job.priority_class:
        trainjob["metadata"]["labels"][K.PRIORITY_CLASS_LABEL] = job.priority_class
    return trainjob


def compressed(trace: Sequence[TraceJob], speedup: float) -> list[TraceJob]:
    """The trace as the cluster runs it: arrivals and run times divided by `speedup`."""
    return [replace(job, arrival=job.arrival / speedup, duration=job.duration / speedup) for job in trace]


def expanded(submitted: Mapping[str, float], pods: Sequence[PodRecord], end: float,
             speedup: float) -> tuple[dict[str, float], list[PodRecord], float]:
    """A cluster replay's records back in trace seconds."""
    def scale(value: float | None) -> float | None:
        return None if value is None else value * speedup

    return ({name: at * speedup for name, at in submitted.items()},
            [replace(pod, bound=scale(pod.bound), ended=scale(pod.ended)) for pod in pods], end * speedup)
