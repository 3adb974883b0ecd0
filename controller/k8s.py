"""Helpers over plain Kubernetes dicts (JobSet spec, pod templates, containers): find, upsert, own."""

from __future__ import annotations

from typing import Iterable, Iterator

from trainyard.k8s import REPLICATED_JOBS_PATH, ancestor_of, job_containers

from trainyard import k8s as K
from . import constants as C
from .errors import InputError


def owner_reference(trainjob: dict) -> dict:
    """The controller ownerReference every built object carries (garbage-collected with the TrainJob)."""
    meta = trainjob.get("metadata") or {}
    return {
        "apiVersion": K.TRAINER_API_VERSION,
        "kind": C.TRAINJOB_KIND,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(name: str, trainjob: dict, **extra) -> dict:
    meta: dict = {"name": name, "namespace": namespace_of(trainjob)}
    meta.update({k: v for k, v in extra.items() if v})
    meta["ownerReferences"] = [owner_reference(trainjob)]
    return meta


def namespace_of(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("namespace") or "default"


def name_of(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def is_owned_by(obj: dict, trainjob: dict) -> bool:
    uid = (trainjob.get("metadata") or {}).get("uid")
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == C.TRAINJOB_KIND and ref.get("name") == name_of(trainjob):
            return not uid or not ref.get("uid") or ref.get("uid") == uid
    return False


def find_object(objects: Iterable[dict], kind: str, name: str, namespace: str | None = None,
                api_group: str | None = None) -> dict | None:
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("kind") != kind or name_of(obj) != name:
            continue
        if namespace is not None and (obj.get("metadata") or {}).get("namespace", namespace) != namespace:
            continue
        if api_group is not None and str(obj.get("apiVersion", "")).rpartition("/")[0] != api_group:
            continue
        return obj
    return None


# ---- JobSet spec navigation (reading helpers are the shared ones of `trainyard.k8s`) ----------------

def _level(parent: dict, key: str, where: str) -> dict:
    """Writing into a document: create a missing level, refuse (naming it) one of the wrong type."""
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise InputError(f"must be an object, got {type(value).__name__}; fix the value of this field", f"{where}.{key}")
    return value


def replicated_jobs(spec: dict) -> list[dict]:
    jobs = spec.setdefault("replicatedJobs", [])
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise InputError("must be a list of objects; fix the value of this field", REPLICATED_JOBS_PATH)
    return jobs


def _job_path(job: dict) -> str:
    return f"replicatedJobs[{job.get('name')}]"


def job_spec(job: dict) -> dict:
    return _level(_level(job, "template", _job_path(job)), "spec", f"{_job_path(job)}.template")


def pod_template(job: dict) -> dict:
    return _level(job_spec(job), "template", f"{_job_path(job)}.template.spec")


def pod_spec(job: dict) -> dict:
    return _level(pod_template(job), "spec", f"{_job_path(job)}.template.spec.template")


def job_to_edit(spec: dict, name: str) -> dict | None:
    """The replicated job called `name` of a JobSet spec being built (`trainyard.k8s.find_job` only reads)."""
    return next((j for j in replicated_jobs(spec) if j.get("name") == name), None)


def job_to_edit_by_ancestor(spec: dict, ancestor: str) -> dict | None:
    return next((j for j in replicated_jobs(spec) if ancestor_of(j) == ancestor), None)


def find_container(job: dict | None, name: str, include_init: bool = False) -> dict | None:
    if job is None:
        return None
    for c in job_containers(job):
        if c.get("name") == name:
            return c
    if include_init:
        for c in job_containers(job, init=True):
            if c.get("name") == name:
                return c
    return None


def all_containers(spec: dict) -> Iterator[dict]:
    for job in replicated_jobs(spec):
        yield from job_containers(job, init=True)
        yield from job_containers(job)


# ---- upserts (order preserving: existing names stay in place, new ones are appended) --------------

def upsert(items: list[dict], new: Iterable[dict], key: str) -> list[dict]:
    for item in new:
        for i, existing in enumerate(items):
            if existing.get(key) == item.get(key):
                items[i] = dict(item)
                break
        else:
            items.append(dict(item))
    return items


def upsert_env(container: dict, env: Iterable[dict]) -> None:
    upsert(container.setdefault("env", []), env, "name")


def upsert_volume_mounts(container: dict, mounts: Iterable[dict]) -> None:
    upsert(container.setdefault("volumeMounts", []), mounts, "mountPath")


def upsert_volumes(pod: dict, volumes: Iterable[dict]) -> None:
    upsert(pod.setdefault("volumes", []), volumes, "name")


def upsert_port(container: dict, port: int) -> None:
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port})


def env_value(name: str, value: str) -> dict:
    return {"name": name, "value": value}


def env_field_ref(name: str, field_path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}
