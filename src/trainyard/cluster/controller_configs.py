"""Configuration of the controllers a local cluster runs as processes beside it, and of their webhooks.

JobSet's manager, Kubeflow Trainer's own manager (`--trainjob-controller upstream`, the oracle), and the
admission webhook configurations that point the API server at such a local process by URL. Pure, like
`spec`: plain dicts the I/O side (`local`, `trainer_controllers`) writes and applies.
"""

from __future__ import annotations

import copy
from pathlib import Path

from trainyard.cluster.spec import ClusterSpec
from trainyard.controller.feature_gates import parse_feature_gates
from trainyard.k8s import JOBSET_GROUP, TRAINER_GROUP, config_api_version

UNREACHED_QPS = 100000  # "no client limit" for upstream's manager, whose configuration has no such value


def jobset_config(spec: ClusterSpec, cert_dir: Path) -> dict:
    """JobSet manager Configuration for running out of cluster: own certs, no leader election."""
    ports = spec.ports
    return {
        "apiVersion": config_api_version(JOBSET_GROUP),
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": ports.port("jobset_webhook"), "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.port('jobset_metrics')}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.port('jobset_health')}"},
    }


def trainer_config(spec: ClusterSpec) -> dict:
    """Kubeflow Trainer's manager Configuration for running it out of cluster (`--trainjob-controller upstream`).

    It reuses the controller_* ports (one TrainJob controller runs at a time). certManagement is off: the
    cert rotator would write a Secret in kubeflow-system and patch the webhook configurations for a
    Service. The API has no certDir: the webhook server reads $TMPDIR/k8s-webhook-server/serving-certs
    (see `trainer_cert_dir`). The status server (off, see `trainer_feature_gates`) has no host field.
    """
    ports = spec.ports
    return {
        "apiVersion": config_api_version(TRAINER_GROUP),
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"port": ports.port("controller_webhook"), "host": "127.0.0.1"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.port('controller_metrics')}", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.port('controller_health')}"},
        "statusServer": {"port": ports.port("controller_status")},
        "featureGates": trainer_feature_gates(spec),
        # Upstream validates qps >= 0 and has no "off": a limit no run reaches stands for none.
        "clientConnection": {"qps": spec.controller_qps if spec.controller_qps >= 0 else UNREACHED_QPS,
                             "burst": spec.controller_burst if spec.controller_qps >= 0 else UNREACHED_QPS},
    }


# Gates the upstream manager cannot run with out of cluster: TrainJobStatus starts a status server whose token
# authorizer reads the pod's /var/run/secrets/kubernetes.io/serviceaccount/token to discover the OIDC issuer
# (pkg/statusserver/auth.go) and the manager exits without it.
TRAINER_OUT_OF_CLUSTER_OFF = ("TrainJobStatus",)


def trainer_feature_gates(spec: ClusterSpec) -> dict[str, bool]:
    """The cluster's feature gates with those the out-of-cluster upstream manager cannot serve turned off."""
    gates = parse_feature_gates(spec.feature_gates)
    return {name: value and name not in TRAINER_OUT_OF_CLUSTER_OFF for name, value in gates.items()}


def trainer_cert_dir(tmp_dir: Path) -> Path:
    """The webhook server's certDir when the manager runs with TMPDIR=tmp_dir (controller-runtime's default)."""
    return tmp_dir / "k8s-webhook-server" / "serving-certs"


def json_patch(document: dict, operations: list[dict]) -> dict:
    """Apply RFC 6902 `add`/`replace` operations (what upstream's kustomize webhook patches use) to a copy."""
    out = copy.deepcopy(document)
    for op in operations:
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"unsupported patch operation {op['op']!r}")
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        target = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] == "add":
                target.insert(index, op["value"])
            else:
                target[index] = op["value"]
        else:
            target[last] = op["value"]
    return out


def trainer_webhook_configurations(manifests: list[dict], patches: dict[str, list[dict]], base_url: str,
                                   ca_bundle_b64: str) -> list[dict]:
    """Upstream's webhook configurations as its kustomization renders them (names, objectSelectors), with
    every clientConfig pointed at the local manager by URL. `patches` maps kind -> JSON patch operations."""
    return [url_webhook_configuration(json_patch(doc, patches.get(doc["kind"], [])), base_url, ca_bundle_b64)
            for doc in manifests]


def url_webhook_configuration(manifest: dict, base_url: str, ca_bundle_b64: str) -> dict:
    """Point a webhook configuration at a local process: Services have no endpoints here."""
    out = {
        "apiVersion": manifest["apiVersion"],
        "kind": manifest["kind"],
        "metadata": {"name": manifest["metadata"]["name"]},
        "webhooks": [],
    }
    for hook in manifest.get("webhooks", []):
        hook = dict(hook)
        service = (hook.get("clientConfig") or {}).get("service") or {}
        hook["clientConfig"] = {"url": base_url + service.get("path", "/"), "caBundle": ca_bundle_b64}
        out["webhooks"].append(hook)
    return out
