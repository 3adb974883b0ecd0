"""Coscheduling (scheduler-plugins) gang: a `scheduling.x-k8s.io` PodGroup, pods labelled with its name."""

from __future__ import annotations

from trainyard import k8s as K
from ..info import RuntimeInfo
from .framework import Context, ObjectRef
from .gang import gang_size, may_apply, owned_pod_group, pod_group


def enforce_pod_group_policy(info: RuntimeInfo, ctx: Context) -> None:
    if "coscheduling" in (info.pod_group_policy or {}):
        info.pod_labels[K.COSCHEDULING_POD_GROUP_LABEL] = info.name


def build(info: RuntimeInfo, ctx: Context) -> None:
    policy = info.pod_group_policy or {}
    if "coscheduling" not in policy or not may_apply(info, K.COSCHEDULING_API_VERSION):
        return
    members, resources = gang_size(info)
    spec = {"minMember": members, "minResources": resources,
            "scheduleTimeoutSeconds": (policy["coscheduling"] or {}).get("scheduleTimeoutSeconds", 60)}
    info.pod_groups.append(pod_group(info, K.COSCHEDULING_API_VERSION, spec))


def owned_objects(trainjob: dict, runtime: dict) -> list[ObjectRef]:
    return owned_pod_group(trainjob, runtime, "coscheduling", K.COSCHEDULING_API_VERSION)
