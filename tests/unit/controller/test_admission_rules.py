"""The declared admission rules (`controller/admission_rules.py`, the source of docs/reference/admission.md) agree
with what the webhook says: one bad object per rule goes through `admission_review_response`, and the answer must
name the rule's field with a message containing the rule's `says` (a warning: a warning containing it)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import pytest

from trainyard import k8s as K
from trainyard.controller.admission import admission_review_response
from trainyard.controller.admission_rules import ADMISSION_RULES, RUNTIME, TRAINJOB, TRAINYARD, UPSTREAM, UPSTREAM_V2_4

from builders import job, runtime, tenant_namespace, trainjob

CTR = "ClusterTrainingRuntime"


def ns(**annotations) -> dict:
    out = tenant_namespace(queue="team-a", granted="team-a-default,training-high", default="team-a-default",
                           annotations=annotations)
    out["metadata"]["labels"][K.CATALOG_VERSION_LABEL] = "1.2.0"
    return out


def pclass(name: str) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": 1}


def queue(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}}


def volcano(**pod) -> dict:
    return runtime(jobs=[job("node", "trainer", **pod)], ml={"torch": {}}, pod_group={"volcano": {}})


def torch(**pod) -> dict:
    return runtime(jobs=[job("node", "trainer", **pod)], ml={"torch": {}})


@dataclass
class Case:
    obj: dict
    rt: dict | None = None
    old: dict | None = None
    objects: list = field(default_factory=list)
    quotas: list = field(default_factory=list)
    dry_run: Callable[[dict], str | None] | None = None
    user: str = "alice"


def patch(jobs: list, manager: str = "example.com/user") -> dict:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}


def initializer_runtime(container: str | None = "dataset-initializer", mount: bool = False) -> dict:
    containers = [{"name": container, "image": "i", **({"volumeMounts": [{"name": "initializer", "mountPath": "/w"}]}
                                                      if mount else {})}] if container else [{"name": "x", "image": "i"}]
    return runtime(jobs=[job("dataset-initializer", "dataset-initializer", containers), job("node", "trainer")],
                   ml={"torch": {}})


DATASET = {"initializer": {"dataset": {"storageUri": "hf://x"}}}
JOBSET_ACTIVE = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "tj", "namespace": "ns"},
                 "status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}


def _cases() -> dict[str, Case]:
    tune = {"command": ["tune", "run"], "numNodes": 2}
    return {
        "runtime-kind": Case(trainjob(runtimeRef={"name": "rt", "kind": "Deployment", "apiGroup": "apps"})),
        "runtime-missing": Case(trainjob(kind="TrainingRuntime"), None),
        "initializer-job": Case(trainjob(**DATASET), torch()),
        "initializer-container": Case(trainjob(**DATASET), initializer_runtime(None)),
        "initializer-volume": Case(trainjob(**DATASET), initializer_runtime()),
        "patch-manager": Case(trainjob(runtimePatches=[patch([], manager="nodomain")]), torch()),
        "patch-unknown-job": Case(trainjob(runtimePatches=[patch([{"name": "ghost"}])]), torch()),
        "patch-unknown-container": Case(trainjob(runtimePatches=[patch([{"name": "node", "template": {"spec": {
            "template": {"spec": {"containers": [{"name": "ghost"}]}}}}}])]), torch()),
        "patch-reserved-env": Case(trainjob(runtimePatches=[patch([{"name": "node", "template": {"spec": {
            "template": {"spec": {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}])]),
            torch()),
        "override-unknown-job": Case(trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "ghost"}]}]), torch()),
        "reserved-ancestor-label": Case(trainjob(labels={K.LABEL_ANCESTOR: "trainer"}), torch()),
        "patches-update-running": Case(trainjob(runtimePatches=[patch([])]), torch(), old=trainjob()),
        "patches-update-active": Case(trainjob(suspend=True, runtimePatches=[patch([])]), torch(),
                                      old=trainjob(suspend=True), objects=[JOBSET_ACTIVE]),
        "overrides-update-running": Case(trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}]}]), torch(),
                                         old=trainjob()),
        "queue-empty": Case(trainjob(annotations={K.VOLCANO_QUEUE_ANNOTATION: ""}), volcano()),
        "queue-missing": Case(trainjob(annotations={K.VOLCANO_QUEUE_ANNOTATION: "ghost"}), volcano()),
        "runtime-priority-class-missing": Case(trainjob(), volcano(priorityClassName="ghost")),
        "tenant-coscheduling": Case(trainjob(), runtime(pod_group={"coscheduling": {}}), objects=[ns()]),
        "tenant-catalog-pin": Case(trainjob(), runtime(labels={K.CATALOG_VERSION_LABEL: "1.1.0"}), objects=[ns()]),
        "tenant-queue": Case(trainjob(annotations={K.VOLCANO_QUEUE_ANNOTATION: "team-b"}), volcano(),
                             objects=[ns(), queue("team-b")]),
        "tenant-priority-class": Case(trainjob(metadata_labels={K.PRIORITY_CLASS_LABEL: "urgent"}), volcano(),
                                      objects=[ns(), pclass("urgent")]),
        "tenant-priority-class-missing": Case(trainjob(metadata_labels={K.PRIORITY_CLASS_LABEL: "training-high"}),
                                              volcano(), objects=[ns()]),
        "tenant-runtime-priority-class": Case(trainjob(), volcano(priorityClassName="urgent"),
                                              objects=[ns(), pclass("urgent")]),
        "tenant-service-account": Case(trainjob(), volcano(serviceAccountName="ci-deployer"), objects=[ns()]),
        "tenant-toleration": Case(trainjob(), volcano(tolerations=[{"operator": "Exists"}]), objects=[ns()]),
        "tenant-grace-period": Case(trainjob(), volcano(terminationGracePeriodSeconds=86400), objects=[ns()]),
        "quota-never-fits": Case(trainjob(trainer={"numNodes": 8}), runtime(gpus=8, pod_group={"volcano": {}}),
                                 objects=[ns()], quotas=[{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
                                     "name": "q", "namespace": "ns"}, "spec": {"hard": {"requests.nvidia.com/gpu": "16"}}}]),
        "pods-refused": Case(trainjob(), volcano(), objects=[ns()],
                             dry_run=lambda o: None if o["kind"] == "JobSet" else
                             'pods "x" is forbidden: violates PodSecurity "baseline:latest": privileged '
                             '(container "node" must not set securityContext.privileged=true)'),
        "jobset-refused": Case(trainjob(labels={"bad key": "x"}), volcano(), objects=[ns()],
                               dry_run=lambda o: None if o["kind"] != "JobSet" else
                               'JobSet.jobset.x-k8s.io "tj" is invalid: metadata.labels: Invalid value: "bad key": '
                               "name part must consist of alphanumeric characters"),
        "platform-annotation": Case(trainjob(), torch(), old=None, user="mallory"),
        "reserved-env": Case(trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "3"}]}), torch()),
        "xgboost-reserved-env": Case(trainjob(trainer={"env": [{"name": "DMLC_TASK_ID", "value": "3"}]}),
                                     runtime(ml={"xgboost": {}})),
        "torch-env-injection": Case(trainjob(), runtime(ml={"torch": {"envInjection": {"targets": [
            {"jobName": "node", "containerNames": ["ghost"]}]}}})),
        "mpi-launcher-as-node": Case(trainjob(trainer={"numNodes": 2}), runtime(ml={"mpi": {"runLauncherAsNode": True}})),
        "mpi-procs": Case(trainjob(trainer={"numProcPerNode": "auto"}), runtime(ml={"mpi": {}})),
        "flux-procs": Case(trainjob(trainer={"numProcPerNode": 0}), runtime(ml={"flux": {}})),
        "flux-installer": Case(trainjob(), runtime(ml={"flux": {}}, jobs=[job("node", "trainer", init_containers=[
            {"name": "flux-installer", "image": "i"}])])),
        "torchtune-model": Case(trainjob(runtime_name="torchtune-unknown", trainer={"command": ["tune", "run"]}),
                                runtime(name="torchtune-unknown", ml={"torch": {}})),
        "torchtune-nodes": Case(trainjob(runtime_name="torchtune-llama3.2-1b", trainer=tune),
                                runtime(name="torchtune-llama3.2-1b", ml={"torch": {}})),
        "torchtune-immutable-config": Case(
            trainjob(runtime_name="torchtune-llama3.2-1b", trainer={"command": ["tune", "run"],
                                                                    "args": ["output_dir=/x"]}),
            runtime(name="torchtune-llama3.2-1b", ml={"torch": {}})),
        "build-refused": Case(trainjob(), runtime(ml={"mpi": {"mpiImplementation": "Unknown"}})),
        "deprecated-runtime": Case(trainjob(), runtime(labels={K.LABEL_SUPPORT: K.SUPPORT_DEPRECATED})),
        "trainer-unreachable": Case(trainjob(trainer={"numNodes": 1}), runtime(jobs=[job("node", None)])),
        "ancestor-replicas": Case(runtime(jobs=[{**job("node", "trainer"), "replicas": 2}])),
        "ancestor-container": Case(runtime(jobs=[job("node", "trainer", [{"name": "main", "image": "i"}])])),
        "replicated-job-name": Case(runtime(jobs=[job("node", "trainer"), job("dataset-preprocessing-step", None)])),
        "topology-key": Case(runtime(pod_group={"volcano": {"networkTopology": {"networkPolicy": "Strict",
                                                                                "topologyKey": "example.com/row"}}})),
        "deprecated-cluster-runtime": Case(runtime(labels={K.LABEL_SUPPORT: K.SUPPORT_DEPRECATED})),
        "trainer-job-label": Case(runtime(jobs=[job("node", None)])),
        "trainer-node-container": Case(runtime(jobs=[job("node", "trainer", [{"name": "main", "image": "i"}])],
                                               labels={K.LABEL_WEBHOOK_VALIDATION: "disabled"})),
        "seed-topology-spelling": Case(runtime(pod_group={"volcano": {"networkTopology": {"networkPolicy": "Strict",
                                                                                          "topologyKey": "trainyard.dev/rack"}}})),
    }


CASES = _cases()


def answer(rule_kind: str, case: Case) -> dict:
    """The webhook's AdmissionReview response for the case."""
    objects = list(case.objects) + ([case.rt] if case.rt else [])

    def lookup(kind, name, namespace=None):
        if name is None:
            return case.quotas if kind == "ResourceQuota" else None
        return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    obj = case.obj
    if rule_kind == TRAINJOB and case.user == "mallory":  # the platform-annotation rule: a forged reclaim note
        obj = {**obj, "metadata": {**obj["metadata"], "annotations": {K.RECLAIMED_FOR_ANNOTATION: "ns/x 1"}}}
    request = {"uid": "u", "operation": "UPDATE" if case.old else "CREATE", "kind": {"kind": obj["kind"]},
               "object": obj, "userInfo": {"username": case.user}}
    if case.old:
        request["oldObject"] = case.old
    return admission_review_response({"request": request}, lookup, case.dry_run,
                                     platform_users=frozenset({"system:serviceaccount:trainyard-system:controller"}))["response"]


