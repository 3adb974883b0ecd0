"""Tenant isolation as an attack suite: a team-a identity tries to reach beyond its tenant, on the platform
`pulumi up` deployed. Every attempt must be refused with the expected text, and the same identity must still
be able to do the legitimate thing next to it (a refusal that refuses everything proves nothing).

Attackers: alice (team-a-users) and bob (team-a-admins) with client certificates, i.e. real non-admin
identities (alice's impersonation attempts are her own), and `workflow`, a ServiceAccount of team-a that the
suite grants create on pods, PodGroups, JobSets and Volcano Jobs, as a platform team would for a workflow
engine in the namespace. Tenant users hold none of those rights, so their attempts stop at RBAC and their
legitimate route is a TrainJob; the workflow rows prove the admission layer (queue guard, quota) holds for an
identity RBAC lets through. `team-a-pod` is what a training pod of team-a holds: a token of its namespace's
ServiceAccount (TokenRequest, as the kubelet projects it), posted to the TrainJob status server.

Gang membership: Volcano resolves `scheduling.k8s.io/group-name` in the pod's own namespace, so no pod can
join another tenant's gang. A bare pod (no controller owner) may not name a PodGroup at all in a tenant
namespace (the queue guard refuses it); pods created by controllers (Jobs of the tenant's TrainJobs) may name
any PodGroup of their namespace: that is the tenant's own queue, within its trust boundary (its users may
already edit or delete every TrainJob of the namespace).

This file sorts before test_platform_lifecycle.py, whose last test destroys the stack.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Callable

import pytest
import requests

from builders import new_trainjob

pytestmark = pytest.mark.integration

TENANT, OTHER = "team-a", "team-b"
Q = "scheduling.volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
SUITE = "trainyard.dev/attack-suite"
PRIORITY_CLASS = "trainyard.dev/priority-class"
TORCH_RUNTIME = "torch-distributed-volcano"
TJ_API = "trainer.kubeflow.org/v1alpha1"
WORKFLOW_SA = f"system:serviceaccount:{TENANT}:workflow"
GUARD = "ValidatingAdmissionPolicy 'trainyard-queue-guard' with binding 'trainyard-queue-guard-team-a' denied request: "
TALLY: dict[str, list[str]] = {"attempted": [], "refused": []}
REFUSALS: dict[str, str] = {}  # attacker:name -> the layer that refused it


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str


@dataclass
class Arena:
    cluster: object
    kubeconfigs: dict
    status_url: str = ""
    ca_file: str = ""


@dataclass(frozen=True)
class Attack:
    name: str
    attacker: str
    attempt: Callable[[Arena], Outcome]
    refusal: str  # regex the refusal must match
    control: Callable[[Arena], Outcome]


# ----------------------------------------------------------------------------- objects (plain dicts)
def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def _meta(name: str, ns: str = TENANT, annotations: dict | None = None, labels: dict | None = None) -> dict:
    return {"name": name, "namespace": ns, "labels": {SUITE: "1", **(labels or {})},
            **({"annotations": annotations} if annotations else {})}


suite_trainjob = partial(new_trainjob, kind="TrainingRuntime", namespace=TENANT, metadata_labels={SUITE: "1"},
                         suspend=True, nodes=1, per_node={"requests": {"cpu": "1", "memory": "1Gi"}})
"""A TrainJob of the suite: suspended (nothing runs), on CPU, labelled for the suite's cleanup."""


def smuggled_queue(where: str, queue: str) -> dict:
    """TrainJob spec fields that name `queue` at `where`, one of the places a queue can be smuggled in."""
    if where == "runtimePatches":
        return {"runtimePatches": [{"manager": "attack.example/user", "trainingRuntimeSpec": {
            "template": {"metadata": {"annotations": {Q: queue}}}}}]}
    if where == "spec.annotations":
        return {"annotations": {Q: queue}}
    assert where == "podTemplateOverrides", where
    return {"podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {Q: queue}}}]}


def _container(gpu: bool = False) -> dict:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    if gpu:
        resources = {"requests": {**resources["requests"], "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    security = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}  # restricted: no warnings in the log
    return {"name": "c", "image": "busybox", "command": ["true"], "resources": resources, "securityContext": security}


def pod(annotations: dict | None = None, priority: str | None = None) -> dict:
    spec = {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [_container(gpu=bool(priority))]}
    if priority:
        spec["priorityClassName"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(_unique("pod"), annotations=annotations), "spec": spec}


def podgroup(queue: str | None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": _meta(_unique("pg")),
            "spec": {"minMember": 1, **({"queue": queue} if queue is not None else {})}}


def jobset(queue: str) -> dict:
    template = {"metadata": {"annotations": {Q: queue}},
                "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [_container()]}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(_unique("js")),
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}]}}


