"""The in-cluster path of the dev/prod stacks, on a real API server: `pulumi up` of a stack shaped like
stacks/Pulumi.dev.yaml (JobSet and Volcano from their pinned charts, trainyard's controller Deployment
with 2 replicas behind its webhook Service, PodDisruptionBudget, probes) onto a throwaway bare local
cluster whose pods kwok runs; Deployments must report Available, a second preview must be empty, and
`pulumi destroy` must leave nothing trainyard created but the retained CRDs. dev and prod themselves
are previewed against the same cluster (server-side dry-run).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from trainyard import stack_deploy
from trainyard.cluster import certs, local
from trainyard.cluster.spec import ClusterSpec
from trainyard.platform.controller_objects import CERT_SECRET, NAME as CONTROLLER
from trainyard.toolchain.build import ensure_built
from trainyard.toolchain.versions import binary
from waiting import wait_for

pytestmark = pytest.mark.integration

SPEC = ClusterSpec(name=os.environ.get("TRAINYARD_INCLUSTER_CLUSTER", "trainyard-incluster"), nodes=4, racks=2,
                   port_base=int(os.environ.get("TRAINYARD_INCLUSTER_PORT_BASE", "27600")))
CONTROLLER_NS = "trainyard-system"
# Objects the API server or its controllers make on their own, not trainyard.
SYSTEM_KINDS = {"events", "events.events.k8s.io", "leases.coordination.k8s.io", "endpoints",
                "endpointslices.discovery.k8s.io", "serviceaccounts", "configmaps", "secrets", "pods",
                "replicasets.apps", "controllerrevisions.apps", "componentstatuses"}


def kubectl(*args: str, input_text: str | None = None, check: bool = True) -> str:
    run = subprocess.run([str(binary("kubectl")), "--kubeconfig", str(local.ClusterPaths.for_name(SPEC.name).kubeconfig),
                          *args], capture_output=True, text=True, input=input_text, timeout=120)
    if check and run.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {run.stderr}")
    return run.stdout


def inventory() -> set[tuple[str, str, str]]:
    """(resource, namespace, name) of every listable object, our own and the API server's."""
    resources = kubectl("api-resources", "--verbs=list", "-o", "name").split()
    out = set()
    for resource in resources:
        if resource in SYSTEM_KINDS:
            continue
        listing = json.loads(kubectl("get", resource, "-A", "-o", "json", check=False) or '{"items": []}')
        for item in listing["items"]:
            meta = item["metadata"]
            out.add((resource, meta.get("namespace", ""), meta["name"]))
    return out



def incluster_values(document: dict, cluster_state: dict, ca_file) -> dict:
    """The dev stack pointed at the bare cluster, its webhook certificate `provided` (no cert-manager here).

    kwok simulates pods: they are Running and Ready, but no process listens behind their IPs, so the API
    server's calls to the webhook Service cannot succeed here; `failurePolicy: Ignore` lets the catalog's
    runtimes be created anyway (the registration itself is checked below). JobSet's chart webhooks are
    never called: this test creates no JobSet.
    """
    values = yaml.safe_load(yaml.safe_dump(document))
    config = values["config"]
    config["trainyard:kubeconfig"] = cluster_state["kubeconfig"]
    config["trainyard:kubeContext"] = f"kwok-{cluster_state['name']}"
    config["trainyard:controller"]["webhook"] = {"certificate": "provided", "caBundleFile": str(ca_file),
                                                   "failurePolicy": "Ignore"}
    config["trainyard:policies"]["protectCrds"] = False  # a throwaway cluster; retainCrds keeps its default (true)
    return values


@pytest.fixture(scope="module")
def bare_cluster():
    ensure_built(*local.REQUIRED_TOOLS, "pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    if local.read_state(SPEC.name):
        local.down(SPEC.name, echo=lambda *_: None)
    state = local.up(SPEC, echo=lambda *_: None, controllers=False)
    try:
        yield state
    finally:
        if not os.environ.get("TRAINYARD_KEEP_TEST_CLUSTER"):
            local.down(SPEC.name, echo=lambda *_: None)


@pytest.fixture(scope="module")
def before(bare_cluster) -> set:
    return inventory()


@pytest.fixture(scope="module")
def deployed(bare_cluster, before, tmp_path_factory, platform_stack):
    """What an operator does for `certificate: provided`, then `trainyard platform up` of the stack."""
    work = tmp_path_factory.mktemp("incluster")
    dns = f"{CONTROLLER}-webhook.{CONTROLLER_NS}.svc"
    certs.write_serving_pair(work / "certs", dns, dns_names=(dns, f"{dns}.cluster.local"))
    kubectl("create", "namespace", CONTROLLER_NS)
    kubectl("create", "secret", "tls", CERT_SECRET, "-n", CONTROLLER_NS, f"--cert={work / 'certs' / 'tls.crt'}",
            f"--key={work / 'certs' / 'tls.key'}")
    values = incluster_values(stack_deploy.read_stack_file("dev"), bare_cluster, work / "certs" / "ca.crt")
    stack = platform_stack(SPEC.name, work, values=values, stack="incluster")
    stack.up()
    return stack


def deployment(namespace: str, name: str) -> dict:
    return json.loads(kubectl("get", "deployment", name, "-n", namespace, "-o", "json"))


def available(dep: dict) -> bool:
    conditions = {c["type"]: c["status"] for c in dep.get("status", {}).get("conditions", [])}
    return conditions.get("Available") == "True" and dep["status"].get("readyReplicas") == dep["spec"]["replicas"]


def test_every_controller_deployment_is_available(deployed):
    listing = json.loads(kubectl("get", "deployments", "-A", "-o", "json"))["items"]
    found = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in listing}
    namespaces = {ns for ns, _ in found}
    assert {"jobset-system", "volcano-system", CONTROLLER_NS} <= namespaces, sorted(found)
    assert any(ns == "volcano-system" and "scheduler" in name for ns, name in found)
    assert any(ns == "volcano-system" and "controller" in name for ns, name in found)
    for (ns, name), dep in found.items():
        if ns in ("jobset-system", "volcano-system", CONTROLLER_NS):
            assert available(deployment(ns, name)), f"{ns}/{name} is not Available: {dep.get('status')}"