def field_pattern(rule_field: str) -> str:
    return re.escape(rule_field).replace(r"\*", r"[^\s:]*")


@pytest.mark.parametrize("rule", ADMISSION_RULES, ids=[r.id for r in ADMISSION_RULES])
def test_the_webhook_says_what_the_rule_declares(rule):
    case = CASES.get(rule.id)
    assert case is not None, f"add a sample for rule {rule.id} to {__file__}"
    assert case.obj["kind"] == ("TrainJob" if rule.kind == TRAINJOB else CTR)
    response = answer(rule.kind, case)
    if rule.warning:
        assert response["allowed"], response
        assert any(rule.says in w for w in response.get("warnings", [])), response
        return
    assert not response["allowed"], f"{rule.id}: the sample was admitted"
    message = response["status"]["message"]
    pattern = rf"(^|[\[ ]){field_pattern(rule.field)}: [A-Za-z ]+: .*{re.escape(rule.says)}"
    if rule.id in ("runtime-missing",):
        pattern = rf"(^|[\[ ])spec\.runtimeRef: [A-Za-z ]+: .*{re.escape(rule.says)}"
    assert re.search(pattern, message, re.S), f"{rule.id}: expected {rule.field} ... {rule.says!r}, got: {message}"


def test_every_sample_has_a_rule():
    assert set(CASES) - {r.id for r in ADMISSION_RULES} == set()


def test_rule_ids_are_unique_and_kinds_known():
    ids = [r.id for r in ADMISSION_RULES]
    assert len(ids) == len(set(ids))
    assert {r.kind for r in ADMISSION_RULES} <= {TRAINJOB, RUNTIME}
    assert all(r.origin in (UPSTREAM, UPSTREAM_V2_4, TRAINYARD) for r in ADMISSION_RULES)
    assert all("kubeflow/trainer#" in r.refuses for r in ADMISSION_RULES if r.origin == UPSTREAM_V2_4)