def vcjob(queue: str, task_queue: str | None = None) -> dict:
    template = {"spec": {"restartPolicy": "Never", "containers": [_container()]}}
    if task_queue:
        template["metadata"] = {"annotations": {Q: task_queue}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": _meta(_unique("vcjob")),
            "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": 1,
                     "tasks": [{"name": "t", "replicas": 1, "template": template}]}}


def training_runtime(kind: str, queue: str) -> dict:
    meta = {"name": _unique("evil")} if kind == "ClusterTrainingRuntime" else _meta(_unique("evil"))
    return {"apiVersion": TJ_API, "kind": kind, "metadata": meta,
            "spec": {"template": {"metadata": {"annotations": {Q: queue}}, "spec": {"replicatedJobs": []}}}}


# ----------------------------------------------------------------------------- acting as someone
def kubectl(arena: Arena, who: str, *args: str, obj: dict | None = None) -> Outcome:
    """kubectl as alice/bob (their client certificates) or as the workflow ServiceAccount."""
    from trainyard.toolchain.versions import binary

    identity = (["--kubeconfig", arena.kubeconfigs["admin"], f"--as={WORKFLOW_SA}"] if who == "workflow"
                else ["--kubeconfig", arena.kubeconfigs[who]])
    run = subprocess.run([str(binary("kubectl")), *identity, *args], input=json.dumps(obj) if obj else None,
                         capture_output=True, text=True, timeout=60)
    return Outcome(run.returncode == 0, (run.stdout + run.stderr).strip())


def create(who: str, build: Callable[[], dict], dry_run: bool = False) -> Callable[[Arena], Outcome]:
    extra = ["--dry-run=server"] if dry_run else []
    return lambda arena: kubectl(arena, who, "create", *extra, "-f", "-", obj=build())


def apply(who: str, obj: dict) -> Callable[[Arena], Outcome]:
    """Server-side apply: one PATCH, no GET first (kubectl patch would be refused at its GET)."""
    return lambda arena: kubectl(arena, who, "apply", "--server-side", "--field-manager=attacker", "-f", "-", obj=obj)


def run(who: str, *args: str, expect: str | None = None) -> Callable[[Arena], Outcome]:
    """A kubectl call; with `expect`, it only counts as done when it prints exactly that."""
    def act(arena: Arena) -> Outcome:
        out = kubectl(arena, who, *args)
        return out if expect is None else Outcome(out.ok and out.text == expect, out.text)
    return act


def post_status(token_ns: str, audience_ns: str, audience_name: str, url_ns: str, url_name: str) -> Callable[[Arena], Outcome]:
    """POST a progress report to the status server with a token of `token_ns`'s default ServiceAccount."""
    def act(arena: Arena) -> Outcome:
        from trainyard.controller.plugins.trainjobstatus import token_audience

        token = mint_token(arena.cluster, token_ns, token_audience(audience_ns, audience_name))
        url = arena.status_url.replace(f"/namespaces/{TENANT}/trainjobs/mine/", f"/namespaces/{url_ns}/trainjobs/{url_name}/")
        body = {"trainerStatus": {"progressPercentage": 99, "lastUpdatedTime": "2026-01-01T00:00:00Z"}}
        response = requests.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, verify=arena.ca_file, timeout=10)
        return Outcome(response.status_code == 200, f"HTTP {response.status_code} {response.text.strip()}")
    return act


def mint_token(cluster, namespace: str, audience: str) -> str:
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[audience], expiration_seconds=600))
    return cluster.core.create_namespaced_service_account_token("default", namespace, request).status.token


