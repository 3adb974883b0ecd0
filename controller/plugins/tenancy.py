"""Tenant defaults in the build (trainyard's platform layer, see `controller/tenancy.py`).

`enforce_priority` runs before the PodGroup plugins so the Volcano PodGroup takes its priorityClassName
from the pod templates as upstream does; `default_queue` runs after them and only fills a queue no
annotation named. Both read the TrainJob's Namespace from `info.existing` (absent: nothing changes,
except that the TrainJob's own `trainyard.dev/priority-class` label still applies).
"""

from __future__ import annotations

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from ..tenancy import namespace_policy, selected_priority_class


def enforce_priority(info: RuntimeInfo) -> None:
    """The selected class replaces every pod template's; otherwise the namespace default fills the gaps."""
    selected = selected_priority_class(info.trainjob)
    default = namespace_policy(info.trainjob, info.existing).default_priority_class
    for job in k8s.replicated_jobs(info.spec):
        pod = k8s.pod_spec(job)
        if selected is not None:
            pod["priorityClassName"] = selected
            pod.pop("priority", None)  # the Priority admission plugin resolves it from the class
        elif default is not None and not pod.get("priorityClassName"):
            pod["priorityClassName"] = default


def default_queue(info: RuntimeInfo) -> None:
    """A Volcano PodGroup whose runtime and TrainJob name no queue gets the namespace's queue."""
    queue = namespace_policy(info.trainjob, info.existing).queue
    if queue is None:
        return
    for group in info.pod_groups:
        if group["apiVersion"] == C.VOLCANO_PODGROUP_API_VERSION and "queue" not in group["spec"]:
            group["spec"]["queue"] = queue
