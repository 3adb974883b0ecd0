"""trainyard's TrainJob controller as plain objects: namespace, least-privilege RBAC, Deployment,
metrics Service and the admission registration (service mode in-cluster, URL mode locally)."""

from __future__ import annotations

import base64

from trainyard import k8s as K
from trainyard.controller.webhook_configuration import webhook_configuration
from trainyard.k8s import part_of_trainyard
from trainyard.platform.stack_config import ControllerSpec
from trainyard.toolchain.versions import tool

NAME = K.CONTROLLER_NAME
PART_OF = {**part_of_trainyard(), "app.kubernetes.io/name": NAME}
CERT_SECRET = "trainyard-webhook-cert"
CLIENT_CA_CONFIGMAP, CLIENT_CA_DIR = "trainyard-webhook-client-ca", "/webhook-client-ca"
READ = ["get", "list", "watch"]
MANAGE = READ + ["create", "update", "patch", "delete"]


def controller_cluster_rules() -> list[dict]:
    """Exactly what the reconciler and webhook touch; no wildcards."""
    trainer = K.TRAINER_GROUP
    return [
        {"apiGroups": [trainer], "resources": ["trainjobs"], "verbs": READ + ["update", "patch"]},
        {"apiGroups": [trainer], "resources": ["trainjobs/status"], "verbs": ["get", "update", "patch"]},
        {"apiGroups": [trainer], "resources": ["trainjobs/finalizers"], "verbs": ["update"]},
        {"apiGroups": [trainer], "resources": ["trainingruntimes", "clustertrainingruntimes"], "verbs": READ},
        {"apiGroups": [K.JOBSET_GROUP], "resources": [K.JOBSETS], "verbs": MANAGE},
        {"apiGroups": [K.VOLCANO_GROUP], "resources": [K.PODGROUPS], "verbs": MANAGE},
        {"apiGroups": [K.COSCHEDULING_GROUP], "resources": [K.PODGROUPS], "verbs": MANAGE},
        {"apiGroups": [K.VOLCANO_GROUP], "resources": [K.QUEUES], "verbs": READ},
        {"apiGroups": [K.SCHEDULING_GROUP], "resources": ["priorityclasses"], "verbs": READ},
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": MANAGE},
        # Tenant defaults and admission read the TrainJob's namespace (queue label, granted priority classes);
        # the quota check lists its ResourceQuotas so a gang beyond quota is reported on the TrainJob.
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": READ},  # tenant defaults, from an informer
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list", "watch"]},  # from an informer
        # list: PodGroup verdicts; watch: the Job controller's FailedCreate Events (pods the API server refuses)
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "list", "watch"]},
        # admission dry-runs the pods a TrainJob's Jobs will create (dryRun=All: nothing is stored; creating
        # JobSets already lets the controller have any pod made); a refused pod's Job is read before the
        # TrainJob is failed for it (pod_refusals.py)
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        # a TrainJob pod evicted from a lost node stays Terminating (no kubelet confirms it) and holds its gang's
        # Jobs in JobSet's foreground deletion: the node-loss loop deletes it for good (`capacity.node_loss`)
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
        # the GPUs a TrainJob's resourceClaimsPerNode give each node are its templates' (`controller/dra.py`)
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": ["get"]},
        # start estimates (`capacity.start_estimator`): what holds the GPUs and where
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]},
        {"apiGroups": [K.VOLCANO_TOPOLOGY_GROUP], "resources": ["hypernodes"], "verbs": ["list"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


DRAIN_SECONDS = 10
"""How long a stopping controller pod keeps serving (its preStop sleep) before it is sent SIGTERM."""
METRICS_READER = "trainyard-metrics-reader"
"""The ClusterRole a Prometheus' ServiceAccount is bound to, to scrape a controller whose /metrics has auth on."""


def _meta(name: str, namespace: str | None = None) -> dict:
    meta = {"name": name, "labels": dict(PART_OF)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def render_controller_rbac(spec: ControllerSpec) -> list[dict]:
    """ServiceAccount, ClusterRole + binding, and a Role for leader-election Leases in its own namespace."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": spec.namespace}]
    rbac = "rbac.authorization.k8s.io/v1"
    rules = controller_cluster_rules()
    if spec.trainjob_status or spec.metrics.auth:  # the status server and /metrics ask about callers' tokens
        rules.append({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]})
    if spec.metrics.auth:  # and /metrics whether the caller may get it
        rules.append({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]})
    if spec.stalled_log_after_minutes:  # the stall watch reads a stalled job's last log line
        rules.append({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
    if spec.prometheus_url or spec.stalled_after_minutes or spec.stalled_log_after_minutes:
        # the budget loop records each budget's status, the stall loop the namespace's stalled TrainJobs
        rules.append({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]})
    if spec.reclaim != "none" and spec.reclaim_holds:  # reclaim taints the freed nodes, tolerations for the gang
        rules.append({"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["patch"]})
    if spec.prometheus_url:  # the budget loop closes or opens the tenant's queue
        rules.append({"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]})
    reader = [{"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(METRICS_READER),
               "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}] if spec.metrics.auth else []
    return reader + [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, spec.namespace)},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(NAME), "rules": rules},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": _meta(NAME),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}, "subjects": subject},
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(f"{NAME}-leases", spec.namespace),
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": MANAGE}]},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta(f"{NAME}-leases", spec.namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-leases"},
         "subjects": subject},
    ]


def render_controller_namespace(spec: ControllerSpec) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": spec.namespace, "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "restricted"}}}


SDK_PUBLIC_CONFIGMAP = "kubeflow-trainer-public"
SDK_VERSION_KEY = "kubeflow_trainer_version"


def render_sdk_public_info(spec: ControllerSpec) -> list[dict]:
    """What the Kubeflow SDK reads before anything else: `kubeflow-trainer-public` with the Trainer version
    the platform reproduces, readable by every authenticated user (as upstream publishes it). Its
    namespace is created unless it is the controller's."""
    rbac = "rbac.authorization.k8s.io/v1"
    namespace = spec.sdk_namespace
    objects: list[dict] = []
    if namespace != spec.namespace:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": namespace, "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "restricted"}}})
    objects += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(SDK_PUBLIC_CONFIGMAP, namespace),
         "data": {SDK_VERSION_KEY: tool("kubeflow-trainer").version}},
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(SDK_PUBLIC_CONFIGMAP, namespace),
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [SDK_PUBLIC_CONFIGMAP],
                    "verbs": READ}]},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta(SDK_PUBLIC_CONFIGMAP, namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SDK_PUBLIC_CONFIGMAP},
         "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]},
    ]
    return objects