def forbidden(verb: str, resource: str) -> str:
    return rf'is forbidden: User "[^"]+" cannot {verb} resource "{resource}"'


# kube-apiserver 1.36 checks constrained impersonation (impersonate-on:<mode>:<verb>) before the legacy verb
IMPERSONATE = r'User "alice" cannot impersonate(-on:user-info:\w+)? resource'
MINE_QUEUE = run("alice", "get", "podgroup", "mine", "-n", TENANT, "-o", "jsonpath={.spec.queue}", expect=TENANT)
OWN_TJ = create("alice", lambda: suite_trainjob(_unique("tj"), TORCH_RUNTIME))
WEBHOOK_QUEUE = rf'({re.escape(GUARD)}.*names a Volcano queue other than this namespace\'s queue team-a|supported values: "team-a")'

# ----------------------------------------------------------------------------- the attack table
ATTACKS = [
    # TrainJobs naming another tenant's queue, namespace or class
    *[Attack(f"trainjob-queue-in-{where}", "alice",
             create("alice", lambda w=where: suite_trainjob(_unique("tj"), TORCH_RUNTIME, **smuggled_queue(w, OTHER))),
             WEBHOOK_QUEUE,
             create("alice", lambda w=where: suite_trainjob(_unique("tj"), TORCH_RUNTIME, **smuggled_queue(w, TENANT))))
      for where in ("runtimePatches", "spec.annotations", "podTemplateOverrides")],
    Attack("trainjob-in-other-namespace", "alice",
           create("alice", lambda: suite_trainjob(_unique("tj"), TORCH_RUNTIME, namespace=OTHER)),
           forbidden("create", "trainjobs"), OWN_TJ),
    Attack("trainjob-priority-class-of-other-tenant", "alice",
           create("alice", lambda: suite_trainjob(_unique("tj"), TORCH_RUNTIME,
                                                  metadata_labels={SUITE: "1", PRIORITY_CLASS: "team-b-default"})),
           r'Unsupported value: "team-b-default": supported values: "training-high", "team-a-default"',
           create("alice", lambda: suite_trainjob(_unique("tj"), TORCH_RUNTIME,
                                                  metadata_labels={SUITE: "1", PRIORITY_CLASS: "training-high"}))),
    Attack("trainjob-priority-class-system", "alice",
           create("alice", lambda: suite_trainjob(
               _unique("tj"), TORCH_RUNTIME, metadata_labels={SUITE: "1", PRIORITY_CLASS: "system-node-critical"})),
           r'Unsupported value: "system-node-critical"', OWN_TJ),
    Attack("trainjob-status-write", "alice",
           run("alice", "patch", "trainjob", "mine", "-n", TENANT, "--subresource=status", "--type=merge", "-p",
               '{"status":{"trainerStatus":{"progressPercentage":100,"lastUpdatedTime":"2026-01-01T00:00:00Z"}}}'),
           forbidden("patch", "trainjobs/status"),
           run("alice", "patch", "trainjob", "mine", "-n", TENANT, "--type=merge", "-p",
               '{"metadata":{"labels":{"note":"mine"}}}')),
    # other objects naming another tenant's queue: alice is stopped by RBAC, her route is a TrainJob
    Attack("podgroup-other-queue", "alice", create("alice", lambda: podgroup(OTHER)),
           forbidden("create", "podgroups"), MINE_QUEUE),
    Attack("pod-other-queue", "alice", create("alice", lambda: pod({Q: OTHER})), forbidden("create", "pods"),
           run("alice", "get", "pods", "-n", TENANT)),
    Attack("jobset-other-queue", "alice", create("alice", lambda: jobset(OTHER)), forbidden("create", "jobsets"),
           run("alice", "get", "jobset", "mine", "-n", TENANT, "-o", "jsonpath={.metadata.name}", expect="mine")),
    Attack("volcano-job-other-queue", "alice", create("alice", lambda: vcjob(OTHER)), forbidden("create", "jobs"), OWN_TJ),
    Attack("pod-joins-other-tenants-gang", "alice", create("alice", lambda: pod({GROUP_NAME: "victim"})),
           forbidden("create", "pods"), MINE_QUEUE),
    # the same with an identity RBAC lets through: the queue guard and quotas refuse
    Attack("podgroup-other-queue", "workflow", create("workflow", lambda: podgroup(OTHER)),
           re.escape(GUARD) + "PodGroup spec.queue", create("workflow", lambda: podgroup(TENANT), dry_run=True)),
    Attack("podgroup-without-queue", "workflow", create("workflow", lambda: podgroup(None)),  # CRD default: `default`
           re.escape(GUARD) + "PodGroup spec.queue", create("workflow", lambda: podgroup(TENANT), dry_run=True)),
    Attack("pod-other-queue", "workflow", create("workflow", lambda: pod({Q: OTHER})),
           re.escape(GUARD) + "metadata annotation", create("workflow", lambda: pod({Q: TENANT}), dry_run=True)),
    Attack("bare-pod-names-a-podgroup", "workflow", create("workflow", lambda: pod({GROUP_NAME: "victim"})),
           re.escape(GUARD) + "a bare pod", create("workflow", lambda: pod(), dry_run=True)),
    Attack("jobset-other-queue", "workflow", create("workflow", lambda: jobset(OTHER)),
           re.escape(GUARD) + "JobSet templates", create("workflow", lambda: jobset(TENANT), dry_run=True)),
    Attack("volcano-job-other-queue", "workflow", create("workflow", lambda: vcjob(OTHER)),
           re.escape(GUARD) + "Volcano Job", create("workflow", lambda: vcjob(TENANT), dry_run=True)),
    Attack("volcano-job-task-other-queue", "workflow", create("workflow", lambda: vcjob(TENANT, task_queue=OTHER)),
           re.escape(GUARD) + "Volcano Job", create("workflow", lambda: vcjob(TENANT, task_queue=TENANT), dry_run=True)),
    Attack("pod-priority-class-not-granted", "workflow", create("workflow", lambda: pod(priority="team-b-default")),
           r"exceeded quota: other-priority-classes",
           create("workflow", lambda: pod(priority="training-high"), dry_run=True)),
    # the tenant's own guardrails and the catalog
    Attack("edit-own-resourcequota", "alice",
           run("alice", "patch", "resourcequota", "tenant-quota", "-n", TENANT, "--type=merge", "-p",
               '{"spec":{"hard":{"requests.nvidia.com/gpu":"64"}}}'), forbidden("patch", "resourcequotas"),
           run("alice", "get", "resourcequota", "tenant-quota", "-n", TENANT, "-o",
               r"jsonpath={.spec.hard.requests\.nvidia\.com/gpu}", expect="16")),
    Attack("edit-own-limitrange", "alice",
           run("alice", "delete", "limitrange", "tenant-defaults", "-n", TENANT), forbidden("delete", "limitranges"),
           run("alice", "get", "limitrange", "tenant-defaults", "-n", TENANT)),
    Attack("edit-own-queue", "alice", apply("alice", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                      "metadata": {"name": TENANT}, "spec": {"capability": {"nvidia.com/gpu": 64}}}),
           forbidden("patch", "queues"), MINE_QUEUE),
    Attack("relabel-own-namespace-queue", "alice", apply("alice", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
               "name": TENANT, "labels": {"trainyard.dev/queue": OTHER}}}), forbidden("patch", "namespaces"), MINE_QUEUE),
    Attack("edit-own-trainingruntime", "alice",
           run("alice", "patch", "trainingruntime", "torch-distributed-volcano", "-n", TENANT, "--type=merge", "-p",
               json.dumps({"metadata": {"annotations": {Q: OTHER}}})), forbidden("patch", "trainingruntimes"),
           run("alice", "get", "trainingruntime", "torch-distributed-volcano", "-n", TENANT)),
    Attack("create-clustertrainingruntime", "alice", create("alice", lambda: training_runtime("ClusterTrainingRuntime", TENANT)),
           forbidden("create", "clustertrainingruntimes"), run("alice", "get", "clustertrainingruntimes")),
    Attack("create-trainingruntime-other-queue", "bob", create("bob", lambda: training_runtime("TrainingRuntime", OTHER)),
           forbidden("create", "trainingruntimes"), run("bob", "get", "trainingruntimes", "-n", TENANT)),
    # another namespace's credentials and runtime snapshots
    Attack("read-other-tenants-mpi-ssh-key", "bob", run("bob", "get", "secret", "victim-mpi-mpi-ssh-auth", "-n", OTHER),
           forbidden("get", "secrets"), run("bob", "get", "secret", "mine-mpi-mpi-ssh-auth", "-n", TENANT)),
    Attack("list-secrets-everywhere", "bob", run("bob", "get", "secrets", "-A"), forbidden("list", "secrets"),
           run("bob", "get", "secrets", "-n", TENANT)),
    Attack("read-other-tenants-runtime-snapshot", "bob",
           run("bob", "get", "configmap", "victim-runtime-snapshot", "-n", OTHER), forbidden("get", "configmaps"),
           run("bob", "get", "configmap", "mine-runtime-snapshot", "-n", TENANT)),
    # the status server
    Attack("status-server-token-of-other-namespace", "team-a-pod", post_status(TENANT, OTHER, "victim", OTHER, "victim"),
           r"HTTP 403 .*Forbidden", post_status(TENANT, TENANT, "mine", TENANT, "mine")),
    Attack("status-server-own-token-other-trainjob", "team-a-pod", post_status(TENANT, TENANT, "mine", OTHER, "victim"),
           r"HTTP 403 .*Forbidden", post_status(TENANT, TENANT, "mine", TENANT, "mine")),
    # impersonation by a real non-admin identity
    Attack("impersonate-tenant-admin", "alice", run("alice", "--as=bob", "--as-group=team-a-admins", "get", "secrets", "-n", TENANT),
           IMPERSONATE, run("alice", "get", "trainjob", "mine", "-n", TENANT)),
    Attack("impersonate-system-masters", "alice",
           run("alice", "--as=alice", "--as-group=system:masters", "get", "secrets", "-n", OTHER),
           IMPERSONATE, run("alice", "get", "trainjobs", "-n", TENANT)),
]


