"""Builders for test TrainJobs and runtimes (plain dicts), in the spirit of upstream's wrappers."""

from __future__ import annotations

import copy

import pytest

from trainyard import k8s

ANCESTOR = k8s.LABEL_ANCESTOR


def job(name, ancestor=None, containers=None, init_containers=None, **pod):
    meta = {"labels": {ANCESTOR: ancestor}} if ancestor else {}
    spec = {"containers": containers if containers is not None else [{"name": "node", "image": "img"}]}
    if init_containers:
        spec["initContainers"] = init_containers
    spec.update(pod)
    return {"name": name, "template": {"metadata": meta, "spec": {"template": {"spec": spec}}}}


def runtime(jobs=None, ml=None, pod_group=None, kind="ClusterTrainingRuntime", name="rt", annotations=None,
            labels=None, **jobset_spec):
    spec = {"template": {"spec": {"replicatedJobs": jobs if jobs is not None else [job("node", "trainer")], **jobset_spec}}}
    if annotations:
        spec["template"]["metadata"] = {"annotations": annotations}
    if ml is not None:
        spec["mlPolicy"] = ml
    if pod_group is not None:
        spec["podGroupPolicy"] = pod_group
    meta = {"name": name}
    if kind == "TrainingRuntime":
        meta["namespace"] = "ns"
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def trainjob(name="tj", runtime_name="rt", kind="ClusterTrainingRuntime", **spec):
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "ns", "uid": "uid-1", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"runtimeRef": {"name": runtime_name, "kind": kind}, **spec}}


def fixed_key():
    return b"-----BEGIN EC PRIVATE KEY-----\nTEST\n-----END EC PRIVATE KEY-----\n", b"ecdsa-sha2-nistp521 AAAA test\n"


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def the_jobset(objects):
    (js,) = by_kind(objects, "JobSet")
    return js


def rjob(jobset, name):
    return k8s.find_job(jobset["spec"], name)


def container(jobset, job_name, container_name="node", init=False):
    pod = rjob(jobset, job_name)["template"]["spec"]["template"]["spec"]
    return next(c for c in pod["initContainers" if init else "containers"] if c["name"] == container_name)


def env_of(c):
    return [(e["name"], e.get("value", e.get("valueFrom"))) for e in c.get("env", [])]


@pytest.fixture
def deep():
    return copy.deepcopy
