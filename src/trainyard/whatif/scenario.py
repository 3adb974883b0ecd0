"""What a stack means for scheduling, as the model replays it (pure: a StackConfig in, a Scenario out).

A stack fixes the cluster (nodes, GPUs, racks and spines), each tenant's queue (weight, capability,
deserved), its namespace quota, the priority classes it may use and the scheduler settings. The model
(`trainyard.scheduling.simulator`) knows Volcano's `gang` profile with `proportion` or `capacity`; what it
leaves out for a given stack is said in `Scenario.not_modelled`, never silently replayed as something else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from trainyard.cluster.spec import block_of
from trainyard.k8s import GPU_RESOURCE, quantity_or_none
from trainyard.platform.stack_model import StackConfig, TenantSpec
from trainyard.scheduling.reclaim import RECLAIM_AFTER_S
from trainyard.scheduling.simulator import RECLAIMER_EVICT_LATENCY_S, RECLAIMER_RESUME_LAG_S, ModelNode, ModelPolicy

UNRACKED = "rack-0", "spine-0"
"""A stack without a topology: one rack under one spine (no HyperNodes: hard-topology gangs never start)."""


@dataclass(frozen=True)
class TenantTerms:
    """One tenant's scheduling terms in a stack."""

    name: str
    queue: str
    weight: int
    cap_gpus: int | None
    """The most GPUs its jobs may hold at once: the lower of the queue's capability and the namespace quota."""
    quota_gpus: int | None
    capability_gpus: int | None
    deserved_gpus: int
    default_priority_class: str | None
    granted: Mapping[str, int] = field(default_factory=dict)
    """Priority classes it may use (its default and `priorityClasses`) -> their values."""


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[ModelNode, ...]
    tenants: Mapping[str, TenantTerms]
    policy: ModelPolicy
    topology: bool
    """Whether the stack declares racks (HyperNodes): without, a gang with a hard tier never starts."""
    not_modelled: tuple[str, ...] = ()

    @property
    def capacity(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def weights(self) -> dict[str, float]:
        return {name: float(t.weight) for name, t in self.tenants.items()}

    def rack_nodes(self) -> int:
        """Nodes of the largest rack (a tier-1 gang's room)."""
        return max(_counts(n.rack for n in self.nodes).values(), default=0)

    def spine_nodes(self) -> int:
        return max(_counts(n.spine for n in self.nodes).values(), default=0)


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def _gpus(resources: Mapping[str, object]) -> int | None:
    amount = quantity_or_none(resources.get(GPU_RESOURCE)) if resources else None
    return None if amount is None else math.floor(amount)


def model_nodes(config: StackConfig) -> tuple[ModelNode, ...]:
    """The stack's nodes with their rack and spine: racks naming their nodes get those; label-matched racks
    share the rest in contiguous blocks, as the local cluster labels them (`cluster.spec.rack_of`)."""
    count, gpus = config.cluster.nodes, config.cluster.gpus_per_node
    racks = config.topology.racks
    if not racks:
        return tuple(ModelNode(f"gpu-node-{i}", *UNRACKED, gpus) for i in range(count))
    named = [(rack, node) for rack in racks for node in rack.nodes]
    labelled = [rack for rack in racks if not rack.nodes]
    nodes = [ModelNode(node, rack.name, rack.spine, gpus) for rack, node in named]
    rest = max(0, count - len(nodes))
    if labelled:
        for index in range(rest):
            rack = labelled[min(block_of(index, rest, len(labelled)), len(labelled) - 1)]
            nodes.append(ModelNode(f"gpu-node-{index}", rack.name, rack.spine, gpus))
    return tuple(nodes)


def tenant_terms(tenant: TenantSpec, priority_values: Mapping[str, int]) -> TenantTerms:
    capability = _gpus(tenant.queue.capability)
    quota = tenant.quota.gpu
    caps = [c for c in (capability, quota) if c is not None]
    granted = [c for c in (tenant.default_priority_class, *tenant.priority_classes) if c]
    return TenantTerms(name=tenant.name, queue=tenant.queue.name, weight=tenant.queue.weight,
                       cap_gpus=min(caps) if caps else None, quota_gpus=quota, capability_gpus=capability,
                       deserved_gpus=_gpus(tenant.queue.deserved) or 0,
                       default_priority_class=tenant.default_priority_class,
                       granted={name: priority_values.get(name, 0) for name in granted})


def scenario(config: StackConfig) -> Scenario:
    """The stack as the model replays it, and what of it the model does not replay."""
    values = {pc.name: pc.value for pc in config.priority_classes}
    tenants = {t.name: tenant_terms(t, values) for t in config.tenants}
    settings = config.scheduler
    capability = {name: t.cap_gpus for name, t in tenants.items() if t.cap_gpus is not None}
    if settings.queue_plugin == "capacity":
        policy = ModelPolicy(queue_plugin="capacity", capability=capability,
                             deserved={name: t.deserved_gpus for name, t in tenants.items()})
    else:
        policy = ModelPolicy(capability=capability)
    if config.controller.reclaim != "none" and settings.queue_plugin == "capacity":  # the controller's reclaim loop
        policy = replace(policy, reclaim_after_s=RECLAIM_AFTER_S, reclaim_rule=config.controller.reclaim,
                         reclaim_holds=config.controller.reclaim_holds, evict_latency_s=RECLAIMER_EVICT_LATENCY_S,
                         resume_lag_s=RECLAIMER_RESUME_LAG_S)
    notes = []
    if settings.profile != "gang":
        notes.append(f"scheduler.profile {settings.profile}: its preempt and reclaim actions are not replayed "
                     "(the model replays the gang profile's allocate)")
    if settings.overcommit_factor is not None:
        notes.append("scheduler.overcommitFactor: the overcommit enqueue gate is not replayed")
    if config.parent_queues:
        notes.append("queues: parent queues (hierarchy) are not replayed; each tenant queue stands alone")
    if any(t.queue.guarantee for t in config.tenants):
        notes.append("tenants[].queue.guarantee is not replayed")
    return Scenario(model_nodes(config), tenants, policy, topology=bool(config.topology.racks),
                    not_modelled=tuple(notes))


WALL_CLOCK_FIELDS = ("cycle_s", "submit_latency_s", "bind_latency_s", "reserve_after_s", "reclaim_after_s",
                     "reclaim_period_s", "resume_after_s", "evict_latency_s", "resume_lag_s")
"""The policy's durations the cluster spends in wall-clock time (the scheduler's cycle, the controllers' latencies
and loops), not in the trace's time."""


def at_speedup(scene: Scenario, speedup: float) -> Scenario:
    """The scenario as a cluster replaying the trace `speedup` times faster than real time runs it: its jobs' times
    shrink, its scheduler's and controllers' do not, so in trace seconds they grow by `speedup` (how the cluster
    engine's replays are compared with the model)."""
    if speedup == 1:
        return scene
    policy = scene.policy
    scaled = {name: getattr(policy, name) * speedup for name in WALL_CLOCK_FIELDS if getattr(policy, name) is not None}
    return replace(scene, policy=replace(policy, **scaled))
