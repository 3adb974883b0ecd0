"""Accessors of built objects for the controller's unit tests; the builders are tests/builders.py's, re-exported."""

from __future__ import annotations

import copy

import pytest

from trainyard import k8s

from builders import job, runtime, trainjob  # noqa: F401 (the unit tests import them from here)


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