# ----------------------------------------------------------------------------- setup and the tests
def _workflow_rbac() -> list[dict]:
    rbac = "rbac.authorization.k8s.io/v1"
    role = {"apiVersion": rbac, "kind": "Role", "metadata": _meta("attack-workflow"), "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["create"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create"]},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["create"]}]}
    binding = {"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta("attack-workflow"),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "attack-workflow"},
               "subjects": [{"kind": "ServiceAccount", "name": "workflow", "namespace": TENANT}]}
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("workflow")}, role, binding]


def _status_url(js: dict) -> str:
    envs = [e for j in js["spec"]["replicatedJobs"] for c in j["template"]["spec"]["template"]["spec"]["containers"]
            for e in c.get("env") or [] if e["name"] == "KUBEFLOW_TRAINER_SERVER_URL"]
    return envs[0]["value"]


def _exists(cluster, kind: str, name: str, ns: str) -> bool:
    return bool(cluster.kubectl("get", kind, name, "-n", ns, "--ignore-not-found", "-o", "name").strip())


@pytest.fixture(scope="module")
def arena(platform, cluster, tmp_path_factory):
    """Victims in team-b (a Volcano TrainJob, an MPI one with its SSH key) and alice's own TrainJobs in team-a."""
    from trainyard.cluster.local import user_kubeconfig

    kubeconfigs = {"admin": cluster.kubeconfig,
                   "alice": str(user_kubeconfig(cluster.name, "alice", (f"{TENANT}-users",))),
                   "bob": str(user_kubeconfig(cluster.name, "bob", (f"{TENANT}-admins",)))}
    arena = Arena(cluster, kubeconfigs)
    cluster.apply(*_workflow_rbac())
    cluster.apply(suite_trainjob("victim", TORCH_RUNTIME, namespace=OTHER),
                  suite_trainjob("victim-mpi", "openmpi-distributed", namespace=OTHER))
    for name, runtime in (("mine", "torch-distributed-volcano"), ("mine-mpi", "openmpi-distributed")):
        created = kubectl(arena, "alice", "create", "-f", "-", obj=suite_trainjob(name, runtime))
        assert created.ok, created.text
    for kind, name, ns in (("podgroup", "mine", TENANT), ("jobset", "mine", TENANT), ("configmap", "mine-tls-config", TENANT),
                           ("secret", "mine-mpi-mpi-ssh-auth", TENANT), ("configmap", "mine-runtime-snapshot", TENANT),
                           ("podgroup", "victim", OTHER), ("secret", "victim-mpi-mpi-ssh-auth", OTHER),
                           ("configmap", "victim-runtime-snapshot", OTHER)):
        cluster.wait(lambda: _exists(cluster, kind, name, ns), what=f"{kind} {ns}/{name}")
    cluster.wait(lambda: kubectl(arena, "workflow", "auth", "can-i", "create", "podgroups", "-n", TENANT).ok,
                 what="the workflow ServiceAccount's Role in effect")
    # A ValidatingAdmissionPolicy bites only once the API server has loaded and type-checked it (seconds
    # after `pulumi up`): probe with a dry run that only the queue guard refuses before attacking.
    cluster.wait(lambda: "denied" in kubectl(arena, "admin", "create", "--dry-run=server", "-f", "-",
                                             obj=podgroup(OTHER)).text, timeout=120, interval=1,
                 what="the queue guard in effect")
    arena.status_url = _status_url(cluster.get_object("jobset.x-k8s.io", "v1alpha2", "jobsets", "mine", TENANT))
    ca = tmp_path_factory.mktemp("attacks") / "ca.crt"
    ca.write_text(cluster.core.read_namespaced_config_map("mine-tls-config", TENANT).data["ca.crt"])
    arena.ca_file = str(ca)
    yield arena
    for ns in (TENANT, OTHER):
        cluster.kubectl("delete", "trainjobs,pods,podgroups.scheduling.volcano.sh,jobsets,jobs.batch.volcano.sh,"
                        "serviceaccounts,roles,rolebindings", "-n", ns, "-l", SUITE, "--wait=false", "--ignore-not-found")


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{a.attacker}:{a.name}" for a in ATTACKS])
def test_attack_is_refused_and_the_legitimate_action_is_not(arena, attack):
    key = f"{attack.attacker}:{attack.name}"
    TALLY["attempted"].append(key)
    tried = attack.attempt(arena)
    refused = not tried.ok and re.search(attack.refusal, tried.text) is not None
    if refused:
        TALLY["refused"].append(key)
        REFUSALS[key] = _reason(tried.text)
    print(f"\n{'REFUSED' if refused else 'NOT REFUSED'} {key}: {tried.text[:300]}")
    assert not tried.ok, f"{attack.name} was NOT refused: {tried.text}"
    assert refused, f"{attack.name} was refused, but not as expected ({attack.refusal!r}): {tried.text}"
    control = attack.control(arena)
    assert control.ok, f"positive control of {attack.name} failed for {attack.attacker}: {control.text}"


def _reason(text: str) -> str:
    """Which layer refused: the admission policy, the webhook, quota, RBAC or the status server."""
    for marker, layer in (("ValidatingAdmissionPolicy", "queue guard"), ("admission webhook", "TrainJob webhook"),
                          ("exceeded quota", "ResourceQuota"), ("cannot impersonate", "RBAC (impersonate)"),
                          ("is forbidden: User", "RBAC"), ("HTTP 403", "status server 403")):
        if marker in text:
            return layer
    return text[:60]


def test_every_attack_was_refused(capsys):
    """The table and the summary line, on the terminal whether or not pytest captures output (-s)."""
    refused, attempted = len(TALLY["refused"]), len(TALLY["attempted"])
    with capsys.disabled():
        for key in TALLY["attempted"]:
            print(f"\n[attacks] {key:55} {REFUSALS.get(key, 'NOT REFUSED')}", end="")
        print(f"\n[attacks] tenant isolation: refused {refused}/{attempted} attempted")
    assert attempted >= 15 and refused == attempted, sorted(set(TALLY["attempted"]) - set(TALLY["refused"]))
