"""Tenant objects, RBAC, queue guard and controller objects."""

import pytest

from trainyard.platform import controller_objects as ctl
from trainyard.platform import tenant_objects as objs
from trainyard.platform.policy_pack.checks import tenant_coverage_violations, wildcard_violations
from trainyard.platform.gpu_pod_routing import render_gpu_pod_routing_binding
from trainyard.platform.queue_guard import QUEUE_ANNOTATION, render_queue_guard_binding, render_queue_guard_policy
from trainyard.platform.stack_config import ControllerSpec, MetricsSpec, PolicySpec, WebhookSpec
from trainyard.platform.stack_validation import load_stack
from trainyard.platform.tenant_rbac import render_tenant_rbac, runtime_reader_cluster_role, wildcard_rules

FILE = "stacks/Pulumi.test.yaml"


@pytest.fixture
def tenant(values, catalog):
    return load_stack(values, file=FILE, catalog=catalog).tenants[0]


DEFAULT_LIMITS = {"trainyard.dev/default-memory-limit": "64Gi", "trainyard.dev/default-ephemeral-storage-limit": "50Gi",
                  "trainyard.dev/default-emptydir-size-limit": "16Gi", "trainyard.dev/node-loss-toleration-seconds": "60"}


def test_namespace_labels(tenant):
    labels = objs.render_namespace(tenant, PolicySpec(pod_security="restricted"))["metadata"]["labels"]
    assert labels["trainyard.dev/queue"] == "team-a" and labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_namespace_carries_granted_and_default_priority_classes_for_the_controller(tenant):
    from trainyard.controller.tenant_namespace import tenant_policy

    namespace = objs.render_namespace(tenant, PolicySpec())
    assert namespace["metadata"]["annotations"] == {"trainyard.dev/priority-classes": "train-high,train-default",
                                                    "trainyard.dev/default-priority-class": "train-default",
                                                    **DEFAULT_LIMITS}
    assert tenant_policy(namespace).priority_classes == ("train-high", "train-default")
    assert tenant_policy(namespace).queue == "team-a"


def test_namespace_without_priority_grants_has_only_the_default_limits(tenant):
    from dataclasses import replace

    plain = replace(tenant, priority_classes=(), default_priority_class=None)
    assert objs.render_namespace(plain, PolicySpec())["metadata"]["annotations"] == DEFAULT_LIMITS


@pytest.mark.parametrize("grace, annotation", [(None, None), (60, None), (300, "300"), (0, "0")])
def test_a_tenants_checkpoint_grace_reaches_its_namespace_for_reclaim(values, catalog, grace, annotation):
    """`limits.checkpointGraceSeconds` (the default left off the namespace) is what reclaim waits for an asked
    TrainJob of the tenant (`scheduling.checkpoints.grace_seconds`)."""
    from trainyard import k8s as K
    from trainyard.scheduling.checkpoints import DEFAULT_GRACE_SECONDS, grace_seconds

    if grace is not None:
        values["tenants"][0].setdefault("limits", {})["checkpointGraceSeconds"] = grace
    namespace = objs.render_namespace(load_stack(values, file=FILE, catalog=catalog).tenants[0], PolicySpec())
    assert namespace["metadata"]["annotations"].get(K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION) == annotation
    assert grace_seconds(namespace) == (DEFAULT_GRACE_SECONDS if grace is None else grace)


def test_a_negative_checkpoint_grace_is_refused_naming_the_field(values, catalog):
    from trainyard.errors import TrainyardError

    values["tenants"][0].setdefault("limits", {})["checkpointGraceSeconds"] = -5
    with pytest.raises(TrainyardError, match="checkpointGraceSeconds"):
        load_stack(values, file=FILE, catalog=catalog)


