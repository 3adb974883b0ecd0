"""The local cluster's usage record: kube-state-metrics and Prometheus, built from their pinned modules.

kube-state-metrics turns the API server's pods, namespaces and quotas into series (a pod's GPU requests, its phase,
its node, the labels that tie it to a JobSet and a tenant); Prometheus scrapes it, Volcano's scheduler and
trainyard's controller every 15 s, keeps 30 days under ~/.cache/trainyard/usage/<cluster>/ (outside the cluster's
directory: a restart of Prometheus, or `make down` then `make up`, loses nothing already written), and records
the GPUs each running pod, tenant and TrainJob holds (`recording_rules`), from which GPU-hours are an integral.
A pod that runs for less than a scrape interval may fall between two samples: short jobs are under-counted.
The configuration is built here as plain dicts; `start` runs the two processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import yaml

from trainyard import k8s as K
from trainyard.cluster.processes import ProcessSpec, ProcessTable, wait_for_port
from trainyard.cluster.state import ClusterError
from trainyard.paths import cache_dir
from trainyard.toolchain.versions import tool

SCRAPE_INTERVAL_S = 15
RETENTION = "30d"
GPU_METRIC_RESOURCE = K.GPU_RESOURCE.replace(".", "_").replace("/", "_")
"""kube-state-metrics writes a resource name with `.` and `/` as `_` (nvidia.com/gpu: nvidia_com_gpu)."""

POD_LABELS = ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name")
NAMESPACE_LABELS = (K.TENANT_LABEL, K.NAMESPACE_QUEUE_LABEL, K.CATALOG_VERSION_LABEL)
KSM_RESOURCES = ("pods", "namespaces", "nodes", "resourcequotas")


def selection_args(trainjob_config: Path | str) -> list[str]:
    """What kube-state-metrics watches and exports for the usage record, wherever it runs: the resources, the object
    labels and annotations it turns into series labels (allowlisted), and the TrainJob/Queue/PodGroup metrics."""
    allow = f"pods=[{','.join(POD_LABELS)}],namespaces=[{','.join(NAMESPACE_LABELS)}]"
    return [f"--resources={','.join(KSM_RESOURCES)}", f"--metric-labels-allowlist={allow}",
            f"--metric-annotations-allowlist=namespaces=[{K.NAMESPACE_BUDGET_ANNOTATION}]",  # usage's forecast
            f"--custom-resource-state-config-file={trainjob_config}"]


def kube_state_metrics_args(kubeconfig: Path, port: int, telemetry_port: int, trainjob_config: Path) -> list[str]:
    """The local cluster's kube-state-metrics: on loopback, with the cluster's kubeconfig."""
    return [f"--kubeconfig={kubeconfig}", "--host=127.0.0.1", f"--port={port}", "--telemetry-host=127.0.0.1",
            f"--telemetry-port={telemetry_port}", *selection_args(trainjob_config)]


IN_CLUSTER_CRS_PATH = "/etc/trainyard/kube-state-metrics-custom-resources.yaml"


def external_files() -> dict[str, str]:
    """What a platform's own Prometheus and kube-state-metrics need to carry the usage record (dev/prod stacks point
    the controller at it with `controller.prometheusUrl`): file name -> text."""
    rbac = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "trainyard-usage-kube-state-metrics"},
            "rules": [{"apiGroups": [K.TRAINER_GROUP], "resources": [K.TRAINJOBS], "verbs": ["list", "watch"]},
                      {"apiGroups": [K.VOLCANO_GROUP], "resources": [K.QUEUES, K.PODGROUPS],
                       "verbs": ["list", "watch"]},
                      {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                       "verbs": ["list", "watch"]}]}
    flags = "\n".join(selection_args(IN_CLUSTER_CRS_PATH))
    return {
        "kube-state-metrics-custom-resources.yaml": yaml.safe_dump(trainjob_metrics(), sort_keys=False),
        "kube-state-metrics-flags.txt": f"# add to kube-state-metrics' arguments (mount the custom-resources file "
                                        f"at {IN_CLUSTER_CRS_PATH})\n{flags}\n",
        "kube-state-metrics-clusterrole.yaml": "# bind it to kube-state-metrics' ServiceAccount beside its own role\n"
                                               + yaml.safe_dump(rbac, sort_keys=False),
        "prometheus-rules.yaml": "# add to Prometheus' rule_files; it must scrape kube-state-metrics every "
                                 f"{SCRAPE_INTERVAL_S} s or less\n" + yaml.safe_dump(recording_rules(), sort_keys=False),
    }


TRAINJOB_PREFIX = "trainyard_trainjob"
QUEUE_PREFIX = "trainyard_queue"


def trainjob_metrics() -> dict:
    """kube-state-metrics' custom-resource metrics of TrainJobs and Volcano queues.

    `trainyard_trainjob_info` (runtime, its kind, the priority class the TrainJob selected), `_created` (unix
    seconds), `_condition` (type, reason; 1 True) and `_condition_time` (when it last changed); per queue
    `trainyard_queue_weight`, `_deserved_gpus` and `_capability_gpus`: the entitlement as it was at each moment."""
    return {"kind": "CustomResourceStateMetrics", "spec": {"resources": [trainjob_resource(), queue_resource(),
                                                                         podgroup_resource()]}}


def trainjob_resource() -> dict:
    conditions = {"path": ["status", "conditions"], "labelsFromPath": {"type": ["type"], "reason": ["reason"]}}
    return {
        "groupVersionKind": {"group": K.TRAINER_GROUP, "version": K.TRAINER_VERSION, "kind": "TrainJob"},
        "metricNamePrefix": TRAINJOB_PREFIX,
        "labelsFromPath": {"namespace": ["metadata", "namespace"], "trainjob": ["metadata", "name"]},
        "metrics": [
            {"name": "info", "help": "A TrainJob's runtime and the priority class it selected",
             "each": {"type": "Info", "info": {"labelsFromPath": {
                 "runtime": ["spec", "runtimeRef", "name"], "runtime_kind": ["spec", "runtimeRef", "kind"],
                 "priority_class": ["metadata", "labels", K.PRIORITY_CLASS_LABEL]}}}},
            {"name": "created", "help": "When the TrainJob was created (unix seconds)",
             "each": {"type": "Gauge", "gauge": {"path": ["metadata"], "valueFrom": ["creationTimestamp"]}}},
            {"name": "condition", "help": "The TrainJob's status conditions (1: True)",
             "each": {"type": "Gauge", "gauge": {**conditions, "valueFrom": ["status"]}}},
            {"name": "condition_time", "help": "When each status condition last changed (unix seconds)",
             "each": {"type": "Gauge", "gauge": {**conditions, "valueFrom": ["lastTransitionTime"]}}},
        ]}


PODGROUP_PREFIX = "trainyard_podgroup"


def podgroup_resource() -> dict:
    return {
        "groupVersionKind": {"group": K.VOLCANO_GROUP, "version": K.VOLCANO_VERSION, "kind": "PodGroup"},
        "metricNamePrefix": PODGROUP_PREFIX,
        "labelsFromPath": {"namespace": ["metadata", "namespace"], "podgroup": ["metadata", "name"],
                           "queue": ["spec", "queue"]},
        "metrics": [{"name": "min_gpus", "help": "The GPUs the PodGroup's gang asks for (spec.minResources)",
                     "each": {"type": "Gauge", "gauge": {"path": ["spec", "minResources"],
                                                         "valueFrom": [K.GPU_RESOURCE]}}}]}


def queue_resource() -> dict:
    gpu = ["spec", "{field}", K.GPU_RESOURCE]
    return {
        "groupVersionKind": {"group": K.VOLCANO_GROUP, "version": K.VOLCANO_VERSION, "kind": "Queue"},
        "metricNamePrefix": QUEUE_PREFIX,
        "labelsFromPath": {"queue": ["metadata", "name"]},
        "metrics": [
            {"name": "weight", "help": "The queue's weight",
             "each": {"type": "Gauge", "gauge": {"path": ["spec"], "valueFrom": ["weight"]}}},
            *({"name": f"{field}_gpus", "help": f"The queue's {field} GPUs",
               "each": {"type": "Gauge", "gauge": {"path": [p.format(field=field) for p in gpu[:-1]],
                                                   "valueFrom": [gpu[-1]]}}}
              for field in ("deserved", "capability")),
        ]}


def scrape_targets(ports) -> dict[str, int]:
    """Job name -> loopback port of what Prometheus scrapes on the local cluster."""
    return {"kube-state-metrics": ports.port("kube_state_metrics"),
            "volcano-scheduler": ports.port("volcano_scheduler_metrics"),
            "trainyard-controller": ports.port("controller_metrics")}


def prometheus_config(targets: dict[str, int], rules_file: Path) -> dict:
    return {"global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "evaluation_interval": f"{SCRAPE_INTERVAL_S}s"},
            "rule_files": [str(rules_file)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                               for job, port in targets.items()]}


POD_GPUS = "trainyard:pod_gpus:allocated"
TENANT_GPUS = "trainyard:namespace_gpus:allocated"
TRAINJOB_GPUS = "trainyard:trainjob_gpus:allocated"
QUEUE_ENTITLED = "trainyard:queue_gpus:entitled"


def series_label(object_label: str) -> str:
    """The series label kube-state-metrics makes of an object label (`trainyard.dev/queue`: label_trainyard_dev_queue)."""
    return "label_" + _sanitised(object_label)


def annotation_label(annotation: str) -> str:
    """The series label kube-state-metrics makes of an allow-listed annotation (`annotation_trainyard_dev_budget`)."""
    return "annotation_" + _sanitised(annotation)


def _sanitised(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def entitlement_rule() -> str:
    """The GPUs each tenant queue is entitled to: its `deserved` GPUs where it sets them, else its weight's share of
    the cluster's allocatable GPUs among the queues tenant namespaces use (Volcano's own `default` queue and queues
    no tenant uses are not owed a share). What a tenant holds above it is borrowed."""
    queue = series_label(K.NAMESPACE_QUEUE_LABEL)
    tenant_queues = (f'max by (queue) (label_replace(kube_namespace_labels{{{queue}!=""}}, '
                     f'"queue", "$1", "{queue}", "(.+)"))')
    weights = f"(max by (queue) ({QUEUE_PREFIX}_weight) * on (queue) {tenant_queues})"
    cluster_gpus = f'sum(kube_node_status_allocatable{{resource="{GPU_METRIC_RESOURCE}"}})'
    return (f"(max by (queue) ({QUEUE_PREFIX}_deserved_gpus) * on (queue) {tenant_queues}) "
            f"or ({weights} / scalar(sum({weights})) * scalar({cluster_gpus}))")


def plain_series(metric: str, *matchers: str) -> str:
    """`metric{a="b",c=~"d"}` from the matchers given (none: the bare metric name)."""
    given = [m for m in matchers if m]
    return f"{metric}{{{','.join(given)}}}" if given else metric


SIDECAR_MATCHER = 'restart_policy="Always"'


def held_gpus(by: str, series: Callable[..., str] = plain_series) -> str:
    """PromQL: the GPUs each pod holds, summed `by` these labels. Its containers' requests plus its native sidecars'
    (init containers with restartPolicy Always run beside them for the pod's life), or its largest other init
    container's when that is more (those run one at a time before the containers, holding what they ask).
    `series(metric, *matchers)` makes each series selector (a usage window wraps it in `last_over_time`)."""
    gpu = f'resource="{GPU_METRIC_RESOURCE}"'
    regular = f"max by ({by}, container) ({series('kube_pod_container_resource_requests', gpu)})"
    init = f"max by ({by}, container) ({series('kube_pod_init_container_resource_requests', gpu)})"
    sidecar = f"max by ({by}, container) ({series('kube_pod_init_container_info', SIDECAR_MATCHER)})"
    beside = f'label_replace(sum by ({by}) ({regular} or ({init} * on ({by}, container) {sidecar})), "part", "beside", "", "")'
    before = f'label_replace(max by ({by}) ({init} unless on ({by}, container) {sidecar}), "part", "before", "", "")'
    return f"max by ({by}) ({beside} or {before})"


def recording_rules() -> dict:
    """GPUs held by each running pod (`held_gpus`, while its phase is Running and its node is Ready: a lost node's
    pods still say Running, but hold nothing), by namespace (a
    tenant's, with its queue and pinned catalog release), and by TrainJob (its JobSet's pods) with tenant, queue,
    priority class, runtime and catalog release; GPU-hours are their integral over time. Also each tenant queue's
    entitlement (`entitlement_rule`), so usage can split what was held within it from what was borrowed."""
    requests = held_gpus("namespace, pod")
    running = 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"}) == 1'
    on_ready_node = ('max by (namespace, pod) (kube_pod_info * on (node) group_left () '
                     'max by (node) (kube_node_status_condition{condition="Ready",status="true"})) == 1')
    queue, release = series_label(K.NAMESPACE_QUEUE_LABEL), series_label(K.CATALOG_VERSION_LABEL)
    jobset = series_label(POD_LABELS[0])
    tenant = f"max by (namespace, {queue}, {release}) (kube_namespace_labels)"
    per_trainjob = (
        f'sum by (namespace, trainjob, priority_class) (label_replace({POD_GPUS} * on (namespace, pod) '
        f'group_left ({jobset}) kube_pod_labels{{{jobset}!=""}}, "trainjob", "$1", "{jobset}", "(.+)") '
        f"* on (namespace, pod) group_left (priority_class) max by (namespace, pod, priority_class) (kube_pod_info))")
    return {"groups": [{"name": "trainyard-usage", "interval": f"{SCRAPE_INTERVAL_S}s", "rules": [
        {"record": POD_GPUS, "expr": f"{requests} * on (namespace, pod) ({running}) * on (namespace, pod) ({on_ready_node})"},
        {"record": TENANT_GPUS,
         "expr": f"sum by (namespace) ({POD_GPUS}) * on (namespace) group_left ({queue}, {release}) {tenant}"},
        {"record": TRAINJOB_GPUS,
         "expr": f"{per_trainjob} * on (namespace) group_left ({queue}, {release}) {tenant} "
                 f"* on (namespace, trainjob) group_left (runtime) "
                 f"max by (namespace, trainjob, runtime) ({TRAINJOB_PREFIX}_info)"},
        {"record": QUEUE_ENTITLED, "expr": entitlement_rule()},
    ]}]}


def prometheus_args(config_file: Path, data_dir: Path, port: int) -> list[str]:
    return [f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
            f"--storage.tsdb.retention.time={RETENTION}", f"--web.listen-address=127.0.0.1:{port}",
            "--enable-feature=promql-experimental-functions"]  # ts_of_last_over_time: when a pod's series ended


def data_dir(cluster_name: str) -> Path:
    """Where the cluster's Prometheus keeps its series: outside the cluster's directory, which `down` removes."""
    return cache_dir() / "usage" / cluster_name / "prometheus"


def write_files(root: Path, ports) -> Path:
    """The configuration and rules files under the cluster's directory; returns the configuration's path."""
    directory = root / "prometheus"
    directory.mkdir(parents=True, exist_ok=True)
    rules = directory / "rules.yaml"
    rules.write_text(yaml.safe_dump(recording_rules(), sort_keys=False))
    (directory / "trainjob-metrics.yaml").write_text(yaml.safe_dump(trainjob_metrics(), sort_keys=False))
    config = directory / "prometheus.yaml"
    config.write_text(yaml.safe_dump(prometheus_config(scrape_targets(ports), rules), sort_keys=False))
    return config


def start(name: str, paths, ports, table: ProcessTable, echo: Callable[[str], None]) -> None:
    """Run kube-state-metrics and Prometheus beside the cluster (their data stays across restarts)."""
    echo("starting kube-state-metrics and Prometheus (the usage record)")
    ksm = tool("kube-state-metrics").path("kube-state-metrics")
    config = write_files(paths.root, ports)
    table.start(ProcessSpec("kube-state-metrics", [str(ksm), *kube_state_metrics_args(
        paths.kubeconfig, ports.port("kube_state_metrics"), ports.port("kube_state_metrics_telemetry"),
        config.parent / "trainjob-metrics.yaml")]))
    table.start(ProcessSpec("prometheus", [str(tool("prometheus").path("prometheus")),
                                           *prometheus_args(config, data_dir(name), ports.port("prometheus"))]))
    for name in ("kube-state-metrics", "prometheus"):
        port = ports.port("kube_state_metrics" if name == "kube-state-metrics" else "prometheus")
        if not wait_for_port(port, 60, lambda n=name: n in table.running()):
            raise ClusterError(f"{name} did not start; see {table.log_dir / (name + '.log')}")