def test_the_controller_runs_two_replicas_with_probes_pdb_and_service_webhook(deployed):
    dep = deployment(CONTROLLER_NS, CONTROLLER)
    assert dep["spec"]["replicas"] == 2 and dep["status"]["readyReplicas"] == 2
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"name": "certs", "secret": {"secretName": CERT_SECRET, "defaultMode": 420}} in dep["spec"]["template"]["spec"]["volumes"]
    pdb = json.loads(kubectl("get", "pdb", CONTROLLER, "-n", CONTROLLER_NS, "-o", "json"))
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["status"]["currentHealthy"] == 2 and pdb["status"]["disruptionsAllowed"] == 1
    hooks = json.loads(kubectl("get", "validatingwebhookconfigurations", "-o", "json"))["items"]
    (ours,) = [h for h in hooks if h["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "trainyard"]
    ca = (deployed.workdir / "certs" / "ca.crt").read_bytes()
    for hook in ours["webhooks"]:
        assert hook["clientConfig"]["service"] == {"name": f"{CONTROLLER}-webhook", "namespace": CONTROLLER_NS,
                                                   "port": 443, **({"path": hook["clientConfig"]["service"]["path"]})}
        assert hook["clientConfig"]["caBundle"] == certs.ca_bundle(ca)
    endpoints = json.loads(kubectl("get", "endpointslices", "-n", CONTROLLER_NS, "-l",
                                   f"kubernetes.io/service-name={CONTROLLER}-webhook", "-o", "json"))["items"]
    ready = [e for s in endpoints for e in s.get("endpoints") or [] if e.get("conditions", {}).get("ready")]
    assert len(ready) == 2, "the webhook Service reaches both replicas"


def test_tenants_queues_and_runtimes_are_installed(deployed):
    for tenant in deployed.values["config"]["trainyard:tenants"]:
        queue = json.loads(kubectl("get", "queues.scheduling.volcano.sh", tenant["queue"]["name"], "-o", "json"))
        assert queue["spec"]["weight"] == tenant["queue"]["weight"]
        runtimes = json.loads(kubectl("get", "trainingruntimes", "-n", tenant["namespace"], "-o", "json"))["items"]
        assert runtimes


def test_the_charts_podgroup_crd_lets_readers_select_by_phase(deployed):
    """The chart's PodGroup CRD goes through the same transform as the local copy: `report`/`fit` list only the
    PodGroups not Completed, and the API server takes that field selector."""
    crd = json.loads(kubectl("get", "crd", "podgroups.scheduling.volcano.sh", "-o", "json"))
    assert all({"jsonPath": ".status.phase"} in v.get("selectableFields", []) for v in crd["spec"]["versions"]), crd
    kubectl("get", "podgroups", "-A", "--field-selector", "status.phase!=Completed")  # refused (400) without it


def test_a_second_preview_shows_no_changes(deployed):
    result = deployed.preview()
    changes = {op: n for op, n in result.change_summary.items() if op != "same" and n}
    assert changes == {}, f"a preview right after up must be empty, got {changes}: {result.changed[:40]}"


def test_destroy_leaves_nothing_but_the_retained_crds(deployed, before):
    deployed.destroy()
    for namespace in ("jobset-system", "volcano-system", CONTROLLER_NS, "kubeflow-system",
                      *[t["namespace"] for t in deployed.values["config"]["trainyard:tenants"]]):
        wait_for(lambda: not kubectl("get", "namespace", namespace, "--ignore-not-found", "-o", "name"), 120,
                 f"namespace {namespace} to be deleted")
    left = inventory() - before
    crds = {item for item in left if item[0] == "customresourcedefinitions.apiextensions.k8s.io"}
    groups = {name.split(".", 1)[1] for _, _, name in crds}
    # The API server registers an APIService per served CRD group version itself; they go with the CRDs.
    served = {item for item in left if item[0] == "apiservices.apiregistration.k8s.io"
              and item[2].split(".", 1)[1] in groups}
    assert left - crds - served == set(), f"objects left after destroy: {sorted(left - crds - served)}"
    names = {name for _, _, name in crds}
    assert {"trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io", "queues.scheduling.volcano.sh"} <= names, \
        "retainCrds (default true) keeps every CRD, chart-installed ones too"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_stacks_preview_as_a_server_side_dry_run(bare_cluster, tmp_path_factory, platform_stack, stack):
    """stacks/Pulumi.<stack>.yaml pointed at the local cluster; the preview reaches the API server."""
    values = yaml.safe_load(stack_deploy.stack_file(stack).read_text())
    values["config"]["trainyard:kubeconfig"] = bare_cluster["kubeconfig"]
    values["config"]["trainyard:kubeContext"] = f"kwok-{bare_cluster['name']}"
    target = platform_stack(SPEC.name, tmp_path_factory.mktemp(f"preview-{stack}"), values=values, stack=stack)
    lines: list[str] = []
    preview = target.stack.preview(on_output=lines.append, color="never")
    output = "\n".join(lines)
    assert "unreachable" not in output.lower(), "the preview must reach the API server (server-side dry-run)"
    assert preview.change_summary.get("create", 0) > 50, preview.change_summary