@pytest.mark.parametrize("seconds, annotation", [(None, "60"), (20, "20"), (0, "0"), (300, "300")])
def test_a_tenants_node_loss_toleration_reaches_its_namespace_for_the_policy(values, catalog, seconds, annotation):
    """Always written: the node-loss toleration policy reads it (`platform.node_loss_toleration`)."""
    from trainyard import k8s as K

    if seconds is not None:
        values["tenants"][0].setdefault("limits", {})["nodeLossTolerationSeconds"] = seconds
    namespace = objs.render_namespace(load_stack(values, file=FILE, catalog=catalog).tenants[0], PolicySpec())
    assert namespace["metadata"]["annotations"][K.NAMESPACE_NODE_LOSS_TOLERATION_ANNOTATION] == annotation


def test_a_negative_node_loss_toleration_is_refused_naming_the_field(values, catalog):
    from trainyard.errors import TrainyardError

    values["tenants"][0].setdefault("limits", {})["nodeLossTolerationSeconds"] = -1
    with pytest.raises(TrainyardError, match="nodeLossTolerationSeconds"):
        load_stack(values, file=FILE, catalog=catalog)


def test_the_node_loss_policy_reads_the_namespace_and_binds_per_tenant(tenant):
    from trainyard import k8s as K
    from trainyard.platform.node_loss_toleration import POLICY_NAME, render_node_loss_binding, render_node_loss_policy

    policy = render_node_loss_policy()
    assert policy["kind"] == "MutatingAdmissionPolicy" and policy["metadata"]["name"] == POLICY_NAME
    assert K.NAMESPACE_NODE_LOSS_TOLERATION_ANNOTATION in policy["spec"]["variables"][0]["expression"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    binding = render_node_loss_binding(tenant)
    assert binding["spec"]["policyName"] == POLICY_NAME


def test_resource_quota(tenant):
    hard = objs.render_resource_quota(tenant)["spec"]["hard"]
    assert hard == {"requests.cpu": "96", "requests.memory": "512Gi", "requests.nvidia.com/gpu": "16",
                    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "16",
                    "count/trainjobs.trainer.kubeflow.org": "100"}


def test_the_gpu_quota_also_caps_each_listed_dra_device_class(tenant):
    policies = PolicySpec(gpu_device_classes=("gpu.nvidia.com", "gpu.example.com"))
    hard = objs.render_resource_quota(tenant, policies)["spec"]["hard"]
    assert {k: v for k, v in hard.items() if "deviceclass" in k} == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "16", "gpu.example.com.deviceclass.resource.k8s.io/devices": "16"}
    allowed, _ = objs.render_priority_quotas(tenant)  # its scope is pods' priority classes; a claim has none
    assert set(allowed["spec"]["hard"]) == {"requests.nvidia.com/gpu"}
    assert "deviceclass" not in " ".join(objs.render_resource_quota(tenant, PolicySpec(gpu_device_classes=()))["spec"]["hard"])