def render_controller_deployment(spec: ControllerSpec) -> dict:
    args = ["trainyard", "controller", "run", f"--lease-namespace={spec.namespace}",
            f"--metrics-address=0.0.0.0:{spec.metrics_port}", "--health-address=0.0.0.0:8081",
            f"--webhook-address=0.0.0.0:{spec.webhook_port}", "--cert-dir=/certs"]
    if spec.metrics.secure_serving:
        args.append("--metrics-secure")
    if spec.metrics.auth:
        args.append("--metrics-auth")
    ports = [{"name": "metrics", "containerPort": spec.metrics_port}, {"name": "webhook", "containerPort": spec.webhook_port}]
    if spec.feature_gates:
        args.append(f"--feature-gates={spec.feature_gates}")
    if spec.prometheus_url:
        args.append(f"--prometheus={spec.prometheus_url}")
    args += [f"--stalled-after={spec.stalled_after_minutes * 60}",
             f"--stalled-log-after={spec.stalled_log_after_minutes * 60}", f"--stalled-action={spec.stalled_action}"]
    args.append(f"--gang-start-timeout={spec.gang_start_timeout_seconds}")
    args.append(f"--node-loss-release-after={spec.node_loss_release_after_seconds}")
    if spec.reclaim != "none":
        args += [f"--reclaim={spec.reclaim}", "--reclaim-holds" if spec.reclaim_holds else "--no-reclaim-holds"]
    if spec.webhook.client_ca_file:  # only the API server's webhook client certificate is answered
        args.append(f"--webhook-client-ca={CLIENT_CA_DIR}/ca.crt")
    if spec.trainjob_status:  # same serving certificate and Service as the webhook, as upstream
        args += [f"--status-address=0.0.0.0:{spec.status_port}",
                 f"--status-url=https://{NAME}-webhook.{spec.namespace}.svc:{spec.status_port}"]
        ports.append({"name": "status", "containerPort": spec.status_port})
    selector = {"app.kubernetes.io/name": NAME}
    mounts = [{"name": "certs", "mountPath": "/certs", "readOnly": True}]
    volumes: list[dict] = [{"name": "certs", "secret": {"secretName": CERT_SECRET}}]
    if spec.webhook.client_ca_file:
        mounts.append({"name": "webhook-client-ca", "mountPath": CLIENT_CA_DIR, "readOnly": True})
        volumes.append({"name": "webhook-client-ca", "configMap": {"name": CLIENT_CA_CONFIGMAP}})
    container = {
        "name": "controller",
        "image": spec.image,
        "command": args,
        "ports": ports,
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
        # a pod told to stop keeps answering webhook calls while the Service's endpoints and every node's proxy
        # forget it: the API server never sends a call to a pod that is already gone
        "lifecycle": {"preStop": {"sleep": {"seconds": DRAIN_SECONDS}}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081}},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME, spec.namespace),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**PART_OF, **selector}},
                "spec": {"serviceAccountName": NAME, "containers": [container], "volumes": volumes,
                         "terminationGracePeriodSeconds": DRAIN_SECONDS + 20},
            },
        },
    }


