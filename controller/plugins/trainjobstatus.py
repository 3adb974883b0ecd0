"""TrainJobStatus plugin (upstream v2.3, alpha, behind the `TrainJobStatus` feature gate).

Training code reports progress and metrics to the controller's status server, which writes them to
`status.trainerStatus`. Every container of the trainer pod set gets the server URL and the paths of
a CA certificate and of a projected service-account token whose audience names this TrainJob; the
CA comes from ConfigMap `<trainjob>-tls-config`. The Kubeflow SDK's `update_trainjob_status()` reads
exactly these variables.
"""

from __future__ import annotations


from trainyard.k8s import TRAINER_API_VERSION, TRAINER_GROUP, TRAINJOBS

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from .framework import Context

FEATURE_GATE = "TrainJobStatus"
ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_FILE, TOKEN_FILE = "ca.crt", "token"
TOKEN_VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
AUDIENCE_PREFIX = TRAINER_GROUP


def status_path(namespace: str, name: str) -> str:
    return f"/apis/{TRAINER_API_VERSION}/namespaces/{namespace}/{TRAINJOBS}/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    return f"{AUDIENCE_PREFIX}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def tls_config_map_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-tls-config"


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    config = ctx.status_server
    if config is None:
        return
    namespace = k8s.namespace_of(info.trainjob)
    env = [k8s.env_value(ENV_URL, config.base_url.rstrip("/") + status_path(namespace, info.name)),
           k8s.env_value(ENV_CA_CERT, f"{MOUNT_PATH}/{CA_FILE}"),
           k8s.env_value(ENV_TOKEN, f"{MOUNT_PATH}/{TOKEN_FILE}")]
    mount = {"name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    volume = {"name": TOKEN_VOLUME, "projected": {"sources": [
        {"serviceAccountToken": {"audience": token_audience(namespace, info.name),
                                 "expirationSeconds": TOKEN_EXPIRY_SECONDS, "path": TOKEN_FILE}},
        {"configMap": {"name": tls_config_map_name(info.name), "items": [{"key": CA_FILE, "path": CA_FILE}]}},
    ]}}
    job = k8s.job_to_edit_by_ancestor(info.spec, C.ANCESTOR_TRAINER)
    if job is None:
        return
    pod = k8s.pod_spec(job)
    for container in pod.get("containers") or []:
        k8s.upsert_env(container, env)
        k8s.upsert(container.setdefault("volumeMounts", []), [mount], "mountPath")
    k8s.upsert(pod.setdefault("volumes", []), [volume], "name")


def build(info: RuntimeInfo, ctx: Context) -> None:
    config = ctx.status_server
    if config is None:
        return
    info.config_maps.append({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": k8s.object_meta(tls_config_map_name(info.name), info.trainjob),
                             "data": {CA_FILE: config.ca_pem}})