def test_priority_quotas_allow_listed_classes_and_block_others(tenant):
    allowed, others = objs.render_priority_quotas(tenant)
    assert allowed["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["train-high", "train-default"]}]
    assert others["spec"]["hard"] == {"pods": "0"}
    assert {e["operator"] for e in others["spec"]["scopeSelector"]["matchExpressions"]} == {"Exists", "NotIn"}


def test_limit_range_and_network_policy(tenant):
    (limits,) = objs.render_limit_range(tenant)["spec"]["limits"]
    assert limits["defaultRequest"] == {"cpu": "1", "memory": "4Gi", "ephemeral-storage": "1Gi"}
    assert "default" not in limits, "a default limit below a job's request would make its pods invalid"
    assert objs.wants_default_deny(tenant, PolicySpec(default_deny_network=True))
    assert objs.render_default_deny(tenant)["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]


def test_tenant_rbac_is_namespaced_read_only_on_runtimes_and_wildcard_free(tenant):
    rbac = render_tenant_rbac(tenant) + [runtime_reader_cluster_role()]
    assert all(wildcard_rules(obj) == [] for obj in rbac)
    roles = [o for o in rbac if o["kind"] == "Role"]
    assert all(r["metadata"]["namespace"] == "team-a" for r in roles)
    for role in roles + [runtime_reader_cluster_role()]:
        for rule in role["rules"]:
            if {"trainingruntimes", "clustertrainingruntimes"} & set(rule["resources"]):
                assert set(rule["verbs"]) <= {"get", "list", "watch"}
            assert not {"queues", "namespaces", "priorityclasses"} & set(rule["resources"])
            if {"resourcequotas", "limitranges"} & set(rule["resources"]):
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, "tenants see their quota, never change it"
    subjects = {s["name"] for o in rbac if o["kind"] == "RoleBinding" for s in o["subjects"]}
    assert subjects == {"team-a-admins", "team-a-users"}


def test_wildcards_are_detected():
    assert wildcard_rules({"rules": [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]})
    assert wildcard_violations("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
                               {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]})


def test_queue_guard_cel_covers_every_place_a_queue_can_be_named():
    policy = render_queue_guard_policy()
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert policy["spec"]["variables"] == [
        {"name": "queue", "expression": "namespaceObject.?metadata.?labels[?'trainyard.dev/queue'].orValue('')"}]
    for fragment in ("object.?spec.?queue", "object.?metadata.?annotations", "p.?trainingRuntimeSpec.?template",
                     "j.?template.?spec.?template", "object.?spec.?replicatedJobs", "podTemplateOverrides",
                     f"[?'{QUEUE_ANNOTATION}']"):
        assert fragment in text, fragment
    resources = {(r["apiGroups"][0], r["resources"][0]) for r in policy["spec"]["matchConstraints"]["resourceRules"]}
    assert resources == {("", "pods"), ("scheduling.volcano.sh", "podgroups"), ("trainer.kubeflow.org", "trainjobs"),
                         ("jobset.x-k8s.io", "jobsets"), ("batch.volcano.sh", "jobs"),
                         *(("apps", r) for r in ("deployments", "replicasets", "statefulsets", "daemonsets")),
                         ("batch", "jobs"), ("batch", "cronjobs")}
    assert text.count("(") == text.count(")")


def test_queue_guard_refuses_volcano_jobs_of_other_queues_and_bare_pods_joining_gangs():
    """Attack suite holes: a Volcano Job named another tenant's queue, a bare pod joined a gang by annotation."""
    validations = render_queue_guard_policy()["spec"]["validations"]
    by_message = {v["messageExpression"]: v["expression"] for v in validations}
    (vcjob,) = [e for m, e in by_message.items() if m.startswith("'Volcano Job")]
    assert "object.?spec.?queue.orValue('') == variables.queue" in vcjob, "no queue is no escape to `default`"
    assert "t.?template.?metadata.?annotations" in vcjob
    (bare,) = [e for m, e in by_message.items() if "a bare pod" in m]
    assert "scheduling.k8s.io/group-name" in bare and "r.?controller.orValue(false)" in bare
    assert "'podgroup-' + object.?metadata.?uid" in bare, "Volcano's own group for a bare pod stays allowed"
    assert all(v["reason"] == "Forbidden" for v in validations)


def test_queue_guard_binding_targets_only_the_tenant_namespace(tenant):
    spec = render_queue_guard_binding(tenant)["spec"]
    assert spec["validationActions"] == ["Deny"]
    assert spec["matchResources"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}


def test_controller_rbac_is_least_privilege():
    objects = ctl.render_controller_rbac(ControllerSpec())
    cluster_role = next(o for o in objects if o["kind"] == "ClusterRole")
    assert wildcard_rules(cluster_role) == []
    resources = {r for rule in cluster_role["rules"] for r in rule["resources"]}
    assert {"trainjobs", "trainjobs/status", "jobsets", "podgroups", "queues", "priorityclasses"} <= resources
    assert "leases" not in resources  # leases only in its own namespace
    lease_role = next(o for o in objects if o["kind"] == "Role")
    assert lease_role["metadata"]["namespace"] == "trainyard-system"


def test_controller_deployment_runs_the_cli_with_config_image_and_replicas():
    deployment = ctl.render_controller_deployment(ControllerSpec(image="img@sha256:x", replicas=3))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 3 and container["image"] == "img@sha256:x"
    assert container["command"][:3] == ["trainyard", "controller", "run"]
    # a rollout's stopping pod answers webhook calls until routing has forgotten it, then stops within its grace
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": ctl.DRAIN_SECONDS}}
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > ctl.DRAIN_SECONDS


@pytest.mark.parametrize("seconds", [60, -1, 0])
def test_the_controller_deletes_evicted_pods_of_lost_nodes_after_the_stacks_delay(seconds):
    spec = ControllerSpec(node_loss_release_after_seconds=seconds)
    command = ctl.render_controller_deployment(spec)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"--node-loss-release-after={seconds}" in command


def test_webhook_url_mode_for_local_and_service_mode_in_cluster():
    local = ctl.render_controller_webhook(ControllerSpec(webhook=WebhookSpec(url="https://127.0.0.1:26431")), "PEM")
    assert local["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:26431/")
    incluster = ctl.render_controller_webhook(ControllerSpec(webhook=WebhookSpec(certificate="cert-manager")))
    assert incluster["webhooks"][0]["clientConfig"]["service"]["name"] == "trainyard-controller-webhook"
    assert "cert-manager.io/inject-ca-from" in incluster["metadata"]["annotations"]
    assert "caBundle" not in incluster["webhooks"][0]["clientConfig"], "cert-manager injects it"


@pytest.mark.parametrize("source,objects", [("cert-manager", ["Issuer", "Certificate"]), ("provided", [])])
def test_certificate_source_decides_what_the_stack_creates(source, objects):
    spec = ControllerSpec(webhook=WebhookSpec(certificate=source, ca_bundle_file="/ca.crt" if source == "provided" else None))
    assert [o["kind"] for o in ctl.render_webhook_cert_request(spec)] == objects
    hook = ctl.render_controller_webhook(spec, "PEM" if source == "provided" else None)
    assert ("cert-manager.io/inject-ca-from" in hook["metadata"].get("annotations", {})) is (source == "cert-manager")
    if source == "provided":
        assert hook["webhooks"][0]["clientConfig"]["caBundle"] == "UEVN"  # base64 of the given PEM


@pytest.mark.parametrize("replicas,pdbs", [(1, 0), (2, 1), (3, 1)])
def test_a_pod_disruption_budget_keeps_one_webhook_replica_through_drains(replicas, pdbs):
    budget = ctl.render_pod_disruption_budget(ControllerSpec(replicas=replicas))
    assert len(budget) == pdbs
    if budget:
        assert budget[0]["spec"] == {"minAvailable": 1,
                                     "selector": {"matchLabels": {"app.kubernetes.io/name": "trainyard-controller"}}}


def test_policy_pack_tenant_coverage_reports_missing_pieces(tenant):
    ns = objs.render_namespace(tenant, PolicySpec())
    t = lambda group_kind: f"kubernetes:{group_kind}"  # noqa: E731
    complete = [(t("core/v1:Namespace"), ns), (t("core/v1:ResourceQuota"), objs.render_resource_quota(tenant)),
                (t("scheduling.volcano.sh/v1beta1:Queue"), objs.render_tenant_queue(tenant)),
                (t("admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"), render_queue_guard_binding(tenant)),
                (t("admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"), render_gpu_pod_routing_binding(tenant))]
    complete += [(t("rbac.authorization.k8s.io/v1:" + o["kind"]), o) for o in render_tenant_rbac(tenant)]
    assert tenant_coverage_violations(complete) == []
    assert tenant_coverage_violations(complete[:1]) == [
        "tenant namespace team-a has no ResourceQuota on requests.nvidia.com/gpu",
        "tenant namespace team-a has no RoleBinding", "tenant team-a has no Volcano Queue",
        "tenant team-a has no queue-guard ValidatingAdmissionPolicyBinding",
        "tenant team-a has no GPU-pod routing MutatingAdmissionPolicyBinding"]


@pytest.mark.parametrize("sdk_namespace,creates_namespace", [("kubeflow-system", True), ("trainyard-system", False)])
def test_sdk_public_configmap_is_readable_by_every_authenticated_user(sdk_namespace, creates_namespace):
    objects = ctl.render_sdk_public_info(ControllerSpec(sdk_namespace=sdk_namespace))
    assert [o["kind"] == "Namespace" for o in objects].count(True) == int(creates_namespace)
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    assert configmap["metadata"] == {**configmap["metadata"], "name": "kubeflow-trainer-public", "namespace": sdk_namespace}
    assert configmap["data"] == {"kubeflow_trainer_version": "v2.3.0"}
    role = next(o for o in objects if o["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubeflow-trainer-public"],
                              "verbs": ["get", "list", "watch"]}]
    binding = next(o for o in objects if o["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == "system:authenticated" and binding["roleRef"]["name"] == role["metadata"]["name"]


@pytest.mark.parametrize("gates,status_server", [("", False), ("TrainJobStatus=true", True), ("TrainJobStatus=false", False)])
def test_trainjob_status_gate_adds_server_port_flags_and_token_reviews(gates, status_server):
    spec = ControllerSpec(namespace="trainyard-system", feature_gates=gates)
    container = ctl.render_controller_deployment(spec)["spec"]["template"]["spec"]["containers"][0]
    flags = [a for a in container["command"] if a.startswith("--status-")]
    assert bool(flags) is status_server
    if status_server:
        assert "--status-url=https://trainyard-controller-webhook.trainyard-system.svc:10443" in flags
        assert {"name": "status", "containerPort": 10443} in container["ports"]
    webhook_service = next(s for s in ctl.render_controller_services(spec) if s["metadata"]["name"].endswith("-webhook"))
    assert any(p["name"] == "status" for p in webhook_service["spec"]["ports"]) is status_server
    cluster_role = next(o for o in ctl.render_controller_rbac(spec) if o["kind"] == "ClusterRole")
    granted = any("tokenreviews" in rule["resources"] for rule in cluster_role["rules"])
    assert granted is status_server, "token reviews only when the status server runs"


def test_only_the_controller_or_an_admin_may_change_a_trainjobs_podgroup_scheduling_fields():
    policy = render_queue_guard_policy("system:serviceaccount:ops:trainyard-controller")
    (rule, status_rule) = [v for v in policy["spec"]["validations"] if "oldObject" in v["expression"]]
    for fragment in ("request.userInfo.username in ['system:serviceaccount:ops:trainyard-controller']",
                     "g == 'system:masters'", "r.kind == 'TrainJob'", "request.operation != 'UPDATE'",
                     *(f"object.spec.?{f}.orValue" for f in ("queue", "priorityClassName", "minMember", "minResources",
                                                              "networkTopology"))):
        assert fragment in rule["expression"], fragment
    assert "edit the TrainJob" in rule["messageExpression"]
    for fragment in ("'system:serviceaccount:ops:trainyard-controller', 'system:serviceaccount:volcano-system:volcano-scheduler'",
                     "object.?status.orValue({}) == oldObject.?status.orValue({})", "g == 'system:masters'"):
        assert fragment in status_rule["expression"], fragment
    assert "written by Volcano only" in status_rule["messageExpression"]


@pytest.mark.parametrize("metrics, flags, reviews", [
    (MetricsSpec(), ["--metrics-secure"], set()),
    (MetricsSpec(secure_serving=False), [], set()),
    (MetricsSpec(auth=True), ["--metrics-secure", "--metrics-auth"], {"tokenreviews", "subjectaccessreviews"}),
])
def test_metrics_are_served_as_upstream_v2_4_with_the_reviews_and_reader_role_auth_needs(metrics, flags, reviews):
    spec = ControllerSpec(metrics=metrics)
    command = ctl.render_controller_deployment(spec)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert [a for a in command if a in ("--metrics-secure", "--metrics-auth")] == flags
    objects = ctl.render_controller_rbac(spec)
    controller_role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == ctl.NAME)
    granted = {r for rule in controller_role["rules"] for r in rule["resources"]} & {"tokenreviews", "subjectaccessreviews"}
    assert granted == reviews
    readers = [o for o in objects if o["metadata"]["name"] == ctl.METRICS_READER]
    assert readers == ([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": ctl.METRICS_READER, "labels": ctl.PART_OF},
                         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}] if metrics.auth else [])