def render_webhook_client_ca(spec: ControllerSpec, ca_pem: str | None) -> list[dict]:
    """The CA of the API server's webhook client certificate, for the Deployment to mount (service mode)."""
    if not spec.webhook.client_ca_file or ca_pem is None:
        return []
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CLIENT_CA_CONFIGMAP, spec.namespace),
             "data": {"ca.crt": ca_pem}}]


def render_controller_services(spec: ControllerSpec) -> list[dict]:
    selector = {"app.kubernetes.io/name": NAME}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(f"{NAME}-metrics", spec.namespace),
         "spec": {"selector": selector, "ports": [{"name": "metrics", "port": spec.metrics_port, "targetPort": "metrics"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(f"{NAME}-webhook", spec.namespace),
         "spec": {"selector": selector, "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook"}] + (
             [{"name": "status", "port": spec.status_port, "targetPort": "status"}] if spec.trainjob_status else [])}},
    ]


def render_pod_disruption_budget(spec: ControllerSpec) -> list[dict]:
    """With two or more replicas a drain keeps one: the webhook (failurePolicy Fail) must stay reachable."""
    if spec.replicas < 2:
        return []
    return [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(NAME, spec.namespace),
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}}]


def render_webhook_cert_request(spec: ControllerSpec) -> list[dict]:
    """In-cluster serving certificate via cert-manager (self-signed issuer), which also injects caBundle.
    Nothing for `certificate: provided`: the operator's Secret is used as is."""
    if spec.webhook.certificate != "cert-manager":
        return []
    dns = f"{NAME}-webhook.{spec.namespace}.svc"
    return [
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": _meta(f"{NAME}-selfsigned", spec.namespace),
         "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": _meta(CERT_SECRET, spec.namespace),
         "spec": {"secretName": CERT_SECRET, "dnsNames": [dns, f"{dns}.cluster.local"],
                  "issuerRef": {"name": f"{NAME}-selfsigned", "kind": "Issuer"}}},
    ]


def render_controller_webhook(spec: ControllerSpec, ca_pem: str | None = None) -> dict:
    """URL mode when the stack gives a URL (local processes); otherwise the Service, caBundle by cert-manager."""
    ca_b64 = base64.b64encode(ca_pem.encode()).decode() if ca_pem else ""
    if spec.webhook.url:
        obj = webhook_configuration(ca_b64, url=spec.webhook.url)
    else:
        obj = webhook_configuration(ca_b64, service={"name": f"{NAME}-webhook", "namespace": spec.namespace, "port": 443})
        if spec.webhook.certificate == "cert-manager":
            obj["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": f"{spec.namespace}/{CERT_SECRET}"}
        for hook in obj["webhooks"]:
            if not ca_b64:
                hook["clientConfig"].pop("caBundle", None)
    for hook in obj["webhooks"]:
        hook["failurePolicy"] = spec.webhook.failure_policy
    obj["metadata"]["labels"] = dict(PART_OF)
    return obj
