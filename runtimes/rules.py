"""Catalog rules every runtime must follow, checked without the controller.

Upstream keys jobs by the Job-level ancestor label and containers by name, and
our immutability promise needs pinned images; each rule returns `Problem`s (message
and fix) for ``lint`` to place in a file, runtime and release.
"""

from __future__ import annotations

import re

from trainyard.k8s import GPU_RESOURCE, ancestor_of, job_containers, job_labels, mapping
from trainyard.k8s import runtime_jobs as replicated_jobs
from trainyard.problems import Finding, Problem
from trainyard.runtimes import labels

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _problem(message: str, fix: str) -> Problem:
    """A finding about one runtime; lint adds its file, runtime name and release."""
    return Finding(message, fix=fix)


def _containers(job: dict) -> list[dict]:
    return job_containers(job, init=True) + job_containers(job)


def check_framework_label(runtime: dict) -> list[Problem]:
    if not ((runtime.get("metadata") or {}).get("labels") or {}).get(labels.FRAMEWORK):
        return [_problem(f"missing label {labels.FRAMEWORK}", "label the runtime with its framework, e.g. torch")]
    return []


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None when it has a tag other than latest or a digest."""
    if _DIGEST.search(image):
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag"
    if last.rsplit(":", 1)[1] == "latest":
        return "is tagged latest"
    return None


def check_images_pinned(runtime: dict) -> list[Problem]:
    problems = []
    for job in replicated_jobs(runtime):
        for container in _containers(job):
            image = container.get("image")
            reason = "has no image" if not image else image_problem(str(image))
            if reason:
                problems.append(
                    _problem(
                        f"job {job.get('name')} container {container.get('name')}: image {image!r} {reason}",
                        "pin the image with a release tag (e.g. :v2.3.0) or a digest in the release's values.yaml",
                    )
                )
    return problems


def check_ancestor_labels(runtime: dict) -> list[Problem]:
    """Upstream keys every job by the Job-level ancestor label and every container by name."""
    problems, trainers = [], 0
    for job in replicated_jobs(runtime):
        pod_labels = mapping(mapping(mapping(mapping(job.get("template")).get("spec")).get("template")).get("metadata")).get("labels")
        if labels.ANCESTOR_STEP in mapping(pod_labels):
            problems.append(
                _problem(
                    f"job {job.get('name')}: {labels.ANCESTOR_STEP} is on the pod template",
                    "move it to replicatedJobs[].template.metadata.labels, where the controller reads it",
                )
            )
        ancestor = ancestor_of(job)
        if ancestor is None:
            continue
        if ancestor not in labels.ANCESTOR_CONTAINERS:
            problems.append(
                _problem(f"job {job.get('name')}: unknown ancestor step {ancestor!r}", f"use one of {', '.join(labels.ANCESTOR_CONTAINERS)}")
            )
            continue
        trainers += ancestor == "trainer"
    if trainers != 1:
        problems.append(
            _problem(f"must have exactly one job labelled {labels.ANCESTOR_STEP}: trainer, found {trainers}", "label the training job")
        )
    return problems


# Limit keys from which the Kubeflow SDK (0.5, `get_container_devices`) describes a runtime's device;
# limits naming none of them make `TrainerClient.list_runtimes()` fail for the whole namespace.
SDK_DEVICE_LIMITS = (GPU_RESOURCE, "google.com/tpu", "huawei.com/Ascend910", "cpu")
SDK_MIG_PREFIX = "nvidia.com/mig-"


def _sdk_trainer_container(runtime: dict) -> dict | None:
    """The container the SDK reads: `node` in the first job carrying any ancestor label."""
    for job in replicated_jobs(runtime):
        if labels.ANCESTOR_STEP in job_labels(job):
            for container in job_containers(job):
                if container.get("name") == "node":
                    return container
    return None


def check_sdk_describable(runtime: dict) -> list[Problem]:
    """The Kubeflow SDK must be able to list the runtime (framework label is checked separately)."""
    container = _sdk_trainer_container(runtime)
    if container is None:
        return [_problem("the Kubeflow SDK finds no trainer container (a container named node in a job with the "
                 f"{labels.ANCESTOR_STEP} label)", "label the trainer job and name its container node")]
    limits = (container.get("resources") or {}).get("limits") or {}
    if limits and not any(k in SDK_DEVICE_LIMITS or k.startswith(SDK_MIG_PREFIX) for k in limits):
        return [_problem(f"the Kubeflow SDK cannot tell the trainer's device from its limits {sorted(limits)}; "
                 "TrainerClient.list_runtimes() fails for every namespace that has this runtime",
                 "add a cpu (or accelerator) limit to the node container, or drop its limits")]
    return []


CATALOG_RULES = (check_framework_label, check_images_pinned, check_ancestor_labels)
